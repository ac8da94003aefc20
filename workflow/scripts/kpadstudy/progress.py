"""Progress of a long study: runs done / total, the runs going now, and an ETA from the measured run times.

One mechanism with :mod:`kpadstudy.timings`: the same run records (``started_at``, ``finished_at``, ``boot_s``,
``status``) and attempt journals (``results/logs/<runs|confirm>/<job>/attempts.jsonl``) the timing table reads.

- At the start of every invocation the Snakefile (``onstart``) writes the plan, ``results/progress/plan.json``
  (:func:`write_plan`): the sweep's run records, how many confirmation runs to expect, and when it started.
- After every run, the run job writes ``results/progress.md`` and ``results/progress.json``
  (:func:`update`) and logs one line of it.

ETA (an estimate: say so wherever it is shown)::

    run_s    = median over the study's finished runs of (finished_at - started_at)      [s]
    parallel = runs going now + the one that just finished (at least 1): the concurrency measured now
    ETA      = ceil(runs left / parallel) x run_s                                         [s]

Runs left count the confirmation's expected runs (``confirm_expected``: an upper bound until its checkpoints
have run, :func:`kpadstudy.plan.confirm_runs_per_cell`).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from .execute import ATTEMPTS_FILE, read_attempts

PLAN = "results/progress/plan.json"
MARKDOWN = "results/progress.md"
JSON = "results/progress.json"


def write_plan(sweep_runs: list[str], confirm_expected: int, root: str | Path = ".", now: float | None = None) -> Path:
    """Write the plan of this invocation (``<root>/results/progress/plan.json``) and return its path.

    Args:
        sweep_runs: the sweep's run record paths (``results/runs/<model>/<corpus>/<configuration>/r<repeat>.json``),
            relative to ``root``.
        confirm_expected: how many confirmation runs the plan expects (0 without a confirmation).
        now: the invocation's start (epoch seconds; default: now). A run whose attempt started before it is
            not counted as going now (a journal left by an earlier, killed invocation).
    """
    path = Path(root) / PLAN
    path.parent.mkdir(parents=True, exist_ok=True)
    plan = {
        "started": time.time() if now is None else now,
        "sweep": list(sweep_runs),
        "confirm_expected": int(confirm_expected),
    }
    _write_atomic(path, json.dumps(plan, indent=1))
    return path


def _epoch(text: str | None) -> float | None:
    """Epoch seconds of a record's ``%Y-%m-%dT%H:%M:%S%z`` time; None when missing or unreadable."""
    if not text:
        return None
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def _log_dir(record: Path, root: Path) -> Path:
    """The log folder of a run record: ``results/runs/X.json`` -> ``results/logs/runs/X``, same for confirm."""
    rel = record.relative_to(root / "results").with_suffix("")
    return root / "results" / "logs" / rel


