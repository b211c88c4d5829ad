"""The WebShop oracle: exact shortest solution lengths over the page graph (docs/environments.md#webshop).

A purchase scores 1 exactly when the product is *perfect* for the goal (type factor 1, every goal
attribute matched, price within the limit) and every goal option is matched by a chosen value
(:func:`~arlkit.envs.webshop.reward.options_matched`). Each click chooses one value of one option (replacing
that option's value), and one value can match several goal options, so on a perfect product with options
``o`` chosen ``need(o)`` is the fewest option clicks after which every goal option is matched (searched over
the values that match at least one goal option); ``k = need(nothing chosen)`` is at most ``|U_opt|`` (and
equal to it on every shipped goal), and a product whose values cannot match every goal option is not
perfect. Distances to success ``d(s)``, counting the final ``buy now``:

- item page of product ``i`` with options ``o``: ``need(o) + 1`` when ``i`` is perfect (else leave it), or
  ``1 + d(results)`` (``< prev``), or ``1 + d(search)``;
- detail page: ``1 + min(d(item), d(search))``;
- results of query ``q`` on page ``p``: ``|p' - p| + 2 + k_i`` for a perfect product ``i`` shown on page
  ``p'`` (turn pages, open it, choose, buy), the least over them, or ``1 + d(search)``;
- search page: ``1 + min_q d(results of q, page 1)`` over the oracle's queries: the goal's key words
  (:func:`goal_keywords`, the instruction without its price clause), the goal product's name, and one
  query per product type of the catalogue (what :meth:`~arlkit.envs.webshop.env.WebshopEnv.admissible_actions`
  offers there);
- after a purchase: 0 when it scored 1, else unsolvable.

Every path from the search page needs at least ``3 + k`` actions (search, open, ``k`` choices, buy), so
``d`` is the exact shortest length whenever one of the oracle's queries shows a perfect product with the
least ``k`` on its first page, which holds for every shipped goal (tested); otherwise it is the shortest plan
through the oracle's queries (another query might do better).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from arlkit.envs.webshop.catalog import Catalog, Goal, Product
from arlkit.envs.webshop.pages import PAGE_SIZE, State
from arlkit.envs.webshop.reward import attribute_matched, normalize_color, similar, type_reward

__all__ = ["GoalOracle", "goal_keywords"]

_PRICE_CLAUSE = ", and price lower than "


def goal_keywords(goal: Goal) -> str:
    """The oracle's search: the instruction without its price clause."""
    cut = goal.instruction.find(_PRICE_CLAUSE)
    return goal.instruction[:cut] if cut >= 0 else goal.instruction


Matches = Mapping[str, Mapping[str, frozenset[int]]]
"""Per option name, each value that matches goal options, with the positions of the goal options it matches."""


def _matches(product: Product, goal: Goal) -> Matches | None:
    """The option values of ``product`` that match ``goal``'s options, when ``product`` is perfect; else ``None``."""
    if product.price > goal.price_upper or type_reward(product, goal) < 1.0:
        return None
    if not all(attribute_matched(product, a) for a in goal.attributes):
        return None
    wanted = [normalize_color(o) for o in goal.options]
    matches: dict[str, dict[str, frozenset[int]]] = {}
    for name, values in product.options:
        for value in values:
            hit = frozenset(i for i, w in enumerate(wanted) if similar(normalize_color(value), w))
            if hit:
                matches.setdefault(name, {})[value] = hit
    if _clicks(matches, {}, len(wanted)) is None:
        return None
    return matches


def _clicks(matches: Matches, chosen: Mapping[str, str], n_options: int) -> int | None:
    """Fewest option clicks from ``chosen`` after which every goal option is matched (``None``: never)."""
    names = sorted(set(matches) | set(chosen))
    choices = [[(chosen.get(name), 0)] + [(v, 1) for v in matches.get(name, {}) if v != chosen.get(name)]
               for name in names]  # fmt: skip
    best = None
    for pick in itertools.product(*choices):
        cost = sum(c for _, c in pick)
        if best is not None and cost >= best:
            continue
        hit: set[int] = set()
        for name, (value, _) in zip(names, pick):
            hit |= matches.get(name, {}).get(value, frozenset()) if value is not None else frozenset()
        if len(hit) == n_options:
            best = cost
    return best


@dataclass
class GoalOracle:
    """Distances to success for one goal (module docstring); built once per goal and cached."""

    catalog: Catalog
    goal: Goal
    search: Callable[[str], tuple[str, ...]]
    _need: dict[tuple[str, tuple[tuple[str, str], ...]], int | None] = field(default_factory=dict, repr=False)

    @cached_property
    def perfect(self) -> dict[str, Matches]:
        """asin -> the matching option values (:data:`Matches`) of every perfect product."""
        out = {}
        for product in self.catalog.products:
            matches = _matches(product, self.goal)
            if matches is not None:
                out[product.asin] = matches
        return out

    @cached_property
    def queries(self) -> tuple[str, ...]:
        """The oracle's searches, its own first (module docstring)."""
        own = [goal_keywords(self.goal)]
        gold = self.catalog.by_asin.get(self.goal.asin)
        if gold is not None:
            own += [gold.title, gold.query]
        return tuple(dict.fromkeys(q for q in [*own, *self.catalog.queries] if q.strip()))

    def results_distance(self, query: str, page_no: int) -> int | None:
        """Fewest actions from results page ``page_no`` of ``query`` without searching again."""
        best = None
        for rank, asin in enumerate(self.search(query)):
            need = self.need(asin, ())
            if need is not None:
                d = abs(rank // PAGE_SIZE + 1 - page_no) + 2 + need
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
        matches = self.perfect.get(asin)
        if matches is None:
            return None
        key = (asin, options)
        if key not in self._need:
            self._need[key] = _clicks(matches, dict(options), len(self.goal.options))
        return self._need[key]

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
