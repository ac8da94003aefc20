rule timings:
    """Where the time went: wall time of the heavy jobs, each run's boot and measurement (results/timings.md, also printed)."""
    input:
        unpack(benchmark_files),
    output:
        "results/timings.md",
    log:
        "results/logs/timings.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/write_timings.py"
