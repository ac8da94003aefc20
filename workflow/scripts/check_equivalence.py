"""Rule equivalence: greedy outputs of kpad vs unpadded suffix at one K, for one cell."""

import json
import logging
import signal
import sys
import tempfile
from pathlib import Path

from _rule import setup_logging
from kpadstudy import corpora, equivalence
from kpadstudy.execute import resolve_device
from kpadstudy.record import versions

if __name__ == "__main__":  # vLLM's engine needs the guard
    # Snakemake stops jobs with SIGTERM: turn it into SystemExit so the server is stopped in `finally`.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sm = snakemake  # noqa: F821
    setup_logging(sm.log[0])
    cfg, eq = sm.config, sm.config["equivalence"]
    records = corpora.read_jsonl(Path(sm.input.corpus))
    prompts = [r["prompt"] for r in corpora.bench_prompts(records, "measured")][: eq["prompts"]]
    if len(prompts) < eq["prompts"]:
        logging.getLogger("equivalence").warning(
            "equivalence.prompts is %d but %s has %d measured prompts: checking %d",
            eq["prompts"],
            sm.input.corpus,
            len(prompts),
            len(prompts),
        )
    device = resolve_device(cfg["device"])
    with tempfile.TemporaryDirectory() as tmp:
        result = equivalence.check_cell(
            model_path=sm.input.model,
            prompts=prompts,
            k=int(sm.wildcards.k),
            max_tokens=eq["max_tokens"],
            max_model_len=cfg["server"]["max_model_len"],
            dtype=eq["dtype"],
            device=device,
            plugin_path=sm.params.plugin_path,
            workdir=Path(tmp),
            tensor_parallel_size=int(cfg["models"][sm.wildcards.model]["tensor_parallel_size"]),
            node=cfg.get("node"),
            taskset=cfg.get("taskset"),
        )
    result.update(model=sm.wildcards.model, corpus=sm.wildcards.corpus, **versions())
    Path(sm.output[0]).write_text(json.dumps(result, indent=1))
    logging.getLogger("equivalence").info(
        "%s %s K%s: %d/%d identical, token agreement %.4f, first divergence %s",
        sm.wildcards.model,
        sm.wildcards.corpus,
        sm.wildcards.k,
        result["identical_requests"],
        result["requests"],
        result["token_agreement"],
        result["first_divergence"],
    )
