"""An OpenAI-compatible HTTP server for a local ``hf`` model (``arlkit serve``; loopback only).

Built on Starlette and uvicorn. It serves ``GET /health``, ``GET /v1/models``, ``GET /v1/models/{id}``,
``POST /v1/chat/completions`` (streaming or not, with tools), ``POST /v1/completions`` (vLLM's form,
with ``echo`` and prompt log-probabilities: :mod:`arlkit.policies.serve_completions`) and a minimal
``POST /v1/responses`` (streaming or not: :mod:`arlkit.policies.serve_responses`), so that the
``openai`` backend, the official ``openai`` SDK, Inspect AI (its default ``openai/`` provider
included), likelihood scorers or any OpenAI-compatible tool can drive a local model, e.g. the
embedded tiny model in tests. Requests that arrive together are generated as one batch (requests
with equal sampling options share a forward pass).

Semantics follow the OpenAI API:
- the matched stop string is not part of the returned content;
- ``finish_reason`` is ``"stop"`` (end of turn or stop string), ``"length"``, or ``"tool_calls"``;
- ``seed`` makes sampling reproducible, and a request without one gets a fresh random seed; choice
  ``i`` of ``n`` (at most :data:`~arlkit.policies.serve_wire.MAX_CHOICES`, 128: the choices are
  sampled in batches of the policy's ``max_batch_size``, so memory stays bounded) samples turn ``i``
  of the seed;
- ``logprobs: true`` returns one entry per generated token (an end-of-turn token excluded), with
  the token's own bytes (a token that is part of a UTF-8 character has those bytes, not the
  replacement character's), and ``top_logprobs: k`` (up to 20) the k most likely tokens at each
  step, under the same (temperature, top-k, top-p) distribution the token was sampled from;
- ``tools`` are rendered by the model's chat template (or a ChatML tool template when the model's
  own ignores tools: :mod:`arlkit.policies.serve_tools`); a reply's ``<tool_call>`` blocks naming an
  offered function come back as ``tool_calls``. ``tool_choice: "none"`` leaves the tools out of the
  prompt; ``"required"`` and a named function offer the tools like ``"auto"`` and do not force a call:
  a reply without one is returned as text with ``finish_reason`` ``"stop"``. Assistant messages with
  ``tool_calls`` and ``tool`` messages are part of the conversation;
- ``stream: true`` answers with server-sent events: per choice a role chunk, content chunks (one
  per token, with its log-probs when asked; a reply with tool calls sends its text, then one chunk
  per call), a chunk with the ``finish_reason``; then, with ``stream_options: {"include_usage":
  true}``, a usage chunk; then ``[DONE]``. The chunks are sent once the choices are generated (the
  model is not decoded incrementally);
- message ``content`` may be a string, a list of text parts, or null (an empty turn);
- ``top_k`` is accepted as an extra field, as vLLM does;
- fields that change no reply are accepted (``user``, ``metadata``, ``store``, ``service_tier``,
  ``parallel_tool_calls``, ``stream_options``, ``reasoning_effort``, penalties of 0, an empty
  ``logit_bias``, ``modalities: ["text"]``, ``response_format: {"type": "text"}``, ...); one the server
  does not implement with a value that would change the reply (a nonzero penalty, a JSON
  ``response_format``) is refused with HTTP 400 naming it;
- a body that is not JSON, holds ``NaN`` or ``Infinity``, nests arrays and objects more than 32
  levels deep, or sets a sampling option to a non-finite number is refused with HTTP 400 naming the
  problem; a body over 16 MiB with HTTP 413;
- a prompt that with ``max_tokens`` exceeds the model's context window is refused with HTTP 400,
  code ``context_length_exceeded`` and vLLM's message ("This model's maximum context length is N
  tokens.").

Run it with ``arlkit serve MODEL_DIR --port 8000`` (Ctrl-C shuts it down gracefully: requests in
flight are answered first, then it prints how many requests it answered).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import uvicorn

from arlkit.policies.hf import HFPolicy
from arlkit.policies.protocol import PolicyError
from arlkit.policies.serve_app import build_app
from arlkit.policies.serve_completions import complete, completion_chunks, parse_completion
from arlkit.policies.serve_responses import chat_body, response_events, response_object
from arlkit.policies.serve_sampler import ChatSampler
from arlkit.policies.serve_tools import PromptRenderer
from arlkit.policies.serve_wire import ChatRequest, chat_response, parse_chat, stream_chunks

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
        self.renderer = PromptRenderer(policy.tokenizer)
        self.answered = 0
        """Requests answered with HTTP 200 since the start."""
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

    def health(self) -> dict[str, Any]:
        """``GET /health``: the server is up, and which model it serves."""
        return {"status": "ok", "model": self.model_name, "shutting_down": self._sampler.closing}

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.model()]}

    def model(self) -> dict[str, Any]:
        """The served model's object (``GET /v1/models/{id}``)."""
        return {"id": self.model_name, "object": "model", "created": 0, "owned_by": "arlkit",
                "max_model_len": self.policy.context_length}

    def _parse_chat(self, body: Any) -> ChatRequest:
        return parse_chat(body, self.model_name, self.policy.sampling.max_new_tokens, self.renderer)

    async def _sample(self, chat: ChatRequest) -> list[Any]:
        replies = await self._sampler.sample(list(chat.prompt), chat.seed, chat.n, chat.sampling, chat.stop,
                                             chat.top_logprobs)
        self.answered += 1
        return replies

    def chat(self, body: Any) -> dict[str, Any]:
        """The chat completion of ``body``, for a caller on a plain thread (raises ``BadRequest``)."""
        return asyncio.run(self.achat(body))

    async def achat(self, body: Any) -> dict[str, Any]:
        """The chat completion of ``body`` (raises ``BadRequest``)."""
        chat = self._parse_chat(body)
        return chat_response(self.policy, self.model_name, await self._sample(chat), chat)

    async def achat_stream(self, body: Any) -> list[dict[str, Any]]:
        """The server-sent event chunks of ``body`` with ``stream: true`` (raises ``BadRequest``)."""
        chat = self._parse_chat(body)
        return stream_chunks(self.policy, self.model_name, await self._sample(chat), chat)

    async def acomplete(self, body: Any) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
        """The completion of ``body`` and, with ``stream: true``, its event chunks (raises ``BadRequest``)."""
        request = parse_completion(body, self.model_name, self.renderer, len(self.policy.tokenizer))
        full = await complete(self._sampler, self.policy, self.model_name, request)
        self.answered += 1
        return full, (completion_chunks(full) if request.stream else None)

    async def arespond(self, body: Any) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
        """The Responses API ``response`` object of ``body`` and, with ``stream: true``, its events
        (raises ``BadRequest``)."""
        response = response_object(await self.achat(chat_body(body)), body)
        return response, (response_events(response) if body.get("stream") else None)


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
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # uvicorn raises the signal again once its graceful shutdown is done
        print(f"arlkit serve: stopped; answered {server.answered} request(s), the ones in flight included",
              file=sys.stderr, flush=True)
        return 130  # the shell's code for a command stopped by Ctrl-C
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
