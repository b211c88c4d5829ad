"""Policy specs: ``random``, ``oracle``, ``noisy-oracle:0.3``, ``hf:PATH``, ``openai:MODEL@URL``.

A spec is ``KIND`` or ``KIND:ARG``. Each kind is registered with a factory
``factory(arg: str | None, sampling: SamplingConfig) -> Policy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from arlkit.config import ConfigError
from arlkit.policies.protocol import Policy

__all__ = ["SamplingConfig", "list_policy_kinds", "make_policy", "register_policy"]


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling options shared by every LLM backend (scripted policies ignore them).

    Attributes:
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus sampling mass (1.0 = off).
        top_k: keep only the k most likely tokens (0 = off).
        max_new_tokens: cap on generated tokens per reply.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


PolicyFactory = Callable[[str | None, SamplingConfig], Policy]
_KINDS: dict[str, tuple[PolicyFactory, bool]] = {}
# Kinds whose module is imported only when first used (LLM backends pull in torch/transformers).
_LAZY: dict[str, str] = {"hf": "arlkit.policies.hf", "openai": "arlkit.policies.openai_backend"}


def register_policy(kind: str, *, needs_arg: bool = False) -> Callable[[PolicyFactory], PolicyFactory]:
    """Decorator registering a policy factory under ``kind``."""

    def deco(factory: PolicyFactory) -> PolicyFactory:
        if kind in _KINDS:
            raise ValueError(f"policy kind {kind!r} is already registered")
        _KINDS[kind] = (factory, needs_arg)
        return factory

    return deco


def _load_builtins() -> None:
    from arlkit.policies import builtin  # noqa: F401


def list_policy_kinds() -> list[str]:
    """Registered policy kinds, sorted."""
    _load_builtins()
    return sorted(set(_KINDS) | set(_LAZY))


def make_policy(spec: str, sampling: SamplingConfig | None = None) -> Policy:
    """Build a policy from its spec string; unknown kinds raise :class:`ConfigError`."""
    _load_builtins()
    kind, sep, arg = spec.partition(":")
    if kind not in _KINDS and kind in _LAZY:
        import importlib

        importlib.import_module(_LAZY[kind])
    if kind not in _KINDS:
        raise ConfigError(f"unknown policy {spec!r}; valid choices: {', '.join(_describe())}")
    factory, needs_arg = _KINDS[kind]
    if needs_arg and not arg:
        raise ConfigError(f"policy {kind!r} needs an argument: {kind}:ARG")
    return factory(arg if sep else None, sampling or SamplingConfig())


def _describe() -> list[str]:
    examples = {
        "noisy-oracle": "noisy-oracle:EPS",
        "hf": "hf:PATH",
        "openai": "openai:MODEL@BASE_URL",
    }
    return [examples.get(kind, kind) for kind in sorted(set(_KINDS) | set(_LAZY))]
