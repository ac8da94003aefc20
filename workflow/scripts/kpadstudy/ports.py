"""Race-free TCP ports for the servers of one machine: one locked block of ports per run.

``free_port()`` (bind to port 0, release, hand the number on) races: two jobs can be told the same port
before either server binds it. Here a run takes a *block* of ``BLOCK`` consecutive ports by holding
``<lock_dir>/port-block-<first port>.lock`` with ``fcntl.flock`` for the whole run. The API server
listens on the block's first port; vLLM's internal ports start at the second (``VLLM_PORT``), and vLLM
scans upward from there, inside the block. Jobs that take blocks through this module never share one;
a block whose first two ports are bound by someone else (another program) is skipped.
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
PORT_RANGE = (20000, 60000)  # [first, last) ports handed out; below Linux's ephemeral range 32768-60999 only in part


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
def port_block(directory: str | None = None, port_range: tuple[int, int] = PORT_RANGE, size: int = BLOCK, start: int | None = None) -> Iterator[PortBlock]:
    """Hold a block of ``size`` ports for the ``with`` block.

    Args:
        directory: lock directory (see :func:`kpadstudy.locks.lock_dir`).
        port_range: ``(first, last)``: blocks start at ``first + i * size`` and end before ``last``.
        size: ports per block.
        start: index of the block tried first (default: from the process id, so jobs spread out).

    Raises:
        RuntimeError: every block is locked or has its first two ports in use (the message gives the range).
    """
    d = lock_dir(directory)
    n_blocks = (port_range[1] - port_range[0]) // size
    if n_blocks < 1:
        raise ValueError(f"port range {port_range} holds no block of {size} ports")
    offset = (os.getpid() if start is None else start) % n_blocks
    for i in range(n_blocks):
        first = port_range[0] + ((offset + i) % n_blocks) * size
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
    raise RuntimeError(f"no free block of {size} ports in {port_range[0]}-{port_range[1] - 1} (locks under {d})")
