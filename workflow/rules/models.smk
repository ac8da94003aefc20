rule model:
    """Download (Hub), convert (packaged GGUF) or link (local) one model checkpoint."""
    input:
        local_checkpoint,
    output:
        directory("results/models/{model}"),
    log:
        "results/logs/models/{model}.log",
    benchmark:
        "results/benchmarks/model/{model}.tsv"
    wildcard_constraints:
        model=_alternatives(m for m in config["models"] if m not in WIDENED) or "$^",
    conda:
        "../../envs/vllm-gpu.yaml"
    params:
        spec=lambda wc: config["models"][wc.model],
    script:
        "../scripts/fetch_model.py"


rule widen_model:
    """A widened stand-in of another model entry (kpadstudy/widen.py), built on a GPU of the node when there is one."""
    input:
        base=lambda wc: f"results/models/{config['models'][wc.model]['base']}",
    output:
        directory("results/models/{model}"),
    log:
        "results/logs/models/{model}.log",
    benchmark:
        "results/benchmarks/model/{model}.tsv"
    wildcard_constraints:
        model=_alternatives(WIDENED) or "$^",
    conda:
        "../../envs/vllm-gpu.yaml"
    resources:
        gpu=lambda wc: int(config["device"] != "cpu"),
    params:
        spec=lambda wc: config["models"][wc.model],
    script:
        "../scripts/fetch_model.py"


rule tokenizer:
    """Only the tokenizer files of one model, to keep prompts that fit every model."""
    input:
        unpack(widen_base_tokenizer),
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
