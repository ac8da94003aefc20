"""Confirmation of the K-sweep's best K: pick it, order the reruns, tabulate them, keep the phases apart.

The sweep's best kpad K is the highest of several noisy medians, so its number is biased upward (the
winner's curse). After the sweep, each cell runs again, in its own interleaved repeats (``confirm.repeats``,
paths under ``results/confirm/``, order shuffled per repeat with ``order_seed``): van, suf and every other
configuration outside the K sweeps (ngram, kpadauto, Trident-like entries), the best kpad K, the second-best kpad
K, nopad at the best kpad K when the study sweeps nopad there, and the best nopad K (unpadded suffix decoding is a
way to serve too, so a confirmed cell has a confirmed unpadded number). A confirmed cell's comparisons (figures,
comparison, advice) then come from those repeats only, never from a mix of sweep and confirmation numbers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection
from typing import Any

import pandas as pd

from . import runs, tables


def pick_best_k(cells: pd.DataFrame, repeats: int, controls: Collection[str] = ()) -> dict[str, Any]:
    """The content of a cell's ``results/confirm/{model}/{corpus}/best_k.json``: the sweep's best and
    second-best kpad configurations, and its best nopad configuration.

    Args:
        cells: the sweep's cells table (:func:`kpadstudy.tables.cells`), of one cell or several.
        repeats: confirmation repeats per configuration.
        controls: configuration names never picked (``control: true``, :func:`kpadstudy.runs.controls`).

    Returns:
        ``{"repeats": repeats, "cells": [{"model", "corpus", "best_k", "best", "sweep_best_tok_s", "second_k",
        "second", "best_nopad_k", "best_nopad"}, ...]}``, sorted by model and corpus: ``best`` / ``second`` are
        configuration names (two kpad entries may share a K), ``best_k`` / ``second_k`` their Ks; the second is the
        kpad configuration with the next-highest valid median (None when only one has one). kpad configurations whose
        runs lost their FULL cudagraphs, or without a K, are never picked; a cell without any valid kpad median is
        left out. ``best_nopad`` is the nopad configuration with the highest valid median (the smaller K on a tie;
        any cudagraph mode), None when none has one.
    """
    rows = []
    for (model, corpus), group in cells[~cells["configuration"].isin(controls)].groupby(["model", "corpus"], sort=True):
        kp, _ = tables.ranked_kpad(group)
        if not len(kp):
            continue
        nopad = group[(group["method"] == "nopad") & group["output_tok_s_median"].notna() & group["k"].notna()]
        nopad = nopad.sort_values(["output_tok_s_median", "k"], ascending=[False, True], kind="stable")
        rows.append(
            {
                "model": model,
                "corpus": corpus,
                "best_k": int(kp.iloc[0]["k"]),
                "best": str(kp.iloc[0]["configuration"]),
                "sweep_best_tok_s": float(kp.iloc[0]["output_tok_s_median"]),
                "second_k": int(kp.iloc[1]["k"]) if len(kp) > 1 else None,
                "second": str(kp.iloc[1]["configuration"]) if len(kp) > 1 else None,
                "best_nopad_k": int(nopad.iloc[0]["k"]) if len(nopad) else None,
                "best_nopad": str(nopad.iloc[0]["configuration"]) if len(nopad) else None,
            }
        )
    return {"repeats": int(repeats), "cells": rows}


def _named(configurations: list[runs.Configuration], method: str, k: int | None) -> str | None:
    """The name of the study's configuration of ``method`` at ``k`` (the default entry first), or None."""
    found = [c.name for c in configurations if c.method == method and c.k == k]
    return f"{method}{k}" if f"{method}{k}" in found else (found[0] if found else None)


