"""tools/land_lease.py: a lease's gpu.tgz landed as one data set's files, checked against a landed lease's own."""

import tarfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, load_tool

tool = load_tool("land_lease")
LANDED = ROOT / "results/gpu/h100-widened-8b-auto-retimed-r5"  # lease of 2026-12-06 14:43, order_seed 5, landed by hand


def gpu_tgz(tmp_path: Path, runs: pd.DataFrame | None = None, states: tuple[str, ...] = ("kpadrun/cfg",)) -> Path:
    """An archive laid out as run-on-h200.sh writes it, rebuilt from the landed lease's files."""
    tree = tmp_path / "tree"
    with tarfile.open(f"{LANDED}-records.tgz") as tar:
        tar.extractall(tree, filter="data")
    log = (tree / "results/snakemake.log").read_text()
    (tree / "results/snakemake.log").unlink()  # on the device it lies in the state folder
    for name in ("cells.parquet", "paired.md", "timings.md"):
        (tree / "results" / name).write_bytes(Path(f"{LANDED}-{name}").read_bytes())
    if runs is None:
        (tree / "results/runs.parquet").write_bytes(Path(f"{LANDED}-runs.parquet").read_bytes())
    else:
        runs.to_parquet(tree / "results/runs.parquet")
    for state in states:
        (tree / "tmp/kpad-gpu-run" / state).mkdir(parents=True)
        (tree / "tmp/kpad-gpu-run" / state / "snakemake.log").write_text(log)
    archive = tmp_path / "gpu.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for part in ("results", "tmp"):
            tar.add(tree / part, arcname=part)
    return archive


def members(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return sorted(m.name.rstrip("/") for m in tar.getmembers())


def test_landing_gives_back_the_hand_landed_files(tmp_path):
    out = tmp_path / "h100-x"
    summary = tool.land(gpu_tgz(tmp_path), out)
    for name in ("runs.parquet", "cells.parquet", "paired.md", "timings.md", "runs.csv", "cells.csv"):
        assert Path(f"{out}-{name}").read_bytes() == Path(f"{LANDED}-{name}").read_bytes(), name
    assert members(Path(f"{out}-records.tgz")) == members(Path(f"{LANDED}-records.tgz"))
    assert summary.splitlines()[-3:] == ["kpadautou12: 2 ok", "nopad12: 2 ok", "suf: 2 ok"]


def test_a_failed_run_is_printed_with_its_reason(tmp_path):
    runs = pd.read_parquet(f"{LANDED}-runs.parquet")
    row = runs.index[(runs["configuration"] == "suf") & (runs["repeat"] == 2)][0]
    runs.loc[row, ["status", "reason"]] = ["failed", "server did not come up within 600 s"]
    summary = tool.land(gpu_tgz(tmp_path, runs), tmp_path / "h100-x")
    assert summary.splitlines()[-1] == (
        "smollm2-wide-llama-3.1-8b/sharegpt/suf/r2: failed: server did not come up within 600 s"
    )
    assert "suf: 1 failed, 1 ok" in summary


def test_an_existing_output_is_not_overwritten(tmp_path):
    (tmp_path / "h100-x-paired.md").write_text("kept")
    with pytest.raises(SystemExit, match=f"land_lease: {tmp_path}/h100-x-paired.md exist already: choose another"):
        tool.land(gpu_tgz(tmp_path), tmp_path / "h100-x")
    assert (tmp_path / "h100-x-paired.md").read_text() == "kept"
    assert not (tmp_path / "h100-x-runs.parquet").exists()


def test_two_states_need_a_choice(tmp_path):
    archive = gpu_tgz(tmp_path, states=("kpadrun/cfg", "kpadrun2/cfg"))
    with pytest.raises(
        SystemExit, match=r"found tmp/kpad-gpu-run/kpadrun/cfg/snakemake.log, tmp/kpad-gpu-run/kpadrun2"
    ):
        tool.land(archive, tmp_path / "h100-x")
    tool.land(archive, tmp_path / "h100-x", state="kpadrun2/cfg")
    assert (tmp_path / "h100-x-records.tgz").exists()


def test_an_unfinished_archive_names_what_it_lacks(tmp_path):
    archive = tmp_path / "gpu.tgz"
    (tmp_path / "results/runs").mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "results", arcname="results")
    with pytest.raises(SystemExit, match="lacks results/runs.parquet, results/cells.parquet, results/paired.md"):
        tool.land(archive, tmp_path / "h100-x")


def test_a_missing_folder_and_a_broken_archive_are_refused(tmp_path):
    with pytest.raises(SystemExit, match=f"land_lease: {tmp_path}/nowhere does not exist"):
        tool.land(tmp_path / "gpu.tgz", tmp_path / "nowhere/h100-x")
    (tmp_path / "gpu.tgz").write_text("not gzip")
    with pytest.raises(SystemExit, match=f"land_lease: {tmp_path}/gpu.tgz: cannot read it as a tar archive"):
        tool.land(tmp_path / "gpu.tgz", tmp_path / "h100-x")


def test_a_stopped_pipeline_lands_with_partial_from_its_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # OUT_PREFIX relative to where it runs, as in the README's command
    archive = gpu_tgz(tmp_path)
    tree = tmp_path / "tree"
    for name in ("runs.parquet", "cells.parquet", "paired.md", "timings.md"):
        (tree / "results" / name).unlink()  # the pipeline stopped before its tables
    (tree / "results/runs/smollm2-wide-llama-3.1-8b/sharegpt/suf/r2.json").unlink()  # the run the lease lost
    with tarfile.open(archive, "w:gz") as tar:
        for part in ("results", "tmp"):
            tar.add(tree / part, arcname=part)
    with pytest.raises(SystemExit, match="lacks results/runs.parquet, .*; --partial makes the tables from the records"):
        tool.land(archive, tmp_path / "h100-x")
    summary = tool.land(archive, Path("h100-x"), partial=True)
    assert summary.splitlines() == ["kpadautou12: 2 ok", "nopad12: 2 ok", "suf: 1 ok"]
    paired = (tmp_path / "h100-x-paired.md").read_text()
    assert paired.startswith("5 run records under results ({'ok': 5}); 1 run(s) of the grid") and (
        "\n- smollm2-wide-llama-3.1-8b / sharegpt / suf / r2: no record (not run or not finished)\n" in paired
    )
    landed = pd.read_parquet(f"{LANDED}-runs.parquet").set_index(["configuration", "repeat"])["output_tok_s"]
    ours = pd.read_parquet(tmp_path / "h100-x-runs.parquet").set_index(["configuration", "repeat"])["output_tok_s"]
    assert ours.to_dict() == landed.drop(("suf", 2)).to_dict()
    assert "results/runs/smollm2-wide-llama-3.1-8b/sharegpt/suf/r1.json" in members(tmp_path / "h100-x-records.tgz")
