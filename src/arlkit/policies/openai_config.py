"""Connection settings of the ``openai`` backend (:mod:`arlkit.policies.openai_backend`): the config, the
``openai:MODEL@BASE_URL`` spec, and which server errors mean "the prompt does not fit"."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from arlkit.config import ConfigError
from arlkit.policies.openai_scoring import check_scoring
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED
from arlkit.policies.registry import BackendOptions

__all__ = ["OpenAIConfig", "config_from_options", "is_context_length_error", "parse_openai_spec"]

_CONTEXT_ERROR = re.compile(r"context[ _-]?(length|size|window)", re.IGNORECASE)


@dataclass(frozen=True)
class OpenAIConfig:
    """Connection settings of the ``openai`` backend.

    Attributes:
        api_key_env: environment variable holding the API key (unset: a placeholder key is sent,
            which local servers accept).
        require_api_key: an unset ``api_key_env`` is a :class:`PolicyError` (a variable the user
            named, ``--api-key-env``).
        timeout: seconds one HTTP attempt may take in all (connect, headers and body); the
            listing of models at construction has the same deadline.
        max_retries: further attempts after a 429, 5xx, timeout or connection failure.
        backoff: seconds before the first retry; doubled before each next one.
        max_backoff: cap on one wait between attempts (a server's ``Retry-After`` may ask for
            longer, up to :data:`~arlkit.policies.openai_backend.RETRY_AFTER_CAP_S`).
        jitter: each wait is scaled by a random factor in ``[1 - jitter, 1 + jitter]``, so that
            requests refused together do not come back together.
        max_concurrency: most requests of one ``generate`` batch in flight at once (the rollout
            engine bounds the requests it sends through ``agenerate`` itself).
        logprobs: ask the server for per-token log-probs.
        require_logprobs: raise :class:`PolicyError` when the server returns none.
        check_model: at construction, list the server's models and fail early when it is down or
            does not serve the model (skipped for servers without ``/models``).
        scoring: how :meth:`OpenAIPolicy.score` asks for prompt log-probs: ``"vllm"``, ``"sglang"``,
            ``"auto"`` (vLLM's routes, then SGLang's) or ``"off"`` (:mod:`arlkit.policies.openai_scoring`).
    """

    api_key_env: str = "OPENAI_API_KEY"
    require_api_key: bool = False
    timeout: float = 60.0
    max_retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_concurrency: int = 16
    jitter: float = 0.2
    logprobs: bool = True
    require_logprobs: bool = False
    check_model: bool = True
    scoring: str = "auto"

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        check_scoring(self.scoring)


def is_context_length_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's "prompt too long" refusal: an HTTP 400 whose code is
    ``context_length_exceeded`` (OpenAI) or whose message names the context length / size / window
    (vLLM: "This model's maximum context length is N tokens ..."; SGLang, llama.cpp alike)."""
    if getattr(exc, "status_code", None) != 400:
        return False
    body = getattr(exc, "body", None)
    code = body.get("code") if isinstance(body, dict) else None
    return code == CONTEXT_LENGTH_EXCEEDED or bool(_CONTEXT_ERROR.search(str(exc)))


def parse_openai_spec(arg: str) -> tuple[str, str | None]:
    """``MODEL@BASE_URL`` (or ``MODEL``: base URL from ``OPENAI_BASE_URL`` or the client's default)."""
    model, sep, base_url = arg.rpartition("@") if "@" in arg else (arg, "", "")
    if not model:
        raise ConfigError(f"openai:MODEL@BASE_URL needs a model name, got {arg!r}")
    if sep and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"openai:MODEL@BASE_URL needs an http(s) base URL, got {base_url!r}")
    return model, (base_url or None)

def config_from_options(backend: BackendOptions, base: OpenAIConfig | None = None) -> OpenAIConfig:
    """``base`` (default :class:`OpenAIConfig`) with the timeout and retry options ``backend`` sets."""
    base = base or OpenAIConfig()
    return replace(
        base,
        timeout=base.timeout if backend.request_timeout is None else backend.request_timeout,
        max_retries=base.max_retries if backend.max_retries is None else backend.max_retries,
        backoff=base.backoff if backend.retry_backoff is None else backend.retry_backoff,
        api_key_env=base.api_key_env if backend.api_key_env is None else backend.api_key_env,
        require_api_key=base.require_api_key or backend.api_key_env is not None,
    )
