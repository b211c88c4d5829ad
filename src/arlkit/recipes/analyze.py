"""One call per analysis: load the runs, run it, write its files (what ``arlkit analyze`` does).

Policies are given as spec strings (``noisy-oracle:0.6``, ``hf:PATH``) or as policy objects. Each
function returns the analysis result; with ``out`` it also writes CSV + PNG + markdown + JSON
there (see :mod:`arlkit.report.analysis_files`). When the environment lacks a capability the analysis
needs, the function writes a ``<kind>.md``/``<kind>.json`` saying it was skipped and raises
:class:`~arlkit.envs.capabilities.MissingCapability`.
"""

from __future__ import annotations

import csv
import importlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.report import analysis_files as writers
from arlkit.envs.capabilities import ActionScorer, MissingCapability, StepQuality, has_snapshots, has_step_quality
from arlkit.analysis.depth import DepthBin, depth_profile
from arlkit.analysis.errors import ErrorsConfig, ErrorsResult, error_states_analysis
from arlkit.analysis.flows import LoopSummary, action_flows, loop_stats, summarize_loops
from arlkit.analysis.likelihood import LikelihoodConfig, LikelihoodResult, likelihood_analysis
from arlkit.report.outputs import write_json, write_text
from arlkit.analysis.process import JudgeAgreement, LLMJudge, judge_agreement
from arlkit.analysis.runs import (
    AnalysisInputError, PairedRuns, check_compatible, load_run, paired_runs, refuse_native_tool_calls, resolve_tasks,
)
from arlkit.analysis.sampling import sample_actions
from arlkit.analysis.states import ReplayError, equal_pool
from arlkit.analysis.steps import StepsConfig, StepsResult, matched_states
from arlkit.config import ConfigError
from arlkit.envs import ActionSpace
from arlkit.policies import Policy, SamplingConfig, ScoringPolicy, list_policy_kinds, make_policy
from arlkit.rundir import hold_run_dir

__all__ = [
    "ErrorsConfig",
    "LikelihoodConfig",
    "MissingCapability",
    "StepsConfig",
    "analysis_run",
    "analyze_depth",
    "analyze_errors",
    "analyze_flows",
    "analyze_judge",
    "analyze_likelihood",
    "analyze_run",
    "analyze_steps",
    "write_skipped",
]

PolicyLike = str | Policy


def _policy(policy: PolicyLike, sampling: SamplingConfig | None) -> tuple[Policy, str]:
    if isinstance(policy, str):
        return make_policy(policy, sampling), policy
    return policy, str(getattr(policy, "name", type(policy).__name__))


def _meta(pair: PairedRuns, base: str, rl: str, judge: str | None = None) -> dict[str, Any]:
    env = pair.make_env()
    quality = (
        "the environment's action_quality(action, remaining)" if isinstance(env, StepQuality)
        else "the environment's quality(action) (code: hidden-test pass rate)" if isinstance(env, ActionScorer)
        else "Q*_h(s, a) from the oracle (gamma 0.95, h = remaining turns)" if has_step_quality(env)
        else f"the LLM judge {judge}'s 0-10 score / 10 (docs/metrics.md, Process signals; a judge, not an oracle)" if judge
        else "unavailable"
    )  # fmt: skip
    meta = {"env": pair.env, "base": base, "rl": rl, "runs": pair.sources, "quality": quality,
            "base_label": pair.base_label, "rl_label": pair.rl_label}  # fmt: skip
    if judge and not has_step_quality(env):
        meta["judge"] = judge
    return meta


def _judge(judge: PolicyLike | None, sampling: SamplingConfig | None, seed: int) -> tuple[LLMJudge | None, str | None]:
    """The LLM judge scoring actions where the environment cannot, and its name."""
    if judge is None:
        return None, None
    policy, name = _policy(judge, sampling)
    return LLMJudge(policy, seed=seed), name


