"""Advice: per cell, the configuration to serve with, and its exact server command line.

The rule (issue 7): among the kpad Ks, the smallest K whose median output tok/s is within ``within_best``
(1%) of the best K's median; recommended only if it beats van beyond the spread, i.e.
``median - MAD > van median + MAD`` (MAD: unscaled median absolute deviation over valid repeats; 0 with
one repeat or when none is published). Otherwise the configuration with the highest median among those
outside the K sweep (van, suf, ngram, Trident-like entries).
Where the cell has a confirmation measurement of a K (method ``bestkpad``: a confirmation rerun, or the
published mix table's bestKpad), that measurement is the kpad candidate; otherwise the sweep medians are.
"""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd

from . import cpus, runs

WITHIN_BEST = 0.01


def _spread(row: pd.Series) -> float:
    m = row.get("output_tok_s_mad", float("nan"))
    return 0.0 if pd.isna(m) else float(m)


def recommend(cells: pd.DataFrame, within_best: float = WITHIN_BEST) -> pd.DataFrame:
    """One recommendation per (model, corpus).

    Args:
        cells: a cells table (:func:`kpadstudy.tables.cells` or :func:`kpadstudy.reference.published_cells`).
        within_best: tolerance as a fraction of the best kpad median (0.01 = 1%).

    Returns:
        Columns ``model, corpus, device, recommended`` (configuration name: ``kpad8``, ``van``, ``suf``),
        ``method, k, basis`` ("confirmation" or "K-sweep"), ``candidate`` (the kpad configuration
        considered, "" when none has a valid median), ``candidate_tok_s``, ``candidate_mad``,
        ``van_tok_s``, ``van_mad``, ``suf_tok_s``, ``reason`` (one sentence with the numbers).
        A cell with kpad medians but no van or suf median (the published study outside the mix) gets the
        sweep's choice, with a reason saying it is untested against van; a cell with no valid median at all
        gets ``recommended`` "" and a reason saying so.
    """
    out = []
    for (model, corpus), g in cells.groupby(["model", "corpus"], sort=True):
        valid = g[g["output_tok_s_median"].notna()]
        van = valid[valid["configuration"] == "van"]
        suf = valid[valid["configuration"] == "suf"]
        # every configuration outside the K sweep (van, suf, ngram, Trident-like entries) is an alternative
        others = valid[~valid["method"].isin(["kpad", "nopad", "bestkpad"])]
        conf = valid[valid["method"] == "bestkpad"]
        sweep = valid[valid["method"] == "kpad"].sort_values("k")
        cand, basis = None, "K-sweep"
        if len(conf):
            cand, basis = conf.iloc[0], "confirmation"
        elif len(sweep):
            best = sweep["output_tok_s_median"].max()
            cand = sweep[sweep["output_tok_s_median"] >= (1 - within_best) * best].iloc[0]
        van_tok = float(van.iloc[0]["output_tok_s_median"]) if len(van) else float("nan")
        van_mad = _spread(van.iloc[0]) if len(van) else float("nan")
        suf_tok = float(suf.iloc[0]["output_tok_s_median"]) if len(suf) else float("nan")
        row: dict[str, Any] = {
            "model": model,
            "corpus": corpus,
            "device": g["device"].iloc[0],
            "basis": basis,
            "candidate": "" if cand is None else f"kpad{int(cand['k'])}",
            "candidate_tok_s": float("nan") if cand is None else float(cand["output_tok_s_median"]),
            "candidate_mad": float("nan") if cand is None else _spread(cand),
            "van_tok_s": van_tok,
            "van_mad": van_mad,
            "suf_tok_s": suf_tok,
        }
        if cand is not None and len(van) and row["candidate_tok_s"] - row["candidate_mad"] > van_tok + van_mad:
            row.update(
                recommended=row["candidate"],
                method="kpad",
                k=int(cand["k"]),
                reason=(
                    f"{row['candidate']} {row['candidate_tok_s']:,.1f} - MAD {row['candidate_mad']:,.1f} "
                    f"> van {van_tok:,.1f} + MAD {van_mad:,.1f} tok/s"
                ),
            )
        elif cand is not None and not len(van) and not len(others):
            row.update(
                recommended=row["candidate"],
                method="kpad",
                k=int(cand["k"]),
                reason=f"van and suf have no median in this cell (not measured or failed), so {row['candidate']} "
                f"({row['candidate_tok_s']:,.1f} tok/s) is the K-sweep's choice, untested against van",
            )
        elif len(others):
            sel = others.loc[others["output_tok_s_median"].idxmax()]
            listed = " and ".join(
                f"{r['configuration']} ({r['output_tok_s_median']:,.1f})" for _, r in others.iterrows()
            )
            why = (
                "no kpad configuration has a valid run"
                if cand is None
                else (
                    f"{row['candidate']} {row['candidate_tok_s']:,.1f} - MAD {row['candidate_mad']:,.1f} "
                    f"does not exceed van {van_tok:,.1f} + MAD {van_mad:,.1f} tok/s"
                )
                if len(van)
                else "van has no valid run"
            )
            row.update(
                recommended=sel["configuration"],
                method=sel["method"],
                k=int(sel["k"]) if pd.notna(sel["k"]) else pd.NA,
                reason=f"{why}; {sel['configuration']} has the highest median of {listed} tok/s",
            )
        else:
            row.update(recommended="", method="", k=pd.NA, reason="no configuration has a valid run")
        out.append(row)
    return pd.DataFrame(out)


