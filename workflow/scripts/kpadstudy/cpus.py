"""CPU lists (``taskset -c`` syntax) checked against the CPUs this job may use."""

from __future__ import annotations

import os


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


def check_pinning(taskset: dict, allowed: set[int] | None = None) -> None:
    """Check the server and client CPU lists of config ``taskset`` against the job's allowed CPUs.

    Args:
        taskset: ``{"server": list or None, "client": list or None}``.
        allowed: CPUs the job may run on (default ``os.sched_getaffinity(0)``: what SLURM, cgroups or
            an outer taskset granted).

    Raises:
        ValueError: a list names CPUs outside the allowed set; the message names the list, its CPUs
            outside, and the allowed set.
    """
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    for role in ("server", "client"):
        text = taskset.get(role)
        if not text:
            continue
        outside = parse_cpu_list(text) - allowed
        if outside:
            raise ValueError(f"taskset.{role} {text!r} names CPUs {format_cpu_set(outside)} outside this job's allowed CPUs "
                             f"{format_cpu_set(allowed)} (os.sched_getaffinity); set taskset.{role} inside them")


def pinned_cpu_count(taskset: dict) -> int:
    """Distinct CPUs of the server and client lists together; 0 when neither is pinned (the rule's ``threads``)."""
    cpus: set[int] = set()
    for role in ("server", "client"):
        if taskset.get(role):
            cpus |= parse_cpu_list(taskset[role])
    return len(cpus)
