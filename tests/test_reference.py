"""The published study as a cells table: every number kept, hand-picked values from the CSV."""

from pathlib import Path

import pandas as pd
import pytest

from kpadstudy import reference, tables

CSV = Path(__file__).resolve().parent.parent / "resources" / "reference" / "kpad_published.csv"


@pytest.fixture(scope="module")
def pub():
    return reference.published_cells(pd.read_csv(CSV))


def test_every_published_number_is_a_row(pub):
    assert len(pub) == 341
    assert pub["method"].value_counts().to_dict() == {"kpad": 308, "van": 11, "suf": 11, "bestkpad": 11}
    assert pub.groupby(["model", "corpus"]).ngroups == 77
    assert set(pub["source"]) == {"published"} and reference.is_published(pub)
    assert set(pub["configuration"][pub["method"] == "kpad"]) == {"kpad4", "kpad6", "kpad8", "kpad12"}


def test_hand_picked_numbers(pub):
    c = pub.set_index(["model", "corpus", "configuration"])
    assert c.loc[("Qwen2.5-7B-Instruct", "sharegpt", "kpad4"), "output_tok_s_median"] == 6287.0  # CSV line 2
    assert c.loc[("DeepSeek-R1", "mix", "suf"), "output_tok_s_median"] == 781.0
    r = c.loc[("Llama-3.1-70B-Instruct", "mix", "bestKpad")]
    assert (r["output_tok_s_median"], r["k"], r["method"]) == (14389.0, 12, "bestkpad")
    assert "separate measurement run" in r["note"]
    van = c.loc[("Qwen2.5-7B-Instruct", "mix", "van")]
    assert (van["k"], van["n_valid"], van["device"]) == (0, 1, "8x B200")
    assert pd.isna(c.loc[("Qwen2.5-7B-Instruct", "mix", "suf"), "k"])  # the mix table does not state suf's K
    assert pd.isna(van["tpot_mean_ms_median"]) and pd.isna(van["output_tok_s_mad"])


def test_published_best_k_and_mix_headlines(pub):
    best = tables.best_kpad(pub)
    sweep = best["sweep_best_k"].value_counts().to_dict()
    assert sweep == {4: 30, 6: 20, 12: 20, 8: 7}  # over the 77 cells
    mix = best[best["corpus"] == "mix"].set_index("model")
    assert mix["best_k"].value_counts().to_dict() == {12: 7, 6: 3, 8: 1}
    # the study: bestKpad beat suf(OFF) on mix for 10 of 11 models; bestKpad/van averages 2.86x
    assert int((mix["bestkpad_over_suf"] > 1).sum()) == 10
    assert mix["bestkpad_over_van"].mean() == pytest.approx(2.86, abs=0.005)
    # Llama-3.1-70B: the mix table's separate measurement (14,389) wins over the sweep's K12 (14,565)
    l70 = mix.loc["Llama-3.1-70B-Instruct"]
    assert (l70["best_kpad_tok_s"], l70["sweep_best_tok_s"], l70["best_from"]) == (
        14389.0,
        14565.0,
        "separate measurement",
    )
    assert l70["bestkpad_over_suf"] == pytest.approx(14389 / 10400)
    assert mix.loc["DeepSeek-R1", "bestkpad_over_van"] == pytest.approx(2224 / 1538)  # +44.6%


def test_unknown_config_is_refused():
    bad = pd.DataFrame(
        [{"model": "M", "corpus": "c", "config": "eagle", "k": 4, "output_tok_s": 1, "source": "s", "note": None}]
    )
    with pytest.raises(ValueError, match="published config 'eagle' is not one of"):
        reference.published_cells(bad)


def test_an_empty_table_or_a_missing_number_is_refused():
    csv = pd.read_csv(CSV)
    with pytest.raises(ValueError, match="^the published CSV has no rows$"):
        reference.published_cells(csv.iloc[:0])
    holed = csv.assign(output_tok_s=csv["output_tok_s"].astype(object))
    holed.loc[[0, 5], "output_tok_s"] = "n/a"
    with pytest.raises(ValueError) as e:
        reference.published_cells(holed)
    assert str(e.value) == (
        "the published CSV has no output_tok_s number in 2 rows: [['Qwen2.5-7B-Instruct', 'sharegpt', 'kpad'], "
        "['Qwen2.5-7B-Instruct', 'lmsys', 'kpad']]"
    )
