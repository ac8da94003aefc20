"""Step cost (K-bar vs R), ours vs published, advice: hand-computed values."""

import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kpadstudy import advice, compare, confirm, runs, stepcost, summary, tables

ROOT = Path(__file__).resolve().parent.parent


def cell(cfg, method, k, tok, mad=0.0, tpot=10.0, kbar=1.0, corpus="mix", model="M", device="cuda", statuses="ok:3"):
    return {
        "model": model,
        "corpus": corpus,
        "configuration": cfg,
        "method": method,
        "k": k,
        "pad": method == "kpad",
        "device": device,
        "n_runs": 3,
        "n_valid": 0 if pd.isna(tok) else 3,
        "statuses": statuses,
        "output_tok_s_median": tok,
        "output_tok_s_mad": mad,
        "tpot_mean_ms_median": tpot,
        "tokens_per_request_step_median": kbar,
    }


CELLS = pd.DataFrame(
    [
        cell("van", "van", 0, 100.0, mad=5.0, tpot=10.0, kbar=1.0),
        cell("suf", "suf", 32, 120.0, mad=2.0, tpot=9.0, kbar=2.0),
        cell("kpad4", "kpad", 4, 149.0, mad=4.0, tpot=7.0, kbar=1.8),
        cell("kpad8", "kpad", 8, 150.0, mad=3.0, tpot=6.0, kbar=2.4),
        cell("kpad12", "kpad", 12, float("nan"), statuses="boot_failed:3"),
    ]
)


def run(cfg, rep, dur, steps, status="ok", none=0):
    return {
        "model": "M",
        "corpus": "mix",
        "configuration": cfg,
        "repeat": rep,
        "status": status,
        "duration_s": dur,
        "steps_FULL": steps,
        "steps_PIECEWISE": 0,
        "steps_NONE": none,
    }


def test_step_cost_from_engine_steps_and_tpot():
    r = pd.DataFrame(
        [
            run("van", 1, 10.0, 0, none=1000),
            run("van", 2, 12.0, 0, none=1000),  # 10 ms and 12 ms -> median 11 ms
            run("kpad8", 1, 6.0, 400),
            run("kpad8", 2, 99.0, 1, status="invalid"),  # 15 ms; invalid run ignored
            run("suf", 1, 5.0, 0),
        ]
    )  # suf counted no steps -> TPOT
    t = stepcost.step_cost(r, CELLS).set_index("configuration")
    k8 = t.loc["kpad8"]
    assert k8["step_time_ms"] == pytest.approx(15.0) and k8["van_step_time_ms"] == pytest.approx(11.0)
    assert (k8["r"], k8["r_from"]) == (pytest.approx(15 / 11), "engine steps")
    assert k8["predicted_speedup"] == pytest.approx(2.4 / (15 / 11)) and k8["measured_speedup"] == pytest.approx(1.5)
    assert k8["r_tpot"] == pytest.approx(6.0 * 2.4 / 10.0)
    suf = t.loc["suf"]
    assert (suf["r"], suf["r_from"]) == (pytest.approx(9.0 * 2.0 / 10.0), "TPOT")
    assert suf["predicted_speedup"] == pytest.approx(10.0 / 9.0)  # TPOT form: K-bar / R = TPOT_van / TPOT_config
    assert bool(suf["k_bar_exceeds_r"]) is True  # 2.0 > 1.8
    assert pd.isna(t.loc["kpad12", "measured_speedup"]) and t.loc["kpad12", "r_from"] == ""


