"""Execute one run: boot the server for one configuration, warm up, measure, record, stop.

A run always ends as a record (JSON) with a ``status``:
    ``ok``           every measured request completed with output, the server stayed up.
    ``invalid``      the measurement happened but cannot be trusted (failed warm-up or measured requests,
                     zero output tokens, the server died, the K-pad patch did not load, the client wrote
                     no result, a stage raised, or kpadauto's deferred-update check found a difference or
                     checked nothing); ``reason`` says which.
    ``boot_failed``  the server never became healthy, after every attempt of the retry policy;
                     ``boot_failure`` is the class (``no_kv_cache``, ``oom``, ``timeout``, ``crash``,
                     ``unsupported``, ``error``, :mod:`kpadstudy.boot`), ``reason`` starts with it and
                     quotes the log line or the exception; ``attempts`` and ``attempt_settings`` say what
                     each attempt used.
Records that are not ``ok`` are kept in ``runs.parquet`` and never plotted as numbers.

What a server, a client, the network or the metrics endpoint does never crashes the job: an exception at
boot (starting the server, the ``/health`` probe) is a ``boot_failed`` record of class ``error``; one at
client start, warm-up, measurement, the ``/metrics`` scrape or the K-pad counter files is an ``invalid``
record whose reason is ``"<stage>: <exception class>: <message>"`` (:func:`stage`); the server's process
group is stopped either way and the pipeline goes on. What stays a failure of the job: errors in our own
inputs (config and schema, an unknown configuration, ``check_pinning``'s ``ValueError``, a retry
adjustment the config cannot apply), no free GPU within ``node.gpu_wait_s``, no free port block, and a
record that cannot be written.

Independently of the status, ``client_limited`` says whether the run came near the load generator's own
ceiling. How a record is judged and measured (status, step modes, client limit, provenance) is in
:mod:`kpadstudy.record`; this module runs the server and the client.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from kpad_plugin import check_suffix_available, read_stats

from . import boot, corpora, cpus, metrics, ports, runrecord, runs, widen
from .record import (
    CLIENT_LIMIT_FRACTION,
    MIN_FULL_SHARE,
    acceptance,
    boot_phases,
    classify,
    client_failure,
    client_limit,
    config_hash,
    corpus_prompt_tokens,
    deferred_check,
    graph_lost,
    plugin_active,
    resolved_settings,
    step_measures,
    versions,
)
from .server import ServerBootError, get_text, running_server, start_group, stop


def resolve_device(requested: str) -> str:
    """``cuda`` or ``cpu``: ``auto`` picks ``cuda`` when torch sees a GPU."""
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


ATTEMPT_MARK = "=== kpadstudy: attempt with"
"""The line the server log gets before each attempt's boot, followed by the attempt's settings."""


def attempt_log(server_log: Path) -> str:
    """The server log of the latest attempt: from its :data:`ATTEMPT_MARK` line on (all of it without one)."""
    text = server_log.read_bytes().decode("utf-8", errors="replace")
    return text[max(text.rfind(ATTEMPT_MARK), 0) :]


class StageError(Exception):
    """An exception raised by a stage of a measured run (what a server, client or network did).

    ``str()`` is ``"<stage>: <exception class>: <message>"``, the run's ``reason``.
    """

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {error}"[:500])
        self.stage = stage


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Turn any exception of the ``with`` block into a :class:`StageError` named ``name``.

    Only the parts of a run that talk to the server, the client or their files are wrapped: errors in
    our own inputs (config, pinning, commands) stay errors of the job.
    """
    try:
        yield
    except Exception as err:  # noqa: BLE001 - any failure of the server side becomes the run's record
        raise StageError(name, err) from err


CLIENT_GRACE_S = 20.0  # seconds a client may take to notice that its server died


