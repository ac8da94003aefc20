"""Advice: per cell, the configuration to serve with, against its runner-up, and its exact server command line.

The rule (issue 16): every comparison of a cell reads one phase (:func:`kpadstudy.tables.comparison_rows`):
its confirmation where it has one, else its sweep. The candidates are the best kpad K - in a confirmed cell
the better of the confirmed best and second-best K; elsewhere a published bestKpad measurement where there is
one, else the smallest swept K within ``within_best`` (1%) of the best K's median; Ks whose runs lost their
FULL cudagraphs left out - and every configuration outside the K
sweep (van, suf, ngram, Trident-like entries). The candidate with the highest median output tok/s is
recommended; the next one is its runner-up. With run records of both (the same repeats), the choice is
stated by the paired comparison (:mod:`kpadstudy.paired`): "kpad8: 1.30x suf (1.18-1.41, 95% CI, 3 of 3
repeats)" when the interval lies above 1, "no clear winner between kpad8 and suf (0.97-1.08, ...)" when it
holds 1 (where the paired ratio is below 1, the runner-up is recommended instead: the same repeats outrank
medians taken at other times); with 1 or 2 repeats it is a point estimate labelled "single measurement" or
"n = 2". Without run records (published cells) it is the ratio of medians, labelled by how many repeats each median has.
A best K at the edge of the swept range says so. Configurations marked ``control: true`` in the config (e.g.
vansync, van with async scheduling off: a control for the speculative runs, not a way to serve) are never
candidates; the reason names them.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from typing import Any

import pandas as pd

from . import cpus, paired, runs, tables

WITHIN_BEST = 0.01


def _best_kpad(valid: pd.DataFrame, within_best: float, phase: str = "sweep") -> tuple[pd.Series | None, str]:
    """The cell's kpad candidate among its valid rows of ``phase``, and its basis: "confirmation" (a confirmed
    cell: its confirmed Ks, the sweep's best and second-best; "confirmation" also when every one of them
    failed), "separate measurement" (a published bestKpad row) or "K-sweep". Among several Ks the smallest
    within ``within_best`` of the highest median is taken."""
    confirmed = phase == "confirm"
    if not confirmed:
        sep = valid[valid["method"] == "bestkpad"]
        if len(sep):
            return sep.iloc[0], "separate measurement"
    kp = valid[valid["method"].isin(["kpad", "bestkpad"])].sort_values("k")
    kp = kp[~tables.lost_graphs(kp)]
    basis = "confirmation" if confirmed else "K-sweep"
    if not len(kp):
        return None, basis
    best = kp["output_tok_s_median"].max()
    return kp[kp["output_tok_s_median"] >= (1 - within_best) * best].iloc[0], basis


def _n_valid(row: pd.Series) -> int:
    n = row.get("n_valid", 1)
    return 1 if n is None or pd.isna(n) else max(1, int(n))


def _comparison(
    win: pd.Series, runner: pd.Series, cell_runs: pd.DataFrame | None, phase: str = "sweep"
) -> dict[str, Any]:
    """Winner over runner-up: paired over the repeats of ``phase`` both ran (rates > 0), else the ratio of
    medians."""
    a, b = win["configuration"], runner["configuration"]
    if cell_runs is not None and len(cell_runs):
        prepared = paired.prepared_runs(cell_runs)
        ratios = paired.within_repeat_ratios(paired.repeat_table(prepared[prepared["phase"] == phase]), a, b)
        if len(ratios):
            return {**paired.summarize([float(x) for x in ratios]), "basis_ratio": "paired"}
    n = min(_n_valid(win), _n_valid(runner))
    den = float(runner["output_tok_s_median"])
    ratio = float(win["output_tok_s_median"]) / den if den > 0 else float("inf")
    label = "single measurement" if n <= 1 else f"medians of {_n_valid(win)} and {_n_valid(runner)} repeats, not paired"
    return {
        "n": n,
        "ratio": ratio,
        "ci_low": None,
        "ci_high": None,
        "favour": None,
        "label": label,
        "basis_ratio": "medians",
    }


def _swapped(c: dict[str, Any]) -> dict[str, Any]:
    """The comparison the other way round (runner-up over winner)."""
    return {
        **c,
        "ratio": 1 / c["ratio"],
        "ci_low": None if c["ci_high"] is None else 1 / c["ci_high"],
        "ci_high": None if c["ci_low"] is None else 1 / c["ci_low"],
        "favour": None if c["favour"] is None else c["n"] - c["favour"],
    }


def _against_words(a: str, b: str, c: dict[str, Any]) -> str:
    """:func:`_comparison` ``c`` of ``a`` over ``b`` in words, either way round: ``"kpadauto12 / vansync: 1.01x
    (0.96-1.06, 95% CI), 4 of 5 repeats favour kpadauto12"`` (paired, :func:`kpadstudy.paired.describe`) or
    ``"kpadauto12 / vansync: 0.96x (medians of 3 and 3 repeats, not paired)"``."""
    if c["basis_ratio"] == "paired":
        return paired.describe({**c, "numerator": a, "denominator": b})
    return f"{a} / {b}: {c['ratio']:.2f}x ({c['label']})"


def _verdict(a: str, b: str, c: dict[str, Any]) -> tuple[bool | None, str]:
    """``(clear, words)`` of winner ``a`` over runner-up ``b``."""
    if c["ci_low"] is not None:
        spread = f"{c['ci_low']:.2f}-{c['ci_high']:.2f}, {c['label']}, {c['favour']} of {c['n']} repeats"
        if c["ci_low"] > 1:
            return True, f"{a}: {c['ratio']:.2f}x {b} ({spread})"
        return False, f"no clear winner between {a} and {b} ({spread}); {a} has the higher point estimate"
    if c["basis_ratio"] == "paired":
        return None, f"{a}: {c['ratio']:.2f}x {b} by point estimate ({c['label']}, {c['favour']} of {c['n']} repeats)"
    return None, f"{a}: {c['ratio']:.2f}x {b} by point estimate ({c['label']})"


def recommend(
    cells: pd.DataFrame,
    within_best: float = WITHIN_BEST,
    run_table: pd.DataFrame | None = None,
    controls: Collection[str] = (),
) -> pd.DataFrame:
    """One recommendation per (model, corpus).

    Args:
        cells: a cells table (:func:`kpadstudy.tables.cells` or :func:`kpadstudy.reference.published_cells`).
        within_best: tolerance as a fraction of the best kpad median (0.01 = 1%).
        run_table: the run records (``results/runs.parquet``) for paired comparisons; None = medians only.
        controls: configuration names that are never candidates (``control: true`` in the config,
            :func:`kpadstudy.runs.controls`); a cell's reason names those it left out.

    Returns:
        Columns ``model, corpus, device, recommended`` (configuration name: ``kpad8``, ``van``, ``suf``),
        ``method, k, basis`` ("confirmation", "separate measurement" or "K-sweep": where the kpad candidate's
        number comes from), ``phase`` (of every number of the row: sweep or confirm),
        ``candidate`` (the kpad candidate, "" when none has a valid median), ``candidate_tok_s``,
        ``van_tok_s``, ``suf_tok_s``, ``recommended_tok_s`` (the recommendation's median), ``runner_up``,
        ``runner_up_tok_s``, ``ratio`` (winner / runner-up),
        ``ci_low``, ``ci_high`` (None below 3 paired repeats), ``n``, ``clear`` (True: the interval lies above 1;
        False: it holds 1; None: no interval), ``faster_controls`` (the controls that beat the recommendation:
        within repeats where both ran, else by medians; fastest first, comma-separated; "" when none),
        ``reason`` (one sentence with the numbers). A cell with no valid median gets ``recommended`` "" and a
        reason saying so.
    """
    out = []
    for (model, corpus), g in tables.comparison_rows(cells).groupby(["model", "corpus"], sort=True):
        phase = str(g["phase"].iloc[0]) if "phase" in g.columns else "sweep"
        every_valid = g[g["output_tok_s_median"].notna()]
        is_control = every_valid["configuration"].isin(controls)
        control_rows = every_valid[is_control]
        valid = every_valid[~is_control]  # the candidates' rows: a control is never one, of any method
        left_out = sorted(control_rows["configuration"])
        cand, basis = _best_kpad(valid, within_best, phase)

        def median(name: str, valid=valid) -> float:
            v = valid[valid["configuration"] == name]["output_tok_s_median"]
            return float(v.iloc[0]) if len(v) else float("nan")

        others = valid[~valid["method"].isin(["kpad", "nopad", "bestkpad"])]
        pool = [r for _, r in others.iterrows()]
        if cand is not None:
            cand = cand.copy()
            if cand["configuration"] == "bestKpad":  # the published table's name for its best-K row
                cand["configuration"] = f"kpad{int(cand['k'])}"
            pool.append(cand)
        pool.sort(key=lambda r: -float(r["output_tok_s_median"]))

        row: dict[str, Any] = {
            "model": model,
            "corpus": corpus,
            "device": g["device"].iloc[0],
            "basis": basis,
            "phase": phase,
            "candidate": "" if cand is None else cand["configuration"],
            "candidate_tok_s": float("nan") if cand is None else float(cand["output_tok_s_median"]),
            "van_tok_s": median("van"),
            "suf_tok_s": median("suf"),
            "recommended_tok_s": float("nan"),
            "runner_up": "",
            "runner_up_tok_s": float("nan"),
            "ratio": float("nan"),
            "ci_low": None,
            "ci_high": None,
            "n": 0,
            "clear": None,
            "faster_controls": "",
        }
        not_candidates = (
            f"; {', '.join(left_out)} left out as control{'s' if len(left_out) > 1 else ''} (control: true in the "
            "config: measured, not a way to serve)"
            if left_out
            else ""
        )
        if not pool:
            why = (
                "no configuration other than controls has a valid run"
                if left_out
                else "no configuration has a valid run"
            )
            row.update(recommended="", method="", k=pd.NA, reason=why + not_candidates)
            out.append(row)
            continue
        win = pool[0]
        listed = ", ".join(f"{r['configuration']} {float(r['output_tok_s_median']):,.1f}" for r in pool)
        cell_runs = None
        if run_table is not None and len(run_table):
            cell_runs = run_table[(run_table["model"] == model) & (run_table["corpus"] == corpus)]
        if len(pool) == 1:
            reason = (
                f"{win['configuration']} is the only candidate with a valid median ({listed} tok/s): the cell has"
                " no valid van, suf or other configuration outside the K sweep to compare it with"
            )
        else:
            runner = pool[1]
            c = _comparison(win, runner, cell_runs, phase)
            if c["basis_ratio"] == "paired" and c["ratio"] < 1:
                # within the same repeats the runner-up wins: that beats medians of other times (or phases)
                win, runner, c = runner, win, _swapped(c)
            clear, words = _verdict(win["configuration"], runner["configuration"], c)
            row.update(
                runner_up=runner["configuration"],
                runner_up_tok_s=float(runner["output_tok_s_median"]),
                ratio=c["ratio"],
                ci_low=c["ci_low"],
                ci_high=c["ci_high"],
                n=c["n"],
                clear=clear,
            )
            reason = f"{words}; medians {listed} tok/s"
        method = "kpad" if win["method"] == "bestkpad" else win["method"]
        row.update(
            recommended=win["configuration"],
            recommended_tok_s=float(win["output_tok_s_median"]),
            method=method,
            k=int(win["k"]) if pd.notna(win["k"]) else pd.NA,
        )
        sweep = tables.sweep_rows(cells)
        sweep = sweep[
            (sweep["model"] == model)
            & (sweep["corpus"] == corpus)
            & sweep["output_tok_s_median"].notna()
            & ~sweep["configuration"].isin(controls)
        ]
        swept = sorted(int(k) for k in sweep[sweep["method"] == "kpad"]["k"])
        if method == "kpad" and len(swept) > 1 and row["k"] in (swept[0], swept[-1]):
            reason += f"; K={row['k']} is at the edge of the swept Ks {swept[0]}-{swept[-1]}: a K beyond may do better"
        # each control against the recommendation: within repeats where both ran, else by medians
        against = {str(r["configuration"]): _comparison(win, r, cell_runs, phase) for _, r in control_rows.iterrows()}
        faster = sorted((c for c, cmp in against.items() if cmp["ratio"] < 1), key=lambda c: against[c]["ratio"])
        stated = ""
        if len(pool) == 1 and against:  # the one comparison left: the control closest to (or above) it
            stated = min(against, key=lambda c: against[c]["ratio"])
            reason += (
                f" other than controls; against the fastest control, "
                f"{_against_words(win['configuration'], stated, against[stated])}"
            )
        if faster:
            row["faster_controls"] = ", ".join(faster)
            several = len(faster) > 1
            words = [_against_words(win["configuration"], c, against[c]) for c in faster if c != stated]
            not_candidates += (
                f"; {win['configuration']} ran slower than control{'s' if several else ''} {', '.join(faster)}"
                + (f" ({'; '.join(words)})" if words else "")
                + f": measure what {'they control' if several else 'it controls'} for before serving"
            )
        row["reason"] = reason + not_candidates
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
            rec["method"] in runs.PADDED_METHODS,
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
        f"Rule: the candidates are the best kpad K (the smallest within {100 * within_best:g}% of the best kpad "
        "median output tok/s; in a confirmed cell the better of its confirmed best and second-best K) and every "
        "configuration outside the K sweep (van, suf, ngram, ...) but controls (control: true in the config); the "
        "highest median is recommended and compared "
        "with the runner-up: within repeats (paired, 95% t-interval from 3 repeats) where run records exist, else "
        "by the medians. Every number of a cell comes from one phase: its confirmation where it has one, else "
        "its sweep.",
        "",
    ]
    unconfirmed = int((recs.get("phase", pd.Series("sweep", index=recs.index)) != "confirm").sum())
    if unconfirmed:
        separate = int((recs["basis"] == "separate measurement").sum())
        lines += [
            "**These rest on sweep medians, not on a confirmation rerun** (no confirmation phase for "
            f"{unconfirmed} of {len(recs)} cells"
            + (
                f"; in {separate} of them the best K's number is a separate single measurement, the published "
                "mix table's"
                if separate
                else ""
            )
            + "). Rerun the chosen configuration against van before relying on it.",
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
            f"Basis: {r['basis']} (numbers of the {r.get('phase', 'sweep')} phase). {r['reason']}.",
            "",
        ]
        if r["recommended"]:
            lines += ["```bash", command_line(r, config), "```", ""]
    return "\n".join(lines)
