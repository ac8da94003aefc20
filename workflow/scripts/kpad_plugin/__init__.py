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

With ``KPAD_AUTO_LENGTHS`` set as well (configuration method ``kpadauto``) each decode step's drafts are
padded or cut to one length chosen per step from that set (``kpad_plugin.auto``), and FULL cudagraphs are
captured for every length of the set (vLLM 0.26 captures them for ``1 + K`` only).

Environment:
    VLLM_SUFFIX_PAD_UNIFORM=1          pad drafts (otherwise the scheduler is left as vLLM ships it).
    KPAD_AUTO_LENGTHS=0,2,4,8,12       with the flag above: adaptive K-pad over these draft lengths (largest = K).
    KPAD_AUTO_EXPLORE_EVERY=64         every n-th step with drafts tries the next longer length (0: never).
    KPAD_AUTO_COST_REPEATS=3           timed forward passes per (length, request count) at start (>= 1).
    KPAD_AUTO_STEP_COSTS=<json>        forward times given instead of measured, ``{"L": [[requests, seconds],
                                       ...]}`` as the scheduler logs them (``auto.parse_step_costs``): for
                                       tests whose choices must not depend on how busy the machine is.
    KPAD_AUTO_SKIP_SPECULATION=1       skip the suffix tree lookups of a step whose drafts cannot pay
                                       (``auto.no_draft_pays``) and defer its tree updates to the next step
                                       that looks up; 0: always speculate. Only where the worker runs in
                                       the scheduler's process (executor ``uni``, tensor parallel size 1):
                                       elsewhere it is off, and the scheduler's log line says why.
    KPAD_AUTO_CHECK_DEFERRED=1         with the skip: also run vLLM's own proposer on a second suffix cache
                                       updated on every step, compare its drafts with each step that looks
                                       up (counters in :class:`Stats`); about doubles the proposer's
                                       time: for checks, not measured runs. Needs the skip on.
    KPAD_AUTO_UNPADDED=1               a step may also run unpadded, every request with its real draft (vLLM's
                                       PIECEWISE graphs), when that pays more per second (``auto.choose_step``;
                                       its cost learned from the unpadded steps run); 0 (the default): never.
    KPAD_ALLOW_UNSUPPORTED_VLLM=1      pad on a vLLM version other than ``SUPPORTED_VLLM`` (logged loudly).
    KPAD_STATS_DIR=<dir>               count draft and pad tokens (scheduler) and the cudagraph runtime
                                       mode of every executed step (model runner), and time the stages of
                                       each engine step (``STEP_STAGES``); each process writes
                                       ``<dir>/<role>-<pid>.json`` a few times a second.
"""

from __future__ import annotations

import bisect
import inspect
import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path

from . import auto

log = logging.getLogger("vllm.kpad_plugin")

PAD_TOKEN_ID = -1
ENV_FLAG = "VLLM_SUFFIX_PAD_UNIFORM"
ENV_ALLOW = "KPAD_ALLOW_UNSUPPORTED_VLLM"
ENV_STATS = "KPAD_STATS_DIR"
SUPPORTED_VLLM = ("0.26.0", "0.32.0")
LOADED_MESSAGE = "K-pad plugin active: suffix drafts padded to K with -1"
AUTO_MESSAGE = "K-pad plugin: adaptive draft lengths"


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
    ``draft_requests`` (request-steps given a draft slot), ``real_draft_tokens`` (real draft tokens sent to be
    verified), ``real_draft_tokens_pos<i>`` (request-steps whose real draft reached draft position i, 0-based:
    real draft tokens by position),
    ``pad_tokens``, ``padded_requests``, ``zero_draft_requests``, ``cut_tokens`` (real draft tokens that
    ``kpadauto`` cut off), ``verified_draft_len<n>`` (verified request-steps whose draft, pads included, had n
    tokens, n >= 1: a request-step without draft tokens is not a draft; vLLM's draft tokens = sum of n x count).
    ``kpadauto`` only: ``auto_steps_len<L>`` (steps whose drafts were given length L; a step is a call of
    ``update_draft_token_ids`` with at least one request, mixed prefill steps included), ``auto_explore_steps``
    (steps the exploration gave a longer length), ``auto_overhead_us`` (last estimate of O),
    ``auto_overhead_len<L>_us`` (the overhead charged to length L, from its own steps, once it has enough),
    ``auto_unpadded_base_ns`` and ``auto_unpadded_per_token_ns`` (``KPAD_AUTO_UNPADDED=1``: the last line of an
    unpadded step's cost, ``a + b v``, once an unpadded step has been timed).
    ``async_scheduling``: 1 when the scheduler runs with asynchronous scheduling, set once at its start from
    vLLM's resolved config (vLLM 0.32 does not log it), else 0.
    Model-runner counters (role ``worker<rank>``): ``steps_<MODE>`` and ``decode_steps_<MODE>`` for each
    cudagraph runtime mode (NONE, PIECEWISE, FULL) of executed steps; a decode step has no prompt tokens;
    ``kpadauto``: ``auto_shape_decode_steps_<MODE>``, the decode steps whose requests all have query length 1 + L,
    L one of its lengths (every padded step; an unpadded one only where its drafts happen to be that uniform);
    ``skipped_speculation_steps`` (``kpadauto``: proposer calls whose suffix tree lookups were skipped);
    with ``KPAD_AUTO_CHECK_DEFERRED=1``: ``deferred_check_steps`` (proposer calls that looked up, each compared
    with vLLM's own proposer on a second cache), ``deferred_check_mismatches`` (requests whose drafts differed),
    ``deferred_check_draft_tokens`` (vLLM's draft tokens compared), ``deferred_check_flushed_steps`` and
    ``deferred_check_flushed_draft_tokens`` (the same, of the calls that first appended held-back tokens: the
    ones that test the deferred updates).
    Step timers (:func:`_patch_step_timers`), in the role of the process that runs the stage:
    ``time_us_<stage>`` (wall time, microseconds) and ``calls_<stage>`` for each stage of :data:`STEP_STAGES`.
    """

    def __init__(self, directory: str, role: str, interval_s: float = 0.2):
        self.path = Path(directory) / f"{role}-{os.getpid()}.json"
        self.counts: Counter = Counter()
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()  # one flush at a time (they share the .tmp file); add() never waits on it
        self.interval_s = interval_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush()
        threading.Thread(target=self._loop, name=f"kpad-stats-{role}", daemon=True).start()

    def add(self, **counts: int) -> None:
        with self.lock:
            self.counts.update(counts)

    def set(self, **values: int) -> None:
        """Set gauges (values that replace, not add)."""
        with self.lock:
            for key, value in values.items():
                self.counts[key] = value

    def flush(self) -> None:
        with self.write_lock:
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


