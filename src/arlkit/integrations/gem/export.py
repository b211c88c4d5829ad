"""arlkit environments as GEM environments: ``gem.make("arlkit:frozenlake")``.

:class:`ArlkitGemEnv` is a ``gem.Env`` on :class:`~arlkit.integrations.episode.ArlkitEpisode`:
``reset(seed)`` draws a task of the split (with the seed; ``None`` goes on with the environment's
own generator, as GEM's vector environments do when they reset a finished one) and returns GEM's
kind of first observation: the whole instruction (arlkit's budget-aware system prompt, with the
task's rules and action format) followed by the first observation; ``step(reply)`` takes the
model's whole reply, parsed as arlkit's engine parses it (GEM's convention: an environment reads
the whole response), and returns the five values with arlkit's
:class:`~arlkit.envs.protocol.StepResult` in ``info["step_result"]``. Every later observation ends
with the turns completed and remaining (``counters``), so a GEM runner shows the model the budget
arlkit announces; ``truncated`` comes when it is spent. :func:`register_envs` (run by importing
:mod:`arlkit.integrations.gem`) registers every arlkit environment in GEM's registry as
``arlkit:<name>``; ``gem.make("arlkit:sokoban", size=6)`` passes the environment's options.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arlkit.envs import list_envs
from arlkit.envs.capabilities import ActionSpace, Snapshot
from arlkit.integrations.episode import ArlkitEpisode
from arlkit.integrations.gem.env import gem_registry, load_gem

__all__ = ["ArlkitGemEnv", "register_envs", "to_gem"]

gem = load_gem()


class ArlkitGemEnv(gem.Env):
    """An arlkit environment behind GEM's API (module docstring).

    Args:
        env_name: the arlkit environment (``frozenlake``, ``sql``, ...).
        split: where tasks are drawn from.
        n_tasks: how many tasks of the split to draw from (default: up to 100, as many as exist).
        budget: the announced turn budget; turns past it truncate (default: the family's T_max).
        parse_replies: actions are whole model replies, parsed by the environment (default); false:
            an action is the action text itself (``"Up"``).
        counters: observations after the first end with the turn counter (default).
        seed: the seed of the task draws when ``reset`` gets none (GEM's ``make_vec`` passes one).
        **config: the environment's options.
    """

    def __init__(self, env_name: str = "frozenlake", *, split: str = "test", n_tasks: int | None = None,
                 budget: int | None = None, parse_replies: bool = True, counters: bool = True,
                 seed: int | None = None, **config: Any) -> None:
        super().__init__()
        self._args: dict[str, Any] = dict(split=split, n_tasks=n_tasks, budget=budget, parse_replies=parse_replies,
                                          counters=counters, **config)
        self.episode = ArlkitEpisode(env_name, **self._args)
        self.env, self.env_name, self.budget = self.episode.env, env_name, self.episode.budget
        self.max_turns = self.episode.budget
        self._rng = np.random.default_rng(seed)
        self._sample_rng = np.random.default_rng(None if seed is None else seed + 1)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        # GEM's base reset reseeds the process's global generators; the episode draws from its own.
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        observation, info = self.episode.reset(rng=self._rng)
        return f"{info['system_prompt']}\n\n{observation}", info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.episode.step(action)

    def sample_random_action(self) -> str:
        """A random admissible action (as a reply when actions are replies); environments without a
        finite action set have none."""
        if not isinstance(self.env, ActionSpace):
            raise NotImplementedError(f"{self.env_name} has no finite action set to sample from")
        actions = list(self.env.admissible_actions())
        action = actions[int(self._sample_rng.integers(len(actions)))]
        return f"<action>{action}</action>" if self.episode.parse_replies else action

    def spawn(self, same_state: bool = False, **kwargs: Any) -> ArlkitGemEnv:
        """A new environment with the same options (``kwargs`` override them); ``same_state`` copies
        the current episode too (environments with snapshots)."""
        twin = ArlkitGemEnv(self.env_name, **{**self._args, **kwargs})
        if same_state:
            if not isinstance(self.env, Snapshot) or not isinstance(twin.env, Snapshot):
                raise NotImplementedError(f"{self.env_name} has no snapshots to copy its state from")
            twin.env.restore(self.env.snapshot())
            for name in ("turns", "done", "solved", "task_id"):
                setattr(twin.episode, name, getattr(self.episode, name))
        return twin

    def close(self) -> None:
        self.episode.close()


def to_gem(env_name: str = "frozenlake", **options: Any) -> ArlkitGemEnv:
    """``env_name`` as a ``gem.Env`` (:class:`ArlkitGemEnv` options)."""
    return ArlkitGemEnv(env_name, **options)


def register_envs() -> list[str]:
    """Register every arlkit environment in GEM's registry as ``arlkit:<name>`` (importing
    :mod:`arlkit.integrations.gem` does it); the ids registered."""
    registry = gem_registry()
    ids = []
    for name in list_envs():
        if name == "gem":
            continue  # the adapter the other way
        env_id = f"arlkit:{name}"
        if env_id not in registry:
            gem.register(env_id, ArlkitGemEnv, env_name=name)
        ids.append(env_id)
    return ids
