rule tables:
    """Run records -> runs.parquet (one row per run) and cells.parquet (median, MAD per configuration)."""
    input:
        all_runs(),
    output:
        runs="results/runs.parquet",
        cells="results/cells.parquet",
    log:
        "results/logs/tables.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"


rule equivalence_table:
    """Equivalence checks -> results/equivalence.parquet (one row per model, corpus, K)."""
    input:
        all_equivalence_checks(),
    output:
        "results/equivalence.parquet",
    log:
        "results/logs/equivalence_table.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate_equivalence.py"