def test_step_cost_on_the_embedded_cpu_run():
    """sharegpt kpad4 of the embedded CPU run: 28.751386 s / 127 steps vs van 19.528209 s / 194 steps."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "results" / "cpu"
    t = stepcost.step_cost(
        pd.read_parquet(root / "embedded-runs.parquet"), pd.read_parquet(root / "embedded-cells.parquet")
    )
    row = t[(t["corpus"] == "sharegpt") & (t["configuration"] == "kpad4")].iloc[0]
    assert row["r"] == pytest.approx((28.751386 / 127) / (19.528209 / 194), rel=1e-6)
    assert row["r_from"] == "engine steps"
    assert row["measured_speedup"] == pytest.approx(35.998265 / 53.000252, rel=1e-6)


def test_step_cost_names_its_van_and_prefers_the_one_named_van_whatever_the_row_order(tmp_path):
    import write_tables

    vans = [
        cell("vansyncv1", "van", 0, 110.0, tpot=9.0),
        cell("vansync", "van", 0, 100.0, tpot=10.0),
        cell("kpadauto12", "kpadauto", 12, 95.0, tpot=10.5),
    ]
    t = stepcost.step_cost(pd.DataFrame(), pd.DataFrame(vans)).iloc[0]
    assert (t["reference"], t["measured_speedup"], t["r"]) == ("vansync", pytest.approx(0.95), pytest.approx(1.05))
    with_van = pd.DataFrame([*vans, cell("van", "van", 0, 200.0, tpot=5.0)])
    assert stepcost.step_cost(pd.DataFrame(), with_van).iloc[0]["reference"] == "van"
    cells = tmp_path / "cells.parquet"
    pd.DataFrame(vans).to_parquet(cells)
    write_tables.write_step_cost(None, str(cells), str(tmp_path / "s.parquet"), str(tmp_path / "s.md"))
    assert (
        "In M / mix, R and the measured speed-up are against vansync (the cell has no configuration named van with "
        "a valid median)." in (tmp_path / "s.md").read_text()
    )


def test_best_kpad_and_failure_labels():
    b = tables.best_kpad(CELLS).iloc[0]
    assert (b["best_k"], b["best_kpad_tok_s"], b["best_from"]) == (8, 150.0, "K-sweep")
    assert tables.failure_label(CELLS[CELLS["configuration"] == "kpad12"]) == "did not boot"
    assert tables.failure_label(pd.DataFrame([{"statuses": "boot_failed:1,invalid:2"}])) == "failed"
    assert tables.failure_label(CELLS.iloc[0:0]) == "not measured"


def test_recommend_the_highest_median_against_its_runner_up_by_medians():
    r = advice.recommend(CELLS).iloc[0]
    # best kpad 150; kpad4 149 >= 0.99 * 150 = 148.5, so K4; candidates kpad4 149, suf 120, van 100
    assert (r["recommended"], r["k"], r["basis"], r["runner_up"]) == ("kpad4", 4, "K-sweep", "suf")
    assert r["ratio"] == pytest.approx(149.0 / 120.0) and r["clear"] is None
    assert r["reason"] == (
        "kpad4: 1.24x suf by point estimate (medians of 3 and 3 repeats, not paired); medians kpad4 149.0, "
        "suf 120.0, van 100.0 tok/s; K=4 is at the edge of the swept Ks 4-8: a K beyond may do better"
        "; suf is the best unpadded configuration at any K (none ran at K=4); " + advice.PAD_METRICS_NOTE
    )


def _runs(tok: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": "M",
                "corpus": "mix",
                "configuration": c,
                "repeat": i + 1,
                "phase": "sweep",
                "status": "ok",
                "output_tok_s": v,
            }
            for c, values in tok.items()
            for i, v in enumerate(values)
        ]
    )


def test_recommend_by_the_paired_interval_when_runs_are_given():
    # repeat 3 ran 50% faster for everyone (drift): within-repeat ratios kpad4/suf 1.25, 1.20, 1.25
    clear = _runs({"kpad4": [150.0, 144.0, 225.0], "suf": [120.0, 120.0, 180.0]})
    r = advice.recommend(CELLS, run_table=clear).iloc[0]
    assert (r["recommended"], r["runner_up"], r["n"], r["clear"]) == ("kpad4", "suf", 3, True)
    assert r["reason"].startswith(
        "kpad4: 1.23x suf (1.16-1.31, 95% CI, 3 of 3 repeats favour kpad4); medians kpad4 149.0"
    ), r["reason"]
    mixed = _runs({"kpad4": [150.0, 110.0, 190.0], "suf": [120.0, 120.0, 180.0]})  # 1.25, 0.92, 1.06
    r = advice.recommend(CELLS, run_table=mixed).iloc[0]
    assert bool(r["clear"]) is False and r["reason"].startswith(
        "no clear winner between kpad4 and suf (0.72-1.57, 95% CI, 2 of 3 repeats favour kpad4); kpad4 has the higher "
        "point estimate"
    ), r["reason"]
    two = _runs({"kpad4": [150.0, 144.0], "suf": [120.0, 120.0]})
    r = advice.recommend(CELLS, run_table=two).iloc[0]
    assert r["reason"].startswith("kpad4: 1.22x suf by point estimate (n = 2, 2 of 2 repeats favour kpad4)"), r[
        "reason"
    ]


@pytest.mark.parametrize(
    ("kpad4", "suf"),
    [(64.7, 76.6), (59.9, 69.6)],  # the CPU humaneval and sharegpt cells that issue 16 quotes
)
def test_recommend_suf_where_suf_beats_the_best_k(kpad4, suf):
    cells = pd.DataFrame(
        [cell("van", "van", 0, 50.0), cell("suf", "suf", 32, suf), cell("kpad4", "kpad", 4, kpad4, device="cpu")]
    )
    r = advice.recommend(cells).iloc[0]
    assert (r["recommended"], r["runner_up"]) == ("suf", "kpad4")


def test_recommend_suf_on_the_published_qwen_7b_mix():
    """The published mix: bestKpad K6 7,488 tok/s, suf 7,803 (single measurements)."""
    from pathlib import Path

    published = pd.read_parquet(Path(__file__).resolve().parent.parent / "results/reference/kpad_published.parquet")
    r = advice.recommend(published).set_index(["model", "corpus"]).loc[("Qwen2.5-7B-Instruct", "mix")]
    assert (r["recommended"], r["runner_up"], r["candidate"]) == ("suf", "kpad6", "kpad6")
    assert r["reason"].startswith("suf: 1.04x kpad6 by point estimate (single measurement); medians suf 7,803.")


def test_recommend_prefers_a_separate_measurement_of_the_best_k():
    conf = pd.concat([CELLS, pd.DataFrame([cell("bestKpad", "bestkpad", 8, 140.0, mad=1.0)])])
    r = advice.recommend(conf).iloc[0]
    assert (r["recommended"], r["basis"], r["candidate_tok_s"]) == ("kpad8", "separate measurement", 140.0)


def test_a_confirmed_cell_is_advised_from_its_confirmation_only():
    # the sweep: kpad8 150 best, kpad4 149 second; the confirmation (its own repeats): van 98, suf 130,
    # kpad8 (bestkpad) 140, kpad4 145. The pick is the better confirmed K, against the confirmation's suf.
    confirmed = pd.DataFrame(
        [
            cell("van", "van", 0, 98.0),
            cell("suf", "suf", 32, 130.0),
            cell("kpad8", "bestkpad", 8, 140.0),
            cell("kpad4", "kpad", 4, 145.0),
        ]
    ).assign(phase="confirm")
    final = confirm.prefer_confirmed(CELLS, confirmed)
    r = advice.recommend(final).iloc[0]
    assert (r["recommended"], r["basis"], r["phase"], r["runner_up"]) == ("kpad4", "confirmation", "confirm", "suf")
    assert (r["candidate_tok_s"], r["van_tok_s"], r["suf_tok_s"]) == (145.0, 98.0, 130.0)
    assert r["reason"] == (
        "kpad4: 1.12x suf by point estimate (medians of 3 and 3 repeats, not paired); medians kpad4 145.0, "
        "suf 130.0, van 98.0 tok/s; K=4 is at the edge of the swept Ks 4-8: a K beyond may do better"
        "; suf is the best unpadded configuration at any K (none ran at K=4); " + advice.PAD_METRICS_NOTE
    )


def _served_argv(cfg: dict, configuration: runs.Configuration, tensor_parallel_size: int = 1) -> list[str]:
    """What advice.command_line must print after its environment: model M on CUDA, CPUs 0-3, port 8000."""
    return runs.server_command(
        model_path="results/models/M",
        served_model_name="M",
        port=8000,
        configuration=configuration,
        server=cfg["server"],
        tensor_parallel_size=tensor_parallel_size,
        device="cuda",
        cpus="0-3",
        max_concurrency=32,
        python="python",
    )


def test_command_line_is_built_from_server_command_and_env():
    cfg = {
        "server": {
            "max_model_len": 4096,
            "cudagraph_mode": "FULL_AND_PIECEWISE",
            "gpu_memory_utilization": 0.85,
            "env": {},
            "cpu": {"kvcache_space_gib": 1},
        },
        "configurations": {"van": {"enabled": True}, "suf": {"enabled": True, "k": 32}, "kpad": {"k": [4, 8]}},
        "models": {"M": {"tensor_parallel_size": 2}},
        "taskset": {"server": "0-3"},
    }
    line = advice.command_line(advice.recommend(CELLS).iloc[0], cfg)
    cmd = _served_argv(cfg, runs.configurations(cfg)[2], tensor_parallel_size=2)
    assert line.startswith(
        "ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS=kpad VLLM_SUFFIX_PAD_UNIFORM=1 PYTHONPATH=workflow/scripts "
        "taskset -c 0-3 python -m vllm"
    )
    assert (
        """--speculative-config '{"method": "suffix", "num_speculative_tokens": 4}'""" in line
        and "--tensor-parallel-size 2" in line
        and "--max-num-seqs 32" in line  # the study's concurrency (load.max_concurrency default): 32 x (1 + 4) = 160
        and '"max_cudagraph_capture_size": 320' in line  # vLLM's own grid would reach min(2 x 160, 512)
    )
    assert shlex.split(line)[4:] == cmd  # after the 4 environment assignments: exactly runs.server_command's argv
    md = advice.to_markdown(advice.recommend(CELLS.assign(device="cpu")), cfg)
    assert "not on a confirmation rerun" in md and "no cudagraphs on CPU" in md
    assert "run its cell again with the confirmation phase (config key `confirm.enabled`, on by default)" in md
    assert advice.PAD_METRICS_MEASURED in md and advice.CAPTURE_SIZES_NOTE not in md  # kpad4 on CPU: no graphs


def test_a_pick_whose_k_is_above_the_longest_suffix_draft_says_so():
    cfg = {
        "server": {"max_model_len": 4096, "cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85},
        "configurations": [{"method": "van"}, {"method": "suf", "k": 32}, {"method": "kpad", "k": [4, 8]}],
        "models": {"M": {"tensor_parallel_size": 1}},
    }
    suf_wins = CELLS.copy()
    suf_wins.loc[suf_wins["configuration"] == "suf", "output_tok_s_median"] = 200.0
    md = advice.to_markdown(advice.recommend(suf_wins), cfg)
    assert (
        "\n**Draft length:** suf: K = 32, but suffix decoding drafts at most 12 tokens at "
        "suffix_decoding_max_tree_depth 24 and suffix_decoding_max_spec_factor 1, so its drafts are those of K = 12 "
        "(a deeper tree in the entry's `speculative` allows longer drafts).\n\n```bash\n" in md
    )
    cfg["configurations"][1]["speculative"] = {"suffix_decoding_max_tree_depth": 64}  # drafts up to 32 tokens
    assert "**Draft length:**" not in advice.to_markdown(advice.recommend(suf_wins), cfg)
    assert "**Draft length:**" not in advice.to_markdown(advice.recommend(CELLS), cfg)  # kpad8: 8 <= 12


def test_compare_same_model_and_no_overlap():
    pub = pd.DataFrame(
        [
            {"model": "M", "corpus": "mix", "best_k": 8, "bestkpad_over_suf": 1.2, "bestkpad_over_van": 2.0},
            {"model": "P", "corpus": "mix", "best_k": 12, "bestkpad_over_suf": 1.4, "bestkpad_over_van": 3.0},
            {"model": "Q", "corpus": "mix", "best_k": 12, "bestkpad_over_suf": 0.9, "bestkpad_over_van": 4.0},
        ]
    ).astype({"best_k": "Int64"})
    ours = tables.best_kpad(CELLS).assign(device="cuda")
    same = compare.compare(ours, pub).iloc[0]
    assert (same["match"], same["published_best_k"], same["best_k_agreement"]) == ("same model", "8", 1.0)
    assert same["bestkpad_over_suf"] == pytest.approx(150 / 120) and same["published_bestkpad_over_suf"] == 1.2
    other = compare.compare(ours.assign(model="Z", device="cpu"), pub).iloc[0]
    assert (other["match"], other["published_models"], other["published_best_k"]) == ("no overlap", 3, "K12:2,K8:1")
    assert (
        other["published_bestkpad_over_van"],
        other["published_bestkpad_over_van_min"],
        other["published_bestkpad_over_van_max"],
    ) == (3.0, 2.0, 4.0)
    assert other["best_k_agreement"] == pytest.approx(1 / 3)
    md = compare.to_markdown(compare.compare(ours.assign(model="Z", device="cpu"), pub))
    assert (
        "no cudagraphs exist on CPU" in md
        and "| mix | Z | cpu | K8 | 1.25 | 1.50 | 3 | K12:2,K8:1 | 1.20 (0.90-1.40) | 3.00 (2.00-4.00) | 0.33 |" in md
    )


def test_recommend_with_only_the_sweep_says_it_is_the_only_candidate():
    r = advice.recommend(CELLS[CELLS["method"] == "kpad"]).iloc[0]
    assert r["recommended"] == "kpad4" and r["reason"].startswith(
        "kpad4 is the only candidate with a valid median (kpad4 149.0 tok/s): the cell has no valid van, suf, nopad "
        "or other configuration to compare it with; K=4 is at the edge of the swept Ks 4-8: a K beyond may do "
        "better; kpad4 has no unpadded run at K=4"
    ), r["reason"]
    none = advice.recommend(CELLS[CELLS["configuration"] == "kpad12"]).iloc[0]
    assert none["recommended"] == "" and none["reason"] == "no configuration has a valid run"


def test_recommend_follows_the_paired_repeats_over_medians_of_another_phase():
    """The confirmation's kpad4 median (130) beats suf (120), but in the sweep's own repeats suf beat kpad4 every
    time (110/120, 108/125, 112/118): the paired evidence decides, and the sentence says so."""
    cells = pd.DataFrame(
        [
            cell("van", "van", 0, 100.0),
            cell("suf", "suf", 32, 120.0),
            cell("kpad4", "kpad", 4, 110.0),
            cell("kpad4", "bestkpad", 4, 130.0),
        ]
    )
    sweep = _runs({"suf": [120.0, 125.0, 118.0], "kpad4": [110.0, 108.0, 112.0]})
    r = advice.recommend(cells, run_table=sweep).iloc[0]
    assert (r["recommended"], r["runner_up"], r["method"]) == ("suf", "kpad4", "suf")
    assert r["ratio"] == pytest.approx(1 / ((110 / 120) * (108 / 125) * (112 / 118)) ** (1 / 3))
    assert r["reason"].startswith(
        "no clear winner between suf and kpad4 (0.98-1.24, 95% CI, 3 of 3 repeats favour suf); suf"
    ), r["reason"]


def test_recommend_keeps_the_name_of_a_named_kpad_entry():
    cells = pd.DataFrame([cell("van", "van", 0, 100.0), cell("x4", "kpad", 4, 150.0)])
    assert advice.recommend(cells).iloc[0]["recommended"] == "x4"


def test_recommend_never_picks_a_control_and_names_it():
    """vansync (van with async scheduling off) is the fastest here, but it is a control (control: true): the
    recommendation is the fastest of the rest, and the reason says what was left out."""
    cells = pd.DataFrame(
        [
            cell("van", "van", 0, 100.0),
            cell("vansync", "van", 0, 130.0),
            cell("vansyncv1", "van", 0, 125.0),
            cell("kpadauto12", "kpadauto", 12, 120.0),
        ]
    )
    r = advice.recommend(cells, controls=["vansync", "vansyncv1", "absent"]).iloc[0]
    assert (r["recommended"], r["runner_up"], r["ratio"]) == ("kpadauto12", "van", pytest.approx(1.2))
    assert r["reason"] == (
        "kpadauto12: 1.20x van by point estimate (medians of 3 and 3 repeats, not paired); medians kpadauto12 "
        "120.0, van 100.0 tok/s; kpadauto12 has no unpadded run at K=12 (no nopad12): what padding adds over plain "
        "suffix decoding there is not measured; "
        + advice.PAD_METRICS_NOTE
        + "; vansync, vansyncv1 left out as controls (control: true in the config: measured, "
        "not a way to serve); kpadauto12 ran slower than controls vansync, vansyncv1 (kpadauto12 / vansync: 0.92x "
        "(medians of 3 and 3 repeats, not paired); kpadauto12 / vansyncv1: 0.96x (medians of 3 and 3 repeats, not "
        "paired)): measure what they control for before serving"
    )
    assert r["faster_controls"] == "vansync, vansyncv1"
    lines = summary.summary_text(advice.recommend(cells, controls=["vansync", "vansyncv1"]), cells).splitlines()
    assert lines[2] == (
        "- M / mix (sweep): serve kpadauto12; 1.20x (medians, no run records) over van; no suf number to compare "
        "with; no unpadded run at K=12; flags: slower than controls (vansync, vansyncv1)"
    )
    # a recommendation outside the K sweep, van and suf: its own median over van's, 125 / 100 (the summary took
    # the runner-up's median, kpadauto12's 120, before)
    lines = summary.summary_text(advice.recommend(cells, controls=["vansync"]), cells).splitlines()
    assert lines[2] == (
        "- M / mix (sweep): serve vansyncv1; 1.25x (medians, no run records) over van; no suf number to compare "
        "with; flags: slower than controls (vansync)"
    )
    assert advice.recommend(cells).iloc[0]["recommended"] == "vansync"  # without the flag it is a candidate
    only = advice.recommend(cells[cells["configuration"] == "vansync"], controls=["vansync"]).iloc[0]
    assert (only["recommended"], only["reason"]) == (
        "",
        "no configuration other than controls has a valid run; vansync left out as control (control: true in the "
        "config: measured, not a way to serve)",
    )


def test_the_only_candidate_is_compared_with_the_fastest_control_within_repeats():
    cells = pd.DataFrame([cell("kpadauto12", "kpadauto", 12, 120.0), cell("vansync", "van", 0, 128.0)])
    tok = _runs({"kpadauto12": [120.0, 118.0, 125.0], "vansync": [130.0, 126.0, 128.0]})
    r = advice.recommend(cells, run_table=tok, controls=["vansync"]).iloc[0]
    # by hand: ratios 120/130, 118/126, 125/128; geometric mean 0.945, t(2) = 4.303 on the logs: 0.879-1.016
    assert r["reason"] == (
        "kpadauto12 is the only candidate with a valid median (kpadauto12 120.0 tok/s): the cell has no valid van, "
        "suf, nopad or other configuration to compare it with, other than controls; against the fastest control, "
        "kpadauto12 / vansync: 0.95x (0.88-1.02, 95% CI), 0 of 3 repeats favour kpadauto12; kpadauto12 has no "
        "unpadded run at K=12 (no "
        "nopad12): what padding adds over plain suffix decoding there is not measured; "
        + advice.PAD_METRICS_NOTE
        + "; vansync left "
        "out as control (control: true in the config: measured, not a way to serve); kpadauto12 ran slower than "
        "control vansync: measure what it controls for before serving"
    )
    # the medians say vansync (150) beat kpadauto12 (100); the one repeat both ran says the opposite (100 / 95):
    # within repeats outranks medians of other times, so no flag
    cells = pd.DataFrame([cell("kpadauto12", "kpadauto", 12, 100.0), cell("vansync", "van", 0, 150.0)])
    tok = _runs({"kpadauto12": [100.0], "vansync": [95.0, 150.0, 150.0]})
    r = advice.recommend(cells, run_table=tok, controls=["vansync"]).iloc[0]
    assert (
        r["faster_controls"] == ""
        and "against the fastest control, kpadauto12 / vansync: 1.05x (single " in (r["reason"])
    )


def test_a_kpad_control_is_never_the_best_k():
    cells = pd.DataFrame(
        [cell("van", "van", 0, 100.0), cell("kpad8", "kpad", 8, 150.0), cell("kpad4", "kpad", 4, 140.0)]
    )
    r = advice.recommend(cells, controls=["kpad8"]).iloc[0]
    assert (r["recommended"], r["candidate"], r["faster_controls"]) == ("kpad4", "kpad4", "kpad8")
    assert "edge of the swept" not in r["reason"]  # the sweep without its control holds one K
    picked = confirm.pick_best_k(cells.assign(n_valid=3), 3, controls=["kpad8"])["cells"][0]
    assert (picked["best"], picked["second"]) == ("kpad4", None)


def test_controls_are_the_entries_marked_so():
    cfg = yaml.safe_load((ROOT / "config" / "gpu" / "8b-auto-runner.yaml").read_text())
    assert runs.controls(cfg) == ["vansync", "vansyncv1"]
    assert [c.control for c in runs.configurations(cfg)] == [True, False, True]
    cfg["configurations"][2]["enabled"] = False  # switched off, its cached runs are still a control's
    assert [c.name for c in runs.configurations(cfg)] == ["vansync", "kpadauto12"]
    assert runs.controls(cfg) == ["vansync", "vansyncv1"]
    assert runs.controls(yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())) == []


def test_a_confirmed_cell_whose_confirmation_failed_says_so():
    confirmed = pd.DataFrame(
        [
            cell("van", "van", 0, float("nan"), statuses="boot_failed:3"),
            cell("kpad8", "bestkpad", 8, float("nan"), statuses="boot_failed:3"),
        ]
    ).assign(phase="confirm")
    r = advice.recommend(confirm.prefer_confirmed(CELLS, confirmed)).iloc[0]
    assert (r["recommended"], r["basis"], r["phase"], r["reason"]) == (
        "",
        "confirmation",
        "confirm",
        "no configuration has a valid run",
    )  # never the sweep's kpad8 150 or van 100: another phase


def test_step_cost_without_a_van_says_that_van_is_missing_not_the_step_counts(tmp_path):
    import write_tables

    cells = tmp_path / "cells.parquet"
    pd.DataFrame([cell("kpad8", "kpad", 8, 100.0, tpot=10.0), cell("kpadauto12", "kpadauto", 12, 102.0)]).to_parquet(
        cells
    )
    t = write_tables.write_step_cost(None, str(cells), str(tmp_path / "s.parquet"), str(tmp_path / "s.md"))
    assert t.empty
    text = (tmp_path / "s.md").read_text()
    assert text.endswith(
        "No cell of these data has a valid van run (R and the measured speed-up divide by van's), so no "
        "configuration has a K-bar / R row.\n"
    )
    assert "step counts" not in text


SERVE_CFG = {
    "server": {
        "max_model_len": 4096,
        "cudagraph_mode": "FULL_AND_PIECEWISE",
        "gpu_memory_utilization": 0.85,
        "env": {},
        "cpu": {"kvcache_space_gib": 1},
    },
    "configurations": [{"method": "van"}, {"method": "kpad", "k": [4, 8]}, {"method": "nopad", "k": [4, 8]}],
    "models": {"M": {"tensor_parallel_size": 1}},
    "taskset": {"server": "0-3"},
}


def _cells_of(tok: dict[str, list[float]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run records (3 repeats, sweep, ``ok``) of the given output tok/s and their cells table."""
    method = {"van": "van", "suf": "suf"}
    rows = _runs(tok)
    rows["method"] = [method.get(c, c.rstrip("0123456789")) for c in rows["configuration"]]
    rows["k"] = [32 if c == "suf" else int(c.lstrip("abcdefghijklmnopqrstuvwxyz") or 0) for c in rows["configuration"]]
    rows["pad"] = rows["method"] == "kpad"
    rows["device"] = "cuda"
    return rows, tables.cells(rows)


