"""K-pad: uniform padding of suffix-decoding drafts, as a vLLM general plugin.

With ``VLLM_SUFFIX_PAD_UNIFORM=1`` every running request's draft is padded with ``-1`` to exactly
K tokens (``num_speculative_tokens``) after vLLM's own draft bookkeeping
(``Scheduler.update_draft_token_ids``: prefill-chunk and finished-request handling, then
structured-output validation of the real draft). Every decode step then has the same shape,
1 + K tokens per request, so cudagraph mode FULL_AND_PIECEWISE can replay the FULL graph instead of
falling back to PIECEWISE. The rejection sampler never accepts ``-1`` (no target token has that id), so
greedy outputs do not change; only the draft tokens counted by vLLM grow to K per draft.

On CPU there are no cudagraphs: padding only adds verification work there and makes decoding slower.

Loaded by vLLM through the entry point ``kpad`` in group ``vllm.general_plugins``
(``kpad_plugin-0.1.0.dist-info`` beside this package; name it in ``VLLM_PLUGINS=kpad``).
Supported vLLM versions: 0.26.0 and 0.32.0.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("vllm.kpad_plugin")

PAD_TOKEN_ID = -1
ENV_FLAG = "VLLM_SUFFIX_PAD_UNIFORM"
LOADED_MESSAGE = "K-pad plugin active: suffix drafts padded to K with -1"


def pad_draft(draft: list[int], k: int, room: int) -> list[int]:
    """Pad a draft with ``-1`` to ``min(k, room)`` tokens.

    Args:
        draft: the real draft token ids after vLLM's validation (length 0..k).
        k: ``num_speculative_tokens`` of the speculative config.
        room: how many draft tokens still fit, ``max_model_len - num_tokens - 1`` (the verified
            step writes ``1 + len(draft)`` positions starting at ``num_tokens - 1`` and may emit one
            bonus token).

    Returns:
        A new list; the draft itself when it is already long enough or there is no room.
        A draft is never shortened here.
    """
    target = min(k, room)
    if len(draft) >= target:
        return list(draft)
    return list(draft) + [PAD_TOKEN_ID] * (target - len(draft))


def _patch_scheduler() -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.update_draft_token_ids
    if getattr(original, "_kpad_patched", False):
        return

    def update_draft_token_ids(self, draft_token_ids):  # noqa: ANN001 - vLLM's own signature
        original(self, draft_token_ids)
        spec = self.vllm_config.speculative_config
        if spec is None or spec.method != "suffix":
            return
        k = self.num_spec_tokens
        for req_id in draft_token_ids.req_ids:
            request = self.requests.get(req_id)
            if request is None or request.is_finished() or request.is_prefill_chunk:
                continue
            room = self.max_model_len - request.num_tokens - 1
            request.spec_token_ids = pad_draft(list(request.spec_token_ids), k, room)

    update_draft_token_ids._kpad_patched = True
    Scheduler.update_draft_token_ids = update_draft_token_ids


def register() -> None:
    """vLLM general-plugin entry point: patch the scheduler when ``VLLM_SUFFIX_PAD_UNIFORM=1``."""
    if os.environ.get(ENV_FLAG, "0") != "1":
        return
    _patch_scheduler()
    log.warning("%s (pid %d)", LOADED_MESSAGE, os.getpid())