def progress(root: str | Path = ".", now: float | None = None) -> dict[str, Any]:
    """Where the study stands, from the plan (:func:`write_plan`) and the run records under ``root``.

    Returns:
        ``{"done", "total", "by_status": {status: n}, "running": [job, ...], "run_s", "boot_s", "parallel",
        "eta_s", "updated"}``: ``done`` counts planned sweep records and confirmation records that exist,
        ``total`` = sweep runs + max(confirm_expected, confirmation records planned so far); ``running``
        the jobs (``runs/<model>/<corpus>/<configuration>/r<repeat>`` or ``confirm/...``) whose attempt journal
        started in this invocation and that have no record yet; ``run_s`` / ``boot_s`` the median wall time
        and boot (seconds) of finished runs (None before the first); ``eta_s`` per the module docstring
        (None without ``run_s``; 0 when nothing is left).

    Raises:
        FileNotFoundError: no plan (``results/progress/plan.json``): the message says what writes it.
    """
    root = Path(root)
    plan_path = root / PLAN
    if not plan_path.exists():
        raise FileNotFoundError(f"{plan_path}: no progress plan; the Snakefile's onstart writes it when a study starts")
    plan = json.loads(plan_path.read_text())
    now = time.time() if now is None else now
    sweep = [root / p for p in plan["sweep"]]
    confirm_dir = root / "results" / "confirm"
    confirm = sorted(p for p in confirm_dir.glob("*/*/*/r*.json")) if confirm_dir.exists() else []
    records, walls, boots = [], [], []
    for path in [*sweep, *confirm]:
        if path.exists():
            try:
                records.append(json.loads(path.read_text()))
            except json.JSONDecodeError:
                continue  # being written by another job: counted at the next update
    by_status: dict[str, int] = {}
    for rec in records:
        by_status[str(rec.get("status"))] = by_status.get(str(rec.get("status")), 0) + 1
        t0, t1 = _epoch(rec.get("started_at")), _epoch(rec.get("finished_at"))
        if t0 is not None and t1 is not None and t1 >= t0:
            walls.append(t1 - t0)
        if rec.get("boot_s") is not None:
            boots.append(float(rec["boot_s"]))
    running = []
    planned_missing = [p for p in sweep if not p.exists()]
    logs = root / "results" / "logs"
    confirm_logs = sorted(p.parent for p in (logs / "confirm").glob(f"*/*/*/r*/{ATTEMPTS_FILE}"))
    candidates = [_log_dir(p, root) for p in planned_missing] + [
        d for d in confirm_logs if not (confirm_dir / d.relative_to(logs / "confirm")).with_suffix(".json").exists()
    ]
    for log_dir in candidates:
        starts = [_epoch(a.get("at")) for a in read_attempts(log_dir) if a.get("event") == "start"]
        if starts and starts[-1] is not None and starts[-1] >= float(plan["started"]) - 1:
            running.append(log_dir.relative_to(logs).as_posix())
    total = len(sweep) + max(int(plan.get("confirm_expected", 0)), len(confirm))
    done = len(records)
    run_s = statistics.median(walls) if walls else None
    parallel = max(1, len(running) + 1)
    left = max(0, total - done)
    eta = None if run_s is None else (0.0 if left == 0 else math.ceil(left / parallel) * run_s)
    return {
        "done": done,
        "total": total,
        "by_status": dict(sorted(by_status.items())),
        "running": running,
        "run_s": run_s,
        "boot_s": statistics.median(boots) if boots else None,
        "parallel": parallel,
        "eta_s": eta,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
    }


def _duration(seconds: float | None) -> str:
    """``"1 h 05 min"``, ``"12 min"``, ``"40 s"``; ``"unknown"`` for None."""
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min" if s >= 60 else f"{s} s"


def line(state: dict[str, Any]) -> str:
    """One line of :func:`progress`: ``"progress: 5 of 24 runs done (ok 4, lost 1); running: runs/...; ETA 12 min
    (median run 95 s, boot 60 s, 1 at a time)"``."""
    statuses = ", ".join(f"{k} {v}" for k, v in state["by_status"].items())
    running = ", ".join(state["running"]) or "none"
    eta = (
        "ETA unknown (no run finished yet)"
        if state["eta_s"] is None
        else f"ETA {_duration(state['eta_s'])} (median run {_duration(state['run_s'])}, boot "
        f"{_duration(state['boot_s'])}, {state['parallel']} at a time)"
    )
    return (
        f"progress: {state['done']} of {state['total']} runs done" + (f" ({statuses})" if statuses else "")
        + f"; running: {running}; {eta}"
    )  # fmt: skip


def markdown(state: dict[str, Any]) -> str:
    """``results/progress.md``: the line of :func:`line` spelled out, with how the ETA is made."""
    lines = [
        "# Progress",
        "",
        f"Updated {state['updated']} (after every run).",
        "",
        f"- runs done: {state['done']} of {state['total']}"
        + (" (" + ", ".join(f"{k}: {v}" for k, v in state["by_status"].items()) + ")" if state["by_status"] else ""),
        f"- running now: {', '.join(state['running']) or 'none'}",
        f"- median run (start to record): {_duration(state['run_s'])}; "
        f"median server boot: {_duration(state['boot_s'])}",
        f"- ETA: {_duration(state['eta_s'])} = ceil(runs left / {state['parallel']} at a time) x median run",
        "",
        "The ETA is an estimate from the runs finished so far; the confirmation's run count is an upper bound",
        "until its checkpoints have run.",
    ]
    return "\n".join(lines) + "\n"


def update(root: str | Path = ".", now: float | None = None) -> dict[str, Any]:
    """Write ``results/progress.md`` and ``results/progress.json`` under ``root`` from :func:`progress`, and
    return the state. Atomic writes (several run jobs may finish at once)."""
    state = progress(root, now)
    root = Path(root)
    _write_atomic(root / JSON, json.dumps(state, indent=1))
    _write_atomic(root / MARKDOWN, markdown(state))
    return state


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{time.time_ns()}.partial")
    tmp.write_text(text)
    tmp.replace(path)
