"""Rule step_model: the step-cost model's fit and its kpad K / nopad K per cell (kpadstudy.roofline)."""

import pandas as pd

from _rule import setup_logging
from kpadstudy import paired, roofline

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
runs = pd.concat([paired.read_runs_table(p) for p in sm.input.runs], ignore_index=True)
table, params, ahead = roofline.step_model(runs, sm.params.fit_on, sm.params.efficiency)
(table if table is not None else pd.DataFrame()).to_csv(sm.output.csv, index=False)
with open(sm.output.md, "w") as f:
    f.write(roofline.to_markdown(table, params, runs, ahead))
roofline.draw(table, sm.output.png, sm.output.svg)
