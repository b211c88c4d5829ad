"""``arlkit study``: RT's whole study of a base model and its RL model, in one resumable run folder.

The stages, each into its own place under ``out``:

1. ``eval/``: Pass@(K,T) of both models on the same tasks, seeds and budgets (one :func:`run_eval`
   holding both policies), with the paired RL − Base differences and their CIs, and the expected
   optimum and headroom where the environment has them.
2. ``analysis/``, at the largest budget's trajectories: matched-state step quality (``steps``), quality
   by depth (``depth``), error states and continuation (``errors``), likelihood (``likelihood``: ActionNLL,
   cumulative LLR, length-matched pairs, when both models can score continuations), the LLM judge against
   the oracle (``judge``) and action flows and loops (``flows``). Where the environment has no step
   quality, a ``judge`` scores the actions of ``steps`` and ``errors`` instead.
3. ``summary.md`` and ``report.html``, led by RT's takeaways stated for this pair, each with its CI and a
   plain reading; training runs given as ``train_runs`` add their dynamics to the report.

A stage the environment or the models cannot support writes ``<kind>.md`` / ``<kind>.json`` saying why
(:func:`~arlkit.recipes.analyze.write_skipped`), and the summary lists that reason. A re-run resumes: the
evaluation keeps its finished trajectories, and each analysis whose ``<kind>.md`` exists is kept.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arlkit.config import ConfigError, RunError, config_to_plain
from arlkit.envs import make
from arlkit.envs.capabilities import MissingCapability, has_step_quality
from arlkit.analysis.runs import AnalysisInputError
from arlkit.policies import Policy, PolicyError, ScoringPolicy, list_policy_kinds, make_policy
from arlkit.recipes import analyze
from arlkit.recipes.eval import EngineStats, EvalConfig, EvalResult, check_eval_config, run_eval
from arlkit.recipes.study_summary import write_study_summary
from arlkit.rundir import atomic_write_json, claim_run_dir, holds_run_dir

__all__ = ["ANALYSES", "QUICK_EVAL", "StudyConfig", "StudyResult", "run_study"]

ANALYSES = ("steps", "depth", "errors", "likelihood", "judge", "flows")
"""The analysis stages, in the order they run (each writes ``analysis/<kind>.*``)."""

QUICK_EVAL = {"tasks": 20, "samples": 4, "bootstrap": 500}
"""What ``arlkit study --quick`` evaluates unless told otherwise (``--tasks``, ``--samples``, ``--bootstrap``)."""


@dataclass(frozen=True)
class StudyConfig:
    """A study of two models (``arlkit study``).

    Attributes:
        base: the base model's policy spec (``hf:PATH``, ``openai:MODEL@URL``, a scripted policy; a bare
            folder means ``hf:FOLDER``).
        rl: the RL model's policy spec.
        eval: the evaluation (environment, tasks, samples, budgets, prompt, sampling, backend); its
            ``policies`` are set to ``(base, rl)``.
        judge: a policy spec of an LLM judge (empty: none): checked against the oracle where the
            environment has one, else the scorer of the step-level analyses.
        quick: smaller analysis pools (60 matched states and G = 8; 30 error states, 2 continuations;
            40 judged states; 24 scored trajectories per model; 500 bootstrap resamples).
        train_runs: training run folders whose dynamics (R_multi, R_single, ...) join the report.
    """

    base: str
    rl: str
    eval: EvalConfig = field(default_factory=EvalConfig)
    judge: str = ""
    quick: bool = False
    train_runs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        base, rl = policy_spec(self.base, "base"), policy_spec(self.rl, "rl")
        if base == rl:
            raise ValueError(f"--base and --rl are the same policy ({base}); give two models")
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "rl", rl)
        object.__setattr__(self, "judge", policy_spec(self.judge, "judge") if self.judge else "")
        object.__setattr__(self, "eval", dataclasses.replace(self.eval, policies=(base, rl)))
        object.__setattr__(self, "train_runs", tuple(str(p) for p in self.train_runs))


def policy_spec(spec: str, role: str) -> str:
    """``spec`` as a policy spec: a bare folder is a Hugging Face model (``hf:FOLDER``)."""
    spec = str(spec).strip()
    if not spec:
        raise ValueError(f"--{role}: give a policy spec (hf:PATH, openai:MODEL@URL, noisy-oracle:EPS, ...)")
    if ":" not in spec and spec not in list_policy_kinds():
        if Path(spec).is_dir():
            return f"hf:{spec}"
        raise ValueError(f"--{role} {spec!r} is neither a policy spec nor a model folder; give hf:PATH, "
                         f"openai:MODEL@URL or one of {', '.join(list_policy_kinds())}")
    return spec


@dataclass
class StudyResult:
    """What :func:`run_study` produced.

    Attributes:
        out: the study folder.
        eval: the evaluation of both models.
        stages: each analysis stage's outcome: ``"done"``, ``"kept"`` (found on disk) or ``"skipped: REASON"``.
        seconds: wall time of each stage in this call.
    """

    out: Path
    eval: EvalResult
    stages: dict[str, str]
    seconds: dict[str, float]


def _identity(config: StudyConfig) -> dict[str, Any]:
    data = config_to_plain(config)
    data["eval"] = config_to_plain(check_eval_config(config.eval))
    for key in ("engine", "allow_errors", "wandb", "backend"):
        data["eval"].pop(key, None)
    return json.loads(json.dumps(data, sort_keys=True))


def _check_train_runs(runs: tuple[str, ...]) -> None:
    for run in runs:
        if not any((Path(run) / name).is_file() for name in ("metrics.jsonl", "dynamics.csv")):
            raise ConfigError(f"--train-runs {run!r} holds no training metrics (metrics.jsonl or dynamics.csv); give "
                              "the folder of an `arlkit train` run")


@holds_run_dir("out")
def run_study(
    config: StudyConfig,
    out: str | Path,
    *,
    say: Callable[[str], None] = print,
    on_progress: Callable[[int, int], None] | None = None,
    stats: EngineStats | None = None,
) -> StudyResult:
    """Run (or resume) the study into ``out`` (module docstring). ``say`` receives one line per stage;
    ``on_progress`` and ``stats`` follow the evaluation as in :func:`run_eval`."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")
    _check_train_runs(config.train_runs)
    claim_run_dir(out, _identity(config), record="study.json", volatile=("train_runs",), what="study")
    seconds: dict[str, float] = {}
    start = time.monotonic()
    say(f"evaluating {config.base} (Base) and {config.rl} (RL) on {config.eval.env.name}: {config.eval.tasks} tasks x "
        f"{config.eval.samples} samples at {', '.join(map(str, config.eval.budgets))} of T_max "
        f"({config.eval.prompt.budget_mode} budgets)")
    result = run_eval(config.eval, out / "eval", on_progress=on_progress, stats=stats)
    seconds["eval"] = time.monotonic() - start
    if result.errors:
        raise RunError(f"{result.errors} trajectories ended by policy errors; re-run the same command to retry them "
                          f"(the study goes on once every trajectory has finished; {out / 'eval' / 'errors.jsonl'})")
    with _Models(config) as models:
        stages = _Analyses(config, out / "analysis", result, models, say, seconds).run()
    tick = time.monotonic()
    write_study_summary(out, config, result, stages, seconds)
    seconds["report"] = time.monotonic() - tick
    atomic_write_json(out / "timing.json", seconds)
    return StudyResult(out, result, stages, seconds)


