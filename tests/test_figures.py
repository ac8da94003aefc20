"""Figures are checked on their data (annotations, bars), not pixels."""

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from kpadstudy import figures


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


BEST = pd.DataFrame(
    [
        {
            "model": "A",
            "corpus": "mix",
            "best_k": 8,
            "best_kpad_tok_s": 1234.5,
            "van_tok_s": 1000.0,
            "suf_tok_s": 1100.0,
            "bestkpad_over_suf": 1234.5 / 1100,
            "bestkpad_over_van": 1.2345,
        },
        {
            "model": "A",
            "corpus": "code",
            "best_k": 4,
            "best_kpad_tok_s": 900.0,
            "van_tok_s": 1000.0,
            "suf_tok_s": 1000.0,
            "bestkpad_over_suf": 0.9,
            "bestkpad_over_van": 0.9,
        },
        {
            "model": "B",
            "corpus": "mix",
            "best_k": pd.NA,
            "best_kpad_tok_s": float("nan"),
            "van_tok_s": 10.0,
            "suf_tok_s": 20.0,
            "bestkpad_over_suf": float("nan"),
            "bestkpad_over_van": float("nan"),
        },
        {
            "model": "B",
            "corpus": "code",
            "best_k": 4,
            "best_kpad_tok_s": 50.0,
            "van_tok_s": 40.0,
            "suf_tok_s": 45.0,
            "bestkpad_over_suf": 50 / 45,
            "bestkpad_over_van": 1.25,
        },
    ]
).astype({"best_k": "Int64"})


def texts(fig):
    return sorted(t.get_text() for ax in fig.axes for t in ax.texts)


def test_heatmap_annotates_best_k_and_tok_s_and_marks_failed_cells():
    fig = figures.best_k_heatmap(BEST, note="n")
    assert texts(fig) == sorted(["K4\n900 tok/s", "K8\n1,234 tok/s", "K4\n50.0 tok/s", "no valid run"])
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["K4", "K8"]
    assert fig.axes[0].get_title() == (
        "Best K per cell: the kpad K with the highest median output tok/s in the K-sweep\nn"
    )
    long_note = "word " * 40
    title = figures.best_k_heatmap(BEST, note=long_note).axes[0].get_title()
    assert (
        len(title.splitlines()) >= 4
        and all(len(line) <= 80 for line in title.splitlines()[1:])
        and title.count("word") == 40
    )


def _kpad_cell(model, corpus, k, tok, statuses="ok:3"):
    return {"model": model, "corpus": corpus, "configuration": f"kpad{k}", "method": "kpad", "k": k, "pad": True,
            "output_tok_s_median": tok, "statuses": statuses, "n_valid": 0 if pd.isna(tok) else 3}  # fmt: skip


def test_heatmap_says_why_a_cell_has_no_best_k_marks_ties_and_keeps_k_colours():
    """Model A: K4 100 and K8 99.5 tie within 1%; model B: kpad4 did not boot on code and was lost on mix;
    model C ran on code only (mix not measured). K8's colour is the palette's whatever other Ks are shown."""
    from matplotlib.colors import same_color

    from kpadstudy import palette, tables

    cells = pd.DataFrame(
        [
            _kpad_cell("A", "code", 4, 100.0),
            _kpad_cell("A", "code", 8, 99.5),
            _kpad_cell("A", "mix", 8, 50.0),
            _kpad_cell("B", "code", 4, float("nan"), "boot_failed:3"),
            _kpad_cell("B", "mix", 4, float("nan"), "lost:3"),
            _kpad_cell("C", "code", 8, 70.0),
        ]
    )
    fig = figures.best_k_heatmap(tables.best_kpad(cells), cells=cells)
    assert texts(fig) == sorted(
        ["K4 = K8 within 1%\n100 tok/s", "K8\n50.0 tok/s", "did not boot", "lost", "K8\n70.0 tok/s", "not measured"]
    )
    ax = fig.axes[0]
    k8 = [p for p in ax.patches if p.get_xy() == (1, 0)][0]  # model A, corpus mix
    assert same_color(k8.get_facecolor(), palette.k_colour(8))


