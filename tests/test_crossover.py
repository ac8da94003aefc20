"""The crossover table and figure from the shipped runs tables (kpadstudy/crossover.py, `make crossover`)."""

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kpadstudy import crossover

ROOT = Path(__file__).resolve().parent.parent
PAIRED = str(ROOT / "results/gpu/h200-paired-runs.parquet")
WIDE = str(ROOT / "results/gpu/h100-widened-8b-crossover-runs.parquet")


def test_the_8b_stand_in_cell_is_its_paired_ratio_beside_an_out_of_sample_prediction(tmp_path):
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), PAIRED, WIDE])
    cells = pd.read_parquet(tmp_path / "x.parquet")
    assert list(cells["model"]) == ["SmolLM2-135M-Instruct"] * 2 + ["smollm2-wide-llama-3.1-8b"]
    row = cells.iloc[2]
    # output tok/s of the H100 lease of 2026-12-05 12:27, kpad8 / nopad8 per repeat
    ratios = [4782.010794 / 5256.850057, 4774.353392 / 5879.856396, 4888.064585 / 5466.670012]
    assert row["ratio"] == pytest.approx(math.prod(ratios) ** (1 / 3), rel=1e-6) == pytest.approx(0.8709, abs=1e-4)
    assert (row["gpu"], row["stand_in_for"], row["n"], row["favour"], row["k"]) == (
        "NVIDIA H100 80GB HBM3",
        "Llama-3.1-8B",
        3,
        0,
        8,
    )
    assert row["parameters"] == 8_305_021_440 and not row["fitted_on_this"]
    assert row["predicted"] == pytest.approx(0.974, abs=0.001)  # the model fitted on the 135M H200 runs
    # the 135M model's records predate model_parameters: its shape's count
    assert cells.iloc[0]["parameters"] == cells.iloc[1]["parameters"] > 1.3e8
    text = (tmp_path / "x.md").read_text()
    # medians of the 3 runs each: tokens per request-step kpad8 3.351, 3.389, 3.373; nopad8 3.366, 3.353, 3.363;
    # FULL share of nopad8's decode steps 1.30%, 1.22%, 1.28%
    assert (row["tokens_per_request_step_kpad"], row["tokens_per_request_step_nopad"]) == (
        pytest.approx(3.372543, abs=1e-6),
        pytest.approx(3.362852, abs=1e-6),
    )
    assert (row["full_share_kpad"], row["full_share_nopad"]) == (1.0, pytest.approx(0.012789, abs=1e-6))
    # per engine step, medians of the 3 runs each: forward + sampling (execute_model + sample_tokens - propose) kpad8
    # 16.4199, 16.3271, 16.1173 ms, nopad8 14.1480, 13.1814, 13.9351; the rest (engine_step - that) kpad8 3.7645,
    # 3.8147, 3.6222, nopad8 4.0696, 3.1417, 3.5871; positions (draft requests + draft tokens) / engine steps
    assert (row["forward_ms_kpad"], row["forward_ms_nopad"]) == (
        pytest.approx(16.3271, abs=1e-4),
        pytest.approx(13.9351, abs=1e-4),
    )
    assert (row["rest_ms_kpad"], row["rest_ms_nopad"]) == (pytest.approx(3.7645), pytest.approx(3.5871))
    assert (row["positions_per_step_kpad"], row["positions_per_step_nopad"]) == (
        pytest.approx((59409 + 475272) / 2046),
        pytest.approx((60075 + 213645) / 2077),
    )
    split = text.split("Where an engine step's time went")[1].split("Forecast, not a measurement")[0]
    # per added position within each repeat: (16.4199 - 14.1480) / (262.84 - 131.70) = 17.3 us, (16.3271 - 13.1814)
    # / (259.11 - 132.17) = 24.8, (16.1173 - 13.9351) / (261.33 - 131.79) = 16.8; kpad8 ran 419 of 2,016 steps
    # without a graph in its first repeat (steps_NONE), 20.8%
    assert (
        "| smollm2-wide-llama-3.1-8b | NVIDIA H100 80GB HBM3 | 32 | 512 | 8 | 3 | 261 / 132 | 288 / 512 | 21% / 4% "
        "| 16.33 / 13.94 | +17.3 (+16.8 to +24.8) | 3.76 / 3.59 |" in split
    )
    assert (row["added_us"], row["added_us_low"], row["added_us_high"], row["added_n"]) == (
        pytest.approx(1000 * (16.4199 - 14.1480) / ((58905 + 471240) / 2017 - (59324 + 211326) / 2055), abs=1e-3),
        pytest.approx(16.85, abs=0.01),
        pytest.approx(24.78, abs=0.01),
        3,
    )
    assert "NVIDIA H200" not in split  # the H200 sweep's records predate the step timers
    assert (
        "| smollm2-wide-llama-3.1-8b | Llama-3.1-8B | 8.31 B | NVIDIA H100 80GB HBM3 | 32 | 512 | sharegpt | sweep | 8 "
        "| 3 "
        "| 0.87x (0.75-1.01) | 0 of 3 | 100% / 1% | 3.37 / 3.36 | 0.97x | no |" in text
    )
    # the study's mix table: Llama-3.1-8B-Instruct bestKpad (K=12) 33,531, suf 27,851, van 8,850 tok/s
    assert "| Llama-3.1-8B-Instruct | mix | 12 | 1.20x | 3.79x |" in text
    assert "| Qwen2.5-7B-Instruct | mix | 6 | 0.96x | 1.80x |" in text  # 7,488 / 7,803 and / 4,169
    assert "| qwen2.5-32b | 27.93 B | 256 | sharegpt | sweep | 8 | 0.85x | Qwen2.5-32B | 0.83x |" in text
    # refitted at half, a third and a quarter of the datasheet FLOP/s, the pads cost more: padding pays less
    assert (
        "| smollm2-wide-llama-3.1-8b | NVIDIA H100 80GB HBM3 | 512 | sweep | 8 | 0.87x | 0.97x | 0.90x | 0.86x "
        "| 0.82x |" in text
    )
    assert "| SmolLM2-135M-Instruct | NVIDIA H200 | 256 |" not in text.split("refitted at each")[1]  # in the fit
    assert (tmp_path / "fig.png").stat().st_size > 10_000 and (tmp_path / "fig.svg").exists()


