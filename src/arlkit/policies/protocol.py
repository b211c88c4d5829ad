"""The policy contract: a batch of chat conversations in, a batch of replies out.

Scripted policies (random, oracle) and LLM backends (Hugging Face, OpenAI-compatible servers) all
satisfy :class:`Policy`, so the rollout engine drives them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CONTEXT_LENGTH_EXCEEDED", "AsyncPolicy", "Message", "Policy", "PolicyError", "Reply", "Request", "ScoringPolicy",
]

CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
"""``Reply.finish_reason`` when the prompt plus ``max_new_tokens`` does not fit the policy's context
window (vLLM's and the OpenAI API's name for it); the rollout engine ends the trajectory there."""

Message = Mapping[str, Any]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``; with native tool calls
also an assistant message with ``tool_calls`` (OpenAI's format, ``content`` possibly ``None``) and
``{"role": "tool", "tool_call_id": str, "content": str}``."""


class PolicyError(RuntimeError):
    """A policy could not be built or used (bad path, unreachable server, missing chat template)."""


@dataclass(frozen=True)
class Request:
    """One reply to generate.

    Attributes:
        messages: the chat conversation, system prompt first, ending with a user message.
        seed: the trajectory's policy seed. Sampling for this request must depend only on
            ``(seed, turn)`` and the messages, never on the other requests in the batch, so results
            do not change with batch composition or after a resume.
        turn: 0-based index of the turn being generated.
        env: the live environment, for scripted policies only (LLM backends must ignore it).
        remaining: turns left including this one when the budget is announced; ``None`` in hidden
            mode (the policy must not know the budget).
        tools: native tool calls: the OpenAI ``tools`` entries to offer; the reply's tool calls go in
            ``Reply.details["tool_calls"]`` (``{"id", "name", "arguments"}``). ``None``: actions are text.
    """

    messages: Sequence[Message]
    seed: int
    turn: int
    env: Any = None
    remaining: int | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True)
class Reply:
    """One generated reply.

    Attributes:
        text: the reply text (untrusted: may be empty, huge or junk).
        token_ids: ids of the generated tokens, when the backend has them.
        logprobs: per-token log-probabilities under the sampling distribution actually used
            (same length as ``token_ids``), when the backend has them.
        error: set when the backend failed for this request after all retries; ``text`` is then
            empty and the rollout engine ends the trajectory, recording the error.
        prompt_ids: ids of the prompt the reply was sampled after, when the backend encoded it
            itself (the trainer reuses them instead of encoding the prompt again).
        finish_reason: why the reply ended: ``"stop"`` (an end-of-reply token or a stop string),
            ``"length"`` (cut at the token cap, ``max_new_tokens``), or :data:`CONTEXT_LENGTH_EXCEEDED`
            when the request did not fit the context window (``text`` is empty and the engine ends
            the trajectory, a legitimate end and not an error); ``None`` when the policy does not
            say (scripted policies). The rollout records it with the turn.
        usage: ``{"prompt_tokens": n, "completion_tokens": m}`` of this reply (``hf``: its own
            counts; ``openai``: the server's, when it says; a composite policy: the sum over its
            calls); the rollout records it with the turn.
        details: how a composite policy made the reply (``debate``: every agent's messages, the
            votes, calls and tokens), recorded with the turn (JSON-safe).
    """

    text: str
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    error: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    finish_reason: str | None = None
    usage: Mapping[str, int] | None = None
    details: Mapping[str, Any] | None = None


@runtime_checkable
class Policy(Protocol):
    """Anything that turns conversations into replies.

    Backends also tell their context window as ``context_length`` (tokens of prompt plus reply;
    ``None``: unlimited, e.g. scripted policies) and answer a request that would not fit with
    ``Reply(finish_reason=CONTEXT_LENGTH_EXCEEDED)``; the attribute is optional so that any object
    with ``name`` and ``generate`` is a policy.
    """

    name: str

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        """One reply per request, in order. Must not raise for a single bad request: report it in
        ``Reply.error`` instead."""
        ...


@runtime_checkable
class AsyncPolicy(Protocol):
    """A policy that also answers one request at a time, asynchronously (remote backends).

    The rollout engine sends each trajectory's request through ``agenerate`` the moment its
    observation is ready, up to its concurrency bound, instead of gathering a batch for
    ``generate``. The same rules hold: the reply depends only on the request (``seed``, ``turn``,
    messages), and a failure of this request alone is reported in ``Reply.error``, not raised.
    """

    name: str

    async def agenerate(self, request: Request) -> Reply:
        """The reply to one request."""
        ...


@runtime_checkable
class ScoringPolicy(Protocol):
    """A policy that can also score given continuations (teacher forcing)."""

    def score(self, messages: Sequence[Sequence[Message]], continuations: Sequence[str]) -> list[list[float]]:
        """Per-token log-probs of each continuation as the assistant reply to its conversation."""
        ...
