rule model:
    """Download (Hub) or convert (packaged GGUF) one model checkpoint."""
    output:
        directory("results/models/{model}"),
    params:
        spec=lambda wc: config["models"][wc.model],
    conda:
        "../../envs/vllm-gpu.yaml"
    log:
        "results/logs/models/{model}.log",
    benchmark:
        "results/benchmarks/model/{model}.tsv"
    script:
        "../scripts/fetch_model.py"


rule tokenizer:
    """Only the tokenizer files of one model, to keep prompts that fit every model."""
    output:
        directory("results/tokenizers/{model}"),
    params:
        spec=lambda wc: config["models"][wc.model],
        tokenizer_only=True,
    conda:
        "../../envs/vllm-gpu.yaml"
    log:
        "results/logs/tokenizers/{model}.log",
    script:
        "../scripts/fetch_model.py"
