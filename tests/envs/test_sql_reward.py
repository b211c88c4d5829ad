"""The InterCode-SQL reward: IoU of row multisets times Kendall tau of the intersected order."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.envs.sql.reward import (
    has_top_level_order_by,
    kendall_tau_of_order,
    multiset_iou,
    row_strings,
    sql_reward,
)


def brute_tau(pred: list[str], gold: list[str]) -> float | None:
    """Reference: match the k-th shared copy of each row in both lists, then count every pair."""
    common = Counter(pred) & Counter(gold)

    def kept(seq: list[str]) -> list[tuple[str, int]]:
        left, seen, out = Counter(common), Counter(), []
        for x in seq:
            if left[x] > 0:
                left[x] -= 1
                out.append((x, seen[x]))
                seen[x] += 1
        return out

    a, g = kept(pred), kept(gold)
    if len(a) < 2:
        return None
    pos = {item: i for i, item in enumerate(g)}
    conc = disc = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        if pos[a[i]] < pos[a[j]]:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / (conc + disc)


def rows(*values: object) -> list[tuple[object, ...]]:
    return [(v,) for v in values]


class TestHandDerived:
    def test_identical_ordered_result_scores_one(self) -> None:
        assert sql_reward(rows(1, 2, 3), rows(1, 2, 3), ordered=True) == 1.0

    def test_one_adjacent_swap_in_four_rows(self) -> None:
        # IoU = 4/4 = 1. Kept order in pred: b a c d -> gold positions 1 0 2 3.
        # 6 pairs, one discordant (b, a): tau = (5 - 1) / 6 = 0.666..., rounded 0.67.
        assert sql_reward(rows("b", "a", "c", "d"), rows("a", "b", "c", "d"), ordered=True) == 0.67

    def test_swap_ignored_when_gold_is_unordered(self) -> None:
        assert sql_reward(rows("b", "a", "c", "d"), rows("a", "b", "c", "d"), ordered=False) == 1.0

    def test_partial_overlap_in_order(self) -> None:
        # P = {a,b,c,x}, G = {a,b,c,d}: intersection 3, union 5 -> IoU 0.6; a b c keep their order -> tau 1.
        assert sql_reward(rows("a", "b", "c", "x"), rows("a", "b", "c", "d"), ordered=True) == 0.6

    def test_reversed_order_is_clipped_at_zero(self) -> None:
        # tau of a full reversal of 3 rows = (0 - 3) / 3 = -1 -> max(-1, 0) * IoU = 0.
        assert kendall_tau_of_order(["c", "b", "a"], ["a", "b", "c"]) == -1.0
        assert sql_reward(rows("c", "b", "a"), rows("a", "b", "c"), ordered=True) == 0.0

    def test_duplicates_count_as_a_multiset(self) -> None:
        # P = [1,1,2], G = [1,2,2]: min counts {1:1, 2:1} = 2, max counts {1:2, 2:2} = 4 -> IoU 0.5.
        assert multiset_iou(["1", "1", "2"], ["1", "2", "2"]) == 0.5
        # Kept P: (1,0), (2,0); kept G: (1,0), (2,0) -> same order -> tau 1 -> reward 0.5.
        assert sql_reward(rows(1, 1, 2), rows(1, 2, 2), ordered=True) == 0.5

    def test_single_shared_row_leaves_tau_undefined(self) -> None:
        # One shared row: tau undefined, reward = IoU = 1 / 3 -> 0.33.
        assert kendall_tau_of_order(["a", "x"], ["y", "a"]) is None
        assert sql_reward(rows("a", "x"), rows("y", "a"), ordered=True) == 0.33

    def test_both_empty_is_one_and_one_empty_is_zero(self) -> None:
        assert sql_reward([], [], ordered=True) == 1.0
        assert sql_reward(rows(1), [], ordered=False) == 0.0
        assert sql_reward([], rows(1), ordered=False) == 0.0

    def test_rows_compare_as_strings(self) -> None:
        # 1 and 1.0 are different strings: "(1,)" vs "(1.0,)".
        assert row_strings([(1,), (1.0,), ("1",)]) == ["(1,)", "(1.0,)", "('1',)"]
        assert sql_reward([(1,)], [(1.0,)], ordered=False) == 0.0

    def test_three_of_five_shifted(self) -> None:
        # G = a b c d e, P = c a b d e. Gold positions 2 0 1 3 4: inversions (2,0), (2,1) -> 2 of 10 pairs.
        # tau = (8 - 2) / 10 = 0.6.
        assert kendall_tau_of_order(list("cabde"), list("abcde")) == pytest.approx(0.6)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abcdef"), max_size=12),
    st.lists(st.sampled_from("abcdef"), max_size=12),
)
def test_tau_matches_the_pairwise_reference(pred: list[str], gold: list[str]) -> None:
    fast, slow = kendall_tau_of_order(pred, gold), brute_tau(pred, gold)
    assert (fast is None) == (slow is None)
    if fast is not None:
        assert fast == pytest.approx(slow, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=10), st.lists(st.integers(0, 5), max_size=10), st.booleans())
def test_reward_is_in_unit_interval_symmetric_iou_and_one_iff_equal(p: list[int], g: list[int], ordered: bool) -> None:
    r = sql_reward(rows(*p), rows(*g), ordered=ordered)
    assert 0.0 <= r <= 1.0
    assert multiset_iou(row_strings(rows(*p)), row_strings(rows(*g))) == multiset_iou(
        row_strings(rows(*g)), row_strings(rows(*p))
    )
    if ordered and p == g:
        assert r == 1.0
    if not ordered and sorted(p) == sorted(g):
        assert r == 1.0


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("select a from t order   by a desc limit 3", True),
        ("SELECT a FROM t", False),
        ("SELECT a FROM (SELECT a FROM t ORDER BY a)", False),
        ("WITH x AS (SELECT a FROM t ORDER BY a) SELECT a FROM x", False),
        ("SELECT a, row_number() OVER (ORDER BY a) FROM t", False),
        ("SELECT 'order by' FROM t", False),
        ("SELECT a FROM t -- ORDER BY a", False),
        ("SELECT a FROM t /* ORDER BY a */", False),
        ('SELECT "order by" FROM t', False),
        ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", True),
        ("SELECT border, bye FROM t", False),
    ],
)
def test_top_level_order_by(sql: str, expected: bool) -> None:
    assert has_top_level_order_by(sql) is expected
