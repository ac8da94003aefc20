# Confirmation of the K-sweep's best K (config `confirm`): the sweep's best kpad K is the max of noisy
# medians, so it is biased upward; van, suf, the best and second-best K, nopad at the best K and the best nopad
# K are measured again in their own interleaved repeats, apart from the sweep (kpadstudy.confirm).


checkpoint best_k:
    """One cell's best and second-best kpad K and its best nopad K, from that cell's sweep records only: a new or
    changed record re-plans the confirmation of its own cell, no other."""
    input:
        cell_runs,
    output:
        "results/confirm/{model}/{corpus}/best_k.json",
    log:
        "results/logs/best_k/{model}/{corpus}.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        repeats=CONFIRM["repeats"],
    script:
        "../scripts/confirm.py"


rule confirm_run:
    """One confirmation run: the run rule's script with paths under results/confirm/ (phase confirm)."""
    input:
        model="results/models/{model}",
        corpus="results/corpora/{corpus}.jsonl",
        best_k="results/confirm/{model}/{corpus}/best_k.json",
        previous=confirm_previous,
    output:
        "results/confirm/{model}/{corpus}/{configuration}/r{repeat}.json",
    log:
        server="results/logs/confirm/{model}/{corpus}/{configuration}/r{repeat}/server.log",
        client="results/logs/confirm/{model}/{corpus}/{configuration}/r{repeat}/client.log",
    benchmark:
        "results/benchmarks/confirm_run/{model}/{corpus}/{configuration}/r{repeat}.tsv"
    retries: RUN_ATTEMPTS  # killed jobs: RUN_ATTEMPTS measuring attempts, then one that records the run lost
    conda:
        "../../envs/vllm-gpu.yaml"
    threads: RUN_THREADS
    resources:
        gpu=lambda wc, attempt: 0 if attempt > RUN_ATTEMPTS else gpus_per_run(wc.model),
        attempt=lambda wc, attempt: attempt,
    params:
        plugin_path=PLUGIN_PATH,
    script:
        "../scripts/run_benchmark.py"


rule confirmed_table:
    """Confirmation runs -> results/confirmed.parquet (cells schema, phase confirm, the best K as method bestkpad),
    results/confirm/runs.parquet, the confirmation's own paired comparisons (results/confirm/paired.{parquet,md})
    the drift of the configurations both phases ran, confirmation over sweep (results/confirm/drift.parquet), and
    each comparison's confirmation vs sweep as a ratio of within-repeat ratios (results/confirm/confirm_vs_sweep.parquet).
    """
    input:
        runs=all_confirm_runs,
        best_k=expand("results/confirm/{cell}/best_k.json", cell=[f"{m}/{c}" for m in MODELS for c in MEASURED_CORPORA]),
        sweep="results/runs.parquet",
    output:
        cells="results/confirmed.parquet",
        runs="results/confirm/runs.parquet",
        paired="results/confirm/paired.parquet",
        paired_md="results/confirm/paired.md",
        drift="results/confirm/drift.parquet",
        confirm_vs_sweep="results/confirm/confirm_vs_sweep.parquet",
        csv=[
            "results/confirmed.csv",
            *expand("results/confirm/{table}.csv", table=["runs", "paired", "drift", "confirm_vs_sweep"]),
        ],
    log:
        "results/logs/confirmed_table.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"


rule analysis_cells:
    """The sweep's cells with the confirmation preferred: results/cells_final.parquet (read by figures and advice)."""
    input:
        cells="results/cells.parquet",
        confirmed="results/confirmed.parquet",
    output:
        "results/cells_final.parquet",
        "results/cells_final.csv",
    log:
        "results/logs/analysis_cells.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"
