"""Figures of the run records (kpadstudy.repeat_figures) and the fixed palette, checked on their data
(annotations, points, colours), not pixels, on hand-made runs with holes: a lost run, an invalid run, a boot
failure, a K with one side missing, a cell with one repeat only, a model without nopad."""

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from kpadstudy import paired, palette, repeat_figures


def run(model, corpus, conf, method, k, repeat, tok, status="ok", minute=0, phase="sweep"):
    return {
        "model": model,
        "corpus": corpus,
        "configuration": conf,
        "method": method,
        "k": k,
        "repeat": repeat,
        "status": status,
        "output_tok_s": tok,
        "phase": phase,
        "started_at": f"2026-12-01T10:{minute:02d}:00+0000",
    }


# cell A/sharegpt: 3 repeats; kpad8/nopad8 = 1.2, 1.1, 1.3; kpad4/nopad4 paired in r1 only (nopad4 r2
# invalid, r3 lost); cell B/code: van and kpad4 only (no nopad); cell A/mix: one repeat, nopad8 boot_failed
RUNS = pd.DataFrame(
    [
        run("A", "sharegpt", "van", "van", None, 1, 100.0, minute=0),
        run("A", "sharegpt", "kpad8", "kpad", 8, 1, 120.0, minute=1),
        run("A", "sharegpt", "nopad8", "nopad", 8, 1, 100.0, minute=2),
        run("A", "sharegpt", "kpad4", "kpad", 4, 1, 150.0, minute=3),
        run("A", "sharegpt", "nopad4", "nopad", 4, 1, 100.0, minute=4),
        run("A", "sharegpt", "van", "van", None, 2, 200.0, minute=5),
        run("A", "sharegpt", "kpad8", "kpad", 8, 2, 220.0, minute=6),
        run("A", "sharegpt", "nopad8", "nopad", 8, 2, 200.0, minute=7),
        run("A", "sharegpt", "kpad4", "kpad", 4, 2, 210.0, minute=8),
        run("A", "sharegpt", "nopad4", "nopad", 4, 2, None, status="invalid", minute=9),
        run("A", "sharegpt", "van", "van", None, 3, 100.0, minute=10),
        run("A", "sharegpt", "kpad8", "kpad", 8, 3, 130.0, minute=11),
        run("A", "sharegpt", "nopad8", "nopad", 8, 3, 100.0, minute=12),
        run("A", "sharegpt", "kpad4", "kpad", 4, 3, 130.0, minute=13),
        run("A", "sharegpt", "nopad4", "nopad", 4, 3, None, status="lost", minute=14),
        run("B", "code", "van", "van", None, 1, 50.0, minute=0),
        run("B", "code", "kpad4", "kpad", 4, 1, 60.0, minute=1),
        run("A", "mix", "kpad8", "kpad", 8, 1, 80.0, minute=0),
        run("A", "mix", "nopad8", "nopad", 8, 1, None, status="boot_failed", minute=1),
    ]
)


def texts(ax):
    return sorted(t.get_text() for t in ax.texts)


def test_palette_gives_each_family_and_k_one_fixed_style():
    assert palette.style("van")["color"] == "#000000" and palette.style("suf")["marker"] == "s"
    assert palette.style("trident", "suf", 32)["color"] == "#CC79A7"  # a named family wins over its method
    kp, nop = palette.style("kpad8"), palette.style("nopad8")
    assert kp["color"] == nop["color"] == palette.k_colour(8)
    assert (kp["linestyle"], nop["linestyle"], nop["markerfacecolor"]) == ("-", "--", "white")
    from matplotlib import colormaps

    assert palette.k_colour(4) == colormaps["viridis"](0.0) and palette.k_colour(32) == colormaps["viridis"](0.9)
    assert palette.k_colour(64) == palette.k_colour(32) and palette.k_colour(2) == palette.k_colour(4)  # clipped
    assert palette.style("medusa")["color"] == "#999999"  # a family not listed: grey


