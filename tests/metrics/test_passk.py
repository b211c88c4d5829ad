"""Unbiased pass@k, budgets, and bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.metrics import bootstrap_mean, paired_bootstrap_difference, pass_at_k, successes_within
from arlkit.budgets import Budget, resolve_budgets
from arlkit.metrics.passkt import default_ks, expected_optimum_per_task


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_the_exact_binomial_form(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    exact = 1.0 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_identities_and_monotonicity(nc: tuple[int, int]) -> None:
    n, c = nc
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)
    assert pass_at_k(n, c, n) == (1.0 if c > 0 else 0.0)
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(b >= a - 1e-12 for a, b in zip(values, values[1:]))


def test_zero_successes_give_exactly_zero_and_k_above_n_raises() -> None:
    assert pass_at_k(5, 0, 3) == 0.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 0, 8)  # the reference implementation wrongly returns 1.0 here
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    # hand-computed: n=4, c=2, k=2 -> 1 - C(2,2)/C(4,2) = 1 - 1/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)


def test_successes_within_is_monotone_in_the_budget() -> None:
    turns = [3, None, 7, 1, None, 12]
    counts = [successes_within(turns, T) for T in range(0, 15)]
    assert counts[0] == 0 and counts[3] == 2 and counts[7] == 3 and counts[14] == 4
    assert counts == sorted(counts)


def test_budgets_are_rounded_up_in_exact_arithmetic() -> None:
    assert resolve_budgets(["30%"], 10) == [3]  # the float form ceil(0.3 * 10) gives 4
    assert resolve_budgets(["25%", "50%", "75%", "100%"], 70) == [18, 35, 53, 70]
    assert resolve_budgets(["25%", "50%", "75%", "100%"], 10) == [3, 5, 8, 10]
    assert resolve_budgets(["5", "100%", "5"], 24) == [5, 24]
    assert resolve_budgets(["full", "25%"], 70) == [18, 70]
    for bad in (["0"], ["71"], ["0%"], ["abc"], ["2.5"], ["101%"], ["budgetmix"], []):
        with pytest.raises(ValueError):
            resolve_budgets(bad, 70)


def test_one_budget_parser_for_evaluation_and_training() -> None:
    # training's forms: full, budgetmix, turns and percentages, with the same wording as evaluation's
    turns = {spec: Budget.parse(spec).turns(24) for spec in ("full", "6", "25%", "budgetmix")}
    assert turns == {"full": (24,), "6": (6,), "25%": (6,), "budgetmix": (3, 5, 8, 10, 12, 15, 17, 20, 22, 24)}
    assert str(Budget.parse(" 25% ")) == "25%" and Budget.parse(6) == Budget.parse("6")  # the setting as written
    with pytest.raises(ValueError, match=r"budget '40' gives 40 turns; budgets must be between 1 and T_max = 24"):
        Budget.parse("40").turns(24)
    with pytest.raises(ValueError, match=r"budget '40' gives 40 turns; budgets must be between 1 and T_max = 24"):
        resolve_budgets(["40"], 24)
    with pytest.raises(ValueError, match=r"^budget 'often' is not full \(T_max\), budgetmix, a percentage of T_max "
                                         r"like 25% or a whole number of turns$"):
        Budget.parse("often")
    with pytest.raises(ValueError, match=r"^budget 'often' is not full \(T_max\), a percentage of T_max like 25% "
                                         r"or a whole number of turns$"):
        resolve_budgets(["often"], 24)


def test_default_ks_are_powers_of_two() -> None:
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(12) == [1, 2, 4, 8]
    assert default_ks(1) == [1]


def test_expected_optimum_reduces_to_structural_bound_when_deterministic() -> None:
    probs = np.array([1.0, 0.0, 1.0, 0.5])
    assert expected_optimum_per_task(probs, 1).tolist() == [1.0, 0.0, 1.0, 0.5]
    assert expected_optimum_per_task(probs, 2)[3] == pytest.approx(0.75)


def test_bootstrap_interval_is_seeded_and_contains_the_mean() -> None:
    values = np.random.default_rng(0).random(50)
    a = bootstrap_mean(values, seed=3)
    b = bootstrap_mean(values, seed=3)
    assert a == b
    assert a.low < a.value < a.high
    assert a.value == pytest.approx(values.mean())
    # the interval's width is close to the normal-theory width 2 * 1.96 * sd / sqrt(n)
    width = 2 * 1.96 * values.std(ddof=1) / np.sqrt(50)
    assert a.high - a.low == pytest.approx(width, rel=0.2)


def test_paired_bootstrap_uses_the_same_indices_for_both_runs() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(40)
    shifted = base + 0.1
    diff = paired_bootstrap_difference(shifted, base)
    # a constant shift has no paired variance at all; an unpaired comparison would be wide
    assert diff.value == pytest.approx(0.1) and diff.high - diff.low == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        paired_bootstrap_difference(base, base[:-1])


def test_cluster_bootstrap_resamples_whole_clusters() -> None:
    # two clusters with constant values: every resample is a mix of whole clusters,
    # so every bootstrap mean is a weighted mean of 0 and 1 with weights in steps of one cluster
    values = [0.0] * 5 + [1.0] * 5
    clusters = ["a"] * 5 + ["b"] * 5
    est = bootstrap_mean(values, clusters=clusters, resamples=500)
    assert est.low == 0.0 and est.high == 1.0
    narrow = bootstrap_mean(values, resamples=500)
    assert narrow.high - narrow.low < 0.8