def test_bestkpad_over_suf_bars_are_ratios_from_one_and_losses_are_hatched():
    fig = figures.bestkpad_over_suf(BEST, corpus="mix")
    ax = fig.axes[0]
    (bar,) = ax.patches  # model B has no valid kpad run: no bar
    assert (round(bar.get_y(), 6), round(bar.get_height(), 6)) == (1.0, round(1234.5 / 1100 - 1, 6))
    assert bar.get_hatch() in (None, "")
    assert texts(fig) == sorted([f"{1234.5 / 1100:.2f}x (K8)", "no valid run"])
    (loss,) = figures.bestkpad_over_suf(BEST, corpus="code").axes[0].patches[:1]  # model A on code: 0.9x
    assert loss.get_hatch() == "//" and round(loss.get_height(), 6) == -0.1


def test_bestkpad_over_suf_for_a_corpus_not_in_the_data_says_so():
    fig = figures.bestkpad_over_suf(BEST, corpus="nosuchmix")
    assert texts(fig) == ["no cells for corpus 'nosuchmix' in these data\n(corpora: code, mix)"]


def cells_row(model, corpus, cfg, method, k, tok, statuses="ok:1"):
    return {
        "model": model,
        "corpus": corpus,
        "configuration": cfg,
        "method": method,
        "k": k,
        "device": "cuda",
        "output_tok_s_median": tok,
        "statuses": statuses,
    }


CELLS = pd.DataFrame(
    [
        cells_row("A", "mix", "van", "van", 0, 100.0),
        cells_row("A", "mix", "suf", "suf", 32, 150.0),
        cells_row("A", "mix", "kpad4", "kpad", 4, 180.0),
        cells_row("A", "mix", "kpad8", "kpad", 8, 200.0),
        cells_row("A", "code", "kpad4", "kpad", 4, 90.0),
        cells_row("A", "code", "kpad8", "kpad", 8, float("nan"), "boot_failed:2"),
        cells_row("B", "mix", "van", "van", 0, 50.0),
        cells_row("B", "mix", "suf", "suf", 32, float("nan"), "invalid:1"),
        cells_row("B", "mix", "kpad4", "kpad", 4, 60.0),
    ]
)


def panel(fig, name):
    """The k_sweep panel of ``"model / corpus"``."""
    (ax,) = [ax for ax in fig.axes if ax.get_gid() == name]
    return ax


def series(ax):
    """Labelled lines of a panel: label -> (x, y)."""
    return {
        ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata()))
        for ln in ax.get_lines()
        if not ln.get_label().startswith("_")
    }


def legend_of(fig):
    (legend,) = [leg for sub in [fig, *fig.subfigs] for leg in sub.legends]
    return legend


def test_k_sweep_draws_valid_medians_and_marks_failed_ks():
    """A grid (two models, two corpora): A/code one K valid and K8 did not boot, A/mix van and suf lines, B/code
    never measured, B/mix with an invalid suf."""
    fig = figures.k_sweep(CELLS, note="n")
    assert series(panel(fig, "A / mix")) == {"kpad": ([4, 8], [180.0, 200.0]), "van": ([0, 1], [100.0, 100.0]),
                                             "suf": ([0, 1], [150.0, 150.0])}  # fmt: skip
    assert series(panel(fig, "A / code")) == {"kpad": ([4], [90.0])}
    assert sorted(t.get_text() for t in panel(fig, "A / code").texts) == ["did not boot"]
    assert sorted(t.get_text() for t in panel(fig, "A / mix").texts) == ["suf 150", "van 100"]
    assert [t.get_text() for t in panel(fig, "B / code").texts] == ["not measured"]
    assert sorted(t.get_text() for t in panel(fig, "B / mix").texts) == ["suf: failed", "van 50.0"]
    assert [sub._suptitle.get_text() for sub in fig.subfigs[0].subfigs] == ["A", "B"]  # a row per model
    assert [panel(fig, n).get_title() for n in ("A / code", "A / mix", "B / code", "B / mix")] == [
        "code",
        "mix",
        "",
        "",
    ]
    assert [t.get_text() for t in legend_of(fig).get_texts()] == [
        "kpad K (solid, filled)", "van (median)", "suf (median)", "no valid run", "K4", "K8"
    ]  # fmt: skip
    assert legend_of(fig).get_title().get_text() == "points: medians (n unknown); no spread drawn (MAD needs n ≥ 3)"


