rule plan:
    """Before a long study: disk for the models, GPUs per run, boots, wall time (results/plan.md, printed).

    `snakemake plan --cores 1`; the Hub is asked for model sizes when reachable (else config size_gb, else unknown).
    """
    output:
        "results/plan.md",
    log:
        "results/logs/plan.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        measured=MEASURED_CORPORA,
    script:
        "../scripts/write_plan.py"
