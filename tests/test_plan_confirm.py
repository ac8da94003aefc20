"""The plan of a study (no network) and the confirmation of the best K."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kpadstudy import confirm, plan, runs

ROOT = Path(__file__).resolve().parent.parent


def test_plan_of_the_shipped_config_without_network(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "plan",
            "--cores",
            "1",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "results" / "plan.md").read_text()
    assert text in p.stdout  # printed too
    assert "| Qwen2.5-72B-Instruct | 4 | 210 | 126 | unknown | unknown (Hub not reachable, no size_gb) |" in text
    assert "| DeepSeek-R1 | 8 | 210 | 126 | unknown |" in text
    # 11 models x 7 corpora x 10 configurations (van, suf, kpad and nopad at 4 Ks) x 3 repeats; confirmation:
    # 77 cells x (van, suf, best K, second-best K, nopad at the best K, best nopad K) x 3
    assert "- server boots: 3,696 (2,310 sweep runs + 1,386 confirmation runs)" in text
    # 336 runs per model x 558 s x 39 GPUs in all (sum of tensor parallel sizes) = 2,031.1 GPU-hours, / 8 GPUs
    assert "- GPU time: 2,031.1 GPU-hours" in text and "- wall time: about 253.9 h" in text
    assert (
        "- one run = boot 300 s + 1032 prompts (32 warm-up + 1000 measured) / 4 requests/s = 558 s "
        "(config plan.boot_s, plan.requests_per_s)" in text
    )
    assert (
        "- suf: K = 32, but suffix decoding drafts at most 12 tokens at suffix_decoding_max_tree_depth 24 and "
        "suffix_decoding_max_spec_factor 1, so its drafts are those of K = 12" in text
    )
    assert (
        "- disk for the models: unknown: 11 of 11 model sizes unknown (set models.<name>.size_gb or reach the Hub); "
        "the known ones take 0.0 GB" in text
    )


def test_plan_sizes_from_config_hub_and_cpu_runs():
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg["plan"] = {"boot_s": 40, "requests_per_s": 2, "gpus": 8}
    cfg["models"] = {
        "a": {"source": "hf", "repo": "x/a", "tensor_parallel_size": 1, "size_gb": 15.5},
        "b": {"source": "hf", "repo": "x/b", "tensor_parallel_size": 2},
    }
    cfg["device"] = "cpu"
    pl = plan.plan(cfg, ["sharegpt", "humaneval", "mix"], hub=lambda repo, rev: {"x/b": 65.0}.get(repo))
    assert [(m["size_gb"], m["size_from"], m["gpus_per_run"], m["runs"]) for m in pl["models"]] == [
        (15.5, "config size_gb", 0, 12),
        (65.0, "Hub metadata", 0, 12),
    ]
    assert (pl["disk_gb"], pl["boots"], pl["run_s"], pl["wall_s"]) == (
        80.5,
        24,
        48.0,
        24 * 48.0,
    )  # 40 s + 16 prompts / 2 per s


CELLS = pd.DataFrame(
    [
        {"model": "m", "corpus": "c", "configuration": "van", "method": "van", "k": 0, "output_tok_s_median": 100.0},
        {"model": "m", "corpus": "c", "configuration": "suf", "method": "suf", "k": 32, "output_tok_s_median": 150.0},
        {"model": "m", "corpus": "c", "configuration": "kpad4", "method": "kpad", "k": 4, "output_tok_s_median": 170.0},
        {"model": "m", "corpus": "c", "configuration": "kpad8", "method": "kpad", "k": 8, "output_tok_s_median": 180.0},
        {"model": "m", "corpus": "d", "configuration": "van", "method": "van", "k": 0, "output_tok_s_median": 90.0},
        {
            "model": "m",
            "corpus": "d",
            "configuration": "kpad4",
            "method": "kpad",
            "k": 4,
            "output_tok_s_median": float("nan"),
        },
    ]
)


def test_best_k_is_picked_per_cell_and_its_reruns_interleaved():
    best = confirm.pick_best_k(CELLS, 2)
    assert best == {
        "repeats": 2,
        "cells": [
            {
                "model": "m",
                "corpus": "c",
                "best_k": 8,
                "best": "kpad8",
                "sweep_best_tok_s": 180.0,
                "second_k": 4,
                "second": "kpad4",
                "best_nopad_k": None,
                "best_nopad": None,
            }
        ],
    }  # d: no valid kpad
    study = runs.configurations(
        {
            "server": {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85},
            "configurations": [
                {"method": "van"},
                {"method": "suf", "k": 32},
                {"method": "kpad", "k": [4, 8]},
                {"method": "nopad", "k": [8]},
                {"name": "ngram7", "method": "ngram", "k": 7},
            ],
        }
    )
    # van, suf, ngram7 (outside the sweep), the best K, the second-best K, nopad at the best K; listed order
    block = ["van", "suf", "ngram7", "kpad8", "kpad4", "nopad8"]
    assert confirm.confirm_order(best, study) == {("m", "c"): [(n, r) for r in (1, 2) for n in block]}
    # shuffled per repeat with the seed: the same set in each repeat, a recorded, repeatable order
    shuffled = confirm.confirm_order(best, study, seed=0)[("m", "c")]
    # random.Random("confirm/0/1").shuffle and random.Random("confirm/0/2").shuffle of the listed block
    assert [n for n, r in shuffled if r == 1] == ["kpad4", "nopad8", "kpad8", "suf", "van", "ngram7"]
    assert [n for n, r in shuffled if r == 2] == ["kpad8", "kpad4", "suf", "van", "ngram7", "nopad8"]
    assert confirm.confirm_order(best, [c for c in study if c.method == "kpad"]) == {
        ("m", "c"): [("kpad8", 1), ("kpad4", 1), ("kpad8", 2), ("kpad4", 2)]
    }
    one_k = {"repeats": 1, "cells": [{"model": "m", "corpus": "c", "best_k": 4, "second_k": None}]}
    assert confirm.confirm_order(one_k, study) == {("m", "c"): [("van", 1), ("suf", 1), ("ngram7", 1), ("kpad4", 1)]}


def test_the_confirmation_reruns_the_best_nopad_k_beside_the_best_kpad_k():
    """nopad4 (175) is the sweep's best unpadded K, kpad8 (180) its best padded one: the confirmation reruns both,
    and nopad8 too (padding's own comparison at the best K)."""
    nopad = [
        {"model": "m", "corpus": "c", "configuration": n, "method": "nopad", "k": k, "output_tok_s_median": tok}
        for n, k, tok in [("nopad4", 4, 175.0), ("nopad8", 8, 160.0), ("nopad8full", 8, 175.0)]
    ]
    best = confirm.pick_best_k(pd.concat([CELLS, pd.DataFrame(nopad)]), 1)["cells"][0]
    assert (best["best"], best["second"], best["best_nopad"], best["best_nopad_k"]) == ("kpad8", "kpad4", "nopad4", 4)
    study = runs.configurations(
        {
            "server": {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85},
            "configurations": [
                {"method": "van"},
                {"method": "kpad", "k": [4, 8]},
                {"method": "nopad", "k": [4, 8]},
                {"name": "nopad8full", "method": "nopad", "k": 8, "cudagraph_mode": "FULL"},
            ],
        }
    )
    order = confirm.confirm_order({"repeats": 1, "cells": [best]}, study)
    assert order == {("m", "c"): [("van", 1), ("kpad8", 1), ("kpad4", 1), ("nopad8", 1), ("nopad4", 1)]}


def test_confirmed_numbers_are_preferred():
    from kpadstudy import tables

    confirmed = pd.DataFrame(
        [
            {
                "model": "m",
                "corpus": "c",
                "configuration": "van",
                "method": "van",
                "k": 0,
                "output_tok_s_median": 98.0,
                "phase": "confirm",
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "suf",
                "method": "suf",
                "k": 32,
                "output_tok_s_median": float("nan"),
                "phase": "confirm",
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "kpad8",
                "method": "bestkpad",
                "k": 8,
                "output_tok_s_median": 160.0,
                "phase": "confirm",
            },
        ]
    )
    merged = confirm.prefer_confirmed(CELLS, confirmed)
    c = merged[merged["corpus"] == "c"]
    rows = sorted(zip(c["phase"], c["configuration"], c["method"], c["output_tok_s_median"].fillna(-1), strict=True))
    assert rows == [  # both phases kept, nothing replaced
        ("confirm", "kpad8", "bestkpad", 160.0),
        ("confirm", "suf", "suf", -1),
        ("confirm", "van", "van", 98.0),
        ("sweep", "kpad4", "kpad", 170.0),
        ("sweep", "kpad8", "kpad", 180.0),
        ("sweep", "suf", "suf", 150.0),
        ("sweep", "van", "van", 100.0),
    ]
    # comparisons of the confirmed cell read the confirmation only: its suf failed, so no suf number, never
    # the sweep's 150; the best K is still the sweep's pick (180 at K8), its number the confirmation's 160
    compared = tables.comparison_rows(merged)
    assert set(compared[compared["corpus"] == "c"]["phase"]) == {"confirm"}
    assert set(compared[compared["corpus"] == "d"]["phase"]) == {"sweep"}
    best = tables.best_kpad(merged).set_index("corpus").loc["c"]
    assert (
        best["phase"],
        best["best_k"],
        best["best_kpad_tok_s"],
        best["best_from"],
        best["sweep_best_tok_s"],
        best["van_tok_s"],
    ) == ("confirm", 8, 160.0, "separate measurement", 180.0, 98.0)
    assert pd.isna(best["suf_tok_s"]) and pd.isna(best["bestkpad_over_suf"])
    runs = pd.DataFrame(
        [
            {
                "model": "m",
                "corpus": "c",
                "configuration": "kpad8",
                "method": "kpad",
                "k": 8,
                "pad": True,
                "device": "cpu",
                "repeat": 1,
                "status": "ok",
                "output_tok_s": 160.0,
            }
        ]
    )
    t = confirm.confirmed_cells(runs)
    assert (t.loc[0, "method"], t.loc[0, "phase"], t.loc[0, "output_tok_s_median"]) == ("bestkpad", "confirm", 160.0)
    # with best_k.json only the best K's row is the bestkpad measurement; the second-best K stays kpad
    two = pd.concat([runs, runs.assign(configuration="kpad4", k=4, output_tok_s=150.0)], ignore_index=True)
    t = confirm.confirmed_cells(two, {"repeats": 1, "cells": [{"model": "m", "corpus": "c", "best_k": 8}]})
    assert sorted(zip(t["configuration"], t["method"], strict=True)) == [("kpad4", "kpad"), ("kpad8", "bestkpad")]


def test_a_confirmation_run_knows_its_place_in_its_repeat(tmp_path):
    import json

    import pytest

    best = tmp_path / "best_k.json"
    best.write_text(json.dumps({"repeats": 2, "cells": [{"model": "m", "corpus": "c", "best_k": 8, "second_k": 4}]}))
    cfg = {
        "server": {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85},
        "configurations": [{"method": "van"}, {"method": "suf", "k": 32}, {"method": "kpad", "k": [4, 8]}],
        "order_seed": 0,
    }
    # repeat 2: [van, suf, kpad8, kpad4] shuffled by random.Random("confirm/0/2") -> suf, van, kpad4, kpad8
    places = {n: confirm.confirm_position(str(best), cfg, "m", "c", n, 2) for n in ["van", "suf", "kpad8", "kpad4"]}
    assert places == {"suf": 1, "van": 2, "kpad4": 3, "kpad8": 4}
    with pytest.raises(ValueError, match=r"best_k.json: m/c kpad12 r1 is not in the confirmation's plan"):
        confirm.confirm_position(str(best), cfg, "m", "c", "kpad12", 1)


def test_two_kpad_entries_at_one_k_are_picked_by_name():
    # a named variant at K=8 (PIECEWISE) wins the sweep: it is the one rerun, next to the plain kpad8 (second)
    cells = pd.DataFrame(
        [
            {
                "model": "m",
                "corpus": "c",
                "configuration": "van",
                "method": "van",
                "k": 0,
                "output_tok_s_median": 100.0,
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "kpad4",
                "method": "kpad",
                "k": 4,
                "output_tok_s_median": 150.0,
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "kpad8",
                "method": "kpad",
                "k": 8,
                "output_tok_s_median": 170.0,
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "kpad8pw",
                "method": "kpad",
                "k": 8,
                "output_tok_s_median": 180.0,
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "kpadx",
                "method": "kpad",
                "k": float("nan"),
                "output_tok_s_median": 999.0,
            },
        ]
    )
    best = confirm.pick_best_k(cells, 1)
    pick = best["cells"][0]
    assert (pick["best"], pick["best_k"], pick["second"], pick["second_k"]) == (
        "kpad8pw",
        8,
        "kpad8",
        8,
    )  # no K: skipped
    study = runs.configurations(
        {
            "server": {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85},
            "configurations": [
                {"method": "van"},
                {"method": "kpad", "k": [4, 8]},
                {"name": "kpad8pw", "method": "kpad", "k": 8, "cudagraph_mode": "PIECEWISE"},
            ],
        }
    )
    assert confirm.confirm_order(best, study) == {("m", "c"): [("van", 1), ("kpad8pw", 1), ("kpad8", 1)]}
    records = pd.DataFrame(
        [
            {
                "model": "m",
                "corpus": "c",
                "configuration": n,
                "method": "kpad",
                "k": 8,
                "pad": True,
                "device": "cuda",
                "repeat": 1,
                "status": "ok",
                "output_tok_s": v,
            }
            for n, v in (("kpad8pw", 178.0), ("kpad8", 171.0))
        ]
    )
    t = confirm.confirmed_cells(records, best)
    assert sorted(zip(t["configuration"], t["method"], strict=True)) == [("kpad8", "kpad"), ("kpad8pw", "bestkpad")]


@pytest.mark.parametrize(
    ("taskset", "wall_h", "why"),
    [
        # 12 runs of model a (1 GPU each) and 12 of b (2 GPUs each), 48 s each, plan.gpus 8
        ({"auto": True}, (12 * 48 / 8 + 12 * 48 / 4) / 3600, "taskset auto: 8 GPUs (config plan.gpus) / 1 per run"),
        ({"slots": [{"server": "0", "client": "1"}] * 3}, (12 * 48 / 3 + 12 * 48 / 3) / 3600, "taskset.slots: 3 runs"),
        ({"server": "0-47", "client": "48-55"}, 24 * 48 / 3600, "taskset: one server / client pair, so one run at a"),
    ],
)
def test_the_plan_packs_runs_by_the_rule_the_workflow_runs_them_with(taskset, wall_h, why):
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg.update(device="cuda", taskset=taskset, plan={"boot_s": 40, "requests_per_s": 2, "gpus": 8})
    cfg["models"] = {
        "a": {"source": "hf", "repo": "x/a", "tensor_parallel_size": 1, "size_gb": 1.0},
        "b": {"source": "hf", "repo": "x/b", "tensor_parallel_size": 2, "size_gb": 1.0},
    }
    pl = plan.plan(cfg, ["sharegpt", "humaneval", "mix"], hub=lambda repo, rev: None)
    assert pl["wall_s"] / 3600 == pytest.approx(wall_h)
    assert any(a.startswith(why) for a in pl["assumptions"]), pl["assumptions"]
