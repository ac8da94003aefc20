"""CPU lists (``taskset -c`` syntax), CPU slots, and their checks against the CPUs this job may use.

A *slot* is one ``{"server": list, "client": list}`` pair of config ``taskset``: the CPUs one run pins its
server and its client to. Config ``taskset`` is one slot, or ``taskset.slots`` several disjoint ones, so
runs go side by side without sharing a CPU: each run holds its slot's CPUs through lock files
(``<lock_dir>/cpu-<n>.lock``, :func:`allocated_slot`), the way it holds its GPUs (:mod:`kpadstudy.gpus`).

``taskset: {auto: true}`` (or ``taskset: auto``) computes the lists inside the job instead, from the CPUs
it may use (``os.sched_getaffinity``: what SLURM's task plugin, a cgroup or an outer ``taskset`` granted):
on a GPU node each GPU gets its own CPUs (its NUMA node's CPUs shared among that node's GPUs, else an
even split, :func:`gpu_cpu_sets`) and a run takes the CPUs of the GPUs it holds; on a CPU node a run takes
every allowed CPU. Within a run's CPUs the client gets the last N (:func:`split_roles`), the server the rest.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from pathlib import Path
from typing import Iterator

from . import gpus as gpu_locks
from .locks import held, lock_dir, release, try_lock

#: client CPUs of an automatic slot (``taskset.auto``) unless ``taskset.client_cpus`` says: a quarter of the
#: slot's CPUs, at least 1 and at most this many (the benchmark client is one asyncio process).
AUTO_CLIENT_MAX = 4


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


def is_auto(taskset: dict | str | None) -> bool:
    """Whether config ``taskset`` asks for automatic CPU lists (``{auto: true}`` or the string ``auto``) and
    gives no explicit list (explicit ``server`` / ``client`` / ``slots`` win, and are checked)."""
    if taskset == "auto":
        return True
    return (
        isinstance(taskset, dict)
        and bool(taskset.get("auto"))
        and not any(taskset.get(k) for k in ("server", "client", "slots"))
    )


def core_order(cpus: set[int] | list[int]) -> list[int]:
    """``cpus`` with hyperthread siblings next to each other (sorted by their core's first CPU, from
    ``/sys/devices/system/cpu/cpu<n>/topology/thread_siblings_list``; by number where that is unreadable),
    so contiguous blocks of this order never split a physical core between two runs or two roles."""

    def first_sibling(cpu: int) -> int:
        try:
            path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
            return min(parse_cpu_list(path.read_text().strip()))
        except (OSError, ValueError):
            return cpu

    return sorted(cpus, key=lambda c: (first_sibling(c), c))


def split_roles(cpus: set[int] | list[int], client_cpus: int | None = None) -> dict:
    """Split one run's CPUs between its server (the first ones) and its client (the last ``client_cpus``).

    Args:
        cpus: the run's CPUs (at least one).
        client_cpus: CPUs for the client; None = a quarter of ``cpus``, at least 1, at most
            :data:`AUTO_CLIENT_MAX`. Always leaves the server at least one CPU.

    Returns:
        ``{"server": list, "client": list, "shared": bool}`` (``taskset -c`` lists); with a single CPU both
        get it and ``shared`` is True.

    Raises:
        ValueError: ``cpus`` is empty.
    """
    ordered = core_order(cpus)
    if not ordered:
        raise ValueError("no CPUs to split between server and client")
    if client_cpus is not None and (not isinstance(client_cpus, int) or client_cpus < 1):
        raise ValueError(f"taskset.client_cpus must be a whole number >= 1, got {client_cpus!r}")
    if len(ordered) == 1:
        one = format_cpu_set(set(ordered))
        return {"server": one, "client": one, "shared": True}
    n_client = client_cpus or min(AUTO_CLIENT_MAX, max(1, len(ordered) // 4))
    n_client = max(1, min(n_client, len(ordered) - 1))
    return {
        "server": format_cpu_set(set(ordered[:-n_client])),
        "client": format_cpu_set(set(ordered[-n_client:])),
        "shared": False,
    }


def gpu_numa_cpus(gpu_ids: list[str]) -> dict[str, set[int]]:
    """The CPUs local to each GPU's NUMA node, as the node reports them; {} when it does not.

    Reads ``nvidia-smi --query-gpu=index,pci.bus_id`` and ``/sys/bus/pci/devices/<bus id>/local_cpulist``;
    GPUs without an answer are left out (no ``nvidia-smi``, a container without ``/sys``, fake GPUs).
    """
    from .gpus import nvidia_smi

    found: dict[str, set[int]] = {}
    for line in nvidia_smi(["--query-gpu=index,pci.bus_id", "--format=csv,noheader"]) or []:
        index, _, bus = (x.strip() for x in line.partition(","))
        if index not in gpu_ids:
            continue
        # nvidia-smi prints 00000000:19:00.0; sysfs names it 0000:19:00.0
        domain, _, rest = bus.lower().partition(":")
        path = Path("/sys/bus/pci/devices") / f"{domain[-4:]}:{rest}" / "local_cpulist"
        with contextlib.suppress(OSError, ValueError):
            found[index] = parse_cpu_list(path.read_text().strip())
    return found


def gpu_cpu_sets(
    allowed: set[int], gpu_ids: list[str], numa: dict[str, set[int]] | None = None
) -> tuple[dict[str, set[int]], bool]:
    """Disjoint CPU sets, one per GPU, out of the ``allowed`` CPUs (``taskset.auto`` on a GPU node).

    Where ``numa`` (:func:`gpu_numa_cpus`) names, for every GPU, CPUs that are allowed, and GPUs on different
    NUMA nodes have no CPU in common, each NUMA node's allowed CPUs are split evenly among its GPUs (in
    index order, contiguous blocks); otherwise all allowed CPUs are split evenly among all GPUs. With fewer
    CPUs than GPUs some GPUs get a CPU another GPU has too.

    Args:
        allowed: CPUs this job may use; gpu_ids: the node's GPUs (``kpadstudy.gpus.visible_gpus``).
        numa: GPU -> its NUMA node's CPUs; None or incomplete = the even split.

    Returns:
        ``({gpu: CPUs}, shared)``; ``shared`` is True when two GPUs' sets overlap (fewer CPUs than GPUs).

    Raises:
        ValueError: ``allowed`` is empty.
    """
    if not allowed:
        raise ValueError("this job may use no CPU (os.sched_getaffinity is empty)")
    groups: list[tuple[list[str], list[int]]] = []
    local = {g: (numa or {}).get(g, set()) & allowed for g in gpu_ids}
    if gpu_ids and all(local.values()):
        by_node: dict[frozenset, list[str]] = {}
        for g in gpu_ids:
            by_node.setdefault(frozenset(local[g]), []).append(g)
        sets = list(by_node)
        if all(not (a & b) for i, a in enumerate(sets) for b in sets[:i]):
            groups = [(members, core_order(node)) for node, members in by_node.items()]
    for attempt in ("numa", "even"):
        if attempt == "even" or not groups:
            groups = [(list(gpu_ids), core_order(allowed))]
        out, shared = _split(groups)
        if not shared or len(allowed) < len(gpu_ids):  # an even split cannot do better with fewer CPUs
            return out, shared
    return out, shared


def _split(groups: list[tuple[list[str], list[int]]]) -> tuple[dict[str, set[int]], bool]:
    """Contiguous blocks of each group's CPUs, one per GPU of the group; ``shared`` when a group has fewer CPUs
    than GPUs (then a GPU gets one CPU another GPU has)."""
    out: dict[str, set[int]] = {}
    shared = False
    for members, cpus in groups:
        n, g = len(cpus), len(members)
        for i, gpu in enumerate(members):
            block = cpus[i * n // g : (i + 1) * n // g]
            if not block:  # fewer CPUs than GPUs: spread the GPUs evenly over the CPUs there are
                block, shared = [cpus[i * n // g]], True
            out[gpu] = set(block)
    return out, shared


def preferred_start(key: str, n_visible: int, n: int) -> int:
    """Index in the visible GPUs where a cell's runs look first, the same for every run of the cell (so a
    cell stays on one GPU slot where it can): a stable hash of ``key`` (model/corpus) over the slots of
    ``n`` GPUs."""
    n_slots = max(1, n_visible // max(1, n))
    return (zlib.crc32(key.encode()) % n_slots) * max(1, n)


@contextlib.contextmanager
def allocated(
    taskset: dict,
    n_gpus: int,
    node: dict,
    *,
    prefer: str = "",
    allowed: set[int] | None = None,
    numa: dict[str, set[int]] | None = None,
) -> Iterator[tuple[int, dict, list[str]]]:
    """Hold a run's CPUs and GPUs for the ``with`` block; yields ``(slot index, slot, GPU ids)``.

    Explicit lists (config ``taskset`` server / client or slots): a free slot (:func:`allocated_slot`),
    then ``n_gpus`` GPUs (:func:`kpadstudy.gpus.allocated_gpus`). ``taskset.auto``: first the GPUs, then the
    union of their CPU sets (:func:`gpu_cpu_sets`; the slot index is the first GPU's place among the
    visible ones), split by :func:`split_roles`; on a CPU run (``n_gpus`` 0) every allowed CPU, held
    through the CPU locks so CPU runs never overlap. The slot dict has ``server``, ``client`` and
    ``shared`` (server and client on the same CPUs, or - fewer CPUs than GPUs - the run's CPUs also belong
    to another GPU's runs).

    Args:
        node: config ``node`` (``lock_dir``, ``gpus``, ``cpu_wait_s``, ``gpu_wait_s``).
        prefer: a cell's key (model/corpus): its runs try the same GPUs first (:func:`preferred_start`).
        allowed: CPUs this job may use (default ``os.sched_getaffinity(0)``); numa: GPU -> NUMA CPUs
            (default :func:`gpu_numa_cpus` of the visible GPUs).

    Raises:
        ValueError, TimeoutError: as :func:`allocated_slot` and :func:`kpadstudy.gpus.allocated_gpus`.
    """
    visible = gpu_locks.visible_gpus(node.get("gpus"))
    start = preferred_start(prefer, len(visible), n_gpus) if n_gpus else 0
    order = visible[start:] + visible[:start]
    gpu_wait, cpu_wait = float(node.get("gpu_wait_s", 3600)), float(node.get("cpu_wait_s", 3600))
    if not is_auto(taskset):
        with (
            allocated_slot(taskset, node.get("lock_dir"), cpu_wait) as (index, slot),
            gpu_locks.allocated_gpus(n_gpus, order, node.get("lock_dir"), gpu_wait) as gpu_ids,
        ):
            yield index, {**slot, "shared": bool(slot["server"]) and slot["server"] == slot["client"]}, gpu_ids
        return
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    client_cpus = taskset.get("client_cpus") if isinstance(taskset, dict) else None
    if not n_gpus:
        roles = split_roles(allowed, client_cpus)
        with allocated_slot({"server": roles["server"], "client": roles["client"]}, node.get("lock_dir"), cpu_wait):
            yield 0, roles, []
        return
    with gpu_locks.allocated_gpus(n_gpus, order, node.get("lock_dir"), gpu_wait) as gpu_ids:
        per_gpu, shared = gpu_cpu_sets(allowed, visible, gpu_numa_cpus(visible) if numa is None else numa)
        mine = set().union(*(per_gpu[g] for g in gpu_ids))
        roles = split_roles(mine, client_cpus)
        others = set().union(*(c for g, c in per_gpu.items() if g not in gpu_ids))
        # fewer CPUs than GPUs: the run's CPUs are another GPU's too, and the record says so
        yield visible.index(gpu_ids[0]), {**roles, "shared": roles["shared"] or bool(shared and mine & others)}, gpu_ids


def auto_threads(n_gpus_per_run: int, n_visible: int, allowed: set[int] | None = None) -> int:
    """A run job's threads under ``taskset.auto``: the CPUs of its GPUs' share (allowed CPUs x GPUs per run /
    visible GPUs), all allowed CPUs on a CPU node; at least 1."""
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    if not n_gpus_per_run or not n_visible:
        return max(1, len(allowed))
    return max(1, len(allowed) * min(n_gpus_per_run, n_visible) // n_visible)


def process_cpus(pid: int) -> str | None:
    """``Cpus_allowed_list`` of a running process (``/proc/<pid>/status``): the CPUs it really had; None
    when the process is gone or the file unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def slots(taskset: dict) -> list[dict]:
    """The CPU slots of config ``taskset``: ``taskset.slots`` when given, else ``[{server, client}]``
    (``taskset.auto``: one slot pinning nothing; the lists are made inside the job, :func:`allocated`).

    Raises:
        ValueError: ``slots`` given together with ``server`` / ``client``; or two slots share CPUs (the
            message names both and the shared CPUs): side-by-side runs must never share a CPU.
    """
    if is_auto(taskset):
        return [{"server": None, "client": None}]
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
