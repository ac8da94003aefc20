"""K-bar > R: does speculation pay? Tokens per request-step against the step-cost ratio, per configuration.

The rule of the earlier suffix study (``../shared/STUDY.md``, "The earlier study's rule"): speculation
pays when the mean accepted length per step exceeds the spec-step overhead ratio R. Here, per
(model, corpus, configuration) with van measured in the same cell:

- K-bar = median tokens per request-step (``tokens_per_request_step``: generated / (generated - accepted),
  1.0 for van).
- R = (mean time per step of the configuration) / (mean time per step of van).
- predicted speed-up = K-bar / R; measured speed-up = median output tok/s / van's median output tok/s.

R from engine steps (``r_from == "engine steps"``), where the configuration and van both have step
counts: a run's mean step time is ``duration_s / (steps_FULL + steps_PIECEWISE + steps_NONE)`` (the
K-pad plugin's counters over the measured prompts), median over valid repeats. vLLM 0.26.0 runs van on
GPU through a model runner the counters do not hook, so van's steps are zero there; then R comes from
TPOT (``r_from == "TPOT"``): a request that gets K-bar tokens per step of time t has TPOT = t / K-bar, so
t = TPOT x K-bar and R = (TPOT_config x K-bar_config) / (TPOT_van x 1). With the TPOT form the prediction
K-bar / R reduces to TPOT_van / TPOT_config: it checks the throughput gain against the per-request
latency gain, not against an independent step timing. Van's step count is never estimated from output
tokens and concurrency.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STEP_COLUMNS = ["steps_FULL", "steps_PIECEWISE", "steps_NONE"]
KEYS = ["model", "corpus", "configuration"]


def step_time_ms(runs: pd.DataFrame) -> pd.Series:
    """Mean engine step time per run in ms: ``1000 * duration_s / (steps_FULL + steps_PIECEWISE + steps_NONE)``.

    Args:
        runs: the runs table (``results/runs.parquet``); duration_s in seconds.

    Returns:
        A Series aligned with ``runs``; NaN where the run is not ``ok`` or counted no steps (van on vLLM 0.26
        GPU, runs older than the counters).
    """
    if not set(STEP_COLUMNS) <= set(runs.columns):
        return pd.Series(np.nan, index=runs.index)
    steps = runs[STEP_COLUMNS].apply(pd.to_numeric, errors="coerce").fillna(0).sum(axis=1)
    t = 1000.0 * pd.to_numeric(runs["duration_s"], errors="coerce") / steps.where(steps > 0)
    return t.where(runs["status"] == "ok")


def reference_van(cell: pd.DataFrame) -> pd.Series | None:
    """The van row of one cell that R and the measured speed-up divide by, or None when the cell has none with a
    valid median.

    A cell may hold several configurations of method van (vansync: van with async scheduling off; vansyncv1: the
    same on vLLM's V1 model runner): the one named ``van`` when it has a valid median, else the first by name
    that has one, so the choice never depends on row order and :func:`step_cost` names it (``reference``).

    Args:
        cell: the cells rows of one (model, corpus), with ``method``, ``configuration``, ``output_tok_s_median``.
    """
    van = cell[(cell["method"] == "van") & cell["output_tok_s_median"].notna()]
    if van.empty:
        return None
    van = van.assign(_plain=van["configuration"] != "van").sort_values(["_plain", "configuration"])
    return van.iloc[0].drop("_plain")


def step_cost(runs: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The K-bar vs R table: one row per speculative configuration of a cell whose van has a valid median.

    Args:
        runs: the runs table (for step times); may be empty, then R comes from TPOT everywhere.
        cells: the cells table of :func:`kpadstudy.tables.cells` (medians over valid repeats).

    Returns:
        Columns ``model, corpus, configuration, method, k, device, tokens_per_request_step`` (K-bar),
        ``reference`` (the van configuration R and the measured speed-up divide by: :func:`reference_van`),
        ``step_time_ms`` and ``van_step_time_ms`` (engine-step medians, NaN when not counted),
        ``r_steps`` (their ratio), ``r_tpot`` (TPOT_config x K-bar / TPOT_van), ``r`` and ``r_from``
        (engine steps when both sides were counted, else TPOT), ``predicted_speedup`` = K-bar / r,
        ``measured_speedup`` = output tok/s / van's, ``k_bar_exceeds_r``. Configurations without a valid
        median keep their row with NaN numbers, so they show as failed. The K-sweep's rows only
        (:func:`kpadstudy.tables.sweep_rows`, runs of phase ``confirm`` left out): phases never mix in one row.
    """
    from .tables import sweep_rows

    c = sweep_rows(cells).copy()
    if len(runs):
        r = runs[runs["phase"].fillna("sweep") != "confirm"].copy() if "phase" in runs else runs.copy()
        r["step_time_ms"] = step_time_ms(r)
        st = r.groupby(KEYS)["step_time_ms"].median().rename("step_time_ms").reset_index()
        c = c.merge(st, on=KEYS, how="left")
    else:
        c["step_time_ms"] = np.nan
    rows = []
    for (model, corpus), g in c.groupby(["model", "corpus"], sort=True):
        van = reference_van(g)
        if van is None:
            continue
        for _, x in g[g["method"] != "van"].sort_values(["method", "k"]).iterrows():
            kbar = x["tokens_per_request_step_median"]
            r_steps = x["step_time_ms"] / van["step_time_ms"]
            r_tpot = x["tpot_mean_ms_median"] * kbar / van["tpot_mean_ms_median"]
            use_steps = bool(np.isfinite(r_steps))
            r_val = r_steps if use_steps else r_tpot
            if pd.isna(x["output_tok_s_median"]):  # no valid repeat: no number at all
                r_steps = r_tpot = r_val = float("nan")
            rows.append(
                {
                    "model": model,
                    "corpus": corpus,
                    "configuration": x["configuration"],
                    "method": x["method"],
                    "k": x["k"],
                    "device": x["device"],
                    "tokens_per_request_step": kbar,
                    "step_time_ms": x["step_time_ms"],
                    "reference": van["configuration"],
                    "van_step_time_ms": van["step_time_ms"],
                    "r_steps": r_steps,
                    "r_tpot": r_tpot,
                    "r": r_val,
                    "r_from": ("engine steps" if use_steps else "TPOT") if np.isfinite(r_val) else "",
                    "predicted_speedup": kbar / r_val,
                    "measured_speedup": x["output_tok_s_median"] / van["output_tok_s_median"],
                    "k_bar_exceeds_r": bool(kbar > r_val) if np.isfinite(r_val) else pd.NA,
                }
            )
    return pd.DataFrame(rows)


def kbar_geometric(alpha: float, gamma: int) -> float:
    """Expected tokens per request-step when each of ``gamma`` draft positions is accepted independently with
    probability ``alpha`` (acceptance stops at the first rejection): ``(1 - alpha^(gamma+1)) / (1 - alpha)``;
    ``gamma + 1`` at ``alpha == 1``. The form of the speculative-decoding literature (Leviathan et al. 2023)."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def kbar_linear(alpha: float, gamma: int) -> float:
    """Tokens per request-step when acceptance at successive positions is fully correlated: ``1 + alpha x gamma``
    (the series' earlier suffix study found this fits ngram better than the geometric form)."""
    return 1.0 + alpha * gamma


def kbar_fit(runs: pd.DataFrame) -> pd.DataFrame:
    """Which model of tokens per request-step fits the measured runs better, per configuration.

    For every valid speculative run with ``acceptance_rate_real`` (alpha: accepted / real draft tokens, pads
    excluded; :func:`kpadstudy.record.acceptance`) and K (gamma = the configured ``num_speculative_tokens``):
    the geometric and the linear prediction (:func:`kbar_geometric`, :func:`kbar_linear`) against the measured
    ``tokens_per_request_step``. Neither prediction uses the measured value.

    Args:
        runs: the runs table (``results/runs.parquet``).

    Returns:
        One row per (configuration, method, k): ``n_runs``, ``alpha_median``, ``k_bar_median`` (measured),
        ``rmse_geometric``, ``rmse_linear`` (root mean square error over the runs, in tokens per request-step)
        and ``better`` (``geometric``, ``linear``, or ``tie``). Empty when no run has the counters.
    """
    columns = [
        "configuration",
        "method",
        "k",
        "n_runs",
        "alpha_median",
        "k_bar_median",
        "rmse_geometric",
        "rmse_linear",
        "better",
    ]
    need = {"acceptance_rate_real", "tokens_per_request_step", "status", "method", "k"}
    if runs.empty or not need <= set(runs.columns):
        return pd.DataFrame(columns=columns)
    r = runs[(runs["status"] == "ok") & (runs["method"] != "van")].copy()
    r["alpha"] = pd.to_numeric(r["acceptance_rate_real"], errors="coerce")
    r["k_bar"] = pd.to_numeric(r["tokens_per_request_step"], errors="coerce")
    r = r.dropna(subset=["alpha", "k_bar"])
    rows = []
    for (name, method, k), g in r.groupby(["configuration", "method", "k"], sort=True):
        geometric = np.array([kbar_geometric(a, int(k)) for a in g["alpha"]])
        linear = np.array([kbar_linear(a, int(k)) for a in g["alpha"]])
        measured = g["k_bar"].to_numpy()
        rmse_g = float(np.sqrt(np.mean((geometric - measured) ** 2)))
        rmse_l = float(np.sqrt(np.mean((linear - measured) ** 2)))
        better = "tie" if np.isclose(rmse_g, rmse_l) else ("geometric" if rmse_g < rmse_l else "linear")
        rows.append(
            {
                "configuration": name,
                "method": method,
                "k": int(k),
                "n_runs": len(g),
                "alpha_median": float(g["alpha"].median()),
                "k_bar_median": float(np.median(measured)),
                "rmse_geometric": rmse_g,
                "rmse_linear": rmse_l,
                "better": better,
            }
        )
    return pd.DataFrame(rows, columns=columns)
