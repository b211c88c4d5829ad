"""The code environment (DeepCoder-MT): parsing, feedback, success, invalid actions, snapshots, oracle."""

from __future__ import annotations

import pytest

from arlkit.config import ConfigError
from arlkit.envs import has_oracle, make
from arlkit.envs.code.env import GAMMA, CodeConfig, CodeEnv, extract_program
from arlkit.envs.code.data import CodeProblem, CodeTest

FAST = dict(test_timeout_s=0.5, step_budget_s=3.0)


def _problem(**overrides: object) -> CodeProblem:
    values: dict[str, object] = dict(
        problem_id="double",
        title="Double it",
        difficulty="easy",
        statement="Read n and print 2n.",
        public_tests=(CodeTest("stdio", input="2\n", output="4\n"), CodeTest("stdio", input="5\n", output="10\n")),
        hidden_tests=tuple(CodeTest("stdio", input=f"{k}\n", output=f"{2 * k}\n") for k in (2, 5, -3, 0, 10**20)),
        reference="print(2 * int(input()))\n",
    )
    values.update(overrides)
    return CodeProblem(**values)  # type: ignore[arg-type]


@pytest.fixture()
def env() -> CodeEnv:
    e = make("code", **FAST)
    assert isinstance(e, CodeEnv)
    e.reset(CodeEnv.task_from_problem(_problem()), seed=0)
    return e


def test_registered_with_t_max_10_and_an_oracle() -> None:
    env = make("code")
    assert env.name == "code" and env.t_max == 10 and has_oracle(env)


@pytest.mark.parametrize(
    ("reply", "program", "strict"),
    [
        ("<think>t</think><action>```python\nprint(1)\n```</action>", "print(1)\n", True),
        ("```python\nprint(1)\n```\ntext\n```py\nprint(2)\n```", "print(2)\n", False),
        ("Here:\n```\nx = 1\n```", "x = 1\n", False),
        ("<action>print(3)</action>", "print(3)", False),
        ("<think>t</think><action>print(3)\nprint(4)</action>", "print(3)\nprint(4)", True),
        ("<think>plan ```python\nold()\n```</think><action>```python\nnew()\n```</action>", "new()\n", True),
    ],
)
def test_action_is_the_last_fenced_block(reply: str, program: str, strict: bool) -> None:
    parsed = extract_program(reply)
    assert (parsed.action, parsed.strict_format) == (program, strict)


@pytest.mark.parametrize("reply", ["", "no code here", "```python\n   \n```", "<action></action>", "```python\nunclosed"])
def test_replies_without_a_program_are_rejected(reply: str) -> None:
    parsed = extract_program(reply)
    assert parsed.action is None and parsed.error


def test_wrong_program_gets_at_most_two_failing_public_tests(env: CodeEnv) -> None:
    result = env.step("print(int(input()) + 1)\n")
    assert result.valid and not result.done and not result.success and result.reward == 0.0
    assert "passes 0 of 2 public tests" in result.observation
    assert "input: 2" in result.observation and "expected: 4" in result.observation and "actual: 3" in result.observation
    assert result.observation.count("Test ") == 2
    assert env.pass_rate("print(int(input()) + 1)\n") == 0.0


def test_feedback_fields_are_cut(env: CodeEnv) -> None:
    # Fields are cut to ~300 characters; an error keeps its end (where the exception is).
    result = env.step("import sys\nprint('y' * 5000)\nsys.stderr.write('z' * 5000 + '\\n')\nraise ValueError('boom')\n")
    for line in result.observation.splitlines():
        assert len(line) < 400, line[:80]
    assert "characters cut" in result.observation and "ValueError: boom" in result.observation


def test_passing_public_but_not_hidden_is_not_success(env: CodeEnv) -> None:
    program = "n = int(input())\nprint(4 if n == 2 else 10 if n == 5 else 1)\n"
    result = env.step(program)
    assert result.valid and not result.success and "passes all 2 public tests but fails some hidden" in result.observation
    assert env.pass_rate(program) == pytest.approx(2 / 5)


def test_reference_solves_and_ends_the_episode(env: CodeEnv) -> None:
    result = env.step("print(2 * int(input()))\n")
    assert (result.success, result.done, result.reward, result.valid) == (True, True, 1.0, True)
    after = env.step("print(1)\n")
    assert not after.valid and after.done
    assert env.shortest_solution_length() == 0 and env.success_probability(1) == 1.0


@pytest.mark.parametrize("action", ["", "   \n", "x" * 60_000])
def test_invalid_actions_keep_the_state(env: CodeEnv, action: str) -> None:
    env.step("print(0)\n")
    key = env.state_key()
    result = env.step(action)
    assert not result.valid and not result.done and env.state_key() == key


