"""The mix corpus (rule mix): shares of each component corpus's prompts, shuffled with a fixed seed.

How many prompts each component gives (:func:`kpadstudy.corpora.mix_shares`, ``mix_weights``,
``mix_sizes``) lives with the corpora: the mix's shares decide how many prompts each component corpus
must provide (:func:`kpadstudy.corpora.corpus_sizes`).
"""

from __future__ import annotations

import random

from .corpora import CorpusError, mix_shares


def build_mix(
    name: str,
    components: dict[str, list[dict]],
    *,
    n_warmup: int,
    n_measured: int,
    seed: int,
    weights: dict[str, int] | None = None,
) -> list[dict]:
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
                raise CorpusError(
                    f"mix {name!r}: component {comp!r} has {len(pool)} {split} prompts, needs {share}; "
                    "build it with more prompts"
                )
            picked += [{**r, "corpus": name, "source_corpus": comp, "id": f"{comp}:{r['id']}"} for r in pool[:share]]
        rng.shuffle(picked)
        out += picked
    return out
