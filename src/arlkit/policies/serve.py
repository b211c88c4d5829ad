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
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import uvicorn

from arlkit.policies.hf import HFPolicy
from arlkit.policies.protocol import PolicyError
from arlkit.policies.serve_sampler import ChatSampler
from arlkit.policies.serve_wire import build_app, chat_response, parse_chat, stream_chunks

__all__ = ["OpenAICompatibleServer", "main"]


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
    give an OpenAI client (``http://127.0.0.1:PORT/v1``). The HTTP side (parsing, replies, routes) is
    :mod:`arlkit.policies.serve_wire`, the sampling side :class:`~arlkit.policies.serve_sampler.ChatSampler`.
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
        self._sampler = ChatSampler(policy, batch_wait)
        self._socket = socket.create_server((host, port), backlog=512)  # bound here: base_url is known at once
        config = uvicorn.Config(build_app(self), log_level="warning", lifespan="off", access_log=False,
                                timeout_keep_alive=max(5, int(request_timeout)), timeout_graceful_shutdown=10)
        self._uvicorn = _Uvicorn(config, self._sampler.close)
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAICompatibleServer:
        """Serve on background threads; returns once the server accepts requests."""
        self._threads = [
            threading.Thread(target=self._uvicorn.run, kwargs={"sockets": [self._socket]}, daemon=True),
            threading.Thread(target=self._sampler.run, daemon=True),
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
        worker = threading.Thread(target=self._sampler.run, daemon=True)
        worker.start()
        try:
            self._uvicorn.run(sockets=[self._socket])
        finally:
            self._sampler.close()
            worker.join(timeout=10)
            self._socket.close()

    def stop(self) -> None:
        self._sampler.close()
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
        chat = parse_chat(body, self.model_name, self.policy.sampling.max_new_tokens)
        return chat_response(self.policy, self.model_name, await self._sampler.sample(chat), chat)

    async def achat_stream(self, body: Any) -> list[dict[str, Any]]:
        """The server-sent event chunks of ``body`` with ``stream: true`` (raises ``BadRequest``)."""
        chat = parse_chat(body, self.model_name, self.policy.sampling.max_new_tokens)
        return stream_chunks(self.policy, self.model_name, await self._sampler.sample(chat), chat)


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
