"""One arlkit environment episode driven from outside: the piece every adapter that serves arlkit's
environments to another framework (Gymnasium, GEM, skyrl-gym, OpenEnv, verifiers) stands on.

:class:`ArlkitEpisode` draws a task from a split, resets the environment with it and returns the
first observation with what a model needs to act (the budget-aware system prompt arlkit shows,
the instruction, the action format); ``step(text)`` returns the five values Gymnasium's ``step``
does, with the :class:`~arlkit.envs.protocol.StepResult` in ``info``. ``terminated`` is the
environment's own end (success, failure, ``submit``); ``truncated`` comes when the announced
turn budget (default: the family's T_max) is spent without it. By default an action is the action
text itself (``"Up"``, a SQL query); ``parse_replies=True`` takes whole model replies
(``<think>..</think><action>..</action>``) and parses them as arlkit's engine does;
``counters=True`` ends every later observation with the turns completed and remaining, as arlkit
announces them. No third-party package is imported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arlkit.envs import make
from arlkit.envs.protocol import ParsedAction, StepResult, Task
from arlkit.rollout.prompts import counter_note, system_prompt

__all__ = ["ArlkitEpisode", "StepTuple"]

StepTuple = tuple[str, float, bool, bool, dict[str, Any]]
"""``(observation, reward, terminated, truncated, info)``."""

_POOL_SIZES = (100, 50, 20, 10, 5, 2, 1)


class ArlkitEpisode:
    """An arlkit environment stepped by a foreign runner, one episode at a time (module docstring).

    Args:
        env_name: the arlkit environment (``frozenlake``, ``sql``, ...).
        split: where tasks are drawn from.
        n_tasks: how many tasks of the split to draw from (default: up to 100, as many as exist).
        budget: the announced turn budget; turns past it truncate (default: the family's T_max).
        parse_replies: actions are whole model replies, parsed by the environment.
        counters: observations after the first end with the turn counter arlkit announces.
        **config: the environment's options.
    """

    def __init__(self, env_name: str = "frozenlake", *, split: str = "test", n_tasks: int | None = None,
                 budget: int | None = None, parse_replies: bool = False, counters: bool = False,
                 **config: Any) -> None:
        self.env = make(env_name, **config)
        self.env_name, self.split = env_name, split
        self.parse_replies, self.counters = parse_replies, counters
        if budget is not None and int(budget) < 1:
            raise ValueError(f"a budget must be >= 1 turn, got {budget}")
        self.budget = int(budget or self.env.t_max)
        self.turns = 0
        self.done = False
        self.solved = False
        self.task_id: str | None = None
        self._n_tasks = n_tasks
        self._pool: list[Task] | None = None

    def tasks(self) -> list[Task]:
        """The tasks ``reset`` draws from."""
        if self._pool is None:
            for size in [self._n_tasks] if self._n_tasks else _POOL_SIZES:
                try:
                    self._pool = self.env.tasks(self.split, size)
                    break
                except ValueError:
                    if self._n_tasks:
                        raise
            if not self._pool:
                raise ValueError(f"{self.env_name} has no {self.split} tasks")
        return self._pool

    def task(self, choice: Any) -> Task:
        """A task of the pool by :class:`Task`, index or task id."""
        if isinstance(choice, Task):
            return choice
        pool = self.tasks()
        if isinstance(choice, (int, np.integer)) and not isinstance(choice, bool):
            if not 0 <= int(choice) < len(pool):
                raise ValueError(f"task index {choice} is out of range: give an index below {len(pool)}")
            return pool[int(choice)]
        found = next((t for t in pool if t.task_id == choice), None)
        if found is None:
            raise ValueError(f"unknown task {choice!r}: give a Task, an index below {len(pool)} or a task id of the pool")
        return found

    def reset(self, *, task: Any = None, rng: np.random.Generator | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``task`` (a :class:`Task`, index or id), else on one drawn with
        ``rng``; the first observation and ``info`` (``task_id``, ``instruction``,
        ``action_format``, ``system_prompt``, ``budget``)."""
        rng = rng if rng is not None else np.random.default_rng()
        chosen = self.task(task) if task is not None else self.tasks()[int(rng.integers(len(self.tasks())))]
        observation = self.env.reset(chosen, int(rng.integers(2**31 - 1)))
        self.turns, self.done, self.solved, self.task_id = 0, False, False, chosen.task_id
        text = self.env.prompt_text()
        prompt = system_prompt(self.env_name, text.instruction, text.action_format, budget=self.budget, completed=0,
                               budget_mode="announced", counters="observation" if self.counters else "system")
        info = {"task_id": chosen.task_id, "instruction": text.instruction, "action_format": text.action_format,
                "system_prompt": prompt, "budget": self.budget}
        return observation, info

    def step(self, action: Any) -> StepTuple:
        """One turn: the action text (or whole reply, with ``parse_replies``)."""
        if self.task_id is None:
            raise RuntimeError("call reset() first")
        text = action if isinstance(action, str) else str(action)
        if self.done:
            return "The episode is over.", 0.0, True, False, {"valid": False, "success": False, "turn": self.turns}
        parsed = self.env.parse_action(text) if self.parse_replies else ParsedAction(text.strip() or None, "empty action")
        if parsed.action is None:
            result = StepResult(f"Invalid action: {parsed.error}.\n{self.env.render()}", 0.0, False, False, False)
        else:
            result = self.env.step(parsed.action)
        self.turns += 1
        truncated = not result.done and self.turns >= self.budget
        self.done = bool(result.done) or truncated
        self.solved = bool(result.done and result.success)
        observation = result.observation
        if self.counters:
            observation = f"{observation}\n{counter_note(self.budget, self.turns)}"
        info = {"step_result": result, "valid": result.valid, "success": result.success, "turn": self.turns}
        return observation, float(result.reward), bool(result.done), truncated, info

    def render(self) -> str:
        return self.env.render()

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()