class _Models:
    """The base and RL policies, built once for every analysis and closed at the end."""

    def __init__(self, config: StudyConfig) -> None:
        self._config = config
        self._built: dict[str, Policy] = {}

    def get(self, role: str) -> Policy:
        if role not in self._built:
            spec = {"base": self._config.base, "rl": self._config.rl}[role]
            self._built[role] = make_policy(spec, self._config.eval.sampling, self._config.eval.backend)
        return self._built[role]

    def __enter__(self) -> _Models:
        return self

    def __exit__(self, *exc: object) -> None:
        for policy in self._built.values():
            close = getattr(policy, "close", None)
            if callable(close):
                close()


@dataclass
class _Analyses:
    """The analysis stages on the evaluation's largest-budget trajectories, each kept when its
    ``<kind>.md`` is on disk and skipped with its reason when it cannot run."""

    config: StudyConfig
    folder: Path
    result: EvalResult
    models: _Models
    say: Callable[[str], None]
    seconds: dict[str, float]

    def run(self) -> dict[str, str]:
        self.folder.mkdir(parents=True, exist_ok=True)
        probe = make(self.config.eval.env.name, **self.config.eval.env.args)
        self.oracle = has_step_quality(probe)
        stages = {}
        for kind in ANALYSES:
            start = time.monotonic()
            stages[kind] = self._stage(kind)
            self.seconds[kind] = time.monotonic() - start
            self.say(f"  {kind}: {stages[kind]}")
        return stages

    def _stage(self, kind: str) -> str:
        done = self.folder / f"{kind}.md"
        if done.is_file():
            return _outcome(self.folder, kind, "kept")
        reason = self._cannot(kind)
        if reason is None:
            self.say(f"{kind}: {_WHAT[kind]}")
            try:
                with analyze.analysis_run(self.folder), _skips(self.folder, kind):
                    getattr(self, f"_{kind}")()
            except _Skipped:
                pass
        else:
            analyze.write_skipped(self.folder, kind, reason)
        return _outcome(self.folder, kind, "done")

    def _cannot(self, kind: str) -> str | None:
        """Why ``kind`` cannot run, or ``None``."""
        if kind == "depth" and _skipped(self.folder, "steps"):
            return f"depth needs the matched-state analysis: {_skipped(self.folder, 'steps')}"
        if kind == "likelihood":
            unable = [f"{role} {spec}" for role, spec in (("Base", self.config.base), ("RL", self.config.rl))
                      if not isinstance(self.models.get(role.lower()), ScoringPolicy)]
            if unable:
                return (f"{' and '.join(unable)} cannot score continuations (likelihood needs two scoring models: "
                        "hf:PATH, or openai:MODEL@URL on a vLLM, SGLang or arlkit serve server)")
        if kind == "judge":
            if not self.config.judge:
                return ("no --judge given" if self.oracle else
                        "no --judge given; without one the step-level analyses of this environment have no scorer")
            if not self.oracle:
                return (f"no oracle on {self.config.eval.env.name} to check the judge against: its scores stand in for "
                        "step quality in steps and errors")
        return None

    @property
    def _pair(self) -> dict[str, Any]:
        return {"base_label": self.config.base, "rl_label": self.config.rl, "budget": max(self.result.budgets)}

    @property
    def _runs(self) -> list[Path]:
        return [self.result.out]

    def _judge_policy(self) -> str | None:
        return self.config.judge if self.config.judge and not self.oracle else None

    def _steps(self) -> None:
        config = analyze.StepsConfig(states=60, actions=8, bootstrap=500) if self.config.quick else analyze.StepsConfig()
        analyze.analyze_steps(self._runs, self.models.get("base"), self.models.get("rl"), out=self.folder, config=config,
                              judge=self._judge_policy(), sampling=self.config.eval.sampling, **self._pair)

    def _depth(self) -> None:
        bootstrap = 500 if self.config.quick else analyze.StepsConfig().bootstrap
        analyze.analyze_depth(steps_dir=self.folder, out=self.folder, config=analyze.StepsConfig(bootstrap=bootstrap))

    def _errors(self) -> None:
        config = (analyze.ErrorsConfig(states=30, actions=8, continuations=2, correction_states=30, bootstrap=500)
                  if self.config.quick else analyze.ErrorsConfig())
        analyze.analyze_errors(self._runs, self.models.get("base"), self.models.get("rl"), out=self.folder,
                               config=config, judge=self._judge_policy(), sampling=self.config.eval.sampling,
                               **self._pair)

    def _likelihood(self) -> None:
        config = (analyze.LikelihoodConfig(max_trajectories=24, bootstrap=500) if self.config.quick
                  else analyze.LikelihoodConfig())
        analyze.analyze_likelihood(self._runs, self.models.get("base"), self.models.get("rl"), out=self.folder,  # type: ignore[arg-type]
                                   config=config, **self._pair)

    def _judge(self) -> None:
        analyze.analyze_judge(self._runs, self.config.judge, out=self.folder, sampling=self.config.eval.sampling,
                              states=40 if self.config.quick else 100, bootstrap=500 if self.config.quick else 2000)

    def _flows(self) -> None:
        analyze.analyze_flows(self._runs, out=self.folder)