def test_kpad_vs_nopad_draws_each_repeats_ratio_and_the_mean_with_its_interval():
    fig = repeat_figures.kpad_vs_nopad(RUNS, note="test")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["A / mix", "A / sharegpt"]  # B has no nopad
    ax_mix, ax = [a for a in fig.axes if a.get_title()]
    assert texts(ax_mix) == ["no pair"]  # nopad8 did not boot: no ratio, never a number
    s8 = paired.summarize([1.2, 1.1, 1.3])
    s4 = paired.summarize([1.5])
    assert texts(ax) == sorted(
        [
            f"{s4['ratio']:.2f}x, single, 1/1",
            f"{s8['ratio']:.2f}x ({s8['ci_low']:.2f}-{s8['ci_high']:.2f}), 3/3",
        ]
    )
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]  # not the error bars
    points = np.concatenate([c.get_offsets()[:, 1] for c in scatters])
    assert sorted(np.round(points, 3)) == [1.1, 1.2, 1.3, 1.5]
    dots = [c for c in scatters if len(c.get_offsets()) == 3][0]
    assert mcolors.same_color(dots.get_facecolor()[0][:3], palette.k_colour(8)[:3])


def test_paired_ratios_labels_interval_or_n_and_says_when_nothing_paired():
    table = paired.paired_table(RUNS)
    fig = repeat_figures.paired_ratios(table, note="")
    by_title = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert sorted(by_title) == ["A / mix (sweep)", "A / sharegpt (sweep)", "B / code (sweep)"]
    row = table[(table["corpus"] == "sharegpt") & (table["numerator"] == "kpad8") & (table["denominator"] == "van")]
    r = row.iloc[0]
    assert f"{r['ratio']:.2f}x ({r['ci_low']:.2f}-{r['ci_high']:.2f}), 3/3" in texts(by_title["A / sharegpt (sweep)"])
    assert texts(by_title["B / code (sweep)"]) == ["1.20x, single, 1/1"]
    assert "no paired repeat" in texts(by_title["A / mix (sweep)"])
    assert "no cell has two configurations" in repeat_figures.paired_ratios(table.iloc[0:0]).axes[0].texts[0].get_text()


