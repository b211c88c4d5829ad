"""The InterCode-SQL reward: row-multiset IoU times Kendall tau of the row order
(docs/environments_sql.md, "The reward, exactly").

Definitions used by arlkit (written out because InterCode's code leaves them implicit):

- Every row becomes a string, ``str(tuple(row))``; results are compared as **multisets** of these
  strings. ``IoU = |P ∩ G| / |P ∪ G|`` with multiset intersection (minimum counts) and union
  (maximum counts). Two empty results give IoU = 1.
- **Order** counts only when the gold query sorts its result, i.e. has an ``ORDER BY`` at its
  outermost level (one inside a sub-query, a CTE or a window ``OVER (...)`` does not count): SQL
  leaves the order of an unsorted result unspecified, so it must not be scored. InterCode applies
  tau to every result; arlkit does not.
- tau is taken over the **intersected rows**: walk the prediction and keep each row while its
  count in ``P ∩ G`` is not used up; do the same with the gold rows. The k-th kept copy of a row
  in one list is matched with the k-th kept copy in the other, so every kept row has one position
  in each list. tau is Kendall's tau-a of these position pairs,
  ``(concordant - discordant) / (n (n - 1) / 2)``; positions are distinct, so there are no ties and
  tau-a equals tau-b. It is defined when n >= 2; otherwise the order factor is 1.
- ``reward = round(IoU * max(tau, 0), 2)`` when tau is used, else ``round(IoU, 2)``. A reversed
  order therefore scores 0 rather than a negative reward (InterCode would give a negative value).
  Success means reward 1.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = [
    "has_top_level_order_by",
    "kendall_tau_of_order",
    "multiset_iou",
    "row_strings",
    "sql_reward",
]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def row_strings(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Each row as the string of its tuple, ``(1, 'Ann')`` style."""
    return [str(tuple(row)) for row in rows]


def multiset_iou(pred: Sequence[str], gold: Sequence[str]) -> float:
    """|P ∩ G| / |P ∪ G| over multisets; 1.0 when both are empty."""
    p, g = Counter(pred), Counter(gold)
    union = sum((p | g).values())
    if union == 0:
        return 1.0
    return sum((p & g).values()) / union


def _kept(seq: Sequence[str], common: Counter[str]) -> list[tuple[str, int]]:
    """The rows of ``seq`` that belong to the intersection, as (row, occurrence index) in order."""
    left = Counter(common)
    seen: Counter[str] = Counter()
    out = []
    for item in seq:
        if left[item] > 0:
            left[item] -= 1
            out.append((item, seen[item]))
            seen[item] += 1
    return out


def _inversions(values: list[int]) -> int:
    """Number of pairs i < j with values[i] > values[j] (merge sort, O(n log n))."""
    if len(values) < 2:
        return 0
    mid = len(values) // 2
    left, right = values[:mid], values[mid:]
    count = _inversions(left) + _inversions(right)
    i = j = 0
    for k in range(len(values)):
        if j >= len(right) or (i < len(left) and left[i] <= right[j]):
            values[k] = left[i]
            i += 1
        else:
            values[k] = right[j]
            count += len(left) - i
            j += 1
    return count


def kendall_tau_of_order(pred: Sequence[str], gold: Sequence[str]) -> float | None:
    """Kendall tau between the order of the intersected rows in ``pred`` and in ``gold``
    (definition in the module docstring); ``None`` when fewer than two rows are shared."""
    common = Counter(pred) & Counter(gold)
    kept_pred = _kept(pred, common)
    n = len(kept_pred)
    if n < 2:
        return None
    gold_pos = {item: i for i, item in enumerate(_kept(gold, common))}
    positions = [gold_pos[item] for item in kept_pred]
    pairs = n * (n - 1) // 2
    discordant = _inversions(positions)
    return (pairs - 2 * discordant) / pairs


def has_top_level_order_by(sql: str) -> bool:
    """Whether ``sql`` has ``ORDER BY`` outside every parenthesis, string and comment."""
    words: list[str] = []
    depth, i, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            end = sql.find(close, i + 1)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and (ch.isalpha() or ch == "_"):
            match = _IDENT.match(sql, i)
            if match is not None:
                words.append(match.group(0).upper())
                i = match.end()
                continue
        i += 1
    return any(a == "ORDER" and b == "BY" for a, b in itertools.pairwise(words))


def sql_reward(pred_rows: Sequence[Sequence[Any]], gold_rows: Sequence[Sequence[Any]], *, ordered: bool) -> float:
    """The InterCode-SQL reward of a predicted result against the gold result.

    Args:
        pred_rows: the rows of the submitted (last) query.
        gold_rows: the rows of the gold query.
        ordered: whether the row order counts (the gold query has a top-level ``ORDER BY``).
    """
    pred, gold = row_strings(pred_rows), row_strings(gold_rows)
    iou = multiset_iou(pred, gold)
    if ordered:
        tau = kendall_tau_of_order(pred, gold)
        if tau is not None:
            return round(iou * max(tau, 0.0), 2)
    return round(iou, 2)
