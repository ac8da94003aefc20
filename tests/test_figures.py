"""Figures are checked on their data (annotations, bars), not pixels."""

import pandas as pd

from kpadstudy import figures

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


def test_k_sweep_draws_valid_medians_and_marks_failed_ks():
    fig = figures.k_sweep(CELLS, note="n")
    a = fig.axes[0]
    lines = {
        ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata()))
        for ln in a.get_lines()
        if not ln.get_label().startswith("_")
    }
    assert lines == {"code": ([4], [90.0]), "mix": ([4, 8], [180.0, 200.0])}
    assert texts(fig) == ["did not boot (code)"]
    assert [ax.get_title() for ax in fig.axes[:2]] == ["A", "B"]


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
    assert sorted(t.get_text() for t in left.texts) == ["0.88", "no valid run", "not published"]
    assert sorted(t.get_text() for t in right.texts) == ["0.96", "1.19", "not published"]
    medians = [ln.get_ydata()[0] for ln in right.get_lines() if ln.get_label() == "published (median)"]
    assert medians == [2.52]


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
    offsets = [list(c.get_offsets()[0]) for c in fig.axes[0].collections]
    assert offsets == [[1.17, 1.36]]
    assert "kpad4 mix" in texts(fig) and "no valid run: kpad8 mix" in texts(fig)


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
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["mix"]
    assert "did not boot (mix)" in texts(fig)


def test_k_vs_r_of_a_study_without_van_says_why_it_is_empty():
    from kpadstudy import stepcost

    cells = pd.DataFrame([_cell("m", "kpad12", "kpad", 12, 14247.1), _cell("m", "kpad16", "kpad", 16, 12895.8)])
    fig = figures.k_vs_r(stepcost.step_cost(pd.DataFrame(), cells))
    assert texts(fig) == ["no step-cost rows: K-bar / R needs van in the same cell"]
