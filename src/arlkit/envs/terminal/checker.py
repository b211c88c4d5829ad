"""A terminal task's check: steps run in a fresh sandbox, verdicts decided in the parent.

A check is a list of :class:`CheckStep`. It runs on a copy of the task folder in a sandbox of its
own (never the one the commands ran in), through the driver (:mod:`arlkit.envs.terminal._driver`):
symbolic links that leave the folder are removed first and after each step; each step's script
runs in a fresh bash in ``/app`` with a clean environment, and every process a step started is
killed before the next one begins. What a step is expected to print never enters the sandbox: the
driver sends back each step's exit status and output, and :func:`run_check` compares them here. So
a program the check runs can change only its own step's output, never the checker, another step
or the verdict (docs/sandbox.md, "What a checker may assume").

A step passes when its exit status is ``exit`` (any status when ``exit`` is ``None``) and, where
given, its standard output is exactly ``stdout`` (bytes for bytes, as ``cmp`` compares a file) or,
with trailing newlines removed, is ``line`` (as the shell's ``"$(...)"`` reads one value). A
``reward`` step prints a number (Harbor's ``reward.txt``): it passes when the number is at least 1.
The check passes when every step passes; it stops at the first step whose exit status is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arlkit.envs.terminal.workspace import CommandLimits, exchange
from arlkit.sandbox import Sandbox

__all__ = [
    "CheckResult", "CheckStep", "StepOutcome", "check_request", "decode_steps", "encode_steps", "judge_check",
    "parse_steps", "run_check",
]

_KEYS = {"run", "exit", "stdout", "line", "reward"}


@dataclass(frozen=True)
class CheckStep:
    """One step of a check.

    Attributes:
        run: a bash script, run in ``/app``.
        exit: the exit status it must end with (``None``: any).
        stdout: its whole standard output, exactly (``None``: not compared).
        line: its standard output with trailing newlines removed (``None``: not compared).
        reward: its standard output is a number, the task's reward; the step passes when it is at
            least 1 (a partial reward is not a success).
    """

    run: str
    exit: int | None = 0
    stdout: str | None = None
    line: str | None = None
    reward: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run, "exit": self.exit}
        out.update({k: v for k, v in (("stdout", self.stdout), ("line", self.line)) if v is not None})
        if self.reward:
            out["reward"] = True
        return out


@dataclass(frozen=True)
class StepOutcome:
    """What one step did, and whether that is what the check expects."""

    run: str
    passed: bool
    why: str
    exit_code: int | None
    stdout: str
    stderr: str


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a check, with each step that ran.

    Attributes:
        passed: every step passed.
        steps: the steps that ran, in order (the check stops at the first wrong exit status).
        error: why the check could not run or its result could not be read (then ``passed`` is False).
        links_out: symbolic links leaving the task folder that were removed before the check.
        duration_s: the sandbox run's wall time.
    """

    passed: bool
    steps: tuple[StepOutcome, ...] = ()
    error: str | None = None
    links_out: int = 0
    duration_s: float = 0.0

    @property
    def output(self) -> str:
        """Each step's script, verdict and output, for reading why a check failed."""
        if self.error:
            return f"the check could not run: {self.error}"
        parts = []
        for step in self.steps:
            parts.append(f"$ {step.run.strip()}\n[{'ok' if step.passed else 'FAILED: ' + step.why}]")
            parts += [text for text in (step.stdout, step.stderr) if text]
        return "\n".join(parts)


def parse_steps(data: Any, where: str) -> tuple[CheckStep, ...]:
    """A check from its YAML form: a list of mappings with ``run`` and optionally ``exit`` (a
    status, or ``any``), ``stdout``, ``line``, ``reward`` (``ValueError`` naming the step and the
    problem)."""
    if not isinstance(data, list) or not data:
        raise ValueError(f"{where}: a check is a non-empty list of steps, each with a 'run' script")
    steps = []
    for i, item in enumerate(data, 1):
        if not isinstance(item, Mapping) or not isinstance(item.get("run"), str) or not item["run"].strip():
            raise ValueError(f"{where}: step {i} needs a 'run' script")
        unknown = sorted(set(item) - _KEYS)
        if unknown:
            raise ValueError(f"{where}: step {i} has unknown keys {unknown}; valid keys: {', '.join(sorted(_KEYS))}")
        exit_code = item.get("exit", 0)
        if exit_code == "any":
            exit_code = None
        elif not isinstance(exit_code, int) or isinstance(exit_code, bool) or not 0 <= exit_code <= 255:
            raise ValueError(f"{where}: step {i}: 'exit' must be a status from 0 to 255, or 'any'")
        expected = {k: item.get(k) for k in ("stdout", "line")}
        for key, value in expected.items():
            if value is not None and not isinstance(value, str | int | float):
                raise ValueError(f"{where}: step {i}: {key!r} must be text")
        reward = item.get("reward", False)
        if not isinstance(reward, bool):
            raise ValueError(f"{where}: step {i}: 'reward' must be true or false")
        texts = (None if v is None else str(v) for v in expected.values())
        steps.append(CheckStep(item["run"], exit_code, *texts, reward=reward))
    return tuple(steps)