def command_line(
    rec: pd.Series,
    config: dict[str, Any],
    plugin_path: str = "workflow/scripts",
    port: int = 8000,
    python: str = "python",
) -> str:
    """The server command of a recommendation, environment first: ``VAR=... taskset ... python -m vllm...``.

    Built by :func:`kpadstudy.runs.server_command` and :func:`kpadstudy.runs.server_env` (with an empty base
    environment, so only what the study sets is shown, less ``VLLM_PORT``) from ``config`` (server, taskset, models, the
    suf settings; the server CPUs of the first taskset slot); the model path is ``results/models/<model>`` for a
    model of ``config``, else the model's
    name (put its checkpoint there). Device: cpu when the cell ran on CPU, else cuda.

    Raises:
        ValueError: ``rec`` has no recommendation (no valid run in the cell).
    """
    if not rec["recommended"]:
        raise ValueError(f"{rec['model']} / {rec['corpus']}: no recommendation (no valid run)")
    server = config["server"]
    by_name = {c.name: c for c in runs.configurations(config)}
    cfg = by_name.get(rec["recommended"])
    if cfg is None:  # a K the config does not sweep (e.g. a published one)
        k = int(rec["k"]) if pd.notna(rec["k"]) else 32
        cfg = runs.Configuration(
            rec["recommended"],
            rec["method"],
            k,
            rec["method"] == "kpad",
            server["cudagraph_mode"],
            server["gpu_memory_utilization"],
        )
    device = "cpu" if rec["device"] == "cpu" else "cuda"
    model = config.get("models", {}).get(rec["model"])
    cmd = runs.server_command(
        model_path=f"results/models/{rec['model']}" if model else rec["model"],
        served_model_name=rec["model"],
        port=port,
        configuration=cfg,
        server=server,
        tensor_parallel_size=int(model.get("tensor_parallel_size", 1)) if model else 1,
        device=device,
        cpus=cpus.slots(config.get("taskset") or {})[0]["server"],
        max_concurrency=int((config.get("load") or {}).get("max_concurrency", 32)),
        python=python,
    )
    env = runs.server_env({}, configuration=cfg, server=server, device=device, plugin_path=plugin_path, vllm_port=port)
    env.pop("VLLM_PORT")  # the study's per-run base for vLLM's internal ports; a served model keeps vLLM's default
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *(shlex.quote(a) for a in cmd)])


def to_markdown(
    recs: pd.DataFrame,
    config: dict[str, Any],
    within_best: float = WITHIN_BEST,
    title: str = "Recommended configuration per cell",
) -> str:
    """``results/recommendations.md``: per cell the choice, why (numbers), and the exact command line.

    Says whether the choice rests on confirmation reruns or on the sweep medians, and on CPU that kpad
    cannot gain there (no cudagraphs).
    """
    lines = [
        f"# {title}",
        "",
        f"Rule: the smallest kpad K within {100 * within_best:g}% of the best kpad median output tok/s, "
        "if its median minus MAD exceeds van's median plus MAD; otherwise the highest median among the "
        "configurations outside the K sweep (van, suf, ngram, ...).",
        "",
    ]
    if (recs["basis"] == "K-sweep").any():
        lines += [
            "**These rest on the K-sweep medians, not on a confirmation rerun** "
            "(no `bestkpad` confirmation rows in the cells table for "
            f"{int((recs['basis'] == 'K-sweep').sum())} of {len(recs)} cells). "
            "Rerun the chosen configuration against van before relying on it.",
            "",
        ]
    if (recs["device"] == "cpu").any():
        lines += [
            "**CPU cells:** there are no cudagraphs on CPU, so padding only adds verification work and kpad is "
            "expected to lose to unpadded suf there; these picks say nothing about a GPU.",
            "",
        ]
    for _, r in recs.iterrows():
        lines += [
            f"## {r['model']} / {r['corpus']} ({r['device']}): {r['recommended'] or 'none'}",
            "",
            f"Basis: {r['basis']}. {r['reason']}.",
            "",
        ]
        if r["recommended"]:
            lines += ["```bash", command_line(r, config), "```", ""]
    return "\n".join(lines)
