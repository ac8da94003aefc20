"""Paired comparisons: within-repeat ratios, geometric mean and t-interval, drift that cancels."""

import math

import pandas as pd
import pytest

from kpadstudy import paired

T_2DF = 4.302652729749462  # Student t, 97.5% quantile, 2 degrees of freedom (tables: 4.303)


def runs(tok: dict[str, list[float]], phase: str = "sweep") -> pd.DataFrame:
    methods = {"van": ("van", 0), "suf": ("suf", 32), "kpad8": ("kpad", 8), "nopad8": ("nopad", 8)}
    rows = []
    for repeat in range(1, 4):
        for conf, values in tok.items():
            value = values[repeat - 1]
            rows.append(
                {
                    "model": "m",
                    "corpus": "c",
                    "configuration": conf,
                    "method": methods[conf][0],
                    "k": methods[conf][1],
                    "repeat": repeat,
                    "phase": phase,
                    "status": "ok" if value is not None else "invalid",
                    "output_tok_s": value,
                }
            )
    return pd.DataFrame(rows)


TOK = {
    "van": [100.0, 110.0, 120.0],
    "suf": [120.0, 121.0, 150.0],
    "kpad8": [130.0, 132.0, 156.0],
    "nopad8": [100.0, 110.0, 120.0],
}


