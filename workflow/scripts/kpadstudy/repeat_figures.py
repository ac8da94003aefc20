"""Figures drawn from the run records, repeat by repeat: what padding buys at equal K, every paired comparison
with its interval, and each cell's runs in the order they ran (drift made visible).

Each function takes DataFrames and returns a matplotlib Figure; none reads files. Colours and markers:
:mod:`kpadstudy.palette`. Ratios are within a repeat and summarized as in :mod:`kpadstudy.paired` (geometric
mean, 95% t-interval on the log ratios from n >= 3 repeats; below that no interval, the label says n).
"""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import paired, palette  # noqa: E402


def _empty(message: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6.0, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=9)
    return fig


def _grid(n: int, width: float, height: float, ncol_max: int = 3) -> tuple[plt.Figure, np.ndarray]:
    ncol = min(ncol_max, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(width * ncol, height * nrow + 0.9), squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes


def _suptitle(fig: plt.Figure, title: str, note: str, width_in: float) -> None:
    """Title and note, each wrapped to the figure's width (about 11 characters per inch at 8-10 pt)."""
    width = max(30, int(width_in * 11))
    text = textwrap.fill(title, width=width) + (f"\n{textwrap.fill(note, width=width)}" if note else "")
    fig.suptitle(text, fontsize=9)


def plain_log_axis(axis, span: float = 1.0) -> None:
    """A log axis labelled 0.9, 1.0, 1.2 ... instead of powers of ten. ``span``, the axis' right / left limit: above
    4, 1, 1.5, 2, 3, 5 and 7 of each decade (0.5, 0.7, 1.0, 1.5, ...), above 100 only 1, 2 and 5, so that labels do
    not overlap."""
    from matplotlib.ticker import FormatStrFormatter, FuncFormatter, LogLocator

    if span > 4:
        subs = (1.0, 2.0, 5.0) if span > 100 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
        axis.set_major_formatter(
            FuncFormatter(lambda v, _: f"{v:.2g}" if v < 1 else f"{v:.1f}" if v < 10 else f"{v:.0f}")
        )
    else:
        subs = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.4, 1.7, 2.0, 2.5, 3.0)
        axis.set_major_formatter(FormatStrFormatter("%.1f"))
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_minor_formatter(FormatStrFormatter(""))


def _summary_label(s: dict) -> str:
    """``1.17x (0.82-1.66), 3/3`` with an interval; ``1.17x, n = 2, 2/2`` or ``1.17x, single`` without."""
    if s["n"] == 0:
        return "no paired repeat"
    head = f"{s['ratio']:.2f}x"
    if s["ci_low"] is not None and not pd.isna(s["ci_low"]):
        return f"{head} ({s['ci_low']:.2f}-{s['ci_high']:.2f}), {s['favour']}/{s['n']}"
    size = "single" if s["n"] == 1 else f"n = {s['n']}"
    return f"{head}, {size}, {s['favour']}/{s['n']}"


