rule figures:
    """Best-K heatmap and bestKpad over suf on the mix, as PNG and SVG."""
    input:
        cells="results/cells.parquet",
    output:
        expand("figures/{figure}.{ext}", figure=["best_k_heatmap", "bestkpad_over_suf"], ext=["png", "svg"]),
    params:
        mix=MIX,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/figures.log",
    script:
        "../scripts/draw_figures.py"
