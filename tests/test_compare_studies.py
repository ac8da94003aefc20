"""Two studies of ours side by side (kpadstudy.studies, rule compare_studies): within-study ratios matched by cell
and configuration, B's speed-up over A's with a Welch interval, tok/s as hardware speed, what only one study has."""

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from kpadstudy import palette, studies, tables

ROOT = Path(__file__).resolve().parent.parent
T_4DF = 2.7764451051977934  # Student t, 97.5% quantile, 4 degrees of freedom (tables: 2.776)
T_2DF = 4.302652729749462  # 2 degrees of freedom (tables: 4.303)
METHODS = {"van": ("van", 0), "suf": ("suf", 32), "kpad4": ("kpad", 4), "kpad8": ("kpad", 8), "nopad8": ("nopad", 8)}
SPREAD = [math.exp(-0.1), 1.0, math.exp(0.1)]  # log ratios mean +- 0.1: sample sd 0.1 exactly


def runs(tok, corpus="mix", phase="sweep", device="cuda", model="m", status=None, n_measured=512):
    """Run records: ``tok`` = configuration -> output tok/s per repeat (None: no run in that repeat)."""
    rows = []
    for conf, values in tok.items():
        for repeat, value in enumerate(values, start=1):
            if value is None:
                continue
            rows.append(
                {
                    "model": model,
                    "corpus": corpus,
                    "configuration": conf,
                    "method": METHODS[conf][0],
                    "k": METHODS[conf][1],
                    "pad": METHODS[conf][0] == "kpad",
                    "device": device,
                    "repeat": repeat,
                    "phase": phase,
                    "status": (status or {}).get(conf, "ok"),
                    "output_tok_s": value,
                    "n_measured": n_measured,
                }
            )
    return pd.DataFrame(rows)


def study(label, run_table):
    """A Study straight from a runs table (cells made from it, as rule tables does)."""
    return studies.Study(label, tables.cells(run_table), run_table, f"{label}-cells.parquet", f"{label}-runs.parquet")


def write_pair(tmp_path, name, run_table):
    cells, runs_path = tmp_path / f"{name}-cells.parquet", tmp_path / f"{name}-runs.parquet"
    tables.cells(run_table).to_parquet(cells)
    run_table.to_parquet(runs_path)
    return str(cells), str(runs_path)


# A: kpad8 / van = 1.2 x (e^-0.1, 1, e^0.1) per repeat, van drifting 100 -> 300; B: 1.8 x the same, 1.5x A's
VAN_A, VAN_B = [100.0, 200.0, 300.0], [10.0, 20.0, 40.0]
A_RUNS = runs({"van": VAN_A, "kpad8": [v * 1.2 * s for v, s in zip(VAN_A, SPREAD, strict=True)]})
B_RUNS = runs({"van": VAN_B, "kpad8": [v * 1.8 * s for v, s in zip(VAN_B, SPREAD, strict=True)]}, device="cpu")


def row(table, num, den, phase="sweep", corpus="mix"):
    hit = table[
        (table["numerator"] == num)
        & (table["denominator"] == den)
        & (table["phase"] == phase)
        & (table["corpus"] == corpus)
    ]
    assert len(hit) == 1, hit
    return hit.iloc[0]


