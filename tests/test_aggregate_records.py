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
    with pytest.raises(SystemExit, match=f"{tmp_path}: no run record under runs/<model>.*; give the results/ folder"):
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
    # a record without the boot's parts (older records): the boot alone
    assert (
        "| run | 1 | 130 | 61 |  | 44 |" in text
        and "| run | M/sharegpt/van/r1 | 130 | 61 |  |  |  |  | 44 | ok |" in text
    )


def test_a_copied_record_is_refused_naming_it_and_a_stray_file_is_listed_not_read(tmp_path, capsys):
    write_record(tmp_path, "van", "van", 0, 1, 100.0)
    write_record(tmp_path, "kpad8", "kpad", 8, 1, 150.0)
    cell = tmp_path / "runs" / "M" / "sharegpt"
    (cell / "van" / "r1.old.json").write_text((cell / "van" / "r1.json").read_text())
    out = tmp_path / "t"
    tool.main([str(tmp_path), str(out)])
    assert f"{cell / 'van' / 'r1.old.json'}: not read (a run record is named r<repeat>.json)" in capsys.readouterr().err
    assert pd.read_parquet(f"{out}-runs.parquet")["configuration"].tolist() == ["kpad8", "van"]
    (cell / "kpad4").mkdir()
    (cell / "kpad4" / "r1.json").write_text((cell / "kpad8" / "r1.json").read_text())
    with pytest.raises(SystemExit) as err:
        tool.main([str(tmp_path), str(out)])
    assert str(err.value).startswith(
        f"aggregate_records: {cell / 'kpad4' / 'r1.json'}: the record says {{'configuration': 'kpad8'}}, its path "
        "{'model': 'M', 'corpus': 'sharegpt', 'configuration': 'kpad4', 'repeat': 1}: a copied or renamed record"
    )


def test_not_json_is_one_line_naming_the_file(tmp_path):
    write_record(tmp_path, "van", "van", 0, 1, 100.0)
    bad = tmp_path / "runs" / "M" / "sharegpt" / "van" / "r2.json"
    bad.write_text("garbage{")
    with pytest.raises(
        SystemExit, match=f"aggregate_records: {bad}: not a JSON record .*; delete it and rerun its job"
    ):
        tool.main([str(tmp_path), str(tmp_path / "t")])
    assert not list(tmp_path.glob("t-*"))


def test_the_grid_spans_every_cell_and_failed_runs_are_listed_with_their_reason(tmp_path, capsys):
    write_record(tmp_path, "van", "van", 0, 1, 100.0)
    write_record(tmp_path, "kpad4", "kpad", 4, 1, 120.0, status="invalid")
    other = tmp_path / "runs" / "N" / "sharegpt" / "van" / "r1.json"
    other.parent.mkdir(parents=True)
    rec = json.loads((tmp_path / "runs" / "M" / "sharegpt" / "van" / "r1.json").read_text())
    other.write_text(json.dumps({**rec, "model": "N"}))
    rec = tmp_path / "runs" / "M" / "sharegpt" / "kpad4" / "r1.json"
    rec.write_text(json.dumps({**json.loads(rec.read_text()), "reason": "3 of 8 requests failed"}))
    tool.main([str(tmp_path), str(tmp_path / "t")])
    err = capsys.readouterr().err
    # N never ran kpad4: the grid is every configuration of the records in every cell
    assert "1 run(s) of the grid they span have no record:\n- N / sharegpt / kpad4 / r1: no record" in err
    assert "- M / sharegpt / kpad4 / r1: invalid (3 of 8 requests failed), not in the ratios" in err


def test_an_out_prefix_without_its_folder_is_refused_before_reading(tmp_path):
    write_record(tmp_path, "van", "van", 0, 1, 100.0)
    with pytest.raises(SystemExit, match="OUT_PREFIX '.*nodir/t': give a folder that exists .* create .*nodir first"):
        tool.main([str(tmp_path), str(tmp_path / "nodir" / "t")])
    with pytest.raises(SystemExit, match="OUT_PREFIX '.*out/': give a folder that exists and a name prefix"):
        tool.main([str(tmp_path), str(tmp_path / "out") + "/"])
