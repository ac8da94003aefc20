"""Figures. Each function takes a DataFrame and returns a matplotlib Figure; none reads files or runs anything."""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def _title(ax: plt.Axes, title: str, note: str, width_in: float) -> None:
    """Title plus a note wrapped to the figure's width (about 11 characters per inch at 8 pt)."""
    wrapped = textwrap.fill(note, width=max(30, int(width_in * 11))) if note else ""
    ax.set_title(title + (f"\n{wrapped}" if wrapped else ""), fontsize=9)


def best_k_heatmap(
    best: pd.DataFrame, note: str = "", cells: pd.DataFrame | None = None, tie: float = 0.01
) -> plt.Figure:
    """Best-K heatmap: rows = model, columns = corpus, colour = the sweep's best K, annotation = K and its median.

    Args:
        best: the table of :func:`kpadstudy.tables.best_kpad`; the colour and the number are the sweep's best K
            and its median (``sweep_best_k``, ``sweep_best_tok_s``), as the title says; where the cell's number
            comes from a separate measurement (the published mix table) or a confirmation, that number is a
            third line ("confirmed ..." / "separate ..."; a separate number within 0.1% of the sweep's is not
            repeated).
        note: a line under the title (e.g. the hardware, or why CPU numbers look the way they do).
        cells: the cells table behind ``best``: with it, a cell without a valid kpad run says why
            (:func:`kpadstudy.tables.failure_label`: "did not boot", "lost", "failed", "not measured") and a K
            whose median is within ``tie`` of the best is named beside it ("= K6 within 1%").
        tie: the relative difference below which two Ks tie (0.01 = 1%, config ``advice.within_best``).

    Colours are fixed per K (:func:`kpadstudy.palette.k_colour`), the same in every figure; the legend lists
    the Ks shown. A (model, corpus) absent from ``best`` is "not measured".
    """
    from . import palette
    from .tables import failure_label, sweep_rows

    key_k = "sweep_best_k" if "sweep_best_k" in best else "best_k"
    key_tok = "sweep_best_tok_s" if "sweep_best_tok_s" in best else "best_kpad_tok_s"
    models = sorted(best["model"].unique())
    corpora = sorted(best["corpus"].unique())
    rows = {(r["model"], r["corpus"]): r for _, r in best.iterrows()}
    sweep = sweep_rows(cells) if cells is not None else None
    width = max(6.0, 3.0 + 1.9 * len(corpora))
    fig, ax = plt.subplots(figsize=(width, 2.4 + 0.75 * len(models)))
    shown: set[int] = set()
    for i, model in enumerate(models):
        for j, corpus in enumerate(corpora):
            r = rows.get((model, corpus))
            k = None if r is None or pd.isna(r[key_k]) else int(r[key_k])
            if k is None:
                if r is None:
                    label = "not measured"
                elif sweep is not None:
                    kp = sweep[(sweep["model"] == model) & (sweep["corpus"] == corpus) & (sweep["method"] == "kpad")]
                    label = failure_label(kp)
                else:
                    label = "no valid run"
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="white", hatch="//", edgecolor="0.7", linewidth=0))
                ax.text(j + 0.5, i + 0.5, label, ha="center", va="center", fontsize=8, color="0.2")
                continue
            shown.add(k)
            colour = palette.k_colour(k)
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white", linewidth=1))
            lines = [f"K{k}", f"{_tok_s(r[key_tok])} tok/s"]
            if sweep is not None:
                kp = sweep[(sweep["model"] == model) & (sweep["corpus"] == corpus) & (sweep["method"] == "kpad")]
                kp = kp[kp["output_tok_s_median"].notna()]
                near = sorted(
                    int(x)
                    for x, t in zip(kp["k"], kp["output_tok_s_median"], strict=True)
                    if int(x) != k and t >= (1 - tie) * float(r[key_tok])
                )
                if near:
                    lines[0] += " = " + ", ".join(f"K{x}" for x in near) + f" within {tie:.0%}"
            differs = not pd.isna(r.get("best_kpad_tok_s")) and abs(r["best_kpad_tok_s"] / r[key_tok] - 1) > 0.001
            if r.get("best_from") == "separate measurement" and differs:
                lines.append(f"separate: K{int(r['best_k'])} {_tok_s(r['best_kpad_tok_s'])}")
            elif str(r.get("phase")) == "confirm" and not pd.isna(r.get("best_kpad_tok_s")):
                lines.append(f"confirmed: {_tok_s(r['best_kpad_tok_s'])}")
            dark = sum(colour[:3]) / 3 < 0.45
            ax.text(j + 0.5, i + 0.5, "\n".join(lines), ha="center", va="center", fontsize=7.5,
                    color="white" if dark else "black")  # fmt: skip
    ax.set_xlim(0, len(corpora))
    ax.set_ylim(len(models), 0)
    ax.set_xticks([j + 0.5 for j in range(len(corpora))])
    ax.set_xticklabels(corpora)
    ax.set_yticks([i + 0.5 for i in range(len(models))])
    ax.set_yticklabels(models)
    ax.tick_params(length=0, labelsize=8)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("corpus")
    if shown:
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=palette.k_colour(k)) for k in sorted(shown)]
        ax.legend(handles, [f"K{k}" for k in sorted(shown)], title="best K (kpad)", fontsize=7, title_fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # fmt: skip
    _title(ax, "Best K per cell: the kpad K with the highest median output tok/s in the K-sweep", note, width)
    fig.tight_layout()
    return fig


def bestkpad_over_suf(best: pd.DataFrame, corpus: str = "mix", note: str = "") -> plt.Figure:
    """Bar per model: bestKpad median output tok/s over suf's, as a ratio on a log axis, on ``corpus``.

    Gains are blue bars, losses vermillion and hatched (colour-blind-safe, with a second cue), each labelled
    "1.12x (K8)". Models where either side has no valid run get no bar and a "no valid run" label; a
    corpus absent from ``best`` gives a figure that says so.
    """
    d = best[best["corpus"] == corpus].sort_values("model")
    if d.empty:
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            f"no cells for corpus {corpus!r} in these data\n(corpora: {', '.join(sorted(best['corpus'].unique()))})",
            ha="center",
            va="center",
        )
        return fig
    ratio = d["bestkpad_over_suf"].astype(float)
    width = max(6.0, 1.1 * len(d) + 2)
    fig, ax = plt.subplots(figsize=(width, 4.2))
    # colour-blind-safe (Okabe-Ito blue / vermillion) with hatching as the second cue for a loss; bars grow
    # from 1 on a log axis, so a 2.85x bar does not flatten the 1.05x ones
    for i, (r, k) in enumerate(zip(ratio, d["best_k"], strict=True)):
        if pd.isna(r):
            ax.annotate("no valid run", (i, 1.0), ha="center", va="bottom", fontsize=8, color="0.3")
            continue
        gain = r >= 1
        ax.bar(i, r - 1, bottom=1, color="#0072B2" if gain else "#D55E00", hatch="" if gain else "//",
               edgecolor="white", width=0.7)  # fmt: skip
        ax.annotate(f"{r:.2f}x (K{k})", (i, r), ha="center", va="bottom" if gain else "top", fontsize=8)
    ax.set_yscale("log")
    from .repeat_figures import plain_log_axis

    plain_log_axis(ax.yaxis)
    finite = ratio.dropna()
    lo, hi = (min(finite.min(), 1.0), max(finite.max(), 1.0)) if len(finite) else (1.0, 1.0)
    ax.set_ylim(lo / 1.15, hi * 1.15)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(d)))
    ax.set_xticklabels(d["model"])
    ax.set_ylabel("bestKpad / suf output tok/s (log scale)")
    ax.set_xlabel("model")
    _title(ax, f"bestKpad over suf on {corpus}: ratio of median output tok/s", note, width)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    return fig


