"""Policy specs: ``random``, ``oracle``, ``noisy-oracle:0.3``, ``hf:PATH``, ``openai:MODEL@URL``.

A spec is ``KIND`` or ``KIND:ARG``. Each kind is registered with a factory
``factory(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> Policy``. Plugin kinds
(docs/integrations.md#plugins) come from installed distributions' ``arlkit.policies`` entry points, or
are named by where their factory lives: ``my_pkg.policies:make_policy`` or ``my_pkg.policies:make_policy:ARG``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from arlkit.config import ConfigError
from arlkit.policies.protocol import Policy
from arlkit.registry import Registry

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS", "POLICIES", "BackendOptions", "RegisteredPolicy", "SamplingConfig", "list_policy_kinds",
    "make_policy", "register_policy",
]

DEFAULT_MAX_NEW_TOKENS = 256
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Cap on tokens per reply when neither the user nor the model's generation config sets one."""


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling options shared by every LLM backend (scripted policies ignore them).

    Attributes:
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus sampling mass (1.0 = off).
        top_k: keep only the k most likely tokens (0 = off).
        max_new_tokens: cap on generated tokens per reply; ``None``: the backend's default (``hf``:
            the model's generation config ``max_new_tokens``, which the embedded tiny model sets to
            its action format's size; else :data:`DEFAULT_MAX_NEW_TOKENS`).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):  # NaN passes every range check written as a comparison
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    def with_default_reply_tokens(self, default: int | None) -> SamplingConfig:
        """This config with ``max_new_tokens`` set: its own value, else ``default``, else
        :data:`DEFAULT_MAX_NEW_TOKENS` (backends call this once, at construction)."""
        if self.max_new_tokens is not None:
            return self
        return replace(self, max_new_tokens=default if default is not None and default >= 1 else DEFAULT_MAX_NEW_TOKENS)


@dataclass(frozen=True)
class BackendOptions:
    """Options of the LLM backends beyond sampling: request timeouts, retries and the context window
    (scripted policies ignore them). ``None`` keeps the backend's own default.

    Attributes:
        request_timeout: seconds one HTTP attempt may take (``openai``; default
            :class:`~arlkit.policies.openai_backend.OpenAIConfig` ``timeout``).
        max_retries: further attempts after a 429, 5xx, timeout, dropped connection or malformed
            response (``openai``).
        retry_backoff: seconds before the first retry, doubled before each next one (``openai``).
        context_length: the context window in tokens (prompt plus reply). ``hf``: at most the
            model's own (``max_position_embeddings`` / tokenizer ``model_max_length``), which is
            the default; ``openai``: unknown unless given or learned from the server's
            context-length error.
        api_key_env: the environment variable holding the API key (``openai``; default
            ``OPENAI_API_KEY``, and a placeholder key when that is unset). A variable named here
            must be set.
    """

    request_timeout: float | None = None
    max_retries: int | None = None
    retry_backoff: float | None = None
    context_length: int | None = None
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if self.request_timeout is not None and not (math.isfinite(self.request_timeout) and self.request_timeout > 0):
            raise ValueError(f"request_timeout must be a finite number of seconds > 0, got {self.request_timeout}")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.retry_backoff is not None and not (math.isfinite(self.retry_backoff) and self.retry_backoff >= 0):
            raise ValueError(f"retry_backoff must be a finite number of seconds >= 0, got {self.retry_backoff}")
        if self.context_length is not None and self.context_length < 2:
            raise ValueError(f"context_length must be >= 2 tokens, got {self.context_length}")
        if self.api_key_env is not None and not _ENV_NAME.fullmatch(self.api_key_env):
            raise ValueError(f"api_key_env must name an environment variable (letters, digits, _), "
                             f"got {self.api_key_env!r}")


PolicyFactory = Callable[[str | None, SamplingConfig, BackendOptions], Policy]


@dataclass(frozen=True)
class RegisteredPolicy:
    """A registered policy kind: its factory and whether its spec needs an argument (``KIND:ARG``)."""

    kind: str
    factory: PolicyFactory
    needs_arg: bool = False


_USAGE = {"noisy-oracle": "noisy-oracle:EPS", "hf": "hf:PATH", "openai": "openai:MODEL@BASE_URL"}
"""How the valid choices show the kinds that take an argument."""

def _adopt(kind: str, obj: object) -> RegisteredPolicy:
    """A plugin object as a policy kind: a factory ``obj(arg, sampling, backend)``."""
    if not callable(obj):
        raise TypeError(f"{type(obj).__name__} is not a policy factory: obj(arg, sampling, backend) -> Policy")
    return RegisteredPolicy(kind, obj)  # type: ignore[arg-type]


POLICIES: Registry[RegisteredPolicy] = Registry(
    "policy",
    group="arlkit.policies",
    adopt=_adopt,
    modules=("arlkit.policies.debate", "arlkit.policies.scripted"),
    # LLM backends import torch or an HTTP client: their modules load when the kind is first asked for.
    on_demand={"hf": "arlkit.policies.hf", "openai": "arlkit.policies.openai_backend"},
    label=lambda kind: _USAGE.get(kind, kind),
)
"""The policy-kind registry; ``modules`` are the built-in kinds that are cheap to import."""


def register_policy(kind: str, *, needs_arg: bool = False) -> Callable[[PolicyFactory], PolicyFactory]:
    """Decorator registering a policy factory under ``kind``."""
    return POLICIES.register(kind, lambda factory: RegisteredPolicy(kind, factory, needs_arg))


def list_policy_kinds() -> list[str]:
    """Registered policy kinds, sorted."""
    return POLICIES.names()


def make_policy(spec: str, sampling: SamplingConfig | None = None, backend: BackendOptions | None = None) -> Policy:
    """Build a policy from its spec string; unknown kinds raise :class:`ConfigError`.

    Args:
        spec: ``KIND`` or ``KIND:ARG``.
        sampling: sampling options of LLM backends.
        backend: timeouts, retries and context window of LLM backends.
    """
    kind, sep, arg = spec.partition(":")
    if sep and kind not in POLICIES and ":" not in kind:  # a plugin named by where it lives: module:factory[:ARG]
        factory, sep, arg = arg.partition(":")
        kind = f"{kind}:{factory}"
    entry = POLICIES.get(kind, quoted=spec)
    if entry.needs_arg and not arg:
        raise ConfigError(f"policy {kind!r} needs an argument: {kind}:ARG")
    return entry.factory(arg if sep else None, sampling or SamplingConfig(), backend or BackendOptions())
