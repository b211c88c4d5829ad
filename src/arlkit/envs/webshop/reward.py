"""WebShop's purchase score (Yao et al. 2022, §3.2) with the rules of WebShop's reference engine
(``web_agent_site/engine/goal.py``, ``get_reward``), written here from its published behaviour:

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price]) / (|U_att| + |U_opt| + 1)

``U`` is the goal (attributes, options, price limit) and ``Y`` the purchase (the product bought and the
option values chosen on its page). Two texts are *similar* when their token-set ratio (:func:`token_set_ratio`)
is above 85. Then:

- **attribute**: a goal attribute is matched when one of the product's attributes is similar to it, else when
  it occurs in the product's title, its features (joined by spaces) or its description, each lower-cased;
- **option**: a goal option is matched when at least one chosen value is similar to it, both after colour
  normalisation (:func:`normalize_color`). The option's name plays no part (a size is matched fuzzily like
  anything else: ``x-large`` matches ``large``, ``50 bags`` matches ``20 bags``), so ``|U_opt ∩ Y_opt|``
  counts goal options and is at most ``|U_opt|``;
- **price**: the price is at most the goal's limit;
- **type**: ``r_type`` compares the product with the goal's own product: 1 when they come from the same search
  query, share at least two category levels (levels split at ``›`` and stripped, as written), or the product's
  name holds more than 20% of the type words of the goal's name (counted with repeats); 0.5 otherwise; then 0.1
  when under 10% of them are shared and 0 when none is (0.2 when the goal's name has none). WebShop's type
  words are the nouns a spaCy English model tags; arlkit's are a name's content words (:func:`content_words`):
  spaCy does not publish its models on PyPI, and the nouns change with the model's version.

A purchase succeeds when ``r = 1``.

The similarity is ``thefuzz``'s ``token_set_ratio`` as WebShop pins it (``thefuzz==0.19.0``, which computes its
ratios with Python's ``difflib.SequenceMatcher`` unless ``python-Levenshtein`` is installed, and WebShop's
requirements do not list it). Its steps: drop the characters U+0080-U+00FF, turn every non-word character
into a space, lower-case, strip; 0 when either text is then empty; take each text's set of words and form
``s`` (the shared words, sorted, joined by spaces), ``a = s + " " + (words only in the first, sorted)`` and
``b`` likewise, each stripped; the score is the largest of ``ratio(s, a)``, ``ratio(s, b)``, ``ratio(a, b)``,
where ``ratio`` is 100 for equal texts, 0 when one is empty, else ``round(100 · SequenceMatcher(None, x,
y).ratio())``. ``tests/data/webshop_reward/`` holds purchases scored by WebShop's own code that this module
reproduces exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from difflib import SequenceMatcher
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from arlkit.envs.webshop.catalog import Goal, Product

__all__ = [
    "COLOR_WORDS",
    "FUZZY_THRESHOLD",
    "PurchaseScore",
    "attribute_matched",
    "content_words",
    "normalize_color",
    "options_matched",
    "score_purchase",
    "similar",
    "token_set_ratio",
    "type_reward",
]

FUZZY_THRESHOLD = 85
"""Two texts are similar when their token-set ratio (0-100) is above this (WebShop's threshold)."""

COLOR_WORDS = tuple(
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown burgundy camel "
    "camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac copper coral cranberry "
    "cream crystal dark denim eggplant elephant espresso fuchsia gold granite grape graphite grass gray green grey "
    "heather indigo ivory ivy khaki lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight "
    "mint mocha multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple rainbow "
    "red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash sunflower tan taupe teal "
    "tiger turquoise violet walnut wheat white wine yellow".split()
)
"""WebShop's colour words, in the order its normalisation tries them (``web_agent_site/engine/normalize.py``)."""

_LATIN1 = dict.fromkeys(range(0x80, 0x100))  # the characters thefuzz's force_ascii drops
_NON_WORD = re.compile(r"\W")
_FUNCTION_WORDS = frozenset(
    "a about an and are as at be by for from has have in into is it its of on or per that the this to with "
    "without".split()
)
_WORD = re.compile(r"[a-z][a-z']*[a-z]|[a-z]")


class PurchaseScore(NamedTuple):
    """One purchase's score and its parts (the formula above).

    Attributes:
        score: ``r`` in [0, 1].
        r_type: the type factor (0, 0.1, 0.5 or 1).
        attributes: goal attributes matched, ``|U_att ∩ Y_att|``.
        options: goal options matched, ``|U_opt ∩ Y_opt|``.
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


def _process(text: str) -> str:
    return _NON_WORD.sub(" ", text.translate(_LATIN1)).lower().strip()


def _ratio(a: str, b: str) -> int:
    if a == b:
        return 100
    if not a or not b:
        return 0
    return round(100 * SequenceMatcher(None, a, b).ratio())


@lru_cache(maxsize=1 << 17)
def token_set_ratio(a: str, b: str) -> int:
    """thefuzz 0.19's ``token_set_ratio(a, b)`` (module docstring; the order of ``a`` and ``b`` can matter)."""
    first, second = _process(a), _process(b)
    if not first or not second:
        return 0
    words_a, words_b = set(first.split()), set(second.split())
    shared = " ".join(sorted(words_a & words_b))
    with_a = f"{shared} {' '.join(sorted(words_a - words_b))}".strip()
    with_b = f"{shared} {' '.join(sorted(words_b - words_a))}".strip()
    return max(_ratio(shared, with_a), _ratio(shared, with_b), _ratio(with_a, with_b))


def similar(mine: str, wanted: str) -> bool:
    """Whether the purchase's text ``mine`` is similar to the goal's ``wanted`` (ratio above 85)."""
    return token_set_ratio(mine, wanted) > FUZZY_THRESHOLD


def normalize_color(value: str) -> str:
    """The first of :data:`COLOR_WORDS` that occurs in ``value`` (anywhere, case-sensitive: ``"navy blue"`` ->
    ``"blue"``), else ``value`` unchanged."""
    return next((color for color in COLOR_WORDS if color in value), value)


@lru_cache(maxsize=65536)
def content_words(name: str) -> tuple[str, ...]:
    """The words of a product name that carry its type, repeats kept: alphabetic, two letters or more, not
    function words (arlkit's stand-in for the nouns WebShop's spaCy model tags)."""
    return tuple(w for w in _WORD.findall(name.lower()) if len(w) >= 2 and w not in _FUNCTION_WORDS)


def type_reward(product: Product, goal: Goal) -> float:
    """``r_type`` of buying ``product`` for ``goal`` (module docstring)."""
    wanted = content_words(goal.name)
    shared = len(set(content_words(product.title)) & set(wanted))
    title_score = shared / len(wanted) if wanted else 0.2
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
    return frozenset(level.strip() for level in product_category.split("›"))


def attribute_matched(product: Product, attribute: str) -> bool:
    """Whether one goal attribute is similar to one of the product's, or occurs in its text (module docstring)."""
    if any(similar(mine, attribute) for mine in product.attributes):
        return True
    return any(attribute in text for text in product.text_fields)


def options_matched(chosen: Iterable[str], goal_options: Sequence[str]) -> int:
    """How many of ``goal_options`` one of the ``chosen`` values is similar to (colours normalised)."""
    mine = [normalize_color(v) for v in chosen]
    return sum(any(similar(m, normalize_color(wanted)) for m in mine) for wanted in goal_options)


def score_purchase(
    product: Product, goal: Goal, chosen: Mapping[str, str] | Iterable[tuple[str, str]]
) -> PurchaseScore:
    """The score of buying ``product`` with the ``chosen`` options (name -> value) for ``goal``."""
    pairs = list(chosen.items()) if isinstance(chosen, Mapping) else list(chosen)
    n_att, n_opt = len(goal.attributes), len(goal.options)
    attributes = sum(attribute_matched(product, a) for a in goal.attributes)
    options = options_matched((v for _, v in pairs), goal.options)
    price_ok = product.price <= goal.price_upper
    r_type = type_reward(product, goal)
    score = (attributes + options + int(price_ok)) / (n_att + n_opt + 1) * r_type
    return PurchaseScore(score, r_type, attributes, options, price_ok, n_att, n_opt)