def test_nopad_that_beats_every_kpad_k_in_every_repeat_is_recommended_with_a_plain_vllm_command():
    """An 8B-like cell: unpadded suffix decoding ahead of padding at every K. By hand: nopad8 / kpad8 = 140/110,
    150/120, 130/100: geometric mean 1.274, t(2) = 4.303 on the logs: 1.213-1.338."""
    runs_, cells = _cells_of(
        {
            "van": [100.0, 110.0, 90.0],
            "kpad4": [105.0, 112.0, 95.0],
            "kpad8": [110.0, 120.0, 100.0],
            "nopad4": [130.0, 135.0, 120.0],
            "nopad8": [140.0, 150.0, 130.0],
        }
    )
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["method"], r["k"], r["runner_up"], r["candidate"]) == (
        "nopad8",
        "nopad",
        8,
        "kpad8",
        "kpad8",
    )
    assert (r["n"], r["clear"], r["unpadded"]) == (3, True, "")  # an unpadded pick has no padding gain to state
    assert r["reason"] == (
        "nopad8: 1.27x kpad8 (1.21-1.34, 95% CI, 3 of 3 repeats favour nopad8); medians nopad8 140.0, kpad8 110.0, "
        "van 100.0 tok/s; "
        "K=8 is at the edge of the swept Ks 4-8: a K beyond may do better"
    )
    line = advice.command_line(r, SERVE_CFG)
    cmd = _served_argv(SERVE_CFG, runs.configurations(SERVE_CFG)[4])
    # plain vLLM with arctic-inference installed: no K-pad plugin, no PYTHONPATH, no padding flag
    assert shlex.split(line) == ["ARCTIC_INFERENCE_ENABLED=0", *cmd]
    md = advice.to_markdown(advice.recommend(cells, run_table=runs_), SERVE_CFG)
    assert "## M / mix (cuda): nopad8" in md and "VLLM_PLUGINS" not in md and advice.PAD_METRICS_MEASURED not in md
    assert advice.CAPTURE_SIZES_NOTE not in md  # an unpadded pick's command has no capture list
    text = summary.summary_text(advice.recommend(cells, run_table=runs_), cells, runs_).splitlines()[2]
    # nopad8 / van = 140/100, 150/110, 130/90: 1.402 (1.31-1.51)
    assert text == (
        "- M / mix (sweep): serve nopad8; 1.40x (1.31-1.51, n = 3) over van; no suf number to compare with; "
        "flags: noisy (kpad4, kpad8, nopad8, van)"
    )
    recs = advice.recommend(cells, run_table=runs_)
    md = advice.to_markdown(recs, SERVE_CFG, flags=summary.cell_flags(recs, cells, runs_))
    cell_md = md.split("## M / mix (cuda): nopad8\n\n")[1]  # the same flags as summary.md, under the Basis line
    assert cell_md.split("\n\n")[1] == "**Flags:** noisy (kpad4, kpad8, nopad8, van)."


