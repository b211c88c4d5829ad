"""verl training data from arlkit's environments: one parquet row per task group (``arlkit verl data``).

verl samples ``actor_rollout_ref.rollout.n`` trajectories per dataset row, so a row is a group. Each
row holds the task, its turn budget and its seeds, and the first prompt the engine would show
(announced or hidden budget, the chosen prompt profile). With ``budgetmix`` every group draws one
budget uniformly from the candidates with :func:`arlkit.train.budgetmix.sample_group_budgets`, as
``arlkit train`` does per step. The file passes ``arlkit budgetmix audit FILE.parquet``
(:func:`audit_data`).

Columns (verl's RL dataset layout): ``data_source`` (``arlkit/ENV``), ``agent_name``
(:data:`AGENT_NAME`), ``prompt`` (chat messages), ``ability``, ``reward_model`` and ``extra_info``.
``extra_info`` carries everything an agent loop needs to replay the episode: ``env``, ``env_args``
(JSON), ``split``, ``task_id``, ``task_index`` (into the split's first ``tasks`` tasks), ``group``, ``budget``, ``budget_spec``, ``t_max``,
``env_seed``, ``policy_seed``, and the prompt's ``budget_mode``, ``history``, ``counters``, ``profile``.
Writing parquet needs ``pyarrow`` (the ``verl`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.budgets import TRAIN_BUDGETS, resolve_budget
from arlkit.envs import make
from arlkit.rollout.engine import make_jobs
from arlkit.rollout.prompts import PromptConfig
from arlkit.rollout.seeds import derive_seed
from arlkit.rollout.turns import next_request, start_trajectory
from arlkit.train.budgetmix import AuditCheck, AuditReport, budget_checks, sample_group_budgets

__all__ = ["AGENT_NAME", "audit_data", "build_rows", "read_rows", "write_rows"]

AGENT_NAME = "arlkit_agent"
"""The agent loop the rows ask for (``agent_name``)."""


def _first_messages(env: Any, task: Any, *, budget: int, env_seed: int, policy_seed: int,
                    prompt: PromptConfig) -> list[dict[str, str]]:
    """The first request's messages, exactly as the rollout engine builds them (``env`` is reset)."""
    live = start_trajectory(env, task, sample=0, budget=budget, env_seed=env_seed,
                            policy_seed=policy_seed, group=None, policy_name="verl", prompt=prompt)
    return [dict(m) for m in next_request(live).messages]


def build_rows(env_name: str, env_args: dict[str, Any] | None = None, *, budget: str = "budgetmix", groups: int = 256,
               split: str = "train", tasks: int = 100, seed: int = 0,
               prompt: PromptConfig | None = None) -> list[dict[str, Any]]:
    """``groups`` rows: tasks drawn uniformly (with replacement when ``groups > tasks``) from the
    split's first ``tasks`` tasks, one budget per group."""
    env_args, prompt = dict(env_args or {}), prompt or PromptConfig()
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    probe = make(env_name, **env_args)
    pool = _pool(probe, split, tasks)
    candidates = list(resolve_budget(budget, probe.t_max, TRAIN_BUDGETS))
    rng = np.random.default_rng([seed, 8191])
    picks = rng.choice(len(pool), size=groups, replace=groups > len(pool))
    budgets = sample_group_budgets(candidates, groups, rng)
    rows = []
    for g, (i, b) in enumerate(zip(picks, budgets, strict=True)):
        task = pool[int(i)]
        job = make_jobs([task], 1, b, derive_seed(seed, "verl-data", g), group=f"g{g}")[0]
        rows.append({
            "data_source": f"arlkit/{env_name}",
            "agent_name": AGENT_NAME,
            "prompt": _first_messages(probe, task, budget=b, env_seed=job.env_seed, policy_seed=job.policy_seed,
                                      prompt=prompt),
            "ability": "agent",
            "reward_model": {"style": "arlkit_env", "ground_truth": ""},
            "extra_info": {
                "env": env_name, "env_args": json.dumps(env_args, sort_keys=True), "split": split,
                "task_id": task.task_id, "task_index": int(i), "tasks": len(pool), "group": g, "index": g, "budget": int(b),
                "budget_spec": budget, "t_max": int(probe.t_max), "env_seed": job.env_seed,
                "policy_seed": job.policy_seed, "budget_mode": prompt.budget_mode, "history": prompt.history,
                "counters": prompt.counters, "profile": prompt.profile,
            },
        })
    return rows


def _pool(env: Any, split: str, n: int) -> list[Any]:
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
    info = [r["extra_info"] for r in rows]
    mode, t_max = str(info[0]["budget_spec"]), int(info[0]["t_max"])
    groups = [i["group"] for i in info]
    checks = [AuditCheck("one budget per group", len(set(groups)) == len(groups),
                         f"{len(rows)} rows, {len(set(groups))} distinct groups, one budget each")]
    checks += budget_checks(mode, t_max, [int(i["budget"]) for i in info], alpha=alpha)
    wrong = []
    cache: dict[tuple[str, str, str, int], tuple[Any, list[Any]]] = {}  # -> (environment, task pool)
    for row, i in zip(rows, info, strict=True):
        key = (i["env"], i["env_args"], i["split"], int(i["tasks"]))
        if key not in cache:
            env = make(i["env"], **json.loads(i["env_args"]))
            cache[key] = env, _pool(env, i["split"], int(i["tasks"]))
        env, pool = cache[key]
        task = pool[int(i["task_index"])]
        prompt = PromptConfig(i["budget_mode"], i["history"], i["counters"], i["profile"])
        expected = _first_messages(env, task, budget=int(i["budget"]), env_seed=int(i["env_seed"]),
                                   policy_seed=int(i["policy_seed"]), prompt=prompt)
        if task.task_id != i["task_id"] or row["prompt"] != expected:
            wrong.append(i["group"])
    checks.append(AuditCheck(
        "prompts announced the sampled budget", not wrong,
        f"{len(rows)} first prompts rebuilt and compared" + (f"; first mismatch: group {wrong[0]}" if wrong else ""),
    ))
    return AuditReport(Path(path), mode, t_max, len(rows), tuple(checks))
