"""A minimal OpenAI-compatible HTTP server for a local ``hf`` model (loopback only, stdlib only).

It serves ``GET /v1/models``, ``GET /v1/models/{id}`` and ``POST /v1/chat/completions``
(non-streaming; up to 16 choices), so that the ``openai`` backend, the official ``openai`` client or
any other OpenAI-compatible tool can drive a local model, e.g. the embedded tiny model in tests.
Requests that arrive together are generated as one batch (requests with equal sampling options
share a forward pass).

Semantics follow the OpenAI API:
- the matched stop string is not part of the returned content;
- ``finish_reason`` is ``"stop"`` (end of turn or stop string) or ``"length"``;
- ``seed`` makes sampling reproducible, and a request without one gets a fresh random seed; choice
  ``i`` of ``n`` samples turn ``i`` of the seed;
- ``logprobs: true`` returns one entry per generated token (an end-of-turn token excluded);
- ``top_k`` is accepted as an extra field, as vLLM does;
- a field the server does not implement (``tools``, ``stream``, ``response_format``, penalties,
  ``top_logprobs``) is refused with HTTP 400, unless its value asks for nothing;
- a prompt that with ``max_tokens`` exceeds the model's context window is refused with HTTP 400,
  code ``context_length_exceeded`` and vLLM's message ("This model's maximum context length is N
  tokens.").

Run it with ``python -m arlkit.policies.serve MODEL_DIR --port 8000``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import queue
import secrets
import threading
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from arlkit.policies.hf import HFPolicy
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, PolicyError, Reply, Request
from arlkit.policies.registry import SamplingConfig

__all__ = ["OpenAICompatibleServer"]

_MAX_BODY = 16 * 2**20
_REPLY_TIMEOUT = 600.0
_MAX_CHOICES = 16
_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens",
                     "stop", "seed", "logprobs", "n", "user"})
"""Request fields the server implements; any other is refused with 400 unless it asks for nothing."""
_NEUTRAL: dict[str, Any] = {"presence_penalty": 0, "frequency_penalty": 0, "top_logprobs": 0, "stream": False,
                            "tools": [], "parallel_tool_calls": True}


@dataclass
class _Job:
    request: Request
    sampling: SamplingConfig
    stop: tuple[str, ...]
    done: threading.Event = field(default_factory=threading.Event)
    reply: Reply | None = None
    status: int = 400  # HTTP status if the reply carries an error: the request's fault unless set


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, code: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.code = status, code


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
        handler = type("_BoundHandler", (_Handler,), {"server_state": self, "timeout": request_timeout})
        self._http = _HTTPServer((host, port), handler)
        self._http.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAICompatibleServer:
        self._threads = [
            threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True),
            threading.Thread(target=self._worker, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout=10)

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- batching worker -----------------------------------------------------------------------

    def submit(self, job: _Job) -> Reply:
        self._jobs.put(job)
        return self._wait(job)

    def _wait(self, job: _Job) -> Reply:
        if not job.done.wait(_REPLY_TIMEOUT):
            job.status = 503
            return Reply("", error="the model did not answer in time")
        assert job.reply is not None
        return job.reply

    def _worker(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
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
            groups: dict[tuple[SamplingConfig, tuple[str, ...]], list[_Job]] = {}
            for job in jobs:
                groups.setdefault((job.sampling, job.stop), []).append(job)
            for (sampling, stop), members in groups.items():
                try:
                    replies = self.policy.generate_with([j.request for j in members], sampling=sampling, stop=stop)
                except Exception as exc:  # noqa: BLE001 - report to the callers, keep serving
                    replies = [Reply("", error=f"{type(exc).__name__}: {exc}") for _ in members]
                    for job in members:
                        job.status = 500
                for job, reply in zip(members, replies, strict=True):
                    job.reply = reply
                    job.done.set()

    # -- the API -------------------------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.model()]}

    def model(self) -> dict[str, Any]:
        """The served model's object (``GET /v1/models/{id}``)."""
        return {"id": self.model_name, "object": "model", "created": 0, "owned_by": "arlkit"}

    def chat(self, body: Any) -> dict[str, Any]:
        request, sampling, stop, want_logprobs, n = self._parse(body)
        # choice i samples turn i of the request's seed: n choices are n different samples, and
        # choice 0 is what the same request with n = 1 returns
        jobs = [_Job(Request(request.messages, request.seed, i), sampling, stop) for i in range(n)]
        for job in jobs:
            self._jobs.put(job)
        replies = [self._wait(job) for job in jobs]
        for job, reply in zip(jobs, replies, strict=True):
            if reply.error is not None:
                raise _BadRequest(job.status, reply.error, "server_error" if job.status >= 500 else "invalid_request_error")
            if reply.finish_reason == CONTEXT_LENGTH_EXCEEDED:
                prompt, new = len(reply.prompt_ids or ()), sampling.max_new_tokens or 0
                raise _BadRequest(
                    400,
                    f"This model's maximum context length is {self.policy.context_length} tokens. However, you "
                    f"requested {prompt + new} tokens ({prompt} in the messages, {new} in the completion). "
                    "Please reduce the length of the messages or completion.",
                    CONTEXT_LENGTH_EXCEEDED,
                )
        return self._response(replies, stop, want_logprobs, body)

    def _parse(self, body: Any) -> tuple[Request, SamplingConfig, tuple[str, ...], bool, int]:
        if not isinstance(body, dict):
            raise _BadRequest(400, "the body must be a JSON object")
        unsupported = sorted(k for k, v in body.items() if k not in _FIELDS and not _is_default(k, v))
        if unsupported:
            raise _BadRequest(400, f"unsupported field(s): {', '.join(unsupported)}; this server supports "
                                   f"{', '.join(sorted(_FIELDS))}")
        if body.get("model") != self.model_name:
            raise _BadRequest(404, f"The model {body.get('model')!r} does not exist", "model_not_found")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
        ):
            raise _BadRequest(400, "messages must be a non-empty list of {role, content} objects with string content")
        n = body.get("n", 1)
        if n is None:
            n = 1
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= _MAX_CHOICES:
            raise _BadRequest(400, f"n must be an integer from 1 to {_MAX_CHOICES}, got {n!r}")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _BadRequest(400, "stop must be a string or a list of strings")
        limit: Any = body.get("max_completion_tokens", body.get("max_tokens"))
        if limit is None:
            limit = self.policy.sampling.max_new_tokens
        elif isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise _BadRequest(400, f"max_tokens / max_completion_tokens must be an integer >= 1, got {limit!r}")
        try:
            sampling = SamplingConfig(
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                top_k=int(body.get("top_k", 0) or 0),
                max_new_tokens=int(limit),
            )
            # no seed: a fresh one, so unseeded requests are independent samples (not all seed 0)
            seed = int(body["seed"]) if body.get("seed") is not None else secrets.randbits(62)
        except (TypeError, ValueError) as exc:
            raise _BadRequest(400, f"invalid sampling option: {exc}") from None
        messages = [{"role": m["role"], "content": m["content"]} for m in messages]
        return Request(messages=messages, seed=seed, turn=0), sampling, tuple(stop), bool(body.get("logprobs")), n

    def _choice(self, index: int, reply: Reply, stop: Sequence[str], want_logprobs: bool) -> dict[str, Any]:
        tokenizer = self.policy.tokenizer
        ids = list(reply.token_ids or ())
        lps = list(reply.logprobs or ())
        ended = bool(ids) and ids[-1] in self.policy.eos_ids
        if ended:
            ids, lps = ids[:-1], lps[:-1]
        text = reply.text
        cut = min((text.find(s) for s in stop if s and s in text), default=-1)
        if cut >= 0:
            text = text[:cut]
        choice: dict[str, Any] = {
            "index": index,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop" if ended or cut >= 0 else "length",
            "logprobs": None,
        }
        if want_logprobs:
            content = []
            for token, lp in zip(ids, lps, strict=True):
                piece = tokenizer.decode([token])
                content.append({"token": piece, "logprob": lp, "bytes": list(piece.encode("utf-8")), "top_logprobs": []})
            choice["logprobs"] = {"content": content}
        return choice

    def _response(self, replies: Sequence[Reply], stop: Sequence[str], want_logprobs: bool,
                  body: dict[str, Any]) -> dict[str, Any]:
        prompt_tokens = len(self.policy.prompt_ids(body["messages"]))
        completion = sum(len(r.token_ids or ()) for r in replies)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [self._choice(i, r, stop, want_logprobs) for i, r in enumerate(replies)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                      "total_tokens": prompt_tokens + completion},
        }