def test_the_same_model_on_two_gpus_is_two_cells_and_the_fit_stays_on_one(tmp_path):
    """The 1b lease measured the 135M model again, on an H100: not the same runs as the H200's, so two cells; the
    step model stays fitted on the H200's 24 runs, and the H100 cells are out of sample."""
    one_b = str(ROOT / "results/gpu/h100-widened-1b-crossover-runs.parquet")
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), PAIRED, one_b, WIDE])
    cells = pd.read_parquet(tmp_path / "x.parquet")
    h100 = "NVIDIA H100 80GB HBM3"
    assert list(zip(cells["model"], cells["gpu"], cells["phase"], cells["fitted_on_this"], strict=True)) == [
        ("SmolLM2-135M-Instruct", h100, "sweep", False),
        ("SmolLM2-135M-Instruct", "NVIDIA H200", "confirm", True),
        ("SmolLM2-135M-Instruct", "NVIDIA H200", "sweep", True),
        ("smollm2-wide-1b", h100, "sweep", False),
        ("smollm2-wide-llama-3.1-8b", h100, "sweep", False),
    ]
    # output tok/s of the H100 lease of 2026-12-05 19:16, kpad8 / nopad8 per repeat
    small = [10214.670468 / 6659.418993, 9602.789424 / 7761.044720, 12178.241422 / 7404.182962]
    one = [7445.671726 / 6799.979748, 11045.768847 / 10097.416564, 10193.015128 / 9839.363936]
    assert cells.iloc[0]["ratio"] == pytest.approx(math.prod(small) ** (1 / 3), rel=1e-6)
    one_b_ratio = cells.iloc[3]["ratio"]
    assert one_b_ratio == pytest.approx(math.prod(one) ** (1 / 3), rel=1e-6) == pytest.approx(1.074, abs=1e-3)
    assert (cells.iloc[3]["parameters"], cells.iloc[3]["stand_in_for"]) == (1_217_537_280, "Llama-3.2-1B")
    text = (tmp_path / "x.md").read_text()
    assert (
        "fitted on the 24 valid runs of SmolLM2-135M-Instruct on NVIDIA H200 (in the fit: yes); every other cell is out"
        in text
    )
    assert "the fitted model's widened shapes on NVIDIA H200, from its own runs" in text
    assert (  # the overheads every out-of-sample cell is charged, as roofline.fit gave them
        "Fitted: overhead per engine step FULL 2.03 ms, PIECEWISE 6.80 ms, NONE 0.00 ms; 25.9 us per verified "
        "position; FLOP efficiency 1 of the datasheet peak (config step_model.efficiency, not fitted)." in text
    )
    # nopad8's medians on the H100: the 1b stand-in 3.399225, its base in the same lease 3.354782; the 8B stand-in
    # 3.362852 in its own lease
    assert (
        "- smollm2-wide-1b (NVIDIA H100 80GB HBM3, concurrency 32, sharegpt, nopad8): 3.40 tokens per request-step "
        "against SmolLM2-135M-Instruct's 3.35 (+1.3%)\n" in text
    )
    assert (
        "- smollm2-wide-llama-3.1-8b (NVIDIA H100 80GB HBM3, concurrency 32, sharegpt, nopad8): 3.36 tokens per "
        "request-step against SmolLM2-135M-Instruct's 3.35 (+0.2%); the base's cell from another runs table (the "
        "same 512 measured prompts; other settings may differ)" in text
    )


