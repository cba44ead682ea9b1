r"""WebShop's purchase reward (scorer ``webshop/official``), written from its definition.

Reproduces ``princeton-nlp/WebShop``, ``web_agent_site/engine/goal.py``: ``get_reward`` with
``get_type_reward``, ``get_attribute_reward`` and ``get_option_reward``, and
``web_agent_site/engine/normalize.py`` ``normalize_color``; the fuzzy match is
``thefuzz.fuzz.token_set_ratio`` at the version WebShop's ``requirements.txt`` pins
(``thefuzz==0.19.0``). No code is taken from either; every rule is re-stated here:

* ``r = (n_att + n_opt + r_price) / (|goal attributes| + |goal options| + 1) * r_type``;
* a goal attribute counts when one of the product's attributes matches it (token-set ratio
  above 85), or else when it is written in the lower-cased title, bullet points or description;
* a goal option counts when one of the chosen option values matches it (token-set ratio above
  85), both first passed through WebShop's colour normalisation (:func:`normalize_color`).
  Every option, sizes included, is matched this way: ``x-large`` matches ``large`` and
  ``5 pounds`` matches ``15 pounds``. Options are counted per goal option, so
  ``n_opt <= |goal options|`` and ``0 <= r <= 1`` (nothing is capped); the product's texts are
  not searched for options;
* ``r_price`` is 1 when the price paid is at most the goal's price cap;
* ``r_type`` compares the product type: 1.0 when the query is the goal's, or the category
  paths share at least two parts, or more than 20% of the goal title's nouns are in the
  product title; 0.5 otherwise; then 0.1 when under 10% of those nouns match, and 0.0 when
  none does (the strict cut that zeroes a purchase of another kind of product).

The token-set ratio (:func:`token_set_ratio`) is thefuzz 0.19.0's: both strings lose the
characters U+0080 to U+00FF, every non-word character (``\W``) becomes a space, then lower
case and outer spaces stripped (an empty result scores 0); the token sets give the sorted
intersection ``t0`` and the two sides ``t0 + sorted(a - b)`` and ``t0 + sorted(b - a)``; the
score is the best of the three pairwise ratios, each ``round(100 * difflib.SequenceMatcher
ratio)`` (100 for equal strings, 0 when one is empty). WebShop's requirements do not install
the optional ``python-Levenshtein``, so thefuzz 0.19.0 falls back to ``difflib``. Later
thefuzz (0.20 on, over ``rapidfuzz``) uses the Indel ratio instead, which can fall on the other
side of 85 (``mouintin`` / ``mountain``: 62 here, 88 there). The score is an integer, so
"above 85" means a raw ratio of at least 85.5.

Departures, each deliberate (also listed in :data:`SCORERS`):

1. WebShop picks the title's nouns with spaCy's ``en_core_web_sm`` tagger, which lumos-gym does
   not ship; here the content words of the title (words of two or more letters that are not
   function words) stand in for them.
2. Goal options are compared as values, as WebShop compares those of its human instructions (a
   list). For its synthetic goals (a dict) WebShop passes ``(name, value)`` pairs, which
   ``normalize_color`` tests element by element and thefuzz reads as the pair's ``str()``.
3. A price cap of 0 or less, which WebShop never draws, counts as no cap (WebShop's
   ``get_reward`` fails on it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any, Protocol

from lumos_gym.scoring.scorers import Scorer


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
    "COLOR_WORDS",
    "FUZZY_THRESHOLD",
    "SCORERS",
    "Goal",
    "RewardBreakdown",
    "best_options",
    "compute_reward",
    "content_words",
    "normalize_color",
    "token_set_ratio",
    "zero_metrics",
]

#: A token-set ratio strictly above this is a match (``score > 85`` in ``goal.py``).
FUZZY_THRESHOLD = 85
#: WebShop's colour words (``normalize.py`` ``COLOR_SET``), in its (alphabetical) order.
COLOR_WORDS: tuple[str, ...] = tuple("""
    alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze
    brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas
    coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso
    fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki
    lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha
    multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple
    rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash
    sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow
""".split())
#: Option names :func:`best_options` looks up only exactly (its choice, not the reward's rule).
_LOOKED_UP_EXACTLY = ("size",)
_LATIN1_HIGH = dict.fromkeys(range(0x80, 0x100))
_NON_WORD_RE = re.compile(r"\W")
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


def _fuzz_process(text: str) -> str:
    """Return ``full_process(text, force_ascii=True)`` of thefuzz 0.19.0."""
    return _NON_WORD_RE.sub(" ", text.translate(_LATIN1_HIGH)).lower().strip()


def _ratio(a: str, b: str) -> int:
    """Return ``ratio(a, b)`` of thefuzz 0.19.0 without python-Levenshtein (over ``difflib``)."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * SequenceMatcher(None, a, b).ratio()))


