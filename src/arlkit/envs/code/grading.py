"""Running a program against its tests (one sandbox launch for all of them) and judging the results.

Judging happens here, in the trusted parent: the sandbox only ever sees test *inputs*.

- stdin/stdout tests pass when the outputs agree after dropping trailing whitespace on each line
  and trailing blank lines; failing that, when their whitespace-separated tokens agree, a token
  whose expected form contains ``.`` or an exponent matching a number within 1e-6 (absolute or
  relative).
- function-call tests pass when the JSON form of the return value (tuples and sets become lists)
  equals the expected value; floats agree within 1e-6; ``True`` is not ``1``.
- check tests (HumanEval) pass when the test function returns without an error: it is the
  benchmark's own verdict. The test function runs in the harness, the program in a separate
  interpreter that only receives the arguments of its calls (:mod:`arlkit.envs.code.harness`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.envs.code.data import CodeTest
from arlkit.sandbox import Sandbox

__all__ = ["Evaluation", "TestResult", "evaluate_program", "format_feedback", "outputs_match", "run_tests", "values_match"]

HARNESS_SOURCE = Path(__file__).with_name("harness.py").read_text(encoding="utf-8")
_TOL = 1e-6
_STATUS_TEXT = {
    "timeout": "time limit exceeded",
    "memory": "memory limit exceeded",
    "output_limit": "output limit exceeded",
    "killed": "killed by a signal",
    "not_run": "not run: the step's time budget was spent",
}


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test.

    Attributes:
        test: the test.
        passed: the program's answer was right.
        status: how the program ended on this test (``ok``, ``error``, ``timeout``, ``memory``,
            ``killed``, ``output_limit``, ``not_run``, or ``harness_<outcome>`` when the harness
            itself did not report this test).
        actual: what the program printed (stdin/stdout) or the ``repr`` of its return value.
        error: the end of its standard error (a traceback), or why it was stopped.
    """

    test: CodeTest
    passed: bool
    status: str
    actual: str
    error: str


@dataclass(frozen=True)
class Evaluation:
    """All test results of one program.

    Attributes:
        public: results of the public tests, in order.
        hidden: results of the hidden tests, in order.
        isolation: the sandbox level the program ran at.
    """

    public: tuple[TestResult, ...]
    hidden: tuple[TestResult, ...]
    isolation: str

    @property
    def pass_rate(self) -> float:
        """Fraction of hidden tests passed: the step quality of the program (docs/metrics.md#step-quality)."""
        return sum(r.passed for r in self.hidden) / len(self.hidden) if self.hidden else 0.0

    @property
    def public_pass_rate(self) -> float:
        return sum(r.passed for r in self.public) / len(self.public) if self.public else 1.0

    @property
    def solved(self) -> bool:
        """Every hidden test passed (the task's success criterion)."""
        return bool(self.hidden) and all(r.passed for r in self.hidden)


def _is_float_token(token: str) -> bool:
    return "." in token or "e" in token.lower()


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def outputs_match(actual: str, expected: str) -> bool:
    """Whether a stdin/stdout test's output is right (see the module docstring)."""
    if _normalise(actual) == _normalise(expected):
        return True
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g == w:
            continue
        if not _is_float_token(w):
            return False
        try:
            gv, wv = float(g), float(w)
        except ValueError:
            return False
        if not math.isclose(gv, wv, rel_tol=_TOL, abs_tol=_TOL):
            return False
    return True


