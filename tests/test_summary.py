"""The study's summary (kpadstudy.summary): per cell the advice, its paired ratios over van and suf with
interval and n, and its flags, on hand-made runs whose ratios are computed by hand."""

import pandas as pd

from kpadstudy import advice, summary, tables


def _runs():
    rows = []
    # cell M/c: 3 repeats; kpad8/van 1.2, 1.2, 1.3; kpad8/suf 120/110, 240/220, 130/110; the machine doubles in r2
    for rep, (v, s, k) in enumerate([(100, 110, 120), (200, 220, 240), (100, 110, 130)], 1):
        for conf, method, kk, tok in (("van", "van", None, v), ("suf", "suf", 32, s), ("kpad8", "kpad", 8, k)):
            rows.append(
                {"model": "M", "corpus": "c", "configuration": conf, "method": method, "k": kk, "pad": method == "kpad",
                 "repeat": rep, "status": "ok", "output_tok_s": float(tok), "device": "cuda", "phase": "sweep"}
            )  # fmt: skip
    # cell M/d: van once, kpad4 lost
    rows.append(
        {"model": "M", "corpus": "d", "configuration": "van", "method": "van", "k": None, "pad": False, "repeat": 1,
         "status": "ok", "output_tok_s": 50.0, "device": "cuda", "phase": "sweep"}
    )  # fmt: skip
    rows.append(
        {"model": "M", "corpus": "d", "configuration": "kpad4", "method": "kpad", "k": 4, "pad": True, "repeat": 1,
         "status": "lost", "output_tok_s": None, "device": "cuda", "phase": "sweep"}
    )  # fmt: skip
    return pd.DataFrame(rows)


def test_summary_gives_paired_ratios_with_intervals_and_flags():
    """kpad8/van: geometric mean of 1.2, 1.2, 1.3 = 1.872^(1/3) = 1.232; kpad8/suf: (1.0909^2 x 1.1818)^(1/3)
    = 1.120. kpad8's repeats 120 / 240 / 130: median 130, MAD 10 = 7.7% > 5%: noisy. The r2 doubling moves
    every configuration alike and drifts none (last / first: van 1.00, suf 1.00, kpad8 1.08 < 1.10). No nopad8 ran:
    suf (K=32) is the best unpadded configuration, and kpad8's gain over it holds 1, so suf serves without the patch."""
    runs = _runs()
    cells = tables.cells(runs)
    text = summary.summary_text(advice.recommend(cells, 0.01, runs), cells, runs, {"figures": "figures/"})
    assert text == (
        "# K-pad study: summary\n\n"
        "- M / c (sweep): serve kpad8; 1.23x (1.10-1.38, n = 3) over van; 1.12x (1.00-1.26, n = 3) over suf; "
        "padding's gain not clear: suf serves without the patch (recommendations.md); flags: noisy (kpad8)\n"
        "- M / d (sweep): serve van; no suf number to compare with; flags: no valid run (kpad4: lost), "
        "single measurement\n\n"
        "Files:\n- figures: figures/\n"
    )


def test_summary_of_cells_without_run_records_uses_medians():
    runs = _runs()
    cells = tables.cells(runs)
    text = summary.summary_text(advice.recommend(cells, 0.01, None), cells, None)
    assert (
        "- M / c (sweep): serve kpad8; 1.30x (medians, no run records) over van; "
        "1.18x (medians, no run records) over suf" in text
    )


def test_drift_flags_say_which_phase_and_what_ratio():
    """kpad8's last sweep repeat 130 over its first 100 = 1.30 (> 1.10); its confirmation median 200 over its sweep
    median 130 (100, 240, 130) = 1.54: both flagged, each saying what it is."""
    runs = _runs()
    runs = runs[runs["corpus"] == "c"].copy()
    runs.loc[(runs["configuration"] == "kpad8") & (runs["repeat"] == 1), "output_tok_s"] = 100.0
    confirm = runs.assign(phase="confirm", output_tok_s=runs["output_tok_s"] * 0 + 200.0)
    both = pd.concat([runs, confirm], ignore_index=True)
    cells = tables.cells(both)
    text = summary.summary_text(advice.recommend(cells, 0.01, both), cells, both)
    assert "kpad8 last/first (sweep) 1.30" in text and "kpad8 confirm/sweep 1.54" in text, text


