"""tools/aggregate_records.py: tables of the runs that finished when a study stopped mid-repeat."""

import json

import pandas as pd
import pytest
from conftest import load_tool

tool = load_tool("aggregate_records")


def write_record(root, configuration, method, k, repeat, tok_s, status="ok"):
    path = root / "runs" / "M" / "sharegpt" / configuration / f"r{repeat}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = {
        "model": "M",
        "corpus": "sharegpt",
        "configuration": configuration,
        "method": method,
        "k": k,
        "pad": method == "kpad",
        "device": "cuda",
        "repeat": repeat,
        "status": status,
        "output_tok_s": tok_s,
    }
    path.write_text(json.dumps(rec))


def test_finished_runs_become_tables_and_the_missing_run_is_named(tmp_path, capsys):
    # van in 3 repeats, kpad4 in repeats 1 and 2: the third kpad4 run never started
    for repeat, tok_s in [(1, 100.0), (2, 200.0), (3, 400.0)]:
        write_record(tmp_path, "van", "van", 0, repeat, tok_s)
    write_record(tmp_path, "kpad4", "kpad", 4, 1, 110.0)
    write_record(tmp_path, "kpad4", "kpad", 4, 2, 260.0)
    out = tmp_path / "out" / "lease"
    out.parent.mkdir()
    assert tool.main([str(tmp_path), str(out)]) == 0
    err = capsys.readouterr().err
    assert "5 run records under" in err and "{'ok': 5}" in err
    assert "1 run(s) of the grid they span have no record:" in err
    assert "- M / sharegpt / kpad4 / r3: no record (not run or not finished)" in err
    runs = pd.read_parquet(f"{out}-runs.parquet")
    assert sorted(zip(runs["configuration"], runs["repeat"], strict=True)) == [
        ("kpad4", 1),
        ("kpad4", 2),
        ("van", 1),
        ("van", 2),
        ("van", 3),
    ]
    cells = pd.read_parquet(f"{out}-cells.parquet").set_index("configuration")
    assert cells.loc["kpad4", "n_valid"] == 2 and cells.loc["kpad4", "output_tok_s_median"] == 185.0
    assert cells.loc["van", "output_tok_s_median"] == 200.0
    md = open(f"{out}-paired.md").read()
    assert md.startswith("5 run records under")
    # ratios only from the repeats with both runs: 110/100 and 260/200, geometric mean sqrt(1.1 * 1.3)
    assert "kpad4 / van: 1.20x (n = 2), 2 of 2 repeats favour kpad4 [r1: 1.100, r2: 1.300]" in md


def test_nothing_missing_says_zero(tmp_path, capsys):
    write_record(tmp_path, "van", "van", 0, 1, 100.0)
    tool.main([str(tmp_path), str(tmp_path / "t")])
    assert "1 run records under" in capsys.readouterr().err
    assert "0 run(s) of the grid they span have no record\n" in open(tmp_path / "t-paired.md").read()


def test_a_folder_without_records_is_refused_naming_it(tmp_path):
    with pytest.raises(SystemExit, match=f"{tmp_path}: no run record under runs/<model>"):
        tool.main([str(tmp_path), str(tmp_path / "t")])


def test_timings_from_the_benchmark_files(tmp_path):
    root = tmp_path / "results"
    write_record(root, "van", "van", 0, 1, 100.0)
    rec = root / "runs" / "M" / "sharegpt" / "van" / "r1.json"
    rec.write_text(json.dumps({**json.loads(rec.read_text()), "boot_s": 61.0, "duration_s": 44.4}))
    bench = root / "benchmarks" / "run" / "M" / "sharegpt" / "van" / "r1.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\n130.4\t0:02:10\n")
    tool.main([str(root), str(tmp_path / "t")])
    text = open(tmp_path / "t-timings.md").read()
    assert "| run | 1 | 130 | 61 | 44 |" in text and "| run | M/sharegpt/van/r1 | 130 | 61 | 44 | ok |" in text
