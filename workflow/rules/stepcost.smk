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


rule step_model:
    """Step-cost model: overheads fitted on one model's runs, kpad K / nopad K predicted per cell (kpadstudy/roofline.py)."""
    input:
        runs=["results/runs.parquet", *(["results/confirm/runs.parquet"] if CONFIRM["enabled"] else [])],
    output:
        md=report("results/step_model.md", category="Tables", caption=caption("step_model")),
        csv="results/step_model.csv",
        png=report("figures/step_model.png", category="Figures", caption=caption("step_model_figure")),
        svg="figures/step_model.svg",
    log:
        "results/logs/step_model.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        fit_on=config["step_model"]["fit_on"],
        efficiency=config["step_model"]["efficiency"],
    script:
        "../scripts/write_step_model.py"