def _is_default(key: str, value: Any) -> bool:
    """A field this server does not implement, sent with the value that asks for nothing."""
    return value is None or value is False or (key in _NEUTRAL and value == _NEUTRAL[key])


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 512  # an async engine opens hundreds of connections at once (the default is 5)


class _Handler(BaseHTTPRequestHandler):
    server_state: OpenAICompatibleServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # quiet: tests and users read replies, not access logs

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, code: str) -> None:
        self._send(status, {"error": {"message": message, "type": code, "code": code}})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.rstrip("/")
        state = self.server_state
        if path in ("/v1/models", "/models"):
            self._send(200, state.models())
        elif path.startswith(("/v1/models/", "/models/")):
            wanted = urllib.parse.unquote(path.split("/models/", 1)[1])
            if wanted == state.model_name:
                self._send(200, state.model())
            else:
                self._error(404, f"The model {wanted!r} does not exist", "model_not_found")
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True  # the body's end is unknown: the connection cannot be reused
            self._error(411, "Content-Length required", "invalid_request_error")
            return
        if not 0 <= length <= _MAX_BODY:
            self.close_connection = True
            self._error(413, "request body too large", "invalid_request_error")
            return
        raw = self.rfile.read(length)  # read before any answer, so the keep-alive connection stays in step
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return
        try:
            body = json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._error(400, "the body is not valid JSON", "invalid_request_error")
            return
        try:
            self._send(200, self.server_state.chat(body))
        except _BadRequest as exc:
            self._error(exc.status, str(exc), exc.code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arlkit.policies.serve", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="a local causal-LM directory (e.g. from `arlkit model init`)")
    parser.add_argument("--name", default=None, help="model name clients must send (default: the directory path)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    try:
        policy = HFPolicy.from_pretrained(args.model_dir)
        server = OpenAICompatibleServer(policy, args.name or args.model_dir, args.host, args.port).start()
    except (PolicyError, ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    print(f"serving {args.model_dir} as {server.model_name!r} at {server.base_url} (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