def execute_run(
    *,
    config: dict[str, Any],
    model: str,
    model_path: str,
    corpus_path: str,
    corpus: str,
    configuration: runs.Configuration,
    repeat: int,
    out_json: Path,
    log_dir: Path,
    plugin_path: str,
    workflow_commit: str | None = None,
    allowed_cpus: set[int] | None = None,
    phase: str = "sweep",
    position: int | None = None,
) -> dict[str, Any]:
    """Run one (model, corpus, configuration, repeat) and write its record to ``out_json``.

    ``configuration`` is the run's own, resolved once by its rule's script (:func:`kpadstudy.runs.configuration`).
    ``position`` is the run's 1-based place in its repeat; None = its place in the sweep's order
    (:func:`kpadstudy.runs.position`; a confirmation run passes its place in :func:`kpadstudy.confirm.confirm_order`).

    The run takes a locked block of ports (:mod:`kpadstudy.ports`), a CPU slot of config ``taskset``
    (:func:`kpadstudy.cpus.allocated_slot`) and, on a GPU node, its own GPUs (:mod:`kpadstudy.gpus`); the server's
    process group is stopped on success, error, SIGINT and SIGTERM (:func:`kpadstudy.server.running_server`). A
    failed boot is classified (:mod:`kpadstudy.boot`) and retried with config ``server.retry``
    (:func:`_boot_attempts`). The record is written atomically, so an interrupted run leaves none.

    Args:
        allowed_cpus: CPUs this job may use (default ``os.sched_getaffinity(0)``).
        phase: ``sweep`` (rule run) or ``confirm`` (rule confirm_run), recorded as ``phase``.

    Returns:
        The record (also written). Boot failures and invalid measurements are records too.

    Raises:
        ValueError: our own inputs, before any server starts (:func:`_checked_inputs`).
        KeyError: a config key the run needs is missing (a config that bypassed the schema).
        TimeoutError: the run's GPUs (``node.gpu_wait_s``) or a CPU slot (``node.cpu_wait_s``) stayed busy.
        RuntimeError: no free port block (:func:`kpadstudy.ports.port_block`).
        OSError: the record cannot be written.
    """
    retry = _checked_inputs(config, configuration, allowed_cpus)
    node, device, log_dir = config.get("node") or {}, resolve_device(config.get("device", "auto")), Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    for name in ("server.log", "client.log", "server.pid"):  # a rerun's logs start empty
        (log_dir / name).unlink(missing_ok=True)
    tp = int(config["models"][model].get("tensor_parallel_size", 1))
    n_gpus = tp if device == "cuda" else 0  # GPUs this run takes
    record = record_header(config, model, corpus, configuration, repeat, phase, position, device, workflow_commit)
    record.update(widen.model_facts(Path(model_path)))
    with (
        ports.port_block(node.get("lock_dir"), node.get("port_range")) as block,
        cpus.allocated(config.get("taskset") or {}, n_gpus, node, prefer=f"{model}/{corpus}", allowed=allowed_cpus) as (
            slot_index,
            slot,
            gpu_ids,
        ),
        tempfile.TemporaryDirectory() as tmp,
    ):
        gpus = gpu_ids if n_gpus else None
        record.update(
            port=block.api,
            vllm_port=block.vllm_base,
            cuda_visible_devices=",".join(gpus) if gpus else None,
            cpu_slot=slot_index,
            server_cpus=slot["server"],
            client_cpus=slot["client"],
            cpus_shared=slot["shared"],
        )
        records, backend = corpora.read_jsonl(Path(corpus_path)), config["server"].get("backend", "vllm")
        context = RunContext(
            model, model_path, configuration, records, block, slot, gpus, device, tp, backend, plugin_path,
            log_dir / "server.log", log_dir / "client.log",
        )  # fmt: skip
        record.update(_boot_attempts(context, config, retry, Path(tmp), record))
    record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_record(record, Path(out_json))
    return record


def _checked_inputs(
    config: dict[str, Any], configuration: runs.Configuration, allowed_cpus: set[int] | None
) -> dict[str, Any]:
    """The run's retry policy, after the checks that must fail before any server starts: a taskset outside
    ``allowed_cpus``, suffix decoding without arctic-inference, a retry adjustment the config cannot apply
    (ValueError, naming it)."""
    cpus.check_pinning(config.get("taskset") or {}, allowed_cpus)
    if configuration.suffix and config["server"].get("backend", "vllm") == "vllm":  # ngram needs no arctic-inference
        check_suffix_available(f"configuration {configuration.name!r} uses suffix decoding: ")
    retry = config["server"].get("retry") or {"attempts": 1, "adjust": {}}
    boot.attempt_settings(
        config, {**retry, "attempts": 1 + len(retry.get("adjust") or {})}, list(retry.get("adjust") or {})
    )  # config errors now
    return retry


