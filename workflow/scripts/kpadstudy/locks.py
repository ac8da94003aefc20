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
    /tmp/kpadstudy-locks; created sticky and world-writable (mode 1777, as /tmp), so every user of a node
    can take its port, GPU and CPU locks.

    Raises:
        PermissionError: the directory exists and this user cannot create files in it, naming it and the fix.
    """
    path = Path(configured or os.environ.get("KPAD_LOCK_DIR") or DEFAULT_LOCK_DIR)
    path.mkdir(parents=True, exist_ok=True)
    if path.stat().st_uid == os.getuid() and (path.stat().st_mode & 0o7777) != 0o1777:
        with contextlib.suppress(OSError):
            path.chmod(0o1777)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(
            f"lock directory {path} is not writable by this user (uid {os.getuid()}): its owner (uid "
            f"{path.stat().st_uid}) can run `chmod 1777 {path}`, or set config node.lock_dir / $KPAD_LOCK_DIR "
            "to a directory every user of this node can write"
        )
    return path


def _open(path: Path) -> int:
    """A descriptor of lock file ``path``: the existing file opened without ``O_CREAT`` (read-only where it is
    not writable: ``flock`` works on any descriptor; with ``fs.protected_regular`` creating over another
    user's file in a sticky directory fails), else a new file, world-writable whatever the umask."""
    for _ in range(3):
        try:
            return os.open(path, os.O_RDWR)
        except PermissionError:
            return os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # another process made it in between: open theirs
            continue
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)
        return fd
    return os.open(path, os.O_RDONLY)


def try_lock(path: Path) -> int | None:
    """Take an exclusive lock on ``path`` without waiting; the open file descriptor, or None when another process
    holds it."""
    fd = _open(path)
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
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        release(fd)
