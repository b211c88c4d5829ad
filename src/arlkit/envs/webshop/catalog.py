"""WebShop's products and goals, read from files in WebShop's own format (docs/environments.md#webshop).

A WebShop data folder holds (``.json`` or gzipped ``.json.gz``):

- ``items_shuffle*.json``: a list of products, each with ``asin, name, category, query, product_category``
  (levels joined by ``›``), ``pricing`` (``"$12.99"`` or a range ``"$10.99 - $15.99"``),
  ``full_description, small_description`` (the features, a list), ``customization_options``
  (option name -> list of ``{"value", "image"}``), ``images, average_rating, ...``;
- ``items_ins_v2*.json``: asin -> ``{"attributes": [...], ...}``, each product's attributes;
- ``items_human_ins*.json``: asin -> list of ``{"instruction", "instruction_attributes",
  "instruction_options"}``, the crowd-sourced goals;
- ``reviews*.json`` (optional): a list of ``{"asin", "reviews": [{"title", "score" or "stars", "body" or
  "review"}], "average_rating"}``.

They are read as WebShop's engine reads them: option names and values lower-cased (``/`` shown as ``|``),
products with a bad asin or a repeated one skipped, goals without attributes skipped, the goals in
WebShop's order (product order, then each product's instructions, shuffled with seed 233: WebShop's test
goals are the first 500). Two things WebShop draws at random at load time, unseeded, arlkit draws with a
seed of their own: the price of a product sold at a range (uniform in it, seeded by the asin) and a goal's
price limit (the larger of two of the first four multiples of 10 above the product's price, seeded by the
goal; ``", and price lower than X.00 dollars"`` is appended to the instruction).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "Catalog", "CatalogFiles", "DatasetError", "Goal", "Product", "Review", "build_catalog",
    "goal_from_payload", "load_catalog", "read_json",
]

_NO_LIMIT = 1_000_000.0


class DatasetError(ValueError):
    """A WebShop file is missing or malformed; the message names the file and the entry."""


class Review(NamedTuple):
    """One product review."""

    title: str
    score: str
    body: str


@dataclass(frozen=True)
class Product:
    """One product as the engine shows and scores it.

    Attributes:
        asin: the product id (upper case, as WebShop shows it).
        title: the product name.
        query: the search query the product came from (lower case; the type match uses it).
        category: WebShop's top category (``beauty``, ``fashion``, ...).
        product_category: category levels joined by ``›``.
        price: the price the purchase is scored with.
        price_tag: the price as the pages show it (``$10.99`` or ``$10.99 to $15.99``).
        description: the full description.
        bullets: the feature bullet points.
        attributes: the product's attributes (from ``items_ins_v2``).
        options: ``(name, values)`` per option, in page order.
        rating: the average rating as shown (``N.A.`` when unknown).
        reviews: the reviews.
    """

    asin: str
    title: str
    query: str
    category: str
    product_category: str
    price: float
    price_tag: str
    description: str = ""
    bullets: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    rating: str = "N.A."
    reviews: tuple[Review, ...] = ()

    @cached_property
    def text(self) -> str:
        """Title, features and description, lower-cased, in one text."""
        return " ".join(self.text_fields)

    @cached_property
    def text_fields(self) -> tuple[str, str, str]:
        """Title, features (joined by spaces) and description, each lower-cased: where the score looks for an
        attribute (in each apart, as WebShop does)."""
        return self.title.lower(), " ".join(self.bullets).lower(), self.description.lower()

    @cached_property
    def search_text(self) -> str:
        """What the search engine indexes: title, description, first feature and the options (WebShop's document)."""
        options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in self.options)
        first = self.bullets[0] if self.bullets else ""
        return " ".join([self.title, self.description, first, options]).lower()


@dataclass(frozen=True)
class Goal:
    """One shopping goal: the customer's instruction and what the score checks.

    Attributes:
        asin: the product the instruction was written for.
        instruction: the instruction text, price clause included.
        attributes: the goal attributes ``U_att``.
        options: the goal option values ``U_opt``.
        price_upper: the price limit ``u_price``.
        query, name, product_category: the goal product's search query, name and categories (the type match).
        index: the goal's position in WebShop's order.
    """

    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float
    query: str
    name: str
    product_category: str
    index: int = 0

    def payload(self) -> dict[str, Any]:
        """The task payload (JSON) the goal is rebuilt from with :func:`goal_from_payload`."""
        return {
            "asin": self.asin, "instruction": self.instruction, "attributes": list(self.attributes),
            "options": list(self.options), "price_upper": self.price_upper, "goal_index": self.index,
        }  # fmt: skip