def test_runs_without_a_kpad_and_nopad_pair_or_a_missing_file_are_named(tmp_path):
    auto = str(ROOT / "results/gpu/h100-widened-8b-auto-unpadded-runs.parquet")  # nopad8 and kpadautou12 only
    out = [str(tmp_path / "x"), str(tmp_path / "fig")]
    with pytest.raises(SystemExit) as e:
        crossover.main([*out, auto])
    assert str(e.value) == (
        f"crossover: no cell of {[auto]} has both kpad K and nopad K runs ok in one repeat "
        "(configurations: ['kpadautou12', 'nopad8']); smollm2-wide-llama-3.1-8b on NVIDIA H100 80GB HBM3, concurrency "
        "32, 512 measured prompts, sharegpt (sweep): nopad8 without the other method at the same K, left out: give "
        "runs tables where both ran ok"
    )
    one_b = pd.read_parquet(ROOT / "results/gpu/h100-widened-1b-crossover-runs.parquet")
    kpad12 = one_b["configuration"] == "kpad8"  # the same runs, as if padded to 12
    one_b.assign(
        configuration=one_b["configuration"].where(~kpad12, "kpad12"), k=one_b["k"].where(~kpad12, 12)
    ).to_parquet(tmp_path / "k12-runs.parquet")
    crossover.main([*out, str(tmp_path / "k12-runs.parquet"), WIDE])
    text = (tmp_path / "x.md").read_text()
    assert (
        "- smollm2-wide-1b on NVIDIA H100 80GB HBM3, concurrency 32, 512 measured prompts, sharegpt (sweep): kpad12, "
        "nopad8 without " in text
    )
    with pytest.raises(SystemExit, match=r"crossover: nowhere.parquet: no such file; give a runs table \(results/"):
        crossover.main([*out, "nowhere.parquet"])
    with pytest.raises(SystemExit, match="crossover: .*/missing does not exist: make the folder first"):
        crossover.main([str(tmp_path / "missing" / "x"), str(tmp_path / "fig"), WIDE])
    with pytest.raises(SystemExit) as e:
        crossover.main([*out, WIDE, "--published", "nowhere.csv"])
    assert str(e.value).startswith("crossover: nowhere.csv: cannot read the published table (")
    assert str(e.value).endswith("; give --published PATH")
    with pytest.raises(SystemExit, match="crossover: a runs table is given twice"):
        crossover.main([*out, WIDE, WIDE])
    again = str(Path(WIDE).parent / ".." / "gpu" / Path(WIDE).name)  # the same file by another path
    with pytest.raises(
        SystemExit,
        match=r"crossover: a runs table is given twice \(\[.*\]\): its runs would count twice; give each once$",
    ):
        crossover.main([*out, WIDE, again])
    shutil.copy(WIDE, tmp_path / "copy-runs.parquet")  # a copy: the same runs, by their start times
    with pytest.raises(SystemExit, match=r"crossover: \[.*\] hold one run twice \(smollm2-wide-llama-3.1-8b, "):
        crossover.main([*out, WIDE, str(tmp_path / "copy-runs.parquet")])
    cells = str(ROOT / "results/gpu/h200-paired-final-cells.parquet")
    with pytest.raises(SystemExit) as e:
        crossover.main([*out, cells])
    missing = "['repeat', 'status', 'output_tok_s', 'gpu_name', 'max_concurrency']"
    assert str(e.value) == (
        f"crossover: {cells}: not a runs table (lacks {missing}); give a runs table (results/runs.parquet or a "
        "*-runs.parquet)"
    )


