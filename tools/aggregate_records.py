"""Tables of the runs that finished when a study stopped early (a lease or allocation ran out mid-repeat).

    python tools/aggregate_records.py RESULTS_DIR OUT_PREFIX

Rule ``tables`` waits for every planned run; when a study stops before the last one (the device's time ran
out, a SLURM allocation ended), this makes the same tables from the records that exist, with the same package
functions (:func:`kpadstudy.tables.read_runs`, :func:`~kpadstudy.tables.cells`,
:func:`kpadstudy.paired.paired_table`, :func:`~kpadstudy.paired.drift_table`):

- ``OUT_PREFIX-runs.parquet`` (one row per record), ``OUT_PREFIX-cells.parquet`` (median and MAD per
  configuration) and ``OUT_PREFIX-paired.md`` (within-repeat ratios over the repeats where both runs exist,
  so n can differ between ratios), which ``make from-cache`` reads like the pipeline's own;
- ``OUT_PREFIX-timings.md`` (:func:`kpadstudy.timings.summary`: each job's wall time from the Snakemake
  benchmark files under ``RESULTS_DIR/benchmarks``, boot and measured seconds from the records), when
  RESULTS_DIR is named ``results`` and has benchmark files (the paths the benchmark files name start there);
- on stderr, and at the top of the markdown, every run without a record: each (model, corpus, configuration,
  repeat) of the grid that the records span (every cell of the records x every configuration of the records x
  every repeat of the records) and that has no record. Nothing is dropped silently: a missing run is listed, never
  filled in, and the ratios it belongs to lose that repeat; every run that is not ``ok`` is listed with its
  reason (counted in the cells table, never in a ratio).

Checked before anything is written: each record is a JSON object whose model, corpus, configuration and repeat
match its path (a copied or renamed record is refused, naming it); other ``.json`` files there (``r2.old.json``)
are listed as not read, as is ``results/confirm``; OUT_PREFIX's folder exists; the benchmark files parse.

RESULTS_DIR is a ``results/`` folder (the records under ``RESULTS_DIR/runs/<model>/<corpus>/<configuration>/
r<repeat>.json``, as the run rule writes them). Errors: ``SystemExit`` naming RESULTS_DIR when it holds no
record; one line (``aggregate_records: ...``) for :func:`kpadstudy.tables.read_runs`'s errors (a record that is not
a JSON object or lacks a key), :func:`check_paths`' and a bad benchmark file's.
"""

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

from kpadstudy import paired, tables, timings  # noqa: E402

RECORD = re.compile(r"r([0-9]+)\.json")


def record_paths(results_dir: Path) -> list[Path]:
    """The run records under ``results_dir/runs/*/*/*/``: the files named ``r<digits>.json``, sorted.

    Other ``.json`` files there (``r2.old.json``) and a ``results_dir/confirm`` folder are listed on stderr as not
    read.
    """
    records, others = [], []
    for path in sorted(results_dir.glob("runs/*/*/*/*.json")):
        (records if RECORD.fullmatch(path.name) else others).append(path)
    for path in others:
        print(f"{path}: not read (a run record is named r<repeat>.json)", file=sys.stderr)
    if (results_dir / "confirm").is_dir():
        print(f"{results_dir / 'confirm'}: confirmation records not read (only the sweep's runs/)", file=sys.stderr)
    return records


def check_paths(runs, paths: list[Path], results_dir: Path) -> None:
    """Each record's model, corpus, configuration and repeat (an integer) against its path.

    Args:
        runs: :func:`kpadstudy.tables.read_runs` of ``paths`` (one row per path, in their order).
        paths: :func:`record_paths`.
        results_dir: the study's ``results/`` folder.

    Raises:
        ValueError: a record whose fields differ from its path (a copied or renamed file); the message names it.
    """
    for path, rec in zip(paths, runs.to_dict("records"), strict=True):
        model, corpus, configuration = path.relative_to(results_dir / "runs").parts[:3]
        want = {"model": model, "corpus": corpus, "configuration": configuration}
        want["repeat"] = int(RECORD.fullmatch(path.name).group(1))
        wrong = {k: rec[k] for k, v in want.items() if rec[k] != v or isinstance(rec[k], bool)}
        if wrong:
            raise ValueError(
                f"{path}: the record says {wrong}, its path {want}: a copied or renamed record; put it back where "
                "its run job wrote it, or delete it and rerun its job"
            )


