"""Inference-time multi-agent baselines: ``debate:N@SPEC`` and ``aggressive-debate:N@SPEC``.

ARLArena (§5.3 and its appendix on multi-agent systems) compares trained small models with
frontier models used as a single agent, as a **Debate** (several agents propose, see each other's
proposals, and one decision is taken each turn) and as an **Aggressive Debate** (the same, with an
instruction that pushes bounded exploration, finishing early and accepting partial reward). Here
any policy can be the agents (``openai:…``, ``hf:…``, a scripted one, or a list of different
policies through the Python API), and one environment turn goes:

1. round 0: every agent answers the turn's conversation (with the aggressive instruction appended
   to the system prompt for ``aggressive-debate``);
2. rounds 1..R (``rounds``, default 1): every agent sees its own last reply and the others'
   (each cut to :data:`SHOWN_REPLY_CHARS`) and answers again;
3. the decision: ``majority`` over the actions the environment parses from the last replies
   (agents whose reply has no action do not vote; a tie goes to the action of the lowest-numbered
   agent among the tied), or ``judge``: one more call of the first agent's policy shown every
   proposal, whose parsed action is taken (majority when it has none).

The reply is the text of the first agent whose action won, so the environment parses exactly that
action; the budget counts environment turns, not messages. ``Reply.details`` (recorded with the
turn) holds every agent's reply and action per round, the votes, the judge's reply, the number of
backend calls; ``Reply.usage`` sums the tokens they used (unknown if any backend call did not say), so that
``arlkit eval`` can report cost per turn beside a single agent's (docs/baselines.md).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from arlkit.config import ConfigError
from arlkit.envs.parsing import parse_tagged_action
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, AsyncPolicy, Message, Policy, Reply, Request
from arlkit.policies.registry import BackendOptions, SamplingConfig, make_policy, register_policy

__all__ = ["AGGRESSIVE_INSTRUCTION", "SHOWN_REPLY_CHARS", "DebateConfig", "DebatePolicy", "make_debate", "parse_debate_arg"]

SHOWN_REPLY_CHARS = 1500
"""Characters of each other agent's reply shown in a revision round."""

AGGRESSIVE_INSTRUCTION = (
    "Work under a bounded exploration strategy: do not spend turns on exploration that is unlikely to pay "
    "off, prefer an action that makes progress now, finish as soon as the task is done or further turns will "
    "not help, and settle for a partial result rather than run out of turns."
)


@dataclass(frozen=True)
class DebateConfig:
    """How the agents debate.

    Attributes:
        rounds: revision rounds after the first proposals (0: independent answers, then the decision).
        aggregator: ``majority`` over parsed actions, or a ``judge`` call.
        aggressive: append :data:`AGGRESSIVE_INSTRUCTION` to every agent's system prompt.
    """

    rounds: int = 1
    aggregator: Literal["majority", "judge"] = "majority"
    aggressive: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.rounds <= 8:
            raise ValueError(f"rounds must be between 0 and 8, got {self.rounds}")
        if self.aggregator not in ("majority", "judge"):
            raise ValueError(f"aggregator must be majority or judge, got {self.aggregator!r}")


def _seed(seed: int, *parts: object) -> int:
    text = ":".join(str(p) for p in (seed, *parts))
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)


def _with_instruction(messages: Sequence[Message], note: str) -> list[dict[str, str]]:
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{note}"
    else:
        out.insert(0, {"role": "system", "content": note})
    return out


def _parse(request: Request, text: str) -> str | None:
    env = request.env
    try:
        parsed = env.parse_action(text) if env is not None else parse_tagged_action(text)
    except Exception:  # noqa: BLE001 - parse_action must not raise; a broken one is no vote
        return None
    return parsed.action.strip() if parsed.action else None


