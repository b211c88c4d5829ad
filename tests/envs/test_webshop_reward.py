"""WebShop's purchase score (Yao et al. 2022, §3.2) with the rules of WebShop's ``get_reward``:

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price]) / (|U_att| + |U_opt| + 1)

First the table of purchases from the shipped catalogue that WebShop's own code scored
(tests/data/webshop_reward/README.md), then hand-made cases, each also scored by WebShop's ``get_reward``
(thefuzz 0.19.0) with the same result. The hand-made cases use one goal with |U_att| = 2 and |U_opt| = 2,
so the denominator is 2 + 2 + 1 = 5."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from arlkit.envs.webshop.catalog import Catalog, CatalogFiles, Goal, Product, load_catalog
from arlkit.envs.webshop.oracle import GoalOracle
from arlkit.envs.webshop.reward import (
    content_words,
    normalize_color,
    score_purchase,
    token_set_ratio,
    type_reward,
)

TABLE = Path(__file__).resolve().parents[1] / "data" / "webshop_reward" / "purchases.jsonl"
SHIPPED = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "webshop"

SHIRT = Product(
    asin="B0SHIRT001", title="Avelor Crew Neck Cotton T-Shirt for Men", query="men's t-shirts", category="fashion",
    product_category="Clothing, Shoes & Jewelry › Men › Clothing › Shirts", price=18.99, price_tag="$18.99",
    description="A soft everyday tee.", bullets=("Tagless label",), attributes=("crew neck", "machine washable fabric"),
    options=(("color", ("black", "white", "navy blue")), ("size", ("small", "large", "xx-large"))),
)  # fmt: skip
GOAL = Goal(
    asin=SHIRT.asin, instruction="i need a crew neck machine washable t-shirt in black, size large",
    attributes=("crew neck", "machine washable"), options=("black", "large"), price_upper=30.0,
    query=SHIRT.query, name=SHIRT.title, product_category=SHIRT.product_category,
)  # fmt: skip


def _table() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TABLE.read_text().splitlines()]


def test_the_table_scores_as_webshops_own_get_reward() -> None:
    catalog = load_catalog(CatalogFiles(SHIPPED))
    rows = _table()
    assert len(rows) >= 50
    for row in rows:
        goal = dataclasses.replace(catalog.goals[row["goal_index"]], attributes=tuple(row["attributes"]),
                                   options=tuple(row["goal_options"]), price_upper=row["price_upper"])  # fmt: skip
        product = catalog.by_asin[row["asin"]]
        assert goal.asin == row["goal_asin"] and product.price == row["price"]
        got = score_purchase(product, goal, row["options"])
        parts = row["webshop"]
        assert got.score == pytest.approx(row["webshop_score"], abs=1e-9), row
        assert got.r_type == parts["r_type"] and got.price_ok == parts["r_price"], row
        assert got.attributes == round(parts["r_att"] * len(goal.attributes)), row
        assert got.options == round(parts.get("r_option", 0.0) * len(goal.options)), row
    # The cases the table is there for: a goal size bought as a similar one scores 1, as in WebShop.
    fuzzy = [r for r in rows if ("large" in r["goal_options"] and r["options"].get("size") == "x-large")
             or ("20 bags" in r["goal_options"] and r["options"].get("size") == "50 bags")]  # fmt: skip
    assert len(fuzzy) >= 2 and all(r["webshop_score"] == 1.0 for r in fuzzy)
    navy = [r for r in rows if "navy blue" in r["goal_options"]]
    assert {r["options"]["color"]: r["webshop_score"] < 1 for r in navy} == {"navy": True, "blue": False}


def test_token_set_ratio_is_thefuzz_0_19s() -> None:
    # Values thefuzz 0.19.0's fuzz.token_set_ratio gives (difflib's SequenceMatcher): a word set inside the
    # other scores 100, otherwise the ratio of the sorted shared words plus the rest, rounded.
    assert token_set_ratio("x-large", "large") == 100 and token_set_ratio("xx-large", "large") == 100
    assert token_set_ratio("20 bags", "50 bags") == 86 and token_set_ratio("12 oz", "32 oz") == 80
    assert token_set_ratio("12 count", "24 count") == 88 and token_set_ratio("1 lb", "2 lb") == 75
    assert token_set_ratio("Machine-Washable!", "machine washable fabric") == 100
    assert token_set_ratio("café", "caf") == 100  # U+0080-U+00FF are dropped before comparing
    assert token_set_ratio("", "large") == 0 and token_set_ratio("--", "--") == 0


def test_full_match_scores_one() -> None:
    # attributes: "crew neck" equals one, "machine washable" is a token subset of "machine washable fabric"
    # (ratio 100): 2 of 2; options black and large: 2; price 18.99 <= 30: 1; r_type 1 (same query) -> 5 / 5.
    got = score_purchase(SHIRT, GOAL, {"color": "black", "size": "large"})
    assert got.score == 1.0 and (got.attributes, got.options, got.price_ok, got.r_type) == (2, 2, True, 1.0)


def test_a_missing_or_wrong_option_costs_one_fifth() -> None:
    assert score_purchase(SHIRT, GOAL, {"color": "black"}).score == pytest.approx(0.8, abs=1e-12)
    # white vs black: ratio 0.
    assert score_purchase(SHIRT, GOAL, {"color": "white", "size": "large"}).score == pytest.approx(0.8, abs=1e-12)
    # small vs large: "small" and "large" share no word, ratio 40.
    assert score_purchase(SHIRT, GOAL, {"color": "black", "size": "small"}).score == pytest.approx(0.8, abs=1e-12)


def test_sizes_match_fuzzily_whatever_the_options_name() -> None:
    # "xx large" holds every word of "large": ratio 100 > 85, so xx-large counts for a goal's large (WebShop).
    assert score_purchase(SHIRT, GOAL, {"color": "black", "size": "xx-large"}).score == 1.0
    assert score_purchase(SHIRT, GOAL, {"color": "black", "fit": "xx-large"}).score == 1.0


def test_each_goal_option_counts_once_and_one_value_can_match_two() -> None:
    # Two chosen values both match the goal's one option: |U_opt ∩ Y_opt| = 1 -> (2 + 1 + 1) / 4 = 1, never above.
    goal = dataclasses.replace(GOAL, options=("black",))
    assert score_purchase(SHIRT, goal, {"color": "black", "shade": "black"}).score == 1.0
    # One chosen value (xx-large) matches both goal options (large, x-large): 2 of 2 -> 5 / 5.
    goal = dataclasses.replace(GOAL, options=("large", "x-large"))
    got = score_purchase(SHIRT, goal, {"size": "xx-large"})
    assert got.options == 2 and got.score == 1.0


def test_a_chosen_value_in_the_products_text_does_not_count() -> None:
    # WebShop's option rule compares chosen values with goal options only; white in the title changes nothing.
    white_title = dataclasses.replace(SHIRT, title="Avelor Crew Neck Cotton T-Shirt for Men, White Edition")
    assert score_purchase(white_title, GOAL, {"color": "white", "size": "large"}).options == 1


def test_a_price_above_the_limit_costs_one_fifth() -> None:
    cheap = dataclasses.replace(GOAL, price_upper=15.0)
    got = score_purchase(SHIRT, cheap, {"color": "black", "size": "large"})
    assert got.score == pytest.approx(0.8, abs=1e-12) and not got.price_ok


def test_attributes_match_fuzzily_or_in_one_text_field() -> None:
    # "moisture wicking" is not similar to either attribute nor in the text: 1 of 2 -> 0.8.
    goal = dataclasses.replace(GOAL, attributes=("crew neck", "moisture wicking"))
    assert score_purchase(SHIRT, goal, {"color": "black", "size": "large"}).score == pytest.approx(0.8, abs=1e-12)
    # In the features: matched.
    goal = dataclasses.replace(GOAL, attributes=("crew neck", "tagless label"))
    assert score_purchase(SHIRT, goal, {"color": "black", "size": "large"}).score == 1.0
    # Across the end of the title and the start of the features: WebShop looks in each text alone -> 0.8.
    goal = dataclasses.replace(GOAL, attributes=("crew neck", "men tagless"))
    assert score_purchase(SHIRT, goal, {"color": "black", "size": "large"}).score == pytest.approx(0.8, abs=1e-12)


def test_wrong_type_scores_zero() -> None:
    # Another query, categories sharing no level, and none of the goal name's type words: r_type 0 -> r = 0.
    mug = dataclasses.replace(
        SHIRT, asin="B0MUG00001", title="Brightwell Ceramic Coffee Mug", query="coffee mugs",
        product_category="Home & Kitchen › Kitchen & Dining › Mugs",
    )  # fmt: skip
    got = score_purchase(mug, GOAL, {"color": "black", "size": "large"})
    assert got.r_type == 0.0 and got.score == 0.0


def test_type_thresholds() -> None:
    assert content_words(GOAL.name) == ("avelor", "crew", "neck", "cotton", "shirt", "men")
    other = dict(query="tote bags", product_category="Bags › Totes")
    # 1 of 6 words shared (0.167): not above 0.2, not below 0.1, no query or category match -> 0.5.
    tote = dataclasses.replace(SHIRT, title="Avelor Canvas Tote", **other)
    assert type_reward(tote, GOAL) == 0.5
    assert score_purchase(tote, GOAL, {"color": "black", "size": "large"}).score == pytest.approx(0.5, abs=1e-12)
    # 2 of 6 (0.333 > 0.2) -> 1.
    assert type_reward(dataclasses.replace(SHIRT, title="Avelor Cotton Tote", **other), GOAL) == 1.0
    # Two shared category levels lift 1 of 6 to 1; levels are compared as written ("men" is not "Men").
    hoodie = dataclasses.replace(SHIRT, title="Zuraco Fleece Hoodie for Men", query="men's hoodies",
                                 product_category="Clothing, Shoes & Jewelry › Men › Clothing › Hoodies")  # fmt: skip
    assert type_reward(hoodie, GOAL) == 1.0
    lower = dataclasses.replace(hoodie, product_category="clothing, shoes & jewelry › men › clothing › hoodies")
    assert type_reward(lower, GOAL) == 0.5
    # A goal name of 11 words sharing 1 (0.09 < 0.1) -> 0.1. Repeats count in the goal's words: 1 distinct
    # word shared of 10 (avelor x5, canvas x5) is 0.1, not above 0.2 -> 0.5 (1 of 2 distinct words would be 1).
    long_goal = dataclasses.replace(GOAL, name="Avelor alpha beta gamma delta epsilon zeta theta iota kappa lambda")
    assert type_reward(tote, long_goal) == 0.1
    repeats = dataclasses.replace(GOAL, name=" ".join(["Avelor"] * 5 + ["Canvas"] * 5))
    assert type_reward(dataclasses.replace(tote, title="Avelor Bag"), repeats) == 0.5


def test_colours_are_reduced_as_webshop_reduces_them() -> None:
    # The first of WebShop's colour words (in its order) found anywhere in the text.
    assert normalize_color("navy blue") == "blue" and normalize_color("light gray") == "gray"
    assert normalize_color("heather grey") == "grey" and normalize_color("x-large") == "x-large"
    assert normalize_color("standard") == "tan" and normalize_color("Navy Blue") == "Navy Blue"
    # "navy blue" wanted: buying "navy blue" or "blue" matches (both reduce to blue), "navy" does not.
    goal = dataclasses.replace(GOAL, options=("navy blue", "large"))
    assert score_purchase(SHIRT, goal, {"color": "navy blue", "size": "large"}).score == 1.0
    navy = dataclasses.replace(SHIRT, options=(("color", ("navy", "blue")), ("size", ("large",))))
    assert score_purchase(navy, goal, {"color": "blue", "size": "large"}).score == 1.0
    assert score_purchase(navy, goal, {"color": "navy", "size": "large"}).score == pytest.approx(0.8, abs=1e-12)


def test_the_oracle_counts_the_clicks_that_webshops_matching_needs() -> None:
    # Goal options large and x-large: xx-large matches both, so one click suffices (k = 1 < |U_opt| = 2).
    goal = dataclasses.replace(GOAL, options=("large", "x-large"))
    oracle = GoalOracle(Catalog((SHIRT,), (goal,), "test"), goal, lambda query: (SHIRT.asin,))
    assert oracle.need(SHIRT.asin, ()) == 1 and oracle.need(SHIRT.asin, (("size", "xx-large"),)) == 0
    assert oracle.need(SHIRT.asin, (("size", "small"),)) == 1 and oracle.results_distance("q", 1) == 3
    # A product selling only xx-large is perfect for a goal's large (fuzzy sizes): black and xx-large, 2 clicks.
    only_xxl = dataclasses.replace(SHIRT, options=(("color", ("black", "white")), ("size", ("xx-large",))))
    oracle = GoalOracle(Catalog((only_xxl,), (GOAL,), "test"), GOAL, lambda query: (SHIRT.asin,))
    assert oracle.need(SHIRT.asin, ()) == 2 and oracle.need(SHIRT.asin, (("color", "black"),)) == 1
    # Selling only small, it can never match large: not perfect.
    only_small = dataclasses.replace(SHIRT, options=(("color", ("black",)), ("size", ("small",))))
    oracle = GoalOracle(Catalog((only_small,), (GOAL,), "test"), GOAL, lambda query: (SHIRT.asin,))
    assert oracle.need(SHIRT.asin, ()) is None and oracle.results_distance("q", 1) is None
