"""The ``openai`` backend: chat completions from any OpenAI-compatible server.

``openai:MODEL@BASE_URL`` talks to vLLM, SGLang, a llama.cpp server or a hosted API through the
official ``openai`` client. The API key is read from an environment variable (``OPENAI_API_KEY`` by
default; a local server needs none). Requests of one turn run concurrently (bounded), every call
has a timeout, and 429 / 5xx / connection failures are retried with exponential backoff. A request
that still fails becomes ``Reply(error=...)``: the engine records it on that trajectory and the run
goes on. Problems that concern the whole run (server unreachable, unknown model, a server that
never returns log-probs when they are required) raise :class:`PolicyError` instead.

Stop strings: OpenAI semantics drop the matched stop string from the reply; since the parser needs
the closing tag, a reply that ended on a stop with an ``<action>`` tag left open gets ``</action>``
appended back.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from arlkit.config import ConfigError
from arlkit.policies.protocol import PolicyError, Reply, Request
from arlkit.policies.registry import SamplingConfig, register_policy

__all__ = ["OpenAIConfig", "OpenAIPolicy", "parse_openai_spec"]

_STOP = "</action>"


@dataclass(frozen=True)
class OpenAIConfig:
    """Connection settings of the ``openai`` backend.

    Attributes:
        api_key_env: environment variable holding the API key (unset: a placeholder key is sent,
            which local servers accept).
        timeout: seconds one HTTP attempt may take (connect, read, write each).
        max_retries: further attempts after a 429, 5xx, timeout or connection failure.
        backoff: seconds before the first retry; doubled before each next one.
        max_backoff: cap on one wait between attempts.
        max_concurrency: most requests in flight at once.
        logprobs: ask the server for per-token log-probs.
        require_logprobs: raise :class:`PolicyError` when the server returns none.
        check_model: at construction, list the server's models and fail early when it is down or
            does not serve the model (skipped for servers without ``/models``).
    """

    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_concurrency: int = 16
    logprobs: bool = True
    require_logprobs: bool = False
    check_model: bool = True

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")


def parse_openai_spec(arg: str) -> tuple[str, str | None]:
    """``MODEL@BASE_URL`` (or ``MODEL``: base URL from ``OPENAI_BASE_URL`` or the client's default)."""
    model, sep, base_url = arg.rpartition("@") if "@" in arg else (arg, "", "")
    if not model:
        raise ConfigError(f"openai:MODEL@BASE_URL needs a model name, got {arg!r}")
    if sep and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"openai:MODEL@BASE_URL needs an http(s) base URL, got {base_url!r}")
    return model, (base_url or None)


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
        sleep: the function used to wait between attempts (tests replace it).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        sampling: SamplingConfig | None = None,
        config: OpenAIConfig | None = None,
        *,
        name: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        self.model, self.base_url = model, base_url
        self.sampling = sampling or SamplingConfig()
        self.config = config or OpenAIConfig()
        self.name = name or f"openai:{model}" + (f"@{base_url}" if base_url else "")
        self._sleep = sleep
        self._openai = openai
        key = os.environ.get(self.config.api_key_env) or "EMPTY"
        kwargs: dict[str, Any] = {"api_key": key, "timeout": self.config.timeout, "max_retries": 0}
        if base_url:
            kwargs["base_url"] = base_url
        try:
            self.client = openai.OpenAI(**kwargs)
        except openai.OpenAIError as exc:
            raise PolicyError(f"cannot create the OpenAI client: {exc}") from None
        if self.config.check_model:
            self._check_model()

    def _where(self) -> str:
        return str(self.client.base_url)

    def _check_model(self) -> None:
        openai = self._openai
        try:
            served = [m.id for m in self.client.models.list()]
        except openai.NotFoundError:
            return  # the server has no /models endpoint: nothing to check
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise PolicyError(f"cannot reach the server at {self._where()}: {exc}") from None
        except openai.AuthenticationError:
            raise PolicyError(
                f"the server at {self._where()} rejected the API key (set ${self.config.api_key_env})"
            ) from None
        except openai.APIStatusError as exc:
            raise PolicyError(f"the server at {self._where()} answered {exc.status_code} when listing models") from None
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
            "max_tokens": s.max_new_tokens,
            "stop": [_STOP],
            "seed": request_seed(request.seed, request.turn),
        }
        if self.config.logprobs:
            params["logprobs"] = True
        if s.top_k > 0:
            params["extra_body"] = {"top_k": s.top_k}
        return params

    def _retryable(self, exc: Exception) -> bool:
        openai = self._openai
        if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError)):
            return True
        return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500

    def _one(self, request: Request) -> Reply:
        openai = self._openai
        params = self._params(request)
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            try:
                response = self.client.chat.completions.create(**params)
            except openai.NotFoundError as exc:
                raise PolicyError(f"the server at {self._where()} does not know model {self.model!r}: {_message(exc)}") from None
            except Exception as exc:  # noqa: BLE001 - sorted below; nothing may escape as a crash
                if isinstance(exc, openai.OpenAIError) and self._retryable(exc) and attempt + 1 < attempts:
                    self._sleep(min(self.config.max_backoff, self.config.backoff * 2**attempt))
                    continue
                return Reply("", error=f"{type(exc).__name__} after {attempt + 1} attempt(s): {_message(exc)}")
            return self._reply(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def _reply(self, response: Any) -> Reply:
        choices = getattr(response, "choices", None) or []
        if not choices:
            return Reply("", error="the server returned no choices")
        choice = choices[0]
        text = getattr(choice.message, "content", None) or ""
        if choice.finish_reason == "stop" and text.rfind("<action>") > text.rfind(_STOP):
            text += _STOP
        logprobs = None
        content = getattr(getattr(choice, "logprobs", None), "content", None)
        if content:
            logprobs = tuple(float(item.logprob) for item in content)
        elif self.config.require_logprobs:
            raise PolicyError(
                f"the server at {self._where()} returned no log-probs for model {self.model!r}; "
                "it may not support them (or disable require_logprobs)"
            )
        return Reply(text, logprobs=logprobs)

    # -- the policy ----------------------------------------------------------------------------

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        """One reply per request, ``max_concurrency`` requests in flight at a time."""
        if not requests:
            return []
        workers = min(self.config.max_concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arlkit-openai") as pool:
            return list(pool.map(self._one, requests))

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


@register_policy("openai", needs_arg=True)
def _make_openai(arg: str | None, sampling: SamplingConfig) -> OpenAIPolicy:
    model, base_url = parse_openai_spec(arg or "")
    return OpenAIPolicy(model, base_url, sampling)
