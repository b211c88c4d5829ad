"""A public checker for the environment contract; run it on every registered environment.

``check_env("frozenlake")`` (or an instance) verifies that: train and test tasks are disjoint by
content; the same seed gives the same transcript; ``snapshot``/``restore`` round-trips; junk replies
and junk actions never raise and invalid actions leave the state unchanged; and, when the
environment has an oracle, following its optimal actions reaches success.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from arlkit.envs.protocol import ActionSpace, Env, StepResult, Task, has_oracle
from arlkit.envs.registry import make

__all__ = ["CheckReport", "EnvCheckError", "JUNK_REPLIES", "check_env"]

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


class EnvCheckError(AssertionError):
    """The environment breaks the contract; the message lists every problem found."""


@dataclass
class CheckReport:
    """What :func:`check_env` verified.

    Attributes:
        name: environment name.
        checks: the checks that passed.
        problems: the checks that failed (empty when the environment is fine).
    """

    name: str
    checks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


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
    if has_oracle(env):
        return list(env.optimal_actions(env.t_max))[:1] * min(count, 1)  # type: ignore[attr-defined]
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


def check_env(env: Env | str, *, n_tasks: int = 3, seed: int = 0, **config: object) -> CheckReport:
    """Check ``env`` (an instance, or a registered name built with ``config``).

    Raises :class:`EnvCheckError` listing every problem; returns the report when all checks pass.
    """
    env = make(env, **config) if isinstance(env, str) else env
    report = CheckReport(env.name)

    def check(label: str, ok: bool, detail: str = "") -> None:
        (report.checks if ok else report.problems).append(label if ok else f"{label}: {detail}")

    train, test = env.tasks("train", n_tasks), env.tasks("test", n_tasks)
    check("task counts", len(train) == n_tasks and len(test) == n_tasks, f"got {len(train)} train, {len(test)} test")
    contents = lambda ts: {json.dumps(dict(t.payload), sort_keys=True, default=str) for t in ts}  # noqa: E731
    check("train/test disjoint by id", not {t.task_id for t in train} & {t.task_id for t in test}, "shared task ids")
    check("train/test disjoint by content", not contents(train) & contents(test), "shared payloads")
    check("tasks deterministic", [t.task_id for t in env.tasks("test", n_tasks)] == [t.task_id for t in test], "two calls differ")

    for task in test:
        actions = _probe_actions(env, task, seed, 12)
        first, second = _transcript(env, task, seed, actions), _transcript(env, task, seed, actions)
        check(f"{task.task_id}: same seed, same transcript", first == second, "transcripts differ")
        for text in (env.render(), env.instruction(), env.action_format()):
            check(f"{task.task_id}: texts are non-empty strings", isinstance(text, str) and bool(text.strip()), repr(text)[:60])

        env.reset(task, seed)
        if actions:
            env.step(actions[0])
        snap = env.snapshot()
        key = env.state_key()
        after = [env.step(a) for a in actions[1:4]]
        env.restore(snap)
        check(f"{task.task_id}: restore brings back the state key", env.state_key() == key, "state key differs")
        again = [env.step(a) for a in actions[1:4]]
        check(f"{task.task_id}: snapshot/restore round-trips", after == again, "steps after restore differ")

        env.reset(task, seed)
        key = env.state_key()
        try:
            for junk in JUNK_REPLIES:
                parsed = env.parse_action(junk)
                if parsed.action is not None:
                    result = env.step(parsed.action)
                    if not result.valid:
                        check(f"{task.task_id}: invalid action keeps the state", env.state_key() == key, repr(junk)[:40])
                    env.reset(task, seed)
            check(f"{task.task_id}: junk never raises", True)
        except Exception as exc:  # the point of the check
            check(f"{task.task_id}: junk never raises", False, f"{type(exc).__name__}: {exc}")

        if has_oracle(env):
            env.reset(task, seed)
            p_star = env.success_probability(env.t_max)  # type: ignore[attr-defined]
            shortest = env.shortest_solution_length()  # type: ignore[attr-defined]
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
        raise EnvCheckError(f"{env.name}: " + "; ".join(report.problems))
    return report
