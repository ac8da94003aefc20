"""Comparisons that survive drift: ratios taken within a repeat, summarized over repeats.

A repeat is one interleaved pass over a cell's configurations (a block of a randomized complete block
design): a machine that drifts between repeats (one H200 lease ran its confirmation 46-61% above its sweep)
moves every configuration of a repeat together, so the ratio of two configurations *within* a repeat
cancels it, while a ratio of medians taken at different times does not. Each comparison is summarized as
the geometric mean of its within-repeat ratios with a 95% t-interval on the log ratios (n - 1 degrees of
freedom), n, and how many repeats favour the numerator. Below 3 repeats there is no interval: the noise is
unknown, and the table says "single measurement" or "n = 2".

``results/paired.parquet`` and ``results/paired.md`` (rule tables).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from . import runrecord
from .runs import METHODS

CONFIDENCE = 0.95
MIN_INTERVAL_N = 3  # an interval from 2 ratios (1 degree of freedom) is too wide to state
# A configuration whose last repeat is more than 10% off its first is flagged as drifting. Why 10%: on one
# H200 lease van ran 6,530 / 7,401 / 10,703 tok/s over its three repeats (last / first 1.64) and the
# confirmation 46-61% above the sweep, while the effects the study measures are of that size (kpad8 / nopad8
# 1.13-1.43 per repeat); a drift of 10% already moves medians across repeats by as much as the smaller
# effects, so such absolute numbers must not be compared across repeats or phases.
DRIFT_FLAG = 0.10


def t_quantile(n: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student t quantile for ``n`` samples (``n - 1`` degrees of freedom), via scipy."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, n - 1))


def summarize(ratios: list[float], confidence: float = CONFIDENCE) -> dict:
    """Geometric mean of within-repeat ratios, its t-interval on the logs, n and the repeats that favour.

    Args:
        ratios: one ratio per repeat (numerator tok/s / denominator tok/s in the same repeat), all > 0.

    Returns:
        ``{"n", "ratio", "ci_low", "ci_high", "favour", "label"}``: ``ratio`` = exp(mean(log r));
        ``ci_low``/``ci_high`` = exp(mean ± t(n-1) x sd / sqrt(n)) with the sample sd (ddof 1), None when
        n < 3; ``favour`` = repeats with r > 1; ``label`` = "95% CI", "n = 2", "single measurement" or
        "no paired repeat" (n = 0, ``ratio`` None).

    Raises:
        ValueError: a ratio that is not a positive number.
    """
    if any(not (r > 0) or math.isinf(r) for r in ratios):
        raise ValueError(f"within-repeat ratios must be positive numbers, got {ratios}")
    n = len(ratios)
    out = {"n": n, "ratio": None, "ci_low": None, "ci_high": None, "favour": sum(r > 1 for r in ratios)}
    if n == 0:
        return {**out, "label": "no paired repeat"}
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / n
    out["ratio"] = math.exp(mean)
    if n < MIN_INTERVAL_N:
        return {**out, "label": "single measurement" if n == 1 else "n = 2"}
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(n, confidence) * sd / math.sqrt(n)
    return {**out, "ci_low": math.exp(mean - half), "ci_high": math.exp(mean + half), "label": f"{confidence:.0%} CI"}


def comparisons(configurations: list[str], methods: dict[str, str], ks: dict[str, int]) -> list[tuple[str, str]]:
    """The comparisons the product states, as ``(numerator, denominator)`` configuration names.

    kpad K and kpadauto K over every unpadded configuration at that K (nopad K, a suf entry at K; the core
    result), kpadauto over every fixed speculative configuration, any K (suf, kpad K, nopad K: its target is the
    best of them) and over every van variant (``vansync``:
    van with async scheduling off, as vLLM runs suffix decoding), every named variant over the default entry of
    its method and K (``kpad16nosize`` over ``kpad16``; ``trident``, a suf variant, is covered by the next) or,
    without that entry, over the first-listed entry of its method and K (``vansyncv1`` over ``vansync`` where no
    plain van ran), then every configuration over ``van`` and every speculative configuration over ``suf`` (where
    those are present), in the order given; no pair twice.
    """
    out: list[tuple[str, str]] = []
    for c in configurations:
        if methods[c] in ("kpad", "kpadauto"):
            out += [(c, o) for o in configurations if methods[o] in ("nopad", "suf") and ks[o] == ks[c]]
    for c in configurations:
        if methods[c] == "kpadauto":
            out += [(c, o) for o in configurations if methods[o] in ("suf", "kpad", "nopad")]
            out += [(c, o) for o in configurations if methods[o] == "van" and o != "van"]
    for c in configurations:
        if methods[c] in ("van", "suf") or pd.isna(ks[c]):
            default = methods[c]
        else:
            default = f"{methods[c]}{int(ks[c])}"
        if not (default in configurations and methods[default] == methods[c] and ks[default] == ks[c]):
            same = [o for o in configurations if methods[o] == methods[c] and (ks[o] == ks[c] or o == c)]
            default = same[0]  # c itself when it is the first of its method and K
        if c != default:
            out.append((c, default))
    if "van" in configurations:
        out += [(c, "van") for c in configurations if c != "van"]
    if "suf" in configurations:
        out += [(c, "suf") for c in configurations if c not in ("van", "suf")]
    return list(dict.fromkeys(out))


def prepared_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """``phase`` filled (absent = sweep) and ``output_tok_s`` numeric (absent when no run measured: NaN)."""
    tok = pd.to_numeric(runs["output_tok_s"], errors="coerce") if "output_tok_s" in runs else float("nan")
    return runs.assign(phase=runs["phase"].fillna("sweep") if "phase" in runs else "sweep", output_tok_s=tok)


#: a run's status (docs/concepts.md, "Is a run's number valid?") and phase (rule run or rule confirm_run)
STATUSES = ("ok", "invalid", "boot_failed", "lost")
PHASES = ("sweep", "confirm")
#: what names one run within one runs table
RUN_ID = ["model", "corpus", "phase", "configuration", "repeat"]
#: the columns every runs table has for :func:`read_runs_table` (``phase`` may be absent: sweep)
RUN_COLUMNS = ("model", "corpus", "configuration", "method", "k", "repeat", "status", "output_tok_s")
REMAKE = "remake the table from the run records (tools/aggregate_records.py)"
#: how a missing number reads when a numeric column was stored as text
MISSING_TEXT = ("", "nan", "NaN", "None", "<NA>")


def refuse_given_twice(paths: Sequence[str]) -> None:
    """Refuse runs tables of which one is given twice, by one path or two (``a.parquet``, ``./a.parquet``): its
    runs would count twice.

    Raises:
        ValueError: naming the paths and the fix.
    """
    resolved = [Path(p).resolve() for p in paths]
    if len(set(resolved)) < len(resolved):
        raise ValueError(f"a runs table is given twice ({list(paths)}): its runs would count twice; give each once")


def read_runs_table(
    path: str, required: Sequence[str] = (), fix: str = "give a runs table (results/runs.parquet or a *-runs.parquet)"
) -> pd.DataFrame:
    """One runs table from Parquet (a pipeline ``results/runs.parquet`` or a cached ``*-runs.parquet``), as
    :func:`prepared_runs` with the run record's numeric columns as numbers and ``repeat`` as integers: the one reader
    of every tool that sets tables side by side.

    Raises:
        ValueError: naming the file, the first offending row and the fix (``fix`` where the file is not a runs
            table: a config key to set, say): it is missing or unreadable, lacks a column of :data:`RUN_COLUMNS` or
            ``required`` (a caller's own) or holds no run; a numeric column holds text that is no number; a run of
            :func:`_refused_rows`; two rows of one :data:`RUN_ID`. Each is a run a table would otherwise drop, split
            or count twice without a word.
    """
    raw = _parquet(path, required, fix)
    runs = prepared_runs(_as_numbers(raw, path))
    for what, (mask, column, remedy) in _refused_rows(runs).items():
        if mask.any():
            i = mask.idxmax()
            value = (raw[column] if column in raw else runs[column])[i]
            shown = repr(value) if isinstance(value, str) else "missing" if pd.isna(value) else str(value)
            first = f"row {i}, {runs.at[i, 'configuration']}: {column} {shown}"
            raise ValueError(f"{path}: {int(mask.sum())} runs {what} (first: {first}); {remedy}")
    twice = runs[runs.duplicated(RUN_ID, keep=False)]
    if len(twice):
        x = twice.iloc[0]
        raise ValueError(
            f"{path}: {len(twice)} rows of {x['model']} / {x['corpus']} / {x['configuration']} r{x['repeat']} "
            f"({x['phase']}): one run per repeat; drop the copies"
        )
    return runs.assign(repeat=runs["repeat"].astype(int))


def _parquet(path: str, required: Sequence[str], fix: str) -> pd.DataFrame:
    """The table in ``path``, with a fresh index, refused (named) when it is no file, no Parquet, lacks a column of
    :data:`RUN_COLUMNS` or ``required`` or holds no row."""
    if Path(path).is_dir():
        raise ValueError(f"{path}: a folder, not a runs table; {fix}")
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file; {fix}")
    try:
        runs = pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable Parquet file ({str(err).splitlines()[0]}); {fix}") from err
    lacking = [c for c in dict.fromkeys([*RUN_COLUMNS, *required]) if c not in runs]
    if lacking:
        raise ValueError(f"{path}: not a runs table (lacks {lacking}); {fix}")
    if runs.empty:
        raise ValueError(f"{path}: holds no run; {fix}")
    return runs.reset_index(drop=True)


def _as_numbers(runs: pd.DataFrame, path: str) -> pd.DataFrame:
    """``runs`` with each column the run record types ``int`` or ``float`` as numbers (text such as "123.4" read as
    the number, :data:`MISSING_TEXT` as missing), refused where a value is set but no number."""
    numeric = [c for c in runs if c in runrecord.BY_NAME and runrecord.BY_NAME[c].type in ("int", "float")]
    out = runs.copy()
    for column in numeric:
        values = runs[column].where(runs[column].notna() & ~runs[column].isin(MISSING_TEXT))
        out[column] = pd.to_numeric(values, errors="coerce")
        text = values.notna() & out[column].isna()
        if text.any():
            i = text.idxmax()
            raise ValueError(f"{path}: column {column} holds no number at row {i} ({runs.at[i, column]!r}); {REMAKE}")
    return out


def _refused_rows(runs: pd.DataFrame) -> dict[str, tuple[pd.Series, str, str]]:
    """The runs of a :func:`prepared_runs` table that a summary would drop or misplace: by what is wrong, their mask,
    the column to show and the fix."""
    named = runs[["model", "corpus", "configuration"]].apply(lambda c: c.notna() & c.astype(str).str.strip().ne(""))
    repeat, k, rate = runs["repeat"], runs["k"], runs["output_tok_s"]
    speculative = runs["method"].ne("van")
    return {
        "have no model, corpus or configuration": (~named.all(axis=1), "configuration", REMAKE),
        f"have a method other than {', '.join(METHODS)}": (~runs["method"].isin(METHODS), "method", REMAKE),
        f"have a status other than {', '.join(STATUSES)}": (~runs["status"].isin(STATUSES), "status", REMAKE),
        f"have a phase other than {' or '.join(PHASES)}": (~runs["phase"].isin(PHASES), "phase", REMAKE),
        "have no whole repeat number >= 1": (~(repeat >= 1) | (repeat % 1 != 0), "repeat", REMAKE),
        "speculate without a whole k >= 1 (draft tokens)": (speculative & ~((k >= 1) & (k % 1 == 0)), "k", REMAKE),
        "are ok without a positive, finite output tok/s": (
            runs["status"].eq("ok") & ~rate.between(0, float("inf"), "neither"),
            "output_tok_s",
            "not a measured rate: fix or drop those rows",
        ),
    }


def repeat_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Output tok/s by repeat (rows) and configuration (columns) of the ``ok`` runs with a rate above 0, from
    :func:`prepared_runs` rows of one (model, corpus, phase)."""
    ok = runs[(runs["status"] == "ok") & (runs["output_tok_s"] > 0)]
    return ok.pivot_table(index="repeat", columns="configuration", values="output_tok_s", aggfunc="first")


def within_repeat_ratios(table: pd.DataFrame, numerator: str, denominator: str) -> pd.Series:
    """``numerator / denominator`` per repeat (index) of a :func:`repeat_table`, where both ran; empty when either
    never did."""
    if not {numerator, denominator} <= set(table.columns):
        return pd.Series(dtype=float)
    both = table[[numerator, denominator]].dropna()
    return both[numerator] / both[denominator]


def cell_comparisons(cell: pd.DataFrame) -> list[tuple[str, str]]:
    """The stated comparisons (:func:`comparisons`) among the configurations of one cell's runs, in a fixed
    order (by method, K, name), whatever order the runs ran in."""
    firsts = cell.drop_duplicates("configuration")
    order = {m: i for i, m in enumerate(METHODS)}
    firsts = firsts.assign(_o=firsts["method"].map(order).fillna(len(order))).sort_values(["_o", "k", "configuration"])
    names = list(firsts["configuration"])
    methods = dict(zip(firsts["configuration"], firsts["method"], strict=True))
    ks = dict(zip(firsts["configuration"], firsts["k"], strict=True))
    return comparisons(names, methods, ks)


def paired_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Every stated comparison of every (model, corpus, phase), from within-repeat ratios of ``ok`` runs.

    Args:
        runs: one row per run (``results/runs.parquet``): ``model, corpus, configuration, method, k, repeat,
            status, output_tok_s`` and, when present, ``phase`` (``sweep`` / ``confirm``; absent = sweep).
            Phases are never mixed: a confirmation repeat and a sweep repeat are different blocks.

    Returns:
        One row per comparison: ``model, corpus, phase, numerator, denominator, n, ratio, ci_low, ci_high,
        favour, label, ratios`` (the within-repeat ratios, repeat order, as text), from the repeats in which
        both configurations have an ``ok`` run with a rate above 0.
    """
    cols = ["model", "corpus", "phase", "numerator", "denominator", "n", "ratio", "ci_low", "ci_high"]
    cols += ["favour", "label", "ratios"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = prepared_runs(runs)
    rows = []
    for (model, corpus, phase), cell in runs.groupby(["model", "corpus", "phase"], sort=True):
        table = repeat_table(cell)
        for num, den in cell_comparisons(cell):
            ratios = within_repeat_ratios(table, num, den)
            s = summarize([float(x) for x in ratios])
            rows.append(
                {
                    "model": model,
                    "corpus": corpus,
                    "phase": phase,
                    "numerator": num,
                    "denominator": den,
                    **s,
                    "ratios": ", ".join(f"r{int(r)}: {x:.3f}" for r, x in ratios.items()),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def ratio_of_ratios(
    a: list[float], b: list[float], confidence: float = CONFIDENCE, names: tuple[str, str] = ("A", "B")
) -> dict:
    """B's ratio over A's, from the within-repeat ratios of one comparison in each of two sets of repeats that are
    not paired with each other: two studies (kpadstudy.studies), or a cell's sweep and its confirmation.

    Args:
        a, b: one ratio per repeat (numerator tok/s / denominator tok/s in that repeat) in A and in B, all > 0.
        names: what A and B are called in the label (("sweep", "confirmation") for phases).

    Returns:
        ``{"ratio", "ci_low", "ci_high", "df", "label"}``: ``ratio`` = geometric mean of ``b`` / geometric mean of
        ``a`` (None when either is empty); with n >= 3 in both, Welch's t-interval on mean(log b) - mean(log a):
        exp(d ± t(df) x sqrt(s_a²/n_a + s_b²/n_b)), sample sds (ddof 1), df by Welch-Satterthwaite (n_a + n_b - 2
        when both sds are 0), label "95% CI (Welch)"; else ``ci_low``/``ci_high``/``df`` None and the label says
        why: "no interval: A n = 2, B single measurement", "no paired repeat in B".

    Raises:
        ValueError: a ratio that is not a positive number.
    """
    from scipy import stats

    sa, sb = summarize(a, confidence), summarize(b, confidence)
    out = {"ratio": None, "ci_low": None, "ci_high": None, "df": None}
    empty = [name for name, s in zip(names, (sa, sb), strict=True) if s["n"] == 0]
    if empty:
        return {**out, "label": f"no paired repeat in {' and '.join(empty)}"}
    out["ratio"] = sb["ratio"] / sa["ratio"]
    if min(sa["n"], sb["n"]) < MIN_INTERVAL_N:
        return {**out, "label": f"no interval: {names[0]} {n_text(sa['n'])}, {names[1]} {n_text(sb['n'])}"}
    la, lb = [math.log(r) for r in a], [math.log(r) for r in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    if va + vb == 0:
        df = float(len(la) + len(lb) - 2)
    else:
        df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(va + vb)
    d = math.log(out["ratio"])
    return {
        "ratio": out["ratio"],
        "ci_low": math.exp(d - half),
        "ci_high": math.exp(d + half),
        "df": df,
        "label": f"{confidence:.0%} CI (Welch)",
    }


def phase_table(runs: pd.DataFrame, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Confirmation vs sweep of each stated comparison: the ratio of the two phases' within-repeat ratios, never
    of their absolute tok/s (a lease drifts between phases; within a repeat it cancels).

    Args:
        runs: the sweep's and the confirmation's runs together (``phase`` ``sweep`` / ``confirm``), as for
            :func:`paired_table`.

    Returns:
        One row per (model, corpus, comparison) of the confirmation's configurations that has a within-repeat
        ratio in both phases: ``model, corpus, numerator, denominator, sweep_ratio, sweep_n, confirm_ratio,
        confirm_n`` (geometric means of each phase's within-repeat ratios), ``confirm_over_sweep``, ``ci_low``,
        ``ci_high``, ``df``, ``label`` (:func:`ratio_of_ratios` with A = sweep, B = confirmation: Welch's interval
        when both phases have n >= 3). Near 1: the confirmation reproduced the sweep's ratio.
    """
    cols = ["model", "corpus", "numerator", "denominator", "sweep_ratio", "sweep_n", "confirm_ratio", "confirm_n"]
    cols += ["confirm_over_sweep", "ci_low", "ci_high", "df", "label"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = prepared_runs(runs)
    rows = []
    for (model, corpus), cell in runs.groupby(["model", "corpus"], sort=True):
        phases = {phase: repeat_table(g) for phase, g in cell.groupby("phase")}
        if not {"sweep", "confirm"} <= set(phases):
            continue
        for num, den in cell_comparisons(cell[cell["phase"] == "confirm"]):
            a = [float(x) for x in within_repeat_ratios(phases["sweep"], num, den)]
            b = [float(x) for x in within_repeat_ratios(phases["confirm"], num, den)]
            if not a or not b:
                continue
            rr = ratio_of_ratios(a, b, confidence, names=("sweep", "confirmation"))
            sa, sb = summarize(a, confidence), summarize(b, confidence)
            rows.append([model, corpus, num, den, sa["ratio"], sa["n"], sb["ratio"], sb["n"], rr["ratio"]])
            rows[-1] += [rr["ci_low"], rr["ci_high"], rr["df"], rr["label"]]
    return pd.DataFrame(rows, columns=cols)


def n_text(n: int) -> str:
    """``"single measurement"`` for 1, else ``"n = <n>"``."""
    return "single measurement" if n == 1 else f"n = {n}"


def drift_table(runs: pd.DataFrame, flag: float = DRIFT_FLAG) -> pd.DataFrame:
    """Each configuration's drift: its last ``ok`` repeat over its first, per (model, corpus, phase), and its
    confirmation median over its sweep median where it ran in both.

    Runs pooled from several leases (a ``source`` column, ``tools/pool_repeats.py``) drift within each source:
    a pooled table's last repeat over its first would divide one machine's rate by another's.

    Returns:
        One row per (model, corpus, configuration, what): ``what`` "last / first repeat (<phase>)" or
        "confirm / sweep (medians)" (with ", <source file name>" inside the brackets when pooled), ``n`` (runs
        behind it), ``ratio``, ``drifting`` (``|ratio - 1| > flag``). Drift does not bias within-repeat ratios
        (:func:`paired_table`); it makes absolute tok/s from different repeats or phases incomparable.
    """
    cols = ["model", "corpus", "configuration", "what", "n", "ratio", "drifting"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = prepared_runs(runs)
    ok = runs[(runs["status"] == "ok") & (runs["output_tok_s"] > 0)]  # a rate of 0 or none has no ratio
    rows = []
    for (model, corpus, conf), cell in ok.groupby(["model", "corpus", "configuration"], sort=True):
        parts = cell.groupby("source", sort=False) if "source" in cell else [(None, cell)]
        for source, g in parts:
            tag = f", {str(source).rsplit('/', 1)[-1]}" if source is not None else ""
            for phase, p in g.groupby("phase", sort=True):
                p = p.sort_values("repeat")
                if len(p) >= 2:
                    ratio = float(p["output_tok_s"].iloc[-1] / p["output_tok_s"].iloc[0])
                    what = f"last / first repeat ({phase}{tag})"
                    rows.append([model, corpus, conf, what, len(p), ratio, abs(ratio - 1) > flag])
            med = g.groupby("phase")["output_tok_s"].median()
            if {"sweep", "confirm"} <= set(med.index):
                ratio = float(med["confirm"] / med["sweep"])
                what = f"confirm / sweep (medians{tag})"
                rows.append([model, corpus, conf, what, int(len(g)), ratio, abs(ratio - 1) > flag])
    return pd.DataFrame(rows, columns=cols)


def describe(row: pd.Series | dict) -> str:
    """One comparison in words: ``"kpad8 / van: 1.30x (1.18-1.41, 95% CI), 3 of 3 repeats favour kpad8"``;
    ``"kpad8 / van: 1.30x (n = 2), 2 of 2 repeats favour kpad8"``; ``"... no paired repeat"``."""
    head = f"{row['numerator']} / {row['denominator']}"
    if row["n"] == 0:
        return f"{head}: no paired repeat"
    spread = f"{row['ci_low']:.2f}-{row['ci_high']:.2f}, {row['label']}" if pd.notna(row["ci_low"]) else row["label"]
    return f"{head}: {row['ratio']:.2f}x ({spread}), {row['favour']} of {row['n']} repeats favour {row['numerator']}"


def to_markdown(table: pd.DataFrame, drift: pd.DataFrame | None = None, phases: pd.DataFrame | None = None) -> str:
    """``results/paired.md``: one section per (model, corpus, phase), one line per comparison; then the
    confirmation vs the sweep (:func:`phase_table`) and the drift of each configuration (:func:`drift_table`)
    when given."""
    lines = [
        "# Paired comparisons: ratios within a repeat, over repeats",
        "",
        "Each ratio is numerator / denominator output tok/s in the same repeat (one interleaved pass), so drift",
        "between repeats cancels. Summary: geometric mean over repeats, 95% t-interval on the log ratios",
        f"(n - 1 degrees of freedom) when n >= {MIN_INTERVAL_N}; with fewer repeats the noise is unknown.",
        "",
    ]
    for (model, corpus, phase), g in table.groupby(["model", "corpus", "phase"], sort=True):
        lines += [f"## {model} / {corpus} ({phase})", ""]
        lines += [f"- {describe(r)}" + (f" [{r['ratios']}]" if r["ratios"] else "") for _, r in g.iterrows()]
        lines.append("")
    if phases is not None and len(phases):
        lines += [
            "# Confirmation vs sweep: the ratio of their within-repeat ratios",
            "",
            "Near 1: the confirmation reproduced the sweep's ratio. The repeats of two phases are not paired, so the",
            f"interval is Welch's on the difference of mean log ratios (both phases n >= {MIN_INTERVAL_N}).",
            "",
            "| model | corpus | comparison | sweep | confirmation | confirmation / sweep |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for _, r in phases.iterrows():
            spread = f"{r['ci_low']:.2f}-{r['ci_high']:.2f}, {r['label']}" if pd.notna(r["ci_low"]) else r["label"]
            lines.append(
                f"| {r['model']} | {r['corpus']} | {r['numerator']} / {r['denominator']} | "
                f"{r['sweep_ratio']:.2f}x ({n_text(int(r['sweep_n']))}) | "
                f"{r['confirm_ratio']:.2f}x ({n_text(int(r['confirm_n']))}) | "
                f"{r['confirm_over_sweep']:.2f} ({spread}) |"
            )
        lines.append("")
    if drift is not None and len(drift):
        lines += [
            f"# Drift (flagged above {DRIFT_FLAG:.0%}: absolute tok/s of those runs are not comparable across repeats)",
            "",
            "| model | corpus | configuration | what | n | ratio | drifting |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for _, r in drift.iterrows():
            lines.append(
                f"| {r['model']} | {r['corpus']} | {r['configuration']} | {r['what']} | {r['n']} | "
                f"{r['ratio']:.2f} | {'yes' if r['drifting'] else 'no'} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``python -m kpadstudy.paired RUNS.parquet OUT.md``: the paired comparisons of a runs table (e.g. a
    committed one) as markdown."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("runs")
    p.add_argument("out")
    a = p.parse_args(argv)
    runs = pd.read_parquet(a.runs)
    with open(a.out, "w") as f:
        f.write(to_markdown(paired_table(runs), drift_table(runs)))


if __name__ == "__main__":
    main()