def _boot_attempts(
    context: RunContext, config: dict[str, Any], retry: dict[str, Any], tmp: Path, record: dict[str, Any]
) -> dict[str, Any]:
    """Boot attempts under the retry policy (:func:`kpadstudy.boot.attempt_settings`) until one boots; each fills
    ``record`` (:func:`_attempt`). Returns ``attempts`` and ``attempt_settings`` (each attempt's settings and
    result)."""
    history: list[str] = []
    attempt_log: list[dict[str, Any]] = []
    # attempts >= 1 (schema), so the first call always gives settings
    while (settings := boot.attempt_settings(config, retry, history)) is not None:
        attempt_config = boot.apply_settings(config, settings)
        outcome = _attempt(context, attempt_config, settings, tmp / f"attempt{len(history) + 1}", record)
        attempt_log.append({"attempt": len(history) + 1, **settings, "result": outcome})
        if outcome == "ok":
            break
        history.append(outcome)
    return {"attempts": len(attempt_log), "attempt_settings": attempt_log}


def write_record(record: dict[str, Any], out_json: Path) -> None:
    """Write a run record atomically (``.partial``, then renamed), so an interrupted write leaves none.

    Raises:
        ValueError: the record's columns are not exactly :data:`kpadstudy.runrecord.NAMES` (a programming error).
    """
    runrecord.check(record, str(out_json))
    out_json.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out_json.with_suffix(".partial")
    tmp_out.write_text(json.dumps(record, indent=1, default=str))
    tmp_out.replace(out_json)


def record_header(
    config: dict[str, Any],
    model: str,
    corpus: str,
    configuration: runs.Configuration,
    repeat: int,
    phase: str,
    position: int | None,
    device: str,
    workflow_commit: str | None,
) -> dict[str, Any]:
    """The fields every record starts with: what ran (model, corpus, configuration, repeat, its ``position``
    in the repeat, ``phase``), the settings and versions, ``config_hash`` and ``started_at``."""
    load = config["load"]
    return runrecord.blank() | {
        "model": model,
        "corpus": corpus,
        **runs.describe(configuration),
        "repeat": repeat,
        "position": runs.position(config, configuration.name, repeat) if position is None else position,
        "order_seed": config.get("order_seed"),
        "device": device,
        "workflow_commit": workflow_commit,
        **versions(),
        "max_concurrency": load["max_concurrency"],
        "max_tokens": load["max_tokens"],
        "temperature": load["temperature"],
        "seed": config["server"].get("seed", 0),
        "prompts_seed": config["prompts"]["seed"],
        "config_hash": config_hash(config, configuration.name),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "server_backend": config["server"].get("backend", "vllm"),
        "phase": phase,
    }


#: the attempt journal of a run job, in its log folder: one JSON line per attempt's start and per error
ATTEMPTS_FILE = "attempts.jsonl"


def note_attempt(log_dir: Path, attempt: int, event: str, **fields: Any) -> None:
    """Append ``{"attempt", "event", "at", "host", "pid", **fields}`` to the run's attempt journal
    (``<log_dir>/attempts.jsonl``); attempt 1's ``start`` begins a new journal. ``event``: ``start`` or
    ``error``."""
    import socket

    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    line = {
        "attempt": attempt,
        "event": event,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **fields,
    }
    with open(log_dir / ATTEMPTS_FILE, "w" if (attempt == 1 and event == "start") else "a") as f:
        f.write(json.dumps(line) + "\n")


def read_attempts(log_dir: Path) -> list[dict[str, Any]]:
    """The run's attempt journal (:func:`note_attempt`); [] when there is none. A line that is not a JSON
    object with ``attempt`` and ``event`` (a job killed while writing it) is skipped and logged."""
    import logging

    path = Path(log_dir) / ATTEMPTS_FILE
    if not path.exists():
        return []
    out, bad = [], 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or not {"attempt", "event"} <= set(entry):
                raise ValueError(line)
            out.append(entry)
        except ValueError:
            bad += 1
    if bad:
        logging.getLogger("run").warning("%s: skipped %d unreadable line(s)", path, bad)
    return out


