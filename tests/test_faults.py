"""Fault injection at every stage of a run: what the server, the client, the network or the metrics
endpoint does becomes a record (``boot_failed`` or ``invalid``, the exception in ``reason``), the server's
process group is stopped, the job goes on; an error in our own inputs still fails the job.

Each run is ``execute_run`` in this process against the fake server (no model is served; the client is
the real ``vllm bench serve`` and imports vLLM, about 10-20 s per run on 2 cores). Faults come from the
fake server (``server.fake.fail_requests``, ``server.fake.metrics_text``, ``server.fake.fault``) or from
monkeypatching inside this process.
"""

import json
import os
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from kpadstudy import corpora, execute, runs, server
from kpadstudy.server import group_alive

ROOT = Path(__file__).resolve().parent.parent
MODEL = "SmolLM2-135M-Instruct"
N_MEASURED, N_WARMUP = 4, 2


def make_config(tmp_path: Path, model_path: Path, **fake) -> dict:
    """The embedded config resolved by the schema (defaults filled, as the rule sees it), fake backend, van only."""
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg["models"] = {MODEL: {"source": "local", "path": str(model_path), "tensor_parallel_size": 1}}
    cfg["configurations"] = {"van": {"enabled": True}, "suf": {"enabled": False}, "kpad": {"k": []}, "nopad": {"k": []}}
    cfg["load"] = {"max_concurrency": 2, "max_tokens": 8, "temperature": 0}
    cfg["server"]["backend"] = "fake"
    cfg["server"]["fake"] = {"chunk_gap_ms": 5, **fake}
    cfg["server"]["boot_timeout_s"] = 60
    cfg["taskset"] = {"server": None, "client": None}
    cfg["node"] = {"lock_dir": str(tmp_path / "locks")}
    cfg["device"] = "cpu"
    validate(cfg, schema=str(ROOT / "config" / "schema.yaml"), set_default=True)
    return cfg


def corpus_file(tmp_path: Path) -> Path:
    records = [
        {
            "corpus": "c",
            "id": str(i),
            "split": "warmup" if i < N_WARMUP else "measured",
            "messages": [{"role": "user", "content": f"prompt number {i}"}],
            "prompt_tokens": {},
        }
        for i in range(N_WARMUP + N_MEASURED)
    ]
    path = tmp_path / "corpus.jsonl"
    corpora.write_jsonl(records, path)
    return path


def execute_run(tmp_path: Path, cfg: dict, model_path: Path, configuration: str = "van") -> dict:
    """``execute.execute_run`` of one run of ``configuration`` on the corpus of :func:`corpus_file`."""
    return execute.execute_run(
        config=cfg,
        model=MODEL,
        model_path=str(model_path),
        corpus_path=str(corpus_file(tmp_path)),
        corpus="c",
        configuration=runs.configuration(cfg, configuration),
        repeat=1,
        out_json=tmp_path / "record.json",
        log_dir=tmp_path / "logs",
        plugin_path=str(ROOT / "workflow" / "scripts"),
        allowed_cpus=os.sched_getaffinity(0),
    )


def run(tmp_path: Path, cfg: dict, model_path: Path) -> dict:
    out = tmp_path / "record.json"
    record = execute_run(tmp_path, cfg, model_path)
    assert json.loads(out.read_text())["status"] == record["status"]  # written, also when the run failed
    pid = int((tmp_path / "logs" / "server.pid").read_text())
    assert not group_alive(pid), "the server's process group outlived the run"
    return record


def test_a_healthy_fake_run_is_ok(tmp_path, smol_model):
    """The baseline of the faults below: the same run without a fault is ok."""
    r = run(tmp_path, make_config(tmp_path, smol_model), smol_model)
    assert (r["status"], r["reason"], r["completed"], r["failed"]) == ("ok", "", N_MEASURED, 0)


def test_boot_an_exception_of_the_health_probe_is_a_boot_failed_record(tmp_path, smol_model, monkeypatch):
    def probe(*args, **kwargs):
        raise RuntimeError("injected probe fault")

    monkeypatch.setattr(server, "is_healthy", probe)
    r = run(tmp_path, make_config(tmp_path, smol_model), smol_model)
    assert (r["status"], r["boot_failure"], r["attempts"]) == ("boot_failed", "error", 1)
    assert r["reason"] == (
        "error: RuntimeError: injected probe fault (raised while starting the server or waiting for /health; "
        f"see {tmp_path / 'logs' / 'server.log'})"
    )
    assert r["attempt_settings"][0]["result"] == "error"


def test_warmup_failed_requests_make_the_run_invalid(tmp_path, smol_model):
    r = run(tmp_path, make_config(tmp_path, smol_model, fail_requests=N_WARMUP), smol_model)
    assert (r["status"], r["reason"]) == (
        "invalid",
        f"warm-up: {N_WARMUP} of {N_WARMUP} requests failed (http_error {N_WARMUP}): HTTP 500 Internal Server Error",
    )
    assert (r["completed"], r["failed"]) == (N_MEASURED, 0)  # the measured prompts themselves went through


