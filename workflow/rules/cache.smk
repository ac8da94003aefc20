# Redraw from an existing cells Parquet (config cache): no vLLM, GPU or network.
rule figures_from_cache:
    """Every figure the cached cells allow (config cache.cells, cache.runs), PNG (in the report) and SVG."""
    input:
        **({"runs": CACHE["runs"]} if CACHE["runs"] else {}),
        cells=CACHE["cells"],
        reference=REFERENCE_PARQUET,
    output:
        [
            report(f"{CACHE['figures']}/{f}.png", category="Figures (from cache)", caption=caption(f))
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


rule from_cache:
    """Figures and tables from the cached cells (config cache)."""
    input:
        rules.figures_from_cache.output,
        rules.tables_from_cache.output,