def run_job(*, attempt: int, run_attempts: int, **kwargs: Any) -> dict[str, Any]:
    """One attempt of a run job (rules run and confirm_run, ``retries`` = ``run_attempts``).

    Attempts 1..``run_attempts`` measure (:func:`execute_run`, same keyword arguments), each noted in the
    run's attempt journal; a Python exception is noted with its message and raised. A job killed from
    outside (SIGKILL, a time or memory limit, a lost node) notes nothing more and writes no record, so
    Snakemake retries it. The attempt after the last one measures nothing: it writes the record with status
    ``lost``, the reason naming each attempt's start, host and what the journal holds, so the cell's later
    runs and the tables still run (a lost run costs that run only).

    An attempt stopped by Ctrl-C (SIGINT, which the rule script turns into ``SystemExit(130)``) is noted as
    ``interrupted``, and the next attempt, if Snakemake starts one (``retries``), fails at once: the user
    stopped the study. SIGTERM (Snakemake's own stop, SLURM's time limit) counts as a kill.

    Raises:
        RuntimeError: on the attempt after the last, when the last measuring attempt ended with an error of
            its own (the message quotes it): such a job fails as that attempt did, it is not recorded lost;
            on any attempt after an interrupted one.
        Whatever :func:`execute_run` raises, on a measuring attempt.
    """
    log_dir, out_json = Path(kwargs["log_dir"]), Path(kwargs["out_json"])
    if attempt > 1:
        interrupted = [e for e in read_attempts(log_dir) if e["event"] == "interrupted" and e["attempt"] == attempt - 1]
        if interrupted:  # Ctrl-C: the user stopped the study; a retry must not measure on behind their back
            err = RuntimeError(
                f"attempt {attempt - 1} of this run was interrupted (Ctrl-C, SIGINT); not retried: run snakemake "
                "again to measure it"
            )
            note_attempt(log_dir, attempt, "interrupted", error=str(err))
            raise err
    if attempt <= run_attempts:
        note_attempt(log_dir, attempt, "start")
        try:
            return execute_run(**kwargs)
        except Exception as err:
            note_attempt(log_dir, attempt, "error", error=f"{type(err).__name__}: {err}")
            raise
        except SystemExit as exc:
            if exc.code == 128 + 2:  # SIGINT, turned into SystemExit by the rule script
                note_attempt(log_dir, attempt, "interrupted")
            raise
    journal = read_attempts(log_dir)
    last = max((e["attempt"] for e in journal), default=0)
    errors = [e for e in journal if e["event"] == "error" and e["attempt"] == last]
    if errors:
        raise RuntimeError(
            f"attempt {last} of this run failed with {errors[-1]['error']} "
            f"(journal {log_dir / ATTEMPTS_FILE}); fix that and rerun"
        )
    record = lost_record(journal, run_attempts, **kwargs)
    write_record(record, out_json)
    return record


