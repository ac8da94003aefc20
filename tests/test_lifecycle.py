"""Life cycle of runs against the fake server (config server.backend: fake; no model, no vLLM server):
Ctrl-C mid-run leaves no server and a free port, a rerun redoes only the unfinished run, a server killed
mid-measurement becomes an invalid run, and the confirmation of the best K.

About 2-3 minutes on 2 cores (each run's client imports vLLM).
"""

import json
import os
import re
import signal
import time

import pandas as pd

from kpadstudy import runrecord
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


def test_confirmation_reruns_each_cell_in_its_own_repeats(tmp_path, smol_model):
    """Fake schedule: 1 + K // 4 tokens per chunk, so kpad8 beats kpad4: kpad8 is confirmed as method bestkpad
    and kpad4 as the second-best K, with van, in the confirmation's own repeat. Two cells (one checkpoint under
    two model names): a deleted confirmation record is planned again; a changed sweep record of one cell re-plans
    that cell's confirmation only."""
    twin = "SmolLM2-twin"
    study_config(
        tmp_path,
        smol_model,
        models={twin: {"source": "local", "path": str(smol_model), "tensor_parallel_size": 1}},
        server={"backend": "fake", "fake": {"chunk_gap_ms": 5}},
        configurations={"van": {"enabled": True}, "suf": {"enabled": False}, "kpad": {"k": [4, 8]}, "nopad": {"k": []}},
        confirm={"enabled": True, "repeats": 1},
    )
    p = snakemake(tmp_path, "results/cells_final.parquet")
    assert p.returncode == 0, p.log_path.read_text()[-3000:]
    for model in (MODEL, twin):
        best = json.loads((tmp_path / "results" / "confirm" / model / "humaneval" / "best_k.json").read_text())
        assert [(c["model"], c["corpus"], c["best_k"], c["second_k"]) for c in best["cells"]] == [
            (model, "humaneval", 8, 4)
        ]
    cell = tmp_path / "results" / "confirm" / MODEL / "humaneval"
    records = {f.parent.name: json.loads(f.read_text()) for f in cell.glob("*/r1.json")}
    assert sorted(records) == ["kpad4", "kpad8", "van"]
    assert {r["phase"] for r in records.values()} == {"confirm"}
    assert sorted(r["position"] for r in records.values()) == [1, 2, 3]
    confirmed = pd.read_parquet(tmp_path / "results" / "confirmed.parquet")
    confirmed = confirmed[confirmed["model"] == MODEL]
    assert sorted(
        zip(confirmed["configuration"], confirmed["method"], confirmed["phase"], confirmed["n_valid"], strict=True)
    ) == [("kpad4", "kpad", "confirm", 1), ("kpad8", "bestkpad", "confirm", 1), ("van", "van", "confirm", 1)]
    final = pd.read_parquet(tmp_path / "results" / "cells_final.parquet")
    final = final[final["model"] == MODEL]
    assert sorted(zip(final["configuration"], final["method"], final["phase"], strict=True)) == [
        ("kpad4", "kpad", "confirm"),
        ("kpad4", "kpad", "sweep"),
        ("kpad8", "bestkpad", "confirm"),
        ("kpad8", "kpad", "sweep"),
        ("van", "van", "confirm"),
        ("van", "van", "sweep"),
    ]
    paired_md = (tmp_path / "results" / "confirm" / "paired.md").read_text()
    assert f"## {MODEL} / humaneval (confirm)" in paired_md and "- kpad8 / van: " in paired_md
    # a deleted confirmation record (the twin's second run) is planned again by the default target, with the one
    # after it in its chain and no other (issue 43: rule all asks for each confirmation record; the chain is ancient)
    chain = sorted(
        (tmp_path / "results" / "confirm" / twin / "humaneval").glob("*/r1.json"),
        key=lambda f: json.loads(f.read_text())["position"],
    )
    saved, stat = chain[1].read_bytes(), chain[1].stat()
    chain[1].unlink()
    p = snakemake(tmp_path, extra=("-n",))
    log = p.log_path.read_text()
    assert p.returncode == 0, log[-3000:]
    planned = re.findall(r"^(?:local)?rule confirm_run:\n(?:    .*\n)*?    wildcards: (.*)$", log, re.M)
    assert sorted(planned) == [
        f"model={twin}, corpus=humaneval, configuration={f.parent.name}, repeat=1" for f in sorted(chain[1:])
    ], planned
    chain[1].write_bytes(saved)
    os.utime(chain[1], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # one sweep record of MODEL's cell changes (its last run, so no later run of the chain is involved; its
    # content, as Snakemake ignores a touch of a small file whose checksum it knows): the dry run re-plans that
    # cell's checkpoint (whose new output then re-plans that cell's confirmation runs), nothing of the twin's
    sweep = sorted((tmp_path / "results" / "runs" / MODEL / "humaneval").glob("*/r1.json"), key=os.path.getmtime)
    record = json.loads(sweep[-1].read_text())
    sweep[-1].write_text(json.dumps({**record, "output_tok_s": record["output_tok_s"] * 1.01}))
    p = snakemake(tmp_path, "results/cells_final.parquet", extra=("-n",))
    log = p.log_path.read_text()
    assert p.returncode == 0, log[-3000:]
    planned = re.findall(r"^(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    wildcards: (.*)$", log, re.M)
    assert sorted(set(planned)) == [("best_k", f"model={MODEL}, corpus=humaneval")], planned


def test_a_run_killed_on_every_attempt_is_recorded_lost_and_the_study_goes_on(tmp_path, smol_model):
    """kpad4's job is SIGKILLed on each attempt (its fake server kills the job that started it: no chance to
    write anything, as a time limit or the OOM killer would do). With node.run_attempts 2 it is measured
    twice, then its third attempt writes the record lost; van's later run (the chain of repeat 1 -> 2) and
    the tables still run, and the figures' failure label says lost."""
    study_config(
        tmp_path,
        smol_model,
        repeats=2,
        server={"backend": "fake", "fake": {"chunk_gap_ms": 5, "kill_job": ["kpad4"]}},
        configurations={"van": {"enabled": True}, "suf": {"enabled": False}, "kpad": {"k": [4]}, "nopad": {"k": []}},
        node={"lock_dir": str(tmp_path / "locks"), "run_attempts": 2},
    )
    p = snakemake(tmp_path, "results/runs.parquet", "results/cells.parquet")
    log = p.log_path.read_text()
    assert p.returncode == 0, log[-3000:]
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    assert sorted(zip(runs["configuration"], runs["repeat"], runs["status"], strict=True)) == [
        ("kpad4", 1, "lost"),
        ("kpad4", 2, "lost"),
        ("van", 1, "ok"),
        ("van", 2, "ok"),
    ]
    lost = runs[(runs["status"] == "lost") & (runs["repeat"] == 1)].iloc[0]
    van = runs[(runs["configuration"] == "van") & (runs["repeat"] == 1)].iloc[0]
    assert (lost["attempts"], lost["phase"], lost["position"] + van["position"]) == (2, "sweep", 3)
    assert list(runs.columns) == list(runrecord.NAMES)  # the lost records too: every column, in order
    assert lost[["output_tok_s", "boot_s", "server_command"]].isna().all()
    assert re.match(
        r"lost: the job was killed without writing its record on 2 of 2 attempts \(started \S+ on \S+, \S+ on \S+\)",
        lost["reason"],
    ), lost["reason"]
    _, logs = run_dir(tmp_path, "kpad4", 1)
    journal = [json.loads(line) for line in (logs / "attempts.jsonl").read_text().splitlines()]
    assert [(e["attempt"], e["event"]) for e in journal] == [(1, "start"), (2, "start")]
    cells = pd.read_parquet(tmp_path / "results" / "cells.parquet").set_index("configuration")
    assert cells.loc["kpad4", "statuses"] == "lost:2" and cells.loc["van", "n_valid"] == 2
    from kpadstudy.tables import failure_label

    assert failure_label(cells.loc[["kpad4"]]) == "lost"


def test_a_deleted_record_is_rerun_with_the_next_of_its_chain_and_the_tables_follow(tmp_path, smol_model):
    """After a finished study one sweep record is deleted: the next `snakemake` reruns that run and the one after
    it in the cell's chain (Snakemake takes the chain's order for a dependency on a file that is missing; the other
    runs are kept: the chain's inputs are ancient) and makes the tables again from the new records (issue 43).
    Before, nothing was redone and the tables kept the deleted run."""
    study_config(
        tmp_path,
        smol_model,
        repeats=2,
        server={"backend": "fake", "fake": {"chunk_gap_ms": 5}},
        configurations={"van": {"enabled": True}, "suf": {"enabled": False}, "kpad": {"k": [4]}, "nopad": {"k": []}},
    )
    p = snakemake(tmp_path, "results/runs.parquet")
    assert p.returncode == 0, p.log_path.read_text()[-3000:]
    cell = tmp_path / "results" / "runs" / MODEL / "humaneval"
    records = {(r.parent.name, r.stem): r for r in cell.glob("*/r*.json")}
    order = sorted(records, key=lambda k: json.loads(records[k].read_text())["started_at"])
    gone, after = order[1], order[2]  # a run in the middle of the chain, and the one after it
    first = json.loads(records[gone].read_text())
    kept = {k: records[k].stat().st_mtime_ns for k in order if k not in (gone, after)}
    records[gone].unlink()
    p = snakemake(tmp_path)  # the default target, as a user reruns a study
    log = p.log_path.read_text()
    assert p.returncode == 0, log[-3000:]
    assert "1 run record(s) missing though results/runs.parquet exists: `snakemake` (the default target)" in log
    planned = re.findall(r"^localrule run:\n(?:    .*\n)*?    wildcards: (.*)$", log, re.M)
    wildcards = f"model={MODEL}, corpus=humaneval, configuration={{}}, repeat={{}}"
    assert sorted(planned) == sorted(wildcards.format(c, r[1:]) for c, r in (gone, after))
    assert {k: records[k].stat().st_mtime_ns for k in kept} == kept  # no other run was redone
    again = json.loads(records[gone].read_text())
    assert list(again) == list(runrecord.NAMES) and runrecord.type_errors(again) == []  # the fake server's record
    assert again["started_at"] > first["started_at"] and again["status"] == "ok"
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    row = runs[(runs["configuration"] == gone[0]) & (runs["repeat"] == int(gone[1][1:]))].iloc[0]
    assert (row["started_at"], row["output_tok_s"]) == (again["started_at"], again["output_tok_s"])
