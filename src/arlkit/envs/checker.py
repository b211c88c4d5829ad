"""A public checker for the environment contract; run it on every registered environment.

``check_env("frozenlake")`` (or an instance) first checks the core :class:`~arlkit.envs.protocol.Env`
(the attributes ``name`` and ``t_max`` and the six methods, naming any that is missing), then
verifies that: train and test tasks are disjoint by content; the same seed gives the same
transcript; the prompt texts are non-empty strings; junk replies and junk actions never raise and
invalid actions leave the state unchanged; and, for the optional capabilities the environment has,
that ``snapshot``/``restore`` round-trips and following the oracle's optimal actions reaches
success. The returned :class:`CheckReport` also lists every optional capability of
:mod:`arlkit.envs.capabilities`, whether the environment has it and what it unlocks;
``print(report)`` shows it all.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from arlkit.envs.capabilities import (
    ActionScorer,
    ActionSpace,
    BudgetHeadroom,
    ErrorInjector,
    FailureDetector,
    FunctionCalling,
    MutationSource,
    Oracle,
    Snapshot,
    StateKey,
    StepQuality,
    SummaryNotes,
    can_inject_errors,
    has_oracle,
    has_snapshots,
    has_step_quality,
    served_splits,
)
from arlkit.envs.protocol import CORE_METHODS, Env, StepResult, Task
from arlkit.envs.registry import make

__all__ = ["CAPABILITIES", "Capability", "CapabilityStatus", "CheckReport", "EnvCheckError", "JUNK_REPLIES", "check_env"]

JUNK_REPLIES: tuple[str, ...] = (
    "",
    " ",
    "no tags at all",
    "<action></action>",
    "<action>",
    "</action><action>",
    "<action>a</action><action>b</action>",
    "<think>only thinking</think>",
    "\x00\x01\x02\ufffd\udcff" * 10,
    "<action>" + "x" * 20000 + "</action>",
    "```python\nimport os\nos.system('echo hi')\n```",
    "<action>__import__('os').system('echo pwned')</action>",
    "<action>DROP TABLE users;</action>",
    "<action>😀 ∑ \u202e</action>",
)


@dataclass(frozen=True)
class Capability:
    """One optional capability: its Protocol, the methods it adds, and what it unlocks."""

    name: str
    protocol: type
    methods: tuple[str, ...]
    unlocks: str


CAPABILITIES: tuple[Capability, ...] = (
    Capability("StateKey", StateKey, ("state_key",),
               "a state key on every recorded turn: loop revisits (analyze flows), GiGPO anchor states "
               "(the gigpo presets require it), the replay check of the step-level analyses"),
    Capability("Snapshot", Snapshot, ("snapshot", "restore"),
               "with StateKey: rebuilding and branching recorded states, for matched-state steps and depth, "
               "error states, continuations and error correction, judge agreement, the likelihood analysis and "
               "process rewards by replay; undoing harmless attempts in oracle and mutation error injection"),
    Capability("Oracle", Oracle, ("action_values", "optimal_actions", "shortest_solution_length", "success_probability"),
               "the oracle and noisy-oracle policies; the expected optimum (p*) in eval; SFT relabelling; R_single in "
               "the training dynamics; with ActionSpace: step quality Q*_h(s, a) and error injection"),
    Capability("ActionSpace", ActionSpace, ("admissible_actions",),
               "the random policy (and noisy-oracle exploration); judging every admissible action (otherwise "
               "--candidates); with Oracle: Q* step quality and error injection"),
    Capability("BudgetHeadroom", BudgetHeadroom, ("headroom",), "the budget headroom column in eval"),
    Capability("StepQuality", StepQuality, ("action_quality",),
               "step quality without an oracle: matched-state steps and depth, action quality at error states, "
               "judge agreement, oracle process rewards"),
    Capability("ActionScorer", ActionScorer, ("quality",),
               "a remaining-independent step quality (code: pass rate), used like StepQuality"),
    Capability("ErrorInjector", ErrorInjector, ("inject_error",),
               "your own error states (analyze errors: error states and continuations)"),
    Capability("MutationSource", MutationSource, ("error_mutation",),
               "error states by submitting a worse mutant of the current program (needs Snapshot)"),
    Capability("FailureDetector", FailureDetector, ("call_failed",),
               "your own failed-call verdict in error correction (default: an invalid step or a JSON error)"),
    Capability("FunctionCalling", FunctionCalling, ("function_tools", "function_prompt_text", "function_calls_action"),
               "native tool calls (--tool-calls native): actions offered as OpenAI tools to openai: policies"),
    Capability("SummaryNotes", SummaryNotes, ("summary_notes",),
               "your own lines in eval's summary.md (alfworld: the games whose oracle was unavailable)"),
)  # fmt: skip
"""Every optional capability, in the order :class:`CheckReport` lists them."""

_FEATURES: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("rollouts, eval pass@(k,T), SFT and RL with LLM policies", lambda env: True, "the core"),
    ("random policy", lambda env: isinstance(env, ActionSpace), "ActionSpace"),
    ("oracle / noisy-oracle policies, eval expected optimum, SFT relabelling", has_oracle, "Oracle"),
    ("eval budget headroom", lambda env: isinstance(env, BudgetHeadroom), "BudgetHeadroom"),
    ("GiGPO anchor states, loop revisits", lambda env: isinstance(env, StateKey), "StateKey"),
    ("step quality", has_step_quality, "StepQuality, ActionScorer, or Oracle with ActionSpace"),
    ("rebuilding recorded states (likelihood, error correction)", has_snapshots, "StateKey and Snapshot"),
    ("matched states, depth, judge agreement", lambda env: has_step_quality(env) and has_snapshots(env),
     "step quality, StateKey and Snapshot"),
    ("error states", lambda env: has_snapshots(env) and can_inject_errors(env),
     "StateKey, Snapshot and ErrorInjector, MutationSource, or Oracle with ActionSpace"),
    ("native tool calls", lambda env: isinstance(env, FunctionCalling), "FunctionCalling"),
)  # fmt: skip


@dataclass(frozen=True)
class CapabilityStatus:
    """Whether an environment has one :class:`Capability`."""

    capability: Capability
    present: bool


@dataclass
class CheckReport:
    """What :func:`check_env` verified and found.

    Attributes:
        name: environment name.
        checks: the checks that passed.
        problems: the checks that failed (empty when the environment is fine).
        missing_core: the core attributes and methods the environment lacks.
        capabilities: every optional capability, present or not.
        features: ``(feature, available, what it needs)`` for the features the capabilities unlock.
    """

    name: str
    checks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    missing_core: list[str] = field(default_factory=list)
    capabilities: list[CapabilityStatus] = field(default_factory=list)
    features: list[tuple[str, bool, str]] = field(default_factory=list)

    def has(self, capability: str) -> bool:
        """Whether the environment has the named capability (``"Oracle"``)."""
        return any(s.present for s in self.capabilities if s.capability.name == capability)

    @property
    def lacking(self) -> list[str]:
        """Names of the optional capabilities the environment lacks."""
        return [s.capability.name for s in self.capabilities if not s.present]

    def summary(self) -> str:
        """A readable report: core, checks, capabilities with what they unlock, features."""
        lines = [f"check_env: {self.name}"]
        if self.missing_core:
            lines.append(f"  core Env: MISSING {', '.join(self.missing_core)}")
        else:
            lines.append(f"  core Env: complete (name, t_max, {', '.join(CORE_METHODS)})")
        lines.append(f"  checks: {len(self.checks)} passed, {len(self.problems)} failed")
        lines += [f"    FAILED {p}" for p in self.problems]
        if self.capabilities:
            lines.append("  optional capabilities:")
            for s in self.capabilities:
                cap = s.capability
                mark = "yes" if s.present else "no "
                text = f"[{mark}] {cap.name} ({', '.join(cap.methods)}): {cap.unlocks}"
                lines.append(textwrap.fill(text, 100, initial_indent="    ", subsequent_indent="          "))
        if self.features:
            lines.append("  features:")
            for feature, ok, needs in self.features:
                lines.append(f"    [{'yes' if ok else 'no '}] {feature}" + ("" if ok else f" (needs {needs})"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


class EnvCheckError(AssertionError):
    """The environment breaks the contract; the message lists every problem found, and
    :attr:`report` holds the full :class:`CheckReport`."""

    def __init__(self, message: str, report: CheckReport | None = None) -> None:
        super().__init__(message)
        self.report = report


def _missing_core(env: object) -> list[str]:
    missing = [a for a in ("name", "t_max") if not hasattr(env, a)]
    return missing + [f"{m}()" for m in CORE_METHODS if not callable(getattr(env, m, None))]


def _transcript(env: Env, task: Task, seed: int, actions: Sequence[str]) -> list[tuple[str, float, bool, bool, bool]]:
    rows = [(env.reset(task, seed), 0.0, False, False, True)]
    for action in actions:
        r = env.step(action)
        rows.append((r.observation, r.reward, r.done, r.success, r.valid))
        if r.done:
            break
    return rows


def _probe_actions(env: Env, task: Task, seed: int, count: int) -> list[str]:
    """Actions to drive an episode: admissible ones when the env lists them, else oracle ones."""
    env.reset(task, seed)
    if isinstance(env, ActionSpace):
        actions = list(env.admissible_actions())
        return [actions[(i * 7 + 3) % len(actions)] for i in range(count)]
    if isinstance(env, Oracle):
        return list(env.optimal_actions(env.t_max))[:1] * min(count, 1)
    return ["noop"] * count


def _run_oracle(env: Env, task: Task, seed: int) -> tuple[bool, int]:
    env.reset(task, seed)
    for t in range(env.t_max):
        action = env.optimal_actions(env.t_max - t)[0]  # type: ignore[attr-defined]
        result: StepResult = env.step(action)
        if result.success:
            return True, t + 1
        if result.done:
            return False, t + 1
    return False, env.t_max


def _fingerprint(env: Env) -> object:
    """What must not change after an invalid action: the state key, else the rendered state."""
    return env.state_key() if isinstance(env, StateKey) else env.render()


def check_env(env: Env | str, *, n_tasks: int = 3, seed: int = 0, **config: object) -> CheckReport:
    """Check ``env`` (an instance, or a registered name built with ``config``).

    Raises :class:`EnvCheckError` listing every problem (a missing core method first, by name; the
    exception's ``report`` has the rest); returns the :class:`CheckReport` when all checks pass.
    """
    env = make(env, **config) if isinstance(env, str) else env
    report = CheckReport(str(getattr(env, "name", type(env).__name__)))
    report.capabilities = [CapabilityStatus(c, isinstance(env, c.protocol)) for c in CAPABILITIES]
    report.features = [(feature, bool(test(env)), needs) for feature, test, needs in _FEATURES]
    report.missing_core = _missing_core(env)
    if report.missing_core:
        report.problems.append(f"missing core method(s) of Env: {', '.join(report.missing_core)}")
        raise EnvCheckError(f"{report.name}: " + "; ".join(report.problems), report)

    def check(label: str, ok: bool, detail: str = "") -> None:
        (report.checks if ok else report.problems).append(label if ok else f"{label}: {detail}")

    test = env.tasks("test", n_tasks)
    if "train" in served_splits(env):
        train = env.tasks("train", n_tasks)
        check("task counts", len(train) == n_tasks and len(test) == n_tasks, f"got {len(train)} train, {len(test)} test")
        contents = lambda ts: {json.dumps(dict(t.payload), sort_keys=True, default=str) for t in ts}  # noqa: E731
        check("train/test disjoint by id", not {t.task_id for t in train} & {t.task_id for t in test}, "shared task ids")
        check("train/test disjoint by content", not contents(train) & contents(test), "shared payloads")
    else:
        check("task counts", len(test) == n_tasks, f"got {len(test)} test")
    check("tasks deterministic", [t.task_id for t in env.tasks("test", n_tasks)] == [t.task_id for t in test], "two calls differ")

    for task in test:
        actions = _probe_actions(env, task, seed, 12)
        first, second = _transcript(env, task, seed, actions), _transcript(env, task, seed, actions)
        check(f"{task.task_id}: same seed, same transcript", first == second, "transcripts differ")
        prompt = env.prompt_text()
        check(f"{task.task_id}: prompt_text() gives (instruction, action_format)",
              isinstance(prompt, tuple) and len(prompt) == 2, repr(prompt)[:60])  # fmt: skip
        for text in (env.render(), *(prompt if isinstance(prompt, tuple) else ())):
            check(f"{task.task_id}: texts are non-empty strings", isinstance(text, str) and bool(text.strip()), repr(text)[:60])

        if has_snapshots(env):
            live: Any = env  # a StateKey and a Snapshot
            live.reset(task, seed)
            if actions:
                live.step(actions[0])
            snap, key = live.snapshot(), live.state_key()
            after = [live.step(a) for a in actions[1:4]]
            live.restore(snap)
            check(f"{task.task_id}: restore brings back the state key", live.state_key() == key, "state key differs")
            again = [live.step(a) for a in actions[1:4]]
            check(f"{task.task_id}: snapshot/restore round-trips", after == again, "steps after restore differ")

        env.reset(task, seed)
        key = _fingerprint(env)
        try:
            for junk in JUNK_REPLIES:
                parsed = env.parse_action(junk)
                if parsed.action is not None:
                    result = env.step(parsed.action)
                    if not result.valid:
                        check(f"{task.task_id}: invalid action keeps the state", _fingerprint(env) == key, repr(junk)[:40])
                    env.reset(task, seed)
            check(f"{task.task_id}: junk never raises", True)
        except Exception as exc:  # the point of the check
            check(f"{task.task_id}: junk never raises", False, f"{type(exc).__name__}: {exc}")

        if isinstance(env, Oracle):
            env.reset(task, seed)
            p_star = env.success_probability(env.t_max)
            shortest = env.shortest_solution_length()
            check(
                f"{task.task_id}: shortest solution within T_max has positive success probability",
                shortest is None or shortest > env.t_max or p_star > 0,
                f"shortest={shortest}, p*={p_star}",
            )
            runs = [_run_oracle(env, task, seed + i) for i in range(1 if p_star >= 1.0 else 32)]
            if p_star >= 1.0:
                check(f"{task.task_id}: oracle succeeds", runs[0][0], f"failed after {runs[0][1]} turns")
                if shortest is not None:
                    check(f"{task.task_id}: oracle takes the shortest path", runs[0][1] == shortest, f"{runs[0][1]} != {shortest}")
            elif p_star >= 0.2:
                check(f"{task.task_id}: oracle succeeds sometimes", any(ok for ok, _ in runs), f"0/32 with p*={p_star:.2f}")
    if report.problems:
        raise EnvCheckError(f"{report.name}: " + "; ".join(report.problems), report)
    return report