def test_measurement_an_exception_while_waiting_for_the_client_is_an_invalid_record(tmp_path, smol_model, monkeypatch):
    def wait_client(*args, **kwargs):
        raise RuntimeError("injected measurement fault")

    monkeypatch.setattr(execute, "wait_client", wait_client)
    r = run(tmp_path, make_config(tmp_path, smol_model), smol_model)
    assert (r["status"], r["reason"], r["boot_failure"]) == (
        "invalid",
        "measurement: RuntimeError: injected measurement fault",
        None,
    )


def test_metrics_text_that_is_not_prometheus_is_an_invalid_record(tmp_path, smol_model):
    r = run(tmp_path, make_config(tmp_path, smol_model, metrics_text="GET /health HTTP/1.1"), smol_model)
    assert (r["status"], r["reason"]) == (
        "invalid",
        "metrics: ValueError: could not convert string to float: '/health'",
    )


def test_counter_files_that_cannot_be_read_are_an_invalid_record(tmp_path, smol_model, monkeypatch):
    def read_stats(directory):
        raise OSError(f"injected: cannot read {directory}")

    monkeypatch.setattr(execute, "read_stats", read_stats)
    r = run(tmp_path, make_config(tmp_path, smol_model), smol_model)
    assert r["status"] == "invalid" and r["reason"].startswith("counters: OSError: injected: cannot read "), r["reason"]


def test_a_config_error_still_fails_the_job_and_writes_no_record(tmp_path, smol_model):
    """A key the run needs is missing (a config that bypassed the schema): the job fails, as it must."""
    cfg = make_config(tmp_path, smol_model)
    del cfg["load"]["max_concurrency"]
    with pytest.raises(KeyError, match="max_concurrency"):
        execute_run(tmp_path, cfg, smol_model)
    assert not (tmp_path / "record.json").exists()


def test_an_unknown_configuration_fails_the_job_naming_it(tmp_path, smol_model):
    cfg = make_config(tmp_path, smol_model)
    with pytest.raises(
        ValueError, match=r"^configuration 'kpad7' is not in config 'configurations' \(it yields \['van'\]\)$"
    ):
        execute_run(tmp_path, cfg, smol_model, configuration="kpad7")


ERROR_EVENT_TEXT = (
    'error event: {"message": "fake server: injected engine error", "type": "BadRequestError", "param": null, '
    '"code": 400}'
)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("error_event", ERROR_EVENT_TEXT),
        ("zero_output", "zero_output: 0 output tokens (max_tokens 8), finish_reason stop"),
        ("no_finish_reason", "no_finish_reason: 8 output tokens (max_tokens 8), finish_reason None"),
        ("cut_stream", "stream ended before [DONE]"),
        ("over_max_tokens", "over_max_tokens: 12 output tokens (max_tokens 8), finish_reason length"),
    ],
)
def test_a_bad_stream_fails_its_request_and_the_run(tmp_path, smol_model, fault, error):
    """Each stream that vLLM's own request function counts as completed (HTTP 200, then the fault) fails the
    first measured request; the record counts it by kind and the run is invalid."""
    cfg = make_config(tmp_path, smol_model, fault=fault, fault_request=N_WARMUP + 1)
    r = run(tmp_path, cfg, smol_model)
    assert (r["status"], r["reason"]) == ("invalid", f"1 of {N_MEASURED} requests failed ({fault} 1): {error}")
    assert (r["completed"], r["failed"], r["failed_requests"]) == (N_MEASURED - 1, 1, {fault: 1})


def test_a_bad_warmup_stream_is_named_as_warmup(tmp_path, smol_model):
    r = run(tmp_path, make_config(tmp_path, smol_model, fault="error_event", fault_request=1), smol_model)
    assert (r["status"], r["reason"]) == (
        "invalid",
        f"warm-up: 1 of {N_WARMUP} requests failed (error_event 1): {ERROR_EVENT_TEXT}",
    )
    assert r["failed_requests"] == {}  # the measured prompts went through


@pytest.mark.parametrize("fault", ["stall", "stall_half"])
def test_a_stalled_server_ends_the_run_invalid_and_stops_it(tmp_path, smol_model, fault):
    """/health keeps answering 200; the first measured request is never answered (stall) or stops after half
    its tokens (stall_half). The watchdog (load.stall_s = 3) stops the client; the record is written and the
    server's group stopped (:func:`run` checks both)."""
    cfg = make_config(tmp_path, smol_model, fault=fault, fault_request=N_WARMUP + 1)
    cfg["load"]["stall_s"] = 3
    r = run(tmp_path, cfg, smol_model)
    assert r["status"] == "invalid"
    assert r["reason"].startswith("measurement: stall: no token streamed for 3 s (load.stall_s; "), r["reason"]
    assert r["reason"].endswith("chunks streamed before), the server process still running")


