rule run:
    """One fresh vLLM server for one configuration: boot, warm up, measure, record, stop.

    A cell's runs are chained in the interleaved order (previous_run), so slow drift hits every
    configuration alike. A run takes all cores, so two servers never share CPUs.
    """
    input:
        model="results/models/{model}",
        corpus="results/corpora/{corpus}.jsonl",
        previous=previous_run,
    output:
        "results/runs/{model}/{corpus}/{configuration}/r{repeat}.json",
    conda:
        "../../envs/vllm-gpu.yaml"
    log:
        server="results/logs/runs/{model}/{corpus}/{configuration}/r{repeat}/server.log",
        client="results/logs/runs/{model}/{corpus}/{configuration}/r{repeat}/client.log",
    params:
        plugin_path=PLUGIN_PATH,
        commit=workflow_commit(),
    threads: workflow.cores
    resources:
        gpu=lambda wc: gpus_per_run(wc.model),
    script:
        "../scripts/run_benchmark.py"
