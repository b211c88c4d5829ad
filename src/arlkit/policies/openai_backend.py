"""The ``openai`` backend: chat completions from any OpenAI-compatible server.

``openai:MODEL@BASE_URL`` talks to vLLM, SGLang, a llama.cpp server or a hosted API through the
official ``openai`` client. The API key is read from an environment variable (``OPENAI_API_KEY`` by
default; a local server needs none).

The policy is an :class:`~arlkit.policies.protocol.AsyncPolicy`. The rollout engine sends each
trajectory's request the moment it is ready (``agenerate``), through a few async clients
(connection pools) per event loop. ``generate`` serves a batch from synchronous code, on the
policy's own event-loop thread, ``max_concurrency`` at a time.

Every attempt has a total deadline, ``timeout`` seconds from connecting to the last byte of the
body (the client's own timeouts are per read, which a server trickling a byte at a time, or
streaming forever, never trips). 429 / 5xx / timeouts / dropped connections / malformed responses
are retried with exponential backoff (or the server's ``Retry-After``), with jitter. A request that
still fails becomes ``Reply(error=...)``: the engine ends that trajectory with
``ended_by="policy_error"`` and the run goes on (an evaluation retries it on resume).

Problems that concern the whole run raise instead. A server that is unreachable, an unknown model,
or a server that never returns log-probs when they are required raise :class:`PolicyError`. A
server that refuses the run's first requests with the same client error raises
:class:`ServerRefused`.

Context window: the server's context-length error (HTTP 400, "maximum context length", code
``context_length_exceeded``) becomes ``Reply(finish_reason="context_length_exceeded")``, a legitimate
end of the trajectory. With a known ``context_length`` (given, or read from such an error) a reply
whose prompt (the server's reported ``usage.prompt_tokens``) plus ``max_tokens`` exceeds it is
discarded the same way, so a server that does not enforce its window (or serves a larger one) ends
trajectories where an enforcing one would.

Scoring: :meth:`OpenAIPolicy.score` reads continuations' log-probs from the server's prompt log-probs
(vLLM's or SGLang's request shape, :mod:`arlkit.policies.openai_scoring`), as the ``hf`` backend scores them.

Stop strings: OpenAI semantics drop the matched stop string from the reply; since the parser needs
the closing tag, a reply that ended on a stop with an ``<action>`` tag left open gets ``</action>``
appended back.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import inspect
import json
import os
import random
import re
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from arlkit.config import ConfigError, RunError
from arlkit.policies.loop_thread import LoopThread
from arlkit.policies.openai_config import (OpenAIConfig, config_from_options, is_context_length_error,
                                           parse_openai_spec)
from arlkit.policies.openai_scoring import ServerScorer
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, PolicyError, Reply, Request
from arlkit.policies.registry import BackendOptions, SamplingConfig, register_policy

__all__ = ["OpenAIConfig", "OpenAIPolicy", "ServerRefused", "config_from_options", "is_context_length_error", "parse_openai_spec"]

RETRY_AFTER_CAP_S = 60.0
"""Longest wait a server's ``Retry-After`` header is honoured for."""
REFUSALS_TO_STOP = 3
"""A run stops (:class:`ServerRefused`) when its first this many requests are all refused with the
same non-retryable 4xx before any succeeds: a setting the server rejects fails every request."""

_T = TypeVar("_T")
_POOLS = 4  # async clients (connection pools) per event loop, used in turn
_STOP = "</action>"
_CONTEXT_LIMIT = re.compile(r"context[ _-]?(?:length|size|window)(?: is| of)? (\d+)", re.IGNORECASE)


class ServerRefused(RunError):
    """The server refused the run's first requests, all with the same client error (e.g. an
    unsupported parameter): retrying would score every trajectory as a failure."""


class _MalformedResponse(Exception):
    """The server answered 200 with something that is not a chat completion."""


