# Two studies of ours side by side (config studies; make compare-studies A=gpu B=cpu): no vLLM, GPU or network.
STUDIES = config["studies"]
STUDIES_OUT = os.path.normpath(STUDIES["out"])
STUDIES_FIGURES = os.path.normpath(STUDIES["figures"])
# the runs Parquet file(s) of each study as a list (one file, or the sweep's and the confirmation's)
STUDY_RUNS = {s: [STUDIES[s]["runs"]] if isinstance(STUDIES[s]["runs"], str) else STUDIES[s]["runs"] for s in "ab"}


rule compare_studies:
    """Study A vs study B (config studies), matched by cell and configuration: each study's within-repeat ratios
    with interval and n, B / A, tok/s beside (hardware speed); tables (Parquet, CSV, markdown) and a figure."""
    input:
        a_cells=STUDIES["a"]["cells"],
        a_runs=STUDY_RUNS["a"],
        b_cells=STUDIES["b"]["cells"],
        b_runs=STUDY_RUNS["b"],
    output:
        ratios=f"{STUDIES_OUT}/study_ratios.parquet",
        ratios_csv=f"{STUDIES_OUT}/study_ratios.csv",
        configurations=f"{STUDIES_OUT}/study_configurations.parquet",
        configurations_csv=f"{STUDIES_OUT}/study_configurations.csv",
        md=f"{STUDIES_OUT}/compare_studies.md",
        png=f"{STUDIES_FIGURES}/compare_studies.png",
        svg=f"{STUDIES_FIGURES}/compare_studies.svg",
    log:
        "results/logs/compare_studies.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        label_a=STUDIES["a"]["label"] or "A",
        label_b=STUDIES["b"]["label"] or "B",
        note=STUDIES["note"],
        out=lambda w, output: os.path.dirname(output.md),
        figures=lambda w, output: os.path.dirname(output.png),
    script:
        "../scripts/compare_studies.py"