def test_a_padded_pick_says_how_much_it_beats_the_unpadded_one_at_its_k():
    """kpad8 / nopad8 = 115/100, 120/100, 125/100: geometric mean 1.199, 1.081-1.330; kpad8 / suf (the runner-up)
    = 1.090 (0.983-1.209)."""
    runs_, cells = _cells_of(
        {
            "van": [100.0, 100.0, 100.0],
            "suf": [110.0, 110.0, 110.0],
            "kpad4": [105.0, 105.0, 105.0],
            "kpad8": [115.0, 120.0, 125.0],
            "nopad8": [100.0, 100.0, 100.0],
        }
    )
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"], r["unpadded"], r["over_unpadded_n"]) == ("kpad8", "suf", "nopad8", 3)
    assert (r["over_unpadded"], r["over_unpadded_ci_low"], r["over_unpadded_ci_high"]) == (
        pytest.approx(1.1993, abs=1e-4),
        pytest.approx(1.0813, abs=1e-4),
        pytest.approx(1.3302, abs=1e-4),
    )
    assert r["reason"] == (
        "no clear winner between kpad8 and suf (0.98-1.21, 95% CI, 3 of 3 repeats favour kpad8); kpad8 has the higher "
        "point "
        "estimate; medians kpad8 120.0, suf 110.0, van 100.0, nopad8 100.0 tok/s; K=8 is at the edge of the swept "
        "Ks 4-8: a K beyond may do better; against the best unpadded configuration at the same K, kpad8: 1.20x "
        "nopad8 (1.08-1.33, 95% CI, 3 of 3 repeats favour kpad8); " + advice.PAD_METRICS_NOTE
    )
    assert "1.20x (1.08-1.33, n = 3) over nopad8" in summary.summary_text(
        advice.recommend(cells, run_table=runs_), cells, runs_
    )
    md = advice.to_markdown(advice.recommend(cells, run_table=runs_), SERVE_CFG)
    assert advice.PAD_METRICS_MEASURED in md  # what was measured, said once above the cells
    assert md.count(advice.CAPTURE_SIZES_NOTE) == 1  # the padded command's capture list, explained once
    assert "**Without the patch:**" not in md  # padding clearly ahead of nopad8: no unpadded alternative offered
    line = advice.command_line(r, SERVE_CFG)  # the padded pick keeps what the patch needs
    assert line.startswith("ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS=kpad VLLM_SUFFIX_PAD_UNIFORM=1 PYTHONPATH=")