def _full(model, corpus, cfg, method, k, tok, n=3, mad=float("nan"), statuses=None, graph_lost=False):
    return {"model": model, "corpus": corpus, "configuration": cfg, "method": method, "k": k, "device": "cuda",
            "output_tok_s_median": tok, "output_tok_s_mad": mad, "n_valid": 0 if pd.isna(tok) else n,
            "statuses": statuses or f"ok:{n}", "graph_lost": graph_lost}  # fmt: skip


def test_k_sweep_nopad_is_dashed_and_open_in_the_k_colour_beside_kpad_with_van_suf_lines_spread_and_n():
    from matplotlib.collections import LineCollection
    from matplotlib.colors import same_color

    from kpadstudy import palette

    cells = pd.DataFrame(
        [
            _full("m", "sharegpt", "van", "van", 0, 7844.0, mad=627.0),
            _full("m", "sharegpt", "suf", "suf", 32, 7361.0, mad=450.0),
            _full("m", "sharegpt", "kpad8", "kpad", 8, 9228.0, mad=440.0),
            _full("m", "sharegpt", "nopad8", "nopad", 8, 8110.0, mad=368.0),
        ]
    )
    fig = figures.k_sweep(cells, note="H200, 3 repeats")
    (ax,) = [a for a in fig.axes if a.get_gid()]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["nopad"].get_linestyle() == "--" and lines["kpad"].get_linestyle() == "-"
    assert same_color(lines["_nopad8"].get_color(), palette.k_colour(8))
    assert same_color(lines["_nopad8"].get_markerfacecolor(), "white")
    assert same_color(lines["_kpad8"].get_markerfacecolor(), palette.k_colour(8))
    assert same_color(lines["van"].get_color(), "#000000") and lines["van"].get_linestyle() == ":"
    assert same_color(lines["suf"].get_color(), "#E69F00") and lines["suf"].get_linestyle() == "-."
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]  # one MAD bar each for kpad8, nopad8
    assert sorted(tuple(round(v, 1) for v in c.get_segments()[0][:, 1]) for c in bars) == [
        (7742.0, 8478.0), (8788.0, 9668.0)
    ]  # fmt: skip
    assert sorted(t.get_text() for t in ax.texts) == ["suf 7,361", "van 7,844"]
    legend = legend_of(fig)
    assert (
        legend.get_title().get_text()
        == "points: medians over valid repeats, n = 3; bars and bands: median ± MAD where n ≥ 3"
    )
    assert [t.get_text() for t in legend.get_texts()] == [
        "kpad K (solid, filled)", "nopad K (dashed, open)", "van (median)", "suf (median)", "K8"
    ]  # fmt: skip
    assert fig.subfigs[0]._suptitle.get_text() == "K-sweep: median output tok/s per K, kpad vs nopad - m / sharegpt"
    assert [t.get_text() for t in fig.subfigs[1].texts] == ["H200, 3 repeats"]
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert not any(box.overlaps(a.get_window_extent()) for a in fig.axes)


def test_k_sweep_with_holes_labels_each_and_keeps_k_colours():
    """Model m, corpus code: kpad4 ok, kpad8 lost on every attempt, kpad12 lost its cudagraphs, nopad8 invalid,
    nopad4 did not boot; corpus chat: one K only and a different n; model z: chat only (code not measured)."""
    cells = pd.DataFrame(
        [
            _full("m", "code", "kpad4", "kpad", 4, 100.0),
            _full("m", "code", "kpad8", "kpad", 8, float("nan"), statuses="lost:3"),
            _full("m", "code", "kpad12", "kpad", 12, 90.0, graph_lost=True),
            _full("m", "code", "nopad4", "nopad", 4, float("nan"), statuses="boot_failed:3"),
            _full("m", "code", "nopad8", "nopad", 8, float("nan"), statuses="invalid:2,ok:1"),
            _full("m", "chat", "kpad4", "kpad", 4, 50.0, n=2),
            _full("z", "chat", "kpad8", "kpad", 8, 70.0),
        ]
    )
    fig = figures.k_sweep(cells)
    code = panel(fig, "m / code")
    assert sorted(t.get_text() for t in code.texts) == [
        "graph lost", "lost", "n = 3", "nopad: did not boot", "nopad: failed"
    ]  # fmt: skip
    assert series(code) == {"kpad": ([4, 12], [100.0, 90.0])}  # nopad has no valid K: no line
    assert [t.get_text() for t in panel(fig, "m / chat").texts] == ["n = 2"]  # the figure's n is 2-3: each panel's
    assert [t.get_text() for t in panel(fig, "z / code").texts] == ["not measured"]
    assert [t.get_text() for t in panel(fig, "z / chat").texts] == ["n = 3"]
    assert series(panel(fig, "z / chat")) == {"kpad": ([8], [70.0])}
    assert [t.get_text() for t in legend_of(fig).get_texts()] == [
        "kpad K (solid, filled)", "graph lost", "no valid run", "K4", "K8", "K12"
    ]  # fmt: skip
    assert legend_of(fig).get_title().get_text().startswith("points: medians over valid repeats, n = 2-3;")