@contextmanager
def analysis_run(out: str | Path) -> Iterator[None]:
    """One analysis writing ``out`` at a time (:func:`~arlkit.rundir.hold_run_dir`, what ``arlkit analyze``
    runs each analysis in); runs whose states cannot be rebuilt by replaying them are bad input
    (:class:`~arlkit.config.ConfigError`)."""
    try:
        with hold_run_dir(out):
            yield
    except ReplayError as exc:
        raise ConfigError(f"cannot rebuild the states of the runs: {exc}") from None


def write_skipped(out: str | Path, kind: str, reason: str, meta: dict[str, Any] | None = None) -> None:
    """``<kind>.md`` and ``<kind>.json`` saying the analysis was skipped and why."""
    out = Path(out)
    write_json(out / f"{kind}.json", kind, {**(meta or {}), "skipped": reason})
    write_text(out / f"{kind}.md", f"# {kind}: skipped\n\n{reason}\n")


def analyze_steps(
    run_dirs: Sequence[str | Path],
    base: PolicyLike,
    rl: PolicyLike,
    *,
    out: str | Path | None = None,
    config: StepsConfig | None = None,
    base_label: str | None = None,
    rl_label: str | None = None,
    budget: int | None = None,
    sampling: SamplingConfig | None = None,
    judge: PolicyLike | None = None,
) -> StepsResult:
    """Matched-state action quality (docs/metrics.md#matched-states); ``run_dirs`` = ``[BASE_RUN, RL_RUN]`` or one run
    holding both policies. ``judge`` (a policy spec) scores the actions where the environment cannot."""
    config = config or StepsConfig()
    base_policy, base_name = _policy(base, sampling)
    rl_policy, rl_name = _policy(rl, sampling)
    scorer, judge_name = _judge(judge, sampling, config.seed)
    pair = paired_runs(run_dirs, base_spec=base_name, rl_spec=rl_name, base_label=base_label, rl_label=rl_label, budget=budget)
    meta = _meta(pair, base_name, rl_name, judge_name)
    try:
        result = matched_states(base_policy, rl_policy, pair.make_env, pair.tasks, pair.base, pair.rl, config,
                                base_history=pair.base_history, rl_history=pair.rl_history,
                                counters=pair.counters, profile=pair.profile, judge=scorer)  # fmt: skip
    except MissingCapability as exc:
        if out is not None:
            write_skipped(out, "steps", str(exc), meta)
        raise
    if out is not None:
        writers.write_steps(result, Path(out), meta)
    return result


def _depth_from_steps_csv(path: Path) -> tuple[list[float], list[float], list[float], list[str]]:
    if not path.exists():
        raise AnalysisInputError(f"{path} not found; run `arlkit analyze steps` first or give runs and policies")
    with open(path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))

    def num(x: str) -> float:
        return float(x) if x else float("nan")

    return ([float(r["depth"]) for r in rows], [num(r["base_quality"]) for r in rows],
            [num(r["rl_quality"]) for r in rows], [r["task_id"] for r in rows])  # fmt: skip