def test_a_second_lease_with_the_same_repeat_numbers_is_refused_not_dropped(tmp_path):
    copy = tmp_path / "copy-runs.parquet"
    runs = pd.read_parquet(WIDE)  # another lease of the same cell a day later, repeats 1-3 again
    runs.assign(started_at=runs["started_at"].str.replace("2026-12-05", "2026-12-06")).to_parquet(copy)
    with pytest.raises(SystemExit) as e:
        crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), WIDE, str(copy)])
    assert (
        "hold the same run (smollm2-wide-llama-3.1-8b on NVIDIA H100 80GB HBM3, concurrency 32, 512 measured prompts, "
        "sharegpt (sweep), kpad8, repeat 1)" in str(e.value)
    )
    assert "pool one study's leases with tools/pool_repeats.py first" in str(e.value)


def test_the_same_cell_at_another_concurrency_is_its_own_cell(tmp_path):
    copy = tmp_path / "conc8-runs.parquet"
    runs = pd.read_parquet(WIDE)  # the same numbers, as if measured again at concurrency 8 a day later
    runs.assign(max_concurrency=8, started_at=runs["started_at"].str.replace("2026-12-05", "2026-12-06")).to_parquet(
        copy
    )
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), WIDE, str(copy)])
    cells = pd.read_parquet(tmp_path / "x.parquet")
    assert list(cells["concurrency"]) == [8, 32]
    assert cells["ratio"].iloc[0] == cells["ratio"].iloc[1] == pytest.approx(0.8709, abs=1e-4)
    assert cells["predicted"].iloc[0] == cells["predicted"].iloc[1]  # fitted on the 8B runs themselves here