def _note_lines(note: str, width_in: float, fontsize: float = 7.5, max_lines: int = 2) -> tuple[str, float]:
    """``note`` wrapped to the figure's width in at most ``max_lines`` lines: the font shrinks (down to 6 pt)
    before a third line is allowed (a note too long even at 6 pt takes more lines). Returns the text and its font
    size (about 120 / size characters per inch)."""
    if not note:
        return "", fontsize
    size = fontsize
    while True:
        lines = textwrap.wrap(note, width=max(30, int(width_in * 120 / size)))
        if len(lines) <= max_lines or size <= 6.0:
            return "\n".join(lines), size
        size = max(6.0, size - 0.5)


def _legend_ncol(labels: list[str], width_in: float, fontsize: float = 7.0) -> int:
    """How many legend columns of ``labels`` fit in ``width_in`` inches (a column: the longest label, about
    0.55 em a character, plus its handle)."""
    column = max([len(x) for x in labels] or [1]) * 0.55 * fontsize / 72 + 0.55
    return max(1, min(len(labels), int((width_in - 0.2) // column)))


def _n_text(ns: list[int]) -> str:
    """``n = 3`` or ``n = 2-3`` (valid repeats behind the medians drawn); empty when unknown."""
    ns = sorted({int(n) for n in ns if not pd.isna(n)})
    if not ns:
        return ""
    return f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]}-{ns[-1]}"


def _n_valid(row: pd.Series) -> float:
    return float(row["n_valid"]) if "n_valid" in row and not pd.isna(row["n_valid"]) else float("nan")


def _spread(row: pd.Series) -> float:
    """The MAD of a cells row when it is known (n_valid >= 3, :data:`kpadstudy.tables.MIN_NOISE_N`), else NaN
    (older tables wrote 0 for a single repeat: that is no spread, only no information)."""
    from .tables import MIN_NOISE_N

    mad = row.get("output_tok_s_mad", float("nan"))
    if pd.isna(mad) or pd.isna(_n_valid(row)) or _n_valid(row) < MIN_NOISE_N:
        return float("nan")
    return float(mad)


#: the reference lines of :func:`k_sweep`: configuration -> line style (colour and marker from the palette)
REFERENCE_LINES = {"van": ":", "suf": "-."}
SWEEP_LINE = "0.35"  # the grey that joins one series' Ks; each K's marker has the K's palette colour


def _sweep_panel(ax: plt.Axes, d: pd.DataFrame, ks_all: list[int], label_room: bool) -> dict:
    """One (model, corpus) panel of :func:`k_sweep` (``label_room``: room right of the largest K for the
    reference lines' labels). Returns what it drew: ``ns`` (valid repeats of every median drawn), ``bars``
    (MAD bars and bands drawn), ``methods`` (series drawn), ``lost`` and ``fails`` (marks drawn), ``refs``
    (reference lines drawn), ``missing`` (reference configurations without a valid median, as labels) and
    ``top`` (the highest value drawn)."""
    from matplotlib.transforms import ScaledTranslation

    from . import palette
    from .tables import failure_label, lost_graphs

    drawn = {"ns": [], "bars": 0, "methods": set(), "lost": 0}
    fails, top = 0, 0.0
    both = {"kpad", "nopad"} <= set(d["method"])
    shift = {"kpad": -2.5 / 72 * both, "nopad": 2.5 / 72 * both}  # kpad and nopad at one K side by side (inches)
    for method in ("kpad", "nopad"):
        rows = d[(d["method"] == method) & d["k"].notna()].sort_values("k")
        if rows.empty:
            continue
        ok = rows[rows["output_tok_s_median"].notna()]
        dodge = ax.transData + ScaledTranslation(shift[method], 0, ax.get_figure(root=True).dpi_scale_trans)
        dashed = palette.style(method, method, 8)["linestyle"]
        if len(ok):
            drawn["methods"].add(method)
            ax.plot(ok["k"].astype(int), ok["output_tok_s_median"], color=SWEEP_LINE, linestyle=dashed,
                    linewidth=1.2, label=method, transform=dodge, zorder=2)  # fmt: skip
        for _, r in ok.iterrows():
            k, y = int(r["k"]), float(r["output_tok_s_median"])
            st = palette.style(r["configuration"], method, k)
            mad = _spread(r)
            if not pd.isna(mad):
                ax.errorbar([k], [y], yerr=[mad], fmt="none", ecolor=st["color"], elinewidth=1, capsize=2.5,
                            transform=dodge, zorder=3)  # fmt: skip
                drawn["bars"] += 1
            ax.plot([k], [y], marker=st["marker"], color=st["color"], markerfacecolor=st["markerfacecolor"],
                    markeredgewidth=1.3, markersize=6, linestyle="none", label=f"_{method}{k}", transform=dodge,
                    zorder=4)  # fmt: skip
            drawn["ns"].append(_n_valid(r))
            top = max(top, y + (0 if pd.isna(mad) else mad))
        for _, r in ok[lost_graphs(ok)].iterrows():  # measured, but not as K-pad: decode steps without FULL cudagraphs
            k, y = int(r["k"]), float(r["output_tok_s_median"])
            ax.plot([k], [y], marker="x", color="black", markersize=9, linestyle="none", label="_graph lost", zorder=5)
            ax.annotate("graph lost", (k, y), fontsize=6, xytext=(4, 4), textcoords="offset points")
            drawn["lost"] += 1
        for k, g in rows[rows["output_tok_s_median"].isna()].groupby("k", sort=True):
            label = failure_label(g) if method == "kpad" else f"nopad: {failure_label(g)}"
            ax.plot([int(k)], [0], marker="x", color="0.3", markersize=7, linestyle="none",
                    label="_failed", clip_on=False, zorder=5)  # fmt: skip
            ax.annotate(label, (int(k), 0), textcoords="offset points", xytext=(0, 5 + 9 * (fails % 2)),
                        ha="center", fontsize=6, color="0.2")  # fmt: skip
            fails += 1
    drawn["fails"] = fails
    missing, refs = [], {}
    for name in REFERENCE_LINES:
        ref = d[d["configuration"] == name]
        if ref.empty:
            continue
        if pd.isna(ref.iloc[0]["output_tok_s_median"]):
            missing.append(f"{name}: {failure_label(ref)}")
        else:
            refs[name] = ref.iloc[0]
    for i, (name, r) in enumerate(sorted(refs.items(), key=lambda kv: kv[1]["output_tok_s_median"])):
        st = palette.style(name)
        y = float(r["output_tok_s_median"])
        ax.axhline(y, color=st["color"], linestyle=REFERENCE_LINES[name], linewidth=1.1, label=name, zorder=1)
        mad = _spread(r)
        if not pd.isna(mad):
            ax.axhspan(y - mad, y + mad, color=st["color"], alpha=0.10, linewidth=0, zorder=0)
            drawn["bars"] += 1
        top = max(top, y + (0 if pd.isna(mad) else mad))
        below = i == 0 and len(refs) > 1  # the lower of two lines is labelled under it, the upper above it
        ax.annotate(f"{name} {_tok_s(y)}", (1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(-2, -2 if below else 2), textcoords="offset points", ha="right",
                    va="top" if below else "bottom", fontsize=6, color=st["color"])  # fmt: skip
        drawn["ns"].append(_n_valid(r))
    drawn["refs"], drawn["missing"] = set(refs), missing
    drawn["top"] = top
    if missing:
        ax.text(0.02, 0.97, "; ".join(missing), transform=ax.transAxes, ha="left", va="top", fontsize=6, color="0.2")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks_all)
    ax.set_xticklabels([str(k) for k in ks_all])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlim(min(ks_all) / (1.7 if len(ks_all) == 1 else 1.25), max(ks_all) * (1.8 if label_room else 1.25))
    ax.tick_params(labelsize=7)
    return drawn


def _fill_footer(
    fig: plt.Figure,
    parts: tuple,
    main_height: float,
    handles: list,
    labels: list,
    legend_title: str,
    note: str | list[str],
    ncol: int,
) -> None:
    """Give the footer of ``parts`` (``(main, footer)``, from ``fig.subfigures(2, 1)``) the legend (``ncol``
    columns, titled ``legend_title``) and ``note`` (each note at most two lines, :func:`_note_lines`), and size the
    figure: ``main`` keeps ``main_height`` inches, the footer gets what its legend and note need. The legend
    never covers a panel, the note never wraps into the title; the legend is ``footer.legends[0]``."""
    main, footer = parts
    notes = [n for n in ([note] if isinstance(note, str) else note) if n]
    wrapped = [_note_lines(n, fig.get_figwidth()) for n in notes]
    text, size = "\n".join(w for w, _ in wrapped), min([s for _, s in wrapped] or [7.5])
    rows = -(-len(handles) // max(1, ncol)) if handles else 0
    legend_h = (0.19 * rows + (0.19 if legend_title else 0) + 0.08) if handles else 0.0
    note_h = 0.14 * (text.count("\n") + 1) + 0.06 if text else 0.0
    footer_h = legend_h + note_h + 0.04
    fig.set_figheight(main_height + footer_h)
    main._subplotspec.get_gridspec().set_height_ratios([main_height, footer_h])
    for sub in (main, footer):
        sub._redo_transform_rel_fig()
    if handles:
        footer.legend(handles, labels, loc="upper center", ncol=ncol, fontsize=7, title=legend_title or None,
                      title_fontsize=7, frameon=False, borderaxespad=0.1, handlelength=2.6)  # fmt: skip
    if text:
        footer.text(0.5, 0.03 / footer_h, text, ha="center", va="bottom", fontsize=size, color="0.25")


def k_sweep(cells: pd.DataFrame, note: str = "") -> plt.Figure:
    """K-sweep: median output tok/s per K, kpad against nopad at the same Ks, with van and suf as reference lines.

    Args:
        cells: a cells table (ours or :func:`kpadstudy.reference.published_cells`); only the K-sweep's rows are
            read (:func:`kpadstudy.tables.sweep_rows`: a confirmation is another phase, never mixed in).
        note: a line under the legend (hardware, versions), wrapped to at most two lines.

    One panel per (model, corpus) with kpad rows: a grid with a row per model and a column per corpus when the
    data have several of both, else the panels side by side (up to four a row). In each: kpad's medians on a
    solid grey line with filled markers, nopad's on a dashed one with open markers (each marker in its K's
    palette colour, :func:`kpadstudy.palette.style`), error bars of +- the MAD over the valid repeats where
    there are at least three (fewer: none, the MAD says nothing), van (dotted, black) and suf (dash-dot,
    orange) medians as labelled horizontal lines with a +- MAD band. The n of valid repeats is in the legend's
    title, and in a panel whose n differs from the rest. A K without a valid median is an x at the bottom
    labelled "did not boot" / "lost" / "failed" (:func:`kpadstudy.tables.failure_label`; "nopad: ..." for
    nopad); a K whose runs lost their FULL cudagraphs (cells ``graph_lost``) is crossed and labelled "graph
    lost"; a (model, corpus) of the grid without kpad rows says "not measured". Panels of one model share
    their y scale; models have their own (they differ by 40x in tok/s). x is K on a log2 axis. The legend
    (under the panels) lists everything any panel drew.
    """
    from matplotlib.lines import Line2D

    from . import palette
    from .tables import sweep_rows

    cells = sweep_rows(cells)  # the K-sweep's own repeats (a confirmation's reruns are another phase)
    kp = cells[cells["method"] == "kpad"]
    if kp.empty:
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "no kpad configurations in these data", ha="center", va="center")
        return fig
    models = sorted(kp["model"].unique())
    corpora = sorted(kp["corpus"].unique())
    ks_all = sorted({int(k) for k in cells[cells["method"].isin(["kpad", "nopad"])]["k"].dropna()})
    grid = len(models) > 1 and len(corpora) > 1
    pairs = sorted({(m, c) for m, c in zip(kp["model"], kp["corpus"], strict=True)})
    if grid:
        width, main_h = max(7.0, 2.15 * len(corpora) + 0.6), 1.75 * len(models) + 0.5
    else:
        ncol = min(4, len(pairs))
        nrow = -(-len(pairs) // ncol)
        width, main_h = max(6.5, 3.3 * ncol + 0.4), 2.8 * nrow + 0.5
    fig = plt.figure(figsize=(width, main_h), layout="constrained")
    # the panels are drawn first, the legend after (it lists what they drew): a footer of the right height
    # needs the legend's size, so the main part is built in a scratch subfigure layout and moved below
    panels, groups = [], []  # groups: panels sharing one y scale
    main_fig, footer_fig = fig.subfigures(2, 1, height_ratios=[main_h, 1.0])
    if grid:  # a row per model (its own subfigure, titled with the model), a column per corpus
        for sub, model in zip(np.atleast_1d(main_fig.subfigures(len(models), 1)), models, strict=True):
            sub.suptitle(model, fontsize=8, x=0.01, ha="left", fontweight="bold")
            axes = sub.subplots(1, len(corpora), sharey=True, squeeze=False)[0]
            groups.append(list(axes))
            for ax, corpus in zip(axes, corpora, strict=True):
                panels.append((ax, model, corpus, corpus))
            axes[0].set_ylabel("output tok/s", fontsize=7)
        header = ""
    else:  # one model or one corpus: the panels side by side, titled with what varies
        axes = main_fig.subplots(nrow, ncol, squeeze=False, sharey=len(models) == 1)
        panels = [(ax, m, c, c if len(models) == 1 else m) for ax, (m, c) in zip(axes.flat, pairs, strict=False)]
        groups = [[p[0] for p in panels]] if len(models) == 1 else [[p[0]] for p in panels]
        for ax in list(axes.flat)[len(pairs) :]:
            ax.axis("off")
        for row in axes:
            row[0].set_ylabel("output tok/s", fontsize=8)
        header = models[0] if len(models) == 1 else f"corpus {corpora[0]}"
        if len(pairs) == 1:
            header = f"{models[0]} / {corpora[0]}"
    drawn = {}
    label_room = bool(cells["configuration"].isin(list(REFERENCE_LINES)).any())
    for ax, model, corpus, title in panels:
        ax.set_gid(f"{model} / {corpus}")  # names the panel (tests; the SVG's group id)
        d = cells[(cells["model"] == model) & (cells["corpus"] == corpus)]
        if d[d["method"] == "kpad"].empty:
            ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", va="center", fontsize=7,
                    color="0.3")  # fmt: skip
            ax.set_xticks([])
            ax.tick_params(labelsize=7)
        else:
            drawn[ax] = _sweep_panel(ax, d, ks_all, label_room)
        if (not grid and len(panels) > 1) or (grid and model == models[0]):
            ax.set_title(title, fontsize=8)
        if not grid or model == models[-1]:
            ax.set_xlabel("K (draft tokens per step)", fontsize=7)
    for group in groups:  # y from 0 to above every median, bar, band and reference line of the group
        top = max([drawn[ax]["top"] for ax in group if ax in drawn] or [1.0])
        for ax in group:
            ax.set_ylim(0, top * 1.18)
    n_all = _n_text([n for p in drawn.values() for n in p["ns"]])
    for ax, p in drawn.items():  # a panel whose n differs from the figure's says so
        if _n_text(p["ns"]) and _n_text(p["ns"]) != n_all:
            y = 0.87 if p["missing"] else 0.97
            ax.text(0.02, y, _n_text(p["ns"]), transform=ax.transAxes, ha="left", va="top", fontsize=6, color="0.3")
    methods = set().union(*(p["methods"] for p in drawn.values()))
    handles, labels = [], []
    k_mid = 8 if 8 in ks_all else ks_all[0]
    for method, name in (("kpad", "kpad K (solid, filled)"), ("nopad", "nopad K (dashed, open)")):
        if method in methods:
            st = palette.style(method, method, k_mid)
            handles.append(Line2D([], [], color=SWEEP_LINE, linestyle=st["linestyle"], marker="o",
                                  markerfacecolor=st["markerfacecolor"], markeredgecolor=st["color"]))  # fmt: skip
            labels.append(name)
    for name, line in REFERENCE_LINES.items():  # every panel's reference lines (any model may lack them)
        if any(name in p["refs"] for p in drawn.values()):
            handles.append(Line2D([], [], color=palette.style(name)["color"], linestyle=line))
            labels.append(f"{name} (median)")
    if any(p["lost"] for p in drawn.values()):
        handles.append(Line2D([], [], color="black", marker="x", linestyle="none"))
        labels.append("graph lost")
    if any(p["fails"] for p in drawn.values()):
        handles.append(Line2D([], [], color="0.3", marker="x", markersize=6, linestyle="none"))
        labels.append("no valid run")
    for k in ks_all:
        handles.append(Line2D([], [], color=palette.k_colour(k), marker="o", linestyle="none"))
        labels.append(f"K{k}")
    bars = sum(p["bars"] for p in drawn.values())
    spread = "bars and bands: median ± MAD where n ≥ 3" if bars else "no spread drawn (MAD needs n ≥ 3)"
    n_title = f"points: medians over valid repeats, {n_all}" if n_all else "points: medians (n unknown)"
    title = "K-sweep: median output tok/s per K" + (", kpad vs nopad" if "nopad" in methods else " (kpad)")
    main_fig.suptitle(title + (f" - {header}" if header else ""), fontsize=10)
    _fill_footer(fig, (main_fig, footer_fig), main_h, handles, labels, f"{n_title}; {spread}", note,
                 _legend_ncol(labels, width))  # fmt: skip
    return fig


def van_suf_bestkpad(cells: pd.DataFrame, corpus: str = "mix", note: str = "") -> plt.Figure:
    """van -> suf (and every other configuration outside the K sweep: ngram, Trident, ...) -> bestKpad per
    model on ``corpus``: bars in multiples of van's median output tok/s.

    Args:
        cells: a cells table; bestKpad as in :func:`kpadstudy.tables.best_kpad` (a separate bestKpad
            measurement where there is one, else the sweep's best K).
        corpus: the corpus drawn (the study's mix table).
        note: a line under the title.

    Bars are annotated ``x<ratio>``; a configuration without a valid median gets no bar but a "did not
    boot" / "failed" / "not measured" label; with no valid van, no ratio exists and the model says so.
    """
    from .tables import best_kpad, comparison_rows, failure_label

    d = comparison_rows(cells[cells["corpus"] == corpus])  # one phase per cell: its confirmation, else its sweep
    if d.empty:
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, f"no cells for corpus {corpus!r} in these data", ha="center", va="center")
        return fig
    best = best_kpad(cells[cells["corpus"] == corpus]).set_index("model")
    models = sorted(best.index)
    others = list(pd.unique(d.loc[~d["method"].isin(["van", "kpad", "nopad", "bestkpad"]), "configuration"]))
    names = ["van", *others, "bestKpad"]
    colors = dict(zip(names, ["0.6", *sns.color_palette("tab10", len(others) + 1)], strict=True))
    bar = 0.8 / len(names)
    width = max(6.0, 0.4 * len(names) * len(models) + 2)
    fig, ax = plt.subplots(figsize=(width, 4.4))
    for j, name in enumerate(names):
        for i, m in enumerate(models):
            x = i + (j - (len(names) - 1) / 2) * bar
            van = best.loc[m, "van_tok_s"]
            if name == "bestKpad":
                v = best.loc[m, "best_kpad_tok_s"]
                rows = d[(d["model"] == m) & d["method"].isin(["kpad", "bestkpad"])]
            else:
                rows = d[(d["model"] == m) & (d["configuration"] == name)]
                medians = rows["output_tok_s_median"].dropna()
                v = medians.iloc[0] if len(medians) else np.nan
            if pd.isna(van) or pd.isna(v):
                why = failure_label(rows) if pd.isna(v) else "no valid van"
                ax.annotate(why, (x, 0), rotation=90, ha="center", va="bottom", fontsize=7, color="0.3")
                continue
            ratio = v / van
            ax.bar(x, ratio, width=bar * 0.92, color=colors[name], label=name if i == 0 else None)
            k = best.loc[m, "best_k"]
            ax.annotate(
                f"x{ratio:.2f}" + (f"\nK{int(k)}" if name == "bestKpad" and pd.notna(k) else ""),
                (x, ratio),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("median output tok/s / van's")
    ax.margins(y=0.15)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8)
    _title(ax, f"{' -> '.join(names)} on {corpus} (multiples of van)", note, width)
    fig.tight_layout()
    return fig