def analyze_depth(
    run_dirs: Sequence[str | Path] = (),
    base: PolicyLike | None = None,
    rl: PolicyLike | None = None,
    *,
    out: str | Path | None = None,
    steps_dir: str | Path | None = None,
    bins: int = 5,
    config: StepsConfig | None = None,
    base_label: str | None = None,
    rl_label: str | None = None,
    budget: int | None = None,
    sampling: SamplingConfig | None = None,
    judge: PolicyLike | None = None,
) -> list[DepthBin]:
    """RL − base quality by depth (docs/metrics.md#depth-profile), from an earlier ``steps.csv`` (``steps_dir``) or by
    running the matched-state analysis on ``run_dirs`` with ``base`` and ``rl``."""
    config = config or StepsConfig()
    if steps_dir is not None:
        depths, b, r, tasks = _depth_from_steps_csv(Path(steps_dir) / "steps.csv")
        meta: dict[str, Any] = {"source": str(steps_dir)}
        previous = Path(steps_dir) / "steps.json"
        if previous.exists():
            data = json.loads(previous.read_text(encoding="utf-8"))
            meta.update({k: data[k] for k in ("env", "base", "rl", "runs", "quality", "judge") if k in data})
    else:
        if base is None or rl is None:
            raise AnalysisInputError("depth needs --steps DIR (an earlier steps analysis) or runs with --base and --rl")
        base_policy, base_name = _policy(base, sampling)
        rl_policy, rl_name = _policy(rl, sampling)
        scorer, judge_name = _judge(judge, sampling, config.seed)
        pair = paired_runs(run_dirs, base_spec=base_name, rl_spec=rl_name, base_label=base_label, rl_label=rl_label,
                           budget=budget)  # fmt: skip
        meta = _meta(pair, base_name, rl_name, judge_name)
        try:
            rows = matched_states(base_policy, rl_policy, pair.make_env, pair.tasks, pair.base, pair.rl, config,
                                  base_history=pair.base_history, rl_history=pair.rl_history,
                                  counters=pair.counters, profile=pair.profile, judge=scorer).rows  # fmt: skip
        except MissingCapability as exc:
            if out is not None:
                write_skipped(out, "depth", str(exc), meta)
            raise
        depths, b, r = [x.depth for x in rows], [x.base_quality for x in rows], [x.rl_quality for x in rows]
        tasks = [x.task_id for x in rows]
    profile = depth_profile(depths, b, r, tasks, bins=bins, resamples=config.bootstrap, seed=config.seed)
    if out is not None:
        writers.write_depth(profile, Path(out), meta)
    return profile


def analyze_errors(
    run_dirs: Sequence[str | Path],
    base: PolicyLike,
    rl: PolicyLike,
    *,
    out: str | Path | None = None,
    config: ErrorsConfig | None = None,
    base_label: str | None = None,
    rl_label: str | None = None,
    budget: int | None = None,
    sampling: SamplingConfig | None = None,
    judge: PolicyLike | None = None,
) -> ErrorsResult:
    """Error states, continuation success and error correction (docs/metrics.md#error-states; RT App. B.5);
    ``judge`` (a policy spec) scores the actions at error states where the environment cannot."""
    config = config or ErrorsConfig()
    base_policy, base_name = _policy(base, sampling)
    rl_policy, rl_name = _policy(rl, sampling)
    scorer, judge_name = _judge(judge, sampling, config.seed)
    pair = paired_runs(run_dirs, base_spec=base_name, rl_spec=rl_name, base_label=base_label, rl_label=rl_label, budget=budget)
    result = error_states_analysis(base_policy, rl_policy, pair.make_env, pair.tasks, pair.base, pair.rl, config,
                                   base_history=pair.base_history, rl_history=pair.rl_history,
                                   counters=pair.counters, profile=pair.profile, judge=scorer)  # fmt: skip
    if out is not None:
        writers.write_errors(result, Path(out), _meta(pair, base_name, rl_name, judge_name))
    return result


def _scorer(model: PolicyLike, sampling: SamplingConfig | None) -> tuple[ScoringPolicy, str]:
    if isinstance(model, str):
        if ":" not in model and model not in list_policy_kinds():
            model = f"hf:{model}"  # a bare path is a Hugging Face model directory
        if model.startswith("hf:") and "hf" not in list_policy_kinds():
            try:  # the hf backend registers itself on import
                importlib.import_module("arlkit.policies.hf")
            except ImportError as exc:
                raise ConfigError(f"the hf backend is unavailable ({exc}); install arlkit's dependencies") from None
    policy, name = _policy(model, sampling)
    if not isinstance(policy, ScoringPolicy):
        raise ConfigError(f"policy {name!r} cannot score continuations; the likelihood analysis needs a scoring backend such as hf:PATH")
    return policy, name


