"""Reading run directories for the analyses, and refusing mixtures that cannot be compared.

A run directory is what ``arlkit eval`` writes: ``run.json`` (the config) and ``trajectories.jsonl``.
The analyses need the environment config (to rebuild tasks and replay trajectories), the budget
mode and history window (to rebuild the exact prompts) and the trajectories. A directory without
``run.json`` is accepted when its trajectories name one environment; its tasks must then be listed
in ``tasks.jsonl`` (one ``{"task_id": ..., "payload": {...}}`` per line), which any producer of
trajectories (the trainer, a user script) can write next to them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arlkit.config import ConfigError, config_to_dict
from arlkit.envs import Env, Task, env_config, make
from arlkit.rollout.records import Trajectory, read_trajectories

__all__ = [
    "AnalysisInputError",
    "PairedRuns",
    "RunData",
    "check_compatible",
    "load_run",
    "refuse_native_tool_calls",
    "paired_runs",
    "pick_policy",
    "resolve_tasks",
]


class AnalysisInputError(ConfigError):
    """Inputs an analysis cannot use (mixed environments, unknown policy label, missing files)."""


@dataclass
class RunData:
    """One run directory loaded for analysis.

    Attributes:
        path: the directory.
        env: environment name.
        env_args: the full, typed environment config (``make(env, **env_args)`` rebuilds it).
        budget_mode: ``announced`` or ``hidden``.
        history: the prompt's history window (``None``: full chat).
        split: the task split of the run (``None`` when unknown).
        n_tasks: how many tasks of ``split`` the run used (``None`` when unknown).
        trajectories: every trajectory of the run.
        config: the raw ``run.json`` (empty when absent).
        counters: where announced prompts put the turn counters (``system`` or ``observation``).
        profile: the prompt profile (``rt`` or ``compact``; :class:`~arlkit.rollout.prompts.PromptConfig`).
    """

    path: Path
    env: str
    env_args: dict[str, Any]
    budget_mode: str
    history: int | None
    split: str | None
    n_tasks: int | None
    trajectories: list[Trajectory]
    config: dict[str, Any] = field(default_factory=dict)
    counters: str = "system"
    profile: str = "rt"

    @property
    def name(self) -> str:
        """A short label (the directory name)."""
        return self.path.name or str(self.path)

    def policies(self) -> list[str]:
        """Policy labels found in the trajectories, in order of appearance."""
        return list(dict.fromkeys(t.policy for t in self.trajectories))

    def budgets(self) -> list[int]:
        """Distinct trajectory budgets, sorted."""
        return sorted({t.budget for t in self.trajectories})

    def make_env(self) -> Env:
        """A fresh environment with the run's config."""
        return make(self.env, **self.env_args)


def _typed_env_args(env: str, values: dict[str, Any]) -> dict[str, Any]:
    return config_to_dict(env_config(env, values))


