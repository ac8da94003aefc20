"""Rules figures and figures_from_cache, and a command to redraw every figure from an existing cells Parquet
with nothing else (no vLLM, GPU or network; pandas, pyarrow, seaborn):

    python workflow/scripts/draw_figures.py results/cells.parquet figures/ [--mix mix] [--runs results/runs.parquet
        [results/confirm/runs.parquet]] [--reference results/reference/kpad_published.parquet] [--note "8x B200"]
"""

import argparse
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from _rule import setup_logging
from kpadstudy import compare, figures, paired, reference, repeat_figures, stepcost, tables

CPU_NOTE = compare.CPU_NOTE
PUBLISHED_NOTE = "published K-pad study (8x B200, vLLM 1.7.dev): one number per configuration, no repeats"
read_cells = tables.read_cells
CELL_FIGURES = ["best_k_heatmap", "bestkpad_over_suf", "k_sweep", "van_suf_bestkpad"]
# figures of the run records (kpadstudy.repeat_figures), drawn when runs are given
RUN_FIGURES = ["k_vs_r", "kpad_vs_nopad", "paired_ratios", "run_timeline", "kpadauto_lengths"]


def figure_names(reference_path: str | None, runs_path: str | None, cells_are_published: bool = False) -> list[str]:
    """The figures :func:`draw` writes for these inputs (each as PNG and SVG)."""
    return (
        CELL_FIGURES
        + (["ours_vs_published"] if reference_path and not cells_are_published else [])
        + (RUN_FIGURES if runs_path else [])
    )


def skipped_figures(
    reference_path: str | None, runs_path: str | list[str] | None, cells_are_published: bool = False
) -> list[str]:
    """One line per group of figures :func:`draw` leaves out for these inputs: which, and what would add them."""
    lines = []
    if cells_are_published:
        lines.append("skipped ours_vs_published: these cells are the published study itself (nothing to compare)")
    elif not reference_path:
        lines.append(
            "skipped ours_vs_published: it needs the published cells, add --reference "
            "results/reference/kpad_published.parquet (make figures REFERENCE=...)"
        )
    if not runs_path:
        lines.append(
            f"skipped {', '.join(RUN_FIGURES)}: they need the run records, add --runs results/runs.parquet "
            "(make figures RUNS=...)"
        )
    return lines


def draw(
    cells_path: str,
    out_dir: str,
    mix: str | None,
    note: str = "",
    reference_path: str | None = None,
    runs_path: str | list[str] | None = None,
) -> list[Path]:
    """Write every figure the inputs allow as PNG and SVG into ``out_dir``; return the paths.

    Always ``CELL_FIGURES``; ``ours_vs_published`` with ``reference_path`` (unless the cells are the published
    ones); ``RUN_FIGURES`` with ``runs_path`` (one runs Parquet, or several: the sweep's first, then the
    confirmation's; ``k_vs_r`` reads the first only). ``note`` goes under each title; cells measured on CPU get
    :data:`CPU_NOTE` in front of it, published cells :data:`PUBLISHED_NOTE`.
    """
    cells = read_cells(cells_path)
    published = reference.is_published(cells)
    if "device" in cells and set(cells["device"].dropna()) == {"cpu"}:
        note = CPU_NOTE + (f". {note}" if note else "")
    elif published:
        note = PUBLISHED_NOTE + (f". {note}" if note else "")
    best = tables.best_kpad(cells)
    mix = mix or best["corpus"].iloc[0]
    if mix not in set(cells["corpus"]):
        raise ValueError(
            f"{cells_path} has no corpus {mix!r} (it has {sorted(set(cells['corpus']))}); pass --mix with one of them"
        )
    figs = {
        "best_k_heatmap": figures.best_k_heatmap(best, note=note, cells=cells),
        "bestkpad_over_suf": figures.bestkpad_over_suf(best, corpus=mix, note=note),
        "k_sweep": figures.k_sweep(cells, note=note),
        "van_suf_bestkpad": figures.van_suf_bestkpad(cells, corpus=mix, note=note),
    }
    if reference_path and not published:
        figs["ours_vs_published"] = figures.ours_vs_published(
            compare.compare(tables.best_kpad_with_device(cells), tables.best_kpad(read_cells(reference_path))),
            note=note,
            cells=cells,
        )
    if runs_path:
        paths = [runs_path] if isinstance(runs_path, str) else list(runs_path)
        frames = [pd.read_parquet(p) for p in paths]
        runs = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else frames[0]
        figs["k_vs_r"] = figures.k_vs_r(stepcost.step_cost(frames[0], cells), note=note, cells=cells)
        figs["kpad_vs_nopad"] = repeat_figures.kpad_vs_nopad(runs, note=note)
        figs["paired_ratios"] = repeat_figures.paired_ratios(paired.paired_table(runs), note=note)
        figs["run_timeline"] = repeat_figures.run_timeline(runs, note=note)
        figs["kpadauto_lengths"] = repeat_figures.kpadauto_lengths(runs, note=note)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    plt.rcParams["svg.hashsalt"] = "kpadstudy"  # same data, same SVG bytes (no random ids)
    for name, fig in figs.items():
        for ext in ("png", "svg"):
            fig.savefig(out / f"{name}.{ext}", dpi=150, metadata={"Date": None} if ext == "svg" else None)
            written.append(out / f"{name}.{ext}")
    return written


if "snakemake" in globals():
    sm = snakemake  # noqa: F821
    setup_logging(sm.log[0])
    draw(
        sm.input.cells,
        sm.params.out_dir,
        sm.params.mix,
        sm.params.note,
        sm.input.get("reference"),
        ([sm.input.runs] if isinstance(sm.input.runs, str) else list(sm.input.runs)) if sm.input.get("runs") else None,
    )
elif __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cells", help="a cells Parquet (results/cells.parquet)")
    ap.add_argument("out_dir", help="folder for the figures")
    ap.add_argument(
        "--mix", default="mix", help="corpus of the bestKpad-over-suf and van -> suf -> bestKpad figures (default: mix)"
    )
    ap.add_argument("--note", default="", help="a line under each title: hardware, versions, repeats")
    ap.add_argument(
        "--runs",
        nargs="+",
        default=None,
        help="its runs Parquet (then the confirmation's): adds K-bar vs R, kpad vs nopad, paired ratios, run timeline, "
        "kpadauto lengths",
    )
    ap.add_argument("--reference", default=None, help="the published cells Parquet: adds the ours-vs-published figure")
    a = ap.parse_args()
    setup_logging(None)
    try:
        written = draw(a.cells, a.out_dir, a.mix, a.note, a.reference, a.runs)
    except ValueError as err:
        raise SystemExit(f"draw_figures: {err}") from None
    for p in written:
        print(p)
    for line in skipped_figures(a.reference, a.runs, reference.is_published(read_cells(a.cells))):
        print(f"draw_figures: {line}")
