"""The mix corpus (rule mix): shares of each component corpus's prompts, shuffled with a fixed seed.

How many prompts each component gives (:func:`kpadstudy.corpora.mix_shares`, ``mix_weights``,
``mix_sizes``) lives with the corpora: the mix's shares decide how many prompts each component corpus
must provide (:func:`kpadstudy.corpora.corpus_sizes`).
"""

from __future__ import annotations

import logging
import random
import unicodedata
from collections import Counter

from .corpora import CorpusError, mix_shares

log = logging.getLogger(__name__)


def normalized(text: str) -> str:
    """The text compared for duplicates: Unicode NFKC, case-folded, whitespace runs collapsed to one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _text(record: dict) -> str:
    """The normalized text of the prompt that is sent: the first message's content (as ``bench_prompts``), its
    text parts joined when the content is a list of parts."""
    content = record["messages"][0]["content"] if record.get("messages") else ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return normalized(str(content))


def build_mix(
    name: str,
    components: dict[str, list[dict]],
    *,
    n_warmup: int,
    n_measured: int,
    seed: int,
    weights: dict[str, int] | None = None,
    counts: Counter | None = None,
) -> list[dict]:
    """The mix corpus: shares of each component's warm-up and measured prompts, shuffled with ``seed``.

    Shares follow ``weights`` (component -> positive integer; default equal) by :func:`mix_shares`. Each
    component gives its first warm-up records; then its measured records, skipping any whose
    :func:`normalized` text is a warm-up prompt of the mix (of any component: suffix decoding would have
    seen its answer) or already one of the mix's measured prompts, and filling the share from the
    component's measured records after it, then from its warm-up records the mix did not use. Skipped
    prompts are counted in ``counts`` (``mix_<component>_skipped_warmup_text`` and
    ``mix_<component>_skipped_duplicate``) and logged. Records keep their source in ``source_corpus``. Same
    inputs and seed give the same bytes.

    Raises:
        CorpusError: a component has fewer usable prompts of a split than its share.
    """
    rng = random.Random(seed)
    weights = weights or {c: 1 for c in components}
    counts = Counter() if counts is None else counts
    out: list[dict] = []
    warm_texts: set[str] = set()
    measured_texts: set[str] = set()
    used: set[tuple[str, str]] = set()
    for split, n in (("warmup", n_warmup), ("measured", n_measured)):
        picked: list[dict] = []
        for comp, share in mix_shares(n, weights).items():
            records = components[comp]
            pool = [r for r in records if r["split"] == split]
            if split == "measured":  # then the component's warm-up records the mix did not take
                pool += [r for r in records if r["split"] == "warmup" and (comp, r["id"]) not in used]
            taken: list[dict] = []
            for r in pool:
                if len(taken) == share:
                    break
                text = _text(r)
                if split == "measured" and text in warm_texts:
                    counts[f"mix_{comp}_skipped_warmup_text"] += 1
                    continue
                if split == "measured" and text in measured_texts:
                    counts[f"mix_{comp}_skipped_duplicate"] += 1
                    continue
                (warm_texts if split == "warmup" else measured_texts).add(text)
                used.add((comp, r["id"]))
                taken.append(r)
            if len(taken) < share:
                skipped = {k: v for k, v in counts.items() if k.startswith(f"mix_{comp}_")}
                raise CorpusError(
                    f"mix {name!r}: component {comp!r} has {len(taken)} usable {split} prompts, needs {share} "
                    f"(skipped {skipped or 'none'}); build it with more prompts"
                )
            picked += [
                {**r, "corpus": name, "split": split, "source_corpus": comp, "id": f"{comp}:{r['id']}"} for r in taken
            ]
        rng.shuffle(picked)
        out += picked
    for key, value in sorted(counts.items()):
        if key.startswith("mix_") and value:
            log.info("mix %s: %s %d", name, key, value)
    return out
