"""GPU slots on one node: each running job gets its own GPUs, so small models run side by side.

Snakemake's ``--resources gpu=8`` only counts GPUs; it does not say *which* ones a job may use, and it
does not set ``CUDA_VISIBLE_DEVICES``. A run therefore takes ``n`` GPU indices out of the visible ones
here and hands them to its server as ``CUDA_VISIBLE_DEVICES``:

* one lock file per GPU, ``<lock_dir>/gpu-<index>.lock``, held with ``fcntl.flock`` for the whole run
  (the kernel drops it when the process ends, also on SIGKILL);
* the choice itself happens under ``<lock_dir>/gpus.lock``, so two jobs never grab halves of the same set;
* when fewer than ``n`` are free, the job releases what it tried and waits (``poll_s``) until
  ``timeout_s``, then fails with a message naming the busy GPUs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

from .locks import held, lock_dir, release, try_lock


def visible_gpus(configured: int | list | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The GPU indices this node offers to runs, as strings.

    Args:
        configured: config ``node.gpus``: an int N (indices 0..N-1) or a list of indices; None = ask the node.
        env: environment (default ``os.environ``); ``CUDA_VISIBLE_DEVICES`` there, when set, is the list.

    Without either, ``nvidia-smi -L`` counts the GPUs (none: an empty list).
    """
    env = os.environ if env is None else env
    if isinstance(configured, int):
        return [str(i) for i in range(configured)]
    if configured is not None:
        return [str(i) for i in configured]
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return [g.strip() for g in cvd.split(",") if g.strip() and g.strip() != "-1"]
    lines = nvidia_smi(["-L"]) or []
    return [str(i) for i, _ in enumerate(ln for ln in lines if ln.startswith("GPU "))]


def nvidia_smi(args: list[str], timeout_s: float = 30.0) -> list[str] | None:
    """The stdout lines of ``nvidia-smi <args>`` (e.g. ``["--query-gpu=driver_version", "--format=csv,noheader"]``);
    None where it cannot answer: no ``nvidia-smi`` (a CPU node), a non-zero exit, or no answer in ``timeout_s``."""
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.splitlines() if out.returncode == 0 else None


@contextlib.contextmanager
def allocated_gpus(
    n: int, visible: list[str], directory: str | None = None, timeout_s: float = 3600.0, poll_s: float = 2.0
) -> Iterator[list[str]]:
    """Hold ``n`` of the ``visible`` GPUs for the ``with`` block; yields their indices (lowest free first).

    ``n == 0`` yields ``[]`` at once (a CPU run).

    Raises:
        ValueError: ``n`` exceeds the number of visible GPUs (the message names both).
        TimeoutError: fewer than ``n`` were free for ``timeout_s`` seconds (the message names the busy ones).
    """
    if n == 0:
        yield []
        return
    if n > len(visible):
        raise ValueError(f"a run needs {n} GPUs (tensor_parallel_size) but the node offers {len(visible)}: {visible}")
    d = lock_dir(directory)
    deadline = time.monotonic() + timeout_s
    while True:
        taken: list[tuple[str, int]] = []
        with held(Path(d) / "gpus.lock"):
            busy = []
            for gpu in visible:
                fd = try_lock(Path(d) / f"gpu-{gpu}.lock")
                if fd is None:
                    busy.append(gpu)
                    continue
                taken.append((gpu, fd))
                if len(taken) == n:
                    break
            if len(taken) < n:
                for _, fd in taken:
                    release(fd)
                taken = []
        if taken:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{n} GPUs not free within {timeout_s:.0f} s: busy {busy} of {visible} (locks under {d})"
            )
        time.sleep(poll_s)
    try:
        yield [gpu for gpu, _ in taken]
    finally:
        for _, fd in taken:
            release(fd)