def kpad_vs_nopad(runs: pd.DataFrame, note: str = "") -> plt.Figure:
    """kpad K over nopad K within each repeat, per K: one panel per (model, corpus, phase).

    Args:
        runs: run records (``results/runs.parquet``, and ``results/confirm/runs.parquet`` with a confirmation):
            ``model, corpus, configuration, method, k, repeat, status, output_tok_s`` and ``phase`` when present
            (absent = sweep). Each phase has its own panel (titled "(confirm)"): its repeats are other blocks.
        note: a line under the title.

    Each repeat's ratio is a small point (x = K, jittered); the geometric mean over repeats a large one,
    with its 95% t-interval as a bar when n >= 3, labelled with the ratio, interval or n, and how many
    repeats favour kpad. A K where either side has no ``ok`` run is marked at the bottom ("no pair").
    """
    runs = paired.prepared_runs(runs) if len(runs) else runs
    pads = runs[runs["method"].isin(["kpad", "nopad"])] if len(runs) else runs
    phase_order = {"sweep": 0, "confirm": 1}
    cells = sorted(
        (
            key
            for key, g in pads.groupby(["model", "corpus", "phase"], sort=True)
            if set(g["method"]) == {"kpad", "nopad"}
            and set(g[g["method"] == "kpad"]["k"]) & set(g[g["method"] == "nopad"]["k"])
        ),
        key=lambda key: (key[0], key[1], phase_order.get(key[2], 2), key[2]),
    )
    if not cells:
        return _empty("kpad vs nopad: no cell ran both kpad and nopad at one K")
    fig, axes = _grid(len(cells), 3.8, 3.0)
    for ax, (model, corpus, phase) in zip(axes.flat, cells, strict=False):
        g = pads[(pads["model"] == model) & (pads["corpus"] == corpus) & (pads["phase"] == phase)]
        table = paired.repeat_table(g)
        ks = sorted(set(g[g["method"] == "kpad"]["k"]) & set(g[g["method"] == "nopad"]["k"]))
        for k in ks:
            kp, nop = g[(g["method"] == "kpad") & (g["k"] == k)], g[(g["method"] == "nopad") & (g["k"] == k)]
            ratios = paired.within_repeat_ratios(
                table, kp["configuration"].iloc[0], nop["configuration"].iloc[0]
            ).astype(float)
            colour = palette.k_colour(k)
            if ratios.empty:
                ax.plot([k], [1.0], marker="x", color="0.4", linestyle="none")
                ax.annotate("no pair", (k, 1.0), xytext=(0, -12), textcoords="offset points", ha="center", fontsize=7)
                continue
            jitter = np.linspace(-0.25, 0.25, len(ratios)) if len(ratios) > 1 else [0.0]
            ax.scatter(k + np.asarray(jitter), ratios.values, s=14, color=colour, alpha=0.6, zorder=2)
            s = paired.summarize(list(ratios.values))
            if s["ci_low"] is not None and not pd.isna(s["ci_low"]):
                ax.errorbar(
                    [k],
                    [s["ratio"]],
                    yerr=[[s["ratio"] - s["ci_low"]], [s["ci_high"] - s["ratio"]]],
                    color=colour,
                    capsize=4,
                    zorder=3,
                )
            ax.plot([k], [s["ratio"]], marker="D", markersize=7, color=colour, markeredgecolor="black", zorder=4)
            ax.annotate(
                _summary_label(s), (k, s["ratio"]), xytext=(6, 0), textcoords="offset points", fontsize=7, va="center"
            )
        ax.axhline(1.0, color="0.5", linewidth=0.8, linestyle=":")
        ax.set_yscale("log")
        plain_log_axis(ax.yaxis)
        ax.set_xticks(ks)
        ax.set_xlim(min(ks) - 1.5, max(ks) + 3.5)
        ax.set_xlabel("K (draft tokens per step)", fontsize=8)
        ax.set_ylabel("kpad K / nopad K output tok/s\n(within a repeat)", fontsize=8)
        several = sum(1 for m, c, _ in cells if (m, c) == (model, corpus)) > 1
        ax.set_title(f"{model} / {corpus}" + (f" ({phase})" if several or phase != "sweep" else ""), fontsize=8)
        ax.tick_params(labelsize=7)
    _suptitle(
        fig,
        "Padding at equal K: kpad over nopad, per repeat (dots) and geometric mean (diamond, 95% CI from n >= 3)",
        note,
        3.8 * min(3, len(cells)),
    )
    fig.tight_layout()
    return fig


#: the least share of a paired-ratios panel's log axis right of the widest interval, for its label
LABEL_ROOM = 0.45


