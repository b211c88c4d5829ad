"""verl training data from arlkit's environments: one parquet row per task group (``arlkit verl data``).

verl samples ``actor_rollout_ref.rollout.n`` trajectories per dataset row, so a row is a group. Each
row holds the task, its turn budget and its seeds, and the first prompt the engine would show
(announced or hidden budget, the chosen prompt profile). With ``budgetmix`` every group draws one
budget uniformly from the candidates with :func:`arlkit.train.budgetmix.sample_group_budgets`, as
``arlkit train`` does per step. The file passes ``arlkit budgetmix audit FILE.parquet``
(:func:`audit_data`).

Columns (verl's RL dataset layout): ``data_source`` (``arlkit/ENV``), ``agent_name``
(:data:`AGENT_NAME`), ``prompt`` (chat messages), ``ability``, ``reward_model`` and ``extra_info``.
``extra_info`` carries everything the agent loop (:mod:`arlkit.integrations.verl_agent`) needs to play
the episode, read back with :func:`row_episode`: ``env``, ``env_args`` (JSON), ``split``, ``task_id``,
``task_index`` (into the split's first ``tasks`` tasks), ``group``, ``budget``, ``budget_spec``,
``t_max``, ``job_seed`` (sample j of the group gets the seeds of ``arlkit train``'s job j), ``env_seed``
and ``policy_seed`` (sample 0's), the prompt's ``budget_mode``, ``history``, ``counters``, ``profile``,
the ``layout`` of the outputs and the ``reward`` settings (JSON). Writing parquet needs ``pyarrow``
(the ``verl`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.algos import RewardConfig
from arlkit.budgets import Budget
from arlkit.envs import make
from arlkit.integrations.verl_steps import LAYOUTS
from arlkit.rollout.engine import Job, make_jobs
from arlkit.rollout.prompts import PromptConfig
from arlkit.rollout.seeds import derive_seed
from arlkit.rollout.turns import next_request, start_trajectory
from arlkit.train.budgetmix import AuditCheck, AuditReport, budget_checks, sample_group_budgets

__all__ = ["AGENT_LOOP_CONFIG", "AGENT_NAME", "RowEpisode", "audit_data", "build_rows", "check_layout", "read_rows",
           "row_episode", "task_pool", "write_rows"]

AGENT_NAME = "arlkit_agent"
"""The agent loop the rows ask for (``agent_name``)."""
AGENT_LOOP_CONFIG = Path(str(files("arlkit.integrations").joinpath("verl_agent_loops.yaml")))
"""The YAML naming that loop, for verl's ``actor_rollout_ref.rollout.agent.agent_loop_config_path``."""


@dataclass(frozen=True)
class RowEpisode:
    """One data row's episode, as the agent loop plays it (:func:`row_episode`)."""

    env: str
    env_args: dict[str, Any]
    split: str
    tasks: int
    task_index: int
    task_id: str
    group: int
    budget: int
    budget_spec: str
    t_max: int
    job_seed: int
    env_seed: int
    policy_seed: int
    prompt: PromptConfig
    layout: str = "step"
    reward: RewardConfig = field(default_factory=RewardConfig)

    @property
    def env_key(self) -> tuple[str, str, str, int]:
        """What identifies the environment and its task pool."""
        return self.env, json.dumps(self.env_args, sort_keys=True), self.split, self.tasks

    def job(self, task: Any, sample: int) -> Job:
        """Sample ``sample`` of the group: the seeds ``arlkit train`` gives its job ``sample``."""
        return make_jobs([task], sample + 1, self.budget, self.job_seed, group=f"g{self.group}")[sample]


def row_episode(info: Mapping[str, Any]) -> RowEpisode:
    """The episode of a row's ``extra_info`` (raises ``ValueError`` naming what is missing or wrong)."""
    try:
        reward = json.loads(info["reward"]) if info.get("reward") else {}
        history = info.get("history")
        episode = RowEpisode(
            env=str(info["env"]), env_args=json.loads(info["env_args"]), split=str(info["split"]),
            tasks=int(info["tasks"]), task_index=int(info["task_index"]), task_id=str(info["task_id"]),
            group=int(info["group"]), budget=int(info["budget"]), budget_spec=str(info["budget_spec"]),
            t_max=int(info["t_max"]), job_seed=int(info["job_seed"]),
            env_seed=int(info["env_seed"]), policy_seed=int(info["policy_seed"]),
            prompt=PromptConfig(info["budget_mode"], None if history is None else int(history), info["counters"],
                                info["profile"]),
            layout=str(info.get("layout") or "step"), reward=RewardConfig(**reward),
        )
    except KeyError as exc:
        raise ValueError(f"the row's extra_info lacks {exc.args[0]!r}: write it with `arlkit verl data`") from None
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the row's extra_info is not arlkit's: {exc}") from None
    check_layout(episode.layout, episode.prompt)
    return episode


