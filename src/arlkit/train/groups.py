"""One RL step's rollout groups: tasks drawn from the training pool, one budget per group (T_max, a fixed
budget or a BudgetMix candidate), ``group_size`` trajectories each through the rollout engine, scored;
with dynamic filtering, groups whose rewards are all equal are dropped and drawn again
(docs/algorithms.md#dynamic-filtering). Every group sampled goes to ``rollouts.jsonl``
(:class:`RolloutLog`), the evidence ``arlkit budgetmix audit`` checks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arlkit.algos import AlgoConfig, filter_groups
from arlkit.envs import Env, Task
from arlkit.policies import Policy
from arlkit.rollout import Trajectory, derive_seed, make_jobs, run_rollouts
from arlkit.rundir import atomic_write_text
from arlkit.train.batch import Outcome, score_trajectory
from arlkit.train.budgetmix import sample_group_budgets
from arlkit.train.config import TrainConfig

__all__ = ["Group", "RolloutLog", "StepGroups", "collect_groups"]


@dataclass(frozen=True)
class Group:
    """The ``group_size`` trajectories of one task under one budget, and their scored outcomes."""

    trajectories: list[Trajectory]
    outcomes: list[Outcome]
    budget: int


@dataclass(frozen=True)
class StepGroups:
    """The groups one step keeps, how many rounds of drawing that took and how many groups were dropped."""

    kept: list[Group]
    attempts: int
    dropped: int
    seconds: float

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for g in self.kept for t in g.trajectories]

    @property
    def outcomes(self) -> list[Outcome]:
        return [o for g in self.kept for o in g.outcomes]

    def metrics(self) -> dict[str, float]:
        """The step's reward and rollout metrics (``reward/*``, ``rollout/*``, ``budget/mean``, ``filter/*``)."""
        trajectories, outcomes = self.trajectories, self.outcomes
        return {
            "reward/score_mean": _mean([o.score for o in outcomes]),
            "reward/outcome_mean": _mean([o.outcome for o in outcomes]),
            "reward/success": _mean([float(t.success) for t in trajectories]),
            "reward/invalid_rate": _mean([float(f) for o in outcomes for f in o.invalid]),
            "reward/exhausted": _mean([float(o.exhausted) for o in outcomes]),
            "rollout/turns_mean": _mean([len(t.turns) for t in trajectories]),
            "rollout/reply_tokens_mean": _mean([len(x.token_ids or []) for t in trajectories for x in t.turns]),
            "rollout/valid_format_tokens": _valid_format_tokens(trajectories),
            "rollout/backend_errors": float(sum(t.error is not None for t in trajectories)),
            "budget/mean": _mean([float(g.budget) for g in self.kept]),
            "filter/attempts": float(self.attempts),
            "filter/dropped_groups": float(self.dropped),
            "time/rollout_s": self.seconds,
        }


def collect_groups(step: int, config: TrainConfig, budgets: Sequence[int], algo: AlgoConfig, tasks: list[Task],
                   make_env: Callable[[], Env], policy: Policy, log: RolloutLog) -> StepGroups:
    """Step ``step``'s groups: ``tasks_per_step`` tasks, each at one budget drawn from ``budgets``; with
    dynamic filtering, rounds of drawing until enough groups are kept. Seeds derive from the step, the
    round and the group, so a resumed run draws the same groups."""
    start = time.monotonic()
    kept: list[Group] = []
    attempt, needed, dropped = 1, config.tasks_per_step, 0
    while True:
        rng = np.random.default_rng([config.seed, step, attempt])
        picks = rng.choice(len(tasks), size=needed, replace=needed > len(tasks))
        drawn = sample_group_budgets(budgets, needed, rng)
        jobs = [job for g, (i, budget) in enumerate(zip(picks, drawn, strict=True))
                for job in make_jobs([tasks[int(i)]], config.group_size, budget,
                                     derive_seed(config.seed, "rollout", step, attempt, g),
                                     group=f"s{step}a{attempt}g{g}")]  # fmt: skip
        trajectories = run_rollouts(make_env, jobs, policy, config.prompt, engine=config.engine,
                                    policy_name="policy", keep_prompts=True)  # fmt: skip
        groups = []
        for g, budget in enumerate(drawn):
            trajs = trajectories[g * config.group_size : (g + 1) * config.group_size]
            groups.append(Group(trajs, [score_trajectory(t, config.reward) for t in trajs], budget))
        if not algo.dynamic_filtering:
            keep, done = [True] * len(groups), True
        else:
            decision = filter_groups([[o.score for o in g.outcomes] for g in groups],
                                     num_needed=config.tasks_per_step - len(kept), attempt=attempt,
                                     training_step=step, config=algo.filter_config)  # fmt: skip
            keep, done, dropped = list(decision.keep), decision.done, dropped + decision.num_dropped
        for group, k in zip(groups, keep, strict=True):
            log.write(step, attempt, group, k)
        kept += [group for group, k in zip(groups, keep, strict=True) if k]
        if done:
            return StepGroups(kept, attempt, dropped, time.monotonic() - start)
        attempt, needed = attempt + 1, decision.num_to_resample


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _valid_format_tokens(trajectories: list[Trajectory]) -> float:
    """Share of reply tokens in replies of the valid format (strict tags and a parsed action; ARLArena Fig. 2)."""
    turns = [x for t in trajectories for x in t.turns]
    total = sum(len(x.token_ids or []) for x in turns)
    good = sum(len(x.token_ids or []) for x in turns if x.strict_format and x.action is not None)
    return good / total if total else 0.0


def _announced(trajectory: Trajectory) -> list[list[int] | None]:
    """Per turn, the ``(total, completed, remaining)`` counters the prompt announced (the recorded
    remaining budget under the trajectory's budget), or None where it announced none (hidden mode)."""
    return [None if turn.remaining is None else [trajectory.budget, k, turn.remaining]
            for k, turn in enumerate(trajectory.turns)]


class RolloutLog:
    """``rollouts.jsonl``: one line per sampled group (budget, announced counters, rewards). Lines of
    steps from ``keep_until`` on (a resumed checkpoint's step) are dropped; None drops every line."""

    def __init__(self, path: Path, keep_until: int | None) -> None:
        self.path = path
        lines = []
        if keep_until is not None and path.exists():
            raw = path.read_text(encoding="utf-8")
            for line in raw.split("\n")[:-1] if not raw.endswith("\n") else raw.split("\n"):
                if line.strip() and json.loads(line)["step"] < keep_until:
                    lines.append(line + "\n")
        atomic_write_text(path, "".join(lines))
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, step: int, attempt: int, group: Group, kept: bool) -> None:
        trajs = group.trajectories
        self._file.write(json.dumps({
            "step": step, "attempt": attempt, "group": trajs[0].group if trajs else None,
            "task_id": trajs[0].task_id if trajs else None, "budget": group.budget, "kept": kept,
            "trajectories": [{
                "sample": t.sample, "budget": t.budget, "turns": len(t.turns), "success": t.success,
                "exhausted": o.exhausted, "outcome": o.outcome, "score": o.score,
                "announced": _announced(t),
            } for t, o in zip(trajs, group.outcomes, strict=True)],
        }) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