def lost_record(journal: list[dict[str, Any]], run_attempts: int, **kwargs: Any) -> dict[str, Any]:
    """The record of a run whose job was killed on each measuring attempt: status ``lost``, the reason naming each
    attempt's start, host and error from the attempt ``journal``; ``kwargs`` as for :func:`execute_run`."""
    config, log_dir = kwargs["config"], Path(kwargs["log_dir"])
    starts = [e for e in journal if e["event"] == "start"]
    failed = {e["attempt"]: e.get("error", "?") for e in journal if e["event"] == "error"}
    killed = [e for e in starts if e["attempt"] not in failed]
    when = ", ".join(f"{e.get('at', '?')} on {e.get('host', '?')}" for e in killed) or "never"
    earlier = "; ".join(f"attempt {a} failed with {err}" for a, err in sorted(failed.items()))
    record = record_header(
        config,
        kwargs["model"],
        kwargs["corpus"],
        kwargs["configuration"],
        kwargs["repeat"],
        kwargs.get("phase", "sweep"),
        kwargs.get("position"),
        config.get("device", "auto"),
        kwargs.get("workflow_commit"),
    )
    record.update(
        status="lost",
        reason=(
            f"lost: the job was killed without writing its record on {len(killed)} of {run_attempts} attempts "
            f"(started {when}): SIGKILL, a time or memory limit or a lost node"
            + (f"; {earlier}" if earlier else "")
            + (f"; no attempt journal in {log_dir}" if not journal else f"; logs in {log_dir}")
        ),
        attempts=len(starts),
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    return record


def read_progress(path: Path | None) -> int | None:
    """The client's streamed-chunk count (``--progress-file``), None when there is none yet or it is unreadable."""
    if path is None:
        return None
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def wait_client(
    client: subprocess.Popen,
    server: subprocess.Popen,
    *,
    progress: Path | None = None,
    stall_s: float | None = None,
    deadline_s: float | None = None,
    grace_s: float = CLIENT_GRACE_S,
    poll_s: float = 0.5,
) -> tuple[bool, str]:
    """Wait for the benchmark client to finish, watching it; return ``(server alive, watchdog reason)``.

    When the server dies first, the client gets ``grace_s`` seconds to notice (its requests fail) and is
    then stopped: a client can hang on connections to a dead server, and the run must end. The watchdog
    stops the client when no chunk was streamed for ``stall_s`` seconds (the count in ``progress``, which
    the client writes every 0.5 s from when it starts sending, after its import of vLLM and the health
    wait; the clock starts when the file first appears) or when it has run ``deadline_s`` seconds in all
    (from the call: a client that never starts sending is stopped then); its reason is then
    ``"stall: ..."`` or ``"deadline: ..."``, else ``""``.
    """
    start = last_change = time.monotonic()
    last_count, died_at, reason = None, None, ""
    while client.poll() is None:
        now = time.monotonic()
        if died_at is None and server.poll() is not None:
            died_at = now
        if died_at is not None and now - died_at > grace_s:
            stop(client, grace_s=5.0)
            break
        count = read_progress(progress)
        if count != last_count:
            last_count, last_change = count, now
        if stall_s and last_count is not None and now - last_change > stall_s:
            reason = (
                f"stall: no token streamed for {stall_s:g} s (load.stall_s; "
                f"{last_count or 0} chunks streamed before), the server process still running"
            )
        elif deadline_s and now - start > deadline_s:
            reason = f"deadline: the client ran {now - start:.0f} s, past load.deadline_s = {deadline_s:g} s"
        if reason:
            stop(client, grace_s=5.0)
            break
        time.sleep(poll_s)
    return server.poll() is None, reason


def fake_server_command(
    port: int, configuration: runs.Configuration, server: dict[str, Any], cpus: str | None, python: str = sys.executable
) -> list[str]:
    """Command line of the fake server (config ``server.backend: fake``): no model, streams on a fixed schedule.

    Tokens per chunk: 1 for van, ``1 + k // 4`` for speculative configurations (so a larger K is
    faster and the best kpad K is the largest); ``server.fake.chunk_gap_ms`` between chunks; faults to
    inject: ``server.fake.fail_requests``, ``server.fake.metrics_text``, ``server.fake.fault`` on request
    ``server.fake.fault_request`` (:data:`kpadstudy.fake_server.FAULTS`); ``server.fake.kill_job``, a list of
    configuration names whose server SIGKILLs the run job that started it (a job killed from outside, on every
    attempt). For tests of the pipeline's life cycle only: its numbers mean nothing.
    """
    per_chunk = 1 + configuration.k // 4 if configuration.speculative else 1
    fake = server.get("fake") or {}
    cmd = ["taskset", "-c", cpus] if cpus else []
    return (
        cmd
        + [
            python,
            "-m",
            "kpadstudy.fake_server",
            "--port",
            str(port),
            "--tokens-per-chunk",
            str(per_chunk),
            "--chunk-gap-ms",
            str(fake.get("chunk_gap_ms", 20.0)),
            "--fail-requests",
            str(fake.get("fail_requests", 0)),
            "--metrics-text",
            fake.get("metrics_text", ""),
        ]
        + (
            ["--fault", fake["fault"], "--fault-request", str(fake.get("fault_request", 0))]
            if fake.get("fault")
            else []
        )
        + (["--kill-parent"] if configuration.name in (fake.get("kill_job") or []) else [])
    )


@dataclasses.dataclass(frozen=True)
class RunContext:
    """The fixed facts of one run, made once by :func:`execute_run` and handed to each boot attempt.

    Attributes:
        model: the served model name; ``model_path`` its checkpoint (also the client's tokenizer).
        configuration: the configuration as the config gives it (an attempt may lower its GPU memory share).
        records: the corpus records (warm-up and measured prompts).
        block: the run's locked ports; ``slot``: its CPU lists ``{"server", "client"}``; ``gpu_ids``: its
            GPUs (None on CPU).
        device: ``cuda`` or ``cpu``; ``tensor_parallel_size``: GPUs per server; ``backend``: ``vllm`` or ``fake``.
        plugin_path: the folder holding ``kpad_plugin``; ``server_log``, ``client_log``: the run's logs.
    """

    model: str
    model_path: str
    configuration: runs.Configuration
    records: list[dict[str, Any]]
    block: ports.PortBlock
    slot: dict[str, str | None]
    gpu_ids: list[str] | None
    device: str
    tensor_parallel_size: int
    backend: str
    plugin_path: str
    server_log: Path
    client_log: Path


@dataclasses.dataclass(frozen=True)
class Commands:
    """What one boot attempt runs (:func:`commands`).

    Attributes:
        server, env: the server's command line and environment; ``recorded_env`` the record's ``server_env``.
        client, client_env: the load generator's command line and environment.
        n_warmup, n_measured: prompts it sends.
        tmp: the attempt's scratch folder: the client writes ``after-warmup.json`` (its snapshot after the
            warm-up), ``bench.json`` (its result) and ``progress`` there; the K-pad plugin ``kpad-stats/``.
    """

    server: list[str]
    env: dict[str, str]
    recorded_env: str
    client: list[str]
    client_env: dict[str, str]
    n_warmup: int
    n_measured: int
    tmp: Path


def commands(ctx: RunContext, config: dict[str, Any], configuration: runs.Configuration, tmp: Path) -> Commands:
    """The server's and the client's commands of one attempt, and the prompt files the client reads (written)."""
    server_cfg, load = config["server"], config["load"]
    block, pin = ctx.block, ctx.slot
    if ctx.backend == "fake":
        server_cmd = fake_server_command(block.api, configuration, server_cfg, pin["server"])
    else:
        server_cmd = runs.server_command(
            model_path=ctx.model_path,
            served_model_name=ctx.model,
            port=block.api,
            configuration=configuration,
            server=server_cfg,
            tensor_parallel_size=ctx.tensor_parallel_size,
            device=ctx.device,
            cpus=pin["server"],
            max_concurrency=int(load["max_concurrency"]),
        )
    tmp.mkdir(parents=True, exist_ok=True)
    env = runs.server_env(
        dict(os.environ),
        configuration=configuration,
        server=server_cfg,
        device=ctx.device,
        plugin_path=ctx.plugin_path,
        vllm_port=block.vllm_base,
        cuda_visible_devices=ctx.gpu_ids,
        scratch_dir=str(tmp),
    )
    recorded = runs.recorded_env(env, runs.configured_env(server_cfg.get("env"), configuration.env))
    env["KPAD_STATS_DIR"] = str(tmp / "kpad-stats")
    # the client's imports leave torch's cache folders in the run's scratch, not in /tmp
    client_env = dict(os.environ, TMPDIR=str(tmp))
    client_env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent) + (
        ":" + client_env["PYTHONPATH"] if client_env.get("PYTHONPATH") else ""
    )
    n = {
        split: corpora.write_jsonl(corpora.bench_prompts(ctx.records, split), tmp / f"{split}.jsonl")
        for split in ("warmup", "measured")
    }
    client_cmd = (
        runs.bench_command(
            base_url=f"http://127.0.0.1:{block.api}",
            served_model_name=ctx.model,
            tokenizer=ctx.model_path,
            dataset_path=str(tmp / "measured.jsonl"),
            num_prompts=n["measured"],
            load=load,
            seed=server_cfg.get("seed", 0),
            result_dir=str(tmp),
            result_filename="bench.json",
            cpus=pin["client"],
        )
        + runs.warmup_args(str(tmp / "warmup.jsonl"), n["warmup"])
        + ["--snapshot-out", str(tmp / "after-warmup.json"), "--stats-dir", str(tmp / "kpad-stats")]
        + ["--wait-healthy-s", str(float(server_cfg["boot_timeout_s"]) + 30), "--progress-file", str(tmp / "progress")]
    )
    return Commands(server_cmd, env, recorded, client_cmd, client_env, n["warmup"], n["measured"], tmp)