def analyze_likelihood(
    run_dirs: Sequence[str | Path],
    base: PolicyLike,
    rl: PolicyLike,
    *,
    out: str | Path | None = None,
    config: LikelihoodConfig | None = None,
    base_label: str | None = None,
    rl_label: str | None = None,
    budget: int | None = None,
) -> LikelihoodResult:
    """ActionNLL, cumulative LLR and the length-matched comparison (docs/metrics.md#likelihood). ``base`` and ``rl``
    are scoring policies (a bare path means ``hf:PATH``)."""
    base_policy, base_name = _scorer(base, None)
    rl_policy, rl_name = _scorer(rl, None)
    pair = paired_runs(run_dirs, base_spec=base_name, rl_spec=rl_name, base_label=base_label, rl_label=rl_label, budget=budget)

    def meta() -> dict[str, Any]:
        return {k: v for k, v in _meta(pair, base_name, rl_name).items() if k != "quality"}

    try:
        result = likelihood_analysis(base_policy, rl_policy, pair.make_env, pair.tasks, pair.base, pair.rl, config,
                                     base_history=pair.base_history, rl_history=pair.rl_history,
                                     counters=pair.counters, profile=pair.profile)  # fmt: skip
    except MissingCapability as exc:
        if out is not None:
            write_skipped(out, "likelihood", str(exc), meta())
        raise
    if out is not None:
        writers.write_likelihood(result, Path(out), meta())
    return result


def analyze_judge(
    run_dirs: Sequence[str | Path],
    judge: PolicyLike,
    *,
    out: str | Path | None = None,
    states: int = 100,
    seed: int = 0,
    bootstrap: int = 2000,
    max_history_turns: int | None = None,
    candidates: PolicyLike | None = None,
    actions: int = 4,
    sampling: SamplingConfig | None = None,
) -> JudgeAgreement:
    """Judge-vs-oracle rank agreement on a state pool drawn equally from every policy of the runs.

    The judged actions are every admissible action of each state (environments with a finite
    action set), or ``actions`` replies of the ``candidates`` policy (required otherwise); each is
    also valued by the oracle (or the environment's step quality).
    """
    judge_policy, judge_name = _policy(judge, sampling)
    runs = [load_run(p) for p in run_dirs]
    check_compatible(runs, same_budgets=False)
    refuse_native_tool_calls(runs)
    groups, tasks = [], {}
    for run in runs:
        tasks.update(resolve_tasks(run))
        for label in run.policies():
            groups.append((f"{run.name}:{label}", [t for t in run.trajectories if t.policy == label], run.history))
    make_env = runs[0].make_env
    meta = {"env": runs[0].env, "judge": judge_name, "runs": [str(r.path) for r in runs]}
    probe = make_env()
    reason = None
    if not has_step_quality(probe):
        reason = f"environment {runs[0].env!r} cannot score actions (no oracle or step quality): judge-vs-oracle agreement skipped"
    elif not has_snapshots(probe):
        reason = (f"environment {runs[0].env!r} has no state_key with snapshot/restore (recorded states cannot be rebuilt): "
                  "judge-vs-oracle agreement skipped")  # fmt: skip
    elif candidates is None and not isinstance(probe, ActionSpace):
        raise AnalysisInputError(f"environment {runs[0].env!r} has no finite action set: give a candidates policy (--candidates)")
    if reason is not None:
        if out is not None:
            write_skipped(out, "judge", reason, meta)
        raise MissingCapability(reason)
    pools, notes = equal_pool(make_env, tasks, groups, states, np.random.default_rng([seed, 4404]),
                              counters=runs[0].counters, profile=runs[0].profile)
    points = [p for pool in pools for p in pool]
    pick = None
    if candidates is not None:
        cand_policy, cand_name = _policy(candidates, sampling)
        meta["candidates"] = cand_name
        samples = sample_actions(cand_policy, make_env, points, actions, seed=seed, tag="judge-candidates", score=False)
        proposed = {id(p): list(dict.fromkeys(s.action for s in row if s.action is not None)) for p, row in zip(points, samples, strict=True)}

        def pick(env: Any, point: Any) -> list[str]:
            return proposed[id(point)]

    result = judge_agreement(LLMJudge(judge_policy, seed=seed, max_history_turns=max_history_turns), make_env, points,
                             candidates=pick, resamples=bootstrap, seed=seed)  # fmt: skip
    result.notes[:0] = notes
    if out is not None:
        writers.write_judge(result, Path(out), meta)
    return result


