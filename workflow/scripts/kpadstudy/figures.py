"""Figures. Each function takes a DataFrame and returns a matplotlib Figure; none reads files or runs anything."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


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
    fig, ax = plt.subplots(figsize=(1.8 + 1.9 * len(k_table.columns), 1.4 + 0.7 * len(k_table.index)))
    cmap = sns.color_palette("viridis", max(len(ks), 1))
    sns.heatmap(idx.astype(float), annot=annot.values, fmt="", cmap=cmap, cbar=bool(ks), vmin=-0.5, vmax=len(ks) - 0.5,
                linewidths=0.5, linecolor="white", ax=ax, annot_kws={"fontsize": 8})
    if ks:
        cbar = ax.collections[0].colorbar
        cbar.set_ticks(range(len(ks)))
        cbar.set_ticklabels([f"K{k}" for k in ks])
        cbar.set_label("best K (kpad)")
    ax.set_xlabel("corpus")
    ax.set_ylabel("model")
    ax.set_title("Best K per cell (kpad, median output tok/s)" + (f"\n{note}" if note else ""), fontsize=10)
    fig.tight_layout()
    return fig


def bestkpad_over_suf(best: pd.DataFrame, corpus: str = "mix", note: str = "") -> plt.Figure:
    """Bar per model: bestKpad median output tok/s over suf's, in percent, on ``corpus``.

    Models where either side has no valid run get no bar and an "no valid run" label.
    """
    d = best[best["corpus"] == corpus].sort_values("model")
    gain = (d["bestkpad_over_suf"] - 1.0) * 100.0
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(d) + 2), 3.6))
    colors = ["tab:green" if g >= 0 else "tab:red" for g in gain.fillna(0)]
    ax.bar(d["model"], gain.fillna(0), color=colors)
    for i, (g, k) in enumerate(zip(gain, d["best_k"])):
        label = "no valid run" if pd.isna(g) else f"{g:+.1f}% (K{k})"
        ax.annotate(label, (i, 0 if pd.isna(g) else g), ha="center", va="bottom" if (pd.isna(g) or g >= 0) else "top", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("bestKpad over suf (%)")
    ax.set_xlabel("model")
    ax.set_title(f"bestKpad vs suf on {corpus} (median output tok/s)" + (f"\n{note}" if note else ""), fontsize=10)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    return fig
