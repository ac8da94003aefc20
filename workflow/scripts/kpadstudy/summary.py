"""The study's summary, printed at the end of every study and by ``snakemake from_cache``: per cell the advised
configuration, its ratio over van, over suf and, when it pads, over the best unpadded configuration at its K
(within repeats, with the interval and n of
:mod:`kpadstudy.paired`; from medians where no run records exist, e.g. the published study), the flags that
qualify it (drift, graph lost, noisy, no valid run, short load, single measurement / n = 2, slower than controls), and
where the files went.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import advice, paired
from .runs import PADDED_METHODS, largest_capture

#: seconds of measured load below which a valid run is flagged ``short load``: the study-scale issue's floor (issue
#: 41); under it the ramp-up and the drain of the concurrency take a larger share of the measured duration
SHORT_LOAD_S = 30.0


def _ratio_text(ratio: float, lo: Any, hi: Any, n: int, basis: str) -> str:
    if ratio is None or pd.isna(ratio):
        return "n/a"
    if basis == "medians":
        return f"{ratio:.2f}x (medians, no run records)"
    if lo is not None and not pd.isna(lo):
        return f"{ratio:.2f}x ({lo:.2f}-{hi:.2f}, n = {n})"
    return f"{ratio:.2f}x ({'single measurement' if n == 1 else f'n = {n}'})"


def cell_ratio(rec: pd.Series, other: str, pairs: pd.DataFrame | None) -> tuple[float | None, Any, Any, int, str]:
    """The advised configuration over ``other`` (``van``, ``suf`` or its ``unpadded`` one) in one cell: ``(ratio,
    ci_low, ci_high, n, basis)``, ``basis`` "paired" (the :func:`kpadstudy.paired.paired_table` row of the cell's
    phase, either direction) or "medians" (``rec``'s medians: no paired row). None when either side has no number."""
    name = rec["recommended"]
    if pairs is not None and len(pairs):
        cell = pairs[(pairs["model"] == rec["model"]) & (pairs["corpus"] == rec["corpus"])]
        cell = cell[cell["phase"] == rec.get("phase", "sweep")] if "phase" in cell else cell
        for num, den, flip in ((name, other, False), (other, name, True)):
            row = cell[(cell["numerator"] == num) & (cell["denominator"] == den)]
            if len(row) and row["n"].iloc[0] > 0:
                r = row.iloc[0]
                if flip:
                    lo = None if r["ci_high"] is None or pd.isna(r["ci_high"]) else 1 / r["ci_high"]
                    hi = None if r["ci_low"] is None or pd.isna(r["ci_low"]) else 1 / r["ci_low"]
                    return 1 / r["ratio"], lo, hi, int(r["n"]), "paired"
                return float(r["ratio"]), r["ci_low"], r["ci_high"], int(r["n"]), "paired"
    ours = rec.get("recommended_tok_s")
    theirs = rec.get("unpadded_tok_s") if other == rec.get("unpadded") else rec.get(f"{other}_tok_s")
    if ours is None or theirs is None or pd.isna(ours) or pd.isna(theirs) or not theirs:
        return None, None, None, 0, "medians"
    return float(ours) / float(theirs), None, None, 1, "medians"


def _drift_what(what: str) -> str:
    """A drift row's ``what`` (:func:`kpadstudy.paired.drift_table`) in short: ``last/first (sweep)``,
    ``confirm/sweep``."""
    if what.startswith("last / first repeat ("):
        return "last/first (" + what[len("last / first repeat (") :]
    return "confirm/sweep" if what.startswith("confirm / sweep") else what


def _valid_runs(rec: pd.Series, runs: pd.DataFrame) -> pd.DataFrame:
    """The ``ok`` runs of ``rec``'s cell (model, corpus) and phase (a table without phases is the sweep's)."""
    runs = paired.prepared_runs(runs)  # phase filled
    return runs[
        (runs["model"] == rec["model"])
        & (runs["corpus"] == rec["corpus"])
        & (runs["phase"] == rec.get("phase", "sweep"))
        & (runs["status"] == "ok")
    ]


def short_load(rec: pd.Series, runs: pd.DataFrame | None) -> str | None:
    """``short load (2 of 9 valid runs under 30 s of measured load, shortest kpad8 r2 at 28.4 s)`` when valid runs of
    ``rec``'s cell and phase measured less than :data:`SHORT_LOAD_S` (their ``duration_s``; a run without one is not
    counted); None otherwise or without run records."""
    if runs is None or "duration_s" not in runs:
        return None
    mine = _valid_runs(rec, runs)
    mine = mine.assign(duration_s=pd.to_numeric(mine["duration_s"], errors="coerce")).dropna(subset=["duration_s"])
    short = mine[mine["duration_s"] < SHORT_LOAD_S].sort_values(["duration_s", "configuration", "repeat"])
    if not len(short):
        return None
    first = short.iloc[0]
    return (
        f"short load ({len(short)} of {len(mine)} valid runs under {SHORT_LOAD_S:.0f} s of measured load, "
        f"shortest {first['configuration']} r{int(first['repeat'])} at {first['duration_s']:.1f} s)"
    )


def short_capture(rec: pd.Series, runs: pd.DataFrame | None) -> str | None:
    """``short capture list (kpad8 288 < nopad8 512 tokens)`` when a padded configuration's valid runs in ``rec``'s
    cell and phase captured a largest batch (``cudagraph_capture_sizes``) below nopad's at the same K: vLLM's own
    list reached further, so a step between the two (most with a prefill in them) ran without a cudagraph on the
    padded server only, and the cell's numbers understate padding (config ``server.capture_ceiling``; every padded
    run of this pipeline before 2026-12-07). None otherwise or without run records."""
    if runs is None or "cudagraph_capture_sizes" not in runs:
        return None
    mine = _valid_runs(rec, runs)
    largest = (
        mine.assign(size=mine["cudagraph_capture_sizes"].map(largest_capture))
        .dropna(subset=["size"])
        .groupby(["configuration", "method", "k"], as_index=False)["size"]
        .max()
    )
    short = []
    for _, r in largest[largest["method"].isin(PADDED_METHODS)].iterrows():
        nopad = largest[(largest["method"] == "nopad") & (largest["k"] == r["k"])].sort_values("size").tail(1)
        if len(nopad) and r["size"] < nopad["size"].iloc[0]:
            other = nopad.iloc[0]
            short.append(
                f"{r['configuration']} {int(r['size'])} < {other['configuration']} {int(other['size'])} tokens"
            )
    return f"short capture list ({', '.join(short)})" if short else None


def flags(
    rec: pd.Series, cells: pd.DataFrame, drift: pd.DataFrame | None, n: int, runs: pd.DataFrame | None = None
) -> list[str]:
    """The flags of one cell, in this order: the recommendation's ``van_runner`` (van and the pick ran on different
    model runners or async scheduling), ``slower than controls (vansyncv1, vansync)``
    (:func:`kpadstudy.advice.recommend`'s ``faster_controls``), ``drift (van last/first (sweep) 0.77, suf
    confirm/sweep 1.14, ...)`` (configurations whose last repeat is more than :data:`kpadstudy.paired.DRIFT_FLAG` off
    their first in a phase, or whose confirmation median is that far off their sweep median), ``graph lost
    (kpad16)``, ``noisy (van)`` (cells ``noisy``), ``no valid run (kpad4: lost)``
    (:func:`kpadstudy.tables.failure_label`), ``short load (...)`` (:func:`short_load` of ``runs``), ``short capture
    list (...)`` (:func:`short_capture` of ``runs``), ``single
    measurement`` / ``n = 2`` (paired repeats behind the advice)."""
    out = []
    if rec.get("van_runner"):
        out.append(rec["van_runner"])
    if rec.get("faster_controls"):
        out.append(f"slower than controls ({rec['faster_controls']})")
    key = (cells["model"] == rec["model"]) & (cells["corpus"] == rec["corpus"])
    if drift is not None and len(drift):
        d = drift[(drift["model"] == rec["model"]) & (drift["corpus"] == rec["corpus"]) & drift["drifting"]]
        if len(d):
            pairs = zip(d["configuration"], d["what"], d["ratio"], strict=True)
            out.append("drift (" + ", ".join(f"{c} {_drift_what(w)} {r:.2f}" for c, w, r in pairs) + ")")
    if "graph_lost" in cells:
        lost = cells[key & cells["graph_lost"].fillna(False).astype(bool)]
        if len(lost):
            out.append("graph lost (" + ", ".join(sorted(lost["configuration"])) + ")")
    if "noisy" in cells:
        noisy = cells[key & cells["noisy"].fillna(False).astype(bool)]
        if len(noisy):
            out.append("noisy (" + ", ".join(sorted(set(noisy["configuration"]))) + ")")
    if "n_valid" in cells:
        from .tables import failure_label

        dead = cells[key & (cells["n_valid"].fillna(0) == 0)]
        if len(dead):
            out.append(
                "no valid run ("
                + ", ".join(
                    f"{c}: {failure_label(dead[dead['configuration'] == c])}" for c in sorted(dead["configuration"])
                )
                + ")"
            )
    if short := short_load(rec, runs):
        out.append(short)
    if short := short_capture(rec, runs):
        out.append(short)
    if n == 1:
        out.append("single measurement")
    elif n == 2:
        out.append("n = 2")
    return out


def summary_text(
    recs: pd.DataFrame,
    cells: pd.DataFrame,
    runs: pd.DataFrame | None = None,
    where: dict[str, str] | None = None,
    title: str = "K-pad study: summary",
) -> str:
    """The summary as plain text (also markdown): one line per cell, then where the files went.

    Args:
        recs: :func:`kpadstudy.advice.recommend` rows; cells: the cells table the advice read.
        runs: the run records (sweep and confirmation) for the paired ratios and drift; None = medians.
        where: label -> path of the outputs (figures, tables, recommendations, report).
    """
    pairs, drift = _pairs_and_drift(runs)
    lines = [f"# {title}", ""]
    for _, rec in recs.iterrows():
        head = f"- {rec['model']} / {rec['corpus']} ({rec.get('phase', 'sweep')})"
        if isinstance(rec.get("stand_in"), str):  # None / NaN for a real model
            head += f" [stand-in: {rec['stand_in']}]"
        if not rec["recommended"]:
            lines.append(f"{head}: nothing to advise ({rec['reason']})")
            continue
        parts, flag = _cell_parts(rec, cells, pairs, drift, runs)
        lines.append(
            f"{head}: serve {rec['recommended']}; " + "; ".join(parts) + (f"; flags: {', '.join(flag)}" if flag else "")
        )
    if where:
        lines += ["", "Files:"] + [f"- {k}: {v}" for k, v in where.items()]
    return "\n".join(lines) + "\n"


def cell_flags(recs: pd.DataFrame, cells: pd.DataFrame, runs: pd.DataFrame | None = None) -> dict[tuple, list[str]]:
    """(model, corpus) -> the :func:`flags` of each cell with a recommendation, as :func:`summary_text` gives them
    (for recommendations.md)."""
    pairs, drift = _pairs_and_drift(runs)
    return {
        (rec["model"], rec["corpus"]): _cell_parts(rec, cells, pairs, drift, runs)[1]
        for _, rec in recs.iterrows()
        if rec["recommended"]
    }


def _pairs_and_drift(runs: pd.DataFrame | None) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The paired table and the drift table of the run records; (None, None) without run records."""
    if runs is None or not len(runs):
        return None, None
    return paired.paired_table(runs), paired.drift_table(runs)


def _cell_parts(
    rec: pd.Series,
    cells: pd.DataFrame,
    pairs: pd.DataFrame | None,
    drift: pd.DataFrame | None,
    runs: pd.DataFrame | None,
) -> tuple[list[str], list[str]]:
    """A recommended cell's summary: its ratios over van, suf and a padded pick's best unpadded configuration (at its
    K, else at any K; or why there is none), and its :func:`flags`."""
    parts, ns = [], []
    unpadded = rec.get("unpadded") or ""
    for other in ("van", "suf", *([unpadded] if unpadded not in ("", "suf") else [])):
        if rec["recommended"] == other:
            continue
        ratio, lo, hi, n, basis = cell_ratio(rec, other, pairs)
        if ratio is None:
            parts.append(f"no {other} number to compare with")
            continue
        parts.append(f"{_ratio_text(ratio, lo, hi, n, basis)} over {other}")
        if basis == "paired":
            ns.append(n)
    if rec.get("method") in PADDED_METHODS and not unpadded:
        parts.append(f"no unpadded run at K={rec['k']}")
    if advice.gain_not_clear(rec):
        parts.append(f"padding's gain not clear: {unpadded} serves without the patch (recommendations.md)")
    if ns:
        n_min = min(ns)
    else:  # medians: the repeats behind the advised configuration's median
        mine = cells[
            (cells["model"] == rec["model"])
            & (cells["corpus"] == rec["corpus"])
            & (cells["configuration"] == rec["recommended"])
        ]
        n_min = int(mine["n_valid"].iloc[0]) if "n_valid" in mine and len(mine) else 1
    return parts, flags(rec, cells, drift, n_min, runs)
