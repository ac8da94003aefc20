"""A fake OpenAI-compatible chat server (aiohttp) that streams tokens on a known schedule, with no model.

It answers ``POST /v1/chat/completions`` with ``"stream": true`` the way vLLM's server does:

    data: {... "delta": {"role": "assistant", "content": ""} ...}     role chunk, sent with the first token
    data: {... "delta": {"content": <token 0>} ...}                   first token (1 token, as after prefill)
    data: {... "delta": {"content": <tokens 1..n>} ...}               then ``tokens_per_chunk`` tokens per chunk,
    ...                                                               one chunk every ``chunk_gap_s`` seconds
    data: {... "choices": [], "usage": {...}}                         if ``stream_options.include_usage``
    data: [DONE]

Each request generates exactly ``max_completion_tokens`` (or ``max_tokens``) tokens; token ``i`` has the
text ``token_texts[i % len(token_texts)]``. Several tokens per chunk is what speculative decoding sends
(one chunk per engine step, 1 + accepted draft tokens). Every prompt received is appended to
``FakeServer.prompts`` (the last message's text), so tests can count them.

Schedule (seconds from the arrival of the request): role chunk and first token at ``first_token_s``;
content chunk ``j`` (j = 1, 2, ...) at ``first_token_s + j * chunk_gap_s``. With ``chunk_gap_s == 0`` the
server writes as fast as it can, yielding to other connections after each chunk.

Used by ``make bench-client`` (:mod:`kpadstudy.headroom`, a separate process:
``python -m kpadstudy.fake_server --port P --tokens-per-chunk 3``) and by the stream tests
(:func:`serve_in_thread`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterator

from aiohttp import web


@dataclass
class Schedule:
    """What the fake server sends and when.

    Attributes:
        tokens_per_chunk: tokens in every content chunk after the first (the first carries 1 token).
        chunk_gap_s: seconds between consecutive content chunks (0 = as fast as possible).
        first_token_s: seconds from the request to the role chunk and the first token.
        token_texts: token texts, cycled.
        split_inside: when set, every SSE event whose text contains this string is written in two
            socket writes, cut right after the first byte of its first occurrence (e.g. ``"é"`` cuts
            inside a 2-byte UTF-8 character), ``split_pause_s`` seconds apart, so the client reads the
            event in two pieces.
        split_pause_s: seconds between the two writes of a split event.
        role_chunk: send vLLM's initial ``{"role": "assistant", "content": ""}`` chunk.
    """

    tokens_per_chunk: int = 3
    chunk_gap_s: float = 0.0
    first_token_s: float = 0.0
    token_texts: tuple[str, ...] = (" tok",)
    split_inside: str | None = None
    split_pause_s: float = 0.02
    role_chunk: bool = True

    def chunk_sizes(self, n_tokens: int) -> list[int]:
        """Tokens per content chunk for a request of ``n_tokens``: ``[1, K, K, ..., rest]`` (K = tokens_per_chunk)."""
        if n_tokens <= 0:
            return []
        sizes, left = [1], n_tokens - 1
        while left > 0:
            sizes.append(min(self.tokens_per_chunk, left))
            left -= sizes[-1]
        return sizes


@lru_cache(maxsize=4096)
def _event(model: str, delta_json: str, finish: str | None) -> bytes:
    """One SSE event of a chat chunk (UTF-8, non-ASCII characters unescaped, as vLLM's pydantic JSON)."""
    finish_json = json.dumps(finish)
    body = (
        '{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":0,"model":'
        + json.dumps(model, ensure_ascii=False)
        + ',"choices":[{"index":0,"delta":'
        + delta_json
        + ',"logprobs":null,"finish_reason":'
        + finish_json
        + "}]}"
    )
    return ("data: " + body + "\n\n").encode("utf-8")


def prompt_text(body: dict[str, Any]) -> str:
    """The text of the last message of a chat request (string content or a list of text parts)."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


# What a faulty request does (``FakeServer.fault``): the stream faults that vLLM's own request function counts as
# completed, and two stalls (``/health`` still answers 200).
FAULTS = {
    "error_event": "role chunk, 3 content chunks, vLLM's in-band error event, then data: [DONE]",
    "zero_output": "role chunk, one empty chunk with finish_reason stop, usage with 0 completion tokens, [DONE]",
    "no_finish_reason": "every token, usage and [DONE], but no chunk carries a finish_reason",
    "cut_stream": "half of the tokens, then the response ends without [DONE]",
    "over_max_tokens": "max_tokens + 4 tokens",
    "stall": "the request is accepted and never answered",
    "stall_half": "half of the tokens, then nothing more (the connection stays open)",
}
ERROR_EVENT = {  # vLLM's create_streaming_error_response(): ErrorResponse(error=ErrorInfo(...)).model_dump()
    "error": {"message": "fake server: injected engine error", "type": "BadRequestError", "param": None, "code": 400}
}


@dataclass
class FakeServer:
    """The aiohttp application state: the schedule and every prompt received, in arrival order."""

    schedule: Schedule = field(default_factory=Schedule)
    prompts: list[str] = field(default_factory=list)
    fail_requests: int = 0  # fault injection: the first N chat requests get HTTP 500
    metrics_text: str = ""  # what GET /metrics answers (fault injection: text that is not Prometheus)
    fault: str | None = None  # fault injection: one of FAULTS, on request number fault_request
    fault_request: int = 0  # 1-based arrival order (warm-up first); 0 = every request

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def metrics(self, request: web.Request) -> web.Response:
        """:attr:`metrics_text`: by default empty (no Prometheus counters, so a run against the fake server reads
        none)."""
        return web.Response(text=self.metrics_text)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """Stream one chat completion on :attr:`schedule` (non-streaming requests are refused with 400)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        body = await request.json()
        if not body.get("stream"):
            return web.json_response({"error": "the fake server only streams"}, status=400)
        self.prompts.append(prompt_text(body))
        if len(self.prompts) <= self.fail_requests:
            return web.json_response({"error": {"message": "fake server: injected failure", "code": 500}}, status=500)
        n_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        model = str(body.get("model", "fake"))
        s = self.schedule
        fault = self.fault if self.fault_request in (0, len(self.prompts)) else None
        if fault == "stall":
            await asyncio.sleep(24 * 3600)
        if fault == "over_max_tokens":
            n_tokens += 4

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        texts, sent = s.token_texts, 0
        sizes = [0] if fault == "zero_output" else s.chunk_sizes(n_tokens)
        last = {"error_event": 3, "cut_stream": len(sizes) // 2, "stall_half": len(sizes) // 2}.get(fault, len(sizes))
        for j, size in enumerate(sizes[:last]):
            await asyncio.sleep(max(0.0, start + s.first_token_s + j * s.chunk_gap_s - loop.time()))
            if j == 0 and s.role_chunk:
                await self._write(resp, _event(model, '{"role":"assistant","content":""}', None))
            text = "".join(texts[(sent + i) % len(texts)] for i in range(size))
            sent += size
            finish = "length" if j == len(sizes) - 1 and fault != "no_finish_reason" else None
            finish = "stop" if fault == "zero_output" else finish
            await self._write(
                resp, _event(model, json.dumps({"content": text}, ensure_ascii=False, separators=(",", ":")), finish)
            )
        if fault == "stall_half":
            await asyncio.sleep(24 * 3600)
        if fault == "cut_stream":
            await resp.write_eof()
            return resp
        if fault == "error_event":
            await self._write(resp, ("data: " + json.dumps(ERROR_EVENT) + "\n\n").encode())
        elif (body.get("stream_options") or {}).get("include_usage"):
            n_prompt = len(prompt_text(body).split())
            usage = {"prompt_tokens": n_prompt, "completion_tokens": sent, "total_tokens": n_prompt + sent}
            await self._write(
                resp,
                (
                    "data: "
                    + json.dumps(
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": model,
                            "choices": [],
                            "usage": usage,
                        },
                        separators=(",", ":"),
                    )
                    + "\n\n"
                ).encode(),
            )
        await self._write(resp, b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _write(self, resp: web.StreamResponse, data: bytes) -> None:
        cut = data.find(self.schedule.split_inside.encode("utf-8")) if self.schedule.split_inside else -1
        if cut >= 0:
            await resp.write(data[: cut + 1])
            await asyncio.sleep(self.schedule.split_pause_s)
            data = data[cut + 1 :]
        await resp.write(data)


@contextlib.contextmanager
def serve_in_thread(schedule: Schedule | None = None, host: str = "127.0.0.1") -> Iterator[tuple[str, FakeServer]]:
    """Run a :class:`FakeServer` on a free port in a background thread; yields ``(base_url, server)``."""
    server = FakeServer(schedule or Schedule())
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(server.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("fake server did not start within 30 s")
    try:
        yield f"http://{host}:{holder['port']}", server
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m kpadstudy.fake_server --port P [--tokens-per-chunk K] [--chunk-gap-ms G] [faults]``: serve until
    killed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tokens-per-chunk", type=int, default=3)
    p.add_argument(
        "--chunk-gap-ms", type=float, default=0.0, help="milliseconds between content chunks (0 = as fast as possible)"
    )
    p.add_argument(
        "--fail-requests", type=int, default=0, help="fault injection: answer the first N chat requests with HTTP 500"
    )
    p.add_argument("--metrics-text", default="", help="fault injection: what GET /metrics answers (default: empty)")
    p.add_argument("--fault", choices=sorted(FAULTS), default=None, help="fault injection: what a faulty request does")
    p.add_argument(
        "--fault-request", type=int, default=0, help="which request is faulty: 1-based, warm-up first; 0 = every one"
    )
    p.add_argument(
        "--kill-parent",
        action="store_true",
        help="fault injection: SIGKILL the process that started this server (the run job), then exit",
    )
    a = p.parse_args(argv)
    if a.kill_parent:
        import os
        import signal

        os.kill(os.getppid(), signal.SIGKILL)
        return
    server = FakeServer(
        Schedule(tokens_per_chunk=a.tokens_per_chunk, chunk_gap_s=a.chunk_gap_ms / 1000),
        fail_requests=a.fail_requests,
        metrics_text=a.metrics_text,
        fault=a.fault,
        fault_request=a.fault_request,
    )
    try:  # uvloop (installed with vLLM) makes the server cheaper, so that the client is the one measured
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    # shutdown_timeout: on SIGTERM, do not wait for a stalled request (fault stall) to finish
    web.run_app(server.app(), host=a.host, port=a.port, access_log=None, print=None, loop=loop, shutdown_timeout=1)


if __name__ == "__main__":
    main()