def test_a_padded_pick_without_a_clear_gain_over_unpadded_also_gets_the_unpadded_command():
    """kpad8 / nopad8 = 115/100, 100/100, 125/100: geometric mean 1.4375 ** (1/3) = 1.129; logs 0.1398, 0, 0.2231,
    mean 0.1210, sd 0.1128, t(2) 4.303 x sd / sqrt(3) = 0.2801: 0.85-1.49, an interval that holds 1."""
    runs_, cells = _cells_of(
        {"van": [100.0] * 3, "suf": [110.0] * 3, "kpad8": [115.0, 100.0, 125.0], "nopad8": [100.0] * 3}
    )
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["unpadded"]) == ("kpad8", "nopad8")
    md = advice.to_markdown(advice.recommend(cells, run_table=runs_), SERVE_CFG)
    padded, unpadded = md.split("**Without the patch:** ")
    assert unpadded.startswith(
        "kpad8 / nopad8 1.13x (0.85-1.49, n = 3): padding's gain is not clear. nopad8 needs no K-pad patch (vLLM's "
        "suffix decoding from arctic-inference's suffix tree, the K-pad plugin not loaded) at an estimated 0.89x "
        "kpad8's output tok/s (the inverse of kpad8 / nopad8); serve it if the patch is not worth carrying for "
        "that:\n\n```bash\n"
        "ARCTIC_INFERENCE_ENABLED=0 taskset -c 0-3 "
    )
    nopad8 = _served_argv(SERVE_CFG, runs.configurations(SERVE_CFG)[4])
    assert shlex.split(unpadded.split("```bash\n")[1].split("\n```")[0]) == ["ARCTIC_INFERENCE_ENABLED=0", *nopad8]
    assert "VLLM_SUFFIX_PAD_UNIFORM=1" in padded and "VLLM_SUFFIX_PAD_UNIFORM" not in unpadded
    recs = advice.recommend(cells, run_table=runs_)
    text = summary.summary_text(recs, cells, runs_).splitlines()[2]
    assert text.endswith(
        "1.13x (0.85-1.49, n = 3) over nopad8; padding's gain not clear: nopad8 serves without the patch "
        "(recommendations.md); flags: noisy (kpad8)"
    ), text
    runs_, cells = _cells_of({"van": [100.0] * 2, "kpad8": [115.0, 100.0], "nopad8": [100.0] * 2})  # sqrt(1.15)
    md = advice.to_markdown(advice.recommend(cells, run_table=runs_), SERVE_CFG)
    assert "**Without the patch:** kpad8 / nopad8 1.07x (n = 2, no interval): below 3 repeats the noise is " in md
    assert "nopad8 needs no K-pad patch (vLLM's suffix decoding from arctic-inference's suffix tree, the K-pad " in md
    assert "at an estimated 0.93x kpad8's output tok/s" in md  # 1 / sqrt(1.15) = 0.9325


