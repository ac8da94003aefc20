rule reference:
    """The published study's CSV -> a cells Parquet whose rows say source "published" (no vLLM needed)."""
    input:
        csv=REFERENCE_CSV,
    output:
        cells=REFERENCE_PARQUET,
    log:
        "results/logs/reference.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/build_reference.py"
