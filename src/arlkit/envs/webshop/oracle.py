"""The WebShop oracle: exact shortest solution lengths over the page graph (docs/environments.md#webshop).

A purchase scores 1 exactly when the product is *perfect* for the goal (type factor 1, every goal
attribute matched, price within the limit) and at least ``n = |U_opt|`` of the chosen options count
(:func:`~arlkit.envs.webshop.reward.option_counts`): each click chooses one option, so a perfect product
needs ``n`` option clicks from a fresh page, and a product where fewer than ``n`` options can count
is not perfect. Distances to success ``d(s)``, counting the final ``buy now``:

- item page of product ``i`` with options ``o``: ``n - counting(o) + 1`` when ``i`` is perfect (else
  leave it), or ``1 + d(results)`` (``< prev``), or ``1 + d(search)``;
- detail page: ``1 + min(d(item), d(search))``;
- results of query ``q`` on page ``p``: ``|p' - p| + 2 + n`` for the nearest page ``p'`` showing a
  perfect product (turn pages, open it, choose, buy), or ``1 + d(search)``;
- search page: ``1 + min_q d(results of q, page 1)`` over the oracle's queries: the goal's key words
  (:func:`goal_keywords`, the instruction without its price clause), the goal product's name, and one
  query per product type of the catalogue (what :meth:`~arlkit.envs.webshop.env.WebshopEnv.admissible_actions`
  offers there);
- after a purchase: 0 when it scored 1, else unsolvable.

Every path from the search page needs at least ``3 + n`` actions (search, open, ``n`` choices, buy), so
``d`` is the exact shortest length whenever one of the oracle's queries shows a perfect product on its
first page, which holds for every shipped goal (tested); otherwise it is the shortest plan through the
oracle's queries (another query might do better).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from arlkit.envs.webshop.catalog import Catalog, Goal, Product
from arlkit.envs.webshop.pages import PAGE_SIZE, State
from arlkit.envs.webshop.reward import attribute_matched, option_counts, type_reward

__all__ = ["GoalOracle", "goal_keywords"]

_PRICE_CLAUSE = ", and price lower than "


def goal_keywords(goal: Goal) -> str:
    """The oracle's search: the instruction without its price clause."""
    cut = goal.instruction.find(_PRICE_CLAUSE)
    return goal.instruction[:cut] if cut >= 0 else goal.instruction


def _perfect_options(product: Product, goal: Goal) -> Mapping[str, frozenset[str]] | None:
    """Per option, the values that count, when ``product`` is perfect for ``goal``; else ``None``."""
    if product.price > goal.price_upper or type_reward(product, goal) < 1.0:
        return None
    if not all(attribute_matched(product, a) for a in goal.attributes):
        return None
    counting = {name: frozenset(v for v in vals if option_counts(product, goal, name, v)) for name, vals in product.options}
    if sum(1 for values in counting.values() if values) < len(goal.options):
        return None
    return counting


@dataclass
class GoalOracle:
    """Distances to success for one goal (module docstring); built once per goal and cached."""

    catalog: Catalog
    goal: Goal
    search: Callable[[str], tuple[str, ...]]

    @cached_property
    def perfect(self) -> dict[str, Mapping[str, frozenset[str]]]:
        """asin -> (option -> counting values) of every perfect product."""
        out = {}
        for product in self.catalog.products:
            counting = _perfect_options(product, self.goal)
            if counting is not None:
                out[product.asin] = counting
        return out

    @cached_property
    def queries(self) -> tuple[str, ...]:
        """The oracle's searches, its own first (module docstring)."""
        own = [goal_keywords(self.goal)]
        gold = self.catalog.by_asin.get(self.goal.asin)
        if gold is not None:
            own += [gold.title, gold.query]
        return tuple(dict.fromkeys(q for q in [*own, *self.catalog.queries] if q.strip()))

    @property
    def n_options(self) -> int:
        """``|U_opt|``: option clicks a perfect product needs from a fresh page."""
        return len(self.goal.options)

    def results_distance(self, query: str, page_no: int) -> int | None:
        """Fewest actions from results page ``page_no`` of ``query`` without searching again."""
        best = None
        for rank, asin in enumerate(self.search(query)):
            if asin in self.perfect:
                d = abs(rank // PAGE_SIZE + 1 - page_no) + 2 + self.n_options
                best = d if best is None else min(best, d)
        return best

    @cached_property
    def best_search(self) -> tuple[str | None, int | None]:
        """The oracle's best query and ``d(search page)``."""
        best: tuple[str | None, int | None] = (None, None)
        for query in self.queries:
            d = self.results_distance(query, 1)
            if d is not None and (best[1] is None or d + 1 < best[1]):
                best = (query, d + 1)
        return best

    def need(self, asin: str, options: tuple[tuple[str, str], ...]) -> int | None:
        """Option clicks still needed on product ``asin`` with ``options`` chosen (``None``: not perfect)."""
        counting = self.perfect.get(asin)
        if counting is None:
            return None
        have = sum(1 for name, value in options if value in counting.get(name, ()))
        return max(0, self.n_options - have)

    def distance(self, state: State, score: float | None = None) -> int | None:
        """``d(state)``; ``score`` is the purchase's score on the ``done`` page."""
        if state.page == "done":
            return 0 if score is not None and score >= 1.0 else None
        candidates: list[int | None] = []
        search = self.best_search[1]
        if state.page == "search":
            return search
        back = None if search is None else search + 1
        if state.page == "results":
            candidates = [self.results_distance(state.query, state.page_no), back]
        elif state.page in ("item", "detail"):
            need = self.need(state.asin, state.options)
            here = None if need is None else need + 1
            results = _least([self.results_distance(state.query, state.page_no), back])
            item = _least([here, None if results is None else results + 1, back])
            candidates = [item] if state.page == "item" else [None if item is None else item + 1, back]
        return _least(candidates)


def _least(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None