class _Turn:
    """The state of one environment turn's debate."""

    def __init__(self, request: Request, n_agents: int, config: DebateConfig) -> None:
        self.request = request
        self.base = _with_instruction(request.messages, AGGRESSIVE_INSTRUCTION) if config.aggressive else [
            dict(m) for m in request.messages
        ]
        self.replies: list[list[Reply]] = [[] for _ in range(n_agents)]
        self.calls = 0
        self.tokens: dict[str, int] | None = {"prompt_tokens": 0, "completion_tokens": 0}
        self.judge: Reply | None = None

    def live(self, round_: int) -> list[int]:
        """The agents that answer in ``round_``: all in round 0, then those whose last call did not fail."""
        return [a for a, replies in enumerate(self.replies) if round_ == 0 or (replies and not replies[-1].error)]

    def add(self, agent: int, reply: Reply) -> None:
        """Record ``agent``'s reply (``agent`` -1: the judge's) and count its call and tokens."""
        if agent < 0:
            self.judge = reply
        else:
            self.replies[agent].append(reply)
        self.calls += 1
        if not reply.usage or self.tokens is None:
            self.tokens = None  # one call without counts: the total is unknown
        else:
            for key in self.tokens:
                self.tokens[key] += reply.usage.get(key, 0)

    def agent_request(self, agent: int, round_: int) -> Request:
        messages = list(self.base)
        if round_ > 0:
            own = self.replies[agent][-1].text
            others = "\n\n".join(
                f"Agent {j + 1}: {replies[-1].text[:SHOWN_REPLY_CHARS]}"
                for j, replies in enumerate(self.replies) if j != agent and replies and not replies[-1].error
            )
            messages += [
                {"role": "assistant", "content": own},
                {"role": "user", "content": (
                    f"The other agents replied:\n\n{others or '(no other replies)'}\n\nWeigh their proposals against "
                    "yours and reply again with the best action, in the same format.")},
            ]
        return replace(self.request, messages=messages, seed=_seed(self.request.seed, "agent", agent, "round", round_))

    def judge_request(self, proposals: Sequence[tuple[int, str]]) -> Request:
        listed = "\n".join(f"Agent {i + 1}: {action}" for i, action in proposals)
        messages = list(self.base) + [{"role": "user", "content": (
            f"Several agents proposed these actions for this turn:\n{listed}\n\nJudge which one is best and reply "
            "with that action, in the same format.")}]
        return replace(self.request, messages=messages, seed=_seed(self.request.seed, "judge"))

    def proposals(self) -> list[tuple[int, str, Reply]]:
        out = []
        for agent, replies in enumerate(self.replies):
            last = replies[-1] if replies else None
            action = _parse(self.request, last.text) if last is not None and not last.error else None
            if action is not None and last is not None:
                out.append((agent, action, last))
        return out

    def decide(self, kind: str, aggregator: str) -> Reply:
        finals = [replies[-1] for replies in self.replies if replies]
        proposals = self.proposals()
        votes = Counter(action for _, action, _ in proposals)
        chosen: tuple[int, str, Reply] | None = None
        if aggregator == "judge" and self.judge is not None and not self.judge.error:
            verdict = _parse(self.request, self.judge.text)
            chosen = next((p for p in proposals if p[1] == verdict), None)
            if chosen is None and verdict is not None:
                chosen = (-1, verdict, self.judge)  # the judge's own action
        if chosen is None and proposals:
            best = max(votes.values())
            chosen = next(p for p in proposals if votes[p[1]] == best)  # lowest agent among the tied
        details = {
            "policy": kind, "aggregator": aggregator, "agents": len(self.replies), "calls": self.calls,
            "votes": dict(votes), "chosen_agent": None if chosen is None else chosen[0] + 1,
            "messages": [[{"round": r, "reply": rep.text, "action": _parse(self.request, rep.text) if not rep.error else None,
                           "error": rep.error} for r, rep in enumerate(replies)] for replies in self.replies],
            "judge": None if self.judge is None else self.judge.text,
        }
        if chosen is not None:
            return Reply(chosen[2].text, usage=self.tokens, details=details)
        if finals and all(r.finish_reason == CONTEXT_LENGTH_EXCEEDED for r in finals):
            return Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED, details=details)
        if finals and all(r.error for r in finals):
            return Reply("", error=f"every debate agent failed: {finals[0].error}", details=details)
        return Reply(finals[0].text if finals else "", usage=self.tokens, details=details)  # nobody had an action