def missing_runs(runs) -> list[tuple[str, str, str, int]]:
    """``[(model, corpus, configuration, repeat), ...]`` of the grid the records span that has no record.

    Args:
        runs: :func:`kpadstudy.tables.read_runs`'s table (columns model, corpus, configuration, repeat).

    Returns:
        The missing runs, sorted. The grid is every (model, corpus) of the records x every configuration of the
        records x every repeat of the records (the pipeline plans each configuration in each repeat of each
        cell), so a cell or a repeat of which no record exists at all cannot be seen.
    """
    have = set(zip(runs["model"], runs["corpus"], runs["configuration"], runs["repeat"].astype(int), strict=True))
    cells = sorted(set(zip(runs["model"], runs["corpus"], strict=True)))
    configurations = sorted(runs["configuration"].unique())
    repeats = sorted(int(r) for r in runs["repeat"].unique())
    return [
        (model, corpus, configuration, repeat)
        for model, corpus in cells
        for configuration in configurations
        for repeat in repeats
        if (model, corpus, configuration, repeat) not in have
    ]


def main(argv: list[str] | None = None) -> int:
    """Write the tables; returns 0, or exits with one line naming what is wrong. See the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, help="a results/ folder: runs/<model>/<corpus>/<conf>/r<N>.json")
    parser.add_argument("out_prefix", help="e.g. results/gpu/h200-auto-long")
    args = parser.parse_args(argv)
    try:
        return write_tables(args.results_dir, args.out_prefix)
    except (ValueError, KeyError, OSError) as err:
        raise SystemExit(f"aggregate_records: {err.args[0] if isinstance(err, KeyError) else err}") from err


def write_tables(results_dir: Path, out_prefix: str) -> int:
    """:func:`main`'s work: check the records and OUT_PREFIX, then write every table; returns 0.

    Raises:
        SystemExit: no record under ``results_dir``, or OUT_PREFIX ends in ``/`` or its folder does not exist.
        ValueError, KeyError, OSError: a bad record (:func:`kpadstudy.tables.read_runs`, :func:`check_paths`) or
            benchmark file (:func:`kpadstudy.timings.timings`), before anything is written.
    """
    if out_prefix.endswith("/") or not Path(out_prefix).parent.is_dir():
        raise SystemExit(
            f"OUT_PREFIX {out_prefix!r}: give a folder that exists and a name prefix (e.g. results/gpu/h200-lease); "
            f"create {Path(out_prefix).parent if not out_prefix.endswith('/') else out_prefix} first"
        )
    paths = record_paths(results_dir)
    if not paths:
        raise SystemExit(
            f"{results_dir}: no run record under runs/<model>/<corpus>/<configuration>/r<repeat>.json"
            + ("" if results_dir.is_dir() else " (the folder does not exist)")
            + "; give the results/ folder of the study"
        )
    runs = tables.read_runs(paths)
    check_paths(runs, paths, results_dir)
    missing = missing_runs(runs)
    bad = runs[runs["status"] != "ok"].sort_values(["model", "corpus", "configuration", "repeat"])
    lines = [
        f"{len(runs)} run records under {results_dir} ({runs['status'].value_counts().to_dict()}); "
        f"{len(missing)} run(s) of the grid they span have no record" + (":" if missing else "")
    ] + [f"- {m} / {c} / {conf} / r{r}: no record (not run or not finished)" for m, c, conf, r in missing]
    for x in bad.to_dict("records"):
        why = f" ({x['reason']})" if isinstance(x.get("reason"), str) and x["reason"] else ""
        run = f"{x['model']} / {x['corpus']} / {x['configuration']} / r{x['repeat']}"
        lines.append(f"- {run}: {x['status']}{why}, not in the ratios")
    root = results_dir.parent
    bench = {
        rule: sorted(p.relative_to(root).as_posix() for p in (results_dir / "benchmarks" / rule).rglob("*.tsv"))
        for rule in timings.STAGES
    }
    timing_table = None
    if not any(bench.values()):
        print(
            f"{results_dir}: no benchmark files under {results_dir / 'benchmarks'}: no timings written", file=sys.stderr
        )
    elif results_dir.name != "results":
        print(
            f"{results_dir}: benchmark files name paths under results/, and this folder is not named results: no "
            "timings written (rename or link it)",
            file=sys.stderr,
        )
    else:
        timing_table = timings.timings({rule: p for rule, p in bench.items() if p}, root=str(root))
    print("\n".join(lines), file=sys.stderr)
    tables.write_table(runs, f"{out_prefix}-runs.parquet")
    tables.write_table(tables.cells(runs), f"{out_prefix}-cells.parquet")
    pairs, drift = paired.paired_table(runs), paired.drift_table(runs)
    Path(f"{out_prefix}-paired.md").write_text("\n".join(lines) + "\n\n" + paired.to_markdown(pairs, drift))
    if timing_table is not None:
        Path(f"{out_prefix}-timings.md").write_text(timings.summary(timing_table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