def analyze_flows(
    run_dirs: Sequence[str | Path],
    *,
    out: str | Path | None = None,
    max_steps: int = 12,
    repeat_k: int = 3,
    oscillation_len: int = 4,
) -> list[LoopSummary]:
    """Action flows and loop metrics of every policy in the runs (one group per run and policy)."""
    runs = [load_run(p) for p in run_dirs]
    check_compatible(runs, same_budgets=False)
    groups = []
    summaries: list[LoopSummary] = []
    several = len(runs) > 1
    for run in runs:
        for label in run.policies():
            name = f"{run.name}:{label}" if several else label
            trajs = [t for t in run.trajectories if t.policy == label]
            stats = [(f"{t.task_id}/{t.sample}/T{t.budget}", loop_stats(t, repeat_k=repeat_k, oscillation_len=oscillation_len)) for t in trajs]
            groups.append((name, action_flows(trajs, max_steps=max_steps), stats))
            summaries.append(summarize_loops(name, [s for _, s in stats]))
            for outcome, flag in (("success", True), ("failure", False)):
                mine = [s for (_, s), t in zip(stats, trajs, strict=True) if t.success == flag]
                if mine:
                    summaries.append(summarize_loops(f"{name} ({outcome})", mine))
    if out is not None:
        meta = {"env": runs[0].env, "runs": [str(r.path) for r in runs], "max_steps": max_steps, "repeat_k": repeat_k,
                "oscillation_len": oscillation_len}  # fmt: skip
        writers.write_flows(groups, summaries, Path(out), meta)
    return summaries


def analyze_run(
    run_dirs: Sequence[str | Path],
    base: PolicyLike,
    rl: PolicyLike,
    out: str | Path,
    *,
    quick: bool = False,
    base_label: str | None = None,
    rl_label: str | None = None,
    budget: int | None = None,
    seed: int = 0,
    sampling: SamplingConfig | None = None,
) -> list[str]:
    """Matched states, depth, error states and flows into ``out`` in one call (for ``arlkit demo``
    and training scripts); an analysis the environment cannot support is skipped with a note.
    ``quick`` uses smaller pools (60 states, G = 8; 30 error states, 2 continuations; 500
    bootstrap resamples). Returns the notes (one per skipped analysis)."""
    steps = StepsConfig(states=60, actions=8, seed=seed, bootstrap=500) if quick else StepsConfig(seed=seed)
    errors = (ErrorsConfig(states=30, actions=8, continuations=2, correction_states=30, seed=seed, bootstrap=500)
              if quick else ErrorsConfig(seed=seed))  # fmt: skip
    notes = []
    pair_kw: dict[str, Any] = {"base_label": base_label, "rl_label": rl_label, "budget": budget, "sampling": sampling}
    try:
        analyze_steps(run_dirs, base, rl, out=out, config=steps, **pair_kw)
        analyze_depth(steps_dir=out, out=out, config=steps)
    except MissingCapability as exc:
        notes.append(f"steps and depth skipped: {exc}")
    analyze_errors(run_dirs, base, rl, out=out, config=errors, **pair_kw)
    analyze_flows(run_dirs, out=out)
    return notes