def paired_ratios(table: pd.DataFrame, note: str = "") -> plt.Figure:
    """Every paired comparison of every cell and phase: ratio (log x axis) with its 95% t-interval.

    Args:
        table: :func:`kpadstudy.paired.paired_table` rows (``model, corpus, phase, numerator, denominator, n,
            ratio, ci_low, ci_high, favour``).
        note: a line under the title.

    One panel per (model, corpus, phase); one row per comparison, its point in the numerator's colour
    (:mod:`kpadstudy.palette`), the interval as a bar (only with n >= 3), the label giving the ratio,
    interval or n, and the repeats favouring the numerator. A comparison without a paired repeat says so.
    """
    if table is None or table.empty:
        return _empty("paired comparisons: no cell has two configurations measured in one repeat")
    phase_order = {"sweep": 0, "confirm": 1}  # the sweep's panel first, as in kpad_vs_nopad
    groups = sorted(
        table.groupby(["model", "corpus", "phase"], sort=True),
        key=lambda kg: (kg[0][0], kg[0][1], phase_order.get(kg[0][2], 2), kg[0][2]),
    )
    height = max(2.2, 0.36 * max(len(g) for _, g in groups) + 1.0)
    fig, axes = _grid(len(groups), 5.2, height, ncol_max=2)
    for ax, ((model, corpus, phase), g) in zip(axes.flat, groups, strict=False):
        g = g.reset_index(drop=True)
        y = np.arange(len(g))[::-1]
        for yi, (_, r) in zip(y, g.iterrows(), strict=True):
            st = palette.style(r["numerator"])
            if r["n"] == 0 or pd.isna(r["ratio"]):
                ax.annotate("no paired repeat", (1.0, yi), ha="center", va="center", fontsize=7, color="0.4")
                continue
            if not pd.isna(r["ci_low"]):
                ax.plot([r["ci_low"], r["ci_high"]], [yi, yi], color=st["color"], linewidth=2, solid_capstyle="butt")
            ax.plot(
                [r["ratio"]],
                [yi],
                marker=st["marker"],
                color=st["color"],
                markerfacecolor=st["markerfacecolor"],
                markersize=7,
                linestyle="none",
            )
            s = {k: r[k] for k in ("n", "ratio", "ci_low", "ci_high", "favour")}
            s["ci_low"] = None if pd.isna(r["ci_low"]) else r["ci_low"]
            ax.annotate(
                _summary_label(s),
                (max(r["ratio"], r["ci_high"] if not pd.isna(r["ci_high"]) else r["ratio"]), yi),
                xytext=(5, 0),
                textcoords="offset points",
                fontsize=7,
                va="center",
            )
        ax.axvline(1.0, color="0.5", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        values = pd.concat([g["ci_low"], g["ci_high"], g["ratio"]]).astype(float)
        values = values[np.isfinite(values) & (values > 0)]  # a log axis: no 0, no inf
        lo, hi = (float(values.min()), float(values.max())) if len(values) else (1.0, 1.0)
        left, hi = min(lo, 1.0) / 1.1, max(hi, 1.0)
        right = max(hi * 1.6, left * (hi / left) ** (1 / (1 - LABEL_ROOM)))
        ax.set_xlim(left, right)
        plain_log_axis(ax.xaxis, span=right / left)
        ax.set_yticks(y)
        ax.set_yticklabels([f"{a} / {b}" for a, b in zip(g["numerator"], g["denominator"], strict=True)], fontsize=7)
        ax.set_xlabel("ratio of output tok/s within a repeat (log scale)", fontsize=8)
        ax.set_title(f"{model} / {corpus} ({phase})", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    _suptitle(
        fig,
        "Paired comparisons: geometric mean over repeats, 95% CI (n >= 3); k/n = repeats that favour the numerator",
        note,
        5.2 * min(2, len(groups)),
    )
    fig.tight_layout()
    return fig


#: a pause between two runs of a cell longer than this (minutes) is cut out of the run timeline's axis
GAP_MIN = 30.0
#: the run timeline's y axis ends at this times matplotlib's autoscaled top, so the band labels clear the runs
TIMELINE_HEADROOM = 1.12


def _cut_gaps(minutes: np.ndarray, gap_min: float = GAP_MIN, keep_min: float = 2.0) -> tuple[np.ndarray, list]:
    """Sorted start times (minutes) with every pause longer than ``gap_min`` shortened to ``keep_min``; returns
    the new times and ``[(where the cut is on the new axis, the pause's real length), ...]``."""
    out = np.array(minutes, dtype=float)
    gaps = []
    for i in range(1, len(out)):
        pause = minutes[i] - minutes[i - 1]
        if pause > gap_min:
            shift = pause - keep_min
            out[i:] -= shift
            gaps.append((out[i] - keep_min / 2, float(pause)))
    return out, gaps


def _minutes_text(minutes: float) -> str:
    """``"5 h 02 min"`` or ``"45 min"``."""
    m = int(round(minutes))
    return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{m} min"


def run_timeline(runs: pd.DataFrame, note: str = "") -> plt.Figure:
    """Each cell's runs in the order they ran: x = minutes since the cell's first run started, y = output tok/s.

    Args:
        runs: run records with ``started_at`` (ISO time), ``status``, ``output_tok_s``, ``configuration``,
            ``method``, ``k``, ``repeat`` and ``phase`` when present.
        note: a line under the title.

    One line per configuration and phase (its repeats in order); each repeat is a band (shaded every other
    one, labelled ``r1``, ``confirm r1``, ...); a run that is not ``ok`` is an x at the bottom labelled with
    its status. A pause between two runs longer than :data:`GAP_MIN` minutes (another lease, a queue) is cut
    out of the axis to 2 minutes and marked by a dashed line labelled with its length. Drift shows as every
    line moving together; a fair comparison is within one band (one repeat), never across the figure.
    """
    if runs is None or runs.empty or "started_at" not in runs:
        return _empty("run timeline: no run records with start times")
    runs = paired.prepared_runs(runs)
    runs = runs.assign(_t=pd.to_datetime(runs["started_at"], utc=True, errors="coerce"))
    cells = sorted({(m, c) for m, c in zip(runs["model"], runs["corpus"], strict=True)})
    fig, axes = _grid(len(cells), 4.4, 3.0, ncol_max=2)
    legend: dict[str, object] = {}
    for ax, (model, corpus) in zip(axes.flat, cells, strict=False):
        g = runs[(runs["model"] == model) & (runs["corpus"] == corpus)].sort_values("_t")
        minutes = ((g["_t"] - g["_t"].min()).dt.total_seconds() / 60).to_numpy()
        cut, gaps = _cut_gaps(minutes)
        g = g.assign(_m=cut)
        for at, length in gaps:
            ax.axvline(at, color="0.4", linestyle="--", linewidth=0.8, zorder=1)
            ax.annotate(
                f"{_minutes_text(length)} later", (at, 0.5), xycoords=("data", "axes fraction"), rotation=90,
                ha="right", va="center", fontsize=6, color="0.3",
            )  # fmt: skip
        # one band per repeat (a block of the design): shaded every other one, labelled at the top
        blocks = g.groupby(["phase", "repeat"], sort=False)["_m"].min().sort_values()
        edges = list(blocks.values) + [g["_m"].max() + (g["_m"].max() - g["_m"].min()) / max(1, len(g) - 1)]
        for i, ((phase, repeat), start) in enumerate(blocks.items()):
            if i % 2 == 0:
                ax.axvspan(start, edges[i + 1], color="0.92", zorder=0)
            tag = f"r{int(repeat)}" if phase == "sweep" else f"{phase} r{int(repeat)}"
            ax.annotate(
                tag, ((start + edges[i + 1]) / 2, 0.98), xycoords=("data", "axes fraction"), ha="center",
                va="top", fontsize=6, color="0.3",
            )  # fmt: skip
        for conf, c in g.groupby("configuration", sort=True):
            st = palette.style(conf, c["method"].iloc[0], c["k"].iloc[0])
            for _phase, p in c.groupby("phase", sort=True):
                ok = p[(p["status"] == "ok") & (p["output_tok_s"] > 0)]
                (line,) = ax.plot(
                    ok["_m"],
                    ok["output_tok_s"],
                    marker=st["marker"],
                    color=st["color"],
                    markerfacecolor=st["markerfacecolor"],
                    linestyle=st["linestyle"],
                    linewidth=1,
                    markersize=5,
                    label=conf,
                )
                legend.setdefault(conf, line)
                for _, r in p[~p.index.isin(ok.index)].iterrows():
                    ax.plot([r["_m"]], [0], marker="x", color=st["color"], linestyle="none")
                    ax.annotate(
                        f"{conf} r{int(r['repeat'])}: {r['status']}",
                        (r["_m"], 0),
                        xytext=(0, 6),
                        textcoords="offset points",
                        fontsize=6,
                        rotation=90,
                        ha="center",
                    )
        # room for every band and its label (the last band reaches one mean run spacing past the last start) and,
        # above the highest run, for the band labels at the top
        left, right = ax.get_xlim()
        ax.set_xlim(left, max(right, edges[-1]))
        ax.set_ylim(0, ax.get_ylim()[1] * TIMELINE_HEADROOM)
        ax.set_xlabel("minutes since the cell's first run" + (" (long pauses cut out)" if gaps else ""), fontsize=8)
        ax.set_ylabel("output tok/s", fontsize=8)
        n_ok = int(((g["status"] == "ok") & (g["output_tok_s"] > 0)).sum())
        ax.set_title(f"{model} / {corpus}: {len(g)} runs, {n_ok} ok", fontsize=8)
        ax.tick_params(labelsize=7)
    per_row = max(3, int(4.4 * min(2, len(cells)) / 1.1))  # about 1.1 inch per legend entry
    rows = -(-len(legend) // per_row)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=min(per_row, len(legend)), fontsize=7)
    _suptitle(
        fig,
        "Runs in the order they ran, one band per repeat: compare within a band, not across time",
        note,
        4.4 * min(2, len(cells)),
    )
    fig.tight_layout(rect=(0, 0.05 + 0.05 * rows, 1, 1))
    return fig


def _counts(value) -> list[int]:
    """A per-length counter as stored in the runs table (list, array or JSON text; ``[]`` when absent)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        import json

        value = json.loads(value) if value.strip() else []
    return [int(v) for v in value]


UNPADDED = "unpadded"  # kpadauto's steps run unpadded by choice (KPAD_AUTO_UNPADDED=1), after the lengths


def _unpadded_steps(run: pd.Series) -> int:
    """The run's steps the rule ran unpadded (``kpad_auto_unpadded_steps``; 0 where absent)."""
    value = run.get("kpad_auto_unpadded_steps")
    return int(value) if value is not None and pd.notna(value) else 0


def _full_text(run: pd.Series, unpadded: bool) -> str:
    """The FULL share beside a run's bar: of its decode steps, or, where it ran steps unpadded by choice, of its
    decode steps at a padded step's shape (``full_share_auto_shape``)."""
    column, of = ("full_share_auto_shape", " at padded shapes") if unpadded else ("full_share_decode", "")
    full = run.get(column)
    return ("FULL -" if full is None or pd.isna(full) else f"FULL {full:.3f}") + of


def kpadauto_lengths(runs: pd.DataFrame, note: str = "") -> plt.Figure:
    """What kpadauto's length rule chose: each kpadauto run's steps by chosen draft length L, as shares.

    Args:
        runs: run records with ``model``, ``corpus``, ``method``, ``configuration``, ``repeat``, ``status``,
            ``lengths`` (the captured draft lengths, e.g. ``"0,2,4,8,12"``), ``auto_steps_by_length`` (steps given
            length L, a list indexed by L; :mod:`kpadstudy.record`), ``full_share_decode`` (0-1), and ``phase``
            when present.
        note: a line under the title.

    Returns:
        One Figure: one panel per (model, corpus) with kpadauto runs, one horizontal bar per run (``kpadauto12
        r1``, the confirmation's as ``confirm r1``) split into the shares of its steps at each length (L = 0 is a
        one-token decode, as van's) and, last, of those it ran unpadded (``kpad_auto_unpadded_steps``), each share
        of 8% or more labelled; beside the bar the number of steps the rule chose for (exploration steps and mixed
        prefill steps included, so it can differ by one or two from the executed steps) and the FULL share of
        decode steps (of those at a padded shape, ``full_share_auto_shape``, where it ran steps unpadded). A run
        that is not ``ok`` gets no bar, only its status: its counters are not data. Without kpadauto runs, a
        figure that says so.
    """
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch
    from matplotlib.ticker import PercentFormatter

    if runs is None or runs.empty or "method" not in runs or not (runs["method"] == "kpadauto").any():
        return _empty("kpadauto lengths: no kpadauto runs in these records")
    runs = paired.prepared_runs(runs)
    auto = runs[runs["method"] == "kpadauto"]
    cells = sorted({(m, c) for m, c in zip(auto["model"], auto["corpus"], strict=True)})
    lengths_all = sorted(
        {int(x) for v in auto["lengths"].dropna() for x in str(v).split(",") if x.strip()}
        | {i for v in auto["auto_steps_by_length"] for i, n in enumerate(_counts(v)) if n}
    )
    colours = {L: plt.get_cmap("viridis")(0.9 * i / max(1, len(lengths_all) - 1)) for i, L in enumerate(lengths_all)}
    colours[UNPADDED] = "0.75"
    height = max(1.8, 0.34 * max(len(auto[(auto["model"] == m) & (auto["corpus"] == c)]) for m, c in cells) + 1.2)
    fig, axes = _grid(len(cells), 6.0, height, ncol_max=1)
    for ax, (model, corpus) in zip(axes.flat, cells, strict=False):
        g = auto[(auto["model"] == model) & (auto["corpus"] == corpus)]
        phase_order = g["phase"].map({"sweep": 0, "confirm": 1}).fillna(2)
        g = g.assign(_p=phase_order).sort_values(["_p", "phase", "configuration", "repeat"]).reset_index(drop=True)
        y = np.arange(len(g))[::-1]
        labels = []
        for yi, (_, r) in zip(y, g.iterrows(), strict=True):
            tag = f"r{int(r['repeat'])}" if r["phase"] == "sweep" else f"{r['phase']} r{int(r['repeat'])}"
            labels.append(f"{r['configuration']} {tag}")
            counts = [*enumerate(_counts(r["auto_steps_by_length"])), (UNPADDED, _unpadded_steps(r))]
            total = sum(n for _, n in counts)
            if r["status"] != "ok" or total == 0:
                why = r["status"] if r["status"] != "ok" else "no length counted"
                ax.annotate(why, (0.01, yi), ha="left", va="center", fontsize=7, color="0.4")
                continue
            left = 0.0
            for L, n in counts:
                if n == 0:
                    continue
                share = n / total
                ax.barh(yi, share, left=left, height=0.7, color=colours.get(L, "0.6"), edgecolor="white", linewidth=0.5)
                if share >= 0.08:
                    ink = "white" if sum(to_rgb(colours.get(L, "0.6"))) / 3 < 0.5 else "black"
                    ax.annotate(
                        f"{share:.0%}", (left + share / 2, yi), ha="center", va="center", fontsize=6.5, color=ink
                    )
                left += share
            full_text = _full_text(r, unpadded=counts[-1][1] > 0)
            ax.annotate(
                f"{total:,} steps, {full_text}", (1.01, yi), xycoords=("axes fraction", "data"), ha="left",
                va="center", fontsize=6.5,
            )  # fmt: skip
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.6, len(g) - 0.4)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=7)
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_xlabel("share of the steps the rule chose a length for, or ran unpadded", fontsize=8)
        ax.set_title(f"{model} / {corpus}", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    handles = [Patch(color=colours[L], label=f"L = {L}") for L in lengths_all]
    if any(_unpadded_steps(r) for _, r in auto.iterrows()):
        handles.append(Patch(color=colours[UNPADDED], label="unpadded"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7)
    _suptitle(
        fig,
        "kpadauto: steps by chosen draft length L (L = 0: a one-token decode, as van's) or unpadded, FULL share of "
        "decode steps",
        note,
        6.0,
    )
    fig.tight_layout(rect=(0.0, 0.07, 0.86, 1.0))
    return fig
