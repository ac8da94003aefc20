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


rule equivalence_table:
    """Equivalence checks -> results/equivalence.parquet (one row per model, corpus, K)."""
    input:
        all_equivalence_checks(),
    output:
        "results/equivalence.parquet",
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/equivalence_table.log",
    script:
        "../scripts/aggregate_equivalence.py"
