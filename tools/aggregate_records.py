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
  repeat) of the grid that the records span (every configuration of a cell in every repeat that any of that
  cell's records has) and that has no record. Nothing is dropped silently: a missing run is listed, never
  filled in, and the ratios it belongs to lose that repeat.

RESULTS_DIR is a ``results/`` folder (the records under ``RESULTS_DIR/runs/<model>/<corpus>/<configuration>/
r<repeat>.json``, as the run rule writes them). Errors: ``SystemExit`` naming RESULTS_DIR when it holds no
record, and :func:`kpadstudy.tables.read_runs`'s errors for a record that is not a run record.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

from kpadstudy import paired, tables, timings  # noqa: E402


def missing_runs(runs) -> list[tuple[str, str, str, int]]:
    """``[(model, corpus, configuration, repeat), ...]`` of the grid the records span that has no record.

    Args:
        runs: :func:`kpadstudy.tables.read_runs`'s table (columns model, corpus, configuration, repeat).

    Returns:
        The missing runs, sorted; per (model, corpus), the grid is its configurations x its repeats.
    """
    out = []
    for (model, corpus), cell in runs.groupby(["model", "corpus"]):
        have = set(zip(cell["configuration"], cell["repeat"].astype(int), strict=True))
        for configuration in sorted(cell["configuration"].unique()):
            for repeat in sorted(cell["repeat"].astype(int).unique()):
                if (configuration, repeat) not in have:
                    out.append((model, corpus, configuration, int(repeat)))
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the three tables; returns 0. See the module docstring for arguments and outputs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, help="a results/ folder: runs/<model>/<corpus>/<conf>/r<N>.json")
    parser.add_argument("out_prefix", help="e.g. results/gpu/h200-auto-long")
    args = parser.parse_args(argv)
    paths = sorted(args.results_dir.glob("runs/*/*/*/r*.json"))
    if not paths:
        raise SystemExit(
            f"{args.results_dir}: no run record under runs/<model>/<corpus>/<configuration>/r<repeat>.json; "
            "give the results/ folder of the study"
        )
    runs = tables.read_runs(paths)
    missing = missing_runs(runs)
    lines = [
        f"{len(runs)} run records under {args.results_dir} ({runs['status'].value_counts().to_dict()}); "
        f"{len(missing)} run(s) of the grid they span have no record" + (":" if missing else "")
    ] + [f"- {m} / {c} / {conf} / r{r}: no record (not run or not finished)" for m, c, conf, r in missing]
    print("\n".join(lines), file=sys.stderr)
    tables.write_table(runs, f"{args.out_prefix}-runs.parquet")
    tables.write_table(tables.cells(runs), f"{args.out_prefix}-cells.parquet")
    pairs, drift = paired.paired_table(runs), paired.drift_table(runs)
    Path(f"{args.out_prefix}-paired.md").write_text("\n".join(lines) + "\n\n" + paired.to_markdown(pairs, drift))
    root = args.results_dir.parent
    bench = {
        rule: sorted(p.relative_to(root).as_posix() for p in (args.results_dir / "benchmarks" / rule).rglob("*.tsv"))
        for rule in timings.STAGES
    }
    if args.results_dir.name == "results" and any(bench.values()):
        table = timings.timings({rule: paths for rule, paths in bench.items() if paths}, root=str(root))
        Path(f"{args.out_prefix}-timings.md").write_text(timings.summary(table))
    else:
        print(f"{args.results_dir}: no benchmark files in a folder named results: no timings written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
