"""Helpers of the life-cycle tests: a small study config, snakemake in the background, process checks."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
MODEL = "SmolLM2-135M-Instruct"


def study_config(work: Path, model_path: Path, **overrides) -> Path:
    """A one-corpus study (HumanEval, van only, 1 repeat, 8 + 2 prompts of 48 tokens) on ``model_path``;
    ``overrides`` replace top-level keys (dicts are merged one level deep)."""
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg["models"] = {MODEL: {"source": "local", "path": str(model_path), "tensor_parallel_size": 1}}
    cfg["corpora"] = {"humaneval": cfg["corpora"]["humaneval"]}
    cfg["mix"] = {"name": "mix", "components": [], "seed": 0}
    cfg["configurations"] = {"van": {"enabled": True}, "suf": {"enabled": False}, "kpad": {"k": []}, "nopad": {"k": []}}
    cfg["prompts"] = {"measured": 8, "warmup": 2, "seed": 0}
    cfg["load"] = {"max_concurrency": 2, "max_tokens": 48, "temperature": 0}
    cfg["equivalence"] = {"enabled": False}
    cfg["confirm"] = {"enabled": False, "repeats": 1}
    cfg["taskset"] = {"server": None, "client": None}
    cfg["node"] = {"lock_dir": str(work / "locks")}
    for k, v in overrides.items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def snakemake(work: Path, *targets: str, cores: int = 2, background: bool = False, extra: tuple = ()):
    """snakemake on the study in ``work`` (its own session, so a test can Ctrl-C it like a terminal would)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--cores",
        str(cores),
        *extra,
        *targets,
    ]
    log = open(work / f"snakemake-{time.monotonic_ns()}.log", "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    p.log_path = Path(log.name)
    if background:
        return p
    p.wait(timeout=1500)
    return p


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.2):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def server_port(pid: int) -> int:
    """The ``--port`` of a running server, from its command line."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return int(args[args.index(b"--port") + 1])


def group_members(pgid: int) -> list[int]:
    """Pids of live (not zombie) processes in process group ``pgid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(d.name))
    return out


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def ctrl_c(p: subprocess.Popen) -> int:
    """SIGINT to snakemake's whole process group (as Ctrl-C in a terminal), then its exit code."""
    os.killpg(p.pid, signal.SIGINT)
    return p.wait(timeout=120)
