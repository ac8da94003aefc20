"""Rule model / tokenizer: materialize a model checkpoint or its tokenizer files."""

from _rule import setup_logging
from kpadstudy.models import fetch

setup_logging(snakemake.log[0])  # noqa: F821
fetch(snakemake.params.spec, snakemake.output[0], tokenizer_only=bool(snakemake.params.get("tokenizer_only", False)))  # noqa: F821
