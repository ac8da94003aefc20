"""The step-cost model (kpadstudy.roofline): hand-computed terms, an exact fit, the crossover, its refusals."""

from pathlib import Path

import pandas as pd
import pytest

from kpadstudy import roofline
from kpadstudy.widen import Shape, size_facts

ROOT = Path(__file__).resolve().parent.parent
SIZES = {
    "model_weight_bytes": 4.8e9,  # 1 ms a step at the H200's 4.8 TB/s
    "model_kv_bytes_per_token": 1000,
    "model_flops_per_token": 1e9,
    "model_attention_flops_per_context_token": 1000,
}


OVERHEADS = {
    "efficiency": 1.0,
    "overhead_FULL_ms": 2.0,
    "overhead_PIECEWISE_ms": 7.0,
    "overhead_NONE_ms": 1.0,
    "overhead_position_us": 25.0,
}
"""Host overheads the synthetic runs are made with, for the fit to give back."""


def run(cfg="kpad8", full=100, piecewise=0, none=0, duration=1.0, draft=3000, model="M", gpu="NVIDIA H200", **kw):
    method = cfg.rstrip("0123456789")
    kw = {**SIZES, **kw}
    return {
        "model": model,
        "corpus": "sharegpt",
        "configuration": cfg,
        "method": method,
        "k": int(cfg[len(method) :] or 0),
        "repeat": 1,
        "status": "ok",
        "gpu_name": gpu,
        "duration_s": duration,
        "completed": 10,
        "input_tokens": 1000,
        "output_tokens": 2000,
        "spec_accepted_tokens": 1000,
        "spec_draft_tokens": draft,
        "steps_FULL": full,
        "steps_PIECEWISE": piecewise,
        "steps_NONE": none,
        **kw,
    }


def test_terms_by_hand():
    """context = 1000 / 10 + 2000 / (2 x 10) = 200 tokens; positions = 1000 + 2000 - 1000 + 3000 = 5000;
    memory = (100 x 4.8e9 + 1000 request-steps x 200 x 1000) / 4.8e12 = 0.1000417 s;
    compute = 5000 x (1e9 + 200 x 1000) / 989.5e12 = 0.0050541 s."""
    t = roofline.terms(pd.DataFrame([run()]))
    r = t.iloc[0]
    assert (r["context"], r["positions"], r["tokens_per_step"]) == (200, 5000, 50)
    assert r["memory_s"] == pytest.approx(4.802e11 / 4.8e12, rel=1e-12)
    assert r["compute_s"] == pytest.approx(5.001e12 / 989.5e12, rel=1e-12)


def test_runs_the_model_cannot_read_are_left_out():
    rows = [
        run(),
        run(status="invalid"),
        run(full=0),  # no step counts (van on vLLM 0.26's V2 runner)
        run(gpu="cpu"),  # no datasheet rates
        run(model_weight_bytes=None),  # no sizes
    ]
    assert len(roofline.terms(pd.DataFrame(rows))) == 1


def _synthetic(params, **kw):
    """Runs whose durations are the model's under ``params``: the fit must give ``params`` back."""
    rows = [
        run("kpad8", full=100, none=10, draft=3000, **kw),
        run("nopad8", full=0, piecewise=120, none=12, draft=1200, **kw),
        run("kpad4", full=150, none=5, draft=2000, **kw),
        run("nopad4", full=3, piecewise=160, none=30, draft=900, **kw),
    ]
    t = roofline.terms(pd.DataFrame(rows))
    durations = roofline.predict(t, params)
    return pd.DataFrame([{**r, "duration_s": d} for r, d in zip(rows, durations, strict=True)])


def test_the_fit_recovers_the_overheads_it_was_made_with():
    params = OVERHEADS
    fitted = roofline.fit(roofline.terms(_synthetic(params)))
    for key, value in params.items():
        assert fitted[key] == pytest.approx(value, rel=1e-9), key
    assert fitted["runs"] == 4


def test_the_crossover_by_hand():
    """kpad8 and nopad8 at 2000 output tokens each: measured kpad8 / nopad8 = (2000 / 1.0) / (2000 / 1.25) = 1.25;
    predicted, with only 1 ms per FULL step and 2 ms per PIECEWISE step (no bytes, no FLOPs, no per-position
    cost): kpad8 100 steps = 0.1 s, nopad8 120 PIECEWISE steps = 0.24 s, so 2.4."""
    rows = [
        run("kpad8", full=100, duration=1.0, **dict.fromkeys(SIZES, 0)),
        run("nopad8", full=0, piecewise=120, duration=1.25, **dict.fromkeys(SIZES, 0)),
    ]
    params = {
        "efficiency": 1.0,
        "overhead_FULL_ms": 1.0,
        "overhead_PIECEWISE_ms": 2.0,
        "overhead_NONE_ms": 0.0,
        "overhead_position_us": 0.0,
    }
    table = roofline.crossover(roofline.terms(pd.DataFrame(rows)), params)
    r = table.iloc[0]
    assert (r["model"], r["corpus"], r["phase"], r["k"], r["n_kpad"], r["n_nopad"]) == (
        "M",
        "sharegpt",
        "sweep",
        8,
        1,
        1,
    )
    assert (r["measured"], r["predicted"]) == (pytest.approx(1.25), pytest.approx(2.4))
    assert (r["kpad_step_ms"], r["nopad_step_ms"]) == (pytest.approx(10.0), pytest.approx(1250 / 120))


