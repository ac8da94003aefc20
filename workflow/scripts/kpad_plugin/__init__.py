"""K-pad: uniform padding of suffix-decoding drafts, as a vLLM general plugin.

With ``VLLM_SUFFIX_PAD_UNIFORM=1`` every running request's draft is padded with ``-1`` to exactly
K tokens (``num_speculative_tokens``) after vLLM's own draft bookkeeping
(``Scheduler.update_draft_token_ids``: finished requests and prefill chunks are skipped, then the real
draft is validated against the request's structured-output grammar). Every decode step then has the same
shape, 1 + K tokens per request, so cudagraph mode FULL_AND_PIECEWISE can replay the FULL graph instead
of falling back to PIECEWISE. The rejection sampler never accepts ``-1`` (no target token has that id),
so greedy outputs do not change; only the draft tokens counted by vLLM grow to K per draft.
Near ``max_model_len`` a draft is padded only up to the room left.

On CPU there are no cudagraphs: padding only adds verification work there and makes decoding slower.

Loaded by vLLM through the entry point ``kpad`` in group ``vllm.general_plugins``
(``kpad_plugin-0.1.0.dist-info`` beside this package; name it in ``VLLM_PLUGINS=kpad``).

Environment:
    VLLM_SUFFIX_PAD_UNIFORM=1          pad drafts (otherwise the scheduler is left as vLLM ships it).
    KPAD_ALLOW_UNSUPPORTED_VLLM=1      pad on a vLLM version other than ``SUPPORTED_VLLM`` (logged loudly).
    KPAD_STATS_DIR=<dir>               count draft and pad tokens (scheduler) and the cudagraph runtime
                                       mode of every executed step (model runner); each process writes
                                       ``<dir>/<role>-<pid>.json`` a few times a second.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path

log = logging.getLogger("vllm.kpad_plugin")

PAD_TOKEN_ID = -1
ENV_FLAG = "VLLM_SUFFIX_PAD_UNIFORM"
ENV_ALLOW = "KPAD_ALLOW_UNSUPPORTED_VLLM"
ENV_STATS = "KPAD_STATS_DIR"
SUPPORTED_VLLM = ("0.26.0", "0.32.0")
LOADED_MESSAGE = "K-pad plugin active: suffix drafts padded to K with -1"


class UnsupportedVllmError(RuntimeError):
    """The installed vLLM is not one the patch was verified on."""


class SuffixUnavailableError(RuntimeError):
    """Suffix decoding was asked for but arctic-inference is not importable."""


def pad_draft(draft: list[int], k: int, room: int) -> list[int]:
    """Pad a draft with ``-1`` to ``min(k, room)`` tokens.

    Args:
        draft: the real draft token ids after vLLM's validation (length 0..k).
        k: ``num_speculative_tokens`` of the speculative config.
        room: how many draft tokens still fit, ``max_model_len - num_tokens - 1`` (the verified
            step writes ``1 + len(draft)`` positions starting at ``num_tokens - 1`` and may emit one
            bonus token).

    Returns:
        A new list; a copy of the draft itself when it is already long enough or there is no room.
        A draft is never shortened here.
    """
    target = min(k, room)
    if len(draft) >= target:
        return list(draft)
    return list(draft) + [PAD_TOKEN_ID] * (target - len(draft))


def base_version(version: str) -> str:
    """``0.32.0+cpu`` -> ``0.32.0`` (local version labels do not change the code)."""
    return version.split("+", 1)[0]


def check_version(version: str, allow_unsupported: bool) -> None:
    """Refuse to pad on a vLLM other than :data:`SUPPORTED_VLLM`, unless ``allow_unsupported``.

    Raises:
        UnsupportedVllmError: names the installed version, the supported ones and the override.
    """
    if base_version(version) in SUPPORTED_VLLM:
        return
    message = (
        f"K-pad plugin: vLLM {version} is not supported (supported: {', '.join(SUPPORTED_VLLM)}). "
        f"The patch wraps Scheduler.update_draft_token_ids, whose behaviour may differ in {version}; "
        f"run `make kpad-selftest` on this install, then set {ENV_ALLOW}=1 to pad anyway."
    )
    if not allow_unsupported:
        raise UnsupportedVllmError(message)
    log.warning("%s -- %s=1 is set: PADDING ON AN UNVERIFIED vLLM", message, ENV_ALLOW)


def check_suffix_available(context: str = "") -> None:
    """Raise :class:`SuffixUnavailableError` unless arctic-inference's suffix decoding can be imported.

    Args:
        context: what asked for suffix decoding, put in front of the message.
    """
    import importlib.util

    if (
        importlib.util.find_spec("arctic_inference") is None
        or importlib.util.find_spec("arctic_inference.suffix_decoding") is None
    ):
        raise SuffixUnavailableError(
            f"{context}suffix decoding needs arctic-inference 0.3.0, which is not installed in this Python. "
            "Install it with: "
            "pip install nanobind==2.9.2 cmake ninja grpcio-tools && CMAKE_ARGS=-DPython_EXECUTABLE=$(which python) "
            "pip install --no-build-isolation --no-deps arctic-inference==0.3.0"
        )


# ----------------------------------------------------------------------------- counters


class Stats:
    """Counters of one process, written as JSON to ``<dir>/<role>-<pid>.json`` by a daemon thread.

    Scheduler counters (role ``scheduler``; every speculative method, suffix and ngram alike):
    ``draft_requests`` (request-steps given a draft slot), ``real_draft_tokens``, ``real_draft_tokens_pos<i>``
    (request-steps whose real draft reached draft position i, 0-based: real draft tokens by position),
    ``pad_tokens``, ``padded_requests``, ``zero_draft_requests``.
    ``async_scheduling``: 1 when the scheduler runs with asynchronous scheduling, set once at its start from
    vLLM's resolved config (vLLM 0.32 does not log it), else 0.
    Model-runner counters (role ``worker<rank>``): ``steps_<MODE>`` and ``decode_steps_<MODE>`` for each
    cudagraph runtime mode (NONE, PIECEWISE, FULL) of executed steps; a decode step has no prompt tokens.
    """

    def __init__(self, directory: str, role: str, interval_s: float = 0.2):
        self.path = Path(directory) / f"{role}-{os.getpid()}.json"
        self.counts: Counter = Counter()
        self.lock = threading.Lock()
        self.interval_s = interval_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush()
        threading.Thread(target=self._loop, name=f"kpad-stats-{role}", daemon=True).start()

    def add(self, **counts: int) -> None:
        with self.lock:
            self.counts.update(counts)

    def flush(self) -> None:
        with self.lock:
            data = json.dumps(dict(self.counts))
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(data)
        tmp.replace(self.path)

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval_s)
            self.flush()


def read_stats(directory: str | Path) -> dict[str, Counter]:
    """Sum the counters of every process's file in ``directory`` by role (``scheduler``, ``worker0``, ...)."""
    out: dict[str, Counter] = {}
    for f in sorted(Path(directory).glob("*.json")):
        role = f.stem.rsplit("-", 1)[0]
        out.setdefault(role, Counter()).update(json.loads(f.read_text() or "{}"))
    return out