class AutoState:
    """The scheduler's state of ``kpadauto``: lengths, acceptance counts, step costs, the step being timed."""

    def __init__(
        self, lengths: tuple[int, ...], k_max: int, explore_every: int, skip: bool = True, unpadded: bool = False
    ):
        self.lengths = lengths
        self.skip = skip
        self.acceptance = auto.AcceptanceByPosition(k_max)
        self.costs: auto.StepCosts | None = auto.StepCosts(_AUTO_COSTS) if _AUTO_COSTS else None
        #: ``KPAD_AUTO_UNPADDED=1``: the unpadded steps' costs, learned online (None: every step is padded)
        self.unpadded: auto.UnpaddedCosts | None = auto.UnpaddedCosts() if unpadded else None
        self.unpadded_next = False  # the drafts handed to the next step were left unpadded
        self.explore_every = explore_every
        self.steps = 0
        self.schedule_started: float | None = None


_AUTO_COSTS: dict[int, list[tuple[int, float]]] = {}  # filled in the engine process before its scheduler starts
#: ``KPAD_AUTO_STEP_COSTS`` parsed by :func:`register` (None: measure the costs at start)
_GIVEN_COSTS: dict[int, list[tuple[int, float]]] | None = None
# Set by the kpadauto scheduler at each schedule(): the step's proposals cannot pay (auto.no_draft_pays). Read by
# the suffix proposer's patch; only a worker in the scheduler's own process (executor uni at world size 1) sees it.
_SKIP_SPECULATION = False


def costs_note() -> str:
    """What the scheduler's line says of the step costs: ``measured: <json>``, ``given by KPAD_AUTO_STEP_COSTS:
    <json>`` or ``NOT measured: padding to the longest draft``."""
    if not _AUTO_COSTS:
        return "NOT measured: padding to the longest draft"
    how = f"given by {auto.ENV_STEP_COSTS}" if _GIVEN_COSTS is not None else "measured"
    return f"{how}: {json.dumps(_AUTO_COSTS)}"


def auto_lengths(k_max: int) -> tuple[int, ...] | None:
    """The ``kpadauto`` lengths from ``KPAD_AUTO_LENGTHS`` (None when unset); raises as :func:`auto.parse_lengths`."""
    text = os.environ.get(auto.ENV_LENGTHS, "").strip()
    return auto.parse_lengths(text, k_max) if text else None


def _unpadded_line_ns(unpadded: auto.UnpaddedCosts | None) -> dict[str, int]:
    """``auto_unpadded_base_ns`` and ``auto_unpadded_per_token_ns``: the rule's line of an unpadded step's cost (a and
    b of ``a + b v``, v the tokens it verifies); nothing while no unpadded step has been timed."""
    if unpadded is None or unpadded.samples == 0:
        return {}
    a, b = unpadded.line()
    return {"auto_unpadded_base_ns": round(a * 1e9), "auto_unpadded_per_token_ns": round(b * 1e9)}


def _length_overheads_us(costs: auto.StepCosts) -> dict[str, int]:
    """``auto_overhead_len<L>_us``: the overhead O_L the rule charges length L, for each L it has timed enough."""
    return {
        f"auto_overhead_len{length}_us": int(own * 1e6)
        for length, (own, n) in costs.by_length.items()
        if n >= costs.min_length_samples
    }


