"""Rule model / tokenizer: materialize a model checkpoint or its tokenizer files."""

from _rule import setup_logging
from kpadstudy.models import fetch

setup_logging(snakemake.log[0])  # noqa: F821
fetch(
    snakemake.params.spec,  # noqa: F821
    snakemake.output[0],  # noqa: F821
    tokenizer_only=bool(snakemake.params.get("tokenizer_only", False)),  # noqa: F821
    base_dir=snakemake.input.get("base"),  # noqa: F821
    # a widening builds on a GPU of the node unless the study runs on the CPU
    node={**snakemake.config["node"], **({"gpus": []} if snakemake.config["device"] == "cpu" else {})},  # noqa: F821
)
