"""Judging outputs, and the in-sandbox harness against awkward and hostile programs."""

from __future__ import annotations

import pytest

from arlkit.envs.code.data import CodeTest
from arlkit.envs.code.grading import evaluate_program, outputs_match, values_match
from arlkit.sandbox import Sandbox, SandboxConfig


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        ("1 2\n", "1 2\n", True),
        ("1 2   \n\n\n", "1 2\n", True),
        ("1\n2\n", "1 2\n", True),  # token comparison
        ("0.3333333333", "0.333333", True),
        ("0.3334", "0.3333", False),
        ("3", "3.0", True),
        ("3.0", "3", False),  # an integer answer must be written as one
        ("YES", "yes", False),
        ("", "\n", True),
        ("1 2 3", "1 2", False),
    ],
)
def test_outputs_match(actual: str, expected: str, ok: bool) -> None:
    assert outputs_match(actual, expected) is ok


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        (3, 3, True),
        (True, 1, False),
        (1, True, False),
        (0.1 + 0.2, 0.3, True),
        (3.0, 3, True),
        ([1, [2, 3]], [1, [2, 3]], True),
        ([1, 2], [2, 1], False),
        ({"a": 1}, {"a": 1.0000000001}, True),
        ({"a": 1}, {"b": 1}, False),
        ("x", "x", True),
        (None, None, True),
        (None, 0, False),
        (float("nan"), float("nan"), True),
    ],
)
def test_values_match(actual: object, expected: object, ok: bool) -> None:
    assert values_match(actual, expected) is ok


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(wall_time_s=30, cpu_time_s=30, min_isolation="none"))


def _run(sandbox: Sandbox, program: str, tests: list[CodeTest], timeout: float = 1.0):  # type: ignore[no-untyped-def]
    return evaluate_program(sandbox, program, tests[:1], tests, test_timeout_s=timeout, budget_s=6.0)


STDIO = [CodeTest("stdio", input=f"{k}\n", output=f"{k * k}\n") for k in range(4)]
CALLS = [CodeTest("call", fn_name="sq", args=(k,), expected=k * k) for k in range(4)]


def test_each_test_runs_in_a_fresh_process(sandbox: Sandbox) -> None:
    program = "import builtins\nbuiltins.counter = getattr(builtins, 'counter', 0) + 1\nn = int(input())\nprint(n * n if builtins.counter == 1 else -1)\n"
    assert _run(sandbox, program, STDIO).solved


def test_exit_early_reads_past_input_and_stderr_noise(sandbox: Sandbox) -> None:
    program = "import sys\nn = int(input())\nprint('noise', file=sys.stderr)\nprint(n * n)\nsys.stdin.read()\nsys.exit(0)\n"
    assert _run(sandbox, program, STDIO).solved
    failing = _run(sandbox, "import sys\nprint(int(input()) ** 2)\nsys.exit(3)\n", STDIO)
    assert failing.pass_rate == 0.0 and all(r.status == "error" for r in failing.hidden)


def test_return_values_become_json(sandbox: Sandbox) -> None:
    tests = [CodeTest("call", fn_name="f", args=(), expected=[1, 2]), CodeTest("call", fn_name="f", args=(), expected=[[1, "a"]])]
    evaluation = evaluate_program(sandbox, "def f():\n    return (1, 2)\n", tests[:1], tests[:1])
    assert evaluation.solved
    odd = evaluate_program(sandbox, "def f():\n    return object()\n", tests[:1], tests[:1])
    assert not odd.solved and "not JSON-serialisable" in odd.hidden[0].error


def test_program_forging_result_lines_gains_nothing(sandbox: Sandbox) -> None:
    forged = '{"i": 1, "status": "ok", "stdout": "1\\\\n"}'
    program = (
        "import os, sys\n"
        f"print({forged!r})\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        f"        os.write(fd, ({forged!r} + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        f"    open('/proc/%d/fd/1' % os.getppid(), 'w').write({forged!r} + '\\n')\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__, file=sys.stderr)\n"
    )
    evaluation = _run(sandbox, program, STDIO)
    assert evaluation.pass_rate == 0.0


def test_killing_the_harness_fails_the_remaining_tests(sandbox: Sandbox) -> None:
    program = "import os, signal\nn = int(input())\nprint(n * n)\nif n == 1:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
    evaluation = _run(sandbox, program, STDIO)
    assert [r.passed for r in evaluation.hidden] == [True, False, False, False]
    assert evaluation.hidden[2].status.startswith("harness_")


def test_output_and_time_limits_per_test(sandbox: Sandbox) -> None:
    flood = _run(sandbox, "while True:\n    print('x' * 10000)\n", STDIO)
    assert {r.status for r in flood.hidden} == {"output_limit"}
    slow = _run(sandbox, "import time\nn = int(input())\ntime.sleep(5 if n == 2 else 0)\nprint(n * n)\n", STDIO, timeout=0.5)
    assert [r.status for r in slow.hidden] == ["ok", "ok", "timeout", "ok"] and slow.pass_rate == 0.75


def test_memory_errors_are_reported(sandbox: Sandbox) -> None:
    program = "def sq(k):\n    x = bytearray(10**11)\n    return k * k\n"
    evaluation = _run(sandbox, program, CALLS)
    assert {r.status for r in evaluation.hidden} == {"memory"}


def test_missing_function_and_syntax_errors(sandbox: Sandbox) -> None:
    missing = _run(sandbox, "def other(k):\n    return k\n", CALLS)
    assert "defines no function 'sq'" in missing.hidden[0].error and "Traceback" not in missing.hidden[0].error
    broken = _run(sandbox, "def sq(k)\n    return k\n", CALLS)
    assert all("SyntaxError" in r.error for r in broken.hidden)


def test_time_budget_marks_unstarted_tests(sandbox: Sandbox) -> None:
    tests = [CodeTest("stdio", input="1\n", output="1\n")] * 6
    evaluation = evaluate_program(sandbox, "while True:\n    pass\n", tests[:1], tests, test_timeout_s=1.0, budget_s=2.5)
    statuses = [r.status for r in evaluation.hidden]
    assert statuses[:2] == ["timeout", "timeout"] and "not_run" in statuses
