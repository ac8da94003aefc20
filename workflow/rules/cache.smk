# Redraw from an existing cells Parquet (config cache): no vLLM, GPU or network.
from kpadstudy import report as kreport  # noqa: E402


rule figures_from_cache:
    """Every figure the cached cells allow (config cache.cells, cache.runs), PNG (in the report) and SVG."""
    input:
        **({"runs": CACHE["runs"]} if CACHE["runs"] else {}),
        cells=CACHE["cells"],
        reference=REFERENCE_PARQUET,
    output:
        [
            report(f"{CACHE['figures']}/{f}.png", category="Figures", caption=caption(f), labels={"figure": f})
            for f in CACHE_FIGURES
        ],
        expand("{out}/{figure}.svg", out=CACHE["figures"], figure=CACHE_FIGURES),
    log:
        "results/logs/figures_from_cache.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        mix=CACHE["mix"],
        note=CACHE["note"],
        out_dir=lambda w, output: os.path.dirname(output[0]),
    script:
        "../scripts/draw_figures.py"


rule tables_from_cache:
    """Comparison, K-bar vs R and recommendations of the cached cells (config cache) into cache.tables."""
    input:
        **({"runs": CACHE["runs"]} if CACHE["runs"] else {}),
        cells=CACHE["cells"],
        reference=REFERENCE_PARQUET,
    output:
        comparison=f"{CACHE['tables']}/ours_vs_published.parquet",
        comparison_csv=f"{CACHE['tables']}/ours_vs_published.csv",
        comparison_md=f"{CACHE['tables']}/ours_vs_published.md",
        step_cost=f"{CACHE['tables']}/step_cost.parquet",
        step_cost_csv=f"{CACHE['tables']}/step_cost.csv",
        step_cost_md=f"{CACHE['tables']}/step_cost.md",
        recommendations=f"{CACHE['tables']}/recommendations.md",
        summary=f"{CACHE['tables']}/summary.md",
    log:
        "results/logs/tables_from_cache.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        within_best=config["advice"]["within_best"],
    script:
        "../scripts/write_tables.py"


# the report's table pages of this data set (kpadstudy.report.PAGES), under cache.tables/report/
CACHE_PAGES = kreport.pages(bool(CACHE["runs"]), bool(CACHE["equivalence"]), CACHE_PUBLISHED)


rule report_from_cache:
    """The tables of the cached data as report pages, each opening with its caption, and the landing text that
    names the data (workflow/report/workflow.rst shows it first): snakemake from_cache --report
    <cache.tables>/report.html."""
    input:
        **({"runs": CACHE["runs"]} if CACHE["runs"] else {}),
        **({"equivalence": CACHE["equivalence"]} if CACHE["equivalence"] else {}),
        cells=CACHE["cells"],
        reference=REFERENCE_PARQUET,
        summary=rules.tables_from_cache.output.summary,
        recommendations=rules.tables_from_cache.output.recommendations,
        step_cost=rules.tables_from_cache.output.step_cost_md,
        ours_vs_published=rules.tables_from_cache.output.comparison_md,
        figures=[f"{CACHE['figures']}/{f}.png" for f in CACHE_FIGURES],
    output:
        **{
            page: report(
                f"{CACHE['tables']}/report/{page}.html",
                category="Tables",
                caption=caption(kreport.PAGES[page][1]),
                labels={"table": kreport.PAGES[page][0]},
            )
            for page in CACHE_PAGES
        },
        landing=f"{CACHE['tables']}/report/landing.html",
    log:
        "results/logs/report_from_cache.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/write_tables.py"


rule step_model_from_cache:
    """The step-cost model of the cached runs (config cache.runs): its table in cache.tables, its figure in
    cache.figures."""
    input:
        runs=[CACHE["runs"]] if CACHE["runs"] else [],
    output:
        md=f"{CACHE['tables']}/step_model.md",
        csv=f"{CACHE['tables']}/step_model.csv",
        png=f"{CACHE['figures']}/step_model.png",
        svg=f"{CACHE['figures']}/step_model.svg",
    log:
        "results/logs/step_model_from_cache.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        fit_on=config["step_model"]["fit_on"],
        efficiency=config["step_model"]["efficiency"],
    script:
        "../scripts/write_step_model.py"


rule from_cache:
    """Figures, tables and the report pages from the cached cells (config cache)."""
    input:
        rules.figures_from_cache.output,
        rules.tables_from_cache.output,
        rules.report_from_cache.output,
        *([rules.step_model_from_cache.output] if CACHE["runs"] else []),