def test_short_load_flags_valid_runs_under_30_s_of_its_phase():
    """Cell M/c's 9 valid sweep runs measured 45 s but kpad8 r2 (28.4 s) and van r3 (29.9 s); a confirmation run of
    20 s is another phase's, and cell d's lost kpad4 (no duration) and van (12 s, its only valid run) count in
    their own cell: 2 of 9 there, 1 of 1 in d. A table without phases is the sweep's, durations stored as text
    read as numbers; without run records, no flag."""
    runs = _runs().assign(duration_s=45.0)
    runs.loc[(runs["configuration"] == "kpad8") & (runs["repeat"] == 2), "duration_s"] = 28.4
    runs.loc[(runs["configuration"] == "van") & (runs["repeat"] == 3), "duration_s"] = 29.9
    runs.loc[runs["corpus"] == "d", "duration_s"] = [12.0, float("nan")]
    confirm = runs[(runs["corpus"] == "c") & (runs["repeat"] == 1)].assign(phase="confirm", duration_s=20.0)
    cells = tables.cells(runs)
    recs = advice.recommend(cells, 0.01, runs)
    flags = summary.cell_flags(recs, cells, pd.concat([runs, confirm], ignore_index=True))
    assert (
        flags[("M", "c")][-1]
        == "short load (2 of 9 valid runs under 30 s of measured load, shortest kpad8 r2 at 28.4 s)"
    )
    assert (
        flags[("M", "d")][-2] == "short load (1 of 1 valid runs under 30 s of measured load, shortest van r1 at 12.0 s)"
    )
    no_phase = summary.cell_flags(recs, cells, runs.drop(columns="phase"))  # absent: the sweep
    assert no_phase[("M", "c")][-1] == flags[("M", "c")][-1]
    text = runs.assign(duration_s=runs["duration_s"].astype(str))  # numbers as text, "nan" for the lost run
    assert summary.cell_flags(recs, cells, text) == flags
    assert summary.cell_flags(recs, cells, None) == {
        ("M", "c"): ["noisy (kpad8)"],
        ("M", "d"): ["no valid run (kpad4: lost)", "single measurement"],
    }


def test_short_capture_flags_a_padded_list_that_stops_below_nopads_at_the_same_k():
    """Cell M/c's sweep: kpad8 captured up to 288 tokens (its other run has no sizes), nopad8 up to 512: flagged;
    kpadautou12 (416) has no nopad12 beside it and suf (512) is not padded: neither is. Its confirmation, where kpad8
    reached 512 too, and a failed kpad8 run with a short list count in their own phase only, and without the column
    there is no flag."""
    grid = ",".join(str(n) for n in (1, 2, 4, 8, 16, 24, 32, 288))
    rows = [
        ("kpad8", "kpad", 8, "sweep", "ok", grid),
        ("kpad8", "kpad", 8, "sweep", "ok", None),
        ("nopad8", "nopad", 8, "sweep", "ok", "1,2,4,8,496,512"),
        ("kpadautou12", "kpadauto", 12, "sweep", "ok", "1,2,4,13,416"),
        ("suf", "suf", 32, "sweep", "ok", "1,2,512"),
        ("kpad8", "kpad", 8, "confirm", "ok", "1,288,512"),
        ("kpad8", "kpad", 8, "confirm", "boot_failed", grid),
        ("nopad8", "nopad", 8, "confirm", "ok", "1,512"),
    ]
    columns = ["configuration", "method", "k", "phase", "status", "cudagraph_capture_sizes"]
    runs = pd.DataFrame(rows, columns=columns).assign(model="M", corpus="c", repeat=1, output_tok_s=1.0)
    rec = pd.Series({"model": "M", "corpus": "c", "phase": "sweep"})
    assert summary.short_capture(rec, runs) == "short capture list (kpad8 288 < nopad8 512 tokens)"
    assert summary.short_capture(rec.replace("sweep", "confirm"), runs) is None
    assert summary.short_capture(rec, runs.drop(columns="cudagraph_capture_sizes")) is None
    assert summary.short_capture(rec, None) is None