def test_k_sweep_note_stays_within_two_lines_and_empty_data_say_so():
    fig = figures.k_sweep(CELLS[CELLS["model"] == "B"], note="word " * 40)  # 200 characters, as the CPU note
    (note,) = fig.subfigs[1].texts
    assert len(note.get_text().splitlines()) == 2 and note.get_text().count("word") == 40
    assert "\n" not in fig.subfigs[0]._suptitle.get_text()
    empty = figures.k_sweep(CELLS[CELLS["method"] != "kpad"])
    assert texts(empty) == ["no kpad configurations in these data"]


def test_k_sweep_of_the_published_study_is_a_model_by_corpus_grid_with_references_on_the_mix_only(tmp_path):
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "workflow" / "scripts"))
    import build_reference

    cells = build_reference.build(str(root / "resources" / "reference" / "kpad_published.csv"), str(tmp_path / "r.pq"))
    fig = figures.k_sweep(cells, note="published")
    panels = [ax for ax in fig.axes if ax.get_gid()]
    assert len(panels) == 11 * 7
    with_refs = sorted(ax.get_gid().split(" / ")[1] for ax in panels if "van" in series(ax))
    assert with_refs == ["mix"] * 11
    assert all("nopad" not in series(ax) for ax in panels)
    assert series(panel(fig, "Llama-3.1-70B-Instruct / mix"))["kpad"][1][-1] == 14565.0
    assert legend_of(fig).get_title().get_text() == (
        "points: medians over valid repeats, n = 1; no spread drawn (MAD needs n ≥ 3)"
    )
    assert fig.subfigs[0]._suptitle.get_text() == "K-sweep: median output tok/s per K (kpad)"


def test_van_suf_bestkpad_in_multiples_of_van_with_failed_labels():
    fig = figures.van_suf_bestkpad(CELLS, corpus="mix")
    heights = sorted(round(p.get_height(), 3) for p in fig.axes[0].patches)
    assert heights == [1.0, 1.0, 1.2, 1.5, 2.0]  # A: 1, 1.5, 2.0; B: 1, 60/50; B's suf is invalid -> no bar
    assert "failed" in texts(fig) and "x2.00\nK8" in texts(fig) and "x1.50" in texts(fig)


