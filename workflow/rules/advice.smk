rule recommendations:
    """Per cell the configuration to serve with and its exact server command line and environment."""
    input:
        cells=ANALYSIS_CELLS,
        runs=["results/runs.parquet", *(["results/confirm/runs.parquet"] if CONFIRM["enabled"] else [])],
    output:
        report("results/recommendations.md", category="Tables", caption=caption("recommendations")),
    log:
        "results/logs/recommendations.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        within_best=config["advice"]["within_best"],
    script:
        "../scripts/write_tables.py"
