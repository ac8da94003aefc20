rule reference:
    """The published study's CSV -> a cells Parquet whose rows say source "published" (no vLLM needed)."""
    input:
        csv=REFERENCE_CSV,
    output:
        cells=REFERENCE_PARQUET,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/reference.log",
    script:
        "../scripts/build_reference.py"
