"""The shop's products: the product record, the catalogue with its search, and a generator.

A :class:`Product` holds what WebShop's product file holds (``princeton-nlp/WebShop``,
``web_agent_site/engine/engine.py`` ``load_products``): a title, a category path
(``product_category``, parts joined by ``›``), the search ``query`` it was collected under, a
price (or a price range), a description, bullet features, hidden attributes, customization
options (``{option name: [values]}``), reviews with scores and an average rating.

:func:`generate_catalog` writes a shop of invented products from word lists written for this
project: 11 categories, 32 product kinds (dress shirts, running shoes, wireless earbuds, water
bottles, shampoo, protein bars, bed sheets, yoga mats, dog beds, gel pens...), each with its own
attribute pool (``machine wash``, ``non slip``, ``stainless steel``, ``gluten free``...), option
groups (color, size, capacity, flavor, scent, length...), price range, brands and phrases. The
words are chosen so that the reward's fuzzy matching never confuses two attributes of one kind
(no one's words are a subset of another's), nor two option values of one kind other than sizes
and ``black white`` / ``all black``: WebShop matches sizes fuzzily too (``x-large`` earns
``large``, ``6`` earns ``6.5``) and its colour normalisation makes both of those ``black``. No
product text mentions an attribute the product lacks (WebShop's attribute reward also searches
the title, features and description) or any option value, and titles, features and
descriptions carry no digits. The same ``(seed, num_products)`` always gives the same
catalogue, byte for byte. The word lists (:data:`KINDS`, brands, phrases) are in
:mod:`~lumos_gym.envs.web.shop.kinds`.

:func:`validation_catalog` is the shop of the ``validation`` split: the catalogue of
:func:`generate_catalog` (the same products, in the same order) followed by one product for every
:data:`VALIDATION_SHARE` of them, drawn from a random stream of their own; those added products,
which no other shop holds, are the only targets of validation tasks
(:attr:`Catalog.validation_asins`).

:class:`Catalog` searches its products with BM25 (:mod:`lumos_gym.retrieval.bm25`) over the
title, description, features and option values, as WebShop's Lucene index covers the title,
description, first bullet point and options (``search_engine/convert_product_file_format.py``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from lumos_gym.envs.web.shop.kinds import (
    _BENEFITS,
    _BRANDS,
    _OPENINGS,
    _REVIEW_BODIES,
    _REVIEW_TITLES,
    _ROOTS,
    _TITLE_TAILS,
    KINDS,
    ProductKind,
)
from lumos_gym.errors import LumosGymError
from lumos_gym.retrieval.bm25 import get_index
from lumos_gym.retrieval.corpus import Corpus
from lumos_gym.retrieval.documents import Document

__all__ = [
    "KINDS",
    "SEARCH_RETURN_N",
    "Catalog",
    "Product",
    "ProductKind",
    "Review",
    "VALIDATION_SHARE",
    "asin_split",
    "generate_catalog",
    "validation_catalog",
]

#: Hits a search keeps (WebShop's ``SEARCH_RETURN_N``), shown 10 per page.
SEARCH_RETURN_N = 50
_TEST_BUCKETS = 5  # one product in five is a test target
VALIDATION_SHARE = 5
"""The validation shop adds one product of its own for every five of the train shop."""


@dataclass(frozen=True)
class Review:
    """One customer review.

    Attributes:
        score: stars, 1 to 5.
        title: the review's headline.
        body: the review text.
    """

    score: int
    title: str
    body: str


@dataclass(frozen=True)
class Product:
    """One product of the shop.

    Attributes:
        asin: the product id (``B0`` and 8 characters for generated products), upper case.
        title: the product name shown on pages.
        category: the shop department (``clothing``, ``beauty``...).
        product_category: the category path, parts joined by `` › ``.
        query: the search query the product belongs to (its kind), lower case.
        pricing: one price, or the low and high ends of a price range.
        price: the price charged at checkout (within ``pricing``).
        description: the long description.
        features: the bullet points.
        attributes: hidden attributes the reward checks (never shown on the item page).
        options: customization options, option name to values, in page order.
        reviews: customer reviews.
        rating: the average review score, or None when there is none.
        images: image URLs (a generated product has one served by the shop itself).
        brand: the maker.
    """

    asin: str
    title: str
    category: str
    product_category: str
    query: str
    pricing: tuple[float, ...]
    price: float
    description: str
    features: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reviews: tuple[Review, ...] = ()
    rating: float | None = None
    images: tuple[str, ...] = ()
    brand: str = ""

    @property
    def price_tag(self) -> str:
        """Return the price as pages show it: ``$12.99`` or ``$12.99 to $15.99``."""
        if len(self.pricing) >= 2:
            return f"${self.pricing[0]:.2f} to ${self.pricing[1]:.2f}"
        return f"${self.price:.2f}"

    @property
    def rating_text(self) -> str:
        """Return the rating as pages show it (``4.5`` or ``N.A.``, as WebShop writes none)."""
        return "N.A." if self.rating is None else f"{self.rating:.1f}"

    def search_text(self) -> str:
        """Return the text the search index holds besides the title."""
        options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in
                                self.options.items())
        return " ".join([self.description, *self.features, options])


class Catalog(Sequence[Product]):
    """The products of a shop, by asin, with BM25 search.

    Args:
        products: the products (asins must be unique).
        name: a label for provenance (``generated/seed=0/n=1000``, a file name).
        validation: the asins of the products only the validation shop holds (the targets of
            validation tasks; see :func:`validation_catalog`), none for other shops.

    Raises:
        LumosGymError: for an empty catalogue, a repeated asin, or a validation asin that is
            not in the catalogue.
    """

    def __init__(self, products: Sequence[Product], *, name: str = "catalog",
                 validation: Sequence[str] = ()) -> None:
        self._products = tuple(products)
        self.name = name
        if not self._products:
            raise LumosGymError(f"catalog {name!r} has no products")
        self._by_asin = {p.asin.upper(): p for p in self._products}
        if len(self._by_asin) != len(self._products):
            raise LumosGymError(f"catalog {name!r}: product asins are not unique")
        self.validation_asins = frozenset(a.upper() for a in validation)
        if not self.validation_asins <= self._by_asin.keys():
            raise LumosGymError(f"catalog {name!r}: validation asins that it does not hold")

    def __len__(self) -> int:
        return len(self._products)

    def __getitem__(self, index: Any) -> Any:
        return self._products[index]

    def __iter__(self) -> Iterator[Product]:
        return iter(self._products)

    def get(self, asin: str) -> Product | None:
        """Return the product of ``asin`` (any case), or None."""
        return self._by_asin.get(asin.strip().upper())

    @cached_property
    def corpus(self) -> Corpus:
        """Return the products as a retrieval corpus (document id = asin)."""
        return Corpus(
            [Document(title=p.title, text=p.search_text(), id=p.asin) for p in self._products],
            name=self.name,
        )

    @cached_property
    def _index(self) -> Any:
        return get_index(self.corpus)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[Product]:
        """Return up to ``k`` products matching ``query``, best BM25 score first."""
        if not query.strip():
            return []
        return [self._by_asin[doc.id.upper()] for doc, _ in self._index.search(query, k)]


def asin_split(asin: str) -> str:
    """Return the split whose tasks may target ``asin``: ``"test"`` for one product in five."""
    digest = hashlib.sha256(asin.upper().encode()).digest()
    return "test" if digest[0] % _TEST_BUCKETS == 0 else "train"


# ---------------------------------------------------------------------------------------------
# Generator (its word lists are in lumos_gym.envs.web.shop.kinds)


def _asin(rng: random.Random, used: set[str]) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in used:
            used.add(asin)
            return asin


def _title_case(phrase: str) -> str:
    return " ".join(word if word.isupper() else word.capitalize() for word in phrase.split())


def _price(rng: random.Random, low: float, high: float) -> float:
    """A price ending in .99 or .49, between ``low`` and ``high``."""
    whole = rng.randint(int(low), int(high))
    return round(whole + rng.choice((0.99, 0.49, 0.99)), 2)


def _reviews(rng: random.Random, kind: ProductKind, noun: str) -> tuple[Review, ...]:
    reviews = []
    for _ in range(rng.choice((0, 1, 2, 3, 3, 4, 5))):
        score = rng.choices((5, 4, 3, 2, 1), weights=(45, 28, 14, 8, 5))[0]
        body = rng.choice(_REVIEW_BODIES[score])
        body = body.format(noun=noun.lower(), use=rng.choice(kind.uses))
        reviews.append(Review(score, rng.choice(_REVIEW_TITLES[score]), body))
    return tuple(reviews)


def _product(rng: random.Random, kind: ProductKind, asin: str) -> Product:
    brand = rng.choice(_BRANDS[kind.category])
    noun = rng.choice(kind.nouns)
    attributes = rng.sample(kind.attributes, rng.randint(3, min(5, len(kind.attributes))))
    shown = attributes[: rng.randint(1, 2)]
    head = f"{brand} " + " ".join(_title_case(a) for a in shown) + f" {noun}"
    title = f"{head}, {rng.choice(_TITLE_TAILS)}" if rng.random() < 0.5 else head
    uses = rng.sample(kind.uses, 2)
    plural = noun.endswith("s")
    opening = rng.choice(_OPENINGS).format(
        brand=brand, noun=noun.lower(), use=uses[0], use2=uses[1],
        this="these" if plural else "this", is_="are" if plural else "is",
    )
    details = "Key details: " + ", ".join(attributes) + "."
    description = " ".join([opening, details, rng.choice(_BENEFITS)])
    benefits = rng.sample(_BENEFITS, len(attributes))
    features = tuple(f"{a.upper()}: {b}" for a, b in zip(attributes, benefits, strict=True))
    options = {}
    for name, pool in kind.options.items():
        count = rng.randint(2, min(6, len(pool)))
        chosen = set(rng.sample(pool, count))
        options[name] = tuple(v for v in pool if v in chosen)
    price = _price(rng, *kind.price)
    reviews = _reviews(rng, kind, noun)
    rating = round(sum(r.score for r in reviews) / len(reviews), 1) if reviews else None
    return Product(
        asin=asin,
        title=title,
        category=kind.category,
        product_category=" › ".join((_ROOTS[kind.category], *kind.path)),
        query=kind.query,
        pricing=(price,),
        price=price,
        description=description,
        features=features,
        attributes=tuple(attributes),
        options=options,
        reviews=reviews,
        rating=rating,
        images=(f"/image/{asin}.svg",),
        brand=brand,
    )


def generate_catalog(seed: int = 0, num_products: int = 1000) -> Catalog:
    """Generate a shop of invented products.

    Args:
        seed: the seed; the same ``(seed, num_products)`` gives the same catalogue.
        num_products: how many products (kinds take turns, in a seeded order, so every kind
            has about ``num_products / len(KINDS)`` products).

    Returns:
        The catalogue, named ``generated/seed=<seed>/n=<num_products>``.

    Raises:
        ValueError: for fewer than one product.
    """
    if num_products < 1:
        raise ValueError(f"num_products must be >= 1, got {num_products}")
    rng = random.Random(f"webshop/catalog/{seed}")
    products = _draw_products(rng, num_products, set())
    return Catalog(products, name=f"generated/seed={seed}/n={num_products}")


def validation_catalog(seed: int = 0, num_products: int = 1000) -> Catalog:
    """Generate the shop of the ``validation`` split: the train shop and products of its own.

    Args:
        seed: the seed of the train shop (:func:`generate_catalog`).
        num_products: the size of the train shop; ``num_products // VALIDATION_SHARE`` products
            (at least one) are added after its products, from the random stream
            ``webshop/catalog/<seed>/validation``, with asins none of its products has.

    Returns:
        The catalogue, named ``generated/seed=<seed>/n=<num_products>+validation=<added>``;
        its :attr:`~Catalog.validation_asins` are the added products.
    """
    shop = generate_catalog(seed, num_products)
    rng = random.Random(f"webshop/catalog/{seed}/validation")
    added = _draw_products(rng, max(1, num_products // VALIDATION_SHARE), {p.asin for p in shop})
    return Catalog([*shop, *added], name=f"{shop.name}+validation={len(added)}",
                   validation=[p.asin for p in added])


def _draw_products(rng: random.Random, count: int, used: set[str]) -> list[Product]:
    """Draw ``count`` products, kinds taking turns in an order shuffled every round."""
    order = list(KINDS)
    products = []
    for i in range(count):
        if i % len(order) == 0:
            rng.shuffle(order)
        products.append(_product(rng, order[i % len(order)], _asin(rng, used)))
    return products
