"""Checkpoint best_k: results/cells.parquet -> results/confirm/best_k.json (kpadstudy.confirm.pick_best_k)."""

import json
import logging

import pandas as pd

from _rule import setup_logging
from kpadstudy import confirm

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
cells = pd.read_parquet(sm.input[0])
best = confirm.pick_best_k(cells[cells["corpus"].isin(sm.params.measured)], sm.params.repeats)
with open(sm.output[0], "w") as f:
    json.dump(best, f, indent=1)
logging.getLogger("best_k").info(
    "%d cells to confirm: %s", len(best["cells"]), [(c["model"], c["corpus"], c["best_k"]) for c in best["cells"]]
)