def test_ratio_of_ratios_and_its_welch_interval_by_hand():
    ratios, _ = studies.compare_studies(study("H200", A_RUNS), study("CPU", B_RUNS))
    r = row(ratios, "kpad8", "van")
    assert r["match"] == "both"
    # each study: geometric mean of its within-repeat ratios, t(2) interval: exp(log 1.2 -/+ 4.302653 x 0.1 / sqrt 3)
    assert (r["a_n"], r["a_ratio"], r["a_note"]) == (3, pytest.approx(1.2), "95% CI")
    assert (r["a_ci_low"], r["a_ci_high"]) == (pytest.approx(0.936045, abs=1e-6), pytest.approx(1.538388, abs=1e-6))
    assert r["a_ci_low"] == pytest.approx(1.2 * math.exp(-T_2DF * 0.1 / math.sqrt(3)))
    assert (r["b_ratio"], r["b_ci_low"], r["b_ci_high"]) == (
        pytest.approx(1.8),
        pytest.approx(1.404067, abs=1e-6),
        pytest.approx(2.307582, abs=1e-6),
    )
    assert (r["a_favour"], r["b_favour"]) == (3, 3)  # 1.2 e^-0.1 = 1.086 > 1
    # B / A = 1.8 / 1.2; Welch: se = sqrt(0.1^2/3 + 0.1^2/3) = 0.081650, df = (2v)^2 / (2 v^2 / 2) = 4,
    # exp(log 1.5 -/+ 2.776445 x 0.081650) = 1.5 x exp(-/+ 0.226696)
    assert r["b_over_a"] == pytest.approx(1.5)
    assert r["b_over_a_df"] == pytest.approx(4.0)
    assert (r["b_over_a_ci_low"], r["b_over_a_ci_high"]) == (
        pytest.approx(1.195745, abs=1e-6),
        pytest.approx(1.881672, abs=1e-6),
    )
    assert r["b_over_a_ci_low"] == pytest.approx(1.5 * math.exp(-T_4DF * math.sqrt(0.02 / 3)))
    assert r["b_over_a_note"] == "95% CI (Welch)"


def test_welch_degrees_of_freedom_with_unequal_spreads_by_hand():
    # A: n 3, s 0.1 (v = 1/300); B: n 4, logs +-0.2, 0, 0 around log 1.8: s^2 = 0.08 / 3 (v = 1/150)
    # df = (1/300 + 1/150)^2 / ((1/300)^2 / 2 + (1/150)^2 / 3) = 54/11; se = sqrt(1/100) = 0.1; t(54/11) = 2.584966
    b = [1.8 * math.exp(x) for x in (-0.2, 0.0, 0.2, 0.0)]
    rr = studies.ratio_of_ratios([1.2 * s for s in SPREAD], b)
    assert rr["ratio"] == pytest.approx(1.5)
    assert rr["df"] == pytest.approx(54 / 11)
    assert (rr["ci_low"], rr["ci_high"]) == (pytest.approx(1.158317, abs=1e-6), pytest.approx(1.942473, abs=1e-6))


def test_below_three_repeats_there_is_no_interval_and_the_label_says_n():
    a = runs({"van": [100.0, 100.0], "kpad8": [150.0, 130.0]})
    b = runs({"van": [50.0], "kpad8": [40.0]}, device="cpu")
    ratios, _ = studies.compare_studies(study("A", a), study("B", b))
    r = row(ratios, "kpad8", "van")
    assert r["a_ratio"] == pytest.approx(math.sqrt(1.5 * 1.3))  # 1.396424
    assert (r["a_n"], r["a_note"], r["b_n"], r["b_note"]) == (2, "n = 2", 1, "single measurement")
    assert r["b_over_a"] == pytest.approx(0.8 / math.sqrt(1.95))  # 0.572891
    assert pd.isna(r["b_over_a_ci_low"]) and pd.isna(r["b_over_a_ci_high"])
    assert r["b_over_a_note"] == "no interval: A n = 2, B single measurement"
    assert studies.ratio_of_ratios([], [1.1])["label"] == "no paired repeat in A"


