"""arlkit environments as skyrl-gym environments, and SkyRL dataset rows for them.

:func:`register_envs` registers every arlkit environment in skyrl-gym's registry as
``arlkit-<name>`` (importing :mod:`arlkit.integrations.skyrl_gym` does it), so SkyRL's generator
makes them as it makes its own: ``skyrl_gym.make("arlkit-frozenlake", env_config=...,
extras=row)``, ``init(prompt)``, then ``step(reply)`` until ``done``, ``get_metrics()``, ``close()``.

:class:`SkyRLArlkitEnv` is a ``BaseTextEnv`` on :class:`~arlkit.integrations.episode.ArlkitEpisode`:
the replies are whole model replies, parsed as arlkit's engine parses them, and every observation
ends with arlkit's turn counter. The row's ``extra_info`` names the task, its split and its
announced budget (``max_turns`` is that budget); :func:`skyrl_dataset` writes such rows, each
prompt holding arlkit's budget-aware system prompt and the task's first observation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.envs import list_envs
from arlkit.integrations.episode import ArlkitEpisode
from arlkit.integrations.skyrl_gym.env import skyrl_gym_module

skyrl_gym_module()  # a missing package: one line naming the extra

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput  # noqa: E402

__all__ = ["ENV_PREFIX", "SkyRLArlkitEnv", "register_envs", "skyrl_dataset", "skyrl_id"]

ENV_PREFIX = "arlkit-"
_ENTRY_POINT = "arlkit.integrations.skyrl_gym.export:SkyRLArlkitEnv"


def skyrl_id(env_name: str) -> str:
    """The skyrl-gym id of arlkit environment ``env_name``."""
    return f"{ENV_PREFIX}{env_name}"


def _options(env_config: Any, extras: Mapping[str, Any]) -> dict[str, Any]:
    """What the row asks for: ``extra_info`` over ``extras`` over ``env_config`` (SkyRL's config
    section of the environment), keys ``task_id``, ``split``, ``n_tasks``, ``budget``, ``seed``
    and ``env_args`` (the arlkit environment's options, a mapping or its JSON text)."""
    layers: list[Mapping[str, Any]] = []
    if env_config is not None:
        layers.append(dict(env_config.items()) if hasattr(env_config, "items") else vars(env_config))
    layers.append({k: v for k, v in extras.items() if k != "extra_info"})
    info = extras.get("extra_info")
    if isinstance(info, Mapping):
        layers.append(info)
    merged: dict[str, Any] = {}
    env_args: dict[str, Any] = {}
    for layer in layers:
        merged.update({str(k): v for k, v in layer.items()})
        value = layer.get("env_args") or {}
        value = json.loads(value) if isinstance(value, str) else value
        if not isinstance(value, Mapping):
            raise ValueError(f"env_args must be a mapping of the arlkit environment's options, got {value!r}")
        env_args.update(value)
    merged["env_args"] = env_args
    return merged


class SkyRLArlkitEnv(BaseTextEnv):
    """An arlkit environment as a skyrl-gym text environment (module docstring).

    Args:
        env_config: SkyRL's config section for this id; may hold defaults of the row's keys.
        extras: the dataset row without ``prompt`` and ``env_class`` (SkyRL's generator adds
            ``max_turns``); its ``extra_info`` holds ``task_id``, ``split``, ``n_tasks``, ``budget``
            and ``env_args``.
        env_name: the arlkit environment (bound by the registration).
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None, *,
                 env_name: str = "frozenlake") -> None:
        super().__init__()
        options = _options(env_config, dict(extras or {}))
        budget = options.get("budget") or options.get("max_turns")
        self.episode = ArlkitEpisode(env_name, split=str(options.get("split") or "test"),
                                     n_tasks=options.get("n_tasks"), budget=int(budget) if budget else None,
                                     parse_replies=True, counters=True, **options["env_args"])
        self.env_name = env_name
        self.max_turns = self.episode.budget
        self.task_id = options.get("task_id")
        self._seed = options.get("seed")
        self._closed = False

    def init(self, prompt: Sequence[Mapping[str, Any]] | None = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset on the row's task (else one drawn with the row's seed): arlkit's system prompt and
        the first observation replace ``prompt``, so they always match the task and the budget."""
        rng = np.random.default_rng(None if self._seed is None else int(self._seed))
        observation, info = self.episode.reset(task=self.task_id, rng=rng)
        self.turns = 0
        messages = [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": observation}]
        return messages, {"task_id": info["task_id"], "budget": info["budget"]}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        observation, reward, terminated, truncated, info = self.episode.step(action)
        self.turns = self.episode.turns
        done = terminated or truncated
        metadata = {"success": bool(terminated and info["success"]), "valid": bool(info["valid"]),
                    "truncated": truncated, "turn": self.turns}
        observations = [] if done else [{"role": "user", "content": observation}]
        return BaseTextEnvStepOutput(observations=observations, reward=reward, done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return {"success": float(self.episode.solved), "turns": self.episode.turns}

    def close(self) -> None:
        """Close the arlkit environment (once)."""
        if not self._closed:
            self._closed = True
            self.episode.close()


def register_envs() -> list[str]:
    """Register every arlkit environment in skyrl-gym's registry as ``arlkit-<name>``; the ids."""
    skyrl_gym = skyrl_gym_module()
    ids = []
    for name in list_envs():
        if name == "skyrl-gym":
            continue  # the adapter the other way
        env_id = skyrl_id(name)
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(id=env_id, entry_point=_ENTRY_POINT, kwargs={"env_name": name})
        ids.append(env_id)
    return ids


def skyrl_dataset(env_name: str, *, split: str = "train", n: int = 64, budget: int | Sequence[int] | None = None,
                  seed: int = 0, path: str | Path | None = None, **config: Any) -> list[dict[str, Any]]:
    """SkyRL dataset rows for the first ``n`` tasks of ``split`` of ``env_name``.

    Each row has ``prompt`` (arlkit's budget-aware system prompt and the first observation),
    ``env_class`` (``arlkit-<name>``), ``reward_spec`` and ``extra_info`` (``task_id``, ``split``,
    ``n_tasks``, ``budget``, ``env_args`` as JSON text). ``budget`` is one budget or candidates,
    one drawn per row with ``seed`` (SkyRL samples a row's group together, so a group shares its
    budget, as BudgetMix wants); default the family's T_max. ``path`` (``.jsonl`` or ``.parquet``)
    also writes the rows there.
    """
    candidates = [budget] if budget is None or isinstance(budget, int) else list(budget)
    if not candidates:
        raise ValueError("budget: give at least one candidate budget")
    rng = np.random.default_rng(seed)
    episodes: dict[int | None, ArlkitEpisode] = {}
    rows = []
    try:
        for index in range(n):
            chosen = candidates[int(rng.integers(len(candidates)))]
            if chosen not in episodes:
                episodes[chosen] = ArlkitEpisode(env_name, split=split, n_tasks=n, budget=chosen, counters=True,
                                                 parse_replies=True, **config)
            episode = episodes[chosen]
            task = episode.tasks()[index]
            observation, info = episode.reset(task=task, rng=np.random.default_rng([seed, index]))
            rows.append({
                "prompt": [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": observation}],
                "env_class": skyrl_id(env_name),
                "reward_spec": {"method": "rule", "ground_truth": task.task_id},
                "extra_info": {"task_id": task.task_id, "split": split, "n_tasks": n, "budget": info["budget"],
                               "env_args": json.dumps(config, sort_keys=True), "index": index},
            })
    finally:
        for episode in episodes.values():
            episode.close()
    if path is not None:
        _write(rows, Path(path))
    return rows


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import pandas

        pandas.DataFrame(rows).to_parquet(path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        raise ValueError(f"{path}: unknown file type {path.suffix or '(none)'!r}; valid choices: .jsonl, .parquet")
