"""Life cycle of runs against the fake server (config server.backend: fake; no model, no vLLM server):
Ctrl-C mid-run leaves no server and a free port, a rerun redoes only the unfinished run, a server killed
mid-measurement becomes an invalid run, and the confirmation of the best K.

About 2-3 minutes on 2 cores (each run's client imports vLLM).
"""

import json
import os
import signal
import time

import pandas as pd

from lifecycle import MODEL, ctrl_c, group_members, healthy, port_free, server_port, snakemake, study_config, wait_for

SLOW = {"backend": "fake", "fake": {"chunk_gap_ms": 150}}  # 48 tokens x 150 ms: about 7 s per request


def run_dir(work, configuration, repeat, phase="runs"):
    return (
        work / "results" / phase / MODEL / "humaneval" / configuration / f"r{repeat}.json",
        work / "results" / "logs" / phase / MODEL / "humaneval" / configuration / f"r{repeat}",
    )


def test_ctrl_c_stops_the_server_and_a_rerun_redoes_only_the_unfinished_run(tmp_path, smol_model):
    study_config(tmp_path, smol_model, repeats=2, server=SLOW)
    p = snakemake(tmp_path, "results/runs.parquet", background=True)
    r1, _ = run_dir(tmp_path, "van", 1)
    r2, logs2 = run_dir(tmp_path, "van", 2)
    wait_for(lambda: r1.exists() and (logs2 / "server.pid").exists(), 240, "run 1 done and run 2's server started")
    pid = int((logs2 / "server.pid").read_text())
    port = server_port(pid)
    wait_for(lambda: healthy(port), 60, "run 2's server healthy")
    time.sleep(3)  # mid-measurement
    assert group_members(pid)
    mtime = r1.stat().st_mtime_ns
    rc = ctrl_c(p)
    assert rc != 0
    assert group_members(pid) == [] and port_free(port)
    assert not r2.exists() and not r2.with_suffix(".partial").exists()
    q = snakemake(tmp_path, "results/runs.parquet")
    out = q.log_path.read_text()
    assert q.returncode == 0, out[-3000:]
    assert r1.stat().st_mtime_ns == mtime  # the finished run was not redone
    assert "jobid" in out and out.count("rule run:") == 1  # only run 2
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet").sort_values("repeat")
    assert list(runs["status"]) == ["ok", "ok"] and list(runs["completed"]) == [8, 8]


def test_a_server_killed_mid_measurement_is_an_invalid_run_and_the_pipeline_goes_on(tmp_path, smol_model):
    study_config(tmp_path, smol_model, server=SLOW)
    p = snakemake(tmp_path, "results/runs.parquet", background=True)
    rec, logs = run_dir(tmp_path, "van", 1)
    wait_for(lambda: (logs / "server.pid").exists(), 240, "the server started")
    pid = int((logs / "server.pid").read_text())
    wait_for(lambda: healthy(server_port(pid)), 60, "the server healthy")
    time.sleep(4)
    os.killpg(pid, signal.SIGKILL)
    assert p.wait(timeout=300) == 0, p.log_path.read_text()[-3000:]
    r = json.loads(rec.read_text())
    assert (r["status"], r["reason"], r["attempts"]) == ("invalid", "server died during the measurement", 1)
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    assert list(runs["status"]) == ["invalid"]


def test_confirmation_reruns_van_suf_and_the_best_k(tmp_path, smol_model):
    """Fake schedule: 1 + K // 4 tokens per chunk, so kpad8 beats kpad4 and is confirmed as method bestkpad."""
    study_config(
        tmp_path,
        smol_model,
        server={"backend": "fake", "fake": {"chunk_gap_ms": 5}},
        configurations={
            "van": {"enabled": True},
            "suf": {"enabled": True, "k": 32},
            "kpad": {"k": [4, 8]},
            "nopad": {"k": []},
        },
        confirm={"enabled": True, "repeats": 1},
    )
    p = snakemake(tmp_path, "results/cells_final.parquet")
    assert p.returncode == 0, p.log_path.read_text()[-3000:]
    best = json.loads((tmp_path / "results" / "confirm" / "best_k.json").read_text())
    assert [(c["model"], c["corpus"], c["best_k"]) for c in best["cells"]] == [(MODEL, "humaneval", 8)]
    confirm_runs = sorted(
        f.parent.name for f in (tmp_path / "results" / "confirm" / MODEL / "humaneval").glob("*/r1.json")
    )
    assert confirm_runs == ["kpad8", "suf", "van"]
    assert (
        json.loads((tmp_path / "results" / "confirm" / MODEL / "humaneval" / "kpad8" / "r1.json").read_text())["phase"]
        == "confirm"
    )
    confirmed = pd.read_parquet(tmp_path / "results" / "confirmed.parquet")
    assert sorted(
        zip(confirmed["configuration"], confirmed["method"], confirmed["phase"], confirmed["n_valid"], strict=True)
    ) == [
        ("kpad8", "bestkpad", "confirm", 1),
        ("suf", "suf", "confirm", 1),
        ("van", "van", "confirm", 1),
    ]
    final = pd.read_parquet(tmp_path / "results" / "cells_final.parquet")
    assert sorted(zip(final["configuration"], final["method"], final["phase"], strict=True)) == [
        ("kpad4", "kpad", "sweep"),
        ("kpad8", "bestkpad", "confirm"),
        ("kpad8", "kpad", "sweep"),
        ("suf", "suf", "confirm"),
        ("van", "van", "confirm"),
    ]