def test_ours_vs_published_plots_ratios_and_says_not_published():
    table = pd.DataFrame(
        [
            {
                "corpus": "mix",
                "model": "S",
                "device": "cpu",
                "best_k": 4,
                "bestkpad_over_suf": 0.88,
                "bestkpad_over_van": 0.96,
                "published_bestkpad_over_suf": 1.2,
                "published_bestkpad_over_suf_min": 0.96,
                "published_bestkpad_over_suf_max": 2.85,
                "published_bestkpad_over_van": 2.52,
                "published_bestkpad_over_van_min": 1.45,
                "published_bestkpad_over_van_max": 4.7,
            },
            {
                "corpus": "code",
                "model": "S",
                "device": "cpu",
                "best_k": 4,
                "bestkpad_over_suf": float("nan"),
                "bestkpad_over_van": 1.19,
                "published_bestkpad_over_suf": float("nan"),
                "published_bestkpad_over_suf_min": float("nan"),
                "published_bestkpad_over_suf_max": float("nan"),
                "published_bestkpad_over_van": float("nan"),
                "published_bestkpad_over_van_min": float("nan"),
                "published_bestkpad_over_van_max": float("nan"),
            },
        ]
    )
    fig = figures.ours_vs_published(table)
    left, right = fig.axes[0], fig.axes[1]
    mix_note = "mix: published and ours\nare different mixes"
    assert sorted(t.get_text() for t in left.texts) == ["0.88 K4", mix_note, "no valid run", "not published"]
    assert sorted(t.get_text() for t in right.texts) == ["0.96 K4", "1.19 K4", mix_note, "not published"]
    medians = [ln.get_ydata()[0] for ln in right.get_lines() if ln.get_label() == "published (median)"]
    assert medians == [2.52]
    assert [t.get_text() for t in legend_of(fig).get_texts()] == [
        "published: min-max over models (n = 1 run each)", "published: median of models",
        "ours: S (cpu), n not given", "ours at best K4",
    ]  # fmt: skip
    assert fig.subfigs[1].texts[0].get_text().startswith("* mix: the published mix is a different workload")


def _ovp_row(corpus, model, device, k, over_suf, over_van, published=True):
    nan = float("nan")
    return {"corpus": corpus, "model": model, "device": device, "best_k": k, "bestkpad_over_suf": over_suf,
            "bestkpad_over_van": over_van, "published_models": 11,
            "published_bestkpad_over_suf": 1.2 if published else nan,
            "published_bestkpad_over_suf_min": 0.96 if published else nan,
            "published_bestkpad_over_suf_max": 2.85 if published else nan,
            "published_bestkpad_over_van": 2.52 if published else nan,
            "published_bestkpad_over_van_min": 1.45 if published else nan,
            "published_bestkpad_over_van_max": 4.7 if published else nan}  # fmt: skip


def test_ours_vs_published_colours_by_best_k_markers_by_model_and_device_legend_outside_with_n():
    """Two of our models (one on CPU, one on the H200) on the mix: each its own marker, its best K's colour,
    n from our cells; the legend under the panels covers no bar or dot."""
    from matplotlib.colors import same_color

    from kpadstudy import palette

    table = pd.DataFrame([_ovp_row("mix", "S", "cpu", 4, 0.88, 0.96), _ovp_row("mix", "T", "cuda", 8, 1.33, 1.73)])
    configurations = [("van", "van", 0), ("suf", "suf", 32)]
    ours_cells = pd.DataFrame(
        [_full("T", "mix", c, m, k, 100.0, n=3) for c, m, k in [*configurations, ("kpad8", "kpad", 8)]]
        + [_full("S", "mix", c, m, k, 10.0, n=1) for c, m, k in [*configurations, ("kpad4", "kpad", 4)]]
    )
    fig = figures.ours_vs_published(table, note="two devices", cells=ours_cells)
    left = fig.axes[0]
    dots = {ln.get_label(): ln for ln in left.get_lines() if ln.get_label().startswith("ours")}
    assert sorted(dots) == ["ours: S (cpu)", "ours: T (cuda)"]
    assert (dots["ours: S (cpu)"].get_marker(), dots["ours: T (cuda)"].get_marker()) == ("o", "s")
    assert same_color(dots["ours: S (cpu)"].get_color(), palette.k_colour(4))
    assert same_color(dots["ours: T (cuda)"].get_color(), palette.k_colour(8))
    legend = legend_of(fig)
    assert [t.get_text() for t in legend.get_texts()] == [
        "published: min-max over 11 models (n = 1 run each)", "published: median of 11 models",
        "ours: S (cpu), n = 1 repeat", "ours: T (cuda), n = 3 repeats", "ours at best K4", "ours at best K8",
    ]  # fmt: skip
    assert fig.subfigs[0]._suptitle.get_text() == (
        "Ours vs published: speed-up ratios per corpus (absolute tok/s never compared)"
    )
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "bestKpad / suf (ratio of median output tok/s)", "bestKpad / van (ratio of median output tok/s)"
    ]  # fmt: skip
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)