def test_one_model_on_one_gpu_with_another_prompt_count_is_its_own_cell(tmp_path):
    """The 135M model on an H100 in two leases' settings: 512 measured prompts (the 1b lease) and 1,024 (the pooled
    auto-unpadded leases): two cells, each with its own pairs, drawn apart; the 1b stand-in's base is the cell of its
    own table."""
    one_b = str(ROOT / "results/gpu/h100-widened-1b-crossover-runs.parquet")
    pooled = str(ROOT / "results/gpu/h100-auto-unpadded-135m-pooled-runs.parquet")
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), one_b, pooled])
    cells = pd.read_parquet(tmp_path / "x.parquet")
    assert list(zip(cells["model"], cells["prompts"], cells["n"], strict=True)) == [
        ("SmolLM2-135M-Instruct", 512, 3),
        ("SmolLM2-135M-Instruct", 1024, 4),
        ("smollm2-wide-1b", 512, 3),
    ]
    # output tok/s kpad8 / nopad8 per repeat of the pooled table (leases of 2026-12-06 22:47 and 2026-12-07 02:41)
    pooled_ratios = [12001.553720 / 10236.200430, 13787.006289 / 11703.616846, 14071.306714 / 10195.636631]
    pooled_ratios.append(10789.170126 / 9519.509644)
    assert cells.iloc[1]["ratio"] == pytest.approx(math.prod(pooled_ratios) ** (1 / 4), rel=1e-6)
    assert cells.iloc[1]["ratio"] == pytest.approx(1.2124, abs=1e-4)
    assert cells.iloc[0]["ratio"] == pytest.approx(1.4615, abs=1e-4)  # as in the 1b lease alone
    text = (tmp_path / "x.md").read_text()
    assert (
        "| SmolLM2-135M-Instruct | - | 0.13 B | NVIDIA H100 80GB HBM3 | 32 | 1024 | sharegpt | sweep | 8 | 4 |" in text
    )
    assert "against SmolLM2-135M-Instruct's 3.35 (+1.3%)\n" in text  # the 512-prompt cell, same table: no caveat
    assert cells["predicted"].notna().all() and cells["fitted_on_this"].tolist() == [True, True, False]


def test_a_stand_in_is_set_beside_its_bases_cell_with_the_same_prompts_and_a_partial_count_is_refused(tmp_path):
    """The 1b stand-in's runs as if measured at 1,024 prompts: its base is the pooled 135M cell of 1,024 prompts
    (nopad8 median 3.43 tokens per request-step), not the 512-prompt one of its own table (3.35)."""
    runs = pd.read_parquet(ROOT / "results/gpu/h100-widened-1b-crossover-runs.parquet")
    relabelled = tmp_path / "1b-1024-runs.parquet"
    runs.assign(n_measured=runs["n_measured"].where(runs["model"] != "smollm2-wide-1b", 1024)).to_parquet(relabelled)
    pooled = str(ROOT / "results/gpu/h100-auto-unpadded-135m-pooled-runs.parquet")
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), str(relabelled), pooled])
    text = (tmp_path / "x.md").read_text()
    assert (
        "- smollm2-wide-1b (NVIDIA H100 80GB HBM3, concurrency 32, sharegpt, nopad8): 3.40 tokens per request-step "
        "against SmolLM2-135M-Instruct's 3.43 (-0.8%); the base's cell from another runs table (the same 1024 "
        "measured prompts; other settings may differ)" in text
    )
    uncounted = runs.drop(columns="n_measured")  # records older than the count, stand-in and base in two tables
    wide, base = tmp_path / "wide-runs.parquet", tmp_path / "base-runs.parquet"
    uncounted[uncounted["model"] == "smollm2-wide-1b"].to_parquet(wide)
    uncounted[uncounted["model"] != "smollm2-wide-1b"].to_parquet(base)
    crossover.main([str(tmp_path / "y"), str(tmp_path / "fig"), str(wide), str(base)])
    assert (
        "against SmolLM2-135M-Instruct's 3.35 (+1.3%); the base's cell from another runs table (measured prompts "
        "recorded in neither; other settings may differ)" in (tmp_path / "y.md").read_text()
    )
    partial = tmp_path / "partial-runs.parquet"
    runs.assign(n_measured=runs["n_measured"].where(runs.index % 2 == 0)).to_parquet(partial)
    with pytest.raises(SystemExit) as e:
        crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), str(partial)])
    assert str(e.value) == (
        f"crossover: {partial}: 6 of 12 runs have no n_measured (measured prompts), the others have: their cells "
        "would split: remake the table from the run records (tools/aggregate_records.py; a pooled table: then pool "
        "its sources again, tools/pool_repeats.py)"
    )


