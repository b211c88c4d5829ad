"""The batched rollout engine: many trajectories advance in lockstep, one policy call per turn.

At every tick the engine asks the policy for the next reply of every active trajectory in one
batch, steps each environment, and retires the trajectories that finished (success, terminal
state, budget spent, the policy's context window full, or a backend error; each records why in
``ended_by``); waiting jobs take their places (continuous batching).
Each trajectory carries its own environment and policy seeds, so its outcome does not depend on
which other trajectories share its batches.

Every turn records the remaining budget its prompt announced (``TurnRecord.remaining``) and, when
the caller asks (``keep_prompts``), the exact messages the policy was shown and the prompt token ids
the backend reports (``TurnRecord.prompt``), so callers read what the policy saw from the trajectory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from arlkit.envs.capabilities import state_key_of
from arlkit.envs.protocol import Env, ParsedAction, StepResult, Task
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Policy, Reply, Request
from arlkit.rollout.prompts import PromptConfig, turn_messages
from arlkit.envs.parsing import valid_utf8
from arlkit.rollout.records import POLICY_ERROR, Prompt, Trajectory, TurnRecord
from arlkit.rollout.seeds import derive_seed

__all__ = ["Job", "make_jobs", "run_rollouts"]


@dataclass(frozen=True)
class Job:
    """One trajectory to run.

    Attributes:
        task: the task.
        sample: index of the sample for this task.
        budget: the turn budget T.
        env_seed: seed of the environment's randomness.
        policy_seed: seed of the policy's sampling.
        group: optional group label copied to the trajectory.
    """

    task: Task
    sample: int
    budget: int
    env_seed: int
    policy_seed: int
    group: str | None = None


def make_jobs(tasks: Sequence[Task], samples: int, budget: int, seed: int, group: str | None = None) -> list[Job]:
    """``samples`` jobs per task; seeds depend on (seed, task, sample) only, never on the budget,
    so runs at different budgets share their random numbers."""
    return [
        Job(
            task,
            j,
            budget,
            derive_seed(seed, "env", task.task_id, j),
            derive_seed(seed, "policy", task.task_id, j),
            group,
        )
        for task in tasks
        for j in range(samples)
    ]


@dataclass
class _Active:
    job: Job
    env: Env
    trajectory: Trajectory
    observations: list[str]


def _start(job: Job, make_env: Callable[[], Env], policy_name: str, budget_mode: str) -> _Active:
    env = make_env()
    first = env.reset(job.task, job.env_seed)
    trajectory = Trajectory(
        env=env.name,
        policy=policy_name,
        task_id=job.task.task_id,
        sample=job.sample,
        budget=job.budget,
        budget_mode=budget_mode,
        env_seed=job.env_seed,
        policy_seed=job.policy_seed,
        initial_observation=first,
        group=job.group,
    )
    return _Active(job, env, trajectory, [first])


def _request(active: _Active, prompt: PromptConfig) -> Request:
    env, turn = active.env, len(active.trajectory.turns)
    text = env.prompt_text()
    messages = turn_messages(
        env.name,
        text.instruction,
        text.action_format,
        budget=active.job.budget,
        observations=active.observations,
        replies=[t.reply for t in active.trajectory.turns],
        prompt=prompt,
    )
    remaining = active.job.budget - turn if prompt.budget_mode == "announced" else None
    return Request(messages=messages, seed=active.job.policy_seed, turn=turn, env=env, remaining=remaining)


def _apply(active: _Active, text: str) -> tuple[ParsedAction, StepResult]:
    """Parse and execute one reply; nothing the model wrote can raise out of here."""
    env = active.env
    parsed = env.parse_action(text)
    if parsed.action is None:
        result = StepResult(
            f"Invalid action: {parsed.error}. Nothing happened.\n{env.render()}", 0.0, False, False, False
        )
    else:
        try:
            result = env.step(parsed.action)
        except Exception as exc:  # an environment bug must not sink the whole evaluation
            result = StepResult(
                f"Invalid action: the environment could not execute it ({type(exc).__name__}).\n{env.render()}",
                0.0,
                False,
                False,
                False,
            )
    return parsed, result


def _advance(item: _Active, request: Request, reply: Reply, keep_prompt: bool) -> bool:
    """Record one reply to ``request`` on its trajectory (a turn with what its prompt announced, or
    why it ended); whether the trajectory ended."""
    trajectory = item.trajectory
    if reply.error is not None:
        trajectory.error, trajectory.ended_by = reply.error, POLICY_ERROR
        return True
    if reply.finish_reason == CONTEXT_LENGTH_EXCEEDED:
        trajectory.ended_by = CONTEXT_LENGTH_EXCEEDED
        return True
    state = state_key_of(item.env)  # "" when the environment has no state keys
    # Text UTF-8 cannot encode (a lone surrogate from a server's JSON) would break the next prompt
    # (tokenizers and HTTP clients encode it): it is replaced once here and counted.
    text, replaced = valid_utf8(reply.text) if isinstance(reply.text, str) else (str(reply.text), 0)
    trajectory.replaced_code_points += replaced
    parsed, result = _apply(item, text)
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
        )
    )
    item.observations.append(result.observation)
    if result.success and trajectory.success_turn is None:
        trajectory.success = True
        trajectory.success_turn = len(trajectory.turns)
    if result.done:
        trajectory.ended_by = "success" if trajectory.success else "terminal"
    elif len(trajectory.turns) >= item.job.budget:
        trajectory.ended_by = "budget"
    return trajectory.ended_by is not None


def run_rollouts(
    make_env: Callable[[], Env],
    jobs: Sequence[Job],
    policy: Policy,
    prompt: PromptConfig | None = None,
    *,
    max_active: int = 256,
    on_finish: Callable[[Trajectory], None] | None = None,
    policy_name: str | None = None,
    keep_prompts: bool = False,
) -> list[Trajectory]:
    """Run every job to completion and return the trajectories in job order.

    Args:
        make_env: builds a fresh environment (one per active trajectory).
        jobs: the trajectories to run; each carries its budget and seeds.
        policy: called once per tick with the requests of all active trajectories.
        prompt: budget mode and history window.
        max_active: most trajectories in flight at once (bounds memory, e.g. KV caches).
        on_finish: called with each trajectory as soon as it ends (e.g. to write it), including
            those ended by a backend failure (``ended_by == "policy_error"``).
        policy_name: the name recorded in each trajectory (default: ``policy.name``).
        keep_prompts: keep on every turn what the policy was shown (``TurnRecord.prompt``: the
            messages, and the prompt token ids where the backend reports them), for callers that
            train on or replay the prompts. Off by default: with the full chat a trajectory's
            prompts grow quadratically with its length.
    """
    prompt = prompt or PromptConfig()
    if max_active < 1:
        raise ValueError(f"max_active must be >= 1, got {max_active}")
    policy_name = policy_name or str(getattr(policy, "name", type(policy).__name__))
    results: list[Trajectory | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))[::-1]
    active: dict[int, _Active] = {}
    while pending or active:
        while pending and len(active) < max_active:
            index = pending.pop()
            if jobs[index].budget < 1:
                raise ValueError(f"a budget must be >= 1 turn, got {jobs[index].budget}")
            active[index] = _start(jobs[index], make_env, policy_name, prompt.budget_mode)
        order = list(active)
        requests = [_request(active[i], prompt) for i in order]
        replies = policy.generate(requests)
        if len(replies) != len(order):
            raise RuntimeError(f"policy {policy_name!r} returned {len(replies)} replies for {len(order)} requests")
        for index, request, reply in zip(order, requests, replies, strict=True):
            item = active[index]
            if _advance(item, request, reply, keep_prompts):
                del active[index]
                results[index] = item.trajectory
                if on_finish is not None:
                    on_finish(item.trajectory)
    return [t for t in results if t is not None]