def _attempt(
    ctx: RunContext, config: dict[str, Any], settings: dict[str, Any], tmp: Path, record: dict[str, Any]
) -> str:
    """One boot of the server and, once healthy, the measurement; fills ``record``.

    Args:
        ctx: the run's fixed facts.
        config: the config with this attempt's settings applied (:func:`kpadstudy.boot.apply_settings`).
        settings: this attempt's adjustable settings (written to the server log).
        tmp: this attempt's scratch folder (prompt files, the client's result, counters, vLLM's sockets).
        record: the run's record, filled in place.

    Returns ``"ok"`` when the server became healthy (whatever the measurement's status), else the boot
    failure's reason (:func:`kpadstudy.boot.classify_boot_failure`), also recorded as ``boot_failed``;
    ``"client_error"`` when the client could not be started.
    """
    configuration = ctx.configuration
    if settings.get("gpu_memory_utilization") not in (None, configuration.gpu_memory_utilization):
        configuration = dataclasses.replace(configuration, gpu_memory_utilization=settings["gpu_memory_utilization"])
    cmds = commands(ctx, config, configuration, tmp)
    record.update(
        server_command=" ".join(cmds.server),
        server_env=cmds.recorded_env,
        client_command=" ".join(cmds.client),
        n_warmup=cmds.n_warmup,
        n_measured=cmds.n_measured,
        boot_failure=None,
    )
    with open(ctx.server_log, "a") as f:
        f.write(f"{ATTEMPT_MARK} {json.dumps(settings)}\n")
    client = None
    try:
        # The client starts with the server: it imports vLLM while the server boots, then waits for /health.
        with stage("client start"), open(ctx.client_log, "ab") as clog:
            client = start_group(cmds.client, cmds.client_env, clog)
        seen = observe(ctx, config, cmds, client, record)
        record["client_returncode"] = client.returncode
        record.update(measures(ctx, config, configuration, cmds, seen, client.returncode))
        return "ok"
    except ServerBootError as err:
        reason, evidence = boot.classify_boot_failure(
            attempt_log(ctx.server_log), err.exit_code, err.reason == "timeout", err.error
        )
        record.update(status="boot_failed", reason=f"{reason}: {evidence} ({err})", boot_failure=reason)
        return reason
    except StageError as err:  # the server booted (or the client could not start): a measurement that cannot be trusted
        record["status"], record["reason"] = "invalid", str(err)
        if client is not None:
            record["client_returncode"] = client.poll()
        return "ok" if err.stage != "client start" else "client_error"
    finally:
        if client is not None:
            stop(client, grace_s=5.0)  # no-op when it has exited


