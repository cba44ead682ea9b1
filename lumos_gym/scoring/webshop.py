"""WebShop's purchase reward, written from its definition.

Source of every rule: ``princeton-nlp/WebShop``, ``web_agent_site/engine/goal.py``
(``get_reward``, ``get_type_reward``, ``get_attribute_reward``, ``get_option_reward``):

* ``r = (n_att + n_opt + r_price) / (|goal attributes| + |goal options| + 1) * r_type``;
* an attribute counts when one of the product's attributes matches it with a token-set ratio
  above 85, or when it is written (lower case) in the title, the bullet points or the
  description;
* a chosen option counts when it equals a goal option (the ``size`` option, exactly) or matches
  one with a token-set ratio above 85 (other options), or when its value is written in the
  title, bullet points or description;
* ``r_price`` is 1 when the price paid is at most the goal's price cap;
* ``r_type`` compares the product type: 1.0 when the query is the goal's, or the category
  paths share at least two parts, or more than 20% of the goal title's nouns are in the
  product title; 0.5 otherwise; then 0.1 when under 10% of those nouns match, and 0.0 when
  none does (the strict cut that zeroes a purchase of another kind of product).

Two departures, both documented here: WebShop picks the title's nouns with spaCy's
``en_core_web_lg`` tagger, which lumos-gym does not ship; here the content words of the title
(words of two or more letters that are not function words or numbers) stand in for them. And
WebShop counts every chosen option that matches, so choosing more options than the goal names
could score above the goal's count; here the option count is capped at the goal's, so that
``0 <= r <= 1`` always holds. Color names are compared as written (WebShop first maps some
color spellings onto one form).

The fuzzy match is the token-set ratio of ``thefuzz``/``rapidfuzz``, written here from its
definition: lower-case alphanumeric tokens; the sorted intersection ``t0`` and the two sides
``t0 + sorted(a - b)`` and ``t0 + sorted(b - a)``; the best pairwise Indel similarity
``2 * LCS / (len(x) + len(y))``, as a percentage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Protocol


class Product(Protocol):
    """What the reward reads of a product (the shop's ``envs.web.shop.catalog.Product``)."""

    title: str
    description: str
    features: Sequence[str]
    query: str
    product_category: str
    attributes: Sequence[str]
    price: float
    options: Mapping[str, Sequence[str]]

__all__ = [
    "EXACT_MATCH_OPTIONS",
    "FUZZY_THRESHOLD",
    "Goal",
    "RewardBreakdown",
    "best_options",
    "compute_reward",
    "content_words",
    "token_set_ratio",
    "zero_metrics",
]

#: Option names matched exactly, not fuzzily (WebShop's ``EXACT_MATCH_OPTS``).
EXACT_MATCH_OPTIONS = ("size",)
#: Token-set ratio above which two phrases match.
FUZZY_THRESHOLD = 85
_TOKEN_RE = re.compile(r"[a-z0-9]+")
_WORD_RE = re.compile(r"[a-z]{2,}")
_FUNCTION_WORDS = frozenset(
    "a an the and or but for with without of in on at to by from as into over under is are "
    "be it its this that these those".split()
)


@dataclass(frozen=True)
class Goal:
    """What a shopper asks for: the instruction and what the reward checks.

    Attributes:
        instruction: the instruction text shown to the agent.
        attributes: attributes the product must have (lower case).
        options: option values to choose (lower case), WebShop's ``goal_options``.
        price_upper: the price cap (WebShop writes 1000000 for none).
        query: the search query of the goal product's kind (for the type reward).
        category: the goal product's department.
        product_category: the goal product's category path.
        name: the goal product's title (for the type reward).
        asin: the goal product (kept server-side; never shown to the agent).
        option_names: the option name of each goal option when known (generated goals), in
            the order of ``options``; empty for WebShop's human instructions, which give values
            only.
    """

    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float
    query: str
    category: str
    product_category: str
    name: str
    asin: str = ""
    option_names: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record."""
        record = asdict(self)
        record["attributes"] = list(self.attributes)
        record["options"] = list(self.options)
        record["option_names"] = list(self.option_names)
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Goal:
        """Read a record written by :meth:`to_dict`."""
        return cls(
            instruction=str(record["instruction"]),
            attributes=tuple(str(a) for a in record.get("attributes", ())),
            options=tuple(str(o) for o in record.get("options", ())),
            price_upper=float(record.get("price_upper", 1_000_000)),
            query=str(record.get("query", "")),
            category=str(record.get("category", "")),
            product_category=str(record.get("product_category", "")),
            name=str(record.get("name", "")),
            asin=str(record.get("asin", "")),
            option_names=tuple(str(n) for n in record.get("option_names", ())),
        )


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one purchase and its parts.

    Attributes:
        reward: the total, in ``[0, 1]``.
        attribute_score: the share of goal attributes the product has (1.0 for none asked).
        option_score: the share of goal options chosen (1.0 for none asked).
        price_score: 1.0 when the price is within the cap.
        type_score: WebShop's ``r_type`` (1.0, 0.5, 0.1 or 0.0).
        query_match: the product's query is the goal's.
        category_match: the category paths share at least two parts.
        title_score: the share of the goal title's content words in the product title.
    """

    reward: float
    attribute_score: float
    option_score: float
    price_score: float
    type_score: float
    query_match: bool
    category_match: bool
    title_score: float

    def metrics(self) -> dict[str, float]:
        """Return the episode metrics: ``reward``, ``success`` and the four scores."""
        return {
            "reward": self.reward,
            "success": float(self.reward >= 1.0 - 1e-9),
            "attribute_score": self.attribute_score,
            "option_score": self.option_score,
            "price_score": self.price_score,
            "type_score": self.type_score,
        }


def zero_metrics() -> dict[str, float]:
    """Return the metrics of an episode that bought nothing."""
    return {"reward": 0.0, "success": 0.0, "attribute_score": 0.0, "option_score": 0.0,
            "price_score": 0.0, "type_score": 0.0}


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


def _lcs(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if ch == other else max(previous[j], current[-1]))
        previous = current
    return previous[-1]


def _similarity(a: str, b: str) -> float:
    if not a and not b:
        return 100.0
    return 200.0 * _lcs(a, b) / (len(a) + len(b))


@lru_cache(maxsize=65536)
def token_set_ratio(a: str, b: str) -> float:
    """Return the token-set similarity of two phrases, 0 to 100 (see the module docstring)."""
    ta, tb = set(_tokens(a)), set(_tokens(b))
    if not ta or not tb:
        return 0.0
    common = " ".join(sorted(ta & tb))
    left = " ".join(sorted(ta - tb))
    right = " ".join(sorted(tb - ta))
    if common and (not left or not right):
        return 100.0
    side_a = f"{common} {left}".strip()
    side_b = f"{common} {right}".strip()
    scores = [_similarity(side_a, side_b)]
    if common:
        scores += [_similarity(common, side_a), _similarity(common, side_b)]
    return max(scores)


def content_words(title: str) -> set[str]:
    """Return the content words of a title (the stand-in for spaCy's nouns)."""
    return {w for w in _WORD_RE.findall(title.lower()) if w not in _FUNCTION_WORDS}


def _texts(product: Product) -> tuple[str, str, str]:
    return (product.title.lower(), " ".join(product.features).lower(),
            product.description.lower())


def _type_score(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    query_match = product.query.strip().lower() == goal.query.strip().lower()
    bought = {p.strip() for p in product.product_category.split("›")} - {""}
    wanted = {p.strip() for p in goal.product_category.split("›")} - {""}
    category_match = len(bought & wanted) >= 2
    desired = content_words(goal.name)
    title_score = (len(content_words(product.title) & desired) / len(desired)) if desired else 0.2
    score = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        score = 0.1
    if title_score == 0.0:
        score = 0.0
    return score, query_match, category_match, title_score


def _attribute_matches(product: Product, goal: Goal) -> int:
    title, features, description = _texts(product)
    count = 0
    for wanted in goal.attributes:
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes):
            count += 1
        elif wanted in title or wanted in features or wanted in description:
            count += 1
    return count


def _option_matches(product: Product, goal: Goal, chosen: Mapping[str, str]) -> int:
    wanted = [o.strip().lower() for o in goal.options]
    title, features, description = _texts(product)
    count = 0
    for name, value in chosen.items():
        value = value.strip().lower()
        if name.strip().lower() in EXACT_MATCH_OPTIONS:
            matched = value in wanted
        else:
            matched = any(token_set_ratio(w, value) > FUZZY_THRESHOLD for w in wanted)
        if matched or value in title or value in features or value in description:
            count += 1
    return min(count, len(wanted))


def compute_reward(
    product: Product, goal: Goal, *, price: float | None = None, options: Mapping[str, str]
) -> RewardBreakdown:
    """Return the reward of buying ``product`` with the chosen ``options`` for ``goal``.

    Args:
        product: the product bought.
        goal: what was asked for.
        price: the price paid (default: the product's price).
        options: the chosen options, option name to value.
    """
    paid = product.price if price is None else price
    type_score, query_match, category_match, title_score = _type_score(product, goal)
    n_att = _attribute_matches(product, goal)
    n_opt = _option_matches(product, goal, options)
    r_price = float(paid <= goal.price_upper) if goal.price_upper > 0 else 1.0
    total = (n_att + n_opt + r_price) / (len(goal.attributes) + len(goal.options) + 1)
    return RewardBreakdown(
        reward=total * type_score,
        attribute_score=n_att / len(goal.attributes) if goal.attributes else 1.0,
        option_score=n_opt / len(goal.options) if goal.options else 1.0,
        price_score=r_price,
        type_score=type_score,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )


def best_options(
    product: Product, goal_options: Sequence[str], names: Sequence[str] = ()
) -> dict[str, str]:
    """Return the product's options that realise the goal's option values (name to value).

    A value is looked up in the option group of the same name when ``names`` gives it, then in
    every group (exactly, then by the fuzzy match); values the product does not offer are left
    out.
    """
    chosen: dict[str, str] = {}
    for i, value in enumerate(goal_options):
        value = value.strip().lower()
        name = names[i] if i < len(names) else ""
        groups = [(n, vals) for n, vals in product.options.items() if n not in chosen]
        groups.sort(key=lambda group: group[0] != name)
        found = next(((n, v) for n, vals in groups for v in vals if v.lower() == value), None)
        if found is None:
            fuzzy = [(n, vals) for n, vals in groups if n.lower() not in EXACT_MATCH_OPTIONS]
            found = next(((n, v) for n, vals in fuzzy for v in vals
                          if token_set_ratio(v, value) > FUZZY_THRESHOLD), None)
        if found is not None:
            chosen[found[0]] = found[1]
    return chosen
