"""An OpenAI-compatible HTTP server for a local ``hf`` model (``arlkit serve``; loopback only).

Built on Starlette and uvicorn. It serves ``GET /v1/models``, ``GET /v1/models/{id}`` and
``POST /v1/chat/completions`` (up to 16 choices, streaming or not), so that the ``openai``
backend, the official ``openai`` SDK, Inspect AI or any OpenAI-compatible tool can drive a local
model, e.g. the embedded tiny model in tests. Requests that arrive together are generated as one
batch (requests with equal sampling options share a forward pass).

Semantics follow the OpenAI API:
- the matched stop string is not part of the returned content;
- ``finish_reason`` is ``"stop"`` (end of turn or stop string) or ``"length"``;
- ``seed`` makes sampling reproducible, and a request without one gets a fresh random seed; choice
  ``i`` of ``n`` samples turn ``i`` of the seed;
- ``logprobs: true`` returns one entry per generated token (an end-of-turn token excluded), with
  the token's own bytes (a token that is part of a UTF-8 character has those bytes, not the
  replacement character's), and ``top_logprobs: k`` (up to 20) the k most likely tokens at each
  step, under the same (temperature, top-k, top-p) distribution the token was sampled from;
- ``stream: true`` answers with server-sent events: per choice a role chunk, content chunks (one
  per token, with its log-probs when asked), a chunk with the ``finish_reason``; then, with
  ``stream_options: {"include_usage": true}``, a usage chunk; then ``[DONE]``. The chunks are
  sent once the choices are generated (the model is not decoded incrementally);
- message ``content`` may be a string, a list of text parts, or null (an empty turn);
- ``top_k`` is accepted as an extra field, as vLLM does;
- a field the server does not implement (``tools``, ``response_format``, penalties, tool calls in
  the conversation) is refused with HTTP 400, unless its value asks for nothing;
- a body that is not JSON, holds ``NaN`` or ``Infinity``, nests arrays and objects more than 32
  levels deep, or sets a sampling option to a non-finite number is refused with HTTP 400 naming the
  problem; a body over 16 MiB with HTTP 413;
- a prompt that with ``max_tokens`` exceeds the model's context window is refused with HTTP 400,
  code ``context_length_exceeded`` and vLLM's message ("This model's maximum context length is N
  tokens.").

Run it with ``arlkit serve MODEL_DIR --port 8000`` (Ctrl-C shuts it down gracefully: requests in
flight are answered first).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import queue
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn

from arlkit.policies.hf import HFPolicy
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, PolicyError, Reply, Request
from arlkit.policies.registry import SamplingConfig
from arlkit.policies.serve_wire import BadRequest, build_app, parse_messages, token_bytes

__all__ = ["OpenAICompatibleServer", "main"]

_REPLY_TIMEOUT = 600.0
_MAX_CHOICES = 16
_MAX_TOP_LOGPROBS = 20
_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens",
                     "stop", "seed", "logprobs", "top_logprobs", "n", "user", "stream", "stream_options"})
"""Request fields the server implements; any other is refused with 400 unless it asks for nothing."""
_NEUTRAL: dict[str, Any] = {"presence_penalty": 0, "frequency_penalty": 0, "tools": [], "parallel_tool_calls": True}


@dataclass
class _Job:
    request: Request
    sampling: SamplingConfig
    stop: tuple[str, ...]
    top_logprobs: int = 0
    future: asyncio.Future[None] | None = None  # resolved on the server's event loop when the reply is in
    loop: asyncio.AbstractEventLoop | None = None
    reply: Reply | None = None
    status: int = 400  # HTTP status if the reply carries an error: the request's fault unless set


@dataclass(frozen=True)
class _Parsed:
    """A chat request, checked."""

    request: Request
    sampling: SamplingConfig
    stop: tuple[str, ...]
    logprobs: bool
    top_logprobs: int
    n: int
    stream: bool
    include_usage: bool


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, telling the model's worker when a shutdown starts (Ctrl-C, SIGTERM)."""

    def __init__(self, config: uvicorn.Config, on_exit: Any) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