def test_function_call_problems_with_solution_class() -> None:
    problem = _problem(
        public_tests=(CodeTest("call", fn_name="pair_sum", args=([1, 2],), expected=3),),
        hidden_tests=(
            CodeTest("call", fn_name="pair_sum", args=([1, 2],), expected=3),
            CodeTest("call", fn_name="pair_sum", args=([],), expected=0),
        ),
        reference="def pair_sum(xs):\n    return sum(xs)\n",
    )
    env = make("code", **FAST)
    env.reset(CodeEnv.task_from_problem(problem), seed=0)
    assert "Define the function pair_sum" in env.prompt_text().instruction
    solved = env.step("class Solution:\n    def pair_sum(self, xs):\n        return sum(xs)\n")
    assert solved.success
    env.reset(CodeEnv.task_from_problem(problem), seed=0)
    wrong = env.step("def pair_sum(xs):\n    return tuple(xs)\n")
    assert "expected: 3" in wrong.observation and "actual: [1, 2]" in wrong.observation


def test_runaway_programs_are_judged_within_the_step_budget(env: CodeEnv) -> None:
    result = env.step("while True:\n    pass\n")
    assert result.valid and "time limit exceeded" in result.observation
    assert env.pass_rate("while True:\n    pass\n") == 0.0


def test_hidden_tests_are_not_readable_from_a_program(env: CodeEnv) -> None:
    from arlkit.envs.code.data import SHIPPED_FILE

    if env.sandbox.isolation == "none":
        pytest.skip("level none cannot hide folders")
    folder = str(SHIPPED_FILE.parent)
    probe = f"import os\nprint(os.path.exists({str(SHIPPED_FILE)!r}), os.path.isdir({folder!r}) and os.listdir({folder!r}))\n"
    shown = [r.actual for r in env.evaluate(probe).public]
    assert shown and all(text.split()[0] == "False" and "problems" not in text for text in shown), shown


def test_snapshot_restore_round_trips(env: CodeEnv) -> None:
    env.step("print(0)\n")
    snap = env.snapshot()
    key, history, render = env.state_key(), env.history, env.render()
    env.step("print(2 * int(input()))\n")
    assert env.state_key() != key
    env.restore(snap)
    assert (env.state_key(), env.history, env.render(), env.program) == (key, history, render, "print(0)\n")
    assert env.step("print(2 * int(input()))\n").success


def test_oracle_values() -> None:
    env = make("code", **FAST)
    assert isinstance(env, CodeEnv)
    env.reset(CodeEnv.task_from_problem(_problem()), seed=0)
    reference = "print(2 * int(input()))\n"
    assert env.optimal_actions(10) == [reference]
    assert env.action_values(1) == {reference: 1.0}
    env.step("print(0)\n")
    # Q*(wrong program) = gamma * V*(next) = gamma while a turn is left after it, 0 on the last turn.
    assert env.action_values(3) == {reference: 1.0, "print(0)\n": GAMMA}
    assert env.action_values(1) == {reference: 1.0, "print(0)\n": 0.0}
    assert env.action_values(0) == {reference: 0.0, "print(0)\n": 0.0}
    assert env.shortest_solution_length() == 1
    assert env.success_probability(1) == 1.0 and env.success_probability(0) == 0.0


def test_same_seed_same_transcript() -> None:
    env = make("code", **FAST)
    task = env.tasks("train", 1)[0]
    programs = ["print(1)\n", "def f(:\n", "import sys\nprint(sys.stdin.read()[::-1])\n"]

    def transcript() -> list[tuple[str, float, bool]]:
        rows = [(env.reset(task, 7), 0.0, False)]
        for p in programs:
            r = env.step(p)
            rows.append((r.observation, r.reward, r.done))
        return rows

    assert transcript() == transcript()


@pytest.mark.parametrize(
    "bad",
    [{"t_max": 0}, {"test_timeout_s": 0}, {"test_timeout_s": 30, "step_budget_s": 10}, {"sandbox": {"memory_mb": 8}},
     {"n_public": -1}, {"sandbox": {"min_isolation": "vm"}}, {"difficulty": "nightmare"}, {"feedback_chars": 5}],
)  # fmt: skip
def test_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises((ValueError, ConfigError)):
        make("code", **bad)


def test_config_accepts_strings() -> None:
    env = make("code", test_timeout_s="1.5", difficulty="hard")
    assert isinstance(env, CodeEnv) and env.config == CodeConfig(test_timeout_s=1.5, difficulty="hard")
    assert all(t.payload["difficulty"] == "hard" for t in env.tasks("train", 3))
