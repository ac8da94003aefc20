"""The life of one ``vllm serve`` process: start, wait until healthy, hand over, stop.

Pattern from vLLM's own benchmark sweep: one context manager owns the server for the whole run, so
no server outlives it, whatever happens inside the ``with`` block.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator


class ServerBootError(RuntimeError):
    """The server did not become healthy. ``reason`` is ``exited`` or ``timeout``; the log path is in the message.

    ``exit_code`` is the server's exit code (None when it was still running at the timeout).
    """

    def __init__(self, reason: str, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.reason = reason
        self.exit_code = exit_code


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def get_text(url: str, timeout_s: float = 5.0) -> str:
    """GET ``url`` and return the body as text. Raises ``urllib.error.URLError`` / ``OSError`` on failure."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback only
        return response.read().decode("utf-8")


def is_healthy(base_url: str) -> bool:
    """Whether ``{base_url}/health`` answers 200 now (one request, 2 s timeout; any error is False)."""
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as response:  # noqa: S310 - loopback only
            return response.status == 200
    except OSError:  # URLError, connection refused or reset, timeout
        return False


def poll_healthy(base_url: str, timeout_s: float, poll_s: float = 0.5) -> bool:
    """Ask :func:`is_healthy` every ``poll_s`` seconds: True once it is, False after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if is_healthy(base_url):
            return True
        time.sleep(poll_s)
    return False


def wait_healthy(proc: subprocess.Popen, base_url: str, timeout_s: float, log_path: Path, poll_s: float = 1.0) -> float:
    """Poll ``{base_url}/health`` until it answers 200; return the seconds waited.

    Raises:
        ServerBootError: the process exited (reason ``exited``) or ``timeout_s`` passed (reason ``timeout``).
    """
    start = time.monotonic()
    while True:
        code = proc.poll()
        if code is not None:
            raise ServerBootError("exited", f"vLLM server exited with code {code} before it was healthy; see {log_path}", code)
        if is_healthy(base_url):
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise ServerBootError("timeout", f"vLLM server not healthy after {timeout_s:.0f} s; see {log_path}")
        time.sleep(poll_s)


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is still there (zombies count until reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the process's whole group (API server, engine core, workers), SIGKILL after ``grace_s``.

    The group is signalled even when its leader has already exited: vLLM's engine core and workers
    can outlive a dead API server, and they must not outlive the run.
    """
    if proc.poll() is None or group_alive(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_alive(proc.pid) or proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        end = time.monotonic() + 10
        while group_alive(proc.pid) and time.monotonic() < end:
            time.sleep(0.05)


@contextlib.contextmanager
def running_server(cmd: list[str], env: dict[str, str], base_url: str, log_path: Path, boot_timeout_s: float) -> Iterator[tuple[subprocess.Popen, float]]:
    """Start ``cmd`` in its own process group, wait for health, yield ``(process, boot seconds)``, always stop it.

    The server's stdout and stderr go to ``log_path``; its pid (= its process group id) to ``server.pid``
    beside it, so an operator (or a test) can find the group while the run lasts.

    Raises:
        ServerBootError: see :func:`wait_healthy`.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        (log_path.parent / "server.pid").write_text(f"{proc.pid}\n")  # = its process group id
        try:
            boot_s = wait_healthy(proc, base_url, boot_timeout_s, log_path)
            yield proc, boot_s
        finally:
            stop(proc)
