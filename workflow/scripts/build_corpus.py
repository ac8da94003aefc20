"""Rule corpus: source records -> filtered, sampled prompt records (results/corpora/{corpus}.jsonl)."""

import logging

from _rule import setup_logging
from kpadstudy import corpora

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
name = sm.wildcards.corpus
counters = {
    model: corpora.token_counter(path) for model, path in zip(sm.params.models, sm.input.tokenizers, strict=True)
}
records, counts = corpora.build_corpus(name, sm.params.spec, sm.config, counters)
corpora.write_jsonl(records, sm.output[0])
logging.getLogger("build_corpus").info("corpus %s: %s", name, dict(counts))