_stats: dict[str, Stats] = {}


def _stats_for(role: str) -> Stats | None:
    directory = os.environ.get(ENV_STATS)
    if not directory:
        return None
    if role not in _stats:
        _stats[role] = Stats(directory, role)
    return _stats[role]


# ----------------------------------------------------------------------------- patches


def _patch_scheduler(pad: bool) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.update_draft_token_ids
    if getattr(original, "_kpad_patched", False):
        return
    original_init = Scheduler.__init__

    def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003 - vLLM's own signature
        original_init(self, *args, **kwargs)
        stats = _stats_for("scheduler")
        if stats is not None:
            stats.add(async_scheduling=int(bool(getattr(self.scheduler_config, "async_scheduling", False))))

    Scheduler.__init__ = __init__

    def update_draft_token_ids(self, draft_token_ids):  # noqa: ANN001 - vLLM's own signature
        original(self, draft_token_ids)
        spec = self.vllm_config.speculative_config
        if spec is None:
            return
        pad_here = pad and spec.method == "suffix"  # only suffix drafts are padded; every method is counted
        stats = _stats_for("scheduler")
        k = self.num_spec_tokens
        counts: Counter = Counter()
        for req_id in draft_token_ids.req_ids:
            request = self.requests.get(req_id)
            if request is None or request.is_finished() or request.is_prefill_chunk:
                continue
            real = list(request.spec_token_ids)
            if pad_here:
                request.spec_token_ids = pad_draft(real, k, self.max_model_len - request.num_tokens - 1)
            n_pad = len(request.spec_token_ids) - len(real)
            counts.update(
                draft_requests=1,
                real_draft_tokens=len(real),
                pad_tokens=n_pad,
                padded_requests=int(n_pad > 0),
                zero_draft_requests=int(not real),
            )
            counts.update({f"real_draft_tokens_pos{i}": 1 for i in range(len(real))})
        if stats is not None and counts:
            stats.add(**counts)

    update_draft_token_ids._kpad_patched = True
    Scheduler.update_draft_token_ids = update_draft_token_ids


