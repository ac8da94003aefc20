"""Rule reference, and a command: the published study's CSV -> a cells Parquet marked as published.

python workflow/scripts/build_reference.py resources/reference/kpad_published.csv results/reference/kpad_published.parquet
"""  # noqa: E501

import argparse
import logging
from pathlib import Path

import pandas as pd

from _rule import setup_logging
from kpadstudy import reference


def build(csv_path: str, out_path: str) -> pd.DataFrame:
    """Read the published CSV, write its cells Parquet to ``out_path``; return the table."""
    cells = reference.published_cells(pd.read_csv(csv_path))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    cells.to_parquet(out_path, index=False)
    logging.getLogger("reference").info(
        "%s: %d published numbers (%s) -> %s", csv_path, len(cells), cells["method"].value_counts().to_dict(), out_path
    )
    return cells


if "snakemake" in globals():
    sm = snakemake  # noqa: F821
    setup_logging(sm.log[0])
    build(sm.input.csv, sm.output.cells)
elif __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="the published CSV (resources/reference/kpad_published.csv)")
    ap.add_argument("out", help="the cells Parquet to write")
    a = ap.parse_args()
    setup_logging(None)
    build(a.csv, a.out)
