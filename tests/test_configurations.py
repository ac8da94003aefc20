"""Configurations as data: the list of named entries, the mapping of the first studies, their command lines,
the acceptance rate of real draft tokens and the two K-bar models."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kpadstudy import execute, paired, plan, record, runs, stepcost

ROOT = Path(__file__).resolve().parent.parent
SERVER = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85, "max_model_len": 4096, "seed": 0}


def expand(configurations):
    return runs.configurations({"server": SERVER, "configurations": configurations})


def test_the_mapping_of_the_first_studies_keeps_its_names_and_order():
    assert [
        c.name
        for c in expand(
            {"van": {"enabled": True}, "suf": {"enabled": True, "k": 32}, "kpad": {"k": [4, 8]}, "nopad": {"k": [8]}}
        )
    ] == ["van", "suf", "kpad4", "kpad8", "nopad8"]
    assert [c.name for c in expand({})] == ["van", "suf", "kpad4", "kpad6", "kpad8", "kpad12"]  # the study's defaults
    suf = expand({"van": {"enabled": False}, "suf": {"k": 16, "cudagraph_mode": "PIECEWISE"}, "kpad": {"k": []}})
    assert suf == [runs.Configuration("suf", "suf", 16, False, "PIECEWISE", 0.85)]


def test_named_entries_with_overrides_and_lists_of_k():
    configs = expand(
        [
            {"method": "van"},
            {
                "name": "ngram7",
                "method": "ngram",
                "k": 7,
                "speculative": {"prompt_lookup_min": 2, "prompt_lookup_max": 5},
            },
            {"method": "suf", "k": 32},
            {
                "name": "trident",
                "method": "suf",
                "k": 32,
                "cudagraph_mode": "PIECEWISE",
                "gpu_memory_utilization": 0.8,
                "server_args": {"kv_cache_dtype": "fp8", "max_num_batched_tokens": 8192},
            },
            {"method": "kpad", "k": [4, 8]},
            {"name": "wide", "method": "nopad", "k": [8, 12]},
            {"method": "ngram", "k": 3, "enabled": False},
        ]
    )
    assert [(c.name, c.method, c.k, c.pad, c.suffix) for c in configs] == [
        ("van", "van", 0, False, False),
        ("ngram7", "ngram", 7, False, False),
        ("suf", "suf", 32, False, True),
        ("trident", "suf", 32, False, True),
        ("kpad4", "kpad", 4, True, True),
        ("kpad8", "kpad", 8, True, True),
        ("wide8", "nopad", 8, False, True),
        ("wide12", "nopad", 12, False, True),
    ]
    trident = configs[3]
    assert (trident.cudagraph_mode, trident.gpu_memory_utilization) == ("PIECEWISE", 0.8)
    assert (configs[2].cudagraph_mode, configs[2].gpu_memory_utilization) == ("FULL_AND_PIECEWISE", 0.85)  # server's
    assert runs.describe(trident)["server_args"] == '{"kv_cache_dtype": "fp8", "max_num_batched_tokens": 8192}'
    assert runs.describe(configs[1])["speculative_options"] == '{"prompt_lookup_max": 5, "prompt_lookup_min": 2}'


@pytest.mark.parametrize(
    "entries, message",
    [
        ([{"method": "kpad", "k": [4]}, {"method": "kpad", "k": 4}], r"yields duplicate names \['kpad4'\]"),
        (
            [{"method": "suf", "k": 32}, {"method": "suf", "k": 16}],
            r"yields duplicate names \['suf'\]: give each entry its own name",
        ),
        ([{"name": "a/b", "method": "van"}], r"configurations\[0\]: name 'a/b' is not safe as a path part"),
        ([{"method": "van", "k": 4}], r"configurations\[0\]: method van takes no k and no speculative options"),
        ([{"method": "van"}, {"method": "ngram"}], r"configurations\[1\]: method ngram needs k"),
        (
            [{"method": "ngram", "k": 7, "speculative": {"method": "suffix"}}],
            r"speculative sets \['method'\], which come from",
        ),
        ([{"method": "eagle", "k": 3}], r"configurations\[0\]: method 'eagle' is not one of"),
    ],
)
def test_bad_entries_name_the_entry_and_the_fix(entries, message):
    with pytest.raises(ValueError, match=message):
        expand(entries)


def test_server_command_of_ngram_and_trident():
    ngram, trident = expand(
        [
            {
                "name": "ngram7",
                "method": "ngram",
                "k": 7,
                "speculative": {"prompt_lookup_min": 2, "prompt_lookup_max": 5},
            },
            {
                "name": "trident",
                "method": "suf",
                "k": 32,
                "cudagraph_mode": "PIECEWISE",
                "gpu_memory_utilization": 0.8,
                "server_args": {
                    "kv_cache_dtype": "fp8",
                    "max_num_seqs": 256,
                    "enforce_eager": False,
                    "disable_log_stats": True,
                },
            },
        ]
    )

    def command(c):
        return runs.server_command(
            model_path="/m",
            served_model_name="M",
            port=8000,
            configuration=c,
            server=SERVER,
            tensor_parallel_size=1,
            device="cuda",
            cpus=None,
            python="py",
        )

    cmd = command(ngram)
    assert json.loads(cmd[cmd.index("--speculative-config") + 1]) == {
        "method": "ngram",
        "num_speculative_tokens": 7,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 5,
    }
    cmd = command(trident)
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.8"
    assert json.loads(cmd[cmd.index("--compilation-config") + 1]) == {"cudagraph_mode": "PIECEWISE"}
    assert cmd[-5:] == ["--kv-cache-dtype", "fp8", "--max-num-seqs", "256", "--disable-log-stats"]
    assert runs.option_args({"a_b": {"x": 1}, "c": [1, 2], "d": None}) == ["--a-b", '{"x": 1}', "--c", "[1, 2]"]


class _Reached(Exception):
    pass


def test_only_suffix_methods_need_arctic_inference(tmp_path, monkeypatch):
    """The check runs before any port or server: ngram passes it (and stops at the port block here), suf does not."""

    def missing(context=""):
        raise RuntimeError(f"{context}suffix decoding needs arctic-inference")

    def stop_here(*args, **kwargs):
        raise _Reached

    monkeypatch.setattr(execute, "check_suffix_available", missing)
    monkeypatch.setattr(execute.ports, "port_block", stop_here)
    monkeypatch.setattr(execute, "versions", lambda: {})
    cfg = yaml.safe_load((ROOT / "config" / "gpu" / "configurations.yaml").read_text())
    cfg["server"]["retry"] = {"attempts": 1, "adjust": {}}
    cfg["taskset"] = {"server": None, "client": None}
    (tmp_path / "c.jsonl").write_text("")
    kwargs = dict(
        config=cfg,
        model="SmolLM2-135M-Instruct",
        model_path="/m",
        corpus_path=str(tmp_path / "c.jsonl"),
        corpus="sharegpt",
        repeat=1,
        out_json=tmp_path / "r.json",
        log_dir=tmp_path,
        plugin_path="/p",
    )
    with pytest.raises(_Reached):
        execute.execute_run(configuration=runs.configuration(cfg, "ngram7"), **kwargs)
    with pytest.raises(RuntimeError, match=r"^configuration 'suf' uses suffix decoding: suffix decoding needs"):
        execute.execute_run(configuration=runs.configuration(cfg, "suf"), **kwargs)


def test_switched_off_entries_are_listed_with_what_they_would_add():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert [c.name for c in runs.disabled_configurations(cfg)] == ["ngram7", "trident"]
    cfg["plan"] = {"boot_s": 300, "requests_per_s": 4, "gpus": 8}
    pl = plan.plan(cfg, list(cfg["corpora"]) + ["mix"], hub=lambda repo, revision: None)
    # 11 models x 7 corpora x 3 repeats each; both are outside the K sweep, so the confirmation reruns them too
    assert [(o["name"], o["runs"], o["confirm_runs"]) for o in pl["off"]] == [
        ("ngram7", 231, 231),
        ("trident", 231, 231),
    ]
    assert "- ngram7: 231 runs + 231 confirmation runs, " in plan.to_markdown(pl)


# --- acceptance of real draft tokens, and the two K-bar models ------------------------------------------


def test_real_draft_tokens_by_position_and_their_acceptance():
    before = {"scheduler": {"real_draft_tokens": 10, "real_draft_tokens_pos0": 6, "real_draft_tokens_pos1": 4}}
    after = {
        "scheduler": {
            "real_draft_tokens": 80,
            "real_draft_tokens_pos0": 46,
            "real_draft_tokens_pos1": 24,
            "real_draft_tokens_pos2": 10,
        }
    }
    m = record.step_measures(before, after)
    assert (m["kpad_real_draft_tokens"], m["real_draft_per_position"]) == (70, [40, 20, 10])
    a = record.acceptance([30.0, 12.0, 3.0, 0.0], m["real_draft_per_position"], 45.0, 70)
    assert a == {"acceptance_rate_real": 45 / 70, "acceptance_rate_per_position": [0.75, 0.6, 0.3, None]}
    assert record.acceptance([], [], None, 0) == {"acceptance_rate_real": None, "acceptance_rate_per_position": []}


def test_draft_length_histograms_and_kpadauto_counters():
    before = {"scheduler": {"verified_draft_len2": 5, "auto_steps_len0": 1, "auto_steps_len2": 3, "cut_tokens": 4}}
    after = {
        "scheduler": {
            "verified_draft_len2": 25,
            "verified_draft_len8": 40,
            "auto_steps_len0": 11,
            "auto_steps_len2": 3,
            "auto_steps_len8": 6,
            "cut_tokens": 10,
            "auto_explore_steps": 2,
            "auto_unpadded_steps": 3,
            "auto_overhead_us": 1500,
            "auto_overhead_len0_us": 1200,
            "auto_overhead_len8_us": 2500,
            "auto_unpadded_base_ns": 9_500_000,
            "auto_unpadded_per_token_ns": 12_000,
        }
    }
    m = record.step_measures(before, after)
    # verified request-steps by draft length 0..8: 20 at 2 and 40 at 8 -> vLLM's draft tokens 2 x 20 + 8 x 40 = 360
    assert m["verified_drafts_by_length"] == [0, 0, 20, 0, 0, 0, 0, 0, 40]
    assert m["auto_steps_by_length"] == [10, 0, 0, 0, 0, 0, 0, 0, 6]
    assert (m["kpad_cut_tokens"], m["kpad_auto_explore_steps"], m["auto_overhead_ms"]) == (6, 2, 1.5)
    assert m["kpad_auto_unpadded_steps"] == 3
    assert m["auto_overhead_ms_by_length"] == [1.2, None, None, None, None, None, None, None, 2.5]
    assert (m["auto_unpadded_base_ms"], m["auto_unpadded_ms_per_token"]) == (9.5, 0.012)
    empty = record.step_measures({}, {})
    assert empty["auto_overhead_ms_by_length"] == []
    assert (empty["auto_unpadded_base_ms"], empty["auto_unpadded_ms_per_token"]) == (None, None)
    assert (empty["verified_drafts_by_length"], empty["auto_steps_by_length"], empty["auto_overhead_ms"]) == (
        [],
        [],
        None,
    )


def test_kpadauto_is_compared_with_every_fixed_k_and_van_variants():
    names = ["van", "vansync", "suf", "kpad4", "kpad8", "nopad4", "nopad8", "kpadauto8"]
    methods = {"van": "van", "vansync": "van", "suf": "suf", "kpad4": "kpad", "kpad8": "kpad", "nopad8": "nopad"}
    methods |= {"nopad4": "nopad", "kpadauto8": "kpadauto"}
    ks = {"van": 0, "vansync": 0, "suf": 32, "kpad4": 4, "kpad8": 8, "nopad4": 4, "nopad8": 8, "kpadauto8": 8}
    pairs = paired.comparisons(names, methods, ks)
    # padding over plain suffix decoding at the same K first, kpadauto's included (the reason to carry the patch),
    # then kpadauto over every fixed speculative configuration at any K (issue 44's target: the best of them)
    assert pairs[:9] == [
        ("kpad4", "nopad4"),
        ("kpad8", "nopad8"),
        ("kpadauto8", "nopad8"),
        ("kpadauto8", "suf"),
        ("kpadauto8", "kpad4"),
        ("kpadauto8", "kpad8"),
        ("kpadauto8", "nopad4"),
        ("kpadauto8", "vansync"),
        ("vansync", "van"),
    ]
    assert ("kpadauto8", "van") in pairs and ("kpadauto8", "suf") in pairs


def test_the_two_k_bar_models_and_which_fits():
    assert stepcost.kbar_geometric(0.5, 3) == pytest.approx(1.875)  # (1 - 0.5^4) / 0.5
    assert stepcost.kbar_linear(0.5, 3) == 2.5
    assert stepcost.kbar_geometric(1.0, 7) == 8.0
    runs_table = pd.DataFrame(
        [  # ngram7 measured exactly on the linear form, suf exactly on the geometric one; van and a failed run ignored
            {
                "configuration": "ngram7",
                "method": "ngram",
                "k": 7,
                "status": "ok",
                "acceptance_rate_real": 0.2,
                "tokens_per_request_step": 2.4,
            },
            {
                "configuration": "ngram7",
                "method": "ngram",
                "k": 7,
                "status": "ok",
                "acceptance_rate_real": 0.1,
                "tokens_per_request_step": 1.7,
            },
            {
                "configuration": "suf",
                "method": "suf",
                "k": 4,
                "status": "ok",
                "acceptance_rate_real": 0.5,
                "tokens_per_request_step": 1.9375,
            },
            {
                "configuration": "suf",
                "method": "suf",
                "k": 4,
                "status": "invalid",
                "acceptance_rate_real": 0.9,
                "tokens_per_request_step": 9.0,
            },
            {
                "configuration": "van",
                "method": "van",
                "k": 0,
                "status": "ok",
                "acceptance_rate_real": None,
                "tokens_per_request_step": 1.0,
            },
        ]
    )
    fit = stepcost.kbar_fit(runs_table).set_index("configuration")
    assert list(fit.index) == ["ngram7", "suf"]
    assert (fit.loc["ngram7", "n_runs"], fit.loc["ngram7", "better"]) == (2, "linear")
    assert fit.loc["ngram7", "rmse_linear"] == pytest.approx(0.0, abs=1e-12)
    # geometric at alpha 0.5, gamma 4: 1.9375 (exact); linear: 3.0, so its RMSE is 1.0625
    assert fit.loc["suf", "better"] == "geometric"
    assert (fit.loc["suf", "rmse_geometric"], fit.loc["suf", "rmse_linear"]) == pytest.approx((0.0, 1.0625), abs=1e-12)
    assert stepcost.kbar_fit(pd.DataFrame()).empty


@pytest.mark.parametrize(
    "options, limit",
    [
        ({}, 12),  # vLLM's defaults: depth 24, factor 1.0; a 12-token match leaves 12 of the tree's 24 levels
        ({"suffix_decoding_max_tree_depth": 64}, 32),
        ({"suffix_decoding_max_spec_factor": 2.0}, 16),  # match 8, draft 16
        ({"suffix_decoding_max_spec_factor": 0.5}, 8),  # match 16, draft 8
        ({"suffix_decoding_max_tree_depth": 25}, 12),  # match 12 drafts 12, match 13 leaves 12 levels
        ({"suffix_decoding_max_tree_depth": 1}, 0),  # no match shorter than the one-token context
    ],
)
def test_the_longest_suffix_draft_follows_the_tree_depth_and_spec_factor(options, limit):
    assert runs.suffix_draft_limit(options) == limit


def test_the_plan_says_which_k_drafts_no_longer_than_a_smaller_one():
    configs = expand(
        [
            {"method": "van"},
            {"method": "suf", "k": 32},
            {"method": "nopad", "k": [8, 12]},
            {"method": "kpad", "k": [16]},
            {"name": "deep", "method": "suf", "k": 32, "speculative": {"suffix_decoding_max_tree_depth": 64}},
        ]
    )
    assert [c.draft_limit for c in configs] == [None, 12, 8, 12, 12, 32]
    assert [n for c in configs if (n := runs.draft_limit_note(c))] == [
        "suf: K = 32, but suffix decoding drafts at most 12 tokens at suffix_decoding_max_tree_depth 24 and "
        "suffix_decoding_max_spec_factor 1, so its drafts are those of K = 12 (a deeper tree in the entry's "
        "`speculative` allows longer drafts)",
        "kpad16: K = 16, but suffix decoding drafts at most 12 tokens at suffix_decoding_max_tree_depth 24 and "
        "suffix_decoding_max_spec_factor 1, so its drafts are those of K = 12; a step padded to 16 verifies at least "
        "4 pad slots a request (a deeper tree in the entry's `speculative` allows longer drafts)",
    ]