def goal_from_payload(payload: Mapping[str, Any], product: Product) -> Goal:
    """The goal of a task payload, its type fields taken from its product."""
    return Goal(
        asin=str(payload["asin"]), instruction=str(payload["instruction"]),
        attributes=tuple(str(a) for a in payload["attributes"]), options=tuple(str(o) for o in payload["options"]),
        price_upper=float(payload["price_upper"]), query=product.query, name=product.title,
        product_category=product.product_category, index=int(payload.get("goal_index", 0)),
    )  # fmt: skip


@dataclass(frozen=True)
class CatalogFiles:
    """Where a catalogue's files are: a folder and one file name or glob pattern per file kind."""

    root: Path
    products: str = "items_shuffle*.json*"
    attributes: str = "items_ins_v2*.json*"
    goals: str = "items_human_ins*.json*"
    reviews: str = "reviews*.json*"

    def resolve(self, kind: str, required: bool = True) -> Path | None:
        """The one file of ``kind`` (a name, or a glob that must match exactly one file)."""
        pattern = getattr(self, kind)
        if not pattern:
            return None
        direct = self.root / pattern
        if not any(ch in pattern for ch in "*?[") and direct.is_file():
            return direct
        matches = sorted(p for p in self.root.glob(pattern) if p.is_file())
        if len(matches) == 1:
            return matches[0]
        if not matches:
            if required:
                raise DatasetError(f"no {kind} file {pattern!r} in {self.root}")
            return None
        names = ", ".join(p.name for p in matches)
        raise DatasetError(f"{len(matches)} {kind} files match {pattern!r} in {self.root} ({names}); name one")


@dataclass(frozen=True)
class Catalog:
    """Products and goals in WebShop's order.

    Attributes:
        products: every product, in file order.
        goals: every goal, in WebShop's order.
        source: where the catalogue came from (for messages).
    """

    products: tuple[Product, ...]
    goals: tuple[Goal, ...]
    source: str
    by_asin: Mapping[str, Product] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_asin", {p.asin: p for p in self.products})

    def split(self, split: str, test_goals: int = 500, train_from: int = 500) -> tuple[Goal, ...]:
        """The goals of ``split``: ``test`` the first ``test_goals``, ``train`` those from ``train_from`` on (after
        the test goals; less any whose instruction for the same product is also a test goal)."""
        test = self.goals[:test_goals]
        if split == "test":
            return test
        if split == "train":
            seen = {(g.asin, g.instruction) for g in test}
            return tuple(g for g in self.goals[max(train_from, test_goals):] if (g.asin, g.instruction) not in seen)
        raise ValueError(f"unknown split {split!r}; valid choices: train, test")

    @cached_property
    def queries(self) -> tuple[str, ...]:
        """The distinct search queries the products came from (sorted): one search per product type."""
        return tuple(sorted({p.query for p in self.products if p.query}))