class OpenAICompatibleServer:
    """Serve ``policy`` as model ``model_name`` on ``host:port`` (port 0 picks a free one).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``base_url`` is the address to
    give an OpenAI client (``http://127.0.0.1:PORT/v1``).
    """

    def __init__(
        self,
        policy: HFPolicy,
        model_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        batch_wait: float = 0.005,
        request_timeout: float = 30.0,
    ) -> None:
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"the server binds to loopback addresses only, got {host!r}")
        self.policy, self.model_name = policy, model_name
        self.batch_wait = batch_wait
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._socket = socket.create_server((host, port), backlog=512)  # bound now: base_url is known at once
        config = uvicorn.Config(build_app(self), log_level="warning", lifespan="off", access_log=False,
                                timeout_keep_alive=max(5, int(request_timeout)), timeout_graceful_shutdown=10)
        self._uvicorn = _Uvicorn(config, self._begin_shutdown)
        self._closing = False
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAICompatibleServer:
        """Serve on background threads; returns once the server accepts requests."""
        self._threads = [
            threading.Thread(target=self._uvicorn.run, kwargs={"sockets": [self._socket]}, daemon=True),
            threading.Thread(target=self._worker, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + 60.0
        while not self._uvicorn.started:  # uvicorn sets it once its loop serves the socket
            if not self._threads[0].is_alive() or time.monotonic() > deadline:
                raise OSError(f"the server at {self.base_url} did not start")
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        """Serve on this thread until Ctrl-C (or SIGTERM); requests in flight are answered first."""
        worker = threading.Thread(target=self._worker, daemon=True)
        worker.start()
        try:
            self._uvicorn.run(sockets=[self._socket])
        finally:
            self._begin_shutdown()
            worker.join(timeout=10)
            self._socket.close()

    def _begin_shutdown(self) -> None:
        """Refuse new requests and answer the queued ones with 503; the batch in progress finishes."""
        if not self._closing:
            self._closing = True
            self._jobs.put(None)

    def stop(self) -> None:
        self._begin_shutdown()
        self._uvicorn.should_exit = True
        if self._threads:
            self._threads[0].join(timeout=15)
        for thread in self._threads[1:]:
            thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- batching worker -----------------------------------------------------------------------

    @staticmethod
    def _wake(job: _Job) -> None:
        """Resolve ``job``'s future on its event loop (from the worker thread)."""
        if job.loop is None or job.future is None:
            return
        future = job.future
        try:
            job.loop.call_soon_threadsafe(lambda: future.done() or future.set_result(None))
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    def _fail_pending(self) -> None:
        """Answer every queued job with an error (the server is shutting down), so no handler waits."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.status, job.reply = 503, Reply("", error="the server is shutting down")
                self._wake(job)

    def _worker(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None or self._closing:  # shutting down: what is still queued gets a 503 now
                if first is not None:
                    self._jobs.put(first)
                self._fail_pending()
                return
            jobs = [first]
            deadline = time.monotonic() + self.batch_wait
            while len(jobs) < self.policy.max_batch_size:
                try:
                    job = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if job is None:
                    self._jobs.put(None)
                    break
                jobs.append(job)
            groups: dict[tuple[SamplingConfig, tuple[str, ...], int], list[_Job]] = {}
            for job in jobs:
                groups.setdefault((job.sampling, job.stop, job.top_logprobs), []).append(job)
            for (sampling, stop, top), members in groups.items():
                try:
                    replies = self.policy.generate_with([j.request for j in members], sampling=sampling, stop=stop,
                                                        top_logprobs=top)
                except Exception as exc:  # noqa: BLE001 - report to the callers, keep serving
                    replies = [Reply("", error=f"{type(exc).__name__}: {exc}") for _ in members]
                    for job in members:
                        job.status = 500
                for job, reply in zip(members, replies, strict=True):
                    job.reply = reply
                    self._wake(job)

    # -- the API -------------------------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.model()]}

    def model(self) -> dict[str, Any]:
        """The served model's object (``GET /v1/models/{id}``)."""
        return {"id": self.model_name, "object": "model", "created": 0, "owned_by": "arlkit"}

    def chat(self, body: Any) -> dict[str, Any]:
        """The chat completion of ``body``, for a caller on a plain thread (raises ``BadRequest``)."""
        return asyncio.run(self.achat(body))

    async def achat(self, body: Any) -> dict[str, Any]:
        """The chat completion of ``body`` (raises ``BadRequest``)."""
        parsed = self._parse(body)
        return self._response(await self._generate(parsed), parsed, body)

    async def achat_stream(self, body: Any) -> list[dict[str, Any]]:
        """The server-sent event chunks of ``body`` with ``stream: true`` (raises ``BadRequest``)."""
        parsed = self._parse(body)
        replies = await self._generate(parsed)
        full = self._response(replies, parsed, body)
        head = {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": self.model_name}
        chunks: list[dict[str, Any]] = []
        for choice in full["choices"]:
            index = choice["index"]
            chunks.append({**head, "choices": [{"index": index, "delta": {"role": "assistant", "content": ""},
                                                "logprobs": None, "finish_reason": None}]})
            entries = (choice["logprobs"] or {}).get("content") or []
            for k, piece in enumerate(self._pieces(replies[index], choice["message"]["content"])):
                logprobs = {"content": [entries[k]]} if parsed.logprobs and k < len(entries) else None
                chunks.append({**head, "choices": [{"index": index, "delta": {"content": piece}, "logprobs": logprobs,
                                                    "finish_reason": None}]})
            chunks.append({**head, "choices": [{"index": index, "delta": {}, "logprobs": None,
                                                "finish_reason": choice["finish_reason"]}]})
        if parsed.include_usage:
            chunks.append({**head, "choices": [], "usage": full["usage"]})
        return chunks

    def _pieces(self, reply: Reply, content: str) -> list[str]:
        """One piece of ``content`` per generated token (an end-of-turn token excluded): the text that
        token completes (empty for a token inside a UTF-8 character, or past a stop string)."""
        ids = list(reply.token_ids or ())
        if ids and ids[-1] in self.policy.eos_ids:
            ids = ids[:-1]
        pieces, done = [], 0
        for k in range(1, len(ids) + 1):
            text = self.policy.tokenizer.decode(ids[:k], skip_special_tokens=True)
            end = done if text.endswith("\ufffd") else min(len(text), len(content))
            pieces.append(content[done:end] if end > done else "")
            done = max(done, end)
        if not pieces:
            return [content]
        pieces[-1] += content[done:]
        return pieces

    async def _generate(self, parsed: _Parsed) -> list[Reply]:
        if self._closing:
            raise BadRequest(503, "the server is shutting down", "server_error")
        request, sampling = parsed.request, parsed.sampling
        loop = asyncio.get_running_loop()
        # choice i samples turn i of the request's seed: n choices are n different samples, and
        # choice 0 is what the same request with n = 1 returns
        jobs = [_Job(Request(request.messages, request.seed, i), sampling, parsed.stop, parsed.top_logprobs,
                     loop.create_future(), loop) for i in range(parsed.n)]
        for job in jobs:
            self._jobs.put(job)
        try:
            await asyncio.wait_for(asyncio.gather(*(j.future for j in jobs if j.future is not None)), _REPLY_TIMEOUT)
        except asyncio.TimeoutError:
            raise BadRequest(503, "the model did not answer in time", "server_error") from None
        replies = [job.reply or Reply("", error="no reply") for job in jobs]
        for job, reply in zip(jobs, replies, strict=True):
            if reply.error is not None:
                raise BadRequest(job.status, reply.error, "server_error" if job.status >= 500 else "invalid_request_error")
            if reply.finish_reason == CONTEXT_LENGTH_EXCEEDED:
                prompt, new = len(reply.prompt_ids or ()), sampling.max_new_tokens or 0
                raise BadRequest(
                    400,
                    f"This model's maximum context length is {self.policy.context_length} tokens. However, you "
                    f"requested {prompt + new} tokens ({prompt} in the messages, {new} in the completion). "
                    "Please reduce the length of the messages or completion.",
                    CONTEXT_LENGTH_EXCEEDED,
                )
        return replies

    def _parse(self, body: Any) -> _Parsed:
        if not isinstance(body, dict):
            raise BadRequest(400, "the body must be a JSON object")
        unsupported = sorted(k for k, v in body.items() if k not in _FIELDS and not _is_default(k, v))
        if unsupported:
            raise BadRequest(400, f"unsupported field(s): {', '.join(unsupported)}; this server supports "
                                   f"{', '.join(sorted(_FIELDS))}")
        if body.get("model") != self.model_name:
            raise BadRequest(404, f"The model {body.get('model')!r} does not exist", "model_not_found")
        messages = parse_messages(body.get("messages"))
        n = body.get("n", 1)
        if n is None:
            n = 1
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= _MAX_CHOICES:
            raise BadRequest(400, f"n must be an integer from 1 to {_MAX_CHOICES}, got {n!r}")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest(400, "stop must be a string or a list of strings")
        limit: Any = body.get("max_completion_tokens", body.get("max_tokens"))
        if limit is None:
            limit = self.policy.sampling.max_new_tokens
        elif isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BadRequest(400, f"max_tokens / max_completion_tokens must be an integer >= 1, got {limit!r}")
        top = body.get("top_logprobs") or 0
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= _MAX_TOP_LOGPROBS:
            raise BadRequest(400, f"top_logprobs must be an integer from 0 to {_MAX_TOP_LOGPROBS}, got {top!r}")
        if top and not body.get("logprobs"):
            raise BadRequest(400, "top_logprobs needs logprobs: true")
        options = body.get("stream_options") or {}
        if not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise BadRequest(400, f"stream_options supports include_usage only, got {options!r}")
        if options and not body.get("stream"):
            raise BadRequest(400, "stream_options needs stream: true")
        try:
            sampling = SamplingConfig(
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                top_k=int(body.get("top_k", 0) or 0),
                max_new_tokens=int(limit),
            )
            # no seed: a fresh one, so unseeded requests are independent samples (not all seed 0)
            seed = int(body["seed"]) if body.get("seed") is not None else secrets.randbits(62)
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: int() of an infinity
            raise BadRequest(400, f"invalid sampling option: {exc}") from None
        return _Parsed(Request(messages=messages, seed=seed, turn=0), sampling, tuple(stop), bool(body.get("logprobs")),
                       int(top), n, bool(body.get("stream")), bool(options.get("include_usage")))

    def _choice(self, index: int, reply: Reply, parsed: _Parsed) -> dict[str, Any]:
        ids = list(reply.token_ids or ())
        lps = list(reply.logprobs or ())
        tops = list((reply.details or {}).get("top_logprobs") or [])
        ended = bool(ids) and ids[-1] in self.policy.eos_ids
        if ended:
            ids, lps, tops = ids[:-1], lps[:-1], tops[:-1]
        text = reply.text
        cut = min((text.find(s) for s in parsed.stop if s and s in text), default=-1)
        if cut >= 0:
            text = text[:cut]
        choice: dict[str, Any] = {
            "index": index,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop" if ended or cut >= 0 else "length",
            "logprobs": None,
        }
        if parsed.logprobs:
            content = []
            for k, (token, lp) in enumerate(zip(ids, lps, strict=True)):
                alternatives = tops[k] if k < len(tops) else []
                content.append({**self._token_entry(token, lp),
                                "top_logprobs": [self._token_entry(t, v) for t, v in alternatives[: parsed.top_logprobs]]})
            choice["logprobs"] = {"content": content}
        return choice

    def _token_entry(self, token: int, logprob: float) -> dict[str, Any]:
        raw = token_bytes(self.policy.tokenizer, token)
        return {"token": raw.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(raw)}

    def _response(self, replies: Sequence[Reply], parsed: _Parsed, body: dict[str, Any]) -> dict[str, Any]:
        prompt_tokens = len(self.policy.prompt_ids(parsed.request.messages))
        completion = sum(len(r.token_ids or ()) for r in replies)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [self._choice(i, r, parsed) for i, r in enumerate(replies)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                      "total_tokens": prompt_tokens + completion},
        }


def _is_default(key: str, value: Any) -> bool:
    """A field this server does not implement, sent with the value that asks for nothing."""
    return value is None or value is False or (key in _NEUTRAL and value == _NEUTRAL[key])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arlkit.policies.serve", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="a local causal-LM directory (e.g. from `arlkit model init`)")
    parser.add_argument("--name", default=None, help="model name clients must send (default: the directory path)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    return serve(args.model_dir, args.name, args.host, args.port, exit_with=lambda m: parser.exit(2, f"{parser.prog}: error: {m}\n"))


def serve(model_dir: str, name: str | None, host: str, port: int, *, exit_with: Any) -> int:
    """Load ``model_dir`` and serve it until Ctrl-C (``arlkit serve``); ``exit_with(message)`` on a bad
    model folder or address."""
    try:
        policy = HFPolicy.from_pretrained(model_dir)
        server = OpenAICompatibleServer(policy, name or model_dir, host, port)
    except (PolicyError, ValueError, OSError) as exc:
        exit_with(str(exc))
        return 2
    print(f"serving {model_dir} as {server.model_name!r} at {server.base_url} (Ctrl-C stops)", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
