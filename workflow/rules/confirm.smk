# Confirmation of the K-sweep's best K (config `confirm`): the sweep's best kpad K is the max of noisy
# medians, so it is biased upward; van, suf and that K are measured again, apart from the sweep.


checkpoint best_k:
    """Per cell the sweep's best kpad K (highest median output tok/s): results/confirm/best_k.json."""
    input:
        "results/cells.parquet",
    output:
        "results/confirm/best_k.json",
    log:
        "results/logs/best_k.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        repeats=CONFIRM["repeats"],
        measured=MEASURED_CORPORA,
    script:
        "../scripts/confirm.py"


rule confirm_run:
    """One confirmation run: the run rule's script with paths under results/confirm/ (phase confirm)."""
    input:
        model="results/models/{model}",
        corpus="results/corpora/{corpus}.jsonl",
        best_k="results/confirm/best_k.json",
        previous=confirm_previous,
    output:
        "results/confirm/{model}/{corpus}/{configuration}/r{repeat}.json",
    log:
        server="results/logs/confirm/{model}/{corpus}/{configuration}/r{repeat}/server.log",
        client="results/logs/confirm/{model}/{corpus}/{configuration}/r{repeat}/client.log",
    benchmark:
        "results/benchmarks/confirm_run/{model}/{corpus}/{configuration}/r{repeat}.tsv"
    conda:
        "../../envs/vllm-gpu.yaml"
    threads: RUN_THREADS
    resources:
        gpu=lambda wc: gpus_per_run(wc.model),
    params:
        plugin_path=PLUGIN_PATH,
    script:
        "../scripts/run_benchmark.py"


rule confirmed_table:
    """Confirmation runs -> results/confirmed.parquet (cells schema, phase confirm, the best K as method bestkpad)."""
    input:
        all_confirm_runs,
    output:
        "results/confirmed.parquet",
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
    log:
        "results/logs/analysis_cells.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"
