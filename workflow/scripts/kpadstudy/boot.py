"""Why a server did not boot, and what to change before the next attempt.

:func:`classify_boot_failure` reads the server log and how the wait ended and names one reason:

    ``unsupported``  our K-pad plugin refused the vLLM version (``UnsupportedVllmError``), or vLLM said a
                     feature or setting is not supported.
    ``oom``          the GPU ran out of memory (``CUDA out of memory``, ``torch.OutOfMemoryError``).
    ``no_kv_cache``  weights fit but no room for the KV cache: vLLM 0.26 / 0.32's "No available memory for
                     the cache blocks", "... KV cache is needed, which is larger than the available KV
                     cache memory", or no GPU blocks at all (``num_gpu_blocks`` 0).
    ``timeout``      the process was alive but not healthy within ``server.boot_timeout_s``.
    ``crash``        it exited for another reason.
    ``error``        starting the process or waiting for it raised (the exception's class and message are
                     the evidence): the run's own boot code met something it did not expect.

Checked in that order: an unsupported version can lead to odd memory errors, and an OOM while
profiling is not a KV-cache sizing problem.

The retry policy (config ``server.retry``) is ``{attempts: N, adjust: {<reason>: {<setting>: factor}}}``:
after a failure whose reason is listed, the next attempt multiplies each named setting by its factor
(0.5 halves it; integer settings are rounded down, at least 1); a reason not listed ends the attempts.
"""

from __future__ import annotations

import re
from typing import Any

REASONS = ("unsupported", "oom", "no_kv_cache", "timeout", "crash", "error")

PATTERNS: dict[str, list[str]] = {
    "unsupported": [
        r"UnsupportedVllmError",
        r"K-pad plugin: vLLM \S+ is not supported",
        r"\bis not supported\b",
        r"\bnot supported (?:on|for|with|by)\b",
    ],
    "oom": [r"CUDA out of memory", r"torch\.OutOfMemoryError", r"torch\.cuda\.OutOfMemoryError", r"OutOfMemoryError"],
    "no_kv_cache": [
        r"No available memory for the cache blocks",
        r"KV cache is needed, which is larger than the available KV cache memory",
        r"num_gpu_blocks\s*[=:]\s*0\b",
        r"num_gpu_blocks > 0",
        r"Insufficient memory for KV cache",
    ],
}

# settings the retry policy may change, where they live in the config
ADJUSTABLE = {
    "max_model_len": ("server", "max_model_len", int),
    "max_num_seqs": ("server", "max_num_seqs", int),
    "gpu_memory_utilization": ("server", "gpu_memory_utilization", float),
    "kvcache_space_gib": ("server.cpu", "kvcache_space_gib", int),
}


def classify_boot_failure(
    log_text: str, exit_code: int | None, timed_out: bool, error: BaseException | None = None
) -> tuple[str, str]:
    """``(reason, evidence)``: the reason (one of :data:`REASONS`) and the log line that shows it.

    Args:
        log_text: the server's log (stdout and stderr).
        exit_code: the server's exit code, None if it was still running.
        timed_out: the wait for ``/health`` ran out (the process was then alive).
        error: the exception raised while starting the server or waiting for it, if that ended the boot.

    ``evidence`` is the last matching log line (stripped, at most 300 characters); for ``error`` the
    exception's class and message; for ``timeout`` / ``crash`` without a match a sentence naming the exit code.
    """
    if error is not None:
        return "error", f"{type(error).__name__}: {error}"[:300]
    lines = log_text.splitlines()
    for reason in ("unsupported", "oom", "no_kv_cache"):
        for line in reversed(lines):
            if any(re.search(p, line) for p in PATTERNS[reason]):
                return reason, line.strip()[:300]
    if timed_out:
        return "timeout", "not healthy within server.boot_timeout_s; the process was still running"
    return "crash", f"exited with code {exit_code} and no known cause in its log"


def attempt_settings(config: dict[str, Any], retry: dict[str, Any], history: list[str]) -> dict[str, Any] | None:
    """The settings of the next attempt, or None when there is none.

    Args:
        config: the resolved config (``server`` with its ``cpu`` block).
        retry: config ``server.retry`` (``attempts``, ``adjust``).
        history: reasons of the failed attempts so far, oldest first (empty for the first attempt).

    Returns:
        ``{setting: value}`` for every setting in :data:`ADJUSTABLE` (None where the config leaves it to
        vLLM), each failed attempt's adjustment applied in turn. None when ``attempts`` are used up or the
        last reason has no adjustment.

    Raises:
        ValueError: an adjustment names an unknown setting, or one the config leaves unset (the message
            names it).
    """
    settings = {name: _get(config, where, key) for name, (where, key, _) in ADJUSTABLE.items()}
    if len(history) >= int(retry.get("attempts", 1)):
        return None
    adjust = retry.get("adjust") or {}
    for reason in history:
        if reason not in adjust:
            return None
        for name, factor in adjust[reason].items():
            if name not in ADJUSTABLE:
                raise ValueError(
                    f"server.retry.adjust.{reason}.{name}: not a setting the retry can change ({sorted(ADJUSTABLE)})"
                )
            if settings[name] is None:
                raise ValueError(
                    f"server.retry.adjust.{reason}.{name}: server {name} is not set in the config, "
                    "so it cannot be scaled"
                )
            cast = ADJUSTABLE[name][2]
            value = settings[name] * float(factor)
            settings[name] = max(1, int(value)) if cast is int else round(value, 4)
    return settings


def apply_settings(config: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` whose ``server`` (and ``server.cpu``) carry ``settings``; None values are left out."""
    server = dict(config["server"])
    server["cpu"] = dict(server.get("cpu") or {})
    for name, value in settings.items():
        if value is None:
            continue
        where, key, _ = ADJUSTABLE[name]
        (server["cpu"] if where == "server.cpu" else server)[key] = value
    return {**config, "server": server}


def _get(config: dict[str, Any], where: str, key: str) -> Any:
    block = config["server"] if where == "server" else (config["server"].get("cpu") or {})
    return block.get(key)
