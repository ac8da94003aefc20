rule recommendations:
    """Per cell the configuration to serve with and its exact server command line and environment; the study's
    summary (results/summary.md, printed when the study ends)."""
    input:
        cells=ANALYSIS_CELLS,
        runs=["results/runs.parquet", *(["results/confirm/runs.parquet"] if CONFIRM["enabled"] else [])],
    output:
        md=report("results/recommendations.md", category="Tables", caption=caption("recommendations")),
        summary="results/summary.md",
    log:
        "results/logs/recommendations.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        within_best=config["advice"]["within_best"],
    script:
        "../scripts/write_tables.py"