def test_cells_and_configurations_in_one_study_only_are_listed_and_counted():
    a = pd.concat(
        [
            runs({"van": [100.0] * 3, "suf": [120.0] * 3, "kpad8": [150.0] * 3, "nopad8": [125.0] * 3}),
            runs({"van": [90.0] * 3, "kpad8": [99.0] * 3}, corpus="sharegpt"),
        ]
    )
    b = pd.concat(
        [
            runs({"van": [10.0] * 3, "suf": [11.0] * 3, "kpad8": [8.0] * 3, "kpad4": [9.0] * 3}, device="cpu"),
            runs({"van": [10.0] * 3, "suf": [11.0] * 3}, corpus="humaneval", device="cpu"),
        ]
    )
    sa, sb = study("H200", a), study("CPU", b)
    ratios, confs = studies.compare_studies(sa, sb)
    match = dict(zip(zip(confs["corpus"], confs["configuration"], strict=True), confs["match"], strict=True))
    assert match == {
        ("humaneval", "van"): "only in B",
        ("humaneval", "suf"): "only in B",
        ("mix", "van"): "both",
        ("mix", "suf"): "both",
        ("mix", "kpad4"): "only in B",
        ("mix", "kpad8"): "both",
        ("mix", "nopad8"): "only in A",
        ("sharegpt", "van"): "only in A",
        ("sharegpt", "kpad8"): "only in A",
    }
    assert row(ratios, "kpad8", "nopad8")["match"] == "only in A"
    assert row(ratios, "kpad4", "van")["match"] == "only in B"
    assert sorted(
        ratios[ratios["match"] == "both"]["numerator"] + "/" + ratios[ratios["match"] == "both"]["denominator"]
    ) == [
        "kpad8/suf",
        "kpad8/van",
        "suf/van",
    ]
    cov = studies.coverage(confs)
    assert cov["only in A"] == {
        "cells": [("m", "sharegpt", "sweep")],
        "configurations": [("m", "mix", "sweep", "nopad8")],
    }
    assert cov["only in B"] == {
        "cells": [("m", "humaneval", "sweep")],
        "configurations": [("m", "mix", "sweep", "kpad4")],
    }
    md = studies.to_markdown(ratios, confs, sa, sb)
    assert "Matched: 1 cell, 3 configurations, 3 comparisons." in md
    assert "Only in A (H200): 1 cell, 1 configuration of matched cells, 4 comparisons." in md
    assert "Only in B (CPU): 1 cell, 1 configuration of matched cells, 3 comparisons." in md
    assert "- only in A (H200): cell m / sharegpt (sweep), 2 configurations: van, kpad8" in md
    assert "- only in B (CPU): configuration kpad4 of m / mix (sweep)" in md
    # equal repeats: sd 0, the interval collapses onto the ratio
    assert "| kpad8 / van | 1.50x (1.50-1.50, 95% CI, n = 3; 3 of 3 repeats favour) | 0.80x (0.80-0.80, 95% CI" in md


def test_phases_never_mix():
    sweep = runs({"van": [100.0] * 3, "kpad8": [120.0] * 3})
    confirm = runs({"van": [200.0] * 3, "kpad8": [300.0] * 3}, phase="confirm")  # another time, another drift
    b = runs({"van": [10.0] * 3, "kpad8": [15.0] * 3}, device="cpu")
    ratios, confs = studies.compare_studies(study("A", pd.concat([sweep, confirm])), study("B", b))
    assert row(ratios, "kpad8", "van")["a_ratio"] == pytest.approx(1.2)  # the sweep's, not mixed with 1.5
    assert row(ratios, "kpad8", "van")["b_over_a"] == pytest.approx(1.5 / 1.2)
    assert row(ratios, "kpad8", "van", phase="confirm")["match"] == "only in A"
    assert row(ratios, "kpad8", "van", phase="confirm")["a_ratio"] == pytest.approx(1.5)
    assert set(confs[confs["phase"] == "confirm"]["match"]) == {"only in A"}
    assert confs[(confs["phase"] == "sweep") & (confs["configuration"] == "van")]["a_tok_s"].iloc[0] == 100.0


