"""WebShop's purchase score, written from the paper's formula (Yao et al. 2022, §3.2; docs/environments.md#webshop).

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price]) / (|U_att| + |U_opt| + 1)

``U`` is the goal (attributes, options, price limit) and ``Y`` the purchase (the product bought and the
options chosen on its page). What counts as a match follows the rules of WebShop's reference engine:

- **attribute**: a goal attribute is matched when one of the product's attributes has a token-set
  similarity above 85 (rapidfuzz's ``token_set_ratio`` on lower-cased alphanumerics, the measure
  ``thefuzz`` computes), else when the attribute's text occurs in the product's title, features or description;
- **option**: each chosen option counts when its value equals a goal option (option names in
  :data:`EXACT_OPTIONS`: ``size``) or is similar above 85 to one (every other name), both after colour
  normalisation, else when the chosen value occurs in the product's text. The count is capped at
  ``|U_opt|``: an intersection cannot hold more options than the goal names (WebShop's code can exceed it
  when more options are chosen than the goal names, and so score above 1);
- **price**: the product's price is at most the goal's limit;
- **type**: ``r_type`` compares the product with the goal's own product. It is 1 when they come from the
  same search query, share at least two category levels, or the product's name holds more than 20% of the
  content words of the goal's name; 0.5 otherwise; then 0.1 when under 10% of those words are shared and 0
  when none is. WebShop takes a name's nouns with a spaCy model that is not on PyPI; arlkit takes its
  content words (:func:`content_words`: alphabetic words of two letters or more, function words left out).

A purchase succeeds when ``r = 1``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from arlkit.envs.webshop.search import require_extra

if TYPE_CHECKING:
    from arlkit.envs.webshop.catalog import Goal, Product

__all__ = [
    "EXACT_OPTIONS",
    "FUZZY_THRESHOLD",
    "PurchaseScore",
    "attribute_matched",
    "content_words",
    "normalize_color",
    "option_counts",
    "score_purchase",
    "similar",
    "type_reward",
    "value_counts",
]

FUZZY_THRESHOLD = 85.0
"""Token-set similarity (0-100) above which two texts match (WebShop's threshold)."""
EXACT_OPTIONS = frozenset({"size"})
"""Option names whose values must match exactly (WebShop: sizes; ``"x-large"`` is not ``"xx-large"``)."""

# Base colours an option value is reduced to before matching ("navy blue" -> "navy", "light grey" -> "grey").
_COLOURS = frozenset(
    "beige black blue bronze brown burgundy camel charcoal coral cream gold gray green grey indigo ivory khaki "
    "lavender lilac magenta maroon mint mustard navy olive orange peach pink plum purple red rose rust silver tan "
    "taupe teal turquoise violet white wine yellow".split()
)
_FUNCTION_WORDS = frozenset(
    "a about an and are as at be by for from has have in into is it its of on or per that the this to with "
    "without".split()
)
_WORD = re.compile(r"[a-z][a-z']*[a-z]|[a-z]")


class PurchaseScore(NamedTuple):
    """One purchase's score and its parts (the paper's formula above).

    Attributes:
        score: ``r`` in [0, 1].
        r_type: the type factor (0, 0.1, 0.5 or 1).
        attributes: goal attributes matched, ``|U_att ∩ Y_att|``.
        options: chosen options that count, at most ``|U_opt|``.
        price_ok: ``y_price <= u_price``.
        n_attributes: ``|U_att|``.
        n_options: ``|U_opt|``.
    """

    score: float
    r_type: float
    attributes: int
    options: int
    price_ok: bool
    n_attributes: int
    n_options: int


@lru_cache(maxsize=1)
def _fuzzy():  # type: ignore[no-untyped-def]
    require_extra()
    from rapidfuzz import fuzz, utils

    return fuzz.token_set_ratio, utils.default_process


@lru_cache(maxsize=1 << 17)
def similar(a: str, b: str) -> bool:
    """Token-set similarity of ``a`` and ``b`` above :data:`FUZZY_THRESHOLD`, on lower-cased alphanumerics (the
    pre-processing ``thefuzz`` applies)."""
    ratio, process = _fuzzy()
    return bool(ratio(a, b, processor=process) > FUZZY_THRESHOLD)


def normalize_color(value: str) -> str:
    """``value`` lower-cased, reduced to its first base-colour word when it has one."""
    lowered = value.strip().lower()
    for word in _WORD.findall(lowered):
        if word in _COLOURS:
            return word
    return lowered


@lru_cache(maxsize=65536)
def content_words(name: str) -> frozenset[str]:
    """The words of a product name that carry its type: alphabetic, two letters or more, not function words."""
    return frozenset(w for w in _WORD.findall(name.lower()) if len(w) >= 2 and w not in _FUNCTION_WORDS)


def type_reward(product: Product, goal: Goal) -> float:
    """``r_type`` of buying ``product`` for ``goal`` (module docstring)."""
    wanted = content_words(goal.name)
    title_score = len(content_words(product.title) & wanted) / len(wanted) if wanted else 0.2
    same_query = product.query == goal.query
    same_category = len(_levels(product.product_category) & _levels(goal.product_category)) >= 2
    r_type = 1.0 if (same_query or same_category or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type


@lru_cache(maxsize=4096)
def _levels(product_category: str) -> frozenset[str]:
    return frozenset(level.strip().lower() for level in product_category.split("›") if level.strip())


def attribute_matched(product: Product, attribute: str) -> bool:
    """Whether one goal attribute is among the product's (fuzzily) or in its text."""
    return any(similar(mine, attribute) for mine in product.attributes) or attribute.lower() in product.text


def value_counts(product: Product, name: str, value: str, goal_options: Sequence[str]) -> bool:
    """Whether choosing ``value`` for option ``name`` of ``product`` counts towards the options ``goal_options``."""
    chosen = normalize_color(value)
    wanted = [normalize_color(o) for o in goal_options]
    if name.lower() in EXACT_OPTIONS:
        hit = chosen in wanted
    else:
        hit = any(similar(w, chosen) for w in wanted)
    return hit or value.lower() in product.text


def option_counts(product: Product, goal: Goal, name: str, value: str) -> bool:
    """Whether choosing ``value`` for option ``name`` of ``product`` counts towards ``goal``'s options."""
    return value_counts(product, name, value, goal.options)


def score_purchase(
    product: Product, goal: Goal, chosen: Mapping[str, str] | Iterable[tuple[str, str]]
) -> PurchaseScore:
    """The score of buying ``product`` with the ``chosen`` options (name -> value) for ``goal``."""
    pairs = list(chosen.items()) if isinstance(chosen, Mapping) else list(chosen)
    n_att, n_opt = len(goal.attributes), len(goal.options)
    attributes = sum(attribute_matched(product, a) for a in goal.attributes)
    options = min(n_opt, sum(value_counts(product, k, v, goal.options) for k, v in pairs))
    price_ok = product.price <= goal.price_upper
    r_type = type_reward(product, goal)
    score = r_type * (attributes + options + int(price_ok)) / (n_att + n_opt + 1)
    return PurchaseScore(score, r_type, attributes, options, price_ok, n_att, n_opt)
