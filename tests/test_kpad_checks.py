"""The K-pad plugin refuses misuse loudly: unsupported vLLM, missing arctic-inference."""

import json
import logging
from types import SimpleNamespace

import pytest

import kpad_plugin
from kpadstudy import execute, record, runrecord, runs


def test_supported_versions_pass():
    kpad_plugin.check_version("0.26.0", allow_unsupported=False)
    kpad_plugin.check_version("0.32.0+cpu", allow_unsupported=False)


def test_unsupported_version_is_refused_with_names_and_override():
    with pytest.raises(kpad_plugin.UnsupportedVllmError) as err:
        kpad_plugin.check_version("0.27.1", allow_unsupported=False)
    msg = str(err.value)
    assert "vLLM 0.27.1 is not supported (supported: 0.26.0, 0.32.0)" in msg and "KPAD_ALLOW_UNSUPPORTED_VLLM=1" in msg


def test_override_pads_anyway_but_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="vllm.kpad_plugin"):
        kpad_plugin.check_version("0.27.1", allow_unsupported=True)
    assert "PADDING ON AN UNVERIFIED vLLM" in caplog.text


def test_register_refuses_unsupported_installed_version(monkeypatch):
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.99.0")
    monkeypatch.setenv("VLLM_SUFFIX_PAD_UNIFORM", "1")
    monkeypatch.delenv("KPAD_ALLOW_UNSUPPORTED_VLLM", raising=False)
    with pytest.raises(kpad_plugin.UnsupportedVllmError, match="vLLM 0.99.0 is not supported"):
        kpad_plugin.register()


def test_register_refuses_the_deferred_check_without_the_skip(monkeypatch):
    monkeypatch.setenv("VLLM_SUFFIX_PAD_UNIFORM", "1")
    monkeypatch.setenv("KPAD_AUTO_LENGTHS", "0,4,8")
    monkeypatch.setenv("KPAD_AUTO_SKIP_SPECULATION", "0")
    monkeypatch.setenv("KPAD_AUTO_CHECK_DEFERRED", "1")
    monkeypatch.setattr(kpad_plugin, "_CHECK_DEFERRED", False)  # register sets it; restored after
    with pytest.raises(ValueError, match=r"^KPAD_AUTO_CHECK_DEFERRED=1 checks .* KPAD_AUTO_SKIP_SPECULATION=0 skips"):
        kpad_plugin.register()
    monkeypatch.setenv("KPAD_AUTO_CHECK_DEFERRED", "yes")
    with pytest.raises(ValueError, match=r"^KPAD_AUTO_CHECK_DEFERRED='yes': give an integer >= 0 \(default 0\)$"):
        kpad_plugin.register()


def test_register_without_flags_does_nothing(monkeypatch):
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.99.0")
    monkeypatch.delenv("VLLM_SUFFIX_PAD_UNIFORM", raising=False)
    monkeypatch.delenv("KPAD_STATS_DIR", raising=False)
    from vllm.v1.core.sched.scheduler import Scheduler

    methods = ("__init__", "schedule", "update_from_output", "update_draft_token_ids")
    before = {m: Scheduler.__dict__[m] for m in methods}
    called = []
    for name in [n for n in dir(kpad_plugin) if n.startswith("_patch_")]:
        monkeypatch.setattr(kpad_plugin, name, lambda *a, _n=name, **k: called.append(_n))
    kpad_plugin.register()  # no error on an unsupported version: nothing asked of the plugin
    assert called == []  # no patch applied
    assert {m: Scheduler.__dict__[m] for m in methods} == before


def test_missing_arctic_inference_stops_before_the_server(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("arctic_inference") else real(name, *a)
    )
    with pytest.raises(
        kpad_plugin.SuffixUnavailableError,
        match=(
            r"^configuration 'suf' uses suffix decoding: suffix decoding needs arctic-inference 0.3.0, "
            r"which is not installed.*--no-build-isolation"
        ),
    ):
        kpad_plugin.check_suffix_available("configuration 'suf' uses suffix decoding: ")


def test_run_with_suffix_and_no_arctic_inference_fails_before_any_server(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("arctic_inference") else real(name, *a)
    )
    config = {
        "configurations": {
            "van": {"enabled": False},
            "suf": {"enabled": True, "k": 32},
            "kpad": {"k": []},
            "nopad": {"k": []},
        },
        "server": {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85},
    }
    with pytest.raises(kpad_plugin.SuffixUnavailableError, match="configuration 'suf' uses suffix decoding"):
        execute.execute_run(
            config=config,
            model="M",
            model_path="/nonexistent",
            corpus_path="/nonexistent",
            corpus="c",
            configuration=runs.configuration(config, "suf"),
            repeat=1,
            out_json=tmp_path / "r.json",
            log_dir=tmp_path,
            plugin_path="/p",
        )
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "server.log").exists()