def test_a_run_given_twice_or_without_its_concurrency_is_refused(tmp_path):
    runs = pd.read_parquet(WIDE)
    renumbered, no_load = tmp_path / "renumbered-runs.parquet", tmp_path / "no-load-runs.parquet"
    runs.assign(repeat=runs["repeat"] + 3).to_parquet(renumbered)  # the same lease again as repeats 4-6
    runs.assign(max_concurrency=float("nan")).to_parquet(no_load)
    out = [str(tmp_path / "x"), str(tmp_path / "fig")]
    with pytest.raises(SystemExit) as e:
        crossover.main([*out, WIDE, str(renumbered)])
    first = runs.sort_index().iloc[0]
    assert str(e.value) == (
        f"crossover: {sorted([WIDE, str(renumbered)])} hold one run twice (smollm2-wide-llama-3.1-8b, NVIDIA H100 "
        f"80GB HBM3, started {first['started_at']}): give each run once (a pooled table, or its sources, not both)"
    )
    with pytest.raises(SystemExit) as e:
        crossover.main([*out, str(no_load)])
    assert str(e.value) == (
        f"crossover: {no_load}: 6 of 6 runs on a GPU have no whole max_concurrency: remake the table from the run "
        "records (tools/aggregate_records.py; a pooled table: then pool its sources again, tools/pool_repeats.py)"
    )
    bad = {
        "phase": (runs.assign(phase=["sweep", "SWEEP", "", "sweep", "sweep", "sweep"]), "2 runs have a phase other"),
        "repeat": (
            runs.assign(repeat=[f"r{r}" for r in runs["repeat"]]),
            "column repeat holds no number at row 0 \\('r1'\\)",
        ),
        "rate": (
            runs.assign(output_tok_s=runs["output_tok_s"].where(runs.index != 0, float("inf"))),
            "1 runs are ok without a positive",
        ),
        "load": (runs.assign(max_concurrency=runs["max_concurrency"] + 0.5), "6 of 6 runs on a GPU have no whole"),
        "gpu": (
            runs.assign(gpu_name=runs["gpu_name"].where(runs.index != 2)),
            "1 of 6 runs ran on cuda but name no GPU \\(gpu_name\\)",
        ),
    }
    for name, (frame, says) in bad.items():
        frame.to_parquet(tmp_path / f"{name}-runs.parquet")
        with pytest.raises(SystemExit, match=f"crossover: .*{name}-runs.parquet: {says}"):
            crossover.main([*out, str(tmp_path / f"{name}-runs.parquet")])
    as_text = tmp_path / "text-runs.parquet"  # numbers stored as text are read as numbers
    numbers = [c for c in runs if runs[c].dtype.kind in "if"]  # a missing one as "nan"
    assert {"max_concurrency", "repeat", "duration_s", "output_tokens", "steps_FULL"} <= set(numbers)
    runs.assign(**{c: runs[c].astype(str) for c in numbers}).to_parquet(as_text)
    crossover.main([str(tmp_path / "t"), str(tmp_path / "fig"), str(as_text)])
    assert pd.read_parquet(tmp_path / "t.parquet")["ratio"].iloc[0] == pytest.approx(0.8709, abs=1e-4)
    with pytest.raises(SystemExit, match=r"crossover: .*empty-runs.parquet: holds no run; give a runs table"):
        runs.iloc[:0].to_parquet(tmp_path / "empty-runs.parquet")
        crossover.main([*out, str(tmp_path / "empty-runs.parquet")])