def _judge(step: CheckStep, fields: Mapping[str, Any], kept: int) -> StepOutcome:
    exit_code = fields.get("exit_code")
    stdout = str(fields.get("stdout", ""))
    whole = int(fields.get("stdout_bytes", 0)) == len(stdout.encode("utf-8", "replace"))
    why = ""
    if fields.get("timed_out"):
        why = "ran past the check's time limit"
    elif step.exit is not None and exit_code != step.exit:
        why = f"exit status {exit_code}, expected {step.exit}"
    elif step.stdout is not None and not (whole and stdout == step.stdout):
        why = "its output differs from the expected output"
    elif step.line is not None and not (whole and stdout.rstrip("\n") == step.line):
        why = "its output differs from the expected line"
    elif step.reward:
        why = _reward_shortfall(stdout if whole else "")
    return StepOutcome(step.run, not why, why, exit_code if isinstance(exit_code, int) else None, stdout[:kept],
                       str(fields.get("stderr", ""))[:kept])


def _reward_shortfall(text: str) -> str:
    """Why the printed reward ``text`` is not a success ('' when it is a number >= 1)."""
    try:
        value = float(text.strip())
    except ValueError:
        return "it printed no reward (a number)"
    if not math.isfinite(value):
        return f"the reward {text.strip()!r} is not a finite number"
    return "" if value >= 1.0 else f"the reward is {value:g}, below 1"


def check_request(steps: Sequence[CheckStep], limits: CommandLimits) -> dict[str, Any]:
    """What the driver gets to run ``steps``: their scripts and exit statuses (the expected outputs
    stay here), the limits, and how many bytes of each output to keep (enough to compare)."""
    longest = max((len((s.stdout or s.line or "").encode()) for s in steps), default=0)
    return {
        "timeout_s": limits.timeout_s, "keep_bytes": max(limits.keep_bytes, longest + 64),
        "max_output_bytes": limits.max_output_bytes, "steps": [{"run": s.run, "exit": s.exit} for s in steps],
    }


def run_check(
    sandbox: Sandbox,
    archive: bytes,
    steps: Sequence[CheckStep],
    *,
    limits: CommandLimits,
    support: bytes = b"",
) -> CheckResult:
    """Run the check ``steps`` on the task folder ``archive`` (with the ``support`` archive, the
    task's tests, unpacked at ``/tests``); never raises on anything the folder holds."""
    request = check_request(steps, limits)
    keep = request["keep_bytes"]
    files: dict[str, str | bytes] = {"workspace.tar": archive}
    if support:
        files["support.tar"] = support
    fields, error, duration_s = exchange(sandbox, request, files, timeout_s=limits.timeout_s,
                                         max_output_bytes=len(steps) * 12 * keep + 65536)
    if fields is None:
        return CheckResult(False, error=error, duration_s=duration_s)
    return judge_check(steps, fields, keep, duration_s)


def judge_check(steps: Sequence[CheckStep], fields: Mapping[str, Any], keep: int, duration_s: float) -> CheckResult:
    """The verdict on what the driver sent back for ``steps`` (``fields``: its JSON object; the
    first ``keep`` bytes of each step's output kept)."""
    if fields.get("error"):
        return CheckResult(False, error=str(fields["error"]), duration_s=duration_s)
    ran = fields.get("steps")
    if not isinstance(ran, list) or not all(isinstance(r, dict) for r in ran) or len(ran) > len(steps):
        return CheckResult(False, error="the check's result could not be read", duration_s=duration_s)
    outcomes = tuple(_judge(step, got, keep) for step, got in zip(steps, ran, strict=False))
    passed = len(outcomes) == len(steps) and all(o.passed for o in outcomes)
    return CheckResult(passed, outcomes, links_out=int(fields.get("links_out", 0)), duration_s=duration_s)


def encode_steps(steps: Sequence[CheckStep]) -> list[dict[str, Any]]:
    """The steps as plain data (a task's payload)."""
    return [s.to_dict() for s in steps]


def decode_steps(data: Sequence[Mapping[str, Any]]) -> tuple[CheckStep, ...]:
    """The inverse of :func:`encode_steps`."""
    def exit_status(d: Mapping[str, Any]) -> int | None:
        return None if d.get("exit", 0) is None else int(d.get("exit", 0))

    return tuple(CheckStep(str(d["run"]), exit_status(d), d.get("stdout"), d.get("line"), bool(d.get("reward")))
                 for d in data)