def test_a_control_faster_than_a_nopad_pick_is_flagged_and_lost_graphs_leave_nopad_alone():
    """The best K of kpad drops a K whose runs lost FULL graphs; the best K of nopad keeps every K whatever the
    column says (nopad runs PIECEWISE by design); a control that beats the pick is flagged, never picked."""
    cells = pd.DataFrame(
        [
            cell("van", "van", 0, 100.0),
            cell("vansync", "van", 0, 160.0),
            cell("kpad8", "kpad", 8, 170.0),
            cell("kpad4", "kpad", 4, 120.0),
            cell("nopad8", "nopad", 8, 150.0),
        ]
    ).assign(graph_lost=[False, False, True, False, True])
    r = advice.recommend(cells, controls=["vansync"]).iloc[0]
    assert (r["recommended"], r["candidate"], r["runner_up"], r["faster_controls"]) == (
        "nopad8",
        "kpad4",
        "kpad4",
        "vansync",
    )
    assert r["reason"].endswith(
        "nopad8 ran slower than control vansync (nopad8 / vansync: 0.94x (medians of 3 and 3 repeats, not paired)): "
        "measure what it controls for before serving"
    )


def test_van_against_a_speculative_pick_names_their_model_runners():
    """vLLM 0.26 runs van on Model Runner V2 with async scheduling and suffix decoding on V1 without it: the
    comparison says so, from the records' columns, and the summary flags it."""
    runs_, cells = _cells_of({"van": [100.0, 100.0, 100.0], "nopad8": [120.0, 121.0, 119.0]})
    runs_["model_runner"] = ["v2" if c == "van" else "v1" for c in runs_["configuration"]]
    runs_["async_scheduling"] = runs_["configuration"] == "van"
    runs_["version_vllm"] = "0.26.0"
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    note = (
        "van ran on Model Runner V2 with async scheduling, nopad8 on Model Runner V1 without async scheduling "
        "(vLLM 0.26.0, from the run records): the ratio includes that difference"
    )
    assert (r["recommended"], r["runner_up"], r["van_runner"]) == ("nopad8", "van", note)
    assert r["reason"].endswith(f"; {note}")
    assert (
        summary.summary_text(advice.recommend(cells, run_table=runs_), cells, runs_)
        .splitlines()[2]
        .endswith(f"flags: {note}")
    )
    same = runs_.assign(model_runner="v1", async_scheduling=False)
    assert advice.recommend(cells, run_table=same).iloc[0]["van_runner"] == ""


