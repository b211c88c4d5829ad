"""A scripted OpenAI-compatible server on 127.0.0.1 with a configurable latency, for benchmarks and tests.

:class:`ScriptedServer` answers ``POST /v1/chat/completions`` with a reply chosen by a function of
the request body (so replies are reproducible: derive them from the request's ``seed``), after a
latency drawn from :class:`Latency` (log-normal around a median, plus a heavy tail on a share of
the requests), drawn from the request's ``seed`` field so that each trajectory-turn waits the same
whatever the schedule (a benchmark can then compute the ideal schedule's time). ``GET /v1/models`` lists the one model. It is a minimal HTTP/1.1 server on asyncio
streams (keep-alive, ``Content-Length`` bodies only), running on a thread of its own, so that the
client side, not the server, is what a benchmark measures. It counts requests, how many are in
flight and the peak, which tests compare with a client's concurrency bound. A :class:`Stall` makes
it a hostile server that answers too slowly for any per-read timeout to notice.

It serves what arlkit's ``openai`` backend sends; it is not a general HTTP server.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Latency", "ScriptedServer", "Stall"]


@dataclass(frozen=True)
class Latency:
    """Seconds one request waits before its answer.

    Attributes:
        median_s: median of the log-normal body of the distribution (0: answer at once).
        sigma: log-normal shape (standard deviation of the log).
        tail_share: share of requests that wait ``tail_s`` instead (stragglers).
        tail_s: the stragglers' wait.
    """

    median_s: float = 0.0
    sigma: float = 0.5
    tail_share: float = 0.0
    tail_s: float = 3.0

    def draw(self, key: int, seed: int = 0) -> float:
        """The wait of the request ``key`` (its ``seed`` field: one trajectory-turn), reproducibly."""
        rng = random.Random(f"arlkit-latency:{seed}:{key}")
        if self.tail_share and rng.random() < self.tail_share:
            return self.tail_s
        return self.median_s * math.exp(self.sigma * rng.gauss(0.0, 1.0)) if self.median_s > 0 else 0.0

    def mean_s(self) -> float:
        """The distribution's mean: log-normal mean ``median * exp(sigma^2 / 2)`` mixed with the tail."""
        body = self.median_s * math.exp(self.sigma**2 / 2)
        return (1 - self.tail_share) * body + self.tail_share * self.tail_s


@dataclass(frozen=True)
class Stall:
    """How a hostile server sends every response (the models listing included).

    Attributes:
        kind: ``headers`` (the status line, then the headers a byte at a time), ``body`` (the headers,
            then the body a byte at a time), ``stream`` (a chunked body of blanks that never ends) or
            ``silent`` (reads the request and never answers).
        interval_s: seconds between two bytes or chunks, well under a client's read timeout.
        limit_s: the server gives up and closes the connection after this long (the loops end by
            themselves).
    """

    kind: Literal["headers", "body", "stream", "silent"]
    interval_s: float = 0.2
    limit_s: float = 60.0

    def pieces(self, status: int, data: bytes) -> Iterator[bytes]:
        """What to write, piece by piece (one piece per ``interval_s``)."""
        json_head = "Content-Type: application/json\r\n"
        if self.kind == "headers":
            yield f"HTTP/1.1 {status} OK\r\n".encode()
            rest = f"{json_head}X-Padding: {'a' * 8192}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
            yield from (rest[i : i + 1] for i in range(len(rest)))
        elif self.kind == "body":
            data += b" " * 65536  # JSON allows trailing blanks
            yield f"HTTP/1.1 {status} OK\r\n{json_head}Content-Length: {len(data)}\r\n\r\n".encode()
            yield from (data[i : i + 1] for i in range(len(data)))
        elif self.kind == "stream":
            yield f"HTTP/1.1 {status} OK\r\n{json_head}Transfer-Encoding: chunked\r\n\r\n".encode()
            while True:
                yield b"1\r\n \r\n"


class ScriptedServer:
    """A loopback chat-completions server whose replies come from ``reply(body)``: the assistant's text,
    or a dict of assistant-message fields (``{"content": None, "tool_calls": [...]}``) for tool calls.

    Use as a context manager; ``base_url`` is ``http://127.0.0.1:PORT/v1``.

    Args:
        reply: the assistant text for a request body (the parsed JSON).
        latency: how long each request waits.
        model: the served model's name.
        seed: seed of the latency draws (with each request's own ``seed``).
        fault: ``fault(key, attempt)``, what to do to a chat request after its latency (``key``: its
            ``seed`` field; ``attempt``: how many times that key came before): ``None`` answers, an
            HTTP status (``429``, ``503``) refuses it, ``"drop"`` closes the connection unanswered.
        stall: send every response this way (:class:`Stall`), then close the connection.
    """

    def __init__(self, reply: Callable[[dict[str, Any]], str | dict[str, Any]], latency: Latency | None = None, *,
                 model: str = "scripted", seed: int = 0,
                 fault: Callable[[int, int], int | str | None] | None = None, stall: Stall | None = None) -> None:
        self.reply, self.latency, self.model, self.fault = reply, latency or Latency(), model, fault
        self.stall = stall
        self.seed = seed
        self._attempts: dict[int, int] = {}
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="arlkit-loopback", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    async def _start(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status, payload = await self._answer(method, path, body)
                if status == 0:  # a dropped connection
                    return
                data = json.dumps(payload).encode()
                if self.stall is not None:
                    await self._stalled(writer, status, data, self.stall)
                    return
                writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError, ValueError):
            pass
        finally:
            writer.close()

    async def _stalled(self, writer: asyncio.StreamWriter, status: int, data: bytes, stall: Stall) -> None:
        end = self._loop.time() + stall.limit_s
        for piece in stall.pieces(status, data):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(max(0.0, min(stall.interval_s, end - self._loop.time())))
            if self._loop.time() >= end:
                return
        await asyncio.sleep(max(0.0, end - self._loop.time()))  # silent: nothing to send

    async def _answer(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return 200, {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "arlkit"}]}
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}}
        request = json.loads(body)
        self.requests += 1
        number = self.requests
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            key = request.get("seed")
            key = key if isinstance(key, int) else number
            await asyncio.sleep(self.latency.draw(key, self.seed))
            text = self.reply(request)
        finally:
            self.in_flight -= 1
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        fault = self.fault(key, attempt) if self.fault is not None else None
        if fault == "drop":
            return 0, {}
        if isinstance(fault, int):
            return fault, {"error": {"message": "injected fault", "type": "server_error", "code": fault}}
        if isinstance(text, dict):  # a whole assistant message: tool calls
            message, finish = {"role": "assistant", **text}, "tool_calls" if text.get("tool_calls") else "stop"
        else:
            for stop in request.get("stop") or ():  # OpenAI semantics: the stop string is not returned
                if stop in text:
                    text = text[: text.index(stop)]
                    break
            message, finish = {"role": "assistant", "content": text}, "stop"
        return 200, {
            "id": f"cmpl-{self.requests}", "object": "chat.completion", "created": 0, "model": self.model,
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