@dataclasses.dataclass(frozen=True)
class Seen:
    """What :func:`observe` saw of a measurement: whether the server was ``alive`` at its end, the watchdog's
    reason (``""``: it did not fire), the server's ``/metrics`` text then (``""``: not read) and the K-pad
    plugin's counters ``{role: counters}``."""

    alive: bool
    watchdog: str
    metrics_text: str
    stats: dict[str, dict]


def observe(
    ctx: RunContext, config: dict[str, Any], cmds: Commands, client: subprocess.Popen, record: dict[str, Any]
) -> Seen:
    """Boot the server (its life: :func:`kpadstudy.server.running_server`), watch the client, which waits for it, to
    its end, then read ``/metrics`` and the K-pad counters, and stop the server.

    Sets ``boot_s``, its parts (:func:`kpadstudy.record.boot_phases`, from this attempt's part of the server log)
    and the CPUs each side really had in ``record`` as soon as the server answers, so an invalid measurement keeps
    them. Raises :class:`kpadstudy.server.ServerBootError` (no boot) or :class:`StageError`.
    """
    server_cfg, load = config["server"], config["load"]
    base_url = f"http://127.0.0.1:{ctx.block.api}"
    snapshot = cmds.tmp / "after-warmup.json"
    with running_server(cmds.server, cmds.env, base_url, ctx.server_log, float(server_cfg["boot_timeout_s"])) as (
        proc,
        boot_s,
    ):
        record["boot_s"] = round(boot_s, 2)
        record.update(boot_phases(attempt_log(ctx.server_log)))
        # the CPUs each side really had (taskset has exec'd by now: the server answers /health)
        record["server_cpus_allowed"] = cpus.process_cpus(proc.pid)
        record["client_cpus_allowed"] = cpus.process_cpus(client.pid)
        with stage("measurement"):
            alive, watchdog = wait_client(
                client,
                proc,
                progress=cmds.tmp / "progress",
                stall_s=load.get("stall_s"),
                deadline_s=load.get("deadline_s"),
            )
            if watchdog:
                watchdog = f"{'measurement' if snapshot.exists() else 'warm-up'}: {watchdog}"
        time.sleep(0.6)  # K-pad counter files are flushed every 0.2 s
        after_text = ""
        if alive and not watchdog:  # a stalled server may not answer /metrics either: the stall is the reason
            with stage("metrics"):
                try:
                    after_text = get_text(f"{base_url}/metrics")
                except OSError:
                    if proc.poll() is None:
                        raise
                    alive = False  # died just now
        with stage("counters"):
            stats = {k: dict(v) for k, v in read_stats(cmds.tmp / "kpad-stats").items()}
    return Seen(alive, watchdog, after_text, stats)


