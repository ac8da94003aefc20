"""tools/pool_repeats.py: the repeats of several leases with the same settings as one set of paired comparisons."""

import pandas as pd
import pytest
from conftest import ROOT, load_tool

from kpadstudy import paired

tool = load_tool("pool_repeats")
LONG = "results/gpu/h200-auto-long-runs.parquet"  # lease of 2026-12-02 18:09: van, kpad4, kpad8, kpadauto12
PAIR_LONG = "results/gpu/h200-auto-pair-long-runs.parquet"  # lease of 2026-12-03 17:47: kpad8, kpadauto12
PAIR = "results/gpu/h200-auto-pair-runs.parquet"  # lease of 2026-12-03 11:40: the pair at 768 prompts


def runs(rows):
    base = {"model": "M", "corpus": "sharegpt", "status": "ok", "n_measured": 64, "method": "kpad", "device": "cuda"}
    return pd.DataFrame([{**base, **r, "pad": r.get("method", "kpad") == "kpad"} for r in rows])


def test_two_leases_pool_into_seven_repeats_with_the_hand_computed_interval(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "pooled"
    assert tool.main([str(out), LONG, PAIR_LONG, "--configurations", "kpad8,kpadauto12"]) == 0
    err = capsys.readouterr().err
    assert f"{LONG}: 2 run(s) of kpad4 left out (--configurations)" in err
    assert f"{LONG}: 3 run(s) of van left out (--configurations)" in err
    assert "not compared (some source lacks them): control" in err  # the older lease's records have no control
    pooled = pd.read_parquet(f"{out}-runs.parquet")
    assert len(pooled) == 14 and sorted(pooled["repeat"].unique()) == [1, 2, 3, 4, 5, 6, 7]
    second = pooled[pooled["source"] == PAIR_LONG]
    assert sorted(zip(second["source_repeat"], second["repeat"], strict=True))[::2] == [(1, 4), (2, 5), (3, 6), (4, 7)]
    # by hand from the 7 within-repeat ratios of the two leases' own paired.md files (3 decimals): geometric mean
    # exp(mean log) = 0.9936, 95% t-interval exp(mean log -/+ 2.4469 x sd / sqrt(7)) = 0.9351-1.0558
    row = paired.paired_table(pooled).iloc[0]
    assert (row["ratio"], row["ci_low"], row["ci_high"], row["n"]) == pytest.approx(
        (0.9936, 0.9351, 1.0558, 7), abs=6e-4
    )
    text = (tmp_path / "pooled-paired.md").read_text()
    assert (
        "- kpadauto12 / kpad8: 0.99x (0.94-1.06, 95% CI), 3 of 7 repeats favour kpadauto12 [r1: 0.979, r2: 0.950, "
        "r3: 1.048, r4: 1.027, r5: 0.887, r6: 0.998, r7: 1.079]"
    ) in text
    assert f"| {LONG} | sweep | r1, r2, r3 | r1, r2, r3 | 6 | 1427366 | 2026-12-02T18:17:12+0000 |" in text
    assert f"| {PAIR_LONG} | sweep | r1, r2, r3, r4 | r4, r5, r6, r7 | 8 | b11fd4c | 2026-12-03T17:50:16+0000 |" in text
    assert "kpadauto12 / kpad8: 1.00x (0.87-1.14, 95% CI), 2 of 4 repeats favour kpadauto12" in text  # the 2nd alone
    assert "- drift kpad8 last / first repeat (sweep): 1.34 (n = 3, drifting)" in text  # within its own lease
    cells = pd.read_parquet(f"{out}-cells.parquet")
    assert cells.set_index("configuration")["n_valid"].to_dict() == {"kpad8": 7, "kpadauto12": 7}


def test_runs_of_different_settings_do_not_pool(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as err:
        tool.main([str(tmp_path / "x"), PAIR, PAIR_LONG])
    assert str(err.value) == (
        "pool_repeats: SmolLM2-135M-Instruct / sharegpt / kpad8: n_measured differs between sources "
        f"({PAIR}: 768; {PAIR_LONG}: 1536); only runs of the same settings pool: leave that configuration out "
        "(--configurations) or pool those sources separately"
    )
    assert not list(tmp_path.iterdir())  # checked before anything is written


def test_repeats_are_numbered_per_phase_and_a_configuration_of_one_source_keeps_its_repeats(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    runs(
        [
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 50.0},
            {"configuration": "kpad8", "k": 8, "repeat": 2, "output_tok_s": 120.0},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 2, "output_tok_s": 40.0},
        ]
    ).to_parquet(a)
    runs(
        [
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 90.0, "phase": "sweep"},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 60.0, "phase": "sweep"},
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 80.0, "phase": "confirm"},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 40.0, "phase": "confirm"},
        ]
    ).to_parquet(b)
    assert tool.main([str(tmp_path / "p"), str(a), str(b)]) == 0
    pooled = pd.read_parquet(tmp_path / "p-runs.parquet")
    got = sorted(
        zip(pooled["source"].str[-9:], pooled["phase"], pooled["source_repeat"], pooled["repeat"], strict=True)
    )
    assert sorted(set(got)) == [
        ("a.parquet", "sweep", 1, 1),
        ("a.parquet", "sweep", 2, 2),
        ("b.parquet", "confirm", 1, 1),
        ("b.parquet", "sweep", 1, 3),
    ]
    text = (tmp_path / "p-paired.md").read_text()
    # sweep: 100/50, 120/40, 90/60 -> geometric mean (2 * 3 * 1.5) ** (1/3) = 2.08
    assert "- kpad8 / van: 2.08x (" in text and "3 of 3 repeats favour kpad8 [r1: 2.000, r2: 3.000, r3: 1.500]" in text
    assert "## M / sharegpt (confirm)" in text and "- kpad8 / van: 2.00x (single measurement)" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["one.parquet"], "pool_repeats: give two or more runs tables to pool (got 1)"),
        (["a.parquet", "a.parquet"], "pool_repeats: a source is given twice (['a.parquet', 'a.parquet']): its repeats"),
        (["a.parquet", "b.parquet", "--configurations", "kpad8,kpad9"], "pool_repeats: --configurations ['kpad9']"),
        (["a.parquet", "missing.parquet"], "pool_repeats: missing.parquet: not a readable runs table"),
        (
            ["a.parquet", "bare.parquet"],
            "pool_repeats: bare.parquet: lacks the run columns ['method', 'k', 'pad', 'device', 'status',",
        ),
    ],
)
def test_bad_arguments_are_named(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    runs([{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0}]).to_parquet("a.parquet")
    runs([{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 90.0}]).to_parquet("b.parquet")
    pd.DataFrame({"model": ["M"], "corpus": ["c"], "configuration": ["x"], "repeat": [1]}).to_parquet("bare.parquet")
    with pytest.raises(SystemExit) as err:
        tool.main(["out"] + args)
    assert str(err.value).startswith(message)