def test_tok_s_stand_beside_as_hardware_speed_with_failures_named():
    a = runs({"van": [100.0, 110.0, 120.0], "suf": [130.0, 150.0, 140.0], "kpad8": [160.0, 170.0, 180.0]})
    b = runs({"van": [10.0, 12.0, 11.0], "suf": [13.0, 14.0, 15.0], "kpad8": [math.nan] * 3}, device="cpu",
             status={"kpad8": "boot_failed"})  # fmt: skip
    sa, sb = study("H200", a), study("CPU", b)
    ratios, confs = studies.compare_studies(sa, sb)
    van = confs[confs["configuration"] == "van"].iloc[0]
    assert (van["a_tok_s"], van["b_tok_s"], van["a_n_valid"], van["b_n_valid"]) == (110.0, 11.0, 3, 3)
    assert van["hardware_speed_b_over_a"] == pytest.approx(0.1)  # median 11 / median 110
    assert bool(van["same_method"]) is True
    kpad = confs[confs["configuration"] == "kpad8"].iloc[0]
    assert (kpad["b_status"], kpad["b_n_valid"], kpad["b_n_runs"]) == ("did not boot", 0, 3)
    assert pd.isna(kpad["b_tok_s"]) and pd.isna(kpad["hardware_speed_b_over_a"])
    r = row(ratios, "kpad8", "van")
    assert (r["b_n"], r["b_note"], r["b_over_a_note"]) == (0, "no paired repeat", "no paired repeat in B")
    assert pd.isna(r["b_over_a"])
    md = studies.to_markdown(ratios, confs, sa, sb)
    assert "B / A tok/s (hardware speed, not a speed-up)" in md
    assert "| van | 110.0 (3 of 3 runs valid) | 11.0 (3 of 3 runs valid) | 0.1 (B 10x slower) | both |" in md
    assert "| kpad8 | 170.0 (3 of 3 runs valid) | no valid run (did not boot) | - | both |" in md
    assert "| kpad8 / van | 1.55x" in md and "| no paired repeat | no paired repeat in B |" in md
    assert "no cudagraphs exist on CPU" in md


def test_settings_that_differ_are_shown_side_by_side():
    sa, sb = study("H200", A_RUNS), study("CPU", runs({"van": VAN_B, "kpad8": VAN_B}, device="cpu", n_measured=12))
    md = studies.to_markdown(*studies.compare_studies(sa, sb), sa, sb)
    assert "| measured prompts per run | 512 | 12 | **yes** |" in md
    assert "| device | cuda | cpu | **yes** |" in md and "| repeats | 3 | 3 | no |" in md
    assert "may hold other prompts" in md


def test_figure_draws_both_studies_in_the_palette_colours():
    a = A_RUNS[A_RUNS["configuration"] == "kpad8"]
    a = pd.concat([runs({"van": VAN_A, "suf": [v * 1.1 for v in VAN_A]}), a])
    b = pd.concat([runs({"van": VAN_B, "suf": VAN_B}, device="cpu"), B_RUNS[B_RUNS["configuration"] == "kpad8"]])
    ratios, confs = studies.compare_studies(study("H200", a), study("CPU", b))
    fig = studies.figure(ratios, confs, note="one lease")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["suf / van", "kpad8 / van", "kpad8 / suf"]
    kpad = palette.style("kpad8")["color"]
    means = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and ln.get_markersize() == 7]
    assert len(means) == 4  # kpad8 / van and kpad8 / suf, A filled and B open
    assert all(tuple(ln.get_color()) == tuple(kpad) for ln in means)
    assert sorted(str(ln.get_markerfacecolor()) for ln in means).count("white") == 2
    texts = [t.get_text() for t in ax.texts]
    assert "A 1.20x (0.94-1.54), n = 3" in texts and "B 1.80x (1.40-2.31), n = 3" in texts
    assert "1.50x\n(1.20-1.88)" in texts and "B / A" in texts
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["A: H200", "B: CPU"]
    assert "Only in A: nothing; only in B: nothing." in fig.get_suptitle().replace("\n", " ")
    assert "one lease" in fig.get_suptitle().replace("\n", " ")
    import matplotlib.pyplot as plt

    plt.close(fig)
    only_van = runs({"van": [1.0, 2.0, 3.0]})
    ratios, confs = studies.compare_studies(study("A", only_van), study("B", only_van))
    fig = studies.figure(ratios, confs)
    assert "no comparison in both studies" in fig.axes[0].texts[0].get_text()
    plt.close(fig)


