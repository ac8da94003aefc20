"""Land one lease's data set: the pipeline's own outputs from a device call's ``gpu.tgz``, under one name.

    python tools/land_lease.py GPU.tgz OUT_PREFIX

``GPU.tgz`` is what ``results/gpu/run-on-h200.sh`` writes to ``$OUT`` (the pipeline's ``results/`` and ``figures/``
of the device's copy of the tree and its state folder ``tmp/kpad-gpu-run/<copy>/<config>/``); ``OUT_PREFIX`` names
the data set, e.g. ``results/gpu/h100-widened-8b-mix`` (its folder must exist). Writes, from the pipeline's files
as they are:

- ``OUT_PREFIX-runs.parquet`` and ``-cells.parquet`` (copies), with ``.csv`` of each (pandas, no index);
- ``OUT_PREFIX-paired.md`` and ``-timings.md`` (copies);
- ``OUT_PREFIX-records.tgz``: ``results/snakemake.log`` (the background run's log from the state folder),
  ``results/logs``, ``results/benchmarks`` and ``results/runs`` (every run's record, failed ones included).

    python tools/land_lease.py --partial GPU.tgz OUT_PREFIX

lands an archive whose pipeline stopped before its last run (the lease's time ran out): the four tables above are
then made from the records that exist by ``tools/aggregate_records.py`` (``paired.md`` opens with every run of the
grid that has no record), the rest as above.

Prints the runs by configuration and status, and each run that is not ``ok`` with its reason, so a failed run is
seen before anything is pooled or plotted. What stays by hand: pooling (``tools/pool_repeats.py``), the data set's
``config/cache`` file (its ``study`` the config file(s) of the runs) and READMEs (``results/gpu/README.md``).

Errors (``SystemExit``, one line ``land_lease: ...``): an archive that cannot be read or lacks one of the files
above (with ``--partial``, one of the record folders), an archive holding the state of more than one run of the
pipeline (``--state`` picks one), an OUT_PREFIX whose folder does not exist, or any output file that exists already
(nothing is overwritten).
"""

import argparse
import contextlib
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aggregate_records  # noqa: E402

TABLES = ("runs.parquet", "cells.parquet", "paired.md", "timings.md")
"""The pipeline's files under ``results/`` copied as ``OUT_PREFIX-<name>``."""
RECORDS = ("logs", "benchmarks", "runs")
"""Folders under ``results/`` that go into ``OUT_PREFIX-records.tgz`` beside ``results/snakemake.log``."""
STATE_LOGS = "tmp/kpad-gpu-run"
"""Where the archive holds the state folders of ``run-on-h200.sh``, each with its ``snakemake.log``."""


def fail(message: str) -> None:
    raise SystemExit(f"land_lease: {message}")


def output(prefix: Path, name: str) -> Path:
    """``OUT_PREFIX-<name>``."""
    return prefix.with_name(f"{prefix.name}-{name}")


OUTPUTS = (*TABLES, "runs.csv", "cells.csv", "records.tgz")
"""Every file this writes, as ``OUT_PREFIX-<name>``."""


def state_log(root: Path, state: str | None) -> Path:
    """The background run's ``snakemake.log``: the only one in the archive, or the one under ``state``."""
    logs = sorted((root / STATE_LOGS).glob("**/snakemake.log"))
    if state is not None:
        logs = [log for log in logs if log.parent.relative_to(root / STATE_LOGS).as_posix().endswith(state)]
    found = ", ".join(str(log.relative_to(root)) for log in logs) or "none"
    if len(logs) != 1:
        matching = f" matching --state {state}" if state else ""
        fail(
            f"want one snakemake.log under {STATE_LOGS}/ in the archive{matching}, found {found}; "
            "give --state <config name> (or <copy>/<config>)"
        )
    return logs[0]


def run_summary(runs: pd.DataFrame) -> str:
    """Runs by configuration and status, then one line per run that is not ok, with its reason."""
    lines = []
    for configuration, group in runs.groupby("configuration", sort=True):
        counts = group["status"].value_counts().sort_index()
        lines.append(f"{configuration}: " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    for row in runs[runs["status"] != "ok"].itertuples():
        lines.append(f"{row.model}/{row.corpus}/{row.configuration}/r{row.repeat}: {row.status}: {row.reason}")
    return "\n".join(lines)


def land(archive: Path, prefix: Path, state: str | None = None, partial: bool = False) -> str:
    """Write the data set's files (module docstring) and return :func:`run_summary` of its runs. ``partial``: for an
    archive whose pipeline stopped before its last run (no tables yet), make the tables from the records that exist
    (``tools/aggregate_records.py``, which lists every run without a record at the top of ``paired.md``)."""
    if not prefix.parent.is_dir():
        fail(f"{prefix.parent} does not exist: OUT_PREFIX is <folder>/<name>, e.g. results/gpu/h100-widened-8b-mix")
    taken = [str(output(prefix, name)) for name in OUTPUTS if output(prefix, name).exists()]
    if taken:
        fail(f"{', '.join(taken)} exist already: choose another OUT_PREFIX or remove them")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(root, filter="data")
        except (OSError, tarfile.TarError) as error:
            fail(f"{archive}: cannot read it as a tar archive ({error})")
        missing = [f"results/{name}" for name in (*TABLES, *RECORDS) if not (root / "results" / name).exists()]
        unfinished = missing and all(name.removeprefix("results/") in TABLES for name in missing)
        if missing and not (partial and unfinished):
            hint = "; --partial makes the tables from the records that exist" if unfinished else ""
            fail(f"{archive} lacks {', '.join(missing)}: not a finished run-on-h200.sh archive{hint}")
        log = state_log(root, state)
        if missing:
            out = str(prefix.resolve())
            with contextlib.chdir(root):  # its tables name the records' folder as results, not a temporary path
                aggregate_records.write_tables(Path("results"), out)
        else:
            for name in TABLES:
                shutil.copyfile(root / "results" / name, output(prefix, name))
        tables = {name: pd.read_parquet(output(prefix, f"{name}.parquet")) for name in ("runs", "cells")}
        for name, table in tables.items():
            table.to_csv(output(prefix, f"{name}.csv"), index=False)
        shutil.copyfile(log, root / "results" / "snakemake.log")
        with tarfile.open(output(prefix, "records.tgz"), "w:gz") as tar:
            for name in ("snakemake.log", *RECORDS):
                tar.add(root / "results" / name, arcname=f"results/{name}")
        return run_summary(tables["runs"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive", type=Path, help="gpu.tgz of the lease's last call")
    parser.add_argument("prefix", type=Path, help="results/gpu/<gpu>-<name>")
    parser.add_argument("--state", help="the state folder to take snakemake.log from, when the archive holds several")
    parser.add_argument(
        "--partial", action="store_true", help="the pipeline stopped early: tables from the records that exist"
    )
    args = parser.parse_args(argv)
    print(land(args.archive, args.prefix, args.state, args.partial))
    print(f"landed {args.archive} as {args.prefix}-*")


if __name__ == "__main__":
    sys.exit(main())