def test_ours_vs_published_without_the_mix_has_no_mix_note_and_no_published_entries():
    fig = figures.ours_vs_published(pd.DataFrame([_ovp_row("sharegpt", "S", "cuda", 8, 1.25, 1.18, published=False)]))
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["1.25 K8", "not published"]
    assert [t.get_text() for t in legend_of(fig).get_texts()] == ["ours: S (cuda), n not given", "ours at best K8"]
    assert fig.subfigs[1].texts == []


def test_k_vs_r_points_are_predicted_vs_measured():
    t = pd.DataFrame(
        [
            {
                "model": "M",
                "corpus": "mix",
                "configuration": "kpad4",
                "device": "cuda",
                "predicted_speedup": 1.17,
                "measured_speedup": 1.36,
                "r_from": "TPOT",
            },
            {
                "model": "M",
                "corpus": "mix",
                "configuration": "kpad8",
                "device": "cuda",
                "predicted_speedup": float("nan"),
                "measured_speedup": float("nan"),
                "r_from": "",
            },
        ]
    )
    fig = figures.k_vs_r(t)
    ax = fig.axes[0]
    points = [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines() if ln.get_label() == "1"]
    assert points == [([1.17], [1.36])]
    assert [t.get_text() for t in ax.texts] == ["1"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "1  kpad4 mix: 1.17 -> 1.36", "-  kpad8 mix: no valid run"
    ]  # fmt: skip
    assert ax.get_xlabel().startswith("predicted speed-up K-bar / R (R from TPOT)")
    assert ax.get_legend().get_title().get_text() == "predicted -> measured (n not given)"


def _step(cfg, method, k, predicted, measured, corpus="mix", r_from="engine steps", **extra):
    return {"model": "M", "corpus": corpus, "configuration": cfg, "method": method, "k": k, "device": "cuda",
            "predicted_speedup": predicted, "measured_speedup": measured, "r_from": r_from, **extra}  # fmt: skip


def test_k_vs_r_colours_markers_from_the_palette_labels_apart_and_n_from_cells():
    """The H200 case: kpad4 and suf close together, nopad open; labels never overlap one another."""
    from matplotlib.colors import same_color

    from kpadstudy import palette

    t = pd.DataFrame(
        [
            _step("kpad4", "kpad", 4, 1.333, 1.327),
            _step("kpad8", "kpad", 8, 1.511, 1.480),
            _step("nopad4", "nopad", 4, 0.936, 0.944),
            _step("nopad8", "nopad", 8, 1.282, 1.261),
            _step("suf", "suf", 32, 1.392, 1.299),
            _step("kpad12", "kpad", 12, 1.34, 1.32, r_from="TPOT"),
        ]
    )
    cells = pd.DataFrame(
        [_full("M", "mix", "van", "van", 0, 100.0, n=3)]
        + [_full("M", "mix", r["configuration"], r["method"], r["k"], 100.0, n=2) for _, r in t.iterrows()]
    )
    fig = figures.k_vs_r(t, note="H200", cells=cells)
    ax = fig.axes[0]
    pts = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label().isdigit()}
    assert sorted(pts) == ["1", "2", "3", "4", "5", "6"]
    assert same_color(pts["1"].get_color(), palette.k_colour(4)) and pts["1"].get_marker() == "o"
    assert same_color(pts["3"].get_color(), palette.k_colour(4)) and same_color(pts["3"].get_markerfacecolor(), "white")
    assert same_color(pts["5"].get_color(), "#E69F00") and pts["5"].get_marker() == "s"
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert key[0] == "1  kpad4 mix: 1.33 -> 1.33, n = 2, R: engine steps"
    assert key[5] == "6  kpad12 mix: 1.34 -> 1.32, n = 2, R: TPOT"
    assert ax.get_legend().get_title().get_text() == "predicted -> measured (van: n = 3)"
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert len(boxes) == 6
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert not ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())


def test_k_vs_r_with_two_datasets_prefixes_their_letters():
    t = pd.DataFrame(
        [
            _step("kpad4", "kpad", 4, 0.71, 0.69, dataset="CPU embedded"),
            _step("kpad4", "kpad", 4, 1.33, 1.33, dataset="H200 embedded"),
        ]
    )
    fig = figures.k_vs_r(t)
    assert sorted(x.get_text() for x in fig.axes[0].texts) == ["A1", "B2"]
    assert [x.get_text() for x in fig.axes[0].get_legend().get_texts()] == [
        "A = CPU embedded", "A1  kpad4 mix: 0.71 -> 0.69", "B = H200 embedded", "B2  kpad4 mix: 1.33 -> 1.33"
    ]  # fmt: skip