def test_the_pick_is_the_candidate_no_other_beats_within_repeats():
    """By median kpad8 (130) leads nopad8 (125) and suf (120), but within repeats suf beats both (suf / kpad8 =
    120/100, 120/130, 220/200; suf / nopad8 = 120/110, 120/125, 220/210: 1.032, t(2) on the logs 0.877-1.213) and
    nopad8 beats kpad8: suf is the pick,
    nopad8 (the closest within repeats) its runner-up."""
    runs_, cells = _cells_of(
        {
            "van": [90.0, 90.0, 90.0],
            "kpad8": [100.0, 130.0, 200.0],
            "nopad8": [110.0, 125.0, 210.0],
            "suf": [120.0, 120.0, 220.0],
        }
    )
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"], r["n"]) == ("suf", "nopad8", 3)
    assert r["ratio"] == pytest.approx(((120 / 110) * (120 / 125) * (220 / 210)) ** (1 / 3))
    assert r["reason"].startswith(
        "no clear winner between suf and nopad8 (0.88-1.21, 95% CI, 2 of 3 repeats favour suf); suf has"
    )
    assert "suf has the higher point estimate within repeats (nopad8 has the higher median)" in r["reason"]


def test_candidates_that_beat_one_another_in_a_cycle_fall_back_to_the_highest_median():
    """Each pair ran together in one repeat only: van / suf 1.2 (r1), suf / ngram7 1.1 (r2), ngram7 / van 1.1 (r3).
    No candidate is unbeaten, so the highest median (van, 110) is the pick, against ngram7, which beat it."""
    rows = [
        ("van", "van", 0, 1, 120.0),
        ("suf", "suf", 32, 1, 100.0),
        ("suf", "suf", 32, 2, 110.0),
        ("ngram7", "ngram", 7, 2, 100.0),
        ("ngram7", "ngram", 7, 3, 110.0),
        ("van", "van", 0, 3, 100.0),
    ]
    runs_ = pd.DataFrame(
        [
            {"model": "M", "corpus": "mix", "configuration": c, "method": m, "k": k, "pad": False, "repeat": rep,
             "phase": "sweep", "status": "ok", "output_tok_s": tok, "device": "cuda"}
            for c, m, k, rep, tok in rows
        ]
    )  # fmt: skip
    r = advice.recommend(tables.cells(runs_), run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"], r["clear"]) == ("van", "ngram7", False)
    assert r["reason"] == (
        "no clear winner between van and ngram7 (single measurement, 0 of 1 repeats favour van); ngram7 has the higher "
        "point "
        "estimate within repeats, van the higher median; medians van 110.0, ngram7 105.0, suf 105.0 tok/s; within "
        "repeats each candidate is beaten by another, so the pick is the highest median"
    )


def test_a_van_pick_names_the_runners_too_and_an_unrecorded_setting_is_left_out():
    runs_, cells = _cells_of({"van": [130.0, 131.0, 129.0], "kpad8": [120.0, 121.0, 119.0]})
    runs_["model_runner"] = ["v2" if c == "van" else "v1" for c in runs_["configuration"]]
    runs_["async_scheduling"] = [None if c == "van" else False for c in runs_["configuration"]]  # no log line
    runs_["version_vllm"] = "0.26.0"
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"]) == ("van", "kpad8")
    assert r["van_runner"] == (
        "van ran on Model Runner V2, kpad8 on Model Runner V1 (vLLM 0.26.0, from the run records): the ratio includes "
        "that difference"
    )
    assert (
        summary.summary_text(advice.recommend(cells, run_table=runs_), cells, runs_)
        .splitlines()[2]
        .endswith(f"flags: {r['van_runner']}")
    )


def test_a_confirmation_without_the_sweeps_best_nopad_k_says_so():
    """A confirmation planned before the best nopad K was rerun (an older best_k.json): the sweep's fastest
    configuration, nopad4, is not among the confirmed ones, and the advice says so instead of dropping it."""
    sweep = pd.DataFrame(
        [
            cell("van", "van", 0, 100.0),
            cell("kpad8", "kpad", 8, 140.0),
            cell("nopad4", "nopad", 4, 150.0),
            cell("nopad8", "nopad", 8, 120.0),
        ]
    )
    confirmed = pd.DataFrame(
        [cell("van", "van", 0, 100.0), cell("kpad8", "bestkpad", 8, 140.0), cell("nopad8", "nopad", 8, 118.0)]
    ).assign(phase="confirm")
    r = advice.recommend(confirm.prefer_confirmed(sweep, confirmed)).iloc[0]
    assert (r["recommended"], r["phase"], r["unpadded"]) == ("kpad8", "confirm", "nopad8")
    assert r["reason"].endswith(
        "; nopad4, the sweep's best nopad K (150.0 tok/s there), was not rerun in the confirmation (planned before "
        "the confirmation reran the best nopad K): rerun it beside the pick before relying on this"
    )


def test_a_kpadauto_pick_the_config_lacks_gets_no_guessed_command():
    cells = pd.DataFrame([cell("van", "van", 0, 100.0), cell("kpadauto12", "kpadauto", 12, 130.0)])
    recs = advice.recommend(cells)
    with pytest.raises(ValueError, match="kpadauto12 is not a configuration of this config, so its draft lengths"):
        advice.command_line(recs.iloc[0], SERVE_CFG)
    assert (
        "No serve command: M / mix: kpadauto12 is not a configuration of this config, so its draft lengths are "
        "unknown: serve it with the entry of the config that ran it." in advice.to_markdown(recs, SERVE_CFG)
    )


def test_a_stand_in_model_is_named_so_in_the_cells_the_advice_and_the_summary():
    """Records of a widened model carry ``stand_in`` (kpadstudy.widen.model_facts); cells, recommendations.md and
    the summary repeat it, and a real model's cell has none."""
    what = "widened SmolLM2-135M-Instruct (llama-3.1-8b): a large model's step costs with a small model's acceptance"
    runs_, _ = _cells_of({"van": [100.0, 110.0, 90.0], "kpad8": [110.0, 120.0, 100.0], "nopad8": [140.0, 150.0, 130.0]})
    wide = runs_.assign(model="W", stand_in=what)
    runs_ = pd.concat([runs_.assign(stand_in=None), wide], ignore_index=True)
    cells = tables.cells(runs_)
    assert cells[cells["model"] == "M"]["stand_in"].isna().all()  # None in the rows, NaN in a str column
    assert list(cells[cells["model"] == "W"]["stand_in"].unique()) == [what]
    recs = advice.recommend(cells, run_table=runs_)
    md = advice.to_markdown(recs, SERVE_CFG)
    assert md.count("**Stand-in model:**") == 1
    assert f"## W / mix (cuda): nopad8\n\n**Stand-in model:** {what}.\n\nBasis:" in md
    lines = summary.summary_text(recs, cells, runs_).splitlines()
    assert lines[2].startswith("- M / mix (sweep): serve nopad8;")
    assert lines[3].startswith(f"- W / mix (sweep) [stand-in: {what}]: serve nopad8;")


def test_a_padded_pick_whose_runner_up_is_the_unpadded_one_gives_that_ratio_once():
    """kpad8 / nopad8 = 115/100, 120/100, 125/100 (1.20x, 1.08-1.33, as above), with nopad8 the only other
    candidate: the ratio against the runner-up is the gain over unpadded, so the reason says it once."""
    runs_, cells = _cells_of({"kpad8": [115.0, 120.0, 125.0], "nopad8": [100.0] * 3})
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"], r["unpadded"]) == ("kpad8", "nopad8", "nopad8")
    assert r["reason"] == (
        "kpad8: 1.20x nopad8 (1.08-1.33, 95% CI, 3 of 3 repeats favour kpad8); medians kpad8 120.0, nopad8 100.0 "
        "tok/s; "
        "nopad8 is the best unpadded configuration at the same K; " + advice.PAD_METRICS_NOTE
    )


def test_the_highest_median_passed_over_within_repeats_is_named_with_what_beats_it():
    """Medians nopad8 111, van 110, suf 109, kpad8 105. Within repeats van beats nopad8 (90/100, 112/110, 111/110:
    logs -0.1054, 0.0180, 0.0091, mean -0.0261, sd 0.0688, t(2) 4.303 x sd / sqrt(3) = 0.1709: 0.97x, 0.82-1.16)
    and no candidate beats van, so van is the pick; suf comes closest to it (1.01x), so the words on the pick and its
    runner-up would not say why nopad8, the highest median, is not the pick."""
    runs_, cells = _cells_of(
        {
            "van": [100.0, 110.0, 110.0],
            "suf": [99.0, 109.0, 109.0],
            "kpad8": [95.0, 105.0, 108.0],
            "nopad8": [90.0, 112.0, 111.0],
        }
    )
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"]) == ("van", "suf")
    assert (
        "; nopad8 has the highest median but is behind within repeats: nopad8: 0.97x van (0.82-1.16, 95% CI, 2 of 3 "
        "repeats favour nopad8)" in r["reason"]
    ), r["reason"]


def test_a_padded_pick_without_an_unpadded_run_at_its_k_is_set_against_the_best_unpadded_at_any_k():
    """kpad8 / nopad4 = 1.04, 1.00, 1.10: logs 0.0392, 0, 0.0953, mean 0.0448, sd 0.0477, t(2) 4.303 x sd / sqrt(3)
    = 0.1186: 1.05x (0.93-1.18). No nopad8 ran, so nopad4, the best unpadded configuration at any K, is what the
    patch must beat; it does not clearly, so nopad4's command follows at 1 / 1.0459 = 0.96x kpad8's output tok/s."""
    runs_, cells = _cells_of({"kpad8": [104.0, 100.0, 110.0], "nopad4": [100.0] * 3})
    r = advice.recommend(cells, run_table=runs_).iloc[0]
    assert (r["recommended"], r["runner_up"], r["unpadded"], r["over_unpadded_n"]) == ("kpad8", "nopad4", "nopad4", 3)
    assert r["reason"].endswith(
        "; nopad4 is the best unpadded configuration at any K (none ran at K=8); " + advice.PAD_METRICS_NOTE
    ), r["reason"]
    md = advice.to_markdown(advice.recommend(cells, run_table=runs_), SERVE_CFG)
    unpadded = md.split("**Without the patch:** ")[1]
    assert unpadded.startswith(
        "kpad8 / nopad4 1.05x (0.93-1.18, n = 3): padding's gain is not clear. nopad4 needs no K-pad patch "
    )
    assert "at an estimated 0.96x kpad8's output tok/s (the inverse of kpad8 / nopad4)" in unpadded
    nopad4 = _served_argv(SERVE_CFG, runs.configurations(SERVE_CFG)[3])
    assert shlex.split(unpadded.split("```bash\n")[1].split("\n```")[0]) == ["ARCTIC_INFERENCE_ENABLED=0", *nopad4]


def test_the_tables_read_runs_as_the_paired_tables_do_refusing_a_rate_that_is_no_measurement(tmp_path):
    """write_tables reads every runs table with paired.read_runs_table: numbers stored as text become numbers, and an
    ok run without a positive rate is refused with the file named, not dropped from the recommendations."""
    import write_tables

    source = "results/gpu/h100-widened-8b-crossover-runs.parquet"
    runs = pd.read_parquet(ROOT / source)
    as_text = tmp_path / "text-runs.parquet"
    runs.assign(output_tok_s=runs["output_tok_s"].map(str), repeat=runs["repeat"].map(str)).to_parquet(as_text)
    read = write_tables._read_run_tables([str(as_text)])
    assert read["output_tok_s"].tolist() == pytest.approx(runs["output_tok_s"].tolist())
    assert read["repeat"].tolist() == runs["repeat"].astype(int).tolist() == [1, 2, 3, 1, 2, 3]
    zero = tmp_path / "zero-runs.parquet"
    runs.assign(output_tok_s=runs["output_tok_s"].where(runs.index != 2, 0.0)).to_parquet(zero)
    with pytest.raises(ValueError) as e:
        write_tables._read_run_tables(str(zero))
    assert str(e.value) == (
        f"{zero}: 1 runs are ok without a positive, finite output tok/s (first: row 2, "
        f"{runs.at[2, 'configuration']}: output_tok_s 0.0); not a measured rate: fix or drop those rows"
    )
    assert write_tables._read_run_tables(None) is None
