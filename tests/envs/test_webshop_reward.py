"""WebShop's purchase score on hand-computed cases (Yao et al. 2022, §3.2):

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price]) / (|U_att| + |U_opt| + 1)

Every case below uses one goal with |U_att| = 2 and |U_opt| = 2, so the denominator is 2 + 2 + 1 = 5."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("rapidfuzz")

from arlkit.envs.webshop.catalog import Goal, Product  # noqa: E402
from arlkit.envs.webshop.reward import content_words, normalize_color, score_purchase, type_reward  # noqa: E402

SHIRT = Product(
    asin="B0SHIRT001", title="Avelor Crew Neck Cotton T-Shirt for Men", query="men's t-shirts", category="fashion",
    product_category="Clothing, Shoes & Jewelry › Men › Clothing › Shirts", price=18.99, price_tag="$18.99",
    description="A soft everyday tee.", bullets=("Tagless label",), attributes=("crew neck", "machine washable fabric"),
    options=(("color", ("black", "white")), ("size", ("small", "large", "xx-large"))),
)  # fmt: skip
GOAL = Goal(
    asin=SHIRT.asin, instruction="i need a crew neck machine washable t-shirt in black, size large",
    attributes=("crew neck", "machine washable"), options=("black", "large"), price_upper=30.0,
    query=SHIRT.query, name=SHIRT.title, product_category=SHIRT.product_category,
)  # fmt: skip


def test_full_match_scores_one() -> None:
    # attributes: "crew neck" equals one, "machine washable" is a token subset of "machine washable fabric"
    # (token-set ratio 100): 2 of 2; options black and large: 2; price 18.99 <= 30: 1; r_type 1 (same query).
    # r = 1 * (2 + 2 + 1) / 5 = 1.
    got = score_purchase(SHIRT, GOAL, {"color": "black", "size": "large"})
    assert got.score == 1.0 and (got.attributes, got.options, got.price_ok, got.r_type) == (2, 2, True, 1.0)


def test_a_missing_option_costs_one_fifth() -> None:
    # Only the colour chosen: options 1 -> r = (2 + 1 + 1) / 5 = 0.8.
    assert score_purchase(SHIRT, GOAL, {"color": "black"}).score == pytest.approx(0.8, abs=1e-12)


def test_a_wrong_option_value_does_not_count() -> None:
    # white is neither black (similarity far below 85) nor in the product's text: options 1 -> 0.8.
    assert score_purchase(SHIRT, GOAL, {"color": "white", "size": "large"}).score == pytest.approx(0.8, abs=1e-12)
    # sizes match exactly: xx-large is not large although the two are similar -> 0.8 as well.
    assert score_purchase(SHIRT, GOAL, {"color": "black", "size": "xx-large"}).score == pytest.approx(0.8, abs=1e-12)


def test_the_same_values_match_fuzzily_under_another_option_name() -> None:
    # token_set_ratio("x large", "xx large") = 93 > 85: under a name that is not "size" it counts.
    goal = dataclasses.replace(GOAL, options=("black", "x-large"))
    assert score_purchase(SHIRT, goal, {"color": "black", "fit": "xx-large"}).options == 2
    assert score_purchase(SHIRT, goal, {"color": "black", "size": "xx-large"}).options == 1


def test_a_price_above_the_limit_costs_one_fifth() -> None:
    # 18.99 > 15: the price term is 0 -> r = (2 + 2 + 0) / 5 = 0.8.
    cheap = dataclasses.replace(GOAL, price_upper=15.0)
    got = score_purchase(SHIRT, cheap, {"color": "black", "size": "large"})
    assert got.score == pytest.approx(0.8, abs=1e-12) and not got.price_ok


def test_a_missing_attribute_costs_one_fifth() -> None:
    goal = dataclasses.replace(GOAL, attributes=("crew neck", "moisture wicking"))
    # "moisture wicking" is not similar to either attribute nor in the text: attributes 1 -> (1 + 2 + 1) / 5.
    assert score_purchase(SHIRT, goal, {"color": "black", "size": "large"}).score == pytest.approx(0.8, abs=1e-12)


def test_an_attribute_in_the_features_counts() -> None:
    goal = dataclasses.replace(GOAL, attributes=("crew neck", "tagless label"))
    assert score_purchase(SHIRT, goal, {"color": "black", "size": "large"}).score == 1.0


def test_wrong_type_scores_zero() -> None:
    # Another query, categories sharing no level, and none of the goal name's content words
    # {avelor, crew, neck, cotton, shirt, men}: title score 0 -> r_type 0 -> r = 0 whatever else matches.
    mug = dataclasses.replace(
        SHIRT, asin="B0MUG00001", title="Brightwell Ceramic Coffee Mug", query="coffee mugs",
        product_category="Home & Kitchen › Kitchen & Dining › Mugs",
    )  # fmt: skip
    got = score_purchase(mug, GOAL, {"color": "black", "size": "large"})
    assert got.r_type == 0.0 and got.score == 0.0


def test_type_thresholds() -> None:
    wanted = content_words(GOAL.name)
    assert wanted == {"avelor", "crew", "neck", "cotton", "shirt", "men"}
    other = dict(query="tote bags", product_category="Bags › Totes")
    # 1 of 6 words shared (0.167): not above 0.2, not below 0.1, no query or category match -> 0.5,
    # so a purchase that matches everything else scores 0.5 * 5 / 5.
    tote = dataclasses.replace(SHIRT, title="Avelor Canvas Tote", **other)
    assert type_reward(tote, GOAL) == 0.5
    assert score_purchase(tote, GOAL, {"color": "black", "size": "large"}).score == pytest.approx(0.5, abs=1e-12)
    # 2 of 6 (0.333 > 0.2) -> 1.
    assert type_reward(dataclasses.replace(SHIRT, title="Avelor Cotton Tote", **other), GOAL) == 1.0
    # Two shared category levels (Clothing, Shoes & Jewelry; Men) lift 1 of 6 to 1.
    hoodie = dataclasses.replace(SHIRT, title="Zuraco Fleece Hoodie for Men", query="men's hoodies",
                                 product_category="Clothing, Shoes & Jewelry › Men › Clothing › Hoodies")  # fmt: skip
    assert type_reward(hoodie, GOAL) == 1.0
    # A goal name of 11 content words sharing 1 (0.09 < 0.1) -> 0.1.
    long_goal = dataclasses.replace(GOAL, name="Avelor alpha beta gamma delta epsilon zeta theta iota kappa lambda")
    assert type_reward(tote, long_goal) == 0.1


def test_a_chosen_value_in_the_products_text_counts_even_when_wrong() -> None:
    # WebShop's rule: a chosen option whose value occurs in the title counts; white is in this title.
    white_title = dataclasses.replace(SHIRT, title="Avelor Crew Neck Cotton T-Shirt for Men, White Edition")
    assert score_purchase(white_title, GOAL, {"color": "white", "size": "large"}).options == 2


def test_option_count_is_capped_at_the_goals_options() -> None:
    # Two counting choices for a goal naming one option: |U_opt ∩ Y_opt| <= |U_opt| = 1, so r = 4 / 4 = 1, not 5 / 4.
    goal = dataclasses.replace(GOAL, options=("black",))
    got = score_purchase(SHIRT, goal, {"color": "black", "shade": "black"})
    assert got.options == 1 and got.score == 1.0


def test_colours_are_normalised_before_matching() -> None:
    assert normalize_color("Navy Blue") == "navy" and normalize_color("X-Large") == "x-large"
    goal = dataclasses.replace(GOAL, options=("navy blue", "large"))
    navy = dataclasses.replace(SHIRT, options=(("color", ("navy", "white")), ("size", ("large",))))
    assert score_purchase(navy, goal, {"color": "navy", "size": "large"}).score == 1.0
