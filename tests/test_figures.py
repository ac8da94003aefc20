"""Figures are checked on their data (annotations, bars), not pixels."""
import pandas as pd

from kpadstudy import figures

BEST = pd.DataFrame([
    {"model": "A", "corpus": "mix", "best_k": 8, "best_kpad_tok_s": 1234.5, "van_tok_s": 1000.0, "suf_tok_s": 1100.0, "bestkpad_over_suf": 1234.5 / 1100, "bestkpad_over_van": 1.2345},
    {"model": "A", "corpus": "code", "best_k": 4, "best_kpad_tok_s": 900.0, "van_tok_s": 1000.0, "suf_tok_s": 1000.0, "bestkpad_over_suf": 0.9, "bestkpad_over_van": 0.9},
    {"model": "B", "corpus": "mix", "best_k": pd.NA, "best_kpad_tok_s": float("nan"), "van_tok_s": 10.0, "suf_tok_s": 20.0, "bestkpad_over_suf": float("nan"), "bestkpad_over_van": float("nan")},
    {"model": "B", "corpus": "code", "best_k": 4, "best_kpad_tok_s": 50.0, "van_tok_s": 40.0, "suf_tok_s": 45.0, "bestkpad_over_suf": 50 / 45, "bestkpad_over_van": 1.25},
]).astype({"best_k": "Int64"})


def texts(fig):
    return sorted(t.get_text() for ax in fig.axes for t in ax.texts)


def test_heatmap_annotates_best_k_and_tok_s_and_marks_failed_cells():
    fig = figures.best_k_heatmap(BEST, note="n")
    assert texts(fig) == sorted(["K4\n900.0 tok/s", "K8\n1,234.5 tok/s", "K4\n50.0 tok/s", "no valid run"])
    cbar_labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert cbar_labels == ["K4", "K8"]
    assert fig.axes[0].get_title() == "Best K per cell (kpad, median output tok/s)\nn"
    long_note = "word " * 40
    title = figures.best_k_heatmap(BEST, note=long_note).axes[0].get_title()
    assert len(title.splitlines()) >= 4 and all(len(line) <= 80 for line in title.splitlines()[1:]) and title.count("word") == 40


def test_bestkpad_over_suf_bars_in_percent():
    fig = figures.bestkpad_over_suf(BEST, corpus="mix")
    ax = fig.axes[0]
    heights = [round(p.get_height(), 3) for p in ax.patches]
    assert heights == [round((1234.5 / 1100 - 1) * 100, 3), 0.0]
    assert texts(fig) == sorted([f"{(1234.5 / 1100 - 1) * 100:+.1f}% (K8)", "no valid run"])


def test_bestkpad_over_suf_for_a_corpus_not_in_the_data_says_so():
    fig = figures.bestkpad_over_suf(BEST, corpus="nosuchmix")
    assert texts(fig) == ["no cells for corpus 'nosuchmix' in these data\n(corpora: code, mix)"]
