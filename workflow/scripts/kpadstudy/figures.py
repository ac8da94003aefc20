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


def best_k_heatmap(best: pd.DataFrame, note: str = "") -> plt.Figure:
    """Best-K heatmap: rows = model, columns = corpus, colour = best K, annotation = K and its output tok/s.

    Args:
        best: the table of :func:`kpadstudy.tables.best_kpad`.
        note: a line under the title (e.g. the hardware, or why CPU numbers look the way they do).

    A cell without any valid kpad run is left blank and annotated "no valid run".
    """
    k_table = best.pivot(index="model", columns="corpus", values="best_k").astype("float")
    tok = best.pivot(index="model", columns="corpus", values="best_kpad_tok_s")
    ks = sorted(int(k) for k in np.unique(k_table.values[~np.isnan(k_table.values)]))
    annot = k_table.copy().astype(object)
    for m in k_table.index:
        for c in k_table.columns:
            k = k_table.loc[m, c]
            annot.loc[m, c] = "no valid run" if np.isnan(k) else f"K{int(k)}\n{tok.loc[m, c]:,.1f} tok/s"
    # one colour per K actually present; index of K in `ks` is what is drawn
    idx = k_table.apply(lambda col: col.map(lambda k: ks.index(int(k)) if not np.isnan(k) else np.nan))
    width = max(6.0, 3.0 + 1.9 * len(k_table.columns))
    fig, ax = plt.subplots(figsize=(width, 2.2 + 0.7 * len(k_table.index)))
    cmap = sns.color_palette("viridis", max(len(ks), 1))
    sns.heatmap(idx.astype(float), annot=annot.values, fmt="", cmap=cmap, cbar=bool(ks), vmin=-0.5, vmax=len(ks) - 0.5,
                linewidths=0.5, linecolor="white", ax=ax, annot_kws={"fontsize": 8})
    # seaborn masks NaN cells and skips their annotation: mark them ourselves
    for i, m in enumerate(k_table.index):
        for j, c in enumerate(k_table.columns):
            if np.isnan(k_table.loc[m, c]):
                ax.add_patch(plt.Rectangle((j, i), 1, 1, fill=False, hatch="//", edgecolor="0.6", linewidth=0))
                ax.text(j + 0.5, i + 0.5, "no valid run", ha="center", va="center", fontsize=8, color="0.2")
    if ks:
        cbar = ax.collections[0].colorbar
        cbar.set_ticks(range(len(ks)))
        cbar.set_ticklabels([f"K{k}" for k in ks])
        cbar.set_label("best K (kpad)")
    ax.set_xlabel("corpus")
    ax.set_ylabel("")
    plt.setp(ax.get_yticklabels(), rotation=0)
    _title(ax, "Best K per cell (kpad, median output tok/s)", note, width)
    fig.tight_layout()
    return fig


def bestkpad_over_suf(best: pd.DataFrame, corpus: str = "mix", note: str = "") -> plt.Figure:
    """Bar per model: bestKpad median output tok/s over suf's, in percent, on ``corpus``.

    Models where either side has no valid run get no bar and a "no valid run" label; a corpus absent
    from ``best`` gives a figure that says so.
    """
    d = best[best["corpus"] == corpus].sort_values("model")
    if d.empty:
        fig, ax = plt.subplots(figsize=(6.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, f"no cells for corpus {corpus!r} in these data\n(corpora: {', '.join(sorted(best['corpus'].unique()))})",
                ha="center", va="center")
        return fig
    gain = (d["bestkpad_over_suf"] - 1.0) * 100.0
    width = max(6.0, 1.1 * len(d) + 2)
    fig, ax = plt.subplots(figsize=(width, 4.2))
    colors = ["tab:green" if g >= 0 else "tab:red" for g in gain.fillna(0)]
    ax.bar(d["model"], gain.fillna(0), color=colors)
    for i, (g, k) in enumerate(zip(gain, d["best_k"])):
        label = "no valid run" if pd.isna(g) else f"{g:+.1f}% (K{k})"
        ax.annotate(label, (i, 0 if pd.isna(g) else g), ha="center", va="bottom" if (pd.isna(g) or g >= 0) else "top", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.margins(y=0.15)
    ax.set_ylabel("bestKpad over suf (%)")
    ax.set_xlabel("model")
    _title(ax, f"bestKpad vs suf on {corpus} (median output tok/s)", note, width)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    return fig