def test_auto_cpu_sets_two_runs_on_fake_gpus_at_once_never_share_a_cpu(tmp_path, smol_model):
    """taskset auto on a node of 2 fake GPUs and CPUs 0-1: two runs at once (threads, real clients, fake
    servers), each on its own GPU and CPU; the CPUs each process really had (Cpus_allowed_list) are
    recorded, and with one CPU per run its server and client share it and the record says so."""
    import threading

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    allowed = set(sorted(os.sched_getaffinity(0))[:2])
    cfg = make_config(tmp_path, smol_model)
    cfg["device"] = "cuda"  # the fake server needs no GPU; the run still takes one of node.gpus
    cfg["taskset"] = {"auto": True, "server": None, "client": None, "slots": None, "client_cpus": None}
    cfg["node"]["gpus"] = 2
    records = {}

    def one(name):
        d = tmp_path / name
        d.mkdir()
        records[name] = execute.execute_run(
            config=cfg,
            model=MODEL,
            model_path=str(smol_model),
            corpus_path=str(corpus_file(d)),
            corpus=name,
            configuration=runs.configuration(cfg, "van"),
            repeat=1,
            out_json=d / "record.json",
            log_dir=d / "logs",
            plugin_path=str(ROOT / "workflow" / "scripts"),
            allowed_cpus=allowed,
        )

    threads = [threading.Thread(target=one, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    a, b = records["a"], records["b"]
    assert (a["status"], b["status"]) == ("ok", "ok"), (a["reason"], b["reason"])
    assert a["started_at"] <= b["finished_at"] and b["started_at"] <= a["finished_at"]  # side by side
    assert {a["cuda_visible_devices"], b["cuda_visible_devices"]} == {"0", "1"}
    lo, hi = sorted(allowed)
    got = sorted((r["server_cpus_allowed"], r["client_cpus_allowed"], r["cpus_shared"]) for r in (a, b))
    assert got == [(str(lo), str(lo), True), (str(hi), str(hi), True)]


def test_the_attempt_after_the_last_records_lost_with_the_journal_it_finds(tmp_path, smol_model):
    """No server starts: the attempt after node.run_attempts writes the lost record. A journal line cut off by
    the kill is skipped; an earlier attempt's own error is named in the reason; a last attempt that ended in
    an error of its own fails the job instead, quoting it."""
    cfg = make_config(tmp_path, smol_model)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "attempts.jsonl").write_text(
        '{"attempt": 1, "event": "start", "at": "T1", "host": "h"}\n'
        '{"attempt": 1, "event": "error", "error": "ValueError: bad"}\n'
        '{"attempt": 2, "event": "start", "at": "T2", "host": "h"}\n'
        '{"attempt": 2, "ev'
    )
    kwargs = dict(
        config=cfg, model=MODEL, model_path=str(smol_model), corpus_path=str(corpus_file(tmp_path)), corpus="c",
        configuration=runs.configuration(cfg, "van"), repeat=1, out_json=tmp_path / "record.json", log_dir=logs,
        plugin_path=str(ROOT / "workflow" / "scripts"),
    )  # fmt: skip
    r = execute.run_job(attempt=3, run_attempts=2, **kwargs)
    assert (r["status"], r["attempts"], r["configuration"], r["repeat"]) == ("lost", 2, "van", 1)
    assert r["reason"] == (
        "lost: the job was killed without writing its record on 1 of 2 attempts (started T2 on h): SIGKILL, a "
        f"time or memory limit or a lost node; attempt 1 failed with ValueError: bad; logs in {logs}"
    )
    assert json.loads((tmp_path / "record.json").read_text())["status"] == "lost"
    (logs / "attempts.jsonl").write_text(
        '{"attempt": 2, "event": "start", "at": "T2", "host": "h"}\n'
        '{"attempt": 2, "event": "error", "error": "ValueError: taskset.server names CPUs 9"}\n'
    )
    with pytest.raises(
        RuntimeError, match=r"^attempt 2 of this run failed with ValueError: taskset.server names CPUs 9"
    ):
        execute.run_job(attempt=3, run_attempts=2, **kwargs)


def test_an_attempt_after_a_ctrl_c_fails_at_once_instead_of_measuring(tmp_path, smol_model):
    """Ctrl-C reaches a run job before Snakemake: with retries, Snakemake would start the run again behind the
    user's back (seen in CI: the study went on and exited 0). The attempt after an interrupted one fails."""
    cfg = make_config(tmp_path, smol_model)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "attempts.jsonl").write_text(
        '{"attempt": 1, "event": "start", "at": "T1", "host": "h"}\n{"attempt": 1, "event": "interrupted"}\n'
    )
    kwargs = dict(
        config=cfg, model=MODEL, model_path=str(smol_model), corpus_path=str(corpus_file(tmp_path)), corpus="c",
        configuration=runs.configuration(cfg, "van"), repeat=1, out_json=tmp_path / "record.json", log_dir=logs,
        plugin_path=str(ROOT / "workflow" / "scripts"),
    )  # fmt: skip
    for attempt in (2, 3):  # the measuring retry, then the bookkeeping attempt
        with pytest.raises(RuntimeError, match=rf"^attempt {attempt - 1} of this run was interrupted \(Ctrl-C"):
            execute.run_job(attempt=attempt, run_attempts=2, **kwargs)
    assert not (tmp_path / "record.json").exists()
