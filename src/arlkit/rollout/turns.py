"""One trajectory's bookkeeping, apart from scheduling: start it, build its next request, record a reply.

These are the steps every engine schedule shares (:mod:`arlkit.rollout.engine`); they touch one
trajectory and its own environment only, so trajectories can advance in any order, on any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from arlkit.envs.capabilities import MissingCapability, announce_budget, state_key_of, supports_function_calling
from arlkit.envs.parsing import valid_utf8
from arlkit.envs.protocol import Env, ParsedAction, StepResult, Task
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Reply, Request
from arlkit.rollout.prompts import PromptConfig, turn_messages
from arlkit.rollout.records import POLICY_ERROR, Prompt, Trajectory, TurnRecord

__all__ = ["LiveTrajectory", "next_request", "record_reply", "require_prompt_support", "start_trajectory"]


@dataclass
class LiveTrajectory:
    """A trajectory being played: its task, budget and policy seed, its environment, record and the
    prompt it is shown (turn ``len(trajectory.turns)`` is next)."""

    task: Task
    budget: int
    policy_seed: int
    env: Env
    trajectory: Trajectory
    observations: list[str]
    prompt: PromptConfig


def start_trajectory(
    env: Env, task: Task, *, sample: int, budget: int, env_seed: int, policy_seed: int, group: str | None,
    policy_name: str, prompt: PromptConfig,
) -> LiveTrajectory:
    """Reset ``env`` on ``task`` (telling it the announced budget first, where it asks:
    :class:`~arlkit.envs.capabilities.AnnouncedBudget`) and open the trajectory's record."""
    announce_budget(env, budget if prompt.budget_mode == "announced" else None)
    first = env.reset(task, env_seed)
    trajectory = Trajectory(
        env=env.name,
        policy=policy_name,
        task_id=task.task_id,
        sample=sample,
        budget=budget,
        budget_mode=prompt.budget_mode,
        env_seed=env_seed,
        policy_seed=policy_seed,
        initial_observation=first,
        group=group,
    )
    return LiveTrajectory(task, budget, policy_seed, env, trajectory, [first], prompt)


def require_prompt_support(env: Env, prompt: PromptConfig) -> None:
    """Raise :class:`MissingCapability` when ``env`` cannot be shown ``prompt`` (native tool calls need
    the :class:`~arlkit.envs.capabilities.FunctionCalling` capability)."""
    if prompt.tool_calls == "native" and not supports_function_calling(env):
        raise MissingCapability(f"environment {env.name!r} has no function tools; native tool calls need them "
                                "(use --tool-calls text)")


def _tool_calls(turn: TurnRecord) -> list[dict[str, str]]:
    return list((turn.details or {}).get("tool_calls") or [])


def next_request(live: LiveTrajectory) -> Request:
    """The request for the trajectory's next turn: the conversation so far, as its prompt renders it
    (with native tool calls, the environment's function tools too)."""
    env, turn, prompt = live.env, len(live.trajectory.turns), live.prompt
    native = prompt.tool_calls == "native"
    if native:
        require_prompt_support(env, prompt)
    text = env.function_prompt_text() if native else env.prompt_text()  # type: ignore[attr-defined]
    messages = turn_messages(
        env.name,
        text.instruction,
        text.action_format,
        budget=live.budget,
        observations=live.observations,
        replies=[t.reply for t in live.trajectory.turns],
        prompt=prompt,
        calls=[_tool_calls(t) for t in live.trajectory.turns] if native else None,
    )
    remaining = live.budget - turn if prompt.budget_mode == "announced" else None
    tools = tuple(env.function_tools()) if native else None  # type: ignore[attr-defined]
    return Request(messages=messages, seed=live.policy_seed, turn=turn, env=env, remaining=remaining, tools=tools)


def _native_action(env: Env, calls: list[dict[str, str]]) -> ParsedAction:
    """The action a reply's native tool calls stand for (never raises)."""
    try:
        return ParsedAction(env.function_calls_action(calls), strict_format=True)  # type: ignore[attr-defined]
    except ValueError as exc:
        return ParsedAction(None, error=str(exc) or "the tool calls stand for no action")
    except Exception as exc:  # an environment bug must not sink the whole evaluation
        return ParsedAction(None, error=f"the environment could not read the tool calls ({type(exc).__name__})")


def _apply(env: Env, text: str, calls: list[dict[str, str]] | None = None) -> tuple[ParsedAction, StepResult]:
    """Parse (or, with native tool calls, read the calls of) and execute one reply; nothing the model
    wrote can raise out of here."""
    parsed = env.parse_action(text) if calls is None else _native_action(env, calls)
    if parsed.action is None:
        return parsed, StepResult(
            f"Invalid action: {parsed.error}. Nothing happened.\n{env.render()}", 0.0, False, False, False
        )
    try:
        return parsed, env.step(parsed.action)
    except Exception as exc:  # an environment bug must not sink the whole evaluation
        return parsed, StepResult(
            f"Invalid action: the environment could not execute it ({type(exc).__name__}).\n{env.render()}",
            0.0,
            False,
            False,
            False,
        )


def record_reply(live: LiveTrajectory, request: Request, reply: Reply, keep_prompt: bool) -> bool:
    """Record one reply to ``request``: a turn (the environment steps on it) with what its prompt
    announced, or why the trajectory ended; whether it ended."""
    trajectory = live.trajectory
    if reply.error is not None:
        trajectory.error, trajectory.ended_by = reply.error, POLICY_ERROR
        return True
    if reply.finish_reason == CONTEXT_LENGTH_EXCEEDED:
        trajectory.ended_by = CONTEXT_LENGTH_EXCEEDED
        return True
    state = state_key_of(live.env)  # "" when the environment has no state keys
    # Text UTF-8 cannot encode (a lone surrogate from a server's JSON) would break the next prompt
    # (tokenizers and HTTP clients encode it): it is replaced once here and counted.
    text, replaced = valid_utf8(reply.text) if isinstance(reply.text, str) else (str(reply.text), 0)
    trajectory.replaced_code_points += replaced
    calls = None
    if request.tools is not None:  # native tool calls: the reply's calls are its action
        calls = [dict(c) for c in ((reply.details or {}).get("tool_calls") or [])]
    parsed, result = _apply(live.env, text, calls)
    trajectory.turns.append(
        TurnRecord(
            reply=text,
            action=parsed.action,
            valid=result.valid,
            reward=result.reward,
            observation=result.observation,
            state=state,
            strict_format=parsed.strict_format,
            token_ids=list(reply.token_ids) if reply.token_ids is not None else None,
            logprobs=list(reply.logprobs) if reply.logprobs is not None else None,
            remaining=request.remaining,
            prompt=Prompt(request.messages, reply.prompt_ids) if keep_prompt else None,
            finish_reason=reply.finish_reason if isinstance(reply.finish_reason, str) else None,
            usage=dict(reply.usage) if reply.usage else None,
            details=dict(reply.details) if reply.details else None,
        )
    )
    live.observations.append(result.observation)
    if result.success and trajectory.success_turn is None:
        trajectory.success = True
        trajectory.success_turn = len(trajectory.turns)
    if result.done:
        trajectory.ended_by = "success" if trajectory.success else "terminal"
    elif len(trajectory.turns) >= live.budget:
        trajectory.ended_by = "budget"
    return trajectory.ended_by is not None