def test_summary_by_hand():
    s = paired.summarize([1.3, 1.2, 1.3])
    logs = [math.log(1.3), math.log(1.2), math.log(1.3)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert s["ratio"] == pytest.approx(math.exp(mean)) == pytest.approx(1.26577, abs=1e-5)
    assert s["ci_low"] == pytest.approx(math.exp(mean - T_2DF * sd / math.sqrt(3)))
    assert s["ci_high"] == pytest.approx(math.exp(mean + T_2DF * sd / math.sqrt(3)))
    assert (round(s["ci_low"], 3), round(s["ci_high"], 3)) == (
        1.128,
        1.420,
    )  # exp(0.235683 -/+ 4.302653 x 0.046212 / sqrt 3)
    assert (s["n"], s["favour"], s["label"]) == (3, 3, "95% CI")


def test_fewer_than_three_repeats_give_no_interval():
    assert paired.summarize([1.5]) == {
        "n": 1,
        "ratio": 1.5,
        "ci_low": None,
        "ci_high": None,
        "favour": 1,
        "label": "single measurement",
    }
    two = paired.summarize([1.2, 0.9])
    assert (two["ci_low"], two["label"], two["favour"]) == (None, "n = 2", 1)
    assert two["ratio"] == pytest.approx(math.sqrt(1.2 * 0.9))
    assert paired.summarize([])["label"] == "no paired repeat"
    with pytest.raises(ValueError, match="positive numbers"):
        paired.summarize([1.0, 0.0])


def test_a_fifty_percent_drift_in_the_last_repeat_leaves_the_ratios_unchanged():
    drifted = {c: [v[0], v[1], v[2] * 1.5] for c, v in TOK.items()}
    a, b = paired.paired_table(runs(TOK)), paired.paired_table(runs(drifted))
    cols = ["numerator", "denominator", "n", "ratio", "ci_low", "ci_high", "favour"]
    pd.testing.assert_frame_equal(a[cols], b[cols], rtol=1e-12)
    # ... while the medians it would compare across repeats move: van's median 110 stays, kpad8's 132 -> 156
    row = a.set_index(["numerator", "denominator"]).loc[("kpad8", "van")]
    assert row["ratio"] == pytest.approx((1.3 * 1.2 * 1.3) ** (1 / 3))
    assert row["ratios"] == "r1: 1.300, r2: 1.200, r3: 1.300"


def test_the_stated_comparisons_and_words():
    t = paired.paired_table(runs(TOK))
    assert list(zip(t["numerator"], t["denominator"], strict=True)) == [
        ("kpad8", "nopad8"),
        ("suf", "van"),
        ("kpad8", "van"),
        ("nopad8", "van"),
        ("kpad8", "suf"),
        ("nopad8", "suf"),
    ]
    suf = t[(t["numerator"] == "kpad8") & (t["denominator"] == "suf")].iloc[0]
    assert paired.describe(suf) == "kpad8 / suf: 1.07x (1.00-1.14, 95% CI), 3 of 3 repeats favour kpad8"
    md = paired.to_markdown(t)
    assert "## m / c (sweep)" in md and "- nopad8 / van: 1.00x (1.00-1.00, 95% CI), 0 of 3 repeats favour nopad8" in md


def test_only_repeats_where_both_ran_are_paired_and_phases_never_mix():
    tok = dict(TOK, kpad8=[130.0, None, 156.0])  # kpad8 invalid in repeat 2
    both = pd.concat([runs(tok), runs(TOK, phase="confirm")])
    t = paired.paired_table(both).set_index(["phase", "numerator", "denominator"])
    sweep = t.loc[("sweep", "kpad8", "van")]
    assert (sweep["n"], sweep["label"], sweep["ratios"]) == (2, "n = 2", "r1: 1.300, r3: 1.300")
    assert t.loc[("confirm", "kpad8", "van")]["n"] == 3


def test_drift_last_over_first_and_confirm_over_sweep():
    drifted = {c: [v[0], v[1], v[2] * 1.5] for c, v in TOK.items()}  # van 100, 110, 180
    confirm = runs({"van": [150.0, 150.0, 160.0]}, phase="confirm")
    d = paired.drift_table(pd.concat([runs(drifted), confirm])).set_index(["configuration", "what"])
    van = d.loc[("van", "last / first repeat (sweep)")]
    assert (van["n"], van["ratio"], bool(van["drifting"])) == (3, 1.8, True)
    assert d.loc[("van", "confirm / sweep (medians)")]["ratio"] == pytest.approx(150.0 / 110.0)
    steady = paired.drift_table(runs(TOK)).set_index(["configuration", "what"])
    assert steady.loc[("kpad8", "last / first repeat (sweep)")]["ratio"] == pytest.approx(1.2)  # 156 / 130
    assert bool(steady.loc[("kpad8", "last / first repeat (sweep)")]["drifting"]) is True  # 20% > 10%
    assert paired.DRIFT_FLAG == 0.10


def test_runs_that_never_measured_give_no_paired_repeat():
    """Every run failed (no output_tok_s column at all, as in runs.parquet of a killed server)."""
    failed = pd.DataFrame(
        [
            {"model": "m", "corpus": "c", "configuration": c, "method": c, "k": 0, "repeat": 1, "status": "invalid"}
            for c in ("van", "suf")
        ]
    )
    t = paired.paired_table(failed)
    assert list(zip(t["numerator"], t["denominator"], t["n"], t["label"], strict=True)) == [
        ("suf", "van", 0, "no paired repeat")
    ]
    assert paired.drift_table(failed).empty
    assert "- suf / van: no paired repeat" in paired.to_markdown(t)


def test_a_rate_of_zero_or_none_is_left_out_of_ratios_and_drift():
    tok = dict(TOK, kpad8=[130.0, 0.0, float("nan")])  # "ok" rows of a hand-made table
    t = paired.paired_table(runs(tok)).set_index(["numerator", "denominator"])
    assert (t.loc[("kpad8", "van"), "n"], t.loc[("kpad8", "van"), "ratios"]) == (1, "r1: 1.300")
    d = paired.drift_table(runs(tok)).set_index(["configuration", "what"])
    assert ("kpad8", "last / first repeat (sweep)") not in d.index  # one usable repeat: no trend


def test_a_named_variant_is_compared_with_the_default_entry_of_its_method_and_k():
    # output tok/s of the H200 capture study (results/gpu/h200-capture-runs.parquet, rounded to 0.1)
    tok = {"kpad12": [14247.1, 11944.3, 12970.3], "kpad16": [12895.8, 12784.7, 12224.7]}
    tok["kpad16nosize"] = [7652.6, 6559.7, 7469.2]
    rows = []
    for conf, values in tok.items():
        for repeat, value in enumerate(values, start=1):
            rows.append({"model": "m", "corpus": "c", "configuration": conf, "method": "kpad", "repeat": repeat})
            rows[-1].update({"k": float(conf[4:6]), "phase": "sweep", "status": "ok", "output_tok_s": value})
    t = paired.paired_table(pd.DataFrame(rows))
    assert list(zip(t["numerator"], t["denominator"], strict=True)) == [("kpad16nosize", "kpad16")]
    row = t.iloc[0]
    ratios = [7652.6 / 12895.8, 6559.7 / 12784.7, 7469.2 / 12224.7]  # 0.593, 0.513, 0.611
    assert row["ratio"] == pytest.approx(math.prod(ratios) ** (1 / 3)) == pytest.approx(0.5709, abs=1e-4)
    assert (row["n"], row["favour"], row["label"]) == (3, 0, "95% CI")
    assert paired.comparisons(
        ["van", "suf", "trident"], {"van": "van", "suf": "suf", "trident": "suf"}, {"van": 0, "suf": 32, "trident": 32}
    ) == [("trident", "suf"), ("suf", "van"), ("trident", "van")]
    # no plain van: the later van variant over the first one (the runner's share: vansyncv1 / vansync)
    names = ["vansync", "kpadauto12", "vansyncv1"]
    assert paired.comparisons(
        names,
        {"vansync": "van", "kpadauto12": "kpadauto", "vansyncv1": "van"},
        dict.fromkeys(names, 0) | {"kpadauto12": 12},
    ) == [("kpadauto12", "vansync"), ("kpadauto12", "vansyncv1"), ("vansyncv1", "vansync")]


def test_confirmation_vs_sweep_is_a_ratio_of_within_repeat_ratios_that_drift_does_not_move():
    # the confirmation ran everything 50% faster (a lease that sped up) and kpad8 / van is 1.3, 1.2, 1.3 in both
    faster = {c: [1.5 * x for x in v] for c, v in TOK.items()}
    both = pd.concat([runs(TOK), runs(faster, phase="confirm")])
    t = paired.phase_table(both).set_index(["numerator", "denominator"])
    row = t.loc[("kpad8", "van")]
    gm = (1.3 * 1.2 * 1.3) ** (1 / 3)
    assert (row["sweep_ratio"], row["confirm_ratio"]) == (pytest.approx(gm), pytest.approx(gm))
    assert (row["sweep_n"], row["confirm_n"], row["label"]) == (3, 3, "95% CI (Welch)")
    assert row["confirm_over_sweep"] == pytest.approx(1.0)
    # Welch by hand: equal sds s of the logs [ln 1.3, ln 1.2, ln 1.3], df = (2 s²/3)² / (2 (s²/3)² / 2) = 4
    logs = [math.log(1.3), math.log(1.2), math.log(1.3)]
    mean = sum(logs) / 3
    s2 = sum((x - mean) ** 2 for x in logs) / 2
    half = 2.7764451051977987 * math.sqrt(2 * s2 / 3)  # t(0.975, 4 df)
    assert row["df"] == pytest.approx(4.0)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(math.exp(-half)), pytest.approx(math.exp(half)))
    # the absolute medians would say 1.5x: the drift table still reports that, as drift, not as a result
    d = paired.drift_table(both).set_index(["configuration", "what"])
    assert d.loc[("kpad8", "confirm / sweep (medians)")]["ratio"] == pytest.approx(1.5)


