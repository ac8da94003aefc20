"""Runs -> cells (median, MAD over valid repeats) -> best K; failed runs never become numbers."""

import json

import pandas as pd
import pytest

from kpadstudy import tables


def run(cfg, method, k, rep, status, tok, corpus="mix", model="M"):
    return {
        "model": model,
        "corpus": corpus,
        "configuration": cfg,
        "method": method,
        "k": k,
        "pad": method == "kpad",
        "device": "cuda",
        "repeat": rep,
        "status": status,
        "output_tok_s": tok,
        "tpot_mean_ms": 10.0,
        "ttft_mean_ms": 50.0,
        "tokens_per_request_step": 2.0,
        "acceptance_rate": 0.5,
        "mean_acceptance_length": 2.0,
    }


RUNS = pd.DataFrame(
    [
        run("van", "van", 0, 1, "ok", 100.0),
        run("van", "van", 0, 2, "ok", 110.0),
        run("van", "van", 0, 3, "ok", 130.0),
        run("suf", "suf", 32, 1, "ok", 200.0),
        run("suf", "suf", 32, 2, "invalid", 5.0),
        run("suf", "suf", 32, 3, "ok", 220.0),
        run("kpad4", "kpad", 4, 1, "ok", 240.0),
        run("kpad4", "kpad", 4, 2, "ok", 250.0),
        run("kpad4", "kpad", 4, 3, "ok", 260.0),
        run("kpad8", "kpad", 8, 1, "boot_failed", None),
        run("kpad8", "kpad", 8, 2, "boot_failed", None),
        run("kpad8", "kpad", 8, 3, "boot_failed", None),
    ]
)


def test_cells_median_mad_and_valid_counts():
    c = tables.cells(RUNS).set_index("configuration")
    assert c.loc["van", "output_tok_s_median"] == 110.0
    assert c.loc["van", "output_tok_s_mad"] == 10.0  # |100-110|, |110-110|, |130-110| -> median 10
    assert c.loc["van", "output_tok_s_rel_mad"] == 10.0 / 110.0 and bool(c.loc["van", "noisy"]) is True
    assert c.loc["kpad4", "output_tok_s_rel_mad"] == 10.0 / 250.0 and bool(c.loc["kpad4", "noisy"]) is False
    assert c.loc["suf", "output_tok_s_median"] == 210.0  # the invalid 5.0 is excluded
    assert (c.loc["suf", "n_runs"], c.loc["suf", "n_valid"], c.loc["suf", "statuses"]) == (3, 2, "invalid:1,ok:2")
    assert c.loc["kpad8", "n_valid"] == 0 and pd.isna(c.loc["kpad8", "output_tok_s_median"])
    assert c.loc["kpad8", "statuses"] == "boot_failed:3"


def test_best_kpad_ignores_configurations_without_valid_runs():
    b = tables.best_kpad(tables.cells(RUNS)).iloc[0]
    assert b["best_k"] == 4 and b["best_kpad_tok_s"] == 250.0
    assert b["bestkpad_over_suf"] == pytest.approx(250 / 210)
    assert b["bestkpad_over_van"] == pytest.approx(250 / 110)


def test_cell_without_any_valid_kpad_has_no_best_k():
    only_failed = RUNS[RUNS["configuration"].isin(["van", "kpad8"])]
    b = tables.best_kpad(tables.cells(only_failed)).iloc[0]
    assert pd.isna(b["best_k"]) and pd.isna(b["best_kpad_tok_s"])


def test_read_runs_names_a_bad_file(tmp_path):
    good = tmp_path / "r1.json"
    good.write_text(
        json.dumps(
            {"model": "M", "corpus": "c", "configuration": "van", "repeat": 1, "status": "ok", "commands": ["a"]}
        )
    )
    assert tables.read_runs([good]).loc[0, "commands"] == '["a"]'
    bad = tmp_path / "r2.json"
    bad.write_text(json.dumps({"model": "M"}))
    with pytest.raises(ValueError, match=r"r2.json: record lacks \['configuration', 'corpus', 'repeat', 'status'\]"):
        tables.read_runs([good, bad])


def test_cells_client_limited_any_valid_run():
    import pandas as pd

    from kpadstudy.tables import any_client_limited

    def runs(*flags, statuses=None):
        return pd.DataFrame({"client_limited": list(flags), "status": statuses or ["ok"] * len(flags)})

    assert any_client_limited(runs(False, True, False)) is True
    assert any_client_limited(runs(False, False)) is False
    assert any_client_limited(runs(False, None)) is None
    assert any_client_limited(runs()) is None
    assert any_client_limited(pd.DataFrame({"status": ["ok"]})) is None


def test_cells_of_runs_without_any_measurement():
    """Only boot failures and a run whose client wrote nothing: rows with empty medians, no error."""
    from kpadstudy.tables import cells, failure_label

    runs = pd.DataFrame(
        [
            {
                "model": "m",
                "corpus": "c",
                "configuration": "van",
                "method": "van",
                "k": 0,
                "pad": False,
                "device": "cpu",
                "repeat": 1,
                "status": "boot_failed",
                "reason": "no_kv_cache: ...",
            },
            {
                "model": "m",
                "corpus": "c",
                "configuration": "suf",
                "method": "suf",
                "k": 32,
                "pad": False,
                "device": "cpu",
                "repeat": 1,
                "status": "invalid",
                "reason": "server died during the measurement",
            },
        ]
    )
    t = cells(runs).set_index("configuration")
    assert (t.loc["van", "statuses"], t.loc["van", "n_valid"], t.loc["suf", "statuses"]) == (
        "boot_failed:1",
        0,
        "invalid:1",
    )
    assert t["output_tok_s_median"].isna().all() and t["output_tok_s_mad"].isna().all()
    assert failure_label(t.loc[["van"]]) == "did not boot" and failure_label(t.loc[["suf"]]) == "failed"


def test_read_cells_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"nope.parquet: no such file"):
        tables.read_cells(tmp_path / "nope.parquet")
    (tmp_path / "t.txt").write_text("not parquet")
    with pytest.raises(ValueError, match=r"t.txt is not a Parquet file"):
        tables.read_cells(tmp_path / "t.txt")
    pd.DataFrame({"model": ["m"], "corpus": ["c"], "configuration": ["van"], "status": ["ok"]}).to_parquet(
        tmp_path / "runs.parquet"
    )
    with pytest.raises(ValueError, match=r"is not a cells Parquet \(lacks \['k', 'method', 'output_tok_s_median'\]\)"):
        tables.read_cells(tmp_path / "runs.parquet")


def test_a_record_that_is_json_but_not_an_object_or_not_utf8_is_named(tmp_path):
    listed, binary = tmp_path / "r1.json", tmp_path / "r2.json"
    listed.write_text("[1, 2]")
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match=f"{listed}: not a run record \\(a JSON list\\); delete it and rerun its job"):
        tables.read_runs([listed])
    with pytest.raises(ValueError, match=f"{binary}: not a JSON record \\(.*codec can't decode.*\\); delete it"):
        tables.read_runs([binary])
