"""arlkit environments as Gymnasium environments.

:func:`to_gymnasium` wraps an arlkit environment: ``Text`` observation and action spaces,
``reset(seed=..., options={"task": ...})`` (a :class:`~arlkit.envs.protocol.Task`, a task index
or a task id; otherwise one drawn from the split with the reset seed), ``step(text)`` returning
Gymnasium's 5-tuple with the :class:`~arlkit.envs.protocol.StepResult` in ``info``; ``truncated``
once the turn budget (default: the family's T_max) is spent. ``info`` at reset holds the
instruction, the action format and the budget-aware system prompt arlkit would show a model.
:func:`register_envs` registers every arlkit environment as ``arlkit/<name>-v0``. See docs/integrations.md.
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium import spaces

from arlkit.envs import list_envs
from arlkit.envs.protocol import Task
from arlkit.integrations.episode import ArlkitEpisode

__all__ = ["AnyText", "ArlkitGymEnv", "register_envs", "to_gymnasium"]

_SAMPLE_CHARSET = "".join(chr(c) for c in range(32, 127)) + "\n"


class AnyText(spaces.Text):
    """A ``Text`` space holding any string of at most ``max_length`` characters (arlkit's texts use
    all of Unicode); ``sample`` draws printable ASCII."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class ArlkitGymEnv(gymnasium.Env):
    """An arlkit environment behind Gymnasium's API (module docstring).

    Args:
        env_name: the arlkit environment (``frozenlake``, ``sql``, ...).
        split: where tasks are drawn from.
        n_tasks: how many tasks of the split to draw from (default: up to 100, as many as exist).
        budget: turns before ``truncated`` (default: the family's T_max).
        parse_replies: actions are whole model replies (``<think>..</think><action>..</action>``),
            parsed by the environment; by default an action is the action text itself.
        render_mode: ``ansi`` makes ``render()`` return the current state as text.
        **config: the environment's options.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, env_name: str = "frozenlake", *, split: str = "test", n_tasks: int | None = None,
                 budget: int | None = None, parse_replies: bool = False, render_mode: str | None = None,
                 **config: Any) -> None:
        self.episode = ArlkitEpisode(env_name, split=split, n_tasks=n_tasks, budget=budget,
                                     parse_replies=parse_replies, **config)
        self.env, self.env_name, self.split = self.episode.env, env_name, split
        self.parse_replies, self.render_mode, self.budget = parse_replies, render_mode, self.episode.budget
        self.observation_space = AnyText(max_length=1 << 20)
        self.action_space = AnyText(max_length=4096)

    def tasks(self) -> list[Task]:
        """The tasks ``reset`` draws from."""
        return self.episode.tasks()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return self.episode.reset(task=(options or {}).get("task"), rng=self.np_random)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.episode.step(action)

    def render(self) -> str | None:
        return self.env.render() if self.render_mode == "ansi" else None


def to_gymnasium(env_name: str = "frozenlake", **options: Any) -> ArlkitGymEnv:
    """``env_name`` as a ``gymnasium.Env`` (:class:`ArlkitGymEnv` options)."""
    return ArlkitGymEnv(env_name, **options)


def register_envs() -> list[str]:
    """Register every arlkit environment with Gymnasium as ``arlkit/<name>-v0`` (importing
    :mod:`arlkit.integrations.gymnasium` does it); the ids registered."""
    ids = []
    for name in list_envs():
        if name == "gymnasium":
            continue  # the adapter the other way
        env_id = f"arlkit/{name}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=ArlkitGymEnv, kwargs={"env_name": name})
        ids.append(env_id)
    return ids
