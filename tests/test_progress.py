"""Progress of a study (kpadstudy.progress): done / total, the runs going now, the ETA from finished runs."""

import json
from datetime import datetime, timezone

import pytest

from kpadstudy import progress

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=timezone.utc).timestamp()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")


def _record(root, rel, start, wall, boot, status="ok"):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"status": status, "started_at": _iso(start), "finished_at": _iso(start + wall), "boot_s": boot})
    )


SWEEP = [f"results/runs/m/c/{cfg}/r{r}.json" for r in (1, 2) for cfg in ("van", "suf", "kpad8")]  # 6 runs


def test_done_total_running_and_eta_by_hand(tmp_path):
    progress.write_plan(SWEEP, confirm_expected=3, root=tmp_path, now=T0)
    # three finished: walls 100, 120, 300 s (median 120), boots 60, 70, 80 (median 70); one lost
    _record(tmp_path, SWEEP[0], T0 + 0, 100, 60)
    _record(tmp_path, SWEEP[1], T0 + 100, 120, 70)
    _record(tmp_path, SWEEP[2], T0 + 220, 300, 80, status="lost")
    # one going now (its journal started in this invocation), one left by an earlier invocation (not going)
    for job, at in (("van/r2", T0 + 520), ("suf/r2", T0 - 3600)):
        log_dir = tmp_path / "results/logs/runs/m/c" / job
        log_dir.mkdir(parents=True)
        (log_dir / "attempts.jsonl").write_text(json.dumps({"attempt": 1, "event": "start", "at": _iso(at)}) + "\n")
    state = progress.progress(tmp_path, now=T0 + 540)
    assert state["done"] == 3
    assert state["total"] == 6 + 3  # sweep + the confirmation's expected runs
    assert state["by_status"] == {"lost": 1, "ok": 2}
    assert state["running"] == ["runs/m/c/van/r2"]
    assert (state["run_s"], state["boot_s"], state["parallel"]) == (120.0, 70.0, 2)
    assert state["eta_s"] == 3 * 120.0  # ceil(6 left / 2 at a time) x 120 s
    assert progress.line(state) == (
        "progress: 3 of 9 runs done (lost 1, ok 2); running: runs/m/c/van/r2; "
        "ETA 6 min (median run 2 min, boot 1 min, 2 at a time)"
    )


def test_confirmation_records_count_and_raise_the_total_past_the_expectation(tmp_path):
    progress.write_plan(SWEEP[:1], confirm_expected=1, root=tmp_path, now=T0)
    _record(tmp_path, SWEEP[0], T0, 90, 50)
    _record(tmp_path, "results/confirm/m/c/van/r1.json", T0 + 90, 110, 50)
    _record(tmp_path, "results/confirm/m/c/kpad8/r1.json", T0 + 200, 100, 50)
    state = progress.update(tmp_path, now=T0 + 300)
    assert (state["done"], state["total"], state["eta_s"]) == (3, 3, 0.0)
    written = json.loads((tmp_path / progress.JSON).read_text())
    assert written["done"] == 3
    md = (tmp_path / progress.MARKDOWN).read_text()
    assert "- runs done: 3 of 3 (ok: 3)" in md
    assert "- median run (start to record): 1 min; median server boot: 50 s" in md


def test_before_the_first_run_the_eta_is_unknown_and_without_a_plan_the_error_says_what_writes_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no progress plan; the Snakefile's onstart writes it"):
        progress.progress(tmp_path)
    progress.write_plan(SWEEP, confirm_expected=0, root=tmp_path, now=T0)
    state = progress.progress(tmp_path, now=T0 + 10)
    assert (state["done"], state["total"], state["eta_s"]) == (0, 6, None)
    assert progress.line(state).endswith("running: none; ETA unknown (no run finished yet)")


def test_confirm_configurations_counts_what_the_confirmation_reruns():
    from kpadstudy import plan

    server = {"cudagraph_mode": "FULL_AND_PIECEWISE", "gpu_memory_utilization": 0.85}

    def cfg(entries, enabled=True):
        return {"configurations": entries, "confirm": {"enabled": enabled, "repeats": 3}, "server": server}

    van, suf = {"method": "van"}, {"method": "suf", "k": 32}
    assert plan.confirm_configurations(cfg([van, suf, {"method": "kpad", "k": 8}, {"method": "nopad", "k": 8}])) == 4
    # two kpad Ks: van, suf, best, second-best
    assert plan.confirm_configurations(cfg([van, suf, {"method": "kpad", "k": [4, 8]}])) == 4
    # nopad at two Ks: nopad at the best K and the best nopad K, which may be the other one
    assert (
        plan.confirm_configurations(cfg([van, {"method": "kpad", "k": [4, 8]}, {"method": "nopad", "k": [4, 8]}])) == 5
    )
    assert plan.confirm_configurations(cfg([van, {"method": "kpad", "k": 8}, {"method": "nopad", "k": 4}])) == 3
    assert plan.confirm_configurations(cfg([van, suf, {"method": "kpad", "k": 8}], enabled=False)) == 0
