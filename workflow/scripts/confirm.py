"""Checkpoint best_k: one cell's sweep records -> results/confirm/{model}/{corpus}/best_k.json
(kpadstudy.confirm.pick_best_k)."""

import json
import logging

from _rule import setup_logging
from kpadstudy import confirm, runs, tables

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
records = tables.read_runs(sm.input)
best = confirm.pick_best_k(tables.cells(records), sm.params.repeats, runs.controls(sm.config))
with open(sm.output[0], "w") as f:
    json.dump(best, f, indent=1)
logging.getLogger("best_k").info(
    "%s/%s: %d sweep runs; to confirm (best, second-best kpad, best nopad): %s",
    sm.wildcards.model,
    sm.wildcards.corpus,
    len(records),
    [(c["best"], c["second"], c["best_nopad"]) for c in best["cells"]] or "nothing (no valid kpad run)",
)
