"""The WebShop purchase table (``tests/data/webshop_reward/``): purchases from arlkit's shipped catalogue scored by
WebShop's own ``get_reward`` (tests/data/webshop_reward/README.md says how the table was made).

Two steps, in two Python environments:

- ``pick`` (arlkit's venv): chooses the purchases from the shipped catalogue (seeded) and writes them as JSON
  lines: the goal (its index, attributes, options, price limit) and what is bought (asin, price, options);
- ``score`` (a venv with WebShop's dependencies): reads those lines and the catalogue's raw files, builds the
  product and goal records the way WebShop's ``load_products`` and ``get_human_goals`` build them, calls
  ``web_agent_site.engine.goal.get_reward`` from a WebShop checkout (``--webshop``, unmodified) on each, and writes
  the table: each purchase with WebShop's score and its parts.

This script imports nothing of WebShop's at ``pick`` time and nothing of arlkit's at ``score`` time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "arlkit" / "data" / "webshop"
SEED = 48

# Goal options a person might write for a colour the product sells under a shorter name (WebShop's human goals
# hold such phrases): the goal option, then the product colours to buy it as.
COLOUR_PHRASES = (
    ("navy blue", ("navy", "blue")), ("light gray", ("gray", "white")), ("dark grey", ("gray", "black")),
    ("heather grey", ("gray",)), ("rose gold", ("gold", "pink")), ("off white", ("white", "beige")),
    ("royal blue", ("blue", "navy")), ("hot pink", ("pink", "red")), ("wine red", ("red", "purple")),
    ("jet black", ("black",)), ("forest green", ("green", "teal")), ("silver gray", ("silver", "gray")),
)  # fmt: skip
# Goal sizes written differently from a product's value, and the values to buy them as.
SIZE_PHRASES = (
    ("large", ("x-large", "xx-large")), ("x-large", ("xx-large", "large")), ("small", ("x-small",)),
    ("20 bags", ("50 bags", "100 bags")), ("12 oz", ("32 oz", "12 fl oz")), ("2 lb", ("1 lb", "5 lb")),
)  # fmt: skip


def _row(kind: str, goal: Any, product: Any, chosen: dict[str, str], **override: Any) -> dict[str, Any]:
    return {
        "kind": kind, "goal_index": goal.index, "goal_asin": goal.asin,
        "attributes": list(override.get("attributes", goal.attributes)),
        "goal_options": list(override.get("options", goal.options)),
        "price_upper": override.get("price_upper", goal.price_upper),
        "asin": product.asin, "price": product.price, "options": chosen,
    }  # fmt: skip


def pick() -> list[dict[str, Any]]:
    """The purchases: each kind of agreement and departure the reward rules can show."""
    from arlkit.envs import make

    catalog = make("webshop").catalog  # type: ignore[attr-defined]
    rng = random.Random(SEED)
    goals = list(catalog.split("test"))
    rng.shuffle(goals)
    by_query: dict[str, list[Any]] = {}
    for p in catalog.products:
        by_query.setdefault(p.query, []).append(p)
    rows: list[dict[str, Any]] = []

    def own_choice(goal: Any, product: Any) -> dict[str, str]:
        return {n: next((v for v in vals if v in goal.options), vals[0]) for n, vals in product.options}

    for goal in goals[:12]:  # the goal's own product with the goal's options
        product = catalog.by_asin[goal.asin]
        rows.append(_row("own", goal, product, own_choice(goal, product)))
    sized = [g for g in goals if "size" in dict(catalog.by_asin[g.asin].options)]
    for goal in sized[:14]:  # every other size of the goal's own product
        product = catalog.by_asin[goal.asin]
        base = own_choice(goal, product)
        for value in dict(product.options)["size"]:
            if value != base["size"]:
                rows.append(_row("own, other size", goal, product, {**base, "size": value}))
    coloured = [g for g in goals if "color" in dict(catalog.by_asin[g.asin].options)]
    for goal in coloured[:8]:  # another colour
        product = catalog.by_asin[goal.asin]
        base = own_choice(goal, product)
        other = [v for v in dict(product.options)["color"] if v != base["color"]]
        rows.append(_row("own, other colour", goal, product, {**base, "color": rng.choice(other)}))
    for goal in goals[12:18]:  # nothing chosen; one option only; the price above the limit
        product = catalog.by_asin[goal.asin]
        rows.append(_row("own, no options", goal, product, {}))
        base = own_choice(goal, product)
        first = dict(list(base.items())[:1])
        rows.append(_row("own, price over the limit", goal, product, base, price_upper=float(int(product.price))))
        if len(base) > 1:
            rows.append(_row("own, one option", goal, product, first))
    for goal in goals[18:40]:  # another product of the same type (its attributes differ)
        product = rng.choice([p for p in by_query[catalog.by_asin[goal.asin].query] if p.asin != goal.asin])
        rows.append(_row("same type", goal, product, own_choice(goal, product)))
    queries = sorted(by_query)
    for goal in goals[40:52]:  # a product of another type
        query = rng.choice([q for q in queries if q != goal.query])
        product = rng.choice(by_query[query])
        rows.append(_row("other type", goal, product, own_choice(goal, product)))
    for phrase, shades in COLOUR_PHRASES:  # a goal colour written as a phrase
        goal = next(g for g in coloured if set(shades) <= set(dict(catalog.by_asin[g.asin].options)["color"])
                    or shades[0] in dict(catalog.by_asin[g.asin].options)["color"])  # fmt: skip
        product = catalog.by_asin[goal.asin]
        values = dict(product.options)["color"]
        options = [phrase if o in values else o for o in goal.options]
        for shade in (s for s in shades if s in values):
            rows.append(_row("colour phrase", goal, product, {**own_choice(goal, product), "color": shade},
                             options=options))  # fmt: skip
    for phrase, values in SIZE_PHRASES:  # a goal size the product sells only under a similar name
        for value in values:
            goal = next((g for g in sized if value in dict(catalog.by_asin[g.asin].options)["size"]), None)
            if goal is None:
                continue
            product = catalog.by_asin[goal.asin]
            sizes = dict(product.options)["size"]
            options = [phrase if o in sizes else o for o in goal.options]
            rows.append(_row("size phrase", goal, product, {**own_choice(goal, product), "size": value},
                             options=options))  # fmt: skip
    return rows


def _raw(name: str) -> Any:
    return json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))


def score(rows: list[dict[str, Any]], webshop: Path) -> list[dict[str, Any]]:
    """Each row with WebShop's ``get_reward`` (verbose) on WebShop's records of the product and the goal."""
    sys.path.insert(0, str(webshop))
    from web_agent_site.engine.goal import get_reward  # WebShop's own, unmodified

    items = {p["asin"]: p for p in _raw("items_shuffle_synthetic")}
    attributes = _raw("items_ins_v2_synthetic")

    def record(asin: str) -> dict[str, Any]:  # the fields load_products sets and get_reward reads
        p = items[asin]
        bullets = p["small_description"] if isinstance(p["small_description"], list) else [p["small_description"]]
        own = attributes[asin]["attributes"] if "attributes" in attributes.get(asin, {}) else ["DUMMY_ATTR"]
        return {"asin": asin, "query": p["query"].lower().strip(), "product_category": p["product_category"],
                "name": p["name"], "Title": p["name"], "Description": p["full_description"],
                "BulletPoints": bullets, "Attributes": own}  # fmt: skip

    out = []
    for row in rows:
        gold = record(row["goal_asin"])
        goal = {"asin": row["goal_asin"], "query": gold["query"], "name": gold["name"],
                "product_category": gold["product_category"], "attributes": row["attributes"],
                "goal_options": row["goal_options"], "price_upper": row["price_upper"]}  # fmt: skip
        reward, info = get_reward(record(row["asin"]), goal, price=row["price"], options=row["options"], verbose=True)
        parts = {k: info[k] for k in ("r_type", "r_att", "r_option", "r_price", "title_score") if k in info}
        out.append({**row, "webshop_score": reward, "webshop": parts})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("pick").add_argument("--out", type=Path, required=True)
    scoring = sub.add_parser("score")
    scoring.add_argument("--webshop", type=Path, required=True, help="a WebShop checkout (web_agent_site/ in it)")
    scoring.add_argument("--purchases", type=Path, required=True)
    scoring.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.step == "pick":
        rows = pick()
    else:
        rows = score([json.loads(line) for line in args.purchases.read_text().splitlines()], args.webshop)
    args.out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    print(f"{len(rows)} purchases -> {args.out}")


if __name__ == "__main__":
    main()
