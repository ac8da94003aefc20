rule equivalence:
    """Greedy outputs of kpad vs unpadded suffix at the same K on the first N measured prompts (float32)."""
    input:
        model="results/models/{model}",
        corpus="results/corpora/{corpus}.jsonl",
    output:
        "results/equivalence/{model}/{corpus}/K{k}.json",
    params:
        plugin_path=PLUGIN_PATH,
    threads: workflow.cores
    resources:
        gpu=lambda wc: gpus_per_run(wc.model),
    conda:
        "../../envs/vllm-gpu.yaml"
    log:
        "results/logs/equivalence/{model}/{corpus}/K{k}.log",
    script:
        "../scripts/check_equivalence.py"
