"""Rule mix: shares of the component corpora (mix.weights, default equal), shuffled with a fixed seed."""

import logging
from collections import Counter

from _rule import setup_logging
from kpadstudy import corpora, mix

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
cfg = sm.config
components = {name: corpora.read_jsonl(path) for name, path in zip(cfg["mix"]["components"], sm.input, strict=True)}
n_warmup, n_measured = corpora.mix_sizes(cfg)
counts = Counter()
records = mix.build_mix(
    cfg["mix"]["name"],
    components,
    n_warmup=n_warmup,
    n_measured=n_measured,
    seed=cfg["mix"]["seed"],
    weights=corpora.mix_weights(cfg["mix"]),
    counts=counts,
)
n = corpora.write_jsonl(records, sm.output[0])
logging.getLogger("build_mix").info(
    "mix %s: %d records from %s; %s", cfg["mix"]["name"], n, list(components), dict(counts) or "no prompt skipped"
)