def test_a_cell_whose_kpad_runs_all_failed_is_listed_not_drawn(tmp_path, capsys):
    one_b = pd.read_parquet(ROOT / "results/gpu/h100-widened-1b-crossover-runs.parquet")
    failed = tmp_path / "failed-runs.parquet"
    kpad = one_b["configuration"] == "kpad8"
    one_b.assign(status=one_b["status"].where(~kpad, "boot_failed")).to_parquet(failed)
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), str(failed), WIDE])
    assert list(pd.read_parquet(tmp_path / "x.parquet")["model"]) == ["smollm2-wide-llama-3.1-8b"]
    line = (
        "SmolLM2-135M-Instruct on NVIDIA H100 80GB HBM3, concurrency 32, 512 measured prompts, sharegpt (sweep): kpad8 "
        "/ nopad8 has no repeat with both ok (runs: boot_failed 3, ok 3), left out"
    )
    assert f"- {line}" in (tmp_path / "x.md").read_text() and f"crossover: {line}" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"has both kpad K and nopad K runs ok in one repeat .*; SmolLM2-135M"):
        crossover.main([str(tmp_path / "y"), str(tmp_path / "fig"), str(failed)])


def test_cpu_runs_are_left_out_and_said_so(tmp_path, capsys):
    cpu = str(ROOT / "results/cpu/embedded-runs.parquet")
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), WIDE, cpu])
    n = len(pd.read_parquet(cpu))
    line = f"{cpu}: {n} runs on no GPU (CPU: no cudagraphs), left out"
    assert f"crossover: {line}" in capsys.readouterr().err
    assert f"- {line}" in (tmp_path / "x.md").read_text()
    assert list(pd.read_parquet(tmp_path / "x.parquet")["model"]) == ["smollm2-wide-llama-3.1-8b"]


def test_a_gpu_without_datasheet_rates_is_measured_not_predicted_and_said_so(tmp_path):
    l40s = tmp_path / "l40s-runs.parquet"
    pd.read_parquet(WIDE).assign(gpu_name="NVIDIA L40S").to_parquet(l40s)
    crossover.main([str(tmp_path / "x"), str(tmp_path / "fig"), str(l40s)])
    cells = pd.read_parquet(tmp_path / "x.parquet")
    assert cells["ratio"].iloc[0] == pytest.approx(0.8709, abs=1e-4) and cells["predicted"].isna().all()
    text = (tmp_path / "x.md").read_text()
    assert "No prediction (-) on ['NVIDIA L40S']: no datasheet rates for it in kpadstudy.roofline.GPUS." in text


def test_a_forecast_shape_is_named_only_where_no_measured_cell_is_near_it():
    # measured cells at 0.13 B, 1.22 B and 8.31 B; forecast shapes at 1.22 B (same size), 3.14 B (2.6x from both
    # neighbours), 8.31 B and 27.93 B (3.4x the 8B cell): named are 3.14 B and 27.93 B
    cells = pd.DataFrame({"parameters": [0.13e9, 1.22e9, 8.31e9]})
    shapes = pd.Series([1.22e9, 3.14e9, 8.31e9, 27.93e9])
    assert crossover._measured_near(shapes, cells).tolist() == [True, False, True, False]


def test_step_split_takes_the_proposer_out_of_the_forward_pass_and_leaves_untimed_runs_nan():
    runs = pd.DataFrame(
        {
            "engine_steps": [100, 50],
            "kpad_draft_requests": [3000, 1600],
            "spec_draft_tokens": [24000, 3200],
            "step_time_ms": [
                '{"engine_step": 10.0, "execute_model": 3.0, "sample_tokens": 5.5, "propose": 2.0}',
                None,
            ],
            "cudagraph_capture_sizes": ["1,2,4,8,16,24,32,288,296,512,9", None],
        }
    )
    split = crossover.step_split(runs)
    assert list(split["positions_per_step"]) == [270.0, 96.0]  # (3000 + 24000) / 100, (1600 + 3200) / 50
    assert split["forward_ms"].iloc[0] == 6.5 and split["rest_ms"].iloc[0] == 3.5  # 3 + 5.5 - 2; 10 - 6.5
    assert split[["forward_ms", "rest_ms"]].iloc[1].isna().all()
    assert split["capture_max"].iloc[0] == 512 and np.isnan(split["capture_max"].iloc[1])  # the largest, not the last