def test_bad_input_is_one_line_naming_the_file_and_the_fix(tmp_path):
    a_cells, a_runs = write_pair(tmp_path, "a", A_RUNS)
    with pytest.raises(ValueError, match=r"^studies\.a\.cells: .*nope\.parquet: no such file"):
        studies.read_study("A", str(tmp_path / "nope.parquet"), a_runs, "studies.a")
    with pytest.raises(
        ValueError, match=r"nope\.parquet: no such file; set studies\.b\.runs to the run records of a study that ran"
    ):
        studies.read_study("B", a_cells, str(tmp_path / "nope.parquet"), "studies.b")
    with pytest.raises(
        ValueError,
        match=r"a-cells\.parquet: not a runs table \(lacks \['repeat', 'status', 'output_tok_s'\]\); "
        r"set studies\.a\.runs",
    ):
        studies.read_study("A", a_cells, a_cells, "studies.a")  # the cells given twice
    text = tmp_path / "runs.parquet"
    text.write_text("model,corpus\n")
    with pytest.raises(ValueError, match=r"runs\.parquet: not a readable Parquet file .*set studies\.a\.runs"):
        studies.read_study("A", a_cells, str(text), "studies.a")
    b_cells, b_runs = write_pair(tmp_path, "b", B_RUNS)
    with pytest.raises(
        ValueError, match=r"a-cells\.parquet and .*b-runs\.parquet are not one study \(m / mix / sweep / "
    ):
        studies.read_study("A", a_cells, b_runs, "studies.a")  # same keys, other medians
    with pytest.raises(
        ValueError,
        match=r"^studies\.a\.runs: a runs table is given twice \(\[.*\]\): its runs would count twice; give each once$",
    ):
        studies.read_study("A", a_cells, [a_runs, str(tmp_path / "." / "a-runs.parquet")], "studies.a")
    shutil.copy(a_runs, tmp_path / "copy.parquet")
    with pytest.raises(ValueError, match=r"^studies\.a\.runs: \[.*\] hold m / mix / van r1 \(sweep\) twice: give"):
        studies.read_study("A", a_cells, [a_runs, str(tmp_path / "copy.parquet")], "studies.a")
    tables.cells(runs({"van": [1.0], "suf": [1.0]})).to_parquet(tmp_path / "o.parquet")
    with pytest.raises(
        ValueError,
        match=r"not one study \(m / mix / sweep / suf in .*o\.parquet only; m / mix / sweep / "
        r"kpad8 in .*b-runs\.parquet only\); set studies\.b\.cells and studies\.b\.runs",
    ):
        studies.read_study("B", str(tmp_path / "o.parquet"), b_runs, "studies.b")
    with pytest.raises(ValueError) as err:
        studies.compare_studies(study("A", A_RUNS), study("B", runs({"van": [1.0]}, corpus="humaneval")))
    assert "\n" not in str(err.value)
    assert str(err.value) == (
        "studies A (A-runs.parquet) and B (B-runs.parquet) have no (model, corpus, phase, configuration) in common "
        "(A: m / mix (sweep); B: m / humaneval (sweep)); compare two studies of one model and corpus"
    )


