rule tables:
    """Run records -> runs.parquet (one row per run) and cells.parquet (median, MAD per configuration)."""
    input:
        all_runs(),
    output:
        runs="results/runs.parquet",
        cells="results/cells.parquet",
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/tables.log",
    script:
        "../scripts/aggregate.py"