def values_match(actual: Any, expected: Any) -> bool:
    """Whether a function's (JSON-form) return value equals the expected JSON value."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, int) and isinstance(actual, int):
            return actual == expected
        return math.isclose(actual, expected, rel_tol=_TOL, abs_tol=_TOL) or (math.isnan(actual) and math.isnan(expected))
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(values_match(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(values_match(actual[k], expected[k]) for k in expected)
    return bool(type(actual) is type(expected) and actual == expected)


def _judge(test: CodeTest, report: dict[str, Any] | None, harness_outcome: str) -> TestResult:
    if report is None:
        why = f"no result: the test run ended with {harness_outcome}"
        return TestResult(test, False, f"harness_{harness_outcome}", "", why)
    status = str(report.get("status", "error"))
    stdout = str(report.get("stdout", ""))
    error = str(report.get("error", ""))
    if status in _STATUS_TEXT:
        error = (_STATUS_TEXT[status] + ("\n" + error if error.strip() and status != "not_run" else "")).strip()
    if test.kind == "stdio":
        return TestResult(test, status == "ok" and outputs_match(stdout, test.output), status, stdout, error)
    if test.kind == "check":  # actual: what the program last returned before the check ended
        return TestResult(test, status == "ok", status, str(report.get("actual", "")), error)
    if status != "ok":
        return TestResult(test, False, status, "", error)
    value = report.get("value")
    return TestResult(test, values_match(value, test.expected), status, repr(value), error)


def _harness_test(test: CodeTest) -> dict[str, Any]:
    """What the harness gets of a test: its inputs (a check test is the test function itself)."""
    if test.kind == "stdio":
        return {"kind": "stdio", "input": test.input}
    if test.kind == "check":
        return {"kind": "check", "fn_name": test.fn_name, "setup": test.setup, "source": test.input}
    return {"kind": "call", "fn_name": test.fn_name, "args": list(test.args)}


def run_tests(
    sandbox: Sandbox,
    program: str,
    tests: Sequence[CodeTest],
    *,
    test_timeout_s: float = 2.0,
    budget_s: float = 20.0,
    max_test_output: int | None = None,
) -> tuple[list[dict[str, Any] | None], str, str]:
    """Run ``program`` on ``tests`` in one sandbox launch; returns the harness's raw report of each
    test (``None`` when it has none), the sandbox outcome of the harness run, and its isolation.

    A test's output is capped at ``max_test_output`` bytes (default: twice the longest expected
    output, at least 64 KiB)."""
    longest = max([len(t.output.encode()) if t.kind == "stdio" else len(json.dumps(t.expected)) for t in tests] + [0])
    cap = max_test_output or max(65536, 2 * longest + 1024)
    spec = {
        "tests": [_harness_test(t) for t in tests],
        "timeout_s": float(test_timeout_s),
        "budget_s": float(budget_s),
        "max_output": cap,
    }
    result = sandbox.run_python(
        HARNESS_SOURCE,
        files={"program.py": program},
        stdin=json.dumps(spec),
        wall_time_s=budget_s + 10.0,
        max_output_bytes=len(tests) * (6 * cap + 4096) + 65536,
    )
    reports: dict[int, dict[str, Any]] = {}
    for line in result.stdout.split("\n"):  # not splitlines(): it also splits at U+2028 inside strings
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("i"), int) and 0 <= item["i"] < len(tests):
            reports.setdefault(item["i"], item)
    return [reports.get(i) for i in range(len(tests))], result.outcome, result.isolation


def evaluate_program(
    sandbox: Sandbox,
    program: str,
    public: Sequence[CodeTest],
    hidden: Sequence[CodeTest],
    *,
    test_timeout_s: float = 2.0,
    budget_s: float = 20.0,
) -> Evaluation:
    """Run ``program`` on every public and hidden test in one sandbox launch and judge the results."""
    tests = list(public) + list(hidden)
    reports, outcome, level = run_tests(sandbox, program, tests, test_timeout_s=test_timeout_s, budget_s=budget_s)
    judged = [_judge(t, r, outcome) for t, r in zip(tests, reports, strict=True)]
    return Evaluation(tuple(judged[: len(public)]), tuple(judged[len(public) :]), level)


def _cut(text: str, limit: int, *, keep_end: bool = False) -> str:
    if len(text) <= limit:
        return text
    more = len(text) - limit
    return f"[{more} characters cut] ..." + text[-limit:] if keep_end else text[:limit] + f"... [{more} characters cut]"


def _show_input(test: CodeTest) -> str:
    if test.kind == "stdio":
        return test.input
    if test.kind == "check":  # the test function's body: the assertions on the candidate
        _, _, body = test.input.partition("def check(candidate):")
        return "\n".join(line.strip() for line in body.splitlines() if line.strip())
    return f"{test.fn_name}({', '.join(repr(a) for a in test.args)})"


def _field(name: str, value: str) -> str:
    """``  name: value`` on one line, or the value as an indented block when it has several lines."""
    text = value[:-1] if value.endswith("\n") else value
    if "\n" not in text:
        return f"  {name}: {text}"
    return f"  {name}:\n" + "\n".join("    " + line for line in text.split("\n"))


def format_feedback(evaluation: Evaluation, *, max_tests: int = 2, chars: int = 300) -> str:
    """The observation after a submission: up to ``max_tests`` failing public tests, each field
    cut to ``chars`` characters, or a success message."""
    if evaluation.solved:
        return "Success: your program passes every test, public and hidden. The task is solved."
    failing = [(i, r) for i, r in enumerate(evaluation.public) if not r.passed]
    n_pub = len(evaluation.public)
    if not failing:
        return (
            f"Your program passes all {n_pub} public tests but fails some hidden tests. Think about edge cases "
            "and performance, then submit a corrected complete program."
        )
    lines = [f"Your program passes {n_pub - len(failing)} of {n_pub} public tests. Failing tests:"]
    for i, r in failing[:max_tests]:
        expected = {"stdio": r.test.output, "check": "the assertions hold"}.get(r.test.kind, repr(r.test.expected))
        lines.append(f"Test {i + 1}:")
        lines.append(_field("input", _cut(_show_input(r.test), chars)))
        lines.append(_field("expected", _cut(expected, chars)))
        lines.append(_field("actual", _cut(r.actual, chars) if r.actual else "(nothing)"))
        if r.error.strip():
            lines.append(_field("error", _cut(r.error.strip(), chars, keep_end=True)))
    if len(failing) > max_tests:
        lines.append(f"({len(failing) - max_tests} more failing public tests not shown.)")
    lines.append("Fix the program and submit the complete corrected program.")
    return "\n".join(lines)