#: markers of our rows in :func:`ours_vs_published`, one per (model, device), in this order
OURS_MARKERS = ["o", "s", "D", "^", "v", "P", "X", "h"]
MIX_NOTE = "mix: published and ours are different mixes"


def _n_of(cells: pd.DataFrame | None, model: str, corpus: str, configurations: list[str]) -> float:
    """The fewest valid repeats among ``configurations`` of one cell in ``cells``, in the rows its comparisons
    read (:func:`kpadstudy.tables.comparison_rows`; ``"bestkpad"`` also matches a confirmation's bestkpad
    rows). NaN: no cells, no ``n_valid`` or no rows."""
    if cells is None or "n_valid" not in cells:
        return float("nan")
    from .tables import comparison_rows

    c = comparison_rows(cells)
    wanted = c["configuration"].isin(configurations) | (c["method"].isin(["bestkpad"]) & ("bestkpad" in configurations))
    rows = c[(c["model"] == model) & (c["corpus"] == corpus) & wanted]
    return float(rows["n_valid"].min()) if len(rows) else float("nan")


def ours_vs_published(table: pd.DataFrame, note: str = "", cells: pd.DataFrame | None = None) -> plt.Figure:
    """Ours vs published per corpus, ratios only: bestKpad/suf and bestKpad/van, two panels.

    Args:
        table: :func:`kpadstudy.compare.compare`'s table.
        note: a line under the legend (the CPU caveat when ours ran on CPU).
        cells: our cells table: with it, the legend gives each of our models its n of valid repeats (per
            ratio the fewest among bestKpad, suf and van, :func:`_n_of`; a range where corpora differ); else
            an ``n_valid`` column of ``table``; else "n not given".

    Published: a grey bar from min to max over the compared models and a black tick at their median (one
    model: just the tick), n = the number of published models. Ours: a marker per (model, device) (circle,
    square, diamond, ... in :data:`OURS_MARKERS`' order) in the palette colour of its best K
    (:func:`kpadstudy.palette.k_colour`), labelled with its value and K. A corpus where the study publishes no
    van/suf says "not published"; ours without a valid ratio says "no valid run". The mix column says that
    the published mix and ours are different workloads (:data:`MIX_NOTE`): the published mix is faster than
    every published single corpus for every model at its best K, ours is this study's own mix. The legend is
    under the panels (never over a bar or a dot).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from . import palette

    corpora = sorted(table["corpus"].unique())
    ours = list(dict.fromkeys(zip(table["model"], table["device"], strict=True)))
    markers = {key: OURS_MARKERS[i % len(OURS_MARKERS)] for i, key in enumerate(ours)}
    width = max(7.0, 2.0 * len(corpora) + 3)
    main_h = 3.9
    fig = plt.figure(figsize=(width, main_h), layout="constrained")
    main, footer = fig.subfigures(2, 1, height_ratios=[main_h, 1.0])
    axes = main.subplots(1, 2)
    n_published = sorted({int(n) for n in table.get("published_models", pd.Series(dtype=int)).dropna()})
    published_n = "/".join(str(n) for n in n_published) + " " if n_published else ""
    ks: set[int] = set()
    ns: dict[tuple, list[float]] = {}  # (model, device) -> n of each ratio drawn
    for ax, ratio, label in zip(
        axes, ["bestkpad_over_suf", "bestkpad_over_van"], ["bestKpad / suf", "bestKpad / van"], strict=True
    ):
        top = 1.0
        for i, corpus in enumerate(corpora):
            t = table[table["corpus"] == corpus]
            p = t.iloc[0]
            med, lo, hi = p[f"published_{ratio}"], p[f"published_{ratio}_min"], p[f"published_{ratio}_max"]
            if pd.isna(med):
                ax.annotate("not published", (i - 0.18, 0.05), rotation=90, ha="center", va="bottom", fontsize=7,
                            color="0.4")  # fmt: skip
            else:
                if not pd.isna(lo) and not pd.isna(hi) and hi > lo:
                    ax.vlines(i - 0.18, lo, hi, color="0.75", linewidth=7, label="_published range")
                ax.plot([i - 0.18], [med], marker="_", markersize=16, markeredgewidth=2, color="black",
                        linestyle="none", label="published (median)")  # fmt: skip
                top = max(top, float(hi) if not pd.isna(hi) else float(med))
            step = 0.36 / max(1, len(t))
            for j, (_, o) in enumerate(t.iterrows()):
                x = i + 0.12 + j * step
                if pd.isna(o[ratio]):
                    ax.annotate("no valid run", (x, 0.05), rotation=90, ha="center", va="bottom", fontsize=7,
                                color="0.3")  # fmt: skip
                    continue
                k = None if pd.isna(o["best_k"]) else int(o["best_k"])
                colour = palette.k_colour(k) if k is not None else palette.OTHER[0]
                if k is not None:
                    ks.add(k)
                ax.plot([x], [o[ratio]], marker=markers[(o["model"], o["device"])], color=colour, markersize=8,
                        markeredgecolor="black", markeredgewidth=0.6, linestyle="none",
                        label=f"ours: {o['model']} ({o['device']})")  # fmt: skip
                ax.annotate(f"{o[ratio]:.2f}" + (f" K{k}" if k is not None else ""), (x, o[ratio]),
                            textcoords="offset points", xytext=(7, 0), fontsize=7, va="center")  # fmt: skip
                top = max(top, float(o[ratio]))
                n = o["n_valid"] if "n_valid" in o else float("nan")
                if pd.isna(n) and k is not None:
                    n = _n_of(cells, o["model"], o["corpus"], [f"kpad{k}", "bestkpad", "suf", "van"])
                key = (o["model"], o["device"])
                ns.setdefault(key, []).append(n)
            if corpus == "mix":
                ax.annotate(MIX_NOTE.replace(" are ", "\nare "), (i, 0.985), xycoords=("data", "axes fraction"),
                            ha="center", va="top", fontsize=6.5, style="italic", color="0.15",
                            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "0.6",
                                  "linewidth": 0.5})  # fmt: skip
        ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
        ax.set_xticks(range(len(corpora)))
        ax.set_xticklabels([f"{c}*" if c == "mix" else c for c in corpora], fontsize=8)
        ax.set_xlim(-0.6, len(corpora) - 0.4)
        ax.set_ylim(0, top * 1.3)
        ax.set_ylabel(f"{label} (ratio of median output tok/s)", fontsize=8)
        ax.set_title(f"{label} (> 1: bestKpad faster)", fontsize=9)
        ax.tick_params(labelsize=7)
    handles, labels = [], []
    drawn = {line.get_label() for ax in axes for line in ax.get_lines()} | {
        c.get_label() for ax in axes for c in ax.collections
    }
    if "_published range" in drawn:
        handles.append(Patch(facecolor="0.75"))
        labels.append(f"published: min-max over {published_n}models (n = 1 run each)")
    if "published (median)" in drawn:
        handles.append(Line2D([], [], marker="_", markersize=12, markeredgewidth=2, color="black", linestyle="none"))
        labels.append(f"published: median of {published_n}models" if "_published range" in drawn else "published")
    for key in ours:
        n = _n_text(ns.get(key, []))
        handles.append(Line2D([], [], marker=markers[key], color="0.55", markeredgecolor="black",
                              markeredgewidth=0.6, linestyle="none", markersize=7))  # fmt: skip
        labels.append(
            f"ours: {key[0]} ({key[1]}), " + (f"{n} repeat{'' if n == 'n = 1' else 's'}" if n else "n not given")
        )
    for k in sorted(ks):
        handles.append(Line2D([], [], marker="o", color=palette.k_colour(k), linestyle="none", markersize=7))
        labels.append(f"ours at best K{k}")
    main.suptitle("Ours vs published: speed-up ratios per corpus (absolute tok/s never compared)", fontsize=10)
    mix = (
        "* mix: the published mix is a different workload from ours (it is faster than every published single "
        "corpus at each model's best K); ours is this study's own mix"
        if "mix" in corpora
        else ""
    )
    _fill_footer(fig, (main, footer), main_h, handles, labels, "", [mix, note], _legend_ncol(labels, width))
    return fig


def _place_labels(points: list[tuple[float, float]], texts: list[str], size: float = 7.0) -> list[tuple[float, float]]:
    """Offsets (points) for small labels of ``points`` (display coordinates, in points) that overlap no other
    label and no point: the first free candidate around each point, nearest first; a label with no free
    place keeps the first candidate."""
    candidates = [(5, 3), (5, -10), (-5, 3), (-5, -10), (5, 11), (-5, 11), (5, -18), (-5, -18), (12, -4), (-12, -4),
                  (5, 19), (-5, 19), (5, -26), (-5, -26)]  # fmt: skip
    placed: list[tuple[float, float, float, float]] = []
    marks = [(x - 4, y - 4, x + 4, y + 4) for x, y in points]
    out = []
    for (x, y), text in zip(points, texts, strict=True):
        w, h = 0.62 * size * len(text) + 1, size + 1
        choice = candidates[0]
        for dx, dy in candidates:
            x0 = x + dx if dx >= 0 else x + dx - w
            box = (x0, y + dy, x0 + w, y + dy + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed + marks):
                choice = (dx, dy)
                break
        dx, dy = choice
        x0 = x + dx if dx >= 0 else x + dx - w
        placed.append((x0, y + dy, x0 + w, y + dy + h))
        out.append(choice)
    return out


def k_vs_r(table: pd.DataFrame, note: str = "", cells: pd.DataFrame | None = None) -> plt.Figure:
    """K-bar / R predicted speed-up (x) against the measured speed-up over van (y), one point per configuration.

    Args:
        table: :func:`kpadstudy.stepcost.step_cost`'s table, optionally with a ``dataset`` column (e.g. "CPU
            embedded", "H200 embedded") and ``n_valid``.
        note: a line under the title.
        cells: the cells table behind ``table``: with it (or ``n_valid`` in ``table``) the key gives each
            point's n (valid repeats of its medians) and van's.

    Each point has its configuration's colour and marker (:func:`kpadstudy.palette.style`: kpad filled, nopad
    open, suf orange square ...) and a number; the key beside the axes lists the numbers with configuration,
    corpus, predicted and measured speed-up and n. Several datasets: the numbers carry the dataset's letter
    (A1, B1; the key names the letters). Labels are placed where they overlap no other label or point. How R
    was measured (engine steps, or TPOT where van's steps were not counted) is in the key where it differs,
    else in the x label. The diagonal is prediction = measurement, the dotted lines at 1 are van. Rows without
    a number are listed in the key as "no valid run", never drawn.
    """
    from matplotlib.lines import Line2D

    from . import palette

    if table.empty:  # e.g. a study without van: no step-cost ratio, no speed-up over van
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "no step-cost rows: K-bar / R needs van in the same cell", ha="center", va="center")
        return fig
    t = table.reset_index(drop=True).copy()
    if "dataset" not in t:
        t["dataset"] = ""
    if "n_valid" not in t:
        t["n_valid"] = [
            _n_of(cells, r["model"], r["corpus"], [r["configuration"]]) for _, r in t.iterrows()
        ]  # fmt: skip
    t["van_n"] = [_n_of(cells, r["model"], r["corpus"], ["van"]) for _, r in t.iterrows()]
    datasets = list(dict.fromkeys(t["dataset"]))
    letters = {ds: (chr(ord("A") + i) if len(datasets) > 1 else "") for i, ds in enumerate(datasets)}
    ok = t[t["predicted_speedup"].notna() & t["measured_speedup"].notna()]
    missing = t.drop(ok.index)
    sources = set(ok["r_from"].dropna())
    ok = ok.assign(_label=[f"{letters[ds]}{i + 1}" for i, ds in enumerate(ok["dataset"])])
    entries = []  # (handle, label) of the key
    for ds in datasets:
        if letters[ds]:
            entries.append((Line2D([], [], linestyle="none"), f"{letters[ds]} = {ds}"))
        for _, r in ok[ok["dataset"] == ds].iterrows():
            st = palette.style(r["configuration"], r.get("method"), r.get("k"))
            n = f", n = {int(r['n_valid'])}" if not pd.isna(r["n_valid"]) else ""
            src = f", R: {r['r_from']}" if len(sources) > 1 else ""
            entries.append((
                Line2D([], [], marker=st["marker"], color=st["color"], markerfacecolor=st["markerfacecolor"],
                       linestyle="none", markersize=7),
                f"{r['_label']}  {r['configuration']} {r['corpus']}: {r['predicted_speedup']:.2f} -> "
                f"{r['measured_speedup']:.2f}{n}{src}",
            ))  # fmt: skip
        for _, r in missing[missing["dataset"] == ds].iterrows():
            entries.append((Line2D([], [], marker="x", color="0.4", linestyle="none"),
                            f"-  {r['configuration']} {r['corpus']}: no valid run"))  # fmt: skip
    van_n = sorted({int(n) for n in t["van_n"].dropna()})
    known = bool(van_n) or t["n_valid"].notna().any()
    key_title = "predicted -> measured" + (
        f" (van: n = {'/'.join(map(str, van_n))})" if van_n else "" if known else " (n not given)"
    )
    key_w = max([len(lab) for _, lab in entries] + [len(key_title)]) * 7 * 0.52 / 72 + 0.5
    side, left, bottom, gap = 4.2, 0.75, 0.8, 0.15
    width = left + side + gap + key_w + 0.1
    text, size = _note_lines(note, width, fontsize=8)
    top_h = 0.4 + (0.15 * (text.count("\n") + 1) if text else 0)
    height = max(bottom + side + top_h, bottom + 0.3 + 0.19 * len(entries) + top_h)
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((left / width, bottom / height, side / width, side / height))
    values = ok[["predicted_speedup", "measured_speedup"]].to_numpy(dtype=float)
    lim = [0.0, max(1.6, float(np.nanmax(values)) * 1.1 if len(ok) else 1.6)]
    ax.plot(lim, lim, color="0.5", linestyle="--", linewidth=0.8)
    ax.axhline(1.0, color="black", linewidth=0.5, linestyle=":")
    ax.axvline(1.0, color="black", linewidth=0.5, linestyle=":")
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    for _, r in ok.iterrows():
        st = palette.style(r["configuration"], r.get("method"), r.get("k"))
        ax.plot([r["predicted_speedup"]], [r["measured_speedup"]], marker=st["marker"], color=st["color"],
                markerfacecolor=st["markerfacecolor"], markeredgewidth=1.3, markersize=7, linestyle="none",
                label=r["_label"], zorder=3)  # fmt: skip
    scale = side * 72 / (lim[1] - lim[0])  # data -> points (both axes share the limits and the size)
    points = [(x * scale, y * scale) for x, y in values]
    for (_, r), (dx, dy) in zip(ok.iterrows(), _place_labels(points, list(ok["_label"])), strict=True):
        ax.annotate(r["_label"], (r["predicted_speedup"], r["measured_speedup"]), textcoords="offset points",
                    xytext=(dx, dy), ha="left" if dx >= 0 else "right", va="bottom", fontsize=7)  # fmt: skip
    r_note = f" (R from {next(iter(sources))})" if len(sources) == 1 else ""
    ax.set_xlabel(f"predicted speed-up K-bar / R{r_note}\n(tokens per request-step / step-cost ratio to van)",
                  fontsize=8)  # fmt: skip
    ax.set_ylabel("measured speed-up (output tok/s / van's)", fontsize=8)
    ax.tick_params(labelsize=7)
    if entries:
        ax.legend([h for h, _ in entries], [lab for _, lab in entries], loc="upper left",
                  bbox_to_anchor=(1 + gap / side, 1.0), borderaxespad=0, fontsize=7, title=key_title,
                  title_fontsize=7, frameon=False, alignment="left")  # fmt: skip
    fig.suptitle("K-bar > R? predicted against measured speed-up over van, per configuration", fontsize=10,
                 y=1 - 0.08 / height, va="top")  # fmt: skip
    if text:
        fig.text(0.5, 1 - 0.36 / height, text, ha="center", va="top", fontsize=size, color="0.25")
    return fig


def _tok_s(value: float) -> str:
    """Output tok/s for a label: whole numbers from 100 up (GPU), one decimal below (CPU)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
