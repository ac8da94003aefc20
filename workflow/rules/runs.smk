rule run:
    """One fresh vLLM server for one configuration: boot, warm up, measure, record, stop.

    A cell's runs are chained in the interleaved order (previous_run), so slow drift hits every
    configuration alike. Threads = the CPUs of the taskset lists (RUN_THREADS); ports and GPUs are
    taken per run through lock files (kpadstudy.ports, kpadstudy.gpus), so runs can go side by side.
    """
    input:
        model="results/models/{model}",
        corpus="results/corpora/{corpus}.jsonl",
        previous=previous_run,
    output:
        "results/runs/{model}/{corpus}/{configuration}/r{repeat}.json",
    log:
        server="results/logs/runs/{model}/{corpus}/{configuration}/r{repeat}/server.log",
        client="results/logs/runs/{model}/{corpus}/{configuration}/r{repeat}/client.log",
    benchmark:
        "results/benchmarks/run/{model}/{corpus}/{configuration}/r{repeat}.tsv"
    priority: runs_after
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