def test_confirmation_vs_sweep_below_three_repeats_says_which_phase_is_short():
    short = runs({"van": [100.0, 100.0, None], "kpad8": [130.0, 120.0, None]}, phase="confirm")
    t = paired.phase_table(pd.concat([runs(TOK), short]))
    row = t.set_index(["numerator", "denominator"]).loc[("kpad8", "van")]
    assert row["label"] == "no interval: sweep n = 3, confirmation n = 2"
    assert row["confirm_over_sweep"] == pytest.approx(math.sqrt(1.3 * 1.2) / (1.3 * 1.2 * 1.3) ** (1 / 3))
    assert pd.isna(row["ci_low"])
    md = paired.to_markdown(paired.paired_table(runs(TOK)), None, t)
    # sqrt(1.3 x 1.2) / (1.3 x 1.2 x 1.3)^(1/3) = 1.2490 / 1.2659 = 0.9866
    assert (
        "| m | c | kpad8 / van | 1.27x (n = 3) | 1.25x (n = 2) | 0.99 (no interval: sweep n = 3, confirmation n = 2) |"
    ) in md


def test_a_runs_table_is_read_once_for_every_tool_and_what_it_would_drop_is_refused(tmp_path):
    path = tmp_path / "a-runs.parquet"
    table = runs({"kpad8": [130.0, None, 156.0], "nopad8": [100.0, 110.0, 120.0]}).drop(columns="phase")
    table.assign(repeat=table["repeat"].astype(str), output_tok_s=table["output_tok_s"].map(str)).to_parquet(path)
    read = paired.read_runs_table(str(path), ["model", "repeat", "status", "output_tok_s"])
    assert list(read["repeat"]) == [1, 1, 2, 2, 3, 3] and set(read["phase"]) == {"sweep"}
    assert read.loc[2, "status"] == "invalid" and math.isnan(read.loc[2, "output_tok_s"])  # kept, not a rate
    stalled = table.assign(output_tok_s=table["output_tok_s"].where(table.index != 1, 0.0))
    refused = {
        "zero": (table.assign(repeat=table["repeat"] - 1), "2 runs have no whole repeat number >= 1 (first: row 0,"),
        "stall": (
            stalled,
            "1 runs are ok without a positive, finite output tok/s (first: row 1, nopad8: output_tok_s 0.0); not a",
        ),
        "unrated": (
            table.assign(status="ok"),
            "1 runs are ok without a positive, finite output tok/s (first: row 2, kpad8: output_tok_s missing)",
        ),
        "empty": (table.iloc[:0], "holds no run; give a runs table (results/runs.parquet or a *-runs.parquet)"),
    }
    for name, (frame, says) in refused.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
        with pytest.raises(ValueError) as err:
            paired.read_runs_table(str(tmp_path / f"{name}.parquet"), ["model"])
        assert str(err.value).startswith(f"{tmp_path / name}.parquet: {says}")
    with pytest.raises(
        ValueError, match=r"a-runs.parquet: not a runs table \(lacks \['gpu_name'\]\); give a runs table"
    ):
        paired.read_runs_table(str(path), ["model", "gpu_name"])
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"text.parquet: not a readable Parquet file \(.*\); give a runs table"):
        paired.read_runs_table(str(tmp_path / "text.parquet"), ["model"])