_WHAT = {
    "steps": "action quality at matched states",
    "depth": "quality by normalised depth t/T",
    "errors": "error states, continuation and error correction",
    "likelihood": "ActionNLL, cumulative LLR and length-matched pairs",
    "judge": "the LLM judge against the oracle",
    "flows": "action flows and loops",
}


class _Skipped(Exception):
    """An analysis that found it cannot run (its reason is on disk)."""


@contextmanager
def _skips(folder: Path, kind: str) -> Iterator[None]:
    """Turn what says an analysis cannot run here (a missing capability, runs without the states it
    needs, a model that cannot score) into its skip record."""
    try:
        yield
    except (MissingCapability, AnalysisInputError, PolicyError, ValueError) as exc:
        if isinstance(exc, ConfigError) and not isinstance(exc, AnalysisInputError):
            raise  # bad input: the user's to fix
        if not (folder / f"{kind}.md").is_file():
            analyze.write_skipped(folder, kind, " ".join(str(exc).split()))
        raise _Skipped from None


def _skipped(folder: Path, kind: str) -> str | None:
    path = folder / f"{kind}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return str(data["skipped"]) if isinstance(data, dict) and data.get("skipped") else None


def _outcome(folder: Path, kind: str, ran: str) -> str:
    reason = _skipped(folder, kind)
    return f"skipped: {reason}" if reason else ran
