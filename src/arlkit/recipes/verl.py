"""``arlkit verl data``: training data for verl's trainer from arlkit's environments, played there by
arlkit's agent loop (docs/scale-out.md; :mod:`arlkit.integrations.verl_data`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arlkit.config import ConfigError, build_config, config_to_plain
from arlkit.extras import install_hint

if TYPE_CHECKING:
    from arlkit.rollout.prompts import BudgetMode, CounterPosition, Profile

__all__ = ["VerlData", "launch_overrides", "write_verl_data"]


@dataclass(frozen=True)
class VerlData:
    """What :func:`write_verl_data` wrote.

    Attributes:
        out: the parquet file.
        rows: how many rows (task groups) it holds.
        budgets: the budgets of its groups in turns, each once, sorted.
        env_args: the environment options given, typed (``sandbox.memory_mb=2048`` gives the whole
            ``sandbox`` section).
        overrides: the Hydra overrides a verl launch needs for these rows (:func:`launch_overrides`).
    """

    out: Path
    rows: int
    budgets: list[int]
    env_args: dict[str, Any]
    overrides: list[str]


def write_verl_data(
    out: str | Path, env: str, env_options: Mapping[str, Any], *, budget: str = "budgetmix", groups: int = 256,
    tasks: int = 100, split: str = "train", seed: int = 0, budget_mode: BudgetMode = "announced",
    history: int | None = None, counters: CounterPosition = "system", profile: Profile = "rt",
    layout: str = "step", reward: Mapping[str, Any] | None = None,
) -> VerlData:
    """One parquet row per task group (:func:`arlkit.integrations.verl_data.build_rows`): the task, its seeds,
    its budget (one BudgetMix draw per group with ``budget="budgetmix"``) and the engine's first prompt.
    The environment and its options, the budget, the reward settings and the prompts are checked before
    any work; bad ones raise ``ValueError`` (a :class:`~arlkit.config.ConfigError` where a field is named),
    as does a missing pyarrow."""
    from arlkit.algos import RewardConfig
    from arlkit.budgets import Budget
    from arlkit.envs import env_config
    from arlkit.rollout.prompts import PromptConfig

    typed = env_config(env, env_options)
    Budget.parse(budget)
    rewards = build_config(RewardConfig, dict(reward or {}), where="--reward")
    prompt = PromptConfig(budget_mode, history, counters, profile)
    given = dict.fromkeys(str(key).split(".")[0] for key in env_options)
    env_args = {k: config_to_plain(getattr(typed, k)) for k in given}
    if importlib.util.find_spec("pyarrow") is None:
        raise ConfigError(f"arlkit verl data needs pyarrow: {install_hint('verl')}")
    from arlkit.integrations.verl_data import build_rows, write_rows

    rows = build_rows(env, env_args, budget=budget, groups=groups, split=split, tasks=tasks, seed=seed, prompt=prompt,
                      layout=layout, reward=rewards)  # fmt: skip
    path = write_rows(rows, out)
    budgets = sorted({r["extra_info"]["budget"] for r in rows})
    return VerlData(path, len(rows), budgets, env_args, launch_overrides(layout))


def launch_overrides(layout: str) -> list[str]:
    """The Hydra overrides a verl launch needs for rows of ``layout``, for arlkit's agent loop."""
    from arlkit.integrations.verl_data import AGENT_LOOP_CONFIG

    lines = [f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}"]
    if layout == "step":
        lines.append("trainer.use_v1=true trainer.v1.trainer_mode=arlkit   # one row per step; GiGPO, EMPG need it")
    return lines