def test_fitted_on_the_smallest_model_and_predicted_for_a_larger_one():
    """Overheads from a model with no bytes and FLOPs, then a model of the 8B stand-in's sizes: its kpad8 steps
    add 310 positions' FLOPs, its nopad8 steps fewer; padding's predicted gain shrinks."""
    params = OVERHEADS
    small = _synthetic(params, model="small", **dict.fromkeys(SIZES, 0))
    wide = size_facts(Shape(4608, 64, 16, 64, 14336, 32, 49152))
    big = _synthetic(params, model="big", **{k: wide[k] for k in SIZES})
    table, fitted, ahead = roofline.step_model(pd.concat([small, big], ignore_index=True))
    assert ahead is None  # "small" is no base the named shapes are made for
    assert fitted["fit_on"] == "small"
    assert fitted["overhead_PIECEWISE_ms"] == pytest.approx(7.0, rel=1e-6)
    by = table.set_index(["model", "k"])
    assert list(zip(table["model"], table["k"], table["fitted_on_this"], strict=True)) == [
        ("big", 4, False),
        ("big", 8, False),
        ("small", 4, True),
        ("small", 8, True),
    ]
    assert by.loc[("small", 8), "predicted"] == pytest.approx(by.loc[("small", 8), "measured"], rel=1e-9)
    assert by.loc[("big", 8), "predicted"] < by.loc[("small", 8), "predicted"]


def test_the_overheads_are_fitted_on_one_gpu_the_one_with_most_runs_of_the_model():
    """The same model on two hosts: an H200 with the overheads above (4 runs) and an H100 with every overhead
    doubled (2 runs). The fit takes the H200's runs alone and gives its overheads back; the H100 cell is its own
    row, out of sample."""
    zero = dict.fromkeys(SIZES, 0)
    h200 = _synthetic(OVERHEADS, **zero)
    doubled = {k: v * (1 if k == "efficiency" else 2) for k, v in OVERHEADS.items()}
    h100 = _synthetic(doubled, gpu="NVIDIA H100 80GB HBM3", **zero).iloc[:2]  # kpad8 and nopad8 only
    table, fitted, _ = roofline.step_model(pd.concat([h100, h200], ignore_index=True))
    assert (fitted["fit_on"], fitted["fit_on_gpu"], fitted["runs"]) == ("M", "NVIDIA H200", 4)
    assert fitted["overhead_PIECEWISE_ms"] == pytest.approx(7.0, rel=1e-6)
    rows = list(zip(table["gpu_name"], table["k"], table["fitted_on_this"], strict=True))
    assert rows == [("NVIDIA H100 80GB HBM3", 8, False), ("NVIDIA H200", 4, True), ("NVIDIA H200", 8, True)]
    one_each = roofline.terms(pd.concat([h100.iloc[:1], h200.iloc[:1]], ignore_index=True))
    assert roofline.fit_gpu(one_each, "M") == "NVIDIA H100 80GB HBM3"  # a tie: the first by name


def test_cpu_runs_give_no_fit_and_say_why():
    runs = pd.DataFrame([run(gpu=None)])
    assert roofline.step_model(runs) == (None, None, None)
    md = roofline.to_markdown(None, None, runs)
    assert md.endswith(roofline.NO_FIT + "\n")


def test_failed_runs_or_a_gpu_without_datasheet_rates_give_no_fit():
    assert roofline.step_model(pd.DataFrame([run(status="boot_failed")])) == (None, None, None)
    runs = pd.DataFrame([run(gpu="NVIDIA L40S"), run("nopad8", gpu="NVIDIA L40S")])
    assert roofline.step_model(runs) == (None, None, None)


def test_fit_on_a_model_without_runs_is_refused():
    with pytest.raises(ValueError) as err:
        roofline.step_model(pd.DataFrame([run()]), fit_on="Llama-3.1-8B")
    assert str(err.value) == (
        "config step_model.fit_on is 'Llama-3.1-8B', which has no valid GPU run with step counts; the runs have ['M']"
    )