def test_draw_on_the_published_parquet_writes_the_study_figures(tmp_path):
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "workflow" / "scripts"))
    import build_reference
    import draw_figures

    ref = tmp_path / "ref.parquet"
    build_reference.build(str(root / "resources" / "reference" / "kpad_published.csv"), str(ref))
    written = draw_figures.draw(str(ref), str(tmp_path / "f"), "mix", reference_path=str(ref))
    assert sorted(p.name for p in written) == sorted(
        f"{n}.{e}" for n in draw_figures.CELL_FIGURES for e in ("png", "svg")
    )
    assert draw_figures.figure_names(str(ref), "runs.parquet") == draw_figures.CELL_FIGURES + [
        "ours_vs_published",
        "k_vs_r",
        "kpad_vs_nopad",
        "paired_ratios",
        "run_timeline",
        "kpadauto_lengths",
    ]


def test_van_suf_bestkpad_draws_every_configuration_outside_the_k_sweep():
    """ngram7 and Trident (a second suf entry) get their own bars, in the study's order; a failed one its label."""
    cells = pd.concat(
        [
            CELLS,
            pd.DataFrame(
                [
                    cells_row("A", "mix", "ngram7", "ngram", 7, 130.0),
                    cells_row("A", "mix", "trident", "suf", 32, float("nan"), statuses="boot_failed:1"),
                    cells_row("A", "mix", "nopad8", "nopad", 8, 90.0),  # a K-sweep diagnostic: not drawn
                ]
            ),
        ],
        ignore_index=True,
    )
    fig = figures.van_suf_bestkpad(cells, corpus="mix")
    assert fig.axes[0].get_title().startswith("van -> suf -> ngram7 -> trident -> bestKpad on mix")
    heights = sorted(round(p.get_height(), 3) for p in fig.axes[0].patches)
    assert heights == [1.0, 1.0, 1.2, 1.3, 1.5, 2.0]  # A: van 1, suf 1.5, ngram7 1.3, bestKpad 2.0; B: 1, 1.2
    assert "x1.30" in texts(fig) and "did not boot" in texts(fig)


def _cell(model, configuration, method, k, tok, statuses="ok:1"):
    return {
        "model": model,
        "corpus": "mix",
        "configuration": configuration,
        "method": method,
        "k": k,
        "device": "cuda",
        "output_tok_s_median": tok,
        "statuses": statuses,
        "graph_lost": False,
    }


def test_k_sweep_legend_when_the_first_model_has_no_valid_kpad_run():
    # issue 18: model "a" (alphabetically first) booted no kpad4 server; its panel has no line
    cells = pd.DataFrame(
        [
            _cell("a", "van", "van", 0, 100.0),
            _cell("a", "suf", "suf", 32, 110.0),
            _cell("a", "kpad4", "kpad", 4, float("nan"), statuses="boot_failed:1"),
            _cell("b", "van", "van", 0, 100.0),
            _cell("b", "suf", "suf", 32, 110.0),
            _cell("b", "kpad4", "kpad", 4, 120.0),
        ]
    )
    fig = figures.k_sweep(cells)
    assert [t.get_text() for t in legend_of(fig).get_texts()] == [
        "kpad K (solid, filled)", "van (median)", "suf (median)", "no valid run", "K4"
    ]  # fmt: skip
    assert sorted(t.get_text() for t in panel(fig, "a / mix").texts) == ["did not boot", "suf 110", "van 100"]
    assert series(panel(fig, "b / mix"))["kpad"] == ([4], [120.0])


def test_k_vs_r_of_a_study_without_van_says_why_it_is_empty():
    from kpadstudy import stepcost

    cells = pd.DataFrame([_cell("m", "kpad12", "kpad", 12, 14247.1), _cell("m", "kpad16", "kpad", 16, 12895.8)])
    fig = figures.k_vs_r(stepcost.step_cost(pd.DataFrame(), cells))
    assert texts(fig) == ["no step-cost rows: K-bar / R needs van in the same cell"]