def read_json(path: Path) -> Any:
    """A ``.json`` or ``.json.gz`` file's content (:class:`DatasetError` when unreadable)."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, EOFError) as exc:
        raise DatasetError(f"{path}: cannot read it as JSON ({exc})") from None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _prices(pricing: Any, asin: str) -> tuple[float, str]:
    numbers = []
    if isinstance(pricing, str):
        for piece in pricing.split("$")[1:]:
            digits = re.sub(r"[^\d.]", "", piece)
            try:
                numbers.append(float(digits))
            except ValueError:
                continue
    if not numbers:
        return 100.0, "$100.0"
    if len(numbers) == 1:
        return numbers[0], f"${numbers[0]}"
    low, high = numbers[:2]
    return random.Random(f"webshop-price:{asin}").uniform(low, high), f"${low} to ${high}"


def _options(raw: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for name, contents in (raw or {}).items() if isinstance(raw, Mapping) else ():
        if not isinstance(contents, list):
            continue
        values = [_text(c.get("value")).replace("/", " | ").lower() for c in contents if isinstance(c, Mapping)]
        values = [v for v in dict.fromkeys(values) if v]
        if values:
            out.append((str(name).lower(), tuple(values)))
    return tuple(out)


def _reviews(entry: Mapping[str, Any]) -> tuple[Review, ...]:
    out = []
    for r in entry.get("reviews") or ():
        if isinstance(r, Mapping):
            score = r.get("score", r.get("stars", ""))
            out.append(Review(_text(r.get("title")), str(score), _text(r.get("body", r.get("review")))))
    return tuple(out)


def _product(entry: Any, attributes: Mapping[str, Any], reviews: Mapping[str, Any]) -> Product | None:
    if not isinstance(entry, Mapping):
        return None
    asin = _text(entry.get("asin")).upper()
    if not asin or asin == "NAN" or len(asin) > 10:
        return None
    price, tag = _prices(entry.get("pricing"), asin)
    bullets = entry.get("small_description")
    bullets = [bullets] if isinstance(bullets, str) else [b for b in bullets or () if isinstance(b, str)]
    own = attributes.get(asin) or attributes.get(asin.lower()) or {}
    review = reviews.get(asin, {})
    rating = review.get("average_rating", entry.get("average_rating"))
    return Product(
        asin=asin, title=_text(entry.get("name")), query=_text(entry.get("query")).lower(),
        category=_text(entry.get("category")), product_category=_text(entry.get("product_category")),
        price=price, price_tag=tag, description=_text(entry.get("full_description")),
        bullets=tuple(b.strip() for b in bullets), attributes=tuple(str(a) for a in own.get("attributes") or ()),
        options=_options(entry.get("customization_options")),
        rating="N.A." if rating in (None, "") else str(rating), reviews=_reviews(review),
    )  # fmt: skip


def _price_limit(price: float, key: str) -> float:
    """The larger of two of the first four multiples of 10 above ``price`` (seeded by ``key``), or no limit."""
    above = [10.0 * i for i in range(1, 100) if 10.0 * i > price][:4]
    if len(above) < 2:
        return _NO_LIMIT
    return max(random.Random(f"webshop-limit:{key}").sample(above, 2))


def _goals(products: Sequence[Product], human: Mapping[str, Any], source: str) -> list[Goal]:
    goals: list[Goal] = []
    for product in products:
        entries = human.get(product.asin) or human.get(product.asin.lower()) or ()
        for k, entry in enumerate(entries if isinstance(entries, list) else ()):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("instruction"), str):
                raise DatasetError(f"{source}: goal {k} of {product.asin} has no instruction text")
            attrs = tuple(str(a) for a in entry.get("instruction_attributes") or ())
            if not attrs:
                continue  # as WebShop: a goal without attributes is skipped
            options = entry.get("instruction_options") or ()
            values = tuple(str(v) for v in (options.values() if isinstance(options, Mapping) else options))
            text = entry["instruction"].strip().strip(".")
            limit = _price_limit(product.price, f"{product.asin}:{k}:{text}")
            if limit < _NO_LIMIT:
                text += f", and price lower than {limit:.2f} dollars"
            goals.append(Goal(product.asin, text, attrs, values, limit, product.query, product.title,
                              product.product_category))  # fmt: skip
    random.Random(233).shuffle(goals)  # WebShop's order: random.seed(233); random.shuffle(goals)
    return [replace(g, index=i) for i, g in enumerate(goals)]


def build_catalog(
    raw: Any, attributes: Any, human: Any, review_list: Any = (), *, source: str
) -> Catalog:
    """A catalogue from the decoded content of WebShop's files (``source`` names them in messages)."""
    if not isinstance(raw, list):
        raise DatasetError(f"{source}: the products file must hold a list of products")
    if not isinstance(attributes, Mapping) or not isinstance(human, Mapping):
        raise DatasetError(f"{source}: the attributes and goals files must hold objects keyed by asin")
    reviews = {_text(r.get("asin")).upper(): r for r in review_list or () if isinstance(r, Mapping)}
    products: list[Product] = []
    seen: set[str] = set()
    for entry in raw:
        product = _product(entry, attributes, reviews)
        if product is not None and product.asin not in seen:
            seen.add(product.asin)
            products.append(product)
    if not products:
        raise DatasetError(f"{source}: no usable product")
    return Catalog(tuple(products), tuple(_goals(products, human, source)), source)


def load_catalog(files: CatalogFiles) -> Catalog:
    """Read a WebShop data folder (module docstring). Raises :class:`DatasetError` naming what is wrong."""
    paths = [files.resolve(kind) for kind in ("products", "attributes", "goals")]
    reviews = files.resolve("reviews", required=False)
    contents = [read_json(p) for p in paths if p is not None]
    review_list = read_json(reviews) if reviews is not None else []
    return build_catalog(*contents, review_list, source=str(files.root))
