rule figures:
    """Every figure of the study from results/cells.parquet (+ runs, + the published study), PNG (in the report) and SVG."""
    input:
        cells=ANALYSIS_CELLS,
        runs=["results/runs.parquet", *(["results/confirm/runs.parquet"] if CONFIRM["enabled"] else [])],
        reference=REFERENCE_PARQUET,
    output:
        [report(f"figures/{f}.png", category="Figures", caption=caption(f)) for f in FIGURES],
        expand("figures/{figure}.svg", figure=FIGURES),
    log:
        "results/logs/figures.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        mix=MIX if MIX in MEASURED_CORPORA else None,
        note="",
        out_dir=lambda w, output: os.path.dirname(output[0]),
    script:
        "../scripts/draw_figures.py"
