rule step_cost:
    """K-bar (tokens per request-step) against R (step-cost ratio to van), predicted vs measured speed-up."""
    input:
        runs="results/runs.parquet",
        cells="results/cells.parquet",
    output:
        parquet="results/step_cost.parquet",
        csv="results/step_cost.csv",
        md=report("results/step_cost.md", category="Tables", caption=caption("step_cost")),
    log:
        "results/logs/step_cost.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/write_tables.py"
