"""Training dynamics (docs/metrics.md#training-dynamics; RT §4.2, Fig. 8): R_multi and R_single.
RT: "What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?"

- **R_multi**: mean trajectory reward (and success rate) on held-out tasks at the full budget.
- **R_single**: mean oracle step quality over a **fixed** pool of states. The pool is built once, from
  the initial policy's trajectories on held-out tasks (several seeds, spread over tasks and depths), and
  saved with the run (``dynamics_pool.json``): each state keeps the exact messages the policy saw there
  (history and announced remaining budget) and the actions that led to it, so the environment state is
  rebuilt by replay. At each validation the current policy samples ``actions`` next replies per state;
  a reply's quality is the oracle's ``Q*_h(s, a)`` with h = the remaining budget (gamma = 0.95), and 0
  for a reply without an admissible action.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.algos import RewardConfig
from arlkit.envs import Env, Oracle, Task, has_oracle
from arlkit.policies import Policy, Request
from arlkit.rollout import EngineConfig, PromptConfig, derive_seed, make_jobs, run_rollouts
from arlkit.train.batch import score_trajectory
from arlkit.rundir import atomic_write_text

__all__ = ["PoolState", "build_state_pool", "load_state_pool", "r_multi", "r_single", "save_state_pool"]


@dataclass(frozen=True)
class PoolState:
    """One state of the R_single pool.

    Attributes:
        task_id: the task.
        payload: the task's payload (to rebuild it).
        env_seed: the trajectory's environment seed.
        actions: the executed actions before this state (None for a turn whose reply had no action).
        messages: the messages the policy saw at this state.
        remaining: turns left, this one included.
        depth: turns completed before this state.
        budget: the trajectory's budget T.
    """

    task_id: str
    payload: dict[str, Any]
    env_seed: int
    actions: list[str | None]
    messages: list[dict[str, str]]
    remaining: int
    depth: int
    budget: int


def r_multi(
    policy: Policy,
    make_env: Callable[[], Env],
    tasks: Sequence[Task],
    *,
    samples: int,
    budget: int,
    prompt: PromptConfig,
    reward: RewardConfig,
    seed: int,
    engine: EngineConfig | None = None,
) -> dict[str, float]:
    """``val/reward`` (mean trajectory score, docs/algorithms.md#rewards) and ``val/success`` on ``tasks`` at ``budget``."""
    jobs = make_jobs(tasks, samples, budget, derive_seed(seed, "validation"))
    trajectories = run_rollouts(make_env, jobs, policy, prompt, engine=engine)
    scores = [score_trajectory(t, reward).score for t in trajectories]
    return {
        "val/reward": float(np.mean(scores)),
        "val/success": float(np.mean([t.success for t in trajectories])),
        "val/turns": float(np.mean([len(t.turns) for t in trajectories])),
    }


def build_state_pool(
    policy: Policy,
    make_env: Callable[[], Env],
    tasks: Sequence[Task],
    *,
    samples: int,
    budget: int,
    prompt: PromptConfig,
    states: int,
    seed: int,
    engine: EngineConfig | None = None,
) -> list[PoolState]:
    """Play ``policy`` on ``tasks`` and draw ``states`` (task, turn) states uniformly without
    replacement (fewer if the trajectories hold fewer)."""
    jobs = make_jobs(tasks, samples, budget, derive_seed(seed, "dynamics-pool"))
    trajectories = run_rollouts(make_env, jobs, policy, prompt, engine=engine, keep_prompts=True)
    candidates = [(k, t) for k, traj in enumerate(trajectories) for t in range(len(traj.turns))]
    rng = np.random.default_rng([seed, 4242])
    picks = rng.choice(len(candidates), size=min(states, len(candidates)), replace=False) if candidates else []
    task_of = {task.task_id: task for task in tasks}
    pool = []
    for index in sorted(int(i) for i in picks):
        k, t = candidates[index]
        traj = trajectories[k]
        shown = traj.turns[t].prompt
        assert shown is not None  # kept by run_rollouts(keep_prompts=True)
        pool.append(PoolState(
            task_id=traj.task_id,
            payload=dict(task_of[traj.task_id].payload),
            env_seed=traj.env_seed,
            actions=[turn.action for turn in traj.turns[:t]],
            messages=[dict(m) for m in shown.messages],
            remaining=traj.budget - t,
            depth=t,
            budget=traj.budget,
        ))
    return pool


def save_state_pool(pool: Sequence[PoolState], path: Path) -> None:
    """Write the pool as JSON (atomically)."""
    atomic_write_text(path, json.dumps([asdict(s) for s in pool]) + "\n")


def load_state_pool(path: Path) -> list[PoolState]:
    """Read a pool written by :func:`save_state_pool`."""
    return [PoolState(**item) for item in json.loads(path.read_text(encoding="utf-8"))]


def _restore(env: Env, state: PoolState) -> None:
    env.reset(Task(state.task_id, state.payload), state.env_seed)
    for action in state.actions:
        if action is not None:
            env.step(action)


def _quality(values: dict[str, float], action: str | None) -> float:
    if action is None:
        return 0.0
    wanted = action.strip().strip(".").lower()
    for name, value in values.items():
        if name.lower() == wanted:
            return float(value)
    return 0.0


def r_single(
    policy: Policy,
    make_env: Callable[[], Env],
    pool: Sequence[PoolState],
    *,
    actions: int,
    prompt: PromptConfig,
    seed: int,
) -> dict[str, float]:
    """``val/r_single``: mean quality of ``actions`` sampled replies per pool state (module docstring);
    also ``val/r_single_optimal`` (share of replies that are oracle-optimal) and ``val/r_single_valid``."""
    env = make_env()
    if not pool or actions < 1:
        return {}
    if not has_oracle(env):
        raise ValueError(f"R_single needs an environment with an oracle; {env.name!r} has none")
    requests, values = [], []
    for i, state in enumerate(pool):
        remaining = state.remaining if prompt.budget_mode == "announced" else None
        live = make_env()  # scripted policies read the live state; LLM backends ignore it
        _restore(live, state)
        assert isinstance(live, Oracle)
        values.append(dict(live.action_values(state.remaining)))
        for j in range(actions):
            requests.append(Request(state.messages, derive_seed(seed, "r-single", i, j), state.depth, live, remaining))
    replies = policy.generate(requests)
    qualities, optimal, valid = [], [], []
    for r, reply in enumerate(replies):
        table = values[r // actions]
        action = env.parse_action(reply.text).action if reply.error is None else None
        q = _quality(table, action)
        qualities.append(q)
        valid.append(action is not None and any(k.lower() == action.strip().strip(".").lower() for k in table))
        optimal.append(valid[-1] and q >= max(table.values()) - 1e-12)
    return {
        "val/r_single": float(np.mean(qualities)),
        "val/r_single_optimal": float(np.mean(optimal)),
        "val/r_single_valid": float(np.mean(valid)),
    }