@lru_cache(maxsize=65536)
def token_set_ratio(a: str, b: str) -> int:
    """Return thefuzz 0.19.0's ``token_set_ratio(a, b)``, 0 to 100 (see the module docstring).

    The order of the arguments matters in rare cases (``difflib`` is not symmetric); WebShop
    passes the product's side first.
    """
    a, b = _fuzz_process(a), _fuzz_process(b)
    if not a or not b:
        return 0
    tokens_a, tokens_b = set(a.split()), set(b.split())
    common = " ".join(sorted(tokens_a & tokens_b))
    side_a = f"{common} {' '.join(sorted(tokens_a - tokens_b))}".strip()
    side_b = f"{common} {' '.join(sorted(tokens_b - tokens_a))}".strip()
    return max(_ratio(common, side_a), _ratio(common, side_b), _ratio(side_a, side_b))


def normalize_color(value: str) -> str:
    """Return the first of :data:`COLOR_WORDS` written inside ``value``, else ``value``.

    WebShop's ``normalize_color``: a plain, case-sensitive substring test, applied to every
    option value, whatever its option: ``"navy blue"`` becomes ``"blue"``, ``"light gray"``
    becomes ``"gray"``, ``"standard"`` becomes ``"tan"``, ``"Navy"`` stays ``"Navy"``.
    """
    return next((color for color in COLOR_WORDS if color in value), value)


def content_words(title: str) -> set[str]:
    """Return the content words of a title (the stand-in for spaCy's nouns)."""
    return {w for w in _WORD_RE.findall(title.lower()) if w not in _FUNCTION_WORDS}


def _type_score(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    query_match = product.query == goal.query
    bought = {part.strip() for part in product.product_category.split("›")}
    wanted = {part.strip() for part in goal.product_category.split("›")}
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
    texts = (product.title.lower(), " ".join(product.features).lower(),
             product.description.lower())
    count = 0
    for wanted in goal.attributes:
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes):
            count += 1
        elif any(wanted in text for text in texts):
            count += 1
    return count


def _option_matches(goal: Goal, chosen: Mapping[str, str]) -> int:
    picked = [normalize_color(value) for value in chosen.values()]
    count = 0
    for wanted in goal.options:
        wanted = normalize_color(wanted)
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in picked):
            count += 1
    return count


def compute_reward(
    product: Product, goal: Goal, *, price: float | None = None, options: Mapping[str, str]
) -> RewardBreakdown:
    """Return the reward of buying ``product`` with the chosen ``options`` for ``goal``.

    Args:
        product: the product bought.
        goal: what was asked for.
        price: the price paid (default: the product's price).
        options: the chosen options, option name to value (only the values are compared).
    """
    paid = product.price if price is None else price
    type_score, query_match, category_match, title_score = _type_score(product, goal)
    n_att = _attribute_matches(product, goal)
    n_opt = _option_matches(goal, options)
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

    This is what the expert clicks, not the reward's rule. A value is looked up in the option
    group of the same name when ``names`` gives it, then in every group: exactly, then (except
    for sizes, which the expert never swaps for a near one) by the raw token-set ratio; values
    the product does not offer are left out.
    """
    chosen: dict[str, str] = {}
    for i, value in enumerate(goal_options):
        value = value.strip().lower()
        name = names[i] if i < len(names) else ""
        groups = [(n, vals) for n, vals in product.options.items() if n not in chosen]
        groups.sort(key=lambda group: group[0] != name)
        found = next(((n, v) for n, vals in groups for v in vals if v.lower() == value), None)
        if found is None:
            fuzzy = [(n, vals) for n, vals in groups if n.lower() not in _LOOKED_UP_EXACTLY]
            found = next(((n, v) for n, vals in fuzzy for v in vals
                          if token_set_ratio(v, value) > FUZZY_THRESHOLD), None)
        if found is not None:
            chosen[found[0]] = found[1]
    return chosen


SCORERS = (
    Scorer(
        name="webshop/official",
        benchmark="WebShop",
        reproduces="princeton-nlp/WebShop, web_agent_site/engine/goal.py, get_reward "
        "(get_type_reward, get_attribute_reward, get_option_reward; normalize_color from "
        "web_agent_site/engine/normalize.py; thefuzz==0.19.0 token_set_ratio as pinned)",
        rule="r = (goal attributes found + goal options matched by a chosen option + price "
        "within the cap) / (|attributes| + |options| + 1), times r_type (1, 0.5, 0.1 or 0 by "
        "query, category path and title nouns); matches are thefuzz token-set ratios above 85, "
        "options after WebShop's colour normalisation.",
        departures=(
            "the goal title's nouns (spaCy en_core_web_sm in WebShop) are approximated by its "
            "content words: words of two or more letters that are not function words",
            "goal options are compared as values, as WebShop does for its human instructions; "
            "for its synthetic goals WebShop compares (name, value) pairs",
            "a price cap of 0 or less counts as no cap (WebShop's get_reward fails on it)",
        ),
        envs=("lumos/WebShop-v0",),
        conformance="tests/test_scoring_webshop_conformance.py",
    ),
)