def test_step_measures_from_snapshots():
    before = {
        "scheduler": {"draft_requests": 10, "pad_tokens": 5},
        "worker0": {"steps_FULL": 2, "decode_steps_FULL": 1, "steps_PIECEWISE": 4},
    }
    after = {
        "scheduler": {
            "draft_requests": 110,
            "pad_tokens": 305,
            "real_draft_tokens": 500,
            "zero_draft_requests": 7,
            "padded_requests": 60,
        },
        "worker0": {"steps_FULL": 97, "decode_steps_FULL": 96, "steps_PIECEWISE": 10, "decode_steps_PIECEWISE": 4},
    }
    m = record.step_measures(before, after)
    assert (
        m["kpad_draft_requests"],
        m["kpad_pad_tokens"],
        m["kpad_real_draft_tokens"],
        m["kpad_zero_draft_requests"],
        m["kpad_padded_requests"],
    ) == (100, 300, 500, 7, 60)
    assert (m["steps_FULL"], m["steps_PIECEWISE"], m["steps_NONE"]) == (95, 6, 0)
    assert (m["decode_steps_FULL"], m["decode_steps_PIECEWISE"]) == (95, 4)
    assert m["full_share_decode"] == 95 / 99
    assert record.step_measures({}, {})["full_share_decode"] is None
    assert (m["kpad_deferred_check_steps"], m["kpad_deferred_check_mismatches"]) == (0, 0)  # no check run


def test_step_time_ms_is_each_stage_per_engine_step_of_the_measured_prompts():
    before = {"scheduler": {"calls_engine_step": 10, "time_us_engine_step": 50_000, "time_us_schedule": 1_000}}
    after = {
        "scheduler": {
            "calls_engine_step": 410,
            "time_us_engine_step": 4_050_000,  # 4.0 s over 400 steps: 10 ms a step
            "time_us_schedule": 201_000,  # 0.5 ms
            "time_us_update_from_output": 120_000,  # 0.3 ms
            "time_us_post_step": 80_000,  # 0.2 ms
            "time_us_input_queue": 40_000,  # 0.1 ms
        },
        "worker0": {"time_us_execute_model": 1_600_000, "time_us_sample_tokens": 1_200_000, "time_us_propose": 400_000},
    }
    m = record.step_measures(before, after)
    assert m["engine_steps"] == 400
    assert json.loads(m["step_time_ms"]) == {
        "engine_step": 10.0,
        "input_queue": 0.1,
        "post_step": 0.2,
        "schedule": 0.5,
        "update_from_output": 0.3,
        "execute_model": 4.0,
        "sample_tokens": 3.0,
        "propose": 1.0,
        "other": 2.0,  # 10 - (0.5 + 4 + 3 + 0.3 + 0.2)
    }
    assert list(json.loads(m["step_time_ms"])) == [*kpad_plugin.STEP_STAGES, "other"]
    assert record.step_stages(after, after) == {"engine_steps": 0, "step_time_ms": None}  # nothing in between
    assert record.step_measures({}, {})["step_time_ms"] is None


def test_deferred_check_counters_are_the_measured_prompts_part_and_a_mismatch_makes_the_run_invalid():
    before = {"worker0": {"deferred_check_steps": 3, "deferred_check_draft_tokens": 4}}
    after = {
        "worker0": {
            "deferred_check_steps": 40,
            "deferred_check_mismatches": 2,
            "deferred_check_draft_tokens": 54,
            "deferred_check_flushed_steps": 12,
            "deferred_check_flushed_draft_tokens": 9,
        }
    }
    m = record.step_measures(before, after)
    assert [m[f"kpad_{key}"] for key in record.DEFERRED_CHECK_KEYS] == [37, 2, 50, 12, 9]
    auto_check = SimpleNamespace(method="kpadauto", env={"KPAD_AUTO_CHECK_DEFERRED": "1"})
    assert record.deferred_check({}, auto_check, after) == (2, 12)  # totals: warm-up included
    assert record.deferred_check({}, SimpleNamespace(method="kpadauto", env={}), after) is None
    assert record.deferred_check({"env": {"KPAD_AUTO_CHECK_DEFERRED": "1"}}, auto_check, {}) == (0, 0)
    off = SimpleNamespace(method="kpadauto", env={"KPAD_AUTO_CHECK_DEFERRED": "0"})
    assert record.deferred_check({"env": {"KPAD_AUTO_CHECK_DEFERRED": "1"}}, off, after) is None  # the entry wins
    assert record.deferred_check(
        {"env": {"KPAD_AUTO_CHECK_DEFERRED": 1}}, SimpleNamespace(method="kpadauto"), after
    ) == (2, 12)
    assert (
        record.deferred_check({}, SimpleNamespace(method="kpadauto", env={"KPAD_AUTO_CHECK_DEFERRED": " 0 "}), after)
        is None
    )
    ok = {**dict.fromkeys(runrecord.CLIENT_KEYS, 1.0), "completed": 16, "failed": 0, "total_output_tokens": 1960}
    assert record.classify(ok, 16, True, True, deferred_check=None) == ("ok", "")
    assert record.classify(ok, 16, True, True, deferred_check=(0, 12)) == ("ok", "")
    assert record.classify(ok, 16, True, True, deferred_check=(2, 12)) == (
        "invalid",
        "kpadauto's deferred suffix tree updates proposed other drafts than vLLM's eager updates for 2 request-steps "
        "(KPAD_AUTO_CHECK_DEFERRED): a fault of the plugin on this vLLM / arctic-inference; run with "
        "KPAD_AUTO_SKIP_SPECULATION=0 until it is fixed",
    )
    assert record.classify(ok, 16, True, True, deferred_check=(0, 0)) == (
        "invalid",
        "KPAD_AUTO_CHECK_DEFERRED checked nothing: no step looked up drafts after skipped ones (the rule never "
        "skipped: drafts paid on every step, or the run was too short)",
    )