def test_the_135m_model_on_the_h200():
    """The committed H200 runs of SmolLM2-135M on sharegpt (results/gpu/h200-paired-runs.parquet, vLLM 0.26.0,
    6 kpad8 and 6 nopad8 runs): overheads FULL 2.03 ms, PIECEWISE 6.80 ms, NONE 0 per step, 25.9 us per verified
    position; kpad8 / nopad8 by medians, in sample: sweep measured 1.14x, predicted 1.13x; confirmation measured
    0.96x, predicted 1.14x."""
    runs = pd.read_parquet(ROOT / "results" / "gpu" / "h200-paired-runs.parquet")
    table, params, ahead = roofline.step_model(runs)
    assert params["fit_on"] == "SmolLM2-135M-Instruct" and params["runs"] == 24
    assert round(params["overhead_FULL_ms"], 2) == 2.03 and round(params["overhead_PIECEWISE_ms"], 2) == 6.80
    assert round(params["overhead_NONE_ms"], 2) == 0.0 and round(params["overhead_position_us"], 1) == 25.9
    got = [(r["phase"], round(r["measured"], 2), round(r["predicted"], 2), r["n_kpad"]) for _, r in table.iterrows()]
    assert got == [("confirm", 0.96, 1.14, 3), ("sweep", 1.14, 1.13, 3)]
    md = roofline.to_markdown(table, params, runs)
    assert "| SmolLM2-135M-Instruct | NVIDIA H200 | sharegpt | sweep | 8 | 3 / 3 | 1.14x | 1.13x | 1.00 |" in md
    assert "NVIDIA H200 datasheet (SXM): HBM3e 4.8 TB/s" in md
    # the same runs at the widened shapes' bytes and FLOPs (at the datasheet peak): padding's gain shrinks with size
    sweep = ahead[ahead["phase"] == "sweep"]
    assert [(r["shape"], round(r["predicted"], 2)) for _, r in sweep.iterrows()] == [
        ("1b", 1.10),
        ("3b", 1.04),
        ("llama-3.1-8b", 0.96),
        ("qwen2.5-32b", 0.85),
    ]
    # at the real models' sizes (Llama-3.1-8B: 8.03 B, vocabulary 128,256, heads of 128) the model moves each by
    # about 1%: the stand-in's bias as it sizes it
    assert [(r["like"], round(r["predicted_like"], 3)) for _, r in sweep.iterrows()] == [
        ("Llama-3.2-1B", 1.093),
        ("Llama-3.2-3B", 1.037),
        ("Llama-3.1-8B", 0.963),
        ("Qwen2.5-32B", 0.835),
    ]
    md = roofline.to_markdown(table, params, runs, ahead)
    assert "| llama-3.1-8b | sharegpt | sweep | 8 | 0.96x | Llama-3.1-8B | 0.96x |" in md


def test_no_forecast_from_the_135m_model_without_a_nopad_run():
    """The H200 runs of results/gpu/h200-auto-runs.parquet (van, kpad8, kpad12, kpadauto12: no nopad K): no cell
    to fit a ratio on, so no forecast, and the table says so (this raised KeyError before)."""
    runs = pd.read_parquet(ROOT / "results" / "gpu" / "h200-auto-runs.parquet")
    table, params, ahead = roofline.step_model(runs)
    assert params["fit_on"] == "SmolLM2-135M-Instruct" and table.empty and ahead is None
    assert "No cell has both kpad and nopad runs at one K." in roofline.to_markdown(table, params, runs, ahead)


def test_cells_of_one_model_that_measured_different_prompt_counts_are_two_rows_that_say_so():
    """The 135M model on an H100 at 512 measured prompts (the 1b lease) and 1,024 (the pooled auto-unpadded leases):
    two cells, and step_model.md shows the prompts where its cells differ in them (one count: no such column)."""
    one_b = pd.read_parquet(ROOT / "results/gpu/h100-widened-1b-crossover-runs.parquet")
    pooled = pd.read_parquet(ROOT / "results/gpu/h100-auto-unpadded-135m-pooled-runs.parquet")
    small = one_b[one_b["model"] == "SmolLM2-135M-Instruct"]
    table, params, ahead = roofline.step_model(pd.concat([small, pooled], ignore_index=True))
    assert list(zip(table["n_measured"], table["n_kpad"], table["n_nopad"], strict=True)) == [(512, 3, 3), (1024, 4, 4)]
    assert params["runs"] == 6 + 19  # every valid run of the model on the GPU, van, suf and kpadautou12 included
    text = roofline.to_markdown(table, params, pooled, ahead)
    assert "| model | GPU | prompts | corpus | phase | K |" in text
    assert "| SmolLM2-135M-Instruct | NVIDIA H100 80GB HBM3 | 1024 | sharegpt | sweep | 8 | 4 / 4 |" in text
    alone, params, ahead = roofline.step_model(pooled)
    assert "| model | GPU | corpus | phase | K |" in roofline.to_markdown(alone, params, pooled, ahead)
