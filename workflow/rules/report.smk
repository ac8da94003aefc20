rule report_tables:
    """The cell table and the provenance (versions, hardware, commands, published source) as HTML for the report."""
    input:
        cells="results/cells.parquet",
        runs="results/runs.parquet",
        reference=REFERENCE_PARQUET,
    output:
        cells=report("results/report/cells.html", category="Tables", caption=caption("cells")),
        provenance=report("results/report/provenance.html", category="Provenance", caption=caption("provenance")),
    log:
        "results/logs/report_tables.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/write_tables.py"
