"""Rule-based mutations: every mutant parses, the rules do what they say, and an error state keeps
a mutant only when it lowers the pass rate."""

from __future__ import annotations

import ast
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.envs import make
from arlkit.envs.code.env import CodeEnv
from arlkit.envs.code.data import shipped_problems
from arlkit.envs.code.mutations import MUTATION_KINDS, enumerate_mutations, random_mutation

PROGRAM = """
def f(xs, k):
    total = 0
    for i in range(len(xs)):
        if xs[i] < k:
            total = total + xs[i] - 1
    return total
"""


def test_every_mutant_of_every_reference_parses_and_differs() -> None:
    count = 0
    for problem in shipped_problems():
        assert problem.reference is not None
        original = ast.unparse(ast.parse(problem.reference))
        mutants = enumerate_mutations(problem.reference)
        assert mutants, problem.problem_id
        for m in mutants:
            ast.parse(m.program)
            assert m.program != original and m.kind in MUTATION_KINDS and m.description
        count += len(mutants)
    assert count > 1000


def test_each_rule_on_a_small_program() -> None:
    by_kind: dict[str, list[str]] = {}
    for m in enumerate_mutations(PROGRAM):
        by_kind.setdefault(m.kind, []).append(m.program)
    assert any("xs[i] >= k" in p for p in by_kind["flip_comparison"])
    assert any("total = 1" in p for p in by_kind["off_by_one"]) and any("range(len(xs) + 1)" in p for p in by_kind["off_by_one"])
    assert any("1 - xs[i]" in p or "xs[i] - 1" not in p for p in by_kind["swap_operands"])
    assert any("k < xs[i]" in p for p in by_kind["swap_operands"])
    assert any("return total" not in p for p in by_kind["drop_statement"])
    for kind in MUTATION_KINDS:
        assert by_kind[kind], kind


def test_mutations_are_deterministic_and_unparsable_programs_have_none() -> None:
    assert enumerate_mutations(PROGRAM) == enumerate_mutations(PROGRAM)
    assert random_mutation(PROGRAM, random.Random(3)) == random_mutation(PROGRAM, random.Random(3))
    assert enumerate_mutations("def (:") == [] and random_mutation("def (:", random.Random(0)) is None
    with pytest.raises(ValueError, match="unknown mutation kind"):
        enumerate_mutations(PROGRAM, ("rename",))


_names = st.sampled_from(["a", "b", "n", "x"])
_exprs = st.recursive(
    st.one_of(_names, st.integers(-5, 5).map(str)),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*", "//", "%", "<", ">=", "==", " in "]), inner).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    ),
    max_leaves=6,
)
_stmts = st.one_of(
    st.tuples(_names, _exprs).map(lambda t: f"{t[0]} = {t[1]}"),
    _exprs.map(lambda e: f"if {e}:\n    pass\nelse:\n    x = 1"),
    _exprs.map(lambda e: f"while {e}:\n    break"),
    _exprs.map(lambda e: f"for i in range({e}):\n    a = i"),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_stmts, min_size=1, max_size=5))
def test_random_programs_only_ever_give_parsable_mutants(stmts: list[str]) -> None:
    program = "\n".join(stmts) + "\n"
    for m in enumerate_mutations(program):
        compile(m.program, "<mutant>", "exec")


def test_error_mutations_lower_the_pass_rate() -> None:
    env = make("code", test_timeout_s=0.5, step_budget_s=4.0)
    assert isinstance(env, CodeEnv)
    kept = 0
    for task in env.tasks("test", 4):
        env.reset(task, seed=0)
        reference = env.optimal_actions(env.t_max)[0]
        assert env.pass_rate(reference) == 1.0
        mutant = env.error_mutation(random.Random(task.task_id), max_tries=6)
        if mutant is not None:
            kept += 1
            ast.parse(mutant.program)
            assert env.pass_rate(mutant.program) < 1.0
            result = env.step(mutant.program)
            assert result.valid and not result.success
    assert kept >= 3
