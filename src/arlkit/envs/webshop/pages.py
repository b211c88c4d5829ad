"""WebShop's pages in text mode: the state, what each page lets you click, the transitions and the page text.

Pages and moves (WebShop's text environment):

- **search**: ``search[query]`` -> the results of ``query``, page 1;
- **results**: 10 products a page out of the top 50; ``click[<asin>]`` opens a product shown on this page,
  ``click[next >]`` / ``click[< prev]`` turn the page, ``click[back to search]`` goes back (as on every page);
- **item**: ``click[<option value>]`` chooses that value for its option, ``click[description]``,
  ``click[features]``, ``click[reviews]`` open a detail page, ``click[< prev]`` returns to the results
  (the chosen options are forgotten, as in WebShop), ``click[buy now]`` buys the product with the chosen
  options and ends the episode;
- **detail** (description, features, reviews): ``click[< prev]`` returns to the product, options kept.

Clicks are matched case-insensitively; anything not offered on the current page is invalid and changes
nothing. The state is small and immutable (:class:`State`), so snapshots are the state itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from arlkit.envs.webshop.catalog import Catalog, Goal, Product
from arlkit.envs.webshop.search import normalize_query

__all__ = [
    "BACK", "BUY", "DETAILS", "NEXT", "PAGE_SIZE", "PREV", "Move", "State", "clickables", "parse_move", "render",
    "transition",
]  # fmt: skip

PAGE_SIZE = 10
"""Products per results page (WebShop's ``PRODUCT_WINDOW``)."""
BACK, NEXT, PREV, BUY = "back to search", "next >", "< prev", "buy now"
DETAILS = ("description", "features", "reviews")
_MOVE = re.compile(r"\s*(search|click)\s*\[(.*)\]\s*", re.IGNORECASE | re.DOTALL)
_TITLE_CHARS = 140


@dataclass(frozen=True)
class State:
    """Where the shopper is.

    Attributes:
        page: ``search``, ``results``, ``item``, ``detail`` or ``done``.
        query: the last search (normalised), on results, item and detail pages.
        page_no: the results page (1-based).
        asin: the product open on item and detail pages (and the one bought).
        options: the chosen ``(option, value)`` pairs, sorted by option.
        detail: which detail page is open.
    """

    page: str = "search"
    query: str = ""
    page_no: int = 1
    asin: str = ""
    options: tuple[tuple[str, str], ...] = ()
    detail: str = ""

    def key(self) -> str:
        """A compact, hashable description (the environment's state key adds the task)."""
        chosen = ",".join(f"{k}={v}" for k, v in self.options)
        return f"{self.page}|{self.query}|{self.page_no}|{self.asin}|{chosen}|{self.detail}"


class Move(NamedTuple):
    """A parsed action: ``kind`` is ``search`` or ``click``; ``arg`` is lower-cased, spaces collapsed."""

    kind: str
    arg: str


def parse_move(action: object) -> Move | None:
    """``search[...]`` or ``click[...]``, or ``None`` for anything else."""
    if not isinstance(action, str):
        return None
    match = _MOVE.fullmatch(action)
    if match is None:
        return None
    return Move(match.group(1).lower(), " ".join(match.group(2).lower().split()))


SearchFn = Callable[[str], tuple[str, ...]]


def _pages(results: tuple[str, ...]) -> int:
    return max(1, math.ceil(len(results) / PAGE_SIZE))


def _shown(results: tuple[str, ...], page_no: int) -> tuple[str, ...]:
    return results[(page_no - 1) * PAGE_SIZE : page_no * PAGE_SIZE]


def clickables(state: State, catalog: Catalog, search: SearchFn) -> list[str]:
    """What can be clicked on the current page, in page order (lower case)."""
    if state.page == "results":
        results = search(state.query)
        out = [BACK] + ([PREV] if state.page_no > 1 else []) + ([NEXT] if state.page_no < _pages(results) else [])
        return out + [asin.lower() for asin in _shown(results, state.page_no)]
    if state.page == "item":
        product = catalog.by_asin[state.asin]
        values = [v for _, vals in product.options for v in vals if v not in (BACK, PREV, BUY, *DETAILS)]
        return [BACK, PREV, *DETAILS, BUY, *dict.fromkeys(values)]
    if state.page == "detail":
        return [BACK, PREV]
    return []


def _option_of(product: Product, value: str) -> str:
    """The option a clicked value belongs to (the last one offering it, as WebShop's page maps it)."""
    return [name for name, values in product.options if value in values][-1]


def transition(state: State, move: Move, catalog: Catalog, search: SearchFn, max_query_chars: int) -> State | str:
    """The state after ``move``, or why it is invalid (a string). ``buy now`` returns the ``done`` state."""
    if state.page == "done":
        return "the episode is over"
    if move.kind == "search":
        if state.page != "search":
            return "search is only possible on the search page (click[back to search] first)"
        if not move.arg:
            return "the search query is empty"
        if len(move.arg) > max_query_chars:
            return f"the search query is {len(move.arg)} characters long; the limit is {max_query_chars}"
        return State("results", normalize_query(move.arg), 1)
    offered = clickables(state, catalog, search)
    if move.arg not in offered:
        shown = move.arg if len(move.arg) <= 60 else move.arg[:60] + "..."
        return f"{shown!r} cannot be clicked on this page"
    arg = move.arg
    if arg == BACK:
        return State()
    if state.page == "results":
        if arg in (NEXT, PREV):
            return replace(state, page_no=state.page_no + (1 if arg == NEXT else -1))
        return State("item", state.query, state.page_no, arg.upper())
    if state.page == "detail":  # only < prev is left: back to the product, options kept
        return replace(state, page="item", detail="")
    if arg == PREV:
        return State("results", state.query, state.page_no)
    if arg in DETAILS:
        return replace(state, page="detail", detail=arg)
    if arg == BUY:
        return replace(state, page="done")
    name = _option_of(catalog.by_asin[state.asin], arg)
    chosen = dict(state.options)
    chosen[name] = arg
    return replace(state, options=tuple(sorted(chosen.items())))


def _actions(state: State, catalog: Catalog, search: SearchFn) -> str:
    if state.page == "search":
        return "Available actions: search[<your query>]"
    return "Available actions: " + ", ".join(f"click[{c}]" for c in clickables(state, catalog, search))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render(state: State, goal: Goal, catalog: Catalog, search: SearchFn, detail_chars: int) -> str:
    """The page as text: the instruction, the page and the actions it offers."""
    head = f"Instruction: {goal.instruction}"
    if state.page == "search":
        return f"{head}\nSearch page: type a query to look for products.\n{_actions(state, catalog, search)}"
    if state.page == "results":
        results = search(state.query)
        lines = [f'Search results for "{_cut(state.query, 80)}" (page {state.page_no} of {_pages(results)}; '
                 f"{len(results)} results):"]  # fmt: skip
        for asin in _shown(results, state.page_no):
            product = catalog.by_asin[asin]
            lines.append(f"[{asin.lower()}] {_cut(product.title, _TITLE_CHARS)} | {product.price_tag}")
        if not results:
            lines.append("No product matches this query.")
        return "\n".join([head, *lines, _actions(state, catalog, search)])
    product = catalog.by_asin[state.asin]
    if state.page == "detail":
        if state.detail == "description":
            body = product.description or "(no description)"
        elif state.detail == "features":
            body = "\n".join(f"- {b}" for b in product.bullets) or "(no features listed)"
        else:
            body = "\n".join(f"- {r.score}/5 {r.title}: {r.body}" for r in product.reviews) or "(no reviews yet)"
        title = f"{state.detail.capitalize()} of [{state.asin.lower()}]:"
        return f"{head}\n{title}\n{_cut(body, detail_chars)}\n{_actions(state, catalog, search)}"
    chosen = dict(state.options)
    lines = [f"Product [{state.asin.lower()}]: {_cut(product.title, _TITLE_CHARS)}",
             f"Price: {product.price_tag} | Rating: {product.rating}"]  # fmt: skip
    for name, values in product.options:
        picked = f" (chosen: {chosen[name]})" if name in chosen else ""
        lines.append(f"{name}: {', '.join(values)}{picked}")
    if not product.options:
        lines.append("This product has no options to choose.")
    return "\n".join([head, *lines, _actions(state, catalog, search)])