def test_a_run_that_a_summary_would_drop_split_or_count_twice_is_refused_by_row(tmp_path):
    table = runs({"kpad8": [130.0, 132.0, 156.0], "nopad8": [100.0, 110.0, 120.0]})
    one = table.index == 2  # kpad8, repeat 2
    bad = {
        "status": (table.assign(status=table["status"].where(~one, "OK")), "1 runs have a status other than ok,"),
        "nostatus": (table.assign(status=table["status"].where(~one, None)), "1 runs have a status other than ok,"),
        "unnamed": (table.assign(configuration=table["configuration"].where(~one, None)), "1 runs have no model,"),
        "method": (table.assign(method=table["method"].where(~one, None)), "1 runs have a method other than van,"),
        "phase": (table.assign(phase=table["phase"].where(~one, "Sweep")), "1 runs have a phase other than sweep"),
        "k": (table.assign(k=table["k"].where(~one, float("nan"))), "1 runs speculate without a whole k >= 1"),
        "text": (table.assign(output_tok_s=table["output_tok_s"].astype(str).where(~one, "abc")), "column out"),
        "copy": (pd.concat([table, table.iloc[[2]]]), "2 rows of m / c / kpad8 r2 (sweep): one run per repeat; drop"),
    }
    shown = {"status": "status 'OK'", "nostatus": "status missing", "method": "method missing", "k": "k missing"}
    shown |= {"phase": "phase 'Sweep'"}
    for name, (frame, says) in bad.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
        with pytest.raises(ValueError) as err:
            paired.read_runs_table(str(tmp_path / f"{name}.parquet"))
        assert str(err.value).startswith(f"{tmp_path / name}.parquet: {says}"), str(err.value)
        if name in shown:
            assert "(first: row 2, kpad8: " in str(err.value) and f": {shown[name]}); remake the table" in str(
                err.value
            )
    assert str(err.value).endswith("one run per repeat; drop the copies")
    text = tmp_path / "text.parquet"
    with pytest.raises(ValueError, match=r"text.parquet: column output_tok_s holds no number at row 2 \('abc'\); rem"):
        paired.read_runs_table(str(text))
    with pytest.raises(ValueError, match=rf"^{tmp_path}: a folder, not a runs table; give a runs table"):
        paired.read_runs_table(str(tmp_path))