def test_paired_ratio_labels_stay_inside_their_panel_on_a_wide_interval():
    """The pooled 135M lease's panel (kpadautou12 / vansync 1.67x, 0.98-2.84; vansync / suf 0.51-0.94): every
    label ends inside its panel, and the axis is labelled 0.5, 0.7, 1.0, 1.5, 2.0, ... (no overlapping 0.8, 0.9)."""
    rows = [("kpadautou12", "vansync", 3, 1.67, 0.98, 2.84), ("vansync", "suf", 3, 0.69, 0.51, 0.94)]
    table = pd.DataFrame(
        [
            {"model": "M", "corpus": "sharegpt", "phase": "sweep", "numerator": a, "denominator": b, "n": n,
             "ratio": r, "ci_low": lo, "ci_high": hi, "favour": n}
            for a, b, n, r, lo, hi in rows
        ]
    )  # fmt: skip
    fig = repeat_figures.paired_ratios(table, note="")
    fig.canvas.draw()
    ax = [a for a in fig.axes if a.get_title()][0]
    assert [t.get_window_extent().x1 <= ax.bbox.x1 for t in ax.texts] == [True, True]
    labels = [t.get_text() for t in ax.get_xticklabels() if ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    assert labels[:5] == ["0.5", "0.7", "1.0", "1.5", "2.0"]


def test_paired_ratio_limits_leave_out_zero_and_infinite_values():
    """A ratio of 0 (an infinite denominator) and an infinite interval bound draw no point a log axis cannot hold:
    the limits come from the finite positive values (0.9 and 1.2 here: 0.818 .. 1.2 x 1.6 = 1.92)."""
    table = pd.DataFrame(
        [
            {"model": "M", "corpus": "c", "phase": "sweep", "numerator": a, "denominator": "suf", "n": 3,
             "ratio": r, "ci_low": lo, "ci_high": hi, "favour": 1}
            for a, r, lo, hi in [("kpad8", 0.0, float("nan"), float("nan")), ("nopad8", 1.1, 0.9, float("inf")),
                                 ("van", 1.2, 1.0, 1.2)]
        ]
    )  # fmt: skip
    ax = [a for a in repeat_figures.paired_ratios(table).axes if a.get_title()][0]
    assert np.allclose(ax.get_xlim(), (0.9 / 1.1, 1.2 * 1.6))


def test_run_timeline_marks_runs_that_are_not_ok_with_their_status_and_bands_each_repeat():
    fig = repeat_figures.run_timeline(RUNS, note="")
    by_title = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert sorted(by_title) == ["A / mix: 2 runs, 1 ok", "A / sharegpt: 15 runs, 13 ok", "B / code: 2 runs, 2 ok"]
    ax = by_title["A / sharegpt: 15 runs, 13 ok"]
    assert texts(ax) == ["nopad4 r2: invalid", "nopad4 r3: lost", "r1", "r2", "r3"]
    van = [line for line in ax.lines if line.get_label() == "van"][0]
    assert list(van.get_xdata()) == [0, 5, 10] and list(van.get_ydata()) == [100, 200, 100]
    assert van.get_marker() == "v" and mcolors.same_color(van.get_color(), "#000000")
    assert "nopad8 r1: boot_failed" in texts(by_title["A / mix: 2 runs, 1 ok"])


@pytest.mark.parametrize(
    "draw", [repeat_figures.kpad_vs_nopad, repeat_figures.run_timeline, repeat_figures.kpadauto_lengths]
)
def test_run_figures_of_no_runs_say_so(draw):
    fig = draw(RUNS.iloc[0:0])
    assert len(fig.axes) == 1 and fig.axes[0].texts[0].get_text().endswith(
        (
            "no cell ran both kpad and nopad at one K",
            "no run records with start times",
            "no kpadauto runs in these records",
        )
    )


def test_kpadauto_lengths_draws_each_runs_shares_by_length_and_only_the_status_of_a_failed_run():
    def auto(repeat, counts, status="ok", full=1.0):
        r = run("A", "sharegpt", "kpadauto12", "kpadauto", 12, repeat, 100.0, status=status)
        return {**r, "lengths": "0,2,4,8,12", "auto_steps_by_length": counts, "full_share_decode": full}

    runs = pd.DataFrame(
        [
            auto(1, [300, 0, 100]),  # 75% at L = 0, 25% at L = 2
            auto(2, [0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 30], full=0.96),  # 25% at 4, 75% at 12
            auto(3, [50, 0, 50], status="invalid"),  # counters of a run that is not ok are not drawn
            run("A", "sharegpt", "van", "van", None, 1, 90.0),  # not kpadauto: no bar
        ]
    )
    fig = repeat_figures.kpadauto_lengths(runs)
    (ax,) = [a for a in fig.axes if a.get_title()]
    assert ax.get_title() == "A / sharegpt"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["kpadauto12 r1", "kpadauto12 r2", "kpadauto12 r3"]
    bars = sorted(
        (round(p.get_y() + p.get_height() / 2), round(p.get_x(), 3), round(p.get_width(), 3)) for p in ax.patches
    )
    # r1 at y = 2, r2 at y = 1, r3 (invalid) at y = 0 has none
    assert bars == [(1, 0.0, 0.25), (1, 0.25, 0.75), (2, 0.0, 0.75), (2, 0.75, 0.25)]
    assert texts(ax) == sorted(["75%", "25%", "400 steps, FULL 1.000", "25%", "75%", "40 steps, FULL 0.960", "invalid"])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["L = 0", "L = 2", "L = 4", "L = 8", "L = 12"]


def test_kpadauto_lengths_draws_the_steps_run_unpadded_and_their_padded_shape_full_share():
    # kpadautou12 r2 of the H100 lease of 2026-12-05 15:37: 232 steps padded, 1,708 unpadded (of 1,940 chosen)
    r = run("A", "sharegpt", "kpadautou12", "kpadauto", 12, 1, 100.0)
    r |= {"lengths": "0,2,4,8,12", "auto_steps_by_length": [2, 0, 46, 0, 69, 0, 0, 0, 14, 0, 0, 0, 101]}
    r |= {"kpad_auto_unpadded_steps": 1708, "full_share_decode": 219 / 1512, "full_share_auto_shape": 0.5}
    fig = repeat_figures.kpadauto_lengths(pd.DataFrame([r]))
    (ax,) = [a for a in fig.axes if a.get_title()]
    widths = [round(p.get_width(), 4) for p in ax.patches]
    assert widths == [round(n / 1940, 4) for n in (2, 46, 69, 14, 101, 1708)]
    assert texts(ax) == sorted(["88%", "1,940 steps, FULL 0.500 at padded shapes"])
    assert [t.get_text() for t in fig.legends[0].get_texts()][-1] == "unpadded"


def _confirmation(hours_later: int) -> pd.DataFrame:
    """A/sharegpt's confirmation, ``hours_later`` after the sweep: kpad8/nopad8 = 0.9, 1.0, 1.1."""
    rows = []
    for repeat, (kp, nop) in enumerate([(90.0, 100.0), (100.0, 100.0), (110.0, 100.0)], start=1):
        for i, (conf, method, tok) in enumerate([("kpad8", "kpad", kp), ("nopad8", "nopad", nop)]):
            r = run("A", "sharegpt", conf, method, 8, repeat, tok, minute=2 * repeat + i, phase="confirm")
            r["started_at"] = f"2026-12-01T{10 + hours_later}:{2 * repeat + i:02d}:00+0000"
            rows.append(r)
    return pd.DataFrame(rows)


def test_kpad_vs_nopad_gives_the_confirmation_its_own_panel():
    both = pd.concat([RUNS[(RUNS["corpus"] == "sharegpt")], _confirmation(5)], ignore_index=True)
    fig = repeat_figures.kpad_vs_nopad(both)
    by_title = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert sorted(by_title) == ["A / sharegpt (confirm)", "A / sharegpt (sweep)"]
    s = paired.summarize([0.9, 1.0, 1.1])
    # 1.0 is not above 1: one of the three repeats (1.1) favours kpad8
    label = f"{s['ratio']:.2f}x ({s['ci_low']:.2f}-{s['ci_high']:.2f}), 1/3"
    assert texts(by_title["A / sharegpt (confirm)"]) == [label]


def test_run_timeline_keeps_a_last_repeat_of_one_run_and_the_highest_run_below_the_band_labels():
    """As in the 8B lease cut short: r1 vansync, kpadauto12 at minutes 0 and 2, r2 vansync alone at minute 4.
    Runs 2 min apart: the r2 band spans minutes 4-6 and its label sits at minute 5, inside the axis; the y axis
    reaches 1.12x matplotlib's autoscaled top, so the highest run (3,491) stays under the labels at the top."""
    runs = pd.DataFrame(
        [
            run("8B", "sharegpt", "vansync", "van", None, 1, 3491.0, minute=0),
            run("8B", "sharegpt", "kpadauto12", "kpadauto", 12, 1, 3327.0, minute=2),
            run("8B", "sharegpt", "vansync", "van", None, 2, 3425.0, minute=4),
        ]
    )
    ax = [a for a in repeat_figures.run_timeline(runs).axes if a.get_title()][0]
    r2 = [t for t in ax.texts if t.get_text() == "r2"][0]
    assert r2.xy[0] == 5.0 and ax.get_xlim()[1] >= 6.0
    assert ax.get_ylim()[1] >= 3491.0 * 1.12


def test_run_timeline_cuts_a_pause_between_leases_out_of_its_axis():
    both = pd.concat([RUNS[(RUNS["corpus"] == "sharegpt")], _confirmation(5)], ignore_index=True)
    fig = repeat_figures.run_timeline(both)
    ax = [a for a in fig.axes if a.get_title()][0]
    # the sweep's last run at minute 14, the confirmation's first at 5 h 02 min: the 4 h 48 min pause -> 2 min
    assert "4 h 48 min later" in texts(ax)
    kpad8 = [line for line in ax.lines if line.get_label() == "kpad8"]
    confirm_x = sorted(x for line in kpad8 for x in line.get_xdata() if x > 14)
    assert confirm_x == [16.0, 18.0, 20.0]
    assert ax.get_xlabel() == "minutes since the cell's first run (long pauses cut out)"
    assert {"confirm r1", "confirm r2", "confirm r3", "r1", "r2", "r3"} <= set(texts(ax))


def test_paired_ratios_put_the_sweep_before_its_confirmation():
    both = pd.concat([RUNS[(RUNS["corpus"] == "sharegpt")], _confirmation(5)], ignore_index=True)
    fig = repeat_figures.paired_ratios(paired.paired_table(both))
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == ["A / sharegpt (sweep)", "A / sharegpt (confirm)"]
