"""Rule corpus: source records -> filtered, sampled prompt records (results/corpora/{corpus}.jsonl)."""
import logging

from _rule import setup_logging

from kpadstudy import corpora

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
cfg, spec, name = sm.config, sm.params.spec, sm.wildcards.corpus
counters = {model: corpora.token_counter(path) for model, path in zip(sm.params.models, sm.input.tokenizers)}
n_warmup, n_measured = corpora.corpus_sizes(cfg)[name]
prompts = corpora.extract_prompts(spec["prompt_rule"], corpora.load_source_records(name, spec["source"]))
records, counts = corpora.select_prompts(
    name, prompts, n_warmup=n_warmup, n_measured=n_measured, seed=cfg["prompts"]["seed"],
    count_tokens=counters, max_tokens=cfg["load"]["max_tokens"], max_model_len=cfg["server"]["max_model_len"],
)
corpora.write_jsonl(records, sm.output[0])
logging.getLogger("build_corpus").info("corpus %s: %s", name, dict(counts))
