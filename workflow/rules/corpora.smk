rule corpus:
    """Read one corpus source, keep prompts that fit every model, sample warm-up + measured prompts."""
    input:
        tokenizers=expand("results/tokenizers/{model}", model=MODELS),
    output:
        "results/corpora/{corpus}.jsonl",
    log:
        "results/logs/corpora/{corpus}.log",
    benchmark:
        "results/benchmarks/corpus/{corpus}.tsv"
    wildcard_constraints:
        corpus=_alternatives(BASE_CORPORA),
    conda:
        "../../envs/analysis.yaml"
    params:
        spec=lambda wc: config["corpora"][wc.corpus],
        models=MODELS,
    script:
        "../scripts/build_corpus.py"
