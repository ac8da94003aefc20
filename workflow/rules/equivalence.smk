rule equivalence:
    """Greedy outputs of kpad vs unpadded suffix at the same K on the first N measured prompts (float32).

    Holds a CPU slot and its GPUs like a run (kpadstudy.equivalence.check_cell), so it can go beside runs.
    """
    input:
        model="results/models/{model}",
        corpus="results/corpora/{corpus}.jsonl",
    output:
        "results/equivalence/{model}/{corpus}/K{k}.json",
    log:
        "results/logs/equivalence/{model}/{corpus}/K{k}.log",
    benchmark:
        "results/benchmarks/equivalence/{model}/{corpus}/K{k}.tsv"
    conda:
        "../../envs/vllm-gpu.yaml"
    threads: RUN_THREADS
    resources:
        gpu=lambda wc: gpus_per_run(wc.model),
    params:
        plugin_path=PLUGIN_PATH,
    script:
        "../scripts/check_equivalence.py"