class DebatePolicy:
    """N agents debate each turn and one action is taken (module docstring)."""

    def __init__(self, agents: Sequence[Policy], config: DebateConfig = DebateConfig(), name: str | None = None) -> None:
        if len(agents) < 2:
            raise ValueError(f"a debate needs at least 2 agents, got {len(agents)}")
        self.agents = list(agents)
        self.config = config
        self.kind = "aggressive-debate" if config.aggressive else "debate"
        self.name = name or f"{self.kind}:{len(agents)}@{getattr(agents[0], 'name', 'policy')}"
        windows = [getattr(a, "context_length", None) for a in self.agents]
        self.context_length = min((w for w in windows if w), default=None)

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        turns = [_Turn(r, len(self.agents), self.config) for r in requests]
        for round_ in range(self.config.rounds + 1):
            wanted = [(t, a) for t in turns for a in t.live(round_)]
            for (turn, agent), reply in zip(wanted, self._batched([(a, t.agent_request(a, round_)) for t, a in wanted])):
                turn.add(agent, reply)
        if self.config.aggregator == "judge":
            judged = [(t, proposals) for t in turns if (proposals := t.proposals())]
            batch = [(0, t.judge_request([(a, act) for a, act, _ in proposals])) for t, proposals in judged]
            for (turn, _), reply in zip(judged, self._batched(batch)):
                turn.add(-1, reply)
        return [t.decide(self.kind, self.config.aggregator) for t in turns]

    def _batched(self, work: Sequence[tuple[int, Request]]) -> list[Reply]:
        """Each (agent, request) answered; requests for the same policy object go in one batch."""
        out: list[Reply | None] = [None] * len(work)
        groups: dict[int, list[int]] = {}
        for i, (agent, _) in enumerate(work):
            groups.setdefault(id(self.agents[agent]), []).append(i)
        for indices in groups.values():
            policy = self.agents[work[indices[0]][0]]
            try:
                replies = policy.generate([work[i][1] for i in indices])
            except Exception as exc:  # noqa: BLE001 - one agent's failure is its own reply
                replies = [Reply("", error=f"{type(exc).__name__}: {exc}") for _ in indices]
            for i, reply in zip(indices, replies):
                out[i] = reply
        return [r if r is not None else Reply("", error="no reply") for r in out]


class AsyncDebatePolicy(DebatePolicy):
    """A debate of asynchronous agents (remote backends): each turn's calls of a round run at once."""

    async def agenerate(self, request: Request) -> Reply:
        turn = _Turn(request, len(self.agents), self.config)
        for round_ in range(self.config.rounds + 1):
            wanted = turn.live(round_)
            replies = await asyncio.gather(*(self._one(a, turn.agent_request(a, round_)) for a in wanted))
            for agent, reply in zip(wanted, replies):
                turn.add(agent, reply)
        proposals = turn.proposals()
        if self.config.aggregator == "judge" and proposals:
            turn.add(-1, await self._one(0, turn.judge_request([(a, act) for a, act, _ in proposals])))
        return turn.decide(self.kind, self.config.aggregator)

    async def _one(self, agent: int, request: Request) -> Reply:
        policy = self.agents[agent]
        try:
            return await policy.agenerate(request)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - one agent's failure is its own reply
            return Reply("", error=f"{type(exc).__name__}: {exc}")


def make_debate(agents: Sequence[Policy], config: DebateConfig = DebateConfig(), name: str | None = None) -> DebatePolicy:
    """A debate of ``agents``: asynchronous when every agent is (``openai``), else batched."""
    if all(isinstance(a, AsyncPolicy) for a in agents):
        return AsyncDebatePolicy(agents, config, name)
    return DebatePolicy(agents, config, name)


def parse_debate_arg(kind: str, arg: str) -> tuple[int, DebateConfig, str]:
    """``N[,rounds=R][,judge]@SPEC`` into (N, config, SPEC); :class:`ConfigError` naming the form."""
    form = f"{kind}:N@SPEC, {kind}:N,rounds=R@SPEC or {kind}:N,judge@SPEC (e.g. {kind}:3@openai:MODEL@URL)"
    head, sep, spec = arg.partition("@")
    if not sep or not spec:
        raise ConfigError(f"policy {kind!r} needs the agents' policy: {form}")
    parts = [p.strip() for p in head.split(",")]
    options: dict[str, Any] = {"aggressive": kind == "aggressive-debate"}
    try:
        n = int(parts[0])
        for part in parts[1:]:
            if part == "judge":
                options["aggregator"] = "judge"
            elif part == "majority":
                options["aggregator"] = "majority"
            elif part.startswith("rounds="):
                options["rounds"] = int(part.removeprefix("rounds="))
            else:
                raise ValueError(f"unknown option {part!r}")
        config = DebateConfig(**options)
    except ValueError as exc:
        raise ConfigError(f"bad {kind} spec {arg!r} ({exc}); the forms: {form}") from None
    if n < 2:
        raise ConfigError(f"{kind} needs N >= 2 agents, got {n}; the forms: {form}")
    return n, config, spec


def _factory(kind: str):  # noqa: ANN202
    def build(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> DebatePolicy:
        n, config, spec = parse_debate_arg(kind, arg or "")
        inner = make_policy(spec, sampling, backend)  # one backend (one loaded model) serves every agent
        return make_debate([inner] * n, config, f"{kind}:{arg}")

    return build


register_policy("debate", needs_arg=True)(_factory("debate"))
register_policy("aggressive-debate", needs_arg=True)(_factory("aggressive-debate"))

