"""Validation during an RL run (docs/metrics.md#training-dynamics): R_multi on held-out tasks at T_max
and R_single on a fixed pool of states, built once from the initial policy and saved with the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from arlkit.envs import Env
from arlkit.policies.hf import HFPolicy
from arlkit.train.config import TrainConfig
from arlkit.train.dynamics import PoolState, build_state_pool, load_state_pool, r_multi, r_single, save_state_pool

__all__ = ["Validation"]


class Validation:
    """``validation(step)``: the ``val/*`` metrics of the current policy. The held-out tasks are drawn
    at construction; the state pool comes from :meth:`load_or_build_pool`."""

    def __init__(self, config: TrainConfig, policy: HFPolicy, make_env: Callable[[], Env], t_max: int) -> None:
        self.config, self.policy, self.make_env, self.t_max = config, policy, make_env, t_max
        self.every = config.validation.every
        self.tasks = make_env().tasks("test", config.validation.tasks) if self.every else []
        self.pool: list[PoolState] = []

    def load_or_build_pool(self, path: Path) -> None:
        """The R_single pool saved at ``path``, or built from the current policy and saved there."""
        dynamics = self.config.validation.dynamics
        if not (self.every and dynamics.states):
            return
        if path.exists():
            self.pool = load_state_pool(path)
            return
        pool_tasks = self.make_env().tasks("test", dynamics.pool_tasks)
        self.pool = build_state_pool(self.policy, self.make_env, pool_tasks, samples=dynamics.pool_samples,
                                     budget=self.t_max, prompt=self.config.prompt, states=dynamics.states,
                                     seed=self.config.seed, engine=self.config.engine)
        save_state_pool(self.pool, path)

    def due(self, done_steps: int) -> bool:
        """Whether to validate after ``done_steps`` steps: every ``validation.every`` and after the last."""
        return bool(self.every) and (done_steps % self.every == 0 or done_steps == self.config.steps)

    def __call__(self, step: int) -> dict[str, float]:
        config = self.config
        self.policy.clear_cache()
        metrics = r_multi(self.policy, self.make_env, self.tasks, samples=config.validation.samples, budget=self.t_max,
                          prompt=config.prompt, reward=config.reward, seed=config.seed, engine=config.engine)
        if self.pool:
            metrics |= r_single(self.policy, self.make_env, self.pool, actions=config.validation.dynamics.actions,
                                prompt=config.prompt, seed=config.seed)
        return metrics
