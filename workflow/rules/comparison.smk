rule comparison:
    """Ours vs published, ratios only (bestKpad/suf, bestKpad/van) and best-K agreement: Parquet and markdown."""
    input:
        cells=ANALYSIS_CELLS,
        reference=REFERENCE_PARQUET,
    output:
        parquet="results/ours_vs_published.parquet",
        csv="results/ours_vs_published.csv",
        md=report("results/ours_vs_published.md", category="Tables", caption=caption("ours_vs_published_table")),
    log:
        "results/logs/comparison.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/write_tables.py"
