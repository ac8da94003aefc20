rule model:
    """Download (Hub) or convert (packaged GGUF) one model checkpoint."""
    output:
        directory("results/models/{model}"),
    log:
        "results/logs/models/{model}.log",
    benchmark:
        "results/benchmarks/model/{model}.tsv"
    conda:
        "../../envs/vllm-gpu.yaml"
    params:
        spec=lambda wc: config["models"][wc.model],
    script:
        "../scripts/fetch_model.py"


rule tokenizer:
    """Only the tokenizer files of one model, to keep prompts that fit every model."""
    output:
        directory("results/tokenizers/{model}"),
    log:
        "results/logs/tokenizers/{model}.log",
    conda:
        "../../envs/vllm-gpu.yaml"
    params:
        spec=lambda wc: config["models"][wc.model],
        tokenizer_only=True,
    script:
        "../scripts/fetch_model.py"
