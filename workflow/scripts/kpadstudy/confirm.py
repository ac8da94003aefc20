"""Confirmation of the K-sweep's best K: pick it, order the reruns, tabulate them, prefer them.

The sweep's best kpad K is the highest of several noisy medians, so its number is biased upward (the
winner's curse). After the sweep, each cell runs van, suf (and every other configuration outside the
K sweep: ngram, Trident-like entries) and the chosen K again (``confirm.repeats`` interleaved repeats,
their own paths under ``results/confirm/``); those numbers are what the figures, the comparison and the
recommendations then use.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import runs, tables


def pick_best_k(cells: pd.DataFrame, repeats: int) -> dict[str, Any]:
    """The content of ``results/confirm/best_k.json``: per cell the sweep's best kpad K.

    Args:
        cells: the sweep's cells table (:func:`kpadstudy.tables.cells`).
        repeats: confirmation repeats per configuration.

    Returns:
        ``{"repeats": repeats, "cells": [{"model", "corpus", "best_k", "sweep_best_tok_s"}, ...]}``, sorted by
        model and corpus; a cell without any valid kpad median is left out (nothing to confirm).
    """
    best = tables.best_kpad(cells)
    rows = [
        {
            "model": r["model"],
            "corpus": r["corpus"],
            "best_k": int(r["sweep_best_k"]),
            "sweep_best_tok_s": float(r["sweep_best_tok_s"]),
        }
        for _, r in best.iterrows()
        if not pd.isna(r["sweep_best_k"])
    ]
    return {"repeats": int(repeats), "cells": rows}


def confirm_order(
    best_k: dict[str, Any], configurations: list[runs.Configuration]
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """Per cell the interleaved order of its confirmation runs: every configuration of the study outside the
    K sweep (van, suf, ngram, Trident-like entries: methods other than kpad and nopad), in study order, then
    kpad<best K>; then the next repeat.

    Args:
        best_k: the content of ``results/confirm/best_k.json`` (:func:`pick_best_k`).
        configurations: the study's configurations (:func:`kpadstudy.runs.configurations`).
    """
    others = [c.name for c in configurations if c.method not in ("kpad", "nopad")]
    out = {}
    for c in best_k["cells"]:
        names = others + [f"kpad{c['best_k']}"]
        out[(c["model"], c["corpus"])] = [(n, r) for r in range(1, best_k["repeats"] + 1) for n in names]
    return out


def confirmed_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Cells table of the confirmation runs: :func:`kpadstudy.tables.cells`, kpad rows as method ``bestkpad``
    (the convention of a separate measurement of the best K), and ``phase`` = ``confirm``."""
    out = tables.cells(runs)
    out.loc[out["method"] == "kpad", "method"] = "bestkpad"
    out["phase"] = "confirm"
    return out


def prefer_confirmed(cells: pd.DataFrame, confirmed: pd.DataFrame) -> pd.DataFrame:
    """The sweep's cells (``phase`` sweep) with the confirmation preferred.

    A confirmed row of a configuration outside the K sweep (van, suf, ngram, ...) with a valid median
    replaces the sweep's row of the same cell and configuration;
    every confirmed ``bestkpad`` row is added (:func:`kpadstudy.tables.best_kpad` then takes the best K's
    number from it, ``best_from`` "separate measurement"). The sweep's kpad rows stay (the K-sweep figure).
    """
    sweep = cells.copy()
    sweep["phase"] = "sweep"
    if confirmed.empty:
        return sweep
    valid = confirmed[confirmed["output_tok_s_median"].notna()]
    replace = valid[valid["method"] != "bestkpad"][["model", "corpus", "configuration"]].assign(_drop=True)
    merged = sweep.merge(replace, on=["model", "corpus", "configuration"], how="left")
    kept = merged[merged["_drop"].isna()].drop(columns="_drop")
    added = pd.concat([valid[valid["method"] != "bestkpad"], confirmed[confirmed["method"] == "bestkpad"]])
    return (
        pd.concat([kept, added], ignore_index=True)
        .sort_values(["model", "corpus", "method", "k"], kind="stable")
        .reset_index(drop=True)
    )
