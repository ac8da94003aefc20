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


def _failed_mark(ax: plt.Axes, x: float, y: float, label: str, color: str = "0.3") -> None:
    """An x marker and a text label at (x, y): a configuration with no valid run, never drawn as a number."""
    ax.plot([x], [y], marker="x", color=color, markersize=8, linestyle="none")
    ax.annotate(label, (x, y), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=7, color=color)


def k_sweep(cells: pd.DataFrame, note: str = "") -> plt.Figure:
    """K-sweep lines: one panel per model, one line per corpus, x = kpad K, y = median output tok/s.

    Args:
        cells: a cells table (ours or :func:`kpadstudy.reference.published_cells`); only ``method == "kpad"``
            rows are drawn.
        note: a line under the title.

    A K without a valid median is not a point of the line: it gets an x at the panel's bottom labelled
    "did not boot" or "failed" (:func:`kpadstudy.tables.failure_label`). A K whose runs lost their FULL
    cudagraphs (cells ``graph_lost``) is crossed and labelled "graph lost": it is never a best K. Panels have
    their own y scale (models differ by 40x in tok/s).
    """
    from .tables import failure_label, lost_graphs, sweep_rows

    cells = sweep_rows(cells)  # the K-sweep's own repeats (a confirmation's reruns are another phase)
    kp = cells[cells["method"] == "kpad"].copy()
    models = sorted(kp["model"].unique())
    if not models:
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "no kpad configurations in these data", ha="center", va="center")
        return fig
    ncol = min(4, len(models))
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 2.9 * nrow + 0.8), squeeze=False)
    corpora = sorted(kp["corpus"].unique())
    colors = dict(zip(corpora, sns.color_palette("tab10", len(corpora)), strict=True))
    for ax, model in zip(axes.flat, models, strict=False):
        d = kp[kp["model"] == model]
        for corpus in corpora:
            c = d[d["corpus"] == corpus].sort_values("k")
            ok = c[c["output_tok_s_median"].notna()]
            if len(ok):
                ax.plot(ok["k"].astype(int), ok["output_tok_s_median"], marker="o", color=colors[corpus], label=corpus)
            lost = ok[lost_graphs(ok)]
            for _, r in lost.iterrows():  # measured, but not as K-pad: decode steps without FULL cudagraphs
                ax.plot(int(r["k"]), r["output_tok_s_median"], marker="x", color="black", markersize=9)
                ax.annotate(
                    "graph lost",
                    (int(r["k"]), r["output_tok_s_median"]),
                    fontsize=6,
                    xytext=(3, 3),
                    textcoords="offset points",
                )
        ax.set_ylim(bottom=0)
        for _, r in d[d["output_tok_s_median"].isna()].iterrows():
            _failed_mark(
                ax,
                int(r["k"]),
                0,
                failure_label(d[(d["corpus"] == r["corpus"]) & (d["k"] == r["k"])]) + f" ({r['corpus']})",
                colors[r["corpus"]],
            )
        ax.set_title(model, fontsize=9)
        ax.set_xticks(sorted(kp["k"].dropna().astype(int).unique()))
        ax.set_xlabel("K (kpad)", fontsize=8)
        ax.set_ylabel("output tok/s (median)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(models) :]:
        ax.axis("off")
    legend = {}  # every panel's lines (the first model may have no valid kpad run at all)
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    if legend:
        fig.legend(
            list(legend.values()),
            list(legend),
            loc="lower center",
            ncol=min(7, len(legend)),
            fontsize=8,
            title="corpus",
            title_fontsize=8,
        )
    wrapped = textwrap.fill(note, width=max(30, int(3.6 * ncol * 11))) if note else ""
    fig.suptitle("K-sweep: median output tok/s per kpad K" + (f"\n{wrapped}" if wrapped else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
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


def ours_vs_published(table: pd.DataFrame, note: str = "") -> plt.Figure:
    """Ours vs published per corpus, ratios only: bestKpad/suf and bestKpad/van, two panels.

    Args:
        table: :func:`kpadstudy.compare.compare`'s table.
        note: a line under the title (the CPU caveat when ours ran on CPU).

    Published: a bar from min to max over the compared models and a black tick at their median (one
    model: just the tick); ours: a coloured dot per model, labelled with its value. A corpus where the
    study publishes no van/suf says "not published"; ours without a valid ratio says "no valid run".
    """
    corpora = sorted(table["corpus"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 2.0 * len(corpora) + 3), 4.2))
    for ax, ratio, label in zip(
        axes, ["bestkpad_over_suf", "bestkpad_over_van"], ["bestKpad / suf", "bestKpad / van"], strict=True
    ):
        for i, corpus in enumerate(corpora):
            t = table[table["corpus"] == corpus]
            p = t.iloc[0]
            med, lo, hi = p[f"published_{ratio}"], p[f"published_{ratio}_min"], p[f"published_{ratio}_max"]
            if pd.isna(med):
                ax.annotate(
                    "not published", (i - 0.15, 1.0), rotation=90, ha="center", va="bottom", fontsize=7, color="0.4"
                )
            else:
                ax.vlines(
                    i - 0.15,
                    lo,
                    hi,
                    color="0.7",
                    linewidth=6,
                    label="published (min-max)"
                    if i == 0 or "published (min-max)" not in ax.get_legend_handles_labels()[1]
                    else None,
                )
                ax.plot(
                    [i - 0.15],
                    [med],
                    marker="_",
                    markersize=14,
                    color="black",
                    linestyle="none",
                    label="published (median)"
                    if "published (median)" not in ax.get_legend_handles_labels()[1]
                    else None,
                )
            for _, o in t.iterrows():
                if pd.isna(o[ratio]):
                    ax.annotate(
                        "no valid run", (i + 0.15, 1.0), rotation=90, ha="center", va="bottom", fontsize=7, color="0.3"
                    )
                    continue
                lab = f"ours: {o['model']} ({o['device']})"
                ax.plot(
                    [i + 0.15],
                    [o[ratio]],
                    marker="o",
                    color="tab:red" if o["device"] == "cpu" else "tab:green",
                    linestyle="none",
                    label=lab if lab not in ax.get_legend_handles_labels()[1] else None,
                )
                ax.annotate(
                    f"{o[ratio]:.2f}",
                    (i + 0.15, o[ratio]),
                    textcoords="offset points",
                    xytext=(6, 0),
                    fontsize=7,
                    va="center",
                )
        ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
        ax.set_xticks(range(len(corpora)))
        ax.set_xticklabels(corpora, fontsize=8)
        ax.set_xlim(-0.6, len(corpora) - 0.4)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(label)
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    wrapped = textwrap.fill(note, width=max(30, int(fig.get_figwidth() * 11))) if note else ""
    fig.suptitle(
        "Ours vs published: ratios of median output tok/s (absolute tok/s never compared)"
        + (f"\n{wrapped}" if wrapped else ""),
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def k_vs_r(table: pd.DataFrame, note: str = "") -> plt.Figure:
    """K-bar / R predicted speed-up (x) against the measured speed-up over van (y), one point per configuration.

    Args:
        table: :func:`kpadstudy.stepcost.step_cost`'s table, optionally with a ``dataset`` column (one
            colour each, e.g. "CPU embedded", "H200 embedded").
        note: a line under the title.

    Points are labelled ``<configuration> <corpus>`` and marked by how R was measured (circle: engine
    steps, triangle: TPOT); the diagonal is prediction = measurement, the lines at 1 are van. Rows
    without a number are listed as "no valid run" under the axes, never drawn.
    """
    if table.empty:  # e.g. a study without van: no step-cost ratio, no speed-up over van
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "no step-cost rows: K-bar / R needs van in the same cell", ha="center", va="center")
        return fig
    t = table.copy()
    if "dataset" not in t:
        t["dataset"] = t["device"]
    fig, ax = plt.subplots(figsize=(6.8, 5.6))
    datasets = sorted(t["dataset"].unique())
    colors = dict(zip(datasets, sns.color_palette("tab10", max(1, len(datasets))), strict=False))
    ok = t[t["predicted_speedup"].notna() & t["measured_speedup"].notna()]
    for (ds, src), g in ok.groupby(["dataset", "r_from"]):
        ax.scatter(
            g["predicted_speedup"],
            g["measured_speedup"],
            color=colors[ds],
            marker="o" if src == "engine steps" else "^",
            label=f"{ds} (R from {src})",
        )
        for _, r in g.iterrows():
            ax.annotate(
                f"{r['configuration']} {r['corpus']}",
                (r["predicted_speedup"], r["measured_speedup"]),
                textcoords="offset points",
                xytext=(4, 3),
                fontsize=6,
            )
    lim = [
        0.0,
        max(1.6, float(np.nanmax(ok[["predicted_speedup", "measured_speedup"]].values)) * 1.1 if len(ok) else 1.6),
    ]
    ax.plot(lim, lim, color="0.5", linestyle="--", linewidth=0.8)
    ax.axhline(1.0, color="black", linewidth=0.5, linestyle=":")
    ax.axvline(1.0, color="black", linewidth=0.5, linestyle=":")
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    ax.set_xlabel("predicted speed-up K-bar / R (tokens per request-step / step-cost ratio)")
    ax.set_ylabel("measured speed-up (output tok/s / van's)")
    missing = t[t["predicted_speedup"].isna() | t["measured_speedup"].isna()]
    if len(missing):
        ax.text(
            0.01,
            -0.14,
            "no valid run: " + ", ".join(f"{r['configuration']} {r['corpus']}" for _, r in missing.iterrows()),
            transform=ax.transAxes,
            fontsize=7,
        )
    if len(ok):
        ax.legend(fontsize=7, loc="upper left")
    _title(ax, "K-bar > R? predicted vs measured speed-up over van", note, 6.8)
    fig.tight_layout()
    return fig


def _tok_s(value: float) -> str:
    """Output tok/s for a label: whole numbers from 100 up (GPU), one decimal below (CPU)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