def check_layout(layout: str, prompt: PromptConfig) -> None:
    """Raise ``ValueError`` unless ``layout`` can show ``prompt``: the trajectory layout carries one
    token stream, so every earlier message must stay as it was (the full history, and budget counters
    that never rewrite the system prompt)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout != "trajectory":
        return
    if prompt.history is not None:
        raise ValueError("the trajectory layout keeps the whole conversation: use history=None, or the step layout")
    if prompt.profile == "rt" and prompt.budget_mode == "announced" and prompt.counters == "system":
        raise ValueError("the trajectory layout cannot rewrite the system prompt's turn counters each turn: use "
                         "counters=observation (--counters observation), the compact profile, or the step layout")


def _first_messages(env: Any, task: Any, *, budget: int, env_seed: int, policy_seed: int,
                    prompt: PromptConfig) -> list[dict[str, str]]:
    """The first request's messages, exactly as the rollout engine builds them (``env`` is reset)."""
    live = start_trajectory(env, task, sample=0, budget=budget, env_seed=env_seed,
                            policy_seed=policy_seed, group=None, policy_name="verl", prompt=prompt)
    return [dict(m) for m in next_request(live).messages]


def build_rows(env_name: str, env_args: dict[str, Any] | None = None, *, budget: str = "budgetmix", groups: int = 256,
               split: str = "train", tasks: int = 100, seed: int = 0, prompt: PromptConfig | None = None,
               layout: str = "step", reward: RewardConfig | None = None) -> list[dict[str, Any]]:
    """``groups`` rows: tasks drawn uniformly (with replacement when ``groups > tasks``) from the
    split's first ``tasks`` tasks, one budget per group; ``layout`` and ``reward`` tell the agent loop
    how to return its outputs and score them."""
    env_args, prompt, reward = dict(env_args or {}), prompt or PromptConfig(), reward or RewardConfig()
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    check_layout(layout, prompt)
    probe = make(env_name, **env_args)
    pool = task_pool(probe, split, tasks)
    candidates = list(Budget.parse(budget).turns(probe.t_max))
    rng = np.random.default_rng([seed, 8191])
    picks = rng.choice(len(pool), size=groups, replace=groups > len(pool))
    budgets = sample_group_budgets(candidates, groups, rng)
    rows = []
    for g, (i, b) in enumerate(zip(picks, budgets, strict=True)):
        task = pool[int(i)]
        job_seed = derive_seed(seed, "verl-data", g)
        job = make_jobs([task], 1, b, job_seed, group=f"g{g}")[0]
        rows.append({
            "data_source": f"arlkit/{env_name}",
            "agent_name": AGENT_NAME,
            "prompt": _first_messages(probe, task, budget=b, env_seed=job.env_seed, policy_seed=job.policy_seed,
                                      prompt=prompt),
            "ability": "agent",
            "reward_model": {"style": "arlkit_env", "ground_truth": ""},
            "extra_info": {
                "env": env_name, "env_args": json.dumps(env_args, sort_keys=True), "split": split,
                "task_id": task.task_id, "task_index": int(i), "tasks": len(pool), "group": g, "index": g,
                "budget": int(b),
                "budget_spec": budget, "t_max": int(probe.t_max), "job_seed": job_seed, "env_seed": job.env_seed,
                "policy_seed": job.policy_seed, "budget_mode": prompt.budget_mode, "history": prompt.history,
                "counters": prompt.counters, "profile": prompt.profile, "layout": layout,
                "reward": json.dumps(asdict(reward), sort_keys=True),
            },
        })
    return rows


def task_pool(env: Any, split: str, n: int) -> list[Any]:
    """The split's first ``n`` tasks (the pool a row's ``task_index`` points into)."""
    try:
        return list(env.tasks(split, n))
    except ValueError as exc:  # a fixed task set smaller than n: its message says how many exist
        raise ValueError(f"{exc}; ask for fewer tasks (--tasks)") from None


def write_rows(rows: Sequence[dict[str, Any]], out: str | Path) -> Path:
    """Write ``rows`` as parquet (atomically: a temporary sibling, then renamed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    pq.write_table(pa.Table.from_pylist(list(rows)), partial)
    partial.replace(out)
    return out


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def audit_data(path: str | Path, *, alpha: float = 0.01) -> AuditReport:
    """The BudgetMix audit of a data file: one budget per group, budgets allowed and (BudgetMix)
    uniform, and every row's prompt exactly the engine's first prompt for its task, seeds and budget."""
    rows = read_rows(path)
    if not rows:
        raise ValueError(f"{path} holds no rows")
    episodes = [row_episode(r["extra_info"]) for r in rows]
    mode, t_max = episodes[0].budget_spec, episodes[0].t_max
    groups = [e.group for e in episodes]
    checks = [AuditCheck("one budget per group", len(set(groups)) == len(groups),
                         f"{len(rows)} rows, {len(set(groups))} distinct groups, one budget each")]
    checks += budget_checks(mode, t_max, [e.budget for e in episodes], alpha=alpha)
    wrong = []
    cache: dict[tuple[str, str, str, int], tuple[Any, list[Any]]] = {}  # -> (environment, task pool)
    for row, e in zip(rows, episodes, strict=True):
        if e.env_key not in cache:
            env = make(e.env, **e.env_args)
            cache[e.env_key] = env, task_pool(env, e.split, e.tasks)
        env, pool = cache[e.env_key]
        task = pool[e.task_index]
        expected = _first_messages(env, task, budget=e.budget, env_seed=e.env_seed, policy_seed=e.policy_seed,
                                   prompt=e.prompt)
        if task.task_id != e.task_id or row["prompt"] != expected:
            wrong.append(e.group)
    checks.append(AuditCheck(
        "prompts announced the sampled budget", not wrong,
        f"{len(rows)} first prompts rebuilt and compared" + (f"; first mismatch: group {wrong[0]}" if wrong else ""),
    ))
    return AuditReport(Path(path), mode, t_max, len(rows), tuple(checks))
