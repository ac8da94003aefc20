"""The life of one ``vllm serve`` process: start, wait until healthy, hand over, stop.

Pattern from vLLM's own benchmark sweep: one context manager owns the server for the whole run, so
no server outlives it, whatever happens inside the ``with`` block.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import IO, Iterator


class ServerBootError(RuntimeError):
    """The server did not become healthy; the log path is in the message.

    ``reason``: ``exited`` (the process ended), ``timeout`` (still running, never healthy) or ``error``
    (starting it or waiting for it raised: ``error`` is that exception). ``exit_code`` is the server's
    exit code (None while it was still running).
    """

    def __init__(self, reason: str, message: str, exit_code: int | None = None, error: BaseException | None = None):
        super().__init__(message)
        self.reason = reason
        self.exit_code = exit_code
        self.error = error


def get_text(url: str, timeout_s: float = 5.0) -> str:
    """GET ``url`` and return the body as text.

    Raises:
        OSError: ``urllib.error.URLError`` / ``HTTPError``, refused, reset, timed out.
        http.client.HTTPException: the answer was not HTTP.
        UnicodeDecodeError: the body is not UTF-8.
    """
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback only
        return response.read().decode("utf-8")


def is_healthy(base_url: str, timeout_s: float = 2.0, source_address: tuple[str, int] | None = None) -> bool:
    """Whether ``{base_url}/health`` answers HTTP 200 now; never raises.

    One request. "Not ready yet" (False) is: no connection (refused, reset, timed out), a connection to
    itself (TCP self-connect: nothing listened on the port and the kernel gave this socket the same port
    as its source; :mod:`kpadstudy.ports` keeps the pipeline's ports out of the range where that happens,
    this is the second guard), an answer that is not HTTP (``http.client.HTTPException``, e.g. an echo of
    the request: ``BadStatusLine``), or any status other than 200.

    Args:
        base_url: ``http://host:port``.
        timeout_s: connect and read timeout in seconds.
        source_address: ``(host, port)`` to bind the client socket to (tests use it to force a self-connect).
    """
    url = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s, source_address=source_address)
    try:
        conn.connect()
        if conn.sock.getsockname() == conn.sock.getpeername():
            return False
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


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
            raise ServerBootError(
                "exited", f"vLLM server exited with code {code} before it was healthy; see {log_path}", code
            )
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


def die_with_parent() -> None:
    """``preexec_fn`` of the server and client processes: the kernel sends them SIGKILL when the process that
    started them dies (``prctl(PR_SET_PDEATHSIG)``, Linux), so a run job killed with SIGKILL leaves no
    server holding its GPU and port behind. Does nothing where prctl is missing."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def start_group(cmd: list[str], env: dict[str, str], log_file: IO[bytes]) -> subprocess.Popen:
    """Start ``cmd`` as the leader of a new process group (so :func:`stop` can signal all it starts), stdout and
    stderr to ``log_file``, killed by the kernel when this process dies (:func:`die_with_parent`): the one way the
    server and the client of a run are started.

    Raises:
        OSError: from ``subprocess.Popen`` (e.g. the program does not exist).
    """
    return subprocess.Popen(
        cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent
    )


@contextlib.contextmanager
def running_server(
    cmd: list[str], env: dict[str, str], base_url: str, log_path: Path, boot_timeout_s: float
) -> Iterator[tuple[subprocess.Popen, float]]:
    """Start ``cmd`` in its own process group, wait for health, yield ``(process, boot seconds)``, always stop it.

    The server's stdout and stderr go to ``log_path``; its pid (= its process group id) to ``server.pid``
    beside it, so an operator (or a test) can find the group while the run lasts.

    Raises:
        ServerBootError: see :func:`wait_healthy`; an exception while starting the process or waiting for
            it (``OSError`` from ``Popen``, anything the probe raised) becomes one with reason ``error``.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    proc = None
    with open(log_path, "ab") as log_file:
        try:
            try:
                proc = start_group(cmd, env, log_file)
                (log_path.parent / "server.pid").write_text(f"{proc.pid}\n")  # = its process group id
                boot_s = wait_healthy(proc, base_url, boot_timeout_s, log_path)
            except ServerBootError:
                raise
            except Exception as err:  # noqa: BLE001 - whatever the boot raised is the run's boot failure, not the job's
                code = proc.poll() if proc is not None else None
                raise ServerBootError(
                    "error", f"raised while starting the server or waiting for /health; see {log_path}", code, err
                ) from err
            yield proc, boot_s
        finally:
            if proc is not None:
                stop(proc)