def test_committed_h200_vs_cpu():
    """The committed H200 embedded (mix) and CPU embedded studies; numbers by hand from their runs Parquet."""
    sa = studies.read_study(
        "H200", str(ROOT / "results/gpu/h200-embedded-cells.parquet"), str(ROOT / "results/gpu/h200-embedded.parquet")
    )
    sb = studies.read_study(
        "CPU", str(ROOT / "results/cpu/embedded-cells.parquet"), str(ROOT / "results/cpu/embedded-runs.parquet")
    )
    ratios, confs = studies.compare_studies(sa, sb)
    r = row(ratios, "kpad8", "van")
    # H200 repeats 1, 2: 11479.214284 / 6530.195002 = 1.757867, 10421.353269 / 7400.919484 = 1.408116 (van's
    # repeat 3 has no kpad8 partner); CPU: 27.934905 / 52.535201 = 0.531737, one repeat
    assert (r["a_n"], r["a_ratio"]) == (2, pytest.approx(math.sqrt(1.757867 * 1.408116), abs=1e-5))
    assert (r["b_n"], r["b_ratio"]) == (1, pytest.approx(0.531737, abs=1e-6))
    assert r["b_over_a"] == pytest.approx(0.531737 / 1.573302, abs=1e-5)  # 0.337975
    assert r["b_over_a_note"] == "no interval: A n = 2, B single measurement"
    both = ratios[ratios["match"] == "both"]
    assert list(both["numerator"] + "/" + both["denominator"]) == [
        "suf/van",
        "kpad4/van",
        "kpad8/van",
        "kpad4/suf",
        "kpad8/suf",
    ]
    cov = studies.coverage(confs)
    assert [c[3] for c in cov["only in A"]["configurations"]] == ["kpad12", "nopad4", "nopad8"]
    assert [c[1] for c in cov["only in B"]["cells"]] == ["humaneval", "sharegpt"]
    van = confs[(confs["corpus"] == "mix") & (confs["configuration"] == "van")].iloc[0]
    assert (van["a_tok_s"], van["b_tok_s"]) == (pytest.approx(7400.919484), pytest.approx(52.535201))


def snakemake(tmp_path, *config):
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path)]
    cmd += ["compare_studies", "--cores", "1", "--configfile", str(ROOT / "config" / "embedded.yaml")]
    return subprocess.run([*cmd, "--config", *config], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_rule_compare_studies_on_the_committed_data(tmp_path):
    gpu, cpu = ROOT / "results" / "gpu", ROOT / "results" / "cpu"
    p = snakemake(
        tmp_path,
        f"studies={{a: {{label: 'H200, vLLM 0.26.0', cells: {gpu}/h200-embedded-cells.parquet, "
        f"runs: {gpu}/h200-embedded.parquet}}, b: {{cells: {cpu}/embedded-cells.parquet, "
        f"runs: [{cpu}/embedded-runs.parquet]}}, out: out, figures: fig}}",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(f.name for f in (tmp_path / "out").iterdir()) == [
        "compare_studies.md",
        "study_configurations.csv",
        "study_configurations.parquet",
        "study_ratios.csv",
        "study_ratios.parquet",
    ]
    assert sorted(f.name for f in (tmp_path / "fig").iterdir()) == ["compare_studies.png", "compare_studies.svg"]
    md = (tmp_path / "out" / "compare_studies.md").read_text()
    assert md.startswith("# Study comparison: A = H200, vLLM 0.26.0 vs B = B\n")  # label absent: "B"
    assert "| kpad8 / van | 1.57x (n = 2; 2 of 2 repeats favour) | 0.53x (single measurement) | **0.34x**" in md
    csv = pd.read_csv(tmp_path / "out" / "study_ratios.csv")
    assert len(csv) == len(pd.read_parquet(tmp_path / "out" / "study_ratios.parquet")) == 23


def test_rule_compare_studies_names_a_wrong_file_in_one_line(tmp_path):
    cpu = ROOT / "results" / "cpu"
    p = snakemake(
        tmp_path,
        f"studies={{a: {{cells: {cpu}/embedded-cells.parquet, runs: {cpu}/embedded-runs.parquet}}, "
        f"b: {{cells: {cpu}/embedded-cells.parquet, runs: {cpu}/embedded-cells.parquet}}}}",
    )
    assert p.returncode != 0
    line = f"{cpu}/embedded-cells.parquet: not a runs table (lacks ['repeat', 'status', 'output_tok_s']); set "
    assert line + "studies.b.runs to the run records of a study that ran (results/runs.parquet), not the cells" in (
        p.stdout + p.stderr
    )