def request_seed(seed: int, turn: int) -> int:
    """The ``seed`` sent with turn ``turn`` of trajectory ``seed`` (servers that honour it then sample
    reproducibly)."""
    digest = hashlib.sha256(f"arlkit-openai:{seed}:{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 2


class OpenAIPolicy:
    """A model behind an OpenAI-compatible chat-completions endpoint.

    Args:
        model: the model name the server knows.
        base_url: e.g. ``http://127.0.0.1:8000/v1``; ``None`` uses ``OPENAI_BASE_URL`` or the
            client's default.
        sampling: temperature, top-p, top-k (sent as an extra field, understood by vLLM, SGLang and
            llama.cpp) and the cap on new tokens.
        config: timeouts, retries, concurrency and log-prob options.
        context_length: the model's context window in tokens, when known (else it is learned from
            the server's first context-length error).
        sleep: waits between attempts (``asyncio.sleep``; tests replace it, by a coroutine function or
            a plain function).

    With native tool calls (``Request.tools``) each request offers the tools and the reply's tool calls
    come back in ``details["tool_calls"]`` (:attr:`sends_tools`).
    """

    sends_tools = True
    """Requests with ``tools`` are sent with them (native tool calls)."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        sampling: SamplingConfig | None = None,
        config: OpenAIConfig | None = None,
        *,
        name: str | None = None,
        context_length: int | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        import openai

        self.model, self.base_url = model, base_url
        self.sampling = (sampling or SamplingConfig()).with_default_reply_tokens(None)
        self.config = config or OpenAIConfig()
        if context_length is not None and context_length < 2:
            raise ValueError(f"context_length must be >= 2 tokens, got {context_length}")
        self.context_length = context_length
        """Tokens of prompt plus reply the server accepts (``None``: unknown until it says)."""
        self.name = name or f"openai:{model}" + (f"@{base_url}" if base_url else "")
        self._sleep = sleep
        self._openai = openai
        key = os.environ.get(self.config.api_key_env)
        if not key and self.config.require_api_key:
            raise PolicyError(f"the API key variable {self.config.api_key_env} (--api-key-env) is not set")
        kwargs: dict[str, Any] = {"api_key": key or "EMPTY", "timeout": self.config.timeout, "max_retries": 0}
        if base_url:
            kwargs["base_url"] = base_url
        try:
            # Redirects are not followed: a base URL that redirects is reported with where it points.
            self.client = openai.OpenAI(**kwargs, http_client=openai.DefaultHttpxClient(follow_redirects=False))
        except openai.OpenAIError as exc:
            raise PolicyError(f"cannot create the OpenAI client: {exc}") from None
        self._client_kwargs = kwargs
        self._completion = openai.types.chat.ChatCompletion
        self._clients: dict[asyncio.AbstractEventLoop, list[Any]] = {}  # async clients of each event loop
        self._turn = 0
        self._thread: LoopThread | None = None  # the loop of generate() and the model check, made on first use
        self._tokens_field = "max_tokens"  # "max_completion_tokens" once a server asks for it
        self._succeeded = False
        self._refusals: dict[tuple[int, str], int] = {}
        self._rng = random.Random(0)  # jitter only: results never depend on it
        self._slots: asyncio.Semaphore | None = None
        self._scorer: ServerScorer | None = None
        if self.config.check_model:
            self._check_model()

    def _where(self) -> str:
        return str(self.client.base_url)

    def _check_model(self) -> None:
        openai = self._openai
        try:
            served = self._own_loop().submit(self._within(self._served())).result()
        except openai.NotFoundError:
            return  # the server has no /models endpoint: nothing to check; a missing /v1 shows on the first request
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise PolicyError(f"cannot reach the server at {self._where()}: {exc}") from None
        except openai.AuthenticationError:
            raise PolicyError(
                f"the server at {self._where()} rejected the API key (set ${self.config.api_key_env})"
            ) from None
        except openai.APIStatusError as exc:
            raise PolicyError(self._redirected(exc) or
                              f"the server at {self._where()} answered {exc.status_code} when listing models") from None
        if self.model not in served:
            listed = ", ".join(served[:20]) + (" ..." if len(served) > 20 else "")
            raise PolicyError(f"the server at {self._where()} does not serve model {self.model!r}; it serves: {listed or '(none)'}")

    # -- one request ---------------------------------------------------------------------------

    def _params(self, request: Request) -> dict[str, Any]:
        s = self.sampling
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "temperature": s.temperature,
            "top_p": s.top_p,
            self._tokens_field: s.max_new_tokens,
            "seed": request_seed(request.seed, request.turn),
        }
        if request.tools is not None:  # native tool calls: the environment's functions, no text action to stop at
            params["tools"] = [dict(t) for t in request.tools]
        else:
            params["stop"] = [_STOP]
        if self.config.logprobs:
            params["logprobs"] = True
        if s.top_k > 0:
            params["top_k"] = s.top_k  # not an OpenAI field: vLLM, SGLang and llama.cpp read it
        return params

    async def _served(self) -> list[str]:
        return [m.id async for m in self._client_here().models.list()]

    async def _within(self, attempt: Coroutine[Any, Any, _T]) -> _T:
        """``attempt`` awaited, cancelled at its deadline: the client's own timeout error, as when one
        read times out."""
        try:
            return await asyncio.wait_for(attempt, self.config.timeout)
        except asyncio.TimeoutError:
            import httpx  # the openai client's transport

            raise self._openai.APITimeoutError(request=httpx.Request("POST", self._where())) from None

    def _retryable(self, exc: Exception) -> bool:
        openai = self._openai
        if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError)):
            return True
        if isinstance(exc, (_MalformedResponse, openai.APIResponseValidationError, json.JSONDecodeError)):
            return True  # a 200 whose body is not a completion (e.g. JSON cut short by a proxy)
        return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500

    def _over_window(self, response: Any) -> bool:
        """The request's prompt, as the server counted it, plus ``max_tokens`` exceeds the known window."""
        prompt = getattr(getattr(response, "usage", None), "prompt_tokens", None)
        if self.context_length is None or not isinstance(prompt, int):
            return False
        return prompt + (self.sampling.max_new_tokens or 0) > self.context_length

    def _learn_limit(self, exc: BaseException) -> None:
        found = _CONTEXT_LIMIT.search(str(exc))
        if found and self.context_length is None and int(found.group(1)) >= 2:
            self.context_length = int(found.group(1))

    async def _one(self, request: Request) -> Reply:
        openai = self._openai
        params = self._params(request)
        attempts, attempt = self.config.max_retries + 1, 0
        while True:
            try:
                # The client's generic POST: the same errors, retries off, response parsing, but
                # not the per-request walk over the typed parameters (~60% of a turn's CPU here).
                response = await self._within(self._client_here().post("/chat/completions", body=params,
                                                                       cast_to=self._completion))
                reply = self._reply(response)
            except openai.NotFoundError as exc:
                raise PolicyError(self._not_found(exc)) from None
            except PolicyError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted below; nothing may escape as a crash
                if (moved := self._redirected(exc)) is not None:
                    raise PolicyError(moved) from None
                if is_context_length_error(exc):
                    self._learn_limit(exc)
                    return Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED)
                if self._wants_completion_tokens(exc, params):
                    params = self._params(request)  # the same request, the cap under its new name
                    continue
                if self._retryable(exc) and attempt + 1 < attempts:
                    waited = self._sleep(self._wait_s(exc, attempt))
                    if inspect.isawaitable(waited):
                        await waited
                    attempt += 1
                    continue
                self._note_refusal(exc)
                return Reply("", error=f"{type(exc).__name__} after {attempt + 1} attempt(s): {_message(exc)}")
            self._succeeded = True
            if self._over_window(response):
                return Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED)
            return reply

    def _redirected(self, exc: Exception) -> str | None:
        """The message for a redirect answer (redirects are not followed), else ``None``."""
        status = getattr(exc, "status_code", None)
        if not isinstance(status, int) or not 300 <= status < 400:
            return None
        headers = getattr(getattr(exc, "response", None), "headers", None)
        target = headers.get("location") if headers is not None else None
        return (f"the server at {self._where()} redirects (HTTP {status}) to {target or 'an unnamed location'}; "
                "give the URL it should be as the base URL (redirects are not followed)")

    def _not_found(self, exc: Exception) -> str:
        """The message for a 404 on a chat completion: an unknown model, or a route the server lacks
        (most often a base URL without ``/v1``)."""
        body = getattr(exc, "body", None)
        code = body.get("code") if isinstance(body, dict) else None
        said = _message(exc)
        if code == "model_not_found" or "model" in said.lower():
            return f"the server at {self._where()} does not know model {self.model!r}: {said}"
        where = self._where().rstrip("/")
        hint = f" (does the base URL lack /v1? e.g. {where}/v1)" if not where.endswith("/v1") else ""
        return f"the server at {self._where()} has no route for chat completions: {said}{hint}"

    def _wait_s(self, exc: Exception, attempt: int) -> float:
        """Seconds before the next attempt: the server's ``Retry-After`` (``-ms`` too) when it sent
        one, else exponential backoff; with jitter either way."""
        wait = min(self.config.max_backoff, self.config.backoff * 2**attempt)
        asked = _retry_after_s(getattr(getattr(exc, "response", None), "headers", None))
        if asked is not None:
            wait = min(RETRY_AFTER_CAP_S, max(wait, asked))
        return wait * (1 + self.config.jitter * (2 * self._rng.random() - 1)) if wait > 0 else 0.0

    def _wants_completion_tokens(self, exc: Exception, params: dict[str, Any]) -> bool:
        """A 400 naming ``max_completion_tokens`` (newer OpenAI models refuse ``max_tokens``): switch
        the name once and resend."""
        if getattr(exc, "status_code", None) == 400 and "max_completion_tokens" in str(exc) and "max_tokens" in params:
            self._tokens_field = "max_completion_tokens"  # requests already in flight with the old name resend too
            return True
        return False

    def _note_refusal(self, exc: Exception) -> None:
        """Count a non-retryable client error; stop the run (:class:`ServerRefused`) when the first
        :data:`REFUSALS_TO_STOP` requests all got the same one and none succeeded."""
        status = getattr(exc, "status_code", None)
        if self._succeeded or not isinstance(status, int) or not 400 <= status < 500:
            return
        body = getattr(exc, "body", None)  # the server's own words, without the SDK's "Error code: N - "
        said = body.get("message") if isinstance(body, dict) else None
        key = (status, said if isinstance(said, str) and said else _message(exc))
        self._refusals[key] = self._refusals.get(key, 0) + 1
        if self._refusals[key] >= REFUSALS_TO_STOP and len(self._refusals) == 1:
            raise ServerRefused(
                f"the server at {self._where()} refused the first {self._refusals[key]} requests with HTTP {status}: "
                f"{key[1]} (check the model's settings, e.g. --max-new-tokens or --top-k)"
            )

    def _reply(self, response: Any) -> Reply:
        """The reply of a chat completion; :class:`_MalformedResponse` when it is none."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise _MalformedResponse(f"the server returned no choices: {repr(response)[:200]}")
        choice = choices[0]
        text = getattr(getattr(choice, "message", None), "content", None) or ""
        if not isinstance(text, str):
            raise _MalformedResponse(f"the reply content is a {type(text).__name__}, not text")
        if getattr(choice, "finish_reason", None) == "stop" and text.rfind("<action>") > text.rfind(_STOP):
            text += _STOP
        logprobs = None
        content = getattr(getattr(choice, "logprobs", None), "content", None)
        if content:
            try:
                logprobs = tuple(float(item.logprob) for item in content)
            except (AttributeError, TypeError, ValueError):
                raise _MalformedResponse("the log-probs are not numbers") from None
        elif self.config.require_logprobs:
            raise PolicyError(
                f"the server at {self._where()} returned no log-probs for model {self.model!r}; "
                "it may not support them (or disable require_logprobs)"
            )
        finish = getattr(choice, "finish_reason", None)
        counted = getattr(response, "usage", None)
        usage = {name: value for name in ("prompt_tokens", "completion_tokens")
                 if isinstance(value := getattr(counted, name, None), int) and value >= 0} or None
        calls = _tool_calls(getattr(choice, "message", None))
        return Reply(text, logprobs=logprobs, finish_reason=finish if finish in ("stop", "length") else None, usage=usage,
                     details={"tool_calls": calls} if calls else None)

    # -- the policy ----------------------------------------------------------------------------

    def _client_here(self) -> Any:
        """An async client of the running event loop (connections belong to one loop), taken in turn
        from :data:`_POOLS` clients. httpcore scans every connection of a pool on each request; at
        256 requests in flight, four pools of 64 took 2.4 ms of CPU per request against 5.5 ms for
        one pool (loopback server, this 2-core machine)."""
        loop = asyncio.get_running_loop()
        clients = self._clients.get(loop)
        if clients is None:
            clients = self._clients[loop] = [
                self._openai.AsyncOpenAI(**self._client_kwargs,
                                         http_client=self._openai.DefaultAsyncHttpxClient(follow_redirects=False))
                for _ in range(_POOLS)
            ]
        self._turn = (self._turn + 1) % _POOLS
        return clients[self._turn]

    async def agenerate(self, request: Request) -> Reply:
        """The reply to one request, sent at once from the caller's event loop (the rollout engine
        bounds how many are in flight)."""
        return await self._one(request)

    async def release_loop(self) -> None:
        """Close the running event loop's client (the engine calls this when its run ends)."""
        for client in self._clients.pop(asyncio.get_running_loop(), []):
            await client.close()

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        """One reply per request, ``max_concurrency`` requests in flight at a time (on the policy's
        own event-loop thread, so it serves synchronous callers)."""
        if not requests:
            return []
        futures = [self._own_loop().submit(self._bounded(r)) for r in requests]
        return [f.result() for f in futures]

    def _own_loop(self) -> LoopThread:
        if self._thread is None:
            self._thread = LoopThread("arlkit-openai")
        return self._thread

    async def _bounded(self, request: Request) -> Reply:
        if self._slots is None:  # made on the policy's loop, where it is awaited
            self._slots = asyncio.Semaphore(self.config.max_concurrency)
        async with self._slots:
            return await self._one(request)

    def score(self, messages: Sequence[Sequence[Any]], continuations: Sequence[str]) -> list[list[float]]:
        """Per-token log-probs of each continuation as the assistant's reply to its conversation, from the
        server's prompt log-probs, tokenized as the ``hf`` backend tokenizes them (see
        :mod:`arlkit.policies.openai_scoring`); a server that cannot score raises :class:`PolicyError`."""
        if self.config.scoring == "off":
            raise PolicyError(f"scoring is off for {self.name} (scoring='off'; choose auto, vllm or sglang)")
        if self._scorer is None:
            c = self.config
            self._scorer = ServerScorer(self.model, self._where(), c.scoring, api_key=self._client_kwargs["api_key"],
                                        timeout=c.timeout, max_retries=c.max_retries, backoff=c.backoff,
                                        max_concurrency=c.max_concurrency)
        return self._scorer.score(messages, continuations)

    def close(self) -> None:
        """Close the HTTP connections and the policy's event-loop thread."""
        if self._scorer is not None:
            self._scorer.close()
            self._scorer = None
        if self._thread is not None:
            self._thread.submit(self.release_loop()).result()
            self._thread.close()
            self._thread = None
        self.client.close()


def _retry_after_s(headers: Any) -> float | None:
    """Seconds a ``Retry-After`` / ``retry-after-ms`` header asks for (delta-seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."



def _tool_calls(message: Any) -> list[dict[str, str]]:
    """The tool calls of a reply message as ``{id, name, arguments}`` (arguments as the server sent
    them; ``call_K`` when the server gave no id). With native tool calls (``Request.tools``) they are
    the reply's action; otherwise they are recorded with the turn, not executed."""
    out = []
    for k, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        if isinstance(name, str):
            call_id = getattr(call, "id", None)
            out.append({"id": call_id if isinstance(call_id, str) and call_id else f"call_{k}", "name": name,
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)})
    return out


@register_policy("openai", needs_arg=True)
def _make_openai(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> OpenAIPolicy:
    model, base_url = parse_openai_spec(arg or "")
    scoring = os.environ.get("ARLKIT_OPENAI_SCORING", "auto")
    try:
        config = replace(config_from_options(backend), scoring=scoring)
    except ValueError as exc:
        raise ConfigError(f"$ARLKIT_OPENAI_SCORING: {exc}") from None
    return OpenAIPolicy(model, base_url, sampling, config, context_length=backend.context_length)
