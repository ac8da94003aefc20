"""Where a study's time went: the wall time of its heavy jobs, from Snakemake's ``benchmark:`` files, and
each run's server boot and measurement, from its record.

Paths: ``results/benchmarks/<rule>/<job>.tsv`` (Snakemake writes one per job of a rule with ``benchmark:``;
column ``s`` is the job's wall-clock seconds) and the run records ``results/runs/<job>.json`` with the
same ``<job>`` (``model/corpus/configuration/r<repeat>``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

# rule -> what the stage is called in the summary
STAGES = {
    "model": "model download / conversion",
    "corpus": "corpus",
    "mix": "mix",
    "run": "run",
    "confirm_run": "confirmation run",
    "equivalence": "equivalence check",
}


BENCHMARKS = "results/benchmarks"


def job_name(benchmark: str | Path, rule: str, root: str = BENCHMARKS) -> str:
    """``model/corpus/configuration/r1`` from ``<root>/<rule>/model/corpus/configuration/r1.tsv``.

    Raises:
        ValueError: ``benchmark`` is not under ``<root>/<rule>``.
    """
    return Path(benchmark).with_suffix("").relative_to(Path(root) / rule).as_posix()


RECORDS = {"run": "results/runs/{job}.json", "confirm_run": "results/confirm/{job}.json"}  # a run job's record
BOOT = ("boot_s", "model_load_s", "engine_init_s", "compile_s")  # run-record columns of a server's boot
COLUMNS = ["stage", "job", "wall_s", *BOOT, "measured_s", "status"]


def timings(benchmarks: dict[str, list[str]], root: str = ".") -> pd.DataFrame:
    """One row per job: ``stage`` (rule), ``job``, ``wall_s`` and, for runs, ``boot_s`` and ``measured_s``.

    Args:
        benchmarks: ``{rule: [benchmark TSV paths under BENCHMARKS/<rule>/]}`` (rules of :data:`STAGES`),
            relative to ``root``.
        root: the study's directory (where ``results/`` is).

    Returns:
        Columns :data:`COLUMNS`: ``wall_s`` is the job's wall-clock seconds (Snakemake's ``s``); for run jobs
        (:data:`RECORDS`) ``boot_s`` is the seconds until ``/health`` answered, ``model_load_s``, ``engine_init_s``
        and ``compile_s`` its parts that vLLM's log names (:func:`kpadstudy.record.boot_phases`), ``measured_s``
        the measured prompts' duration (``duration_s``; warm-up excluded) and ``status`` the run's; empty where
        they do not apply or the record has none.

    Raises:
        KeyError: a benchmark file without the column ``s`` (the message names the file).
        ValueError: a benchmark file with no row, or ``NA`` as its first ``s`` (the message names the file).
    """
    rows = []
    for rule, paths in benchmarks.items():
        for path in paths:
            table = pd.read_csv(Path(root) / path, sep="\t")
            if "s" not in table:
                raise KeyError(f"{path}: no column 's' (not a Snakemake benchmark file)")
            if table.empty or pd.isna(table["s"].iloc[0]):
                raise ValueError(
                    f"{path}: no wall time in column 's' (an empty or cut-off benchmark file); delete it and rerun "
                    "its job"
                )
            job = job_name(path, rule)
            row = {**dict.fromkeys(COLUMNS), "stage": rule, "job": job, "wall_s": float(table["s"].iloc[0])}
            record = Path(root) / RECORDS[rule].format(job=job) if rule in RECORDS else None
            if record is not None and record.exists():
                rec = json.loads(record.read_text())
                row.update({c: rec.get(c) for c in BOOT}, measured_s=rec.get("duration_s"), status=rec.get("status"))
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def rest_of_boot(table: pd.DataFrame) -> pd.Series:
    """Seconds of each boot outside the weights' loading and the engine's init that vLLM's log names: the processes'
    start and Python imports (the API server and its engine core each import vLLM), the device's init, building the
    model before its weights load, the tokenizer, the API server's own start and the last wait for ``/health``
    (polled each second); NaN where the record has no parts."""
    return table["boot_s"] - table["model_load_s"] - table["engine_init_s"]


def summary(table: pd.DataFrame) -> str:
    """The table as Markdown: one line per stage (jobs, their wall seconds), then every job.

    Jobs can run side by side, so the sum of their wall times is not the study's wall time.
    """

    def fmt(x: float | None) -> str:
        return "" if x is None or pd.isna(x) else f"{x:.0f}"

    def total(values: pd.Series) -> str:
        return fmt(values.sum()) if values.notna().any() else ""

    table = table.assign(rest_s=rest_of_boot(table.astype({c: float for c in BOOT})))
    lines = [
        "# Where the time went",
        "",
        "Wall-clock seconds of each heavy job (Snakemake `benchmark:` files under `results/benchmarks/`), and for",
        "each run its server boot (until `/health` answered) and its measured prompts (warm-up excluded). Of a boot,",
        "vLLM's log names the weights' loading and the engine's init (memory profiling, KV cache, torch.compile,",
        "CUDA graph capture; compile is its torch.compile part); the rest is the processes' start and Python imports",
        "(the API server and its engine core each import vLLM) and the API server's own start. Jobs can run side by",
        "side: the sum is not the study's wall time.",
        "",
        "| stage | jobs | wall s | boots s | rest of boots s | measurements s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rule, part in table.groupby("stage", sort=False):
        rest, boots = part["rest_s"].notna().sum(), part["boot_s"].notna().sum()
        of = f" ({rest} of {boots} boots)" if 0 < rest < boots else ""  # older records have no parts
        lines.append(
            f"| {STAGES.get(rule, rule)} | {len(part)} | {part['wall_s'].sum():.0f} | {total(part['boot_s'])} | "
            f"{total(part['rest_s'])}{of} | {total(part['measured_s'])} |"
        )
    lines += [
        "",
        "| stage | job | wall s | boot s | weights s | engine init s | compile s | rest of boot s | measured s "
        "| status |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples():
        status = r.status if isinstance(r.status, str) else ""
        lines.append(
            f"| {STAGES.get(r.stage, r.stage)} | {r.job} | {r.wall_s:.0f} | {fmt(r.boot_s)} | {fmt(r.model_load_s)} | "
            f"{fmt(r.engine_init_s)} | {fmt(r.compile_s)} | {fmt(r.rest_s)} | {fmt(r.measured_s)} | {status} |"
        )
    return "\n".join(lines) + "\n"
