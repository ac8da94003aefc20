"""Server-side counters from vLLM's Prometheus ``/metrics`` endpoint and the measures derived from them.

Counters are read after warm-up and after the measured prompts; the difference belongs to the
measured prompts alone.
"""

from __future__ import annotations

from typing import Mapping

# vLLM v1 counter names (without the ``_total`` suffix that the text format adds).
COUNTERS = {
    "spec_drafts": "vllm:spec_decode_num_drafts",
    "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "spec_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
    "generation_tokens": "vllm:generation_tokens",
    "prompt_tokens": "vllm:prompt_tokens",
}


def parse_counters(text: str) -> dict[str, float]:
    """Sum each counter of :data:`COUNTERS` over its label sets in Prometheus text ``text``.

    Returns:
        ``{short name: value}``; a counter the server does not export (e.g. spec-decode counters of a
        ``van`` server) is absent.
    """
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {v: k for k, v in COUNTERS.items()}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        short = wanted.get(family.name)
        if short is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                out[short] = out.get(short, 0.0) + sample.value
    return out


PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


def parse_accepted_per_position(text: str) -> list[float]:
    """Accepted draft tokens by draft position (0 = first draft token), summed over label sets.

    Returns:
        ``[count at position 0, 1, ...]``; empty when the server exports no such counter.
    """
    from prometheus_client.parser import text_string_to_metric_families

    by_pos: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != PER_POSITION:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                pos = int(sample.labels["position"])
                by_pos[pos] = by_pos.get(pos, 0.0) + sample.value
    return [by_pos.get(i, 0.0) for i in range(max(by_pos) + 1)] if by_pos else []


def counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """``after - before`` per counter present in ``after`` (a counter missing before counts from 0)."""
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def speculation_measures(delta: Mapping[str, float]) -> dict[str, float | None]:
    """Acceptance measures of the measured prompts.

    - ``acceptance_rate`` = accepted / draft tokens (vLLM's definition; pad tokens count as draft
      tokens, so padding lowers it without changing the output).
    - ``mean_acceptance_length`` = 1 + accepted / drafts (vLLM's definition: tokens per verify step
      of a request that had a draft).
    - ``tokens_per_request_step`` = generated / (generated - accepted): every request-step emits one
      token plus its accepted draft tokens, so the number of request-steps is generated - accepted.
      It means the same with and without padding, and is 1.0 without speculation.

    Missing or zero denominators give ``None``.
    """
    drafts = delta.get("spec_drafts")
    draft_tokens = delta.get("spec_draft_tokens")
    accepted = delta.get("spec_accepted_tokens", 0.0)
    generated = delta.get("generation_tokens")
    return {
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "mean_acceptance_length": 1.0 + accepted / drafts if drafts else None,
        "tokens_per_request_step": generated / (generated - accepted) if generated and generated > accepted else None,
    }


def itl_per_token(bench: Mapping[str, float | int | None]) -> dict[str, float | None]:
    """Inter-token latency per token (ms), from the aggregate result of ``vllm bench serve``.

    vLLM's client records one inter-token latency per streamed *chunk* (``itl_*``): with speculative
    decoding a chunk carries 1 + accepted draft tokens, so its ITL is the time per engine step, not per
    token (it also counts the near-zero gap between vLLM's role chunk and the first token). Per token:

        itl_token_mean_ms = sum_r (e2el_r - ttft_r) / sum_r (output_tokens_r - 1)
                          = completed * (mean_e2el_ms - mean_ttft_ms) / (total_output_tokens - completed)

    over the completed requests r: the time from a request's first chunk to its last, shared evenly
    by the tokens after the first; every token weighs the same. This equals the sum of the chunk gaps
    divided by the tokens they delivered (a chunk gap divided by its tokens, averaged over tokens),
    when the first chunk holds one token as vLLM's does. vLLM's ``tpot_mean_ms`` is the same
    per-request quantity averaged over requests instead (every request weighs the same).

    Returns:
        ``{"itl_token_mean_ms": value}``; None when the result lacks a field or no request has a
        second token.
    """
    try:
        completed, tokens = int(bench["completed"]), int(bench["total_output_tokens"])
        e2el, ttft = float(bench["mean_e2el_ms"]), float(bench["mean_ttft_ms"])
    except (KeyError, TypeError):
        return {"itl_token_mean_ms": None}
    return {"itl_token_mean_ms": completed * (e2el - ttft) / (tokens - completed) if tokens > completed else None}
