"""Rules tables, confirmed_table and analysis_cells: run records -> Parquet tables."""

import json
import logging

import pandas as pd

from _rule import setup_logging
from kpadstudy import confirm, paired, tables

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
log = logging.getLogger(sm.rule)
if sm.rule == "tables":
    runs = tables.read_runs(sm.input)
    tables.write_table(runs, sm.output.runs)
    cells = tables.cells(runs)
    tables.write_table(cells, sm.output.cells)
    log.info("%d runs (%s) -> %d cell configurations", len(runs), runs["status"].value_counts().to_dict(), len(cells))
    pairs, drift = paired.paired_table(runs), paired.drift_table(runs)
    tables.write_table(pairs, sm.output.paired)
    tables.write_table(drift, sm.output.drift)
    with open(sm.output.paired_md, "w") as f:
        f.write(paired.to_markdown(pairs, drift))
    log.info("%d paired comparisons", len(pairs))
elif sm.rule == "confirmed_table":
    runs = tables.read_runs(sm.input.runs)
    best_k = {"repeats": None, "cells": []}
    for path in sm.input.best_k:
        with open(path) as f:
            best_k["cells"] += json.load(f)["cells"]
    out = confirm.confirmed_cells(runs, best_k) if len(runs) else pd.DataFrame()
    tables.write_table(out, sm.output.cells)
    tables.write_table(runs, sm.output.runs)
    pairs = paired.paired_table(runs)
    tables.write_table(pairs, sm.output.paired)
    both = pd.concat([pd.read_parquet(sm.input.sweep), runs], ignore_index=True)
    drift = paired.drift_table(both)
    drift = drift[drift["what"].str.contains("confirm")] if len(drift) else drift
    tables.write_table(drift, sm.output.drift)
    phases = paired.phase_table(both)
    tables.write_table(phases, sm.output.confirm_vs_sweep)
    with open(sm.output.paired_md, "w") as f:
        f.write(paired.to_markdown(pairs, drift, phases))
    log.info("%d confirmation runs -> %d rows, %d paired comparisons", len(runs), len(out), len(pairs))
elif sm.rule == "analysis_cells":
    out = confirm.prefer_confirmed(pd.read_parquet(sm.input.cells), pd.read_parquet(sm.input.confirmed))
    tables.write_table(out, sm.output[0])
    log.info("%d rows, %d from the confirmation", len(out), int((out["phase"] == "confirm").sum()))
else:
    raise ValueError(f"aggregate.py does not serve rule {sm.rule}")
