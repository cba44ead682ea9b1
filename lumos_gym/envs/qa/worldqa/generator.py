"""WorldQA's generator: :func:`build_world` draws a seeded world and its pages.

The world of ``(split, seed)`` and sizes comes from ``random.Random`` seeded with
``"worldqa/<split>/<seed>"``: countries, cities dealt to them, people born in the cities,
organisations founded by the people, then one page per entity.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from lumos_gym.envs.qa.worldqa.pages import _pages
from lumos_gym.envs.qa.worldqa.words import (
    _BAND_NOUNS,
    _CITY_ENDINGS,
    _CITY_FEATURES,
    _COMPANY_KINDS,
    _COUNTRY_ENDINGS,
    _GENRES,
    _LANGUAGE_ENDINGS,
    _OCCUPATIONS,
    _UNIVERSITY_FORMS,
    _Namer,
)
from lumos_gym.envs.qa.worldqa.world import City, Country, Organisation, Person, World

SPLITS = ("train", "validation", "test")


def _round(value: float, step: int) -> int:
    return max(step, int(round(value / step)) * step)


def build_world(
    *,
    seed: int = 0,
    split: str = "test",
    num_countries: int = 6,
    num_cities: int = 30,
    num_people: int = 120,
    num_organisations: int = 48,
) -> World:
    """Generate a world.

    Args:
        seed: the seed; the same ``(seed, split)`` and sizes give the same world.
        split: ``"train"``, ``"validation"`` or ``"test"``; test worlds share no generated
            word with the others, and a validation world none with the train world of the same
            seed and sizes.
        num_countries: countries (at least 2).
        num_cities: cities (at least 2 per country).
        num_people: people (at least 4).
        num_organisations: organisations (at least 6: two of each kind).

    Returns:
        The world, with one page per entity.

    Raises:
        ValueError: an unknown split or sizes below the minimums.
    """
    _check_world_sizes(split, num_countries, num_cities, num_people, num_organisations)
    sizes = (num_countries, num_cities, num_people, num_organisations)
    return _build_world(seed, split, sizes)[0]


def _build_world(
    seed: int, split: str, sizes: tuple[int, int, int, int]
) -> tuple[World, set[str]]:
    """The world of ``(seed, split)`` and every word its namer used.

    A validation world draws train-bucket words (so none of the test's) and none of the words
    of the train world of the same seed and sizes.
    """
    num_countries, num_cities, num_people, num_organisations = sizes
    rng = random.Random(f"worldqa/{split}/{seed}")
    namer = _Namer(rng, "train" if split == "validation" else split)
    if split == "validation":
        namer.used |= _build_world(seed, "train", sizes)[1]
    country_names = [
        namer.word(rng.choice((1, 2)), rng.choice(_COUNTRY_ENDINGS)) for _ in range(num_countries)
    ]
    cities = _cities(rng, namer, country_names, num_cities)
    countries = _countries(rng, namer, country_names, cities)
    city_names = list(cities)
    people = _people(rng, namer, num_people, city_names)
    organisations = _organisations(rng, namer, num_organisations, people, city_names)
    pages = _pages(rng, namer, countries, cities, people, organisations)
    return World(seed, split, countries, cities, people, organisations, pages), namer.used


def _check_world_sizes(
    split: str, num_countries: int, num_cities: int, num_people: int, num_organisations: int
) -> None:
    """Refuse an unknown split or sizes below :func:`build_world`'s minimums."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if num_countries < 2 or num_cities < 2 * num_countries:
        raise ValueError(
            f"need at least 2 countries and 2 cities per country, got {num_countries} "
            f"countries and {num_cities} cities"
        )
    if num_people < 4 or num_organisations < 6:
        raise ValueError(
            f"need at least 4 people and 6 organisations, got {num_people} and {num_organisations}"
        )


def _cities(
    rng: random.Random, namer: _Namer, country_names: list[str], count: int
) -> dict[str, City]:
    """``count`` cities, dealt to the countries in turn so that each gets its share."""
    cities: dict[str, City] = {}
    for i in range(count):
        country = country_names[i % len(country_names)]
        name = namer.word(rng.choice((1, 2)), rng.choice(_CITY_ENDINGS))
        cities[name] = City(
            name=name,
            country=country,
            population=_round(rng.lognormvariate(11.5, 1.0), 100),
            river=namer.word(2),
            first_recorded=rng.randint(900, 1700),
            feature=rng.choice(_CITY_FEATURES),
        )
    return cities


def _countries(
    rng: random.Random, namer: _Namer, country_names: list[str], cities: Mapping[str, City]
) -> dict[str, Country]:
    """The countries, each with a capital among its cities and more people than they hold."""
    countries: dict[str, Country] = {}
    for name in country_names:
        own = [c for c in cities.values() if c.country == name]
        countries[name] = Country(
            name=name,
            capital=rng.choice(own).name,
            population=_round(sum(c.population for c in own) * rng.uniform(2.0, 6.0), 1000),
            language=namer.word(rng.choice((1, 2)), rng.choice(_LANGUAGE_ENDINGS)),
        )
    return countries


def _people(
    rng: random.Random, namer: _Namer, count: int, city_names: list[str]
) -> dict[str, Person]:
    """``count`` people, each born in one of ``city_names``."""
    people: dict[str, Person] = {}
    for _ in range(count):
        name = f"{namer.word(2)} {namer.word(rng.choice((2, 2, 3)))}"
        people[name] = Person(
            name=name,
            pronoun=rng.choice(("he", "she")),
            occupation=rng.choice(_OCCUPATIONS),
            birth_year=rng.randint(1900, 1985),
            birth_city=rng.choice(city_names),
        )
    return people


def _organisations(
    rng: random.Random,
    namer: _Namer,
    count: int,
    people: Mapping[str, Person],
    city_names: Sequence[str],
) -> dict[str, Organisation]:
    kinds = ["company", "university", "band"] * 2  # two of each kind at least
    kinds += rng.choices(("company", "university", "band"), weights=(2, 1, 1), k=count - 6)
    rng.shuffle(kinds)
    founders = list(people)
    out: dict[str, Organisation] = {}
    for kind in kinds:
        founder = people[rng.choice(founders)]
        founded = min(founder.birth_year + rng.randint(22, 60), 2023)
        if kind == "company":
            suffix, sector = rng.choice(_COMPANY_KINDS)
            name = f"{namer.word(2)} {suffix}"
            size = _round(rng.lognormvariate(7.5, 1.3), 10)
        elif kind == "university":
            name = rng.choice(_UNIVERSITY_FORMS).format(namer.word(rng.choice((2, 3))))
            sector = "public"
            size = _round(rng.uniform(1_500, 60_000), 50)
        else:
            name = f"The {namer.word(2)} {rng.choice(_BAND_NOUNS)}"
            sector = rng.choice(_GENRES)
            size = rng.randint(1, 24)
        out[name] = Organisation(
            name=name,
            kind=kind,
            founder=founder.name,
            founded=founded,
            location=rng.choice(city_names),
            size=size,
            sector=sector,
        )
    return out
