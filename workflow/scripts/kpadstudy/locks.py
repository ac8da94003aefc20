"""Lock files shared by the jobs of one machine: ``fcntl.flock`` on files under one directory.

A lock is held as long as its file descriptor is open, and the kernel drops it when the holding
process dies (also on SIGKILL), so a crashed job never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

DEFAULT_LOCK_DIR = "/tmp/kpadstudy-locks"


def lock_dir(configured: str | None = None) -> Path:
    """The lock directory: ``configured`` (config ``node.lock_dir``), else ``$KPAD_LOCK_DIR``, else
    /tmp/kpadstudy-locks."""
    path = Path(configured or os.environ.get("KPAD_LOCK_DIR") or DEFAULT_LOCK_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def try_lock(path: Path) -> int | None:
    """Take an exclusive lock on ``path`` without waiting; the open file descriptor, or None when another process
    holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def release(fd: int) -> None:
    """Release a lock taken by :func:`try_lock` (closing the descriptor drops it)."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the ``with`` block, waiting for it if needed."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        release(fd)
