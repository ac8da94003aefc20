"""Race-free TCP ports for the servers of one machine: one locked block of ports per run, outside the
kernel's ephemeral port range.

``free_port()`` (bind to port 0, release, hand the number on) races: two jobs can be told the same port
before either server binds it. Here a run takes a *block* of ``BLOCK`` consecutive ports by holding
``<lock_dir>/port-block-<first port>.lock`` with ``fcntl.flock`` for the whole run. The API server
listens on the block's first port; vLLM's internal ports start at the second (``VLLM_PORT``), and vLLM
scans upward from there, inside the block. Jobs that take blocks through this module never share one;
a block whose first two ports are bound by someone else (another program) is skipped.

No block overlaps the kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999
on most Linux machines). The kernel picks the source port of every outgoing connection from that range;
a client that polls a port inside it while nothing listens there can be given that very port as its
source and connect to itself (a TCP self-connect: it reads back its own request). A server boot polls
``/health`` for a minute or more and a study boots thousands of servers, so it would happen.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .locks import lock_dir, release, try_lock

BLOCK = 64  # ports per run: the API port, then VLLM_PORT and room for vLLM's internal ports
PORT_RANGE = (20000, 65535)  # ports the pipeline may use, both ends included (config node.port_range)
EPHEMERAL_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


@dataclass(frozen=True)
class PortBlock:
    """The ports of one run. ``api``: the OpenAI server's ``--port``; ``vllm_base``: ``VLLM_PORT``."""

    first: int
    size: int

    @property
    def api(self) -> int:
        return self.first

    @property
    def vllm_base(self) -> int:
        return self.first + 1


def ephemeral_range(path: str = EPHEMERAL_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range ``(first, last)``, both included, read from ``path``.

    Raises:
        OSError: ``path`` cannot be read (not Linux).
        ValueError: ``path`` does not hold two integers (the message names it).
    """
    text = Path(path).read_text()
    try:
        first, last = (int(x) for x in text.split())
    except ValueError:
        raise ValueError(f"{path}: expected two port numbers (first last), got {text.strip()!r}") from None
    return first, last


def usable_blocks(port_range: tuple[int, int], ephemeral: tuple[int, int], size: int = BLOCK) -> list[int]:
    """First ports of the blocks of ``size`` ports that lie inside ``port_range`` and outside ``ephemeral``.

    Args:
        port_range: ``(first, last)`` ports the pipeline may use, both included; blocks start at
            ``first + i * size``.
        ephemeral: the kernel's ephemeral range ``(first, last)``, both included (:func:`ephemeral_range`).
        size: ports per block.

    Returns:
        The first port of each usable block, ascending; empty when none fits.
    """
    lo, hi = port_range
    out = []
    for first in range(lo, hi - size + 2, size):
        last = first + size - 1
        if last < ephemeral[0] or first > ephemeral[1]:
            out.append(first)
    return out


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a TCP socket can bind ``host:port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def port_block(
    directory: str | None = None,
    port_range: tuple[int, int] | list[int] | None = None,
    size: int = BLOCK,
    start: int | None = None,
    ephemeral: tuple[int, int] | None = None,
) -> Iterator[PortBlock]:
    """Hold a block of ``size`` ports, outside the kernel's ephemeral range, for the ``with`` block.

    Args:
        directory: lock directory (see :func:`kpadstudy.locks.lock_dir`).
        port_range: ``(first, last)`` ports the pipeline may use, both included (config ``node.port_range``;
            None = :data:`PORT_RANGE`).
        size: ports per block.
        start: index of the usable block tried first (default: from the process id, so jobs spread out).
        ephemeral: the kernel's ephemeral range (default: :func:`ephemeral_range`).

    Raises:
        ValueError: ``port_range`` holds fewer than ``size`` ports (reversed, or too narrow).
        RuntimeError: no block fits in ``port_range`` outside the ephemeral range, or every block is locked
            or has its first two ports in use (the message gives the ranges and what to change).
    """
    lo, hi = port_range or PORT_RANGE
    if hi - lo + 1 < size:
        raise ValueError(
            f"node.port_range [{lo}, {hi}] holds fewer than {size} ports: "
            f"give [first, last] with last >= first + {size - 1}"
        )
    eph = ephemeral or ephemeral_range()
    firsts = usable_blocks((lo, hi), eph, size)
    where = f"node.port_range {lo}-{hi} outside the kernel's ephemeral ports {eph[0]}-{eph[1]} ({EPHEMERAL_FILE})"
    if not firsts:
        raise RuntimeError(
            f"no block of {size} ports fits in {where}: widen node.port_range below {eph[0]} or above {eph[1]}"
        )
    d = lock_dir(directory)
    offset = (os.getpid() if start is None else start) % len(firsts)
    for i in range(len(firsts)):
        first = firsts[(offset + i) % len(firsts)]
        fd = try_lock(Path(d) / f"port-block-{first}.lock")
        if fd is None:
            continue
        if bindable(first) and bindable(first + 1):
            try:
                yield PortBlock(first, size)
            finally:
                release(fd)
            return
        release(fd)
    raise RuntimeError(
        f"no free block of {size} ports in {where}: all {len(firsts)} are locked or in use (locks under {d})"
    )