def confirm_order(
    best_k: dict[str, Any], configurations: list[runs.Configuration], seed: int | None = None
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """Per cell the interleaved order of its confirmation runs, repeat by repeat.

    Each repeat runs every configuration of the study outside the K sweeps (van, suf, ngram, kpadauto,
    Trident-like entries: methods other than kpad and nopad), the best kpad K, the second-best kpad K (when the
    cell has one), nopad at the best kpad K (when the study has that configuration) and the best nopad
    configuration (``best_nopad``, when the cell has one), shuffled inside the repeat with
    ``random.Random(f"confirm/{seed}/{repeat}")`` (``seed`` None keeps the listed order).

    Args:
        best_k: the content of cells' ``best_k.json`` (:func:`pick_best_k`; without ``best`` / ``second``
            names, the configurations of those Ks).
        configurations: the study's configurations (:func:`kpadstudy.runs.configurations`).
        seed: config ``order_seed``.

    Returns:
        ``{(model, corpus): [(configuration name, repeat), ...]}``.
    """
    others = [c.name for c in configurations if c.method not in ("kpad", "nopad")]
    out = {}
    for c in best_k["cells"]:
        ks = [c.get("best") or _named(configurations, "kpad", c["best_k"]) or f"kpad{c['best_k']}"]
        if c.get("second_k") is not None:
            ks.append(c.get("second") or _named(configurations, "kpad", c["second_k"]) or f"kpad{c['second_k']}")
        nopads = [_named(configurations, "nopad", c["best_k"]), c.get("best_nopad")]
        names = list(dict.fromkeys(others + ks + [n for n in nopads if n]))
        order = []
        for repeat in range(1, best_k["repeats"] + 1):
            block = list(names)
            if seed is not None:
                random.Random(f"confirm/{seed}/{repeat}").shuffle(block)
            order += [(n, repeat) for n in block]
        out[(c["model"], c["corpus"])] = order
    return out


def confirm_position(
    best_k_path: str, config: dict[str, Any], model: str, corpus: str, configuration: str, repeat: int
) -> int:
    """1-based place of a confirmation run within its repeat (:func:`confirm_order` of ``best_k_path``).

    Raises:
        ValueError: the run is not in the confirmation's plan (``best_k_path`` changed under it).
    """
    with open(best_k_path) as f:
        order = confirm_order(json.load(f), runs.configurations(config), config.get("order_seed"))
    block = [n for n, r in order.get((model, corpus), []) if r == repeat]
    if configuration not in block:
        raise ValueError(f"{best_k_path}: {model}/{corpus} {configuration} r{repeat} is not in the confirmation's plan")
    return block.index(configuration) + 1


def confirmed_cells(runs: pd.DataFrame, best_k: dict[str, Any] | None = None) -> pd.DataFrame:
    """Cells table of the confirmation runs: :func:`kpadstudy.tables.cells` with ``phase`` = ``confirm``; the
    best K's kpad row as method ``bestkpad`` (the convention of a separate measurement of the best K).

    Args:
        runs: the confirmation's run records.
        best_k: the cells' ``best_k.json`` merged (:func:`pick_best_k`; the best by configuration name, else
            by K); without it every kpad row is the best K's (a confirmation of one K).
    """
    out = tables.cells(runs)
    is_best = out["method"] == "kpad"
    if best_k is not None:
        best = {(c["model"], c["corpus"]): (c.get("best"), c["best_k"]) for c in best_k["cells"]}

        def picked_one(model: str, corpus: str, name: str, k: float) -> bool:
            best_name, best_k_ = best.get((model, corpus), (None, None))
            return name == best_name if best_name else k == best_k_

        picked = [
            picked_one(*row) for row in zip(out["model"], out["corpus"], out["configuration"], out["k"], strict=True)
        ]
        is_best &= pd.Series(picked, index=out.index, dtype=bool)
    out.loc[is_best, "method"] = "bestkpad"
    out["phase"] = "confirm"
    return out


def prefer_confirmed(cells: pd.DataFrame, confirmed: pd.DataFrame) -> pd.DataFrame:
    """The sweep's cells (``phase`` sweep) and the confirmation's (``phase`` confirm), side by side.

    Nothing is replaced: the K-sweep figure reads the sweep's rows, and every comparison of a confirmed
    cell reads the confirmation's rows only (:func:`kpadstudy.tables.comparison_rows`), so absolute tok/s of
    the two phases never meet in one comparison.
    """
    sweep = cells.copy()
    sweep["phase"] = "sweep"
    if confirmed.empty:
        return sweep
    return (
        pd.concat([sweep, confirmed], ignore_index=True)
        .sort_values(["model", "corpus", "phase", "method", "k"], kind="stable")
        .reset_index(drop=True)
    )
