"""``arlkit eval`` as a library function: Pass@(K,T) of one or more policies on one task set.

A run directory holds ``run.json`` (the config), ``trajectories.jsonl`` (one line per finished
trajectory), ``passkt.csv``, ``summary.md`` and ``passkt.png``. Re-running the same config on the
same directory resumes: finished trajectories are kept, the rest are run, and since every
trajectory's seeds depend only on (seed, task, sample) the result is the same as an uninterrupted
run. A different config on an existing directory is refused (timeouts, retries, ``max_active`` and
``allow_errors`` may change between runs).

A trajectory ended by a policy-backend failure is not finished: it goes to ``errors.jsonl`` (a log
of every failed attempt, kept for the record), the next run of the same command retries it, and
until it succeeds the Pass@(K,T) of its policy is not computed, unless ``allow_errors`` counts it
as a failure (see docs/concepts.md, "Records and resume").
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from arlkit.config import ConfigError, EnvSpec, config_to_plain
from arlkit.budgets import EVAL_BUDGETS, Budget, resolve_budgets
from arlkit.envs import BudgetHeadroom, Env, Task, env_config, has_oracle
from arlkit.envs.capabilities import close_env, summary_notes, supports_function_calling
from arlkit.envs.registry import make
from arlkit.metrics.cost import cost_by_policy
from arlkit.metrics.finish import finish_note
from arlkit.metrics.passkt import PassRow, default_ks, pass_table
from arlkit.policies import BackendOptions, Policy, SamplingConfig, make_policy
from arlkit.report.passkt import write_eval_report
from arlkit.rundir import claim_run_dir, holds_run_dir
from arlkit.rollout.engine import EngineConfig, EngineStats, make_jobs, run_rollouts
from arlkit.rollout.prompts import PromptConfig, prompt_version
from arlkit.rollout.records import CONTEXT_LENGTH_EXCEEDED, JsonlWriter, Trajectory, read_trajectories

__all__ = ["EngineStats", "EvalConfig", "EvalResult", "check_eval_config", "run_eval"]


@dataclass(frozen=True)
class EvalConfig:
    """Everything that defines an evaluation run (``arlkit eval --config FILE.yaml``, or its flags).

    Attributes:
        env: the environment and its config overrides (``EnvSpec("frozenlake", {"size": 6})``; in
            YAML ``env: {name: frozenlake, args: {size: 6}}``).
        policies: policy specs to evaluate on identical tasks, seeds and budgets.
        tasks: number of tasks from ``split``.
        samples: trajectories per task (n); Pass@k needs k <= n.
        budgets: turn budgets, as percentages of T_max (``"25%"``), whole turns (``"10"``) or ``full``
            (:func:`arlkit.budgets.resolve_budgets`).
        prompt: how prompts are built (:class:`arlkit.rollout.PromptConfig`): ``budget_mode``
            ``announced`` (one run per budget) or ``hidden`` (one run at the largest budget, smaller
            budgets by truncation); ``history`` ``None`` for the full chat, or the number of recent
            (action, observation) pairs; ``counters``, where announced budgets show the turn
            counters: ``system`` (RT Table 2) or ``observation`` (cache-friendly).
        ks: the K values of Pass@K; ``None`` means powers of two up to ``samples``.
        split: ``train`` or ``test``.
        seed: base seed of every trajectory's environment and policy seeds and of the bootstrap.
        sampling: sampling options of LLM policies.
        backend: request timeout, retries and context window of LLM backends (only the context
            window is part of the run's identity).
        bootstrap: bootstrap resamples for the confidence intervals.
        engine: the rollout engine's bounds: trajectories alive at once (``max_active``), policy
            requests in flight (``max_concurrency``), environment steps in flight
            (``env_workers``); results do not depend on them.
        allow_errors: compute Pass@(K,T) even while trajectories ended by policy errors remain,
            counting them as failures (``summary.md`` says so); by default such a policy's table
            is left out until a re-run has retried them.
        wandb: also log the Pass@(K,T) cells to this Weights & Biases project (empty: off).
    """

    env: EnvSpec = field(default_factory=EnvSpec)
    policies: tuple[str, ...] = ("oracle",)
    tasks: int = 100
    samples: int = 8
    budgets: tuple[Budget, ...] = tuple(Budget.parse(b) for b in ("25%", "50%", "75%", "100%"))
    prompt: PromptConfig = field(default_factory=PromptConfig)
    ks: tuple[int, ...] | None = None
    split: Literal["train", "test"] = "test"
    seed: int = 0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    backend: BackendOptions = field(default_factory=BackendOptions)
    bootstrap: int = 2000
    engine: EngineConfig = field(default_factory=EngineConfig)
    allow_errors: bool = False
    wandb: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.env, EnvSpec):
            raise ValueError(f"env: expected EnvSpec(name, args), got {self.env!r}")
        if not isinstance(self.engine, EngineConfig):
            raise ValueError(f"engine: expected an EngineConfig, got {self.engine!r}")
        if not isinstance(self.prompt, PromptConfig):
            raise ValueError(f"prompt: expected a PromptConfig, got {self.prompt!r}")
        if not self.budgets:
            raise ValueError("give at least one budget")
        object.__setattr__(self, "budgets", tuple(Budget.parse(b, EVAL_BUDGETS) for b in self.budgets))
        if self.tasks < 1:
            raise ValueError(f"tasks must be >= 1, got {self.tasks}")
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if not self.policies:
            raise ValueError("give at least one policy")
        if len(set(self.policies)) != len(self.policies):
            raise ValueError("each policy may be given once")
        for k in self.ks or ():
            if not 1 <= k <= self.samples:
                raise ValueError(f"k = {k} is not between 1 and samples = {self.samples}")
        if self.bootstrap < 100:
            raise ValueError(f"bootstrap must be >= 100 resamples, got {self.bootstrap}")


@dataclass
class EvalResult:
    """What :func:`run_eval` produced.

    Attributes:
        out: the run directory.
        rows: the Pass@(K,T) grid, one row per (policy, T, k) of every policy whose table was
            computed.
        trajectories: every finished trajectory of the run.
        budgets: the budgets in turns.
        t_max: the environment's full budget.
        task_ids: the evaluated tasks, in order.
        resumed: how many trajectories were found on disk and kept.
        failed: trajectories ended by policy errors in this run: not finished, written to
            ``errors.jsonl``, retried by the next run.
        withheld: policies whose Pass@(K,T) was not computed because of ``failed`` ones.
        notes: lines about the run for ``summary.md`` (errors, context windows, cut-off replies,
            repaired text, and the environment's own: :class:`~arlkit.envs.capabilities.SummaryNotes`).
    """

    out: Path
    rows: list[PassRow]
    trajectories: list[Trajectory]
    budgets: list[int]
    t_max: int
    task_ids: list[str]
    resumed: int = 0
    failed: list[Trajectory] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Trajectories ended by a policy-backend error and not yet retried successfully."""
        return len(self.failed)

    @property
    def context_exceeded(self) -> int:
        """Finished trajectories ended because the next prompt did not fit the context window."""
        return sum(1 for t in self.trajectories if t.ended_by == CONTEXT_LENGTH_EXCEEDED)


def check_eval_config(config: EvalConfig) -> EvalConfig:
    """``config`` with its environment checked and the options given typed, before any work (an unknown
    name or option is a :class:`~arlkit.config.ConfigError`): ``run.json`` stores ``6``, not ``"6"``, and
    ``sandbox.memory_mb`` gives the whole typed ``sandbox`` section."""
    typed = env_config(config.env.name, config.env.args)
    given = dict.fromkeys(str(k).split(".")[0] for k in config.env.args)
    return dataclasses.replace(config, env=EnvSpec(config.env.name, {k: getattr(typed, k) for k in given}))


def _run_identity(config: EvalConfig) -> dict[str, Any]:
    """The parts of a config that determine results (``max_active``, ``allow_errors``, timeouts
    and retries do not)."""
    data = config_to_plain(config)
    for key in ("engine", "allow_errors", "wandb"):
        data.pop(key)
    backend = data.pop("backend")
    if backend["context_length"] is not None:  # timeouts and retries do not change results
        data["context_length"] = backend["context_length"]
    data["env"]["args"] = config_to_plain(env_config(config.env.name, config.env.args))
    data["prompt_version"] = prompt_version(config.prompt)
    return json.loads(json.dumps(data, sort_keys=True))  # the form it takes in run.json


def _per_task(env: Env, tasks: Sequence[Task], available: bool, measure: str) -> Callable[[int], np.ndarray] | None:
    """``T -> array`` of an oracle quantity (``success_probability`` or ``headroom``) per task."""
    if not available:
        return None

    def values(T: int) -> np.ndarray:
        out = []
        for task in tasks:
            env.reset(task, 0)
            out.append(getattr(env, measure)(T))
        return np.array(out, dtype=np.float64)

    return values


def _check_native_env(env: Any) -> None:
    """Native tool calls need an environment with function tools (checked before any policy is built)."""
    if not supports_function_calling(env):
        raise ConfigError(f"--tool-calls native: environment {env.name!r} has no function tools; environments "
                          "with them: bfcl (or use --tool-calls text)")


def _check_native_policies(specs: Sequence[str], policies: Sequence[Any]) -> None:
    """Native tool calls need policies that send the tools (``sends_tools``: the openai backend)."""
    unable = [spec for spec, policy in zip(specs, policies, strict=True) if not getattr(policy, "sends_tools", False)]
    if unable:
        raise ConfigError(f"--tool-calls native needs policies that send tools (openai:MODEL@URL); these do not: "
                          f"{', '.join(unable)}")


@holds_run_dir("out")
def run_eval(
    config: EvalConfig,
    out: str | Path,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    stats: EngineStats | None = None,
    on_start: Callable[[Env], None] | None = None,
) -> EvalResult:
    """Run (or resume) an evaluation into ``out`` and write its files.

    Args:
        config: the evaluation.
        out: run directory; created if needed.
        on_progress: called as ``on_progress(done, total)`` after each finished trajectory.
        stats: live engine counters to update (turns/s, requests in flight), e.g. for a progress line.
        on_start: called with the environment once it is built, before any policy (the CLI prints
            what loading its tasks did).
    """
    out = Path(out)
    probe = make(config.env.name, **config.env.args)
    if on_start:
        on_start(probe)
    budgets = resolve_budgets(config.budgets, probe.t_max)
    policies, tasks = _policies_and_tasks(config, probe)
    claim_run_dir(out, _run_identity(config))
    run_budgets = budgets if config.prompt.budget_mode == "announced" else [max(budgets)]
    kept, failed = _roll_out(config, out, policies, tasks, run_budgets, on_progress=on_progress, stats=stats)
    trajectories = read_trajectories(out / "trajectories.jsonl")
    rows, withheld = _pass_tables(config, probe, tasks, trajectories, failed, budgets)
    result = EvalResult(out, rows, trajectories, budgets, probe.t_max, [t.task_id for t in tasks], resumed=len(kept),
                        failed=failed, withheld=withheld)  # fmt: skip
    result.notes = _notes(result, config) + summary_notes(probe, tasks)  # the environment's own, after the rows
    title = (
        f"Pass@(K,T) on {config.env.name} ({len(tasks)} {config.split} tasks, {config.samples} samples each, "
        f"{config.prompt.budget_mode} budgets, T_max = {probe.t_max})"
    )
    write_eval_report(out, rows, title=title, notes=result.notes)
    close_env(probe)
    if config.wandb:
        _log_to_wandb(config, out, rows)
    return result


def _policies_and_tasks(config: EvalConfig, probe: Env) -> tuple[list[Policy], list[Task]]:
    """The policies and the evaluated tasks; with native tool calls, the environment's tools and the
    policies' ability to send them are checked first (before a served policy is contacted)."""
    native = config.prompt.tool_calls == "native"
    if native:
        _check_native_env(probe)
    policies = [make_policy(spec, config.sampling, config.backend) for spec in config.policies]
    if native:
        _check_native_policies(config.policies, policies)
    tasks = probe.tasks(config.split, config.tasks)
    if native and tasks:  # the tools can be built (bfcl: its function-calling helpers are installed)
        probe.reset(tasks[0], config.seed)
        probe.function_tools()  # type: ignore[attr-defined]
    return policies, tasks


def _roll_out(config: EvalConfig, out: Path, policies: Sequence[Policy], tasks: Sequence[Task],
              run_budgets: Sequence[int], *, on_progress: Callable[[int, int], None] | None,
              stats: EngineStats | None) -> tuple[list[Trajectory], list[Trajectory]]:
    """Every (policy, budget, task, sample) trajectory not yet in ``trajectories.jsonl``, streamed there
    as it finishes (policy errors to ``errors.jsonl``). Returns the trajectories kept from an earlier
    run and those this run ended by policy errors."""
    path, errors_path = out / "trajectories.jsonl", out / "errors.jsonl"
    kept = read_trajectories(path, repair=True)
    done = {t.key() for t in kept}
    total = len(config.policies) * len(run_budgets) * len(tasks) * config.samples
    finished = [len(done)]
    failed: list[Trajectory] = []
    if on_progress:
        on_progress(finished[0], total)

    with JsonlWriter(path) as writer, JsonlWriter(errors_path, lazy=True) as error_writer:

        def record(trajectory: Trajectory) -> None:
            if trajectory.error is not None:
                error_writer.write(trajectory)
                failed.append(trajectory)
                return
            writer.write(trajectory)
            finished[0] += 1
            if on_progress:
                on_progress(finished[0], total)

        for spec, policy in zip(config.policies, policies, strict=True):
            jobs = [job for T in run_budgets for job in make_jobs(tasks, config.samples, T, config.seed)
                    if (spec, T, job.task.task_id, job.sample) not in done]  # fmt: skip
            if jobs:
                run_rollouts(lambda: make(config.env.name, **config.env.args), jobs, policy, config.prompt,
                             engine=config.engine, stats=stats, on_finish=record, policy_name=spec)  # fmt: skip
    return kept, failed


def _pass_tables(config: EvalConfig, probe: Env, tasks: Sequence[Task], trajectories: Sequence[Trajectory],
                 failed: Sequence[Trajectory], budgets: Sequence[int]) -> tuple[list[PassRow], list[str]]:
    """Pass@(K,T) rows of every policy (with the oracle's success probabilities and the budget headroom
    where the environment has them), and the policies withheld because some of their trajectories
    ended by policy errors (unless ``allow_errors``)."""
    ks = list(config.ks) if config.ks else default_ks(config.samples)
    task_ids = [t.task_id for t in tasks]
    probs = _per_task(probe, tasks, has_oracle(probe), "success_probability")
    headroom = _per_task(probe, tasks, isinstance(probe, BudgetHeadroom), "headroom")
    rows: list[PassRow] = []
    withheld: list[str] = []
    for spec in config.policies:
        mine = [t for t in trajectories if t.policy == spec]
        errored = [t for t in failed if t.policy == spec]
        if errored and not config.allow_errors:
            withheld.append(spec)
            continue
        rows += pass_table(mine + errored, env=config.env.name, policy=spec, budget_mode=config.prompt.budget_mode,
                           budgets=list(budgets), ks=ks, t_max=probe.t_max, task_ids=task_ids,
                           success_probability=probs, headroom=headroom, resamples=config.bootstrap, seed=config.seed)
    return rows, withheld


def _log_to_wandb(config: EvalConfig, out: Path, rows: Sequence[PassRow]) -> None:
    """Each Pass@(K,T) cell as a summary value ``pass@K/T=T/POLICY`` (and its CI), plus passkt.csv as a table."""
    from arlkit.train.tracking import WandbRun

    run = WandbRun(config.wandb, out, name=out.name, config=config_to_plain(config), job_type="eval")
    values: dict[str, float] = {}
    for row in rows:
        key = f"pass@{row.k}/T={row.T}/{row.policy}"
        values |= {key: row.pass_, f"{key}/ci_low": row.ci_low, f"{key}/ci_high": row.ci_high}
    run.summary(values)
    import wandb

    with open(out / "passkt.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    run.run.log({"passkt": wandb.Table(columns=table[0], data=table[1:])})
    run.finish()


def _notes(result: EvalResult, config: EvalConfig) -> list[str]:
    """The lines ``summary.md`` gives about how the trajectories ended."""
    finished = result.trajectories
    notes = [
        f"- trajectories: {len(finished)} finished; ended by the context window (`context_length_exceeded`, "
        f"failures unless already solved): {result.context_exceeded}"
    ]
    costs = cost_by_policy(finished)
    if any(c.calls_per_turn != 1.0 or c.tokens_per_turn is not None for c in costs.values()):
        parts = [f"`{p}`: {c.calls_per_turn:.2f} calls, "
                 + (f"{c.tokens_per_turn:,.0f} tokens" if c.tokens_per_turn is not None else "tokens not reported")
                 for p, c in sorted(costs.items())]
        notes.append("- cost per turn (backend calls; prompt + completion tokens where the backend counts them): "
                     + "; ".join(parts))
    cut_off = finish_note(finished)
    if cut_off:
        notes.append(cut_off)
    replaced = sum(t.replaced_code_points for t in finished + result.failed)
    if replaced:
        notes.append(f"- text repaired: {replaced} code points that are not valid UTF-8 (lone surrogates) were "
                     "replaced by U+FFFD in the records")
    if result.failed:
        notes.append(f"- **{result.errors} trajectories ended by policy errors** (logged in errors.jsonl); "
                     "re-run the same command to retry them")
        if config.allow_errors:
            notes.append("- --allow-errors: Pass@(K,T) counts the trajectories ended by policy errors as failures "
                         "(unless solved before the error)")
        else:
            notes.append(f"- Pass@(K,T) not computed for {', '.join(result.withheld)} while its errored trajectories "
                         "remain (re-run to retry them, or pass --allow-errors to count them as failures)")
    return notes