def _patch_model_runner() -> None:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner._determine_batch_execution_and_padding
    if getattr(original, "_kpad_patched", False):
        return

    def _determine_batch_execution_and_padding(self, *args, **kwargs):  # noqa: ANN001
        result = original(self, *args, **kwargs)
        stats = _stats_for(f"worker{_rank()}")
        if stats is not None:
            mode = getattr(result[0], "name", str(result[0]))
            num_reqs = kwargs.get("num_reqs", args[1] if len(args) > 1 else None)
            decode = False
            try:
                batch = self.input_batch
                decode = bool(num_reqs) and bool(
                    (batch.num_computed_tokens_cpu[:num_reqs] >= batch.num_prompt_tokens[:num_reqs]).all()
                )
            except (AttributeError, TypeError):
                pass
            stats.add(**{f"steps_{mode}": 1, **({f"decode_steps_{mode}": 1} if decode else {})})
        return result

    _determine_batch_execution_and_padding._kpad_patched = True
    GPUModelRunner._determine_batch_execution_and_padding = _determine_batch_execution_and_padding


def _patch_v2_model_runner() -> None:
    """Count step modes in vLLM's Model Runner V2 too (vLLM 0.26 runs plain decoding, van, on it).

    Its ``execute_model`` picks the mode in ``dispatch_cg_and_sync_dp(manager, num_reqs, num_tokens,
    uniform_token_count, ...)``; a decode step there is one where every request is scheduled exactly one
    token (``uniform_token_count == 1``). Absent module (older vLLM, CPU builds): nothing to count.
    """
    try:
        from vllm.v1.worker.gpu import model_runner as v2
    except Exception:  # noqa: BLE001 - any import failure means there is no V2 runner to count
        return
    original = getattr(v2, "dispatch_cg_and_sync_dp", None)
    if original is None or getattr(original, "_kpad_patched", False):
        return

    def dispatch_cg_and_sync_dp(*args, **kwargs):  # noqa: ANN002, ANN003
        result = original(*args, **kwargs)
        stats = _stats_for(f"worker{_rank()}")
        if stats is not None:
            mode = getattr(getattr(result[0], "cg_mode", None), "name", "NONE")
            uniform = kwargs.get("uniform_token_count", args[3] if len(args) > 3 else None)
            stats.add(**{f"steps_{mode}": 1, **({f"decode_steps_{mode}": 1} if uniform == 1 else {})})
        return result

    dispatch_cg_and_sync_dp._kpad_patched = True
    v2.dispatch_cg_and_sync_dp = dispatch_cg_and_sync_dp


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    except (ImportError, RuntimeError):
        return 0


def register() -> None:
    """vLLM general-plugin entry point (runs in every vLLM process).

    Pads drafts when ``VLLM_SUFFIX_PAD_UNIFORM=1`` and counts when ``KPAD_STATS_DIR`` is set.
    Errors raised here stop the server at start (vLLM swallows errors raised while *importing* a plugin,
    not those of its function), which is where an unsupported version or a missing arctic-inference
    must stop it.

    Raises:
        UnsupportedVllmError: padding asked for on an unsupported vLLM without the override.
        SuffixUnavailableError: padding asked for and arctic-inference is missing.
    """
    pad = os.environ.get(ENV_FLAG, "0") == "1"
    count = bool(os.environ.get(ENV_STATS))
    if not (pad or count):
        return
    if pad:
        import vllm

        check_version(vllm.__version__, os.environ.get(ENV_ALLOW, "0") == "1")
        check_suffix_available()
    _patch_scheduler(pad)
    if count:
        _patch_model_runner()
        _patch_v2_model_runner()
    if pad:
        log.warning("%s (pid %d)", LOADED_MESSAGE, os.getpid())
