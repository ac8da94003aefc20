rule tables:
    """Run records -> runs.parquet (one row per run), cells.parquet (median, MAD per configuration) and
    paired.parquet / paired.md (within-repeat ratios over repeats, with intervals) and drift.parquet."""
    input:
        all_runs(),
    output:
        runs="results/runs.parquet",
        cells="results/cells.parquet",
        paired="results/paired.parquet",
        paired_md="results/paired.md",
        drift="results/drift.parquet",
        csv=expand("results/{table}.csv", table=["runs", "cells", "paired", "drift"]),
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
        "results/equivalence.csv",
    log:
        "results/logs/equivalence_table.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate_equivalence.py"
