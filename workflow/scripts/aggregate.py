"""Rule tables: run records -> results/runs.parquet and results/cells.parquet."""
import logging

from _rule import setup_logging

from kpadstudy import tables

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
runs = tables.read_runs(sm.input)
runs.to_parquet(sm.output.runs, index=False)
cells = tables.cells(runs)
cells.to_parquet(sm.output.cells, index=False)
logging.getLogger("tables").info("%d runs (%s) -> %d cell configurations", len(runs), runs["status"].value_counts().to_dict(), len(cells))