def client_result(ctx: RunContext, cmds: Commands, returncode: int | None) -> tuple[dict, dict | None, str]:
    """``(snapshot, result, failure)``: the client's snapshot after the warm-up (``{"metrics", "stats",
    "warmup"}``, empty when it wrote none), its ``vllm bench serve`` result (None when it wrote none) and then why
    (:func:`kpadstudy.record.client_failure`; ``""`` when it wrote one)."""
    snapshot = cmds.tmp / "after-warmup.json"
    with stage("warm-up"):
        snap = json.loads(snapshot.read_text()) if snapshot.exists() else {"metrics": "", "stats": {}, "warmup": None}
    with stage("measurement"):
        result_file = cmds.tmp / "bench.json"
        bench = json.loads(result_file.read_text()) if result_file.exists() else None
        failure = (
            "" if bench else client_failure(returncode, ctx.client_log.read_text(errors="replace"), snapshot.exists())
        )
    return snap, bench, failure


def measures(
    ctx: RunContext,
    config: dict[str, Any],
    configuration: runs.Configuration,
    cmds: Commands,
    seen: Seen,
    returncode: int | None,
) -> dict[str, Any]:
    """The record's columns of a measurement whose server booted: status and reason (:func:`classify`), the
    client's numbers, vLLM's counters, the K-pad plugin's step measures, acceptance, what the server ran with and
    whether a kpad run lost its FULL cudagraphs. Raises :class:`StageError` where a file cannot be read."""
    server_cfg, load = config["server"], config["load"]
    snap, bench, failure = client_result(ctx, cmds, returncode)
    with stage("metrics"):
        before, after = metrics.parse_counters(snap["metrics"]), metrics.parse_counters(seen.metrics_text)
        before_pos, after_pos = (metrics.parse_accepted_per_position(t) for t in (snap["metrics"], seen.metrics_text))
    with stage("counters"):
        steps = step_measures(snap["stats"], seen.stats)
    checks = (bench or {}).get("kpadstudy") or {}
    out: dict[str, Any] = {
        "accepted_per_position": [a - (before_pos[i] if i < len(before_pos) else 0.0) for i, a in enumerate(after_pos)],
        "failed_requests": checks.get("failed_requests"),
        "corpus_prompt_tokens": corpus_prompt_tokens(ctx.records, ctx.model),
        "server_prompt_tokens": checks.get("server_prompt_tokens"),
    }
    plugin_ok = (
        (not configuration.pad)
        or ctx.backend == "fake"
        or plugin_active(ctx.server_log, adaptive=bool(configuration.lengths))
    )
    out["status"], out["reason"] = classify(
        bench,
        cmds.n_measured,
        seen.alive,
        plugin_ok,
        failure,
        snap.get("warmup"),
        watchdog=seen.watchdog,
        # the fake server counts words, not tokens: nothing to compare there
        prompt_tokens=(out["corpus_prompt_tokens"], out["server_prompt_tokens"])
        if ctx.backend != "fake"
        else (None, None),
        deferred_check=deferred_check(server_cfg, configuration, seen.stats),
    )
    if bench:
        out.update({ours: bench.get(theirs) for theirs, ours in runrecord.CLIENT_KEYS.items()})
        out.update(metrics.itl_per_token(bench))
    out["client_limited"], out["client_limited_reason"] = client_limit(
        out.get("output_tok_s"),
        load.get("client_ceiling_tok_s"),
        load.get("client_limit_fraction", CLIENT_LIMIT_FRACTION),
    )
    delta = metrics.counter_delta(before, after)
    out.update({k: delta.get(k) for k in metrics.COUNTERS})
    out.update(metrics.speculation_measures(delta))
    out.update(steps)
    out.update(
        acceptance(
            out["accepted_per_position"],
            out["real_draft_per_position"],
            out.get("spec_accepted_tokens"),
            out["kpad_real_draft_tokens"],
        )
    )
    out.update(resolved_settings(ctx.server_log.read_text(errors="replace")))
    if "async_scheduling" in seen.stats.get("scheduler", {}):  # vLLM's resolved config, via the plugin
        out["async_scheduling"] = bool(seen.stats["scheduler"]["async_scheduling"])
    out["graph_lost"], out["graph_lost_reason"] = graph_lost(
        configuration, ctx.device, out, server_cfg.get("min_full_share", MIN_FULL_SHARE)
    )
    return out
