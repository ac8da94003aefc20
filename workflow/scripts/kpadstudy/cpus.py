"""CPU lists (``taskset -c`` syntax), CPU slots, and their checks against the CPUs this job may use.

A *slot* is one ``{"server": list, "client": list}`` pair of config ``taskset``: the CPUs one run pins its
server and its client to. Config ``taskset`` is one slot, or ``taskset.slots`` several disjoint ones, so
runs go side by side without sharing a CPU: each run holds its slot's CPUs through lock files
(``<lock_dir>/cpu-<n>.lock``, :func:`allocated_slot`), the way it holds its GPUs (:mod:`kpadstudy.gpus`).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Iterator

from .locks import held, lock_dir, release, try_lock


def parse_cpu_list(text: str) -> set[int]:
    """``"0-3,8,10-11"`` -> ``{0, 1, 2, 3, 8, 10, 11}``.

    Raises:
        ValueError: a part is not ``N`` or ``A-B`` with ``A <= B`` (the message quotes it).
    """
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                if a > b:
                    raise ValueError
                out.update(range(a, b + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise ValueError(f"CPU list {text!r}: {part!r} is not N or A-B") from None
    return out


def format_cpu_set(cpus: set[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"`` (the inverse of :func:`parse_cpu_list`)."""
    out, items = [], sorted(cpus)
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


def slots(taskset: dict) -> list[dict]:
    """The CPU slots of config ``taskset``: ``taskset.slots`` when given, else ``[{server, client}]``.

    Raises:
        ValueError: ``slots`` given together with ``server`` / ``client``; or two slots share CPUs (the
            message names both and the shared CPUs): side-by-side runs must never share a CPU.
    """
    listed = taskset.get("slots")
    if not listed:
        return [{"server": taskset.get("server"), "client": taskset.get("client")}]
    if taskset.get("server") or taskset.get("client"):
        raise ValueError("taskset: give either server / client (one slot) or slots (several), not both")
    out = [{"server": s.get("server"), "client": s.get("client")} for s in listed]
    for i, a in enumerate(out):
        for j in range(i):
            shared = slot_cpus(a) & slot_cpus(out[j])
            if shared:
                raise ValueError(
                    f"taskset.slots[{j}] and taskset.slots[{i}] share CPUs {format_cpu_set(shared)}: "
                    "runs side by side would measure each other; make the slots disjoint"
                )
    return out


def slot_cpus(slot: dict) -> set[int]:
    """Distinct CPUs of a slot's server and client lists together (empty when neither is pinned)."""
    cpus: set[int] = set()
    for role in ("server", "client"):
        if slot.get(role):
            cpus |= parse_cpu_list(slot[role])
    return cpus


def check_pinning(taskset: dict, allowed: set[int] | None = None) -> None:
    """Check the server and client CPU lists of every slot of config ``taskset`` against the job's allowed CPUs.

    Args:
        taskset: ``{"server": list or None, "client": list or None}`` or ``{"slots": [such dicts]}``.
        allowed: CPUs the job may run on (default ``os.sched_getaffinity(0)``: what SLURM, cgroups or
            an outer taskset granted).

    Raises:
        ValueError: a list names CPUs outside the allowed set (the message names the list, its CPUs
            outside, and the allowed set); or the slots are inconsistent (:func:`slots`).
    """
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    listed = bool(taskset.get("slots"))
    for i, slot in enumerate(slots(taskset)):
        for role in ("server", "client"):
            text = slot.get(role)
            if not text:
                continue
            outside = parse_cpu_list(text) - allowed
            if outside:
                key = f"taskset.slots[{i}].{role}" if listed else f"taskset.{role}"
                raise ValueError(
                    f"{key} {text!r} names CPUs {format_cpu_set(outside)} outside this job's allowed CPUs "
                    f"{format_cpu_set(allowed)} (os.sched_getaffinity); set {key} inside them"
                )


def pinned_cpu_count(taskset: dict) -> int:
    """CPUs of the largest slot (server and client lists together); 0 when nothing is pinned (a run's ``threads``)."""
    return max(len(slot_cpus(s)) for s in slots(taskset))


@contextlib.contextmanager
def allocated_slot(
    taskset: dict, directory: str | None = None, timeout_s: float = 3600.0, poll_s: float = 2.0
) -> Iterator[tuple[int, dict]]:
    """Hold the CPUs of one free slot of config ``taskset`` for the ``with`` block; yields ``(index, slot)``.

    The first slot whose CPUs are all free is taken (one lock file per CPU, ``<lock_dir>/cpu-<n>.lock``,
    chosen under ``<lock_dir>/cpus.lock``); a slot that pins nothing is yielded at once, unlocked.

    Raises:
        ValueError: see :func:`slots`.
        TimeoutError: no slot was free for ``timeout_s`` seconds.
    """
    options = slots(taskset)
    if not any(slot_cpus(s) for s in options):
        yield 0, options[0]
        return
    d = lock_dir(directory)
    deadline = time.monotonic() + timeout_s
    while True:
        with held(Path(d) / "cpus.lock"):
            taken = next(
                ((i, fds) for i, slot in enumerate(options) if (fds := _lock_all(slot_cpus(slot), d)) is not None), None
            )
        if taken is not None:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"no CPU slot of taskset free within {timeout_s:.0f} s: "
                f"each has CPUs held by other runs (locks under {d})"
            )
        time.sleep(poll_s)
    index, fds = taken
    try:
        yield index, options[index]
    finally:
        for fd in fds:
            release(fd)


def _lock_all(cpus: set[int], directory: Path) -> list[int] | None:
    """Lock every CPU of ``cpus``; their descriptors, or None (and nothing held) when one is taken."""
    fds: list[int] = []
    for cpu in sorted(cpus):
        fd = try_lock(Path(directory) / f"cpu-{cpu}.lock")
        if fd is None:
            for held_fd in fds:
                release(held_fd)
            return None
        fds.append(fd)
    return fds
