"""WebShop's purchase reward against the official rule, case by case.

Every expected value below is worked out by hand from WebShop's own scorer
(``princeton-nlp/WebShop``, ``web_agent_site/engine/goal.py``: ``get_reward``,
``get_type_reward``, ``get_attribute_reward``, ``get_option_reward``; ``normalize_color`` from
``web_agent_site/engine/normalize.py``; the token-set ratio of ``thefuzz==0.19.0``, the version
its ``requirements.txt`` pins, which rounds to an integer and, without python-Levenshtein, uses
``difflib``). The reward is ``(n_att + n_opt + r_price) / (|attributes| + |options| + 1) *
r_type``; with the goal below (two attributes, two options) a full purchase is 5/5 and each
miss costs 1/5. Where lumos-gym keeps a departure, the test names it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest

from lumos_gym.envs.web.webshop import WebShopEnv
from lumos_gym.scoring import webshop as ws
from lumos_gym.scoring.scorers import get_scorer
from lumos_gym.scoring.webshop import (
    COLOR_WORDS,
    SCORERS,
    Goal,
    compute_reward,
    content_words,
    normalize_color,
    token_set_ratio,
)


@dataclass(frozen=True)
class Item:
    """A product as the reward reads it (WebShop's product record, lumos-gym's field names)."""

    title: str = "Northvale Machine Wash Long Sleeve Dress Shirt"
    description: str = ""
    features: tuple[str, ...] = ()
    query: str = "men's dress shirts"
    product_category: str = "Clothing › Men › Shirts › Dress Shirts"
    attributes: tuple[str, ...] = ("machine wash", "long sleeve", "slim fit")
    price: float = 29.99
    options: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: {
        "color": ("white", "navy"), "size": ("large", "x-large")})


GOAL = Goal(
    instruction="i need machine wash, slim fit men's dress shirts with color: navy, and size: "
    "large, and price lower than 40.00 dollars",
    attributes=("machine wash", "slim fit"),
    options=("navy", "large"),
    price_upper=40.0,
    query="men's dress shirts",
    category="clothing",
    product_category="Clothing › Men › Shirts › Dress Shirts",
    name="Northvale Machine Wash Long Sleeve Dress Shirt",
)
FULL = {"color": "navy", "size": "large"}


def reward(options: Mapping[str, str], *, item: Item = Item(), goal: Goal = GOAL,
           price: float | None = None) -> float:
    return compute_reward(item, goal, price=price, options=options).reward


def with_options(*values: str) -> Goal:
    return replace(GOAL, options=values)


# ------------------------------------------------------------------------ the fuzzy match
@pytest.mark.parametrize(
    ("purchased", "goal", "score"),
    [
        ("large", "large", 100),
        ("Machine Wash", "machine wash", 100),  # lower case, punctuation as spaces
        ("x-large", "large", 100),  # "x large" holds every token of "large"
        ("5 pounds", "15 pounds", 94),  # "pounds 5" / "pounds 15": 2 * 8 / 17
        ("long sleeve", "short sleeve", 71),  # best pair "sleeve" / "sleeve long": 2 * 6 / 17
        ("machine washable", "machine wash", 86),  # 2 * 12 / 28 = 85.7, rounded up
        ("12 inch", "10 inch", 86),  # "inch 12" / "inch 10": 2 * 6 / 14 = 85.7
        # 2 * 20 / 47 = 85.1, rounded to 85: not above 85 (an unrounded ratio would match)
        ("stainless unscented count", "stainless ounces count", 85),
        # difflib's blocks, not the Indel ratio of thefuzz >= 0.20 (88), and not symmetric
        ("mouintin", "mountain", 62),
        ("mountain", "mouintin", 88),
        ("navy", "blue", 0),
        ("", "anything", 0),
        ("--", "anything", 0),  # nothing left after processing
    ],
)
def test_token_set_ratio_is_thefuzz_0_19(purchased, goal, score):
    assert token_set_ratio(purchased, goal) == score


# ------------------------------------------------------------------------------- options
def test_every_option_is_fuzzy_sizes_included():
    # "x-large" chosen for "large": the ratio is 100, so WebShop gives the option
    assert reward({"color": "navy", "size": "x-large"}) == pytest.approx(1.0)
    # "large" chosen for "x-large", the other way round
    assert reward({"color": "navy", "size": "large"}, goal=with_options("navy", "x-large")) == (
        pytest.approx(1.0))
    # "5 pounds" chosen for "15 pounds": ratio 94, so the option counts (full reward)
    dumbbell = Item(options={"weight": ("5 pounds", "15 pounds")})
    goal = with_options("15 pounds")
    breakdown = compute_reward(dumbbell, goal, options={"weight": "5 pounds"})
    assert breakdown.option_score == 1.0 and breakdown.reward == pytest.approx(1.0)
    # a size that shares nothing scores nothing
    assert reward({"color": "navy", "size": "small"}) == pytest.approx(4 / 5)


@pytest.mark.parametrize(
    ("item", "options"),
    [
        # the goal's "navy" is written in the title, features and description but not chosen
        (Item(title="Northvale Navy Machine Wash Long Sleeve Dress Shirt",
              features=("Navy cotton, machine wash.",), description="A navy shirt."),
         {"color": "white", "size": "large"}),
        # the chosen, wrong "white" is written in the title: no credit either
        (Item(title="Northvale White Machine Wash Long Sleeve Dress Shirt"),
         {"color": "white", "size": "large"}),
        (Item(title="Northvale Navy Machine Wash Long Sleeve Dress Shirt"), {"size": "large"}),
    ],
    ids=["goal-word-in-texts", "chosen-word-in-title", "not-chosen-at-all"],
)
def test_product_texts_never_count_for_options(item, options):
    breakdown = compute_reward(item, GOAL, options=options)
    assert breakdown.option_score == 0.5
    assert breakdown.reward == pytest.approx(4 / 5)


def test_options_are_counted_per_goal_option():
    # more chosen options than goal options: one goal option, one match, never more
    goal = with_options("navy")
    many = {"color": "navy", "size": "large", "fit": "slim", "trim": "navy"}
    breakdown = compute_reward(Item(), goal, options=many)
    assert breakdown.option_score == 1.0 and breakdown.reward == pytest.approx(1.0)
    # two chosen options matching the same goal option count once
    assert reward({"color": "navy", "trim": "navy"}) == pytest.approx(4 / 5)
    # one chosen option can satisfy two goal options ("x-large" matches both)
    assert reward({"size": "x-large"}, goal=with_options("large", "x-large")) == (
        pytest.approx(1.0))
    # no chosen option at all
    assert reward({}) == pytest.approx(3 / 5)
    # names are not compared, only values
    assert reward({"anything": "navy", "else": "large"}) == pytest.approx(1.0)


def test_the_reward_never_exceeds_one():
    rng = random.Random(0)
    values = ("navy", "large", "x-large", "navy blue", "white", "xx-large", "blue")
    for _ in range(300):
        chosen = {f"o{i}": rng.choice(values) for i in range(rng.randint(0, 6))}
        goal = with_options(*rng.sample(values, rng.randint(0, 3)))
        assert 0.0 <= reward(chosen, goal=goal) <= 1.0


# ---------------------------------------------------------------------- colour normalisation
@pytest.mark.parametrize(
    ("value", "normal"),
    [
        ("navy", "navy"),
        ("navy blue", "blue"),  # "blue" comes before "navy" in WebShop's list
        ("light gray", "gray"),  # "gray" before "light"
        ("heather grey", "grey"),
        ("wine red", "red"),
        ("black white", "black"),
        ("standard", "tan"),  # a plain substring test, on every option
        ("multicolored", "multicolor"),
        ("Navy", "Navy"),  # case-sensitive
        ("x-large", "x-large"),
        ("", ""),
    ],
)
def test_normalize_color(value, normal):
    assert normalize_color(value) == normal


def test_colour_normalisation_decides_options():
    # "navy" for "navy blue": the raw ratio is 100, but "navy" is compared with "blue"
    assert token_set_ratio("navy", "navy blue") == 100
    assert reward({"color": "navy", "size": "large"}, goal=with_options("navy blue", "large")) == (
        pytest.approx(4 / 5))
    # "dark blue" for "light blue": raw ratio 62, but both become "blue"
    assert token_set_ratio("dark blue", "light blue") == 62
    assert reward({"color": "dark blue", "size": "large"},
                  goal=with_options("light blue", "large")) == pytest.approx(1.0)
    # "standard" for "tan" (both "tan")
    assert reward({"color": "standard", "size": "large"}, goal=with_options("tan", "large")) == (
        pytest.approx(1.0))
    # two different colours stay different
    assert reward({"color": "white", "size": "large"}) == pytest.approx(4 / 5)


def test_colour_words_are_webshops():
    assert len(COLOR_WORDS) == 102 and list(COLOR_WORDS) == sorted(COLOR_WORDS)
    assert {"alabaster", "blue", "grey", "gray", "navy", "tan", "yellow"} <= set(COLOR_WORDS)


# ---------------------------------------------------------------------- attributes, price
def test_attributes_fuzzy_then_texts():
    # "machine washable" matches "machine wash" (86); "slim fit" only in the bullet points
    item = Item(attributes=("machine washable",), features=("SLIM FIT: tailored.",))
    assert compute_reward(item, GOAL, options=FULL).attribute_score == 1.0
    # "machine wash" only in the title (lower-cased) counts; "slim fit" is nowhere
    item = Item(attributes=("long sleeve",))
    breakdown = compute_reward(item, GOAL, options=FULL)
    assert breakdown.attribute_score == 0.5 and breakdown.reward == pytest.approx(4 / 5)
    # neither in the attributes nor in the texts
    item = Item(title="Northvale Long Sleeve Dress Shirt Machine", attributes=("long sleeve",))
    breakdown = compute_reward(item, GOAL, options=FULL)
    assert breakdown.attribute_score == 0.0 and breakdown.reward == pytest.approx(3 / 5)


def test_price():
    assert reward(FULL, price=45.0) == pytest.approx(4 / 5)  # over the cap
    assert reward(FULL, price=40.0) == pytest.approx(1.0)  # at the cap counts
    assert reward(FULL, item=Item(price=45.0)) == pytest.approx(4 / 5)  # the product's price
    # departure 3: a cap of 0 counts as no cap (WebShop's get_reward fails on it)
    assert reward(FULL, price=45.0, goal=replace(GOAL, price_upper=0.0)) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------- type
# Departure 1: the title's nouns are approximated by its content words (no spaCy). The
# titles below are chosen so that the nouns and the content words share the same words.
@pytest.mark.parametrize(
    ("item", "type_score"),
    [
        # another kind: other query, one shared category part, no shared title word
        (Item(title="Brevik Waterproof Trail Boots", query="men's work boots",
              product_category="Tools › Safety › Boots"), 0.0),
        # one goal title word in seven ("dress"): 0.14, no query or category match
        (Item(title="Quillmere Dress Shoe", query="dress shoes",
              product_category="Shoes › Formal"), 0.5),
        # the same, but two category parts shared
        (Item(title="Quillmere Dress Shoe", query="dress shoes",
              product_category="Clothing › Men › Shoes"), 1.0),
        # the same query is enough
        (Item(title="Quillmere Dress Shoe", product_category="Shoes › Formal"), 1.0),
    ],
    ids=["wrong-type", "half", "category", "query"],
)
def test_type_reward(item, type_score):
    breakdown = compute_reward(item, GOAL, options=FULL)
    assert breakdown.type_score == type_score
    assert breakdown.reward == pytest.approx(type_score)


def test_type_reward_under_a_tenth():
    # one goal title word in twelve: 0.083 < 0.1, so r_type = 0.1 even with the same query
    goal = replace(GOAL, name="Northvale Machine Wash Long Sleeve Slim Fit Button Down Cotton "
                   "Dress Shirt")
    assert len(content_words(goal.name)) == 12
    breakdown = compute_reward(Item(title="Quillmere Dress Shoe"), goal, options=FULL)
    assert breakdown.type_score == 0.1 and breakdown.reward == pytest.approx(0.1)


def test_type_reward_without_title_words():
    # no content word in the goal title: title_score 0.2, so the query decides
    goal = replace(GOAL, name="A 2 X")
    assert compute_reward(Item(), goal, options=FULL).type_score == 1.0
    other = Item(query="dress shoes", product_category="Shoes › Formal")
    assert compute_reward(other, goal, options=FULL).type_score == 0.5


# ------------------------------------------------------------------------------ the record
def test_the_scorer_record():
    (record,) = SCORERS
    assert record.name == "webshop/official" and get_scorer(record.name) == record
    assert "get_reward" in record.reproduces and "goal.py" in record.reproduces
    assert record.envs == ("lumos/WebShop-v0",)
    assert record.conformance == "tests/test_scoring_webshop_conformance.py"
    assert len(record.departures) == 3 and record.rule
    assert WebShopEnv.default_scorer == "webshop/official"
    # every departure is named in the module docstring too
    assert "spaCy" in ws.__doc__ and "synthetic goals" in ws.__doc__
    assert "0 or less" in ws.__doc__