def _patch_scheduler(pad: bool) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.update_draft_token_ids
    if getattr(original, "_kpad_patched", False):
        return
    original_init = Scheduler.__init__
    original_schedule = Scheduler.schedule
    original_update = Scheduler.update_from_output

    def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003 - vLLM's own signature
        original_init(self, *args, **kwargs)
        stats = _stats_for("scheduler")
        if stats is not None:
            stats.add(async_scheduling=int(bool(getattr(self.scheduler_config, "async_scheduling", False))))
        self._kpad_auto = None
        spec = self.vllm_config.speculative_config
        lengths = auto_lengths(self.num_spec_tokens) if pad and spec is not None and spec.method == "suffix" else None
        if lengths is not None:
            dp = self.vllm_config.parallel_config.data_parallel_size
            if dp > 1:
                raise ValueError(
                    f"{auto.ENV_LENGTHS} (kpadauto) with data_parallel_size {dp}: data-parallel ranks would choose "
                    "different draft lengths and their batches would no longer match (vLLM turns its own dynamic "
                    "speculative decoding off under data parallelism for this reason); use tensor parallelism or kpad"
                )
            if getattr(self.scheduler_config, "async_scheduling", False):
                raise ValueError(
                    f"{auto.ENV_LENGTHS} (kpadauto) with async scheduling: vLLM then never hands the drafts to the "
                    "scheduler (update_draft_token_ids), so no length could be chosen; drop --async-scheduling"
                )
            every = auto.env_int(os.environ, auto.ENV_EXPLORE, auto.DEFAULT_EXPLORE_EVERY, 0)
            asked = bool(auto.env_int(os.environ, auto.ENV_SKIP, auto.DEFAULT_SKIP, 0))
            parallel = self.vllm_config.parallel_config
            blocked = auto.skip_blocked_by(parallel.distributed_executor_backend, parallel.world_size)
            if blocked and _CHECK_DEFERRED:
                raise ValueError(
                    f"{auto.ENV_CHECK_DEFERRED}=1 would check nothing: no step can be skipped, {blocked}; run the "
                    f"check at tensor parallel size 1 with the default executor, or drop {auto.ENV_CHECK_DEFERRED}"
                )
            skip = asked and not blocked
            unpadded = bool(auto.env_int(os.environ, auto.ENV_UNPADDED, auto.DEFAULT_UNPADDED, 0))
            self._kpad_auto = AutoState(lengths, self.num_spec_tokens, every, skip, unpadded)
            log.warning(
                "%s %s (K_max %d, explore every %d steps, speculation skipped when no draft pays: %s, unpadded steps: "
                "%s); step costs %s",
                AUTO_MESSAGE,
                list(lengths),
                self.num_spec_tokens,
                every,
                "yes" if skip else f"no, {blocked}" if asked else f"no ({auto.ENV_SKIP}=0)",
                "yes" if unpadded else "no",
                costs_note(),
            )

    Scheduler.__init__ = __init__

    def schedule(self, *args, **kwargs):  # noqa: ANN002, ANN003
        global _SKIP_SPECULATION
        state = getattr(self, "_kpad_auto", None)
        if state is None:
            return original_schedule(self, *args, **kwargs)
        state.schedule_started = time.perf_counter()
        output = original_schedule(self, *args, **kwargs)
        # this step's proposals get their length in the next update_draft_token_ids (step count + 1), over its
        # decode requests (vLLM sets is_prefill_chunk at the end of schedule(); requests that finish in this step
        # drop out there, so the count may differ: that wastes or misses one step's proposals, never changes output)
        explore_next = state.explore_every > 0 and (state.steps + 1) % state.explore_every == 0
        requests = sum(
            1 for r in output.num_scheduled_tokens if not getattr(self.requests.get(r), "is_prefill_chunk", True)
        )
        _SKIP_SPECULATION = (
            state.skip
            and not explore_next
            and auto.no_draft_pays(
                requests, state.lengths, state.acceptance.probabilities(), state.costs, state.unpadded
            )
        )
        return output

    Scheduler.schedule = schedule

    def update_from_output(self, scheduler_output, model_runner_output):  # noqa: ANN001
        now = time.perf_counter()
        spec_tokens = getattr(scheduler_output, "scheduled_spec_decode_tokens", None) or {}
        state = getattr(self, "_kpad_auto", None)
        counts: Counter = Counter()
        sampled = model_runner_output.sampled_token_ids
        index = model_runner_output.req_id_to_index
        verified = []  # (real draft length, accepted tokens) of each verified request-step
        for req_id, ids in spec_tokens.items():
            if not ids or req_id not in index or not sampled:
                continue
            generated = sampled[index[req_id]]
            if not len(generated):
                continue
            counts[f"verified_draft_len{len(ids)}"] += 1
            if state is not None:
                real = ids.index(PAD_TOKEN_ID) if PAD_TOKEN_ID in ids else len(ids)  # pads follow the real tokens
                verified.append((real, len(generated) - 1))
        if state is not None:
            state.acceptance.observe_all(verified)
        if state is not None and state.costs is not None and state.schedule_started is not None:
            scheduled = scheduler_output.num_scheduled_tokens
            lens = {len(spec_tokens.get(r) or ()) for r in scheduled}
            decode_only = not scheduler_output.scheduled_new_reqs and all(
                n == 1 + len(spec_tokens.get(r) or ()) for r, n in scheduled.items()
            )
            if scheduled and decode_only and state.unpadded_next and state.unpadded is not None:
                state.unpadded.observe_step(sum(scheduled.values()), now - state.schedule_started)
            elif scheduled and decode_only and len(lens) == 1:
                state.costs.observe_step(lens.pop(), len(scheduled), now - state.schedule_started)
            state.schedule_started = None
        stats = _stats_for("scheduler")
        if stats is not None and counts:
            stats.add(**counts)
        return original_update(self, scheduler_output, model_runner_output)

    Scheduler.update_from_output = update_from_output

    def update_draft_token_ids(self, draft_token_ids):  # noqa: ANN001 - vLLM's own signature
        original(self, draft_token_ids)
        spec = self.vllm_config.speculative_config
        if spec is None:
            return
        pad_here = pad and spec.method == "suffix"  # only suffix drafts are padded; every method is counted
        stats = _stats_for("scheduler")
        k = self.num_spec_tokens
        state = getattr(self, "_kpad_auto", None) if pad_here else None
        requests = []
        for req_id in draft_token_ids.req_ids:
            request = self.requests.get(req_id)
            if request is None or request.is_finished() or request.is_prefill_chunk:
                continue
            requests.append((request, list(request.spec_token_ids)))
        counts: Counter = Counter()
        length, unpadded = k, False
        if state is not None and requests:
            state.steps += 1
            explore = state.explore_every > 0 and state.steps % state.explore_every == 0
            real_lens, p = [len(real) for _, real in requests], state.acceptance.probabilities()
            length = auto.choose_step(real_lens, state.lengths, p, state.costs, state.unpadded)
            if explore:
                retime = (state.steps // state.explore_every) % 2 == 1  # every other exploration step
                tried = auto.choose_step(
                    real_lens, state.lengths, p, state.costs, state.unpadded, explore=True, retime_unpadded=retime
                )
                explore, length = tried != length, tried
            unpadded = length == auto.UNPADDED
            length = k if unpadded else length  # unpadded: every real draft as proposed (at most K), nothing cut
            counts.update(
                {
                    "auto_unpadded_steps" if unpadded else f"auto_steps_len{length}": 1,
                    "auto_explore_steps": int(explore),
                }
            )
        if state is not None:
            state.unpadded_next = unpadded
        # summed here and added once per step (a Counter update per request cost ~0.2 ms a step at 32 requests)
        real_tokens = pads = padded = zero = cut = 0
        positions = [0] * (max((len(real) for _, real in requests), default=0) + 1)
        for request, real in requests:
            kept = real[:length] if state is not None else real
            if pad_here and not unpadded:
                request.spec_token_ids = pad_draft(kept, length, self.max_model_len - request.num_tokens - 1)
            n_pad = len(request.spec_token_ids) - len(kept)
            real_tokens += len(kept)
            pads += n_pad
            padded += n_pad > 0
            zero += not kept
            cut += len(real) - len(kept)
            positions[len(kept)] += 1
        if requests:
            counts.update(
                draft_requests=len(requests),
                real_draft_tokens=real_tokens,
                pad_tokens=pads,
                padded_requests=padded,
                zero_draft_requests=zero,
                cut_tokens=cut,
            )
            reached = 0  # requests whose kept draft reached position i: those with a longer draft than i
            for i in range(len(positions) - 1, 0, -1):
                reached += positions[i]
                if reached:
                    counts[f"real_draft_tokens_pos{i - 1}"] += reached
        if stats is not None and counts:
            stats.add(**counts)
            if state is not None and state.costs is not None:
                stats.set(
                    auto_overhead_us=int(state.costs.overhead_s * 1e6),
                    **_length_overheads_us(state.costs),
                    **_unpadded_line_ns(state.unpadded),
                )

    update_draft_token_ids._kpad_patched = True
    Scheduler.update_draft_token_ids = update_draft_token_ids


#: what :func:`_record_responses` and :func:`_flush_responses` read of arctic-inference 0.3.0's SuffixDecodingCache
CACHE_INTERNALS = ("_local_trees", "_global_tree", "_req_to_seq_id")


def check_cache_internals(cache_class=None) -> None:  # noqa: ANN001 - arctic-inference's SuffixDecodingCache
    """Raise :class:`SuffixUnavailableError` unless a new suffix cache has :data:`CACHE_INTERNALS` (arctic-inference
    0.3.0 has), so that kpadauto's deferred tree updates fail at start, not in the middle of a run.

    Args:
        cache_class: the class to check; arctic-inference's ``SuffixDecodingCache`` when None.
    """
    if cache_class is None:
        from arctic_inference.suffix_decoding import SuffixDecodingCache as cache_class
    cache = cache_class(max_tree_depth=4, max_cached_requests=1)
    missing = [name for name in CACHE_INTERNALS if not hasattr(cache, name)]
    if missing:
        raise SuffixUnavailableError(
            f"kpadauto's skipped speculation defers suffix tree updates through {cache_class.__name__}'s "
            f"{', '.join(missing)}, which this arctic-inference lacks: install arctic-inference==0.3.0, or set "
            f"{auto.ENV_SKIP}=0 (lookups on every step)"
        )


def _flush_responses(proposer) -> bool:  # noqa: ANN001 - vLLM's SuffixDecodingProposer
    """Append the tokens :func:`_record_responses` held back to the suffix trees, in the order vLLM would have;
    return whether there were any.

    Each request's own tree gets its held-back tokens in one ``SuffixTree.extend`` (one sequence: the order is its
    own). The global tree, shared by every request, gets them step by step and request by request in batch order,
    exactly as vLLM's ``propose`` calls ``SuffixDecodingCache.add_active_response``: where two continuations of a
    context are seen equally often, arctic-inference's lookup takes the one inserted first, so a different order
    could change a draft. Reads arctic-inference 0.3.0's ``_local_trees``, ``_global_tree`` (the trees that
    ``add_active_response`` extends) through the cache object.
    """
    from arctic_inference.suffix_decoding._C import SuffixTree

    held = proposer.__dict__.get("_kpad_pending")
    if not held or not (held["local"] or held["global"]):
        return False
    cache = proposer.suffix_cache
    for req_id, tokens in held["local"].items():
        SuffixTree.extend(cache._local_trees[req_id], 0, tokens)
    for seq_id, tokens in held["global"]:
        SuffixTree.extend(cache._global_tree, seq_id, tokens)
    held["local"].clear()
    held["global"].clear()
    return True


def _record_responses(proposer, input_batch, sampled_token_ids) -> list[list[int]]:  # noqa: ANN001
    """``propose`` of a step whose suffix tree lookups are skipped: empty drafts, the sampled tokens held back.

    Does what vLLM's ``SuffixDecodingProposer.propose`` (0.26.0 and 0.32.0, the same loop) does for each request -
    prefill chunks and requests at ``max_model_len`` skipped, a new request's prompt tree built (an earlier
    response of the same id evicted first), finished requests stopped - except the lookup (nothing is proposed)
    and the tree updates, which wait in ``proposer._kpad_pending`` (``local``: request id -> tokens; ``global``:
    (sequence id, tokens) in vLLM's order) until :func:`_flush_responses`. That runs before the next step that
    looks up drafts and before any request starts (a start can evict responses from the global cache), so every
    lookup sees the trees of vLLM's own updates and proposes the same drafts. A request stopped here loses its
    own tree, as in vLLM; its response stays held for the global tree.

    Args:
        proposer: vLLM's ``SuffixDecodingProposer``.
        input_batch: vLLM's ``InputBatch`` (``req_ids``, ``req_id_to_index``, ``num_tokens_no_spec``,
            ``num_prompt_tokens``, ``token_ids_cpu``).
        sampled_token_ids: per request in batch order, the token ids sampled this step (empty for a prefill chunk).

    Returns:
        One empty draft per request, as ``propose`` returns drafts.
    """
    cache = proposer.suffix_cache
    active = cache.active_requests
    held = proposer.__dict__.setdefault("_kpad_pending", {"local": {}, "global": []})
    local, in_order = held["local"], held["global"]
    seq_ids = cache._req_to_seq_id
    for i, sampled in enumerate(sampled_token_ids):
        if not sampled or input_batch.num_tokens_no_spec[i] >= proposer.max_model_len:
            continue
        req_id = input_batch.req_ids[i]
        if req_id not in active:
            _flush_responses(proposer)
            if req_id in cache.cached_requests:
                cache.evict_cached_response(req_id)
            index = input_batch.req_id_to_index[req_id]
            cache.start_request(req_id, input_batch.token_ids_cpu[index, : input_batch.num_prompt_tokens[index]])
        tokens = local.get(req_id)
        if tokens is None:
            local[req_id] = list(sampled)
        else:
            tokens.extend(sampled)
        seq_id = seq_ids.get(req_id)
        if seq_id is not None:
            in_order.append((seq_id, list(sampled)))
    for req_id in active - input_batch.req_id_to_index.keys():
        local.pop(req_id, None)
        cache.stop_request(req_id)
    return [[] for _ in sampled_token_ids]


#: ``KPAD_AUTO_CHECK_DEFERRED`` (an integer >= 0, not 0 = on), read by :func:`register`
_CHECK_DEFERRED = False


def _shadow_proposer(proposer):  # noqa: ANN001, ANN202 - vLLM's SuffixDecodingProposer
    """With ``KPAD_AUTO_CHECK_DEFERRED=1``: a copy of ``proposer`` with a suffix cache of its own (same tree depth
    and cached-request limit), made at the first ``propose`` (both caches empty then) and kept on ``proposer``;
    the patched ``propose`` runs vLLM's own method on it every step, skipped or not, so its drafts are those of
    vLLM's eager tree updates. Otherwise None.
    """
    if not _CHECK_DEFERRED:
        return None
    shadow = proposer.__dict__.get("_kpad_shadow")
    if shadow is None:
        shadow = object.__new__(type(proposer))
        shadow.__dict__.update(
            {k: v for k, v in proposer.__dict__.items() if k not in ("_kpad_pending", "_kpad_shadow")}
        )
        cache = proposer.suffix_cache
        shadow.suffix_cache = type(cache)(
            max_tree_depth=cache.max_tree_depth, max_cached_requests=cache.max_cached_requests
        )
        proposer.__dict__["_kpad_shadow"] = shadow
    return shadow


def _patch_suffix_proposer() -> None:
    """``kpadauto``: while ``_SKIP_SPECULATION`` is set, vLLM's suffix proposer looks nothing up and defers its
    suffix tree updates (:func:`_record_responses`); the next step that speculates first appends what was held
    back, in vLLM's order (:func:`_flush_responses`), then runs vLLM's own ``SuffixDecodingProposer.propose``
    (vLLM 0.26 and 0.32). A skipped step proposes empty drafts, so its length is 0, as the rule would choose
    anyway. Counts ``skipped_speculation_steps`` (role ``worker<rank>``). Absent module: nothing patched.
    vLLM's own method is kept as ``SuffixDecodingProposer.propose._kpad_original``.

    Why deferred: with the lookups alone skipped (this plugin before 2026-12-02), vLLM's loop still called
    ``add_active_response`` and built each request's lookup pattern on every step; ``make bench-proposer`` (32
    requests, this project's 2-core VM) timed that at 0.298 ms per step, against 0.077 ms deferred and 0.672 ms
    with the lookups.
    """
    try:
        from vllm.v1.spec_decode.suffix_decoding import SuffixDecodingProposer
    except ImportError:
        return
    original = SuffixDecodingProposer.propose
    if getattr(original, "_kpad_patched", False):
        return

    def propose(self, num_speculative_tokens, input_batch, sampled_token_ids, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        shadow = _shadow_proposer(self)
        expected = None
        if shadow is not None:  # vLLM's eager updates and lookups, on a cache of its own
            expected = original(shadow, num_speculative_tokens, input_batch, sampled_token_ids, *args, **kwargs)
        if not _SKIP_SPECULATION:
            flushed = _flush_responses(self)
            drafts = original(self, num_speculative_tokens, input_batch, sampled_token_ids, *args, **kwargs)
            stats = _stats_for(f"worker{_rank()}") if expected is not None else None
            if stats is not None:
                same = [list(a) == list(b) for a, b in zip(drafts, expected, strict=True)]
                tokens = sum(len(d) for d in expected)
                stats.add(
                    deferred_check_steps=1,
                    deferred_check_mismatches=same.count(False),
                    deferred_check_draft_tokens=tokens,
                    deferred_check_flushed_steps=int(flushed),
                    deferred_check_flushed_draft_tokens=tokens if flushed else 0,
                )
            return drafts
        drafts = _record_responses(self, input_batch, sampled_token_ids)
        stats = _stats_for(f"worker{_rank()}")
        if stats is not None:
            stats.add(skipped_speculation_steps=1)
        return drafts

    propose._kpad_patched = True
    propose._kpad_original = original
    SuffixDecodingProposer.propose = propose


def uniform_query_len(num_tokens: int | None, num_reqs: int | None, max_query_len: int | None) -> int | None:
    """The query length every request of a step has, or None when they differ (or a value is unknown): all are
    equal exactly when ``num_tokens == num_reqs x max_query_len`` (vLLM's own uniform-decode test)."""
    if not (num_tokens and num_reqs and max_query_len):
        return None
    return max_query_len if num_tokens == num_reqs * max_query_len else None


def _patch_model_runner(lengths: tuple[int, ...] | None = None) -> None:
    """Count each executed step's cudagraph mode (``steps_<MODE>``, ``decode_steps_<MODE>``) and, with
    ``kpadauto`` ``lengths``, ``auto_shape_decode_steps_<MODE>``: decode steps whose requests all have the query
    length 1 + L of a length L of the set, the shape a padded step has (an unpadded step can have it too)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner._determine_batch_execution_and_padding
    if getattr(original, "_kpad_patched", False):
        return
    shapes = frozenset(1 + n for n in lengths) if lengths else frozenset()

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
            counts = {f"steps_{mode}": 1, **({f"decode_steps_{mode}": 1} if decode else {})}
            query = uniform_query_len(kwargs.get("num_tokens"), num_reqs, kwargs.get("max_num_scheduled_tokens"))
            if decode and query in shapes:
                counts[f"auto_shape_decode_steps_{mode}"] = 1
            stats.add(**counts)
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


def _patch_auto_cudagraphs(lengths: tuple[int, ...]) -> None:
    """FULL cudagraphs for every ``kpadauto`` length (vLLM 0.26 model runner V1; absent pieces: nothing patched).

    vLLM's dispatcher registers FULL uniform-decode graphs for one query length, ``1 + K``. This adds, for
    every other length L of the set, a FULL key ``(num_tokens = (1 + L) x r, num_reqs = r, uniform)`` for
    each request count r that ``1 + K`` has (the pair fixes the query length, so keys never collide);
    capture then records those graphs (``_warmup_and_capture`` runs the dummy batch at that query length),
    and at run time a uniform batch of query length 1 + L pads its request count up to the next captured r.
    Non-uniform batches (prefills, requests near ``max_model_len``) keep vLLM's own dispatch (PIECEWISE).
    """
    try:
        from vllm.config import CUDAGraphMode
        from vllm.forward_context import BatchDescriptor
        from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except Exception as err:  # noqa: BLE001 - a build without these pieces has no cudagraphs to add
        log.warning("K-pad plugin: adaptive lengths without extra cudagraphs (%s)", err)
        return
    if getattr(CudagraphDispatcher.initialize_cudagraph_keys, "_kpad_auto_patched", False):
        return
    from dataclasses import replace

    original_keys = CudagraphDispatcher.initialize_cudagraph_keys
    original_padded = CudagraphDispatcher._create_padded_batch_descriptor
    original_determine = GPUModelRunner._determine_batch_execution_and_padding
    original_capture = GPUModelRunner._warmup_and_capture
    determine_signature = inspect.signature(original_determine)

    def initialize_cudagraph_keys(self, *args, **kwargs):  # noqa: ANN002, ANN003
        original_keys(self, *args, **kwargs)
        self._kpad_auto_q = None
        self._kpad_auto_reqs = []
        uniform = [d for d in self.cudagraph_keys[CUDAGraphMode.FULL] if d.uniform and d.num_reqs]
        if not uniform:
            return
        default_q = self.uniform_decode_query_len
        self._kpad_auto_reqs = sorted({d.num_reqs for d in uniform})
        added = 0
        for length in lengths:
            q = 1 + length
            if q == default_q:
                continue
            for d in uniform:
                self.add_cudagraph_key(CUDAGraphMode.FULL, replace(d, num_tokens=q * d.num_reqs))
                added += 1
        log.warning(
            "K-pad plugin: FULL cudagraph keys for draft lengths %s: %d added to %d (request counts %s)",
            list(lengths),
            added,
            len(uniform),
            self._kpad_auto_reqs,
        )

    def _create_padded_batch_descriptor(self, num_tokens, uniform_decode, has_lora, num_active_loras=0):  # noqa: ANN001
        q = getattr(self, "_kpad_auto_q", None)
        if q is None or not uniform_decode or not self.cudagraph_mode.has_mode(CUDAGraphMode.FULL):
            return original_padded(self, num_tokens, uniform_decode, has_lora, num_active_loras)
        reqs = self._kpad_auto_reqs
        i = bisect.bisect_left(reqs, -(-num_tokens // q))
        if i == len(reqs):
            return original_padded(self, num_tokens, False, has_lora, num_active_loras)
        return BatchDescriptor(
            num_tokens=q * reqs[i], num_reqs=reqs[i], uniform=True, has_lora=has_lora, num_active_loras=num_active_loras
        )

    def _determine_batch_execution_and_padding(self, *args, **kwargs):  # noqa: ANN002, ANN003
        bound = determine_signature.bind(self, *args, **kwargs).arguments
        q = bound["max_num_scheduled_tokens"]
        force = bound.get("force_uniform_decode")
        default_q = 1 + self.num_spec_tokens
        uniform = force is True or (force is None and bound["num_tokens"] == q * bound["num_reqs"])
        dispatcher = self.cudagraph_dispatcher
        if q == default_q or q - 1 not in lengths or not uniform or not getattr(dispatcher, "_kpad_auto_reqs", None):
            return original_determine(self, *args, **kwargs)
        saved = self.uniform_decode_query_len
        self.uniform_decode_query_len, dispatcher._kpad_auto_q = q, q
        try:
            return original_determine(self, *args, **kwargs)
        finally:
            self.uniform_decode_query_len, dispatcher._kpad_auto_q = saved, None

    def _warmup_and_capture(self, desc, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        if not (desc.uniform and desc.num_reqs):
            return original_capture(self, desc, *args, **kwargs)
        saved = self.uniform_decode_query_len
        self.uniform_decode_query_len = desc.num_tokens // desc.num_reqs
        try:
            return original_capture(self, desc, *args, **kwargs)
        finally:
            self.uniform_decode_query_len = saved

    initialize_cudagraph_keys._kpad_auto_patched = True
    CudagraphDispatcher.initialize_cudagraph_keys = initialize_cudagraph_keys
    CudagraphDispatcher._create_padded_batch_descriptor = _create_padded_batch_descriptor
    GPUModelRunner._determine_batch_execution_and_padding = _determine_batch_execution_and_padding
    GPUModelRunner._warmup_and_capture = _warmup_and_capture


def measure_step_costs(worker, lengths: list[int], requests: list[int], repeats: int) -> dict[int, list]:  # noqa: ANN001
    """Forward time of uniform decode steps, in seconds, on one worker: ``{L: [(r, seconds), ...]}``.

    Runs vLLM's dummy batch (``_dummy_run(num_tokens, uniform_decode=True)``, which replays the captured FULL
    graph where there is one, else runs eager) at query length ``1 + L`` for each request count r, once to
    warm up and then ``repeats`` times timed (CUDA synchronized). Called on every worker at once (tensor
    parallel ranks all-reduce inside the forward) through ``collective_rpc``.
    """
    import torch

    runner = getattr(worker, "model_runner", None) or worker.worker.model_runner
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    saved = runner.uniform_decode_query_len
    out: dict[int, list] = {}
    try:
        for length in lengths:
            q = 1 + length
            runner.uniform_decode_query_len = q
            points = []
            for r in requests:
                if q * r > runner.max_num_tokens:
                    continue
                runner._dummy_run(q * r, uniform_decode=True, skip_eplb=True)
                sync()
                start = time.perf_counter()
                for _ in range(repeats):
                    runner._dummy_run(q * r, uniform_decode=True, skip_eplb=True)
                sync()
                points.append((r, (time.perf_counter() - start) / repeats))
            out[length] = points
    finally:
        runner.uniform_decode_query_len = saved
    return out


def cost_request_counts(max_num_seqs: int) -> list[int]:
    """Request counts at which step costs are measured: powers of two below ``max_num_seqs``, and it."""
    counts, n = [], 1
    while n < max_num_seqs:
        counts.append(n)
        n *= 2
    return counts + [max_num_seqs]


def _patch_engine_core(lengths: tuple[int, ...]) -> None:
    """Measure ``kpadauto``'s step costs once the engine has captured its cudagraphs, before its scheduler starts.

    ``EngineCore._initialize_kv_caches`` (profiling, KV cache, compile and capture) is wrapped: after it, every
    worker runs :func:`measure_step_costs`; rank 0's table goes to the scheduler (same process). A failure is
    logged and leaves the scheduler padding to the longest draft.
    """
    from vllm.v1.engine.core import EngineCore

    original = EngineCore._initialize_kv_caches
    if getattr(original, "_kpad_auto_patched", False):
        return

    def _initialize_kv_caches(self, vllm_config):  # noqa: ANN001
        result = original(self, vllm_config)
        if _GIVEN_COSTS is not None:
            _AUTO_COSTS.clear()
            _AUTO_COSTS.update(_GIVEN_COSTS)
            log.warning("K-pad plugin: step costs given by %s, not measured", auto.ENV_STEP_COSTS)
            return result
        repeats = auto.env_int(os.environ, auto.ENV_COST_REPEATS, auto.DEFAULT_COST_REPEATS, 1)
        requests = cost_request_counts(vllm_config.scheduler_config.max_num_seqs)
        start = time.perf_counter()
        try:
            tables = self.model_executor.collective_rpc(measure_step_costs, args=(list(lengths), requests, repeats))
        except Exception as err:  # noqa: BLE001 - measured costs are an optimization; the run goes on without
            log.warning("K-pad plugin: step costs not measured (%s): padding to the longest draft", err)
            return result
        _AUTO_COSTS.clear()
        _AUTO_COSTS.update({int(k): [tuple(p) for p in v] for k, v in tables[0].items()})
        log.warning("K-pad plugin: step costs measured in %.1f s", time.perf_counter() - start)
        return result

    _initialize_kv_caches._kpad_auto_patched = True
    EngineCore._initialize_kv_caches = _initialize_kv_caches


#: engine-step stages timed when counting: stage -> (module, class, method, process role); ``role`` ``worker``
#: means ``worker<rank>``. Nested: ``engine_step`` (one iteration of the engine core's busy loop with work: vLLM's
#: ``step`` or ``step_with_batch_queue``, the outputs queued, ``post_step``) holds ``schedule``, ``execute_model``,
#: ``sample_tokens`` (vLLM 0.26's suffix proposer runs in it), ``update_from_output`` and ``post_step`` (drafts
#: taken from the worker, ``update_draft_token_ids``); ``propose`` (suffix proposer) is inside ``sample_tokens``;
#: ``input_queue`` (requests taken from the API server, waiting included) is outside ``engine_step``.
STEP_STAGES = {
    "engine_step": ("vllm.v1.engine.core", "EngineCoreProc", "_process_engine_step", "scheduler"),
    "input_queue": ("vllm.v1.engine.core", "EngineCoreProc", "_process_input_queue", "scheduler"),
    "post_step": ("vllm.v1.engine.core", "EngineCore", "post_step", "scheduler"),
    "schedule": ("vllm.v1.core.sched.scheduler", "Scheduler", "schedule", "scheduler"),
    "update_from_output": ("vllm.v1.core.sched.scheduler", "Scheduler", "update_from_output", "scheduler"),
    "execute_model": ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "execute_model", "worker"),
    "sample_tokens": ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "sample_tokens", "worker"),
    "propose": ("vllm.v1.spec_decode.suffix_decoding", "SuffixDecodingProposer", "propose", "worker"),
}
#: vLLM 0.26's Model Runner V2 (van there): the same two stages on its own class
V2_STAGES = {
    "execute_model": ("vllm.v1.worker.gpu.model_runner", "GPUModelRunner", "execute_model", "worker"),
    "sample_tokens": ("vllm.v1.worker.gpu.model_runner", "GPUModelRunner", "sample_tokens", "worker"),
}


def _timed(original, stage: str, role: str):  # noqa: ANN001, ANN202 - any vLLM method
    """``original`` wrapped to add its wall time to counters ``time_us_<stage>`` (microseconds, rounded) and
    ``calls_<stage>`` of process role ``role`` (``worker``: ``worker<rank>``)."""

    def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            stats = _stats_for(f"worker{_rank()}" if role == "worker" else role)
            if stats is not None:
                stats.add(**{f"time_us_{stage}": round((time.perf_counter() - start) * 1e6), f"calls_{stage}": 1})

    timed._kpad_timed = True
    timed.__wrapped__ = original
    return timed


def _patch_step_timers() -> None:
    """Time the engine-step stages of :data:`STEP_STAGES` (and :data:`V2_STAGES`) in every process that has them.

    Installed after the plugin's other patches, so a stage's time includes the plugin's own work in it (what
    ``kpadauto`` adds to a step). About 2 microseconds a call (one counter update under a lock), in every
    configuration alike. A class or method this vLLM lacks is left out (logged once per process).
    """
    import importlib

    missing = []
    for stage, (module, cls_name, method, role) in [*STEP_STAGES.items(), *V2_STAGES.items()]:
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except Exception:  # noqa: BLE001 - a build without this piece (CPU: no V2 runner) has nothing to time
            missing.append(f"{cls_name}.{method}")
            continue
        original = cls.__dict__.get(method)
        if original is None:
            missing.append(f"{cls_name}.{method}")
        elif not getattr(original, "_kpad_timed", False):
            setattr(cls, method, _timed(original, stage, role))
    if missing:
        log.info("K-pad plugin: step stages not timed on this vLLM: %s", ", ".join(missing))


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
        SuffixUnavailableError: padding asked for and arctic-inference is missing, or kpadauto's skipped
            speculation asked for and arctic-inference's cache lacks what it reads (:func:`check_cache_internals`).
        ValueError: a ``KPAD_AUTO_*`` setting that is not an integer in range, ``KPAD_AUTO_CHECK_DEFERRED``
            on with ``KPAD_AUTO_SKIP_SPECULATION=0`` (nothing to check), a ``KPAD_AUTO_STEP_COSTS`` that
            :func:`auto.parse_step_costs` refuses.
    """
    pad = os.environ.get(ENV_FLAG, "0") == "1"
    count = bool(os.environ.get(ENV_STATS))
    if not (pad or count):
        return
    if pad:
        import vllm

        check_version(vllm.__version__, os.environ.get(ENV_ALLOW, "0") == "1")
        check_suffix_available()
    global _CHECK_DEFERRED, _GIVEN_COSTS
    lengths = None
    if pad and os.environ.get(auto.ENV_LENGTHS, "").strip():
        lengths = auto.parse_lengths(os.environ[auto.ENV_LENGTHS])
        skip = auto.env_int(os.environ, auto.ENV_SKIP, auto.DEFAULT_SKIP, 0)
        _CHECK_DEFERRED = bool(auto.env_int(os.environ, auto.ENV_CHECK_DEFERRED, 0, 0))
        if _CHECK_DEFERRED and not skip:
            raise ValueError(auto.CHECK_WITHOUT_SKIP)
        if skip:
            check_cache_internals()
        text = os.environ.get(auto.ENV_STEP_COSTS, "").strip()
        _GIVEN_COSTS = auto.parse_step_costs(text, lengths) if text else None
    _patch_scheduler(pad)
    if lengths is not None:
        _patch_auto_cudagraphs(lengths)
        _patch_engine_core(lengths)
        _patch_suffix_proposer()
    if count:
        _patch_model_runner(lengths)
        _patch_v2_model_runner()
        _patch_step_timers()
    if pad:
        log.warning(
            "%s (pid %d)%s", LOADED_MESSAGE, os.getpid(), f"; {AUTO_MESSAGE} {list(lengths)}" if lengths else ""
        )