def load_run(path: str | Path) -> RunData:
    """Load a run directory (``run.json`` + ``trajectories.jsonl``). Raises :class:`AnalysisInputError`."""
    path = Path(path)
    if path.is_file() and path.name.endswith(".jsonl"):
        path = path.parent
    traj_path = path / "trajectories.jsonl"
    if not traj_path.exists():
        raise AnalysisInputError(f"{path} is not a run directory: no trajectories.jsonl there")
    trajectories = read_trajectories(traj_path)
    if not trajectories:
        raise AnalysisInputError(f"{traj_path} holds no trajectories")
    config: dict[str, Any] = {}
    run_json = path / "run.json"
    if run_json.exists():
        try:
            config = json.loads(run_json.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise AnalysisInputError(f"{run_json} is not valid JSON") from None
    envs = sorted({t.env for t in trajectories})
    spec = config.get("env") if isinstance(config.get("env"), dict) else {}
    prompt = config.get("prompt") if isinstance(config.get("prompt"), dict) else {}
    env = str(spec.get("name") or (envs[0] if len(envs) == 1 else ""))
    if not env or (envs and envs != [env]):
        raise AnalysisInputError(f"{path}: trajectories come from several environments {envs}; split them into runs")
    modes = sorted({t.budget_mode for t in trajectories})
    if len(modes) != 1:
        raise AnalysisInputError(f"{path}: trajectories mix budget modes {modes}")
    # one order whatever order the trajectories finished in (a resumed or concurrent run writes another):
    # the analyses' random draws then depend on the trajectories alone
    listed = {spec: i for i, spec in enumerate(config.get("policies") or []) if isinstance(spec, str)}
    trajectories.sort(key=lambda t: (listed.get(t.policy, len(listed)), t.policy, t.budget, t.task_id, t.sample))
    return RunData(
        path=path,
        env=env,
        env_args=_typed_env_args(env, dict(spec.get("args") or {})),
        budget_mode=modes[0],
        history=prompt.get("history"),
        split=config.get("split"),
        n_tasks=config.get("tasks") if isinstance(config.get("tasks"), int) else None,
        trajectories=trajectories,
        config=config,
        counters=str(prompt.get("counters") or "system"),
        profile=str(prompt.get("profile") or "rt"),
    )


def refuse_native_tool_calls(runs: Sequence[RunData]) -> None:
    """Refuse runs whose policies called tools natively (``--tool-calls native``): the analyses that
    rebuild prompts rebuild text-mode ones and would replay such a run with prompts it never saw."""
    for run in runs:
        if (run.config.get("prompt") or {}).get("tool_calls") == "native":
            raise AnalysisInputError(f"{run.path}: its policies called tools natively (--tool-calls native); this "
                                     "analysis rebuilds text-mode prompts and cannot replay it")


def check_compatible(runs: Sequence[RunData], *, same_budgets: bool = True) -> None:
    """Refuse runs that cannot be analysed together: different environments or environment configs,
    different budget modes, or (with ``same_budgets``) different sets of budgets."""
    if not runs:
        raise AnalysisInputError("give at least one run directory")
    first = runs[0]
    for run in runs[1:]:
        if run.env != first.env:
            raise AnalysisInputError(
                f"runs mix environments: {first.path} is {first.env}, {run.path} is {run.env}; analyse one environment at a time"
            )
        if run.env_args != first.env_args:
            diff = sorted(k for k in set(run.env_args) | set(first.env_args) if run.env_args.get(k) != first.env_args.get(k))
            raise AnalysisInputError(
                f"runs use different {first.env} configs ({', '.join(diff)} differ between {first.path} and {run.path})"
            )
        if run.budget_mode != first.budget_mode:
            raise AnalysisInputError(
                f"runs mix budget modes: {first.path} is {first.budget_mode}, {run.path} is {run.budget_mode}"
            )
        if run.counters != first.counters:
            raise AnalysisInputError(
                f"runs put the turn counters in different places: {first.path} in the {first.counters} prompt, "
                f"{run.path} in the {run.counters} prompt"
            )
        if run.profile != first.profile:
            raise AnalysisInputError(
                f"runs use different prompt profiles: {first.path} {first.profile}, {run.path} {run.profile}"
            )
        if same_budgets and run.budgets() != first.budgets():
            raise AnalysisInputError(
                f"incompatible budgets: {first.path} ran T = {first.budgets()}, {run.path} ran T = {run.budgets()}; "
                "compare runs with the same budgets (or select one with --budget)"
            )


def pick_policy(run: RunData, label: str | None, spec: str | None, *, role: str) -> list[Trajectory]:
    """The trajectories of one policy in ``run``: the given ``label``, else the run's only policy,
    else the policy whose label equals ``spec``."""
    labels = run.policies()
    if label is not None:
        chosen = label
    elif len(labels) == 1:
        chosen = labels[0]
    elif spec is not None and spec in labels:
        chosen = spec
    else:
        raise AnalysisInputError(
            f"{run.path} holds several policies ({', '.join(labels)}); say which is the {role} with --{role}-label"
        )
    if chosen not in labels:
        raise AnalysisInputError(f"{run.path} has no trajectories of policy {chosen!r}; it has {', '.join(labels)}")
    return [t for t in run.trajectories if t.policy == chosen]


def _tasks_from_jsonl(path: Path) -> dict[str, Task]:
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                data = json.loads(line)
                out[str(data["task_id"])] = Task(str(data["task_id"]), dict(data.get("payload") or {}))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise AnalysisInputError(f"{path}:{number}: expected {{\"task_id\": ..., \"payload\": {{...}}}}") from None
    return out


def resolve_tasks(run: RunData, task_ids: Sequence[str] | None = None) -> dict[str, Task]:
    """The tasks of ``run`` by id (``task_ids``: those needed, default all in its trajectories).

    From ``tasks.jsonl`` when present, else rebuilt from the environment's task stream with the
    run's split and task count.
    """
    needed = set(task_ids if task_ids is not None else (t.task_id for t in run.trajectories))
    found: dict[str, Task] = {}
    listing = run.path / "tasks.jsonl"
    if listing.exists():
        found.update(_tasks_from_jsonl(listing))
    if needed - set(found) and run.n_tasks:
        env = run.make_env()
        splits = [run.split] if run.split else ["test", "train"]
        for split in splits:
            try:
                found.update({t.task_id: t for t in env.tasks(str(split), run.n_tasks)})
            except ValueError:
                continue
            if not needed - set(found):
                break
    missing = sorted(needed - set(found))
    if missing:
        raise AnalysisInputError(
            f"{run.path}: cannot rebuild {len(missing)} task(s) (e.g. {missing[0]}); the run needs a run.json with "
            "split and tasks, or a tasks.jsonl listing them"
        )
    return {tid: found[tid] for tid in needed}


@dataclass
class PairedRuns:
    """Base and RL trajectories of one environment, ready for the step-level analyses.

    Attributes:
        env: environment name.
        env_args: its typed config.
        tasks: every task the trajectories visit, by id.
        base: the base policy's trajectories.
        rl: the RL policy's trajectories.
        base_history: the base run's prompt history window.
        rl_history: the RL run's prompt history window.
        base_label: the base policy's label in its run.
        rl_label: the RL policy's label in its run.
        sources: the run directories.
        counters: where both runs' announced prompts put the turn counters.
        profile: both runs' prompt profile.
    """

    env: str
    env_args: dict[str, Any]
    tasks: dict[str, Task]
    base: list[Trajectory]
    rl: list[Trajectory]
    base_history: int | None
    rl_history: int | None
    base_label: str
    rl_label: str
    sources: list[str]
    counters: str = "system"
    profile: str = "rt"

    def make_env(self) -> Env:
        """A fresh environment with the runs' config."""
        return make(self.env, **self.env_args)


def paired_runs(
    run_dirs: Sequence[str | Path],
    *,
    base_spec: str | None = None,
    rl_spec: str | None = None,
    base_label: str | None = None,
    rl_label: str | None = None,
    budget: int | None = None,
) -> PairedRuns:
    """Load the base and RL trajectories: ``run_dirs`` is ``[BASE_RUN, RL_RUN]``, or one run holding
    both policies. Labels default to a run's only policy, else to the policy spec."""
    if not 1 <= len(run_dirs) <= 2:
        raise AnalysisInputError("give one run holding both policies, or two runs: the base run then the RL run")
    runs = [load_run(p) for p in run_dirs]
    check_compatible(runs, same_budgets=False)
    refuse_native_tool_calls(runs)
    base_run, rl_run = runs[0], runs[-1]
    if len(runs) == 1:
        labels = base_run.policies()
        base_label = base_label or (base_spec if base_spec in labels else None)
        rl_label = rl_label or (rl_spec if rl_spec in labels else None)
        if base_label is None or rl_label is None or base_label == rl_label:
            raise AnalysisInputError(
                f"{base_run.path} holds policies {', '.join(labels)}; name the base and the RL one with "
                "--base-label and --rl-label (or give two runs)"
            )
    base = pick_policy(base_run, base_label, base_spec, role="base")
    rl = pick_policy(rl_run, rl_label, rl_spec, role="rl")
    if budget is not None:
        base = [t for t in base if t.budget == budget]
        rl = [t for t in rl if t.budget == budget]
        if not base or not rl:
            raise AnalysisInputError(f"no trajectories at budget T = {budget} in one of the runs")
    base_budgets, rl_budgets = sorted({t.budget for t in base}), sorted({t.budget for t in rl})
    if base_budgets != rl_budgets:
        raise AnalysisInputError(
            f"incompatible budgets: the base trajectories ran T = {base_budgets}, the RL ones T = {rl_budgets}; "
            "compare runs with the same budgets (or pick one with --budget)"
        )
    tasks = resolve_tasks(base_run, [t.task_id for t in base])
    tasks.update(resolve_tasks(rl_run, [t.task_id for t in rl]))
    return PairedRuns(
        env=base_run.env,
        env_args=base_run.env_args,
        tasks=tasks,
        base=base,
        rl=rl,
        base_history=base_run.history,
        rl_history=rl_run.history,
        base_label=base[0].policy,
        rl_label=rl[0].policy,
        sources=[str(r.path) for r in runs],
        counters=base_run.counters, profile=base_run.profile,
    )
