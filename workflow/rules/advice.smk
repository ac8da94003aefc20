rule recommendations:
    """Per cell the configuration to serve with and its exact server command line and environment."""
    input:
        cells=ANALYSIS_CELLS,
    output:
        report("results/recommendations.md", category="Tables", caption=caption("recommendations")),
    params:
        within_best=config["advice"]["within_best"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/recommendations.log",
    script:
        "../scripts/write_tables.py"
