"""WorldQA's pages: each entity's encyclopedia page, written from varied templates.

A page states its entity's facts (marking which sentence states which fact) among
distracting sentences about other entities of the world, so that retrieval matters.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from lumos_gym.envs.qa.worldqa.words import (
    _INTERESTS,
    _PRODUCTS,
    _TITLE_NOUNS,
    _TITLE_WORDS,
    _Namer,
)
from lumos_gym.envs.qa.worldqa.world import City, Country, Organisation, Page, Person, _number


def _pages(
    rng: random.Random,
    namer: _Namer,
    countries: Mapping[str, Country],
    cities: Mapping[str, City],
    people: Mapping[str, Person],
    organisations: Mapping[str, Organisation],
) -> dict[str, Page]:
    """One page per entity: countries first, then cities, people and organisations."""
    pages: dict[str, Page] = {}
    others = _Others(rng, cities, people, organisations)
    for country in countries.values():
        pages[country.name] = _country_page(rng, country, cities)
    for city in cities.values():
        pages[city.name] = _city_page(rng, city, organisations, others)
    for person in people.values():
        pages[person.name] = _person_page(rng, namer, person, organisations, others)
    for org in organisations.values():
        pages[org.name] = _organisation_page(rng, org, others)
    return pages


class _Others:
    """Picks other entities for distracting sentences."""

    def __init__(
        self,
        rng: random.Random,
        cities: Mapping[str, City],
        people: Mapping[str, Person],
        organisations: Mapping[str, Organisation],
    ) -> None:
        self.rng = rng
        self.cities = list(cities)
        self.people = list(people)
        self.by_kind = {
            kind: [o.name for o in organisations.values() if o.kind == kind]
            for kind in ("company", "university", "band")
        }

    def city(self, *avoid: str) -> str:
        return self.rng.choice([c for c in self.cities if c not in avoid])

    def person(self, *avoid: str) -> str:
        return self.rng.choice([p for p in self.people if p not in avoid])

    def organisation(self, kind: str, *avoid: str) -> str | None:
        names = [o for o in self.by_kind[kind] if o not in avoid]
        return self.rng.choice(names) if names else None


class _PageWriter:
    """Collects a page's sentences, marking which sentence states which fact."""

    def __init__(self, rng: random.Random, title: str, kind: str) -> None:
        self.rng = rng
        self.title = title
        self.kind = kind
        self.lead: list[tuple[str, tuple[str, ...]]] = []
        self.body: list[tuple[str, tuple[str, ...]]] = []

    def first(self, sentence: str, *facts: str) -> None:
        self.lead.append((sentence, facts))

    def add(self, sentence: str, *facts: str) -> None:
        self.body.append((sentence, facts))

    def page(self, distractors: Sequence[str], *, low: int = 3, high: int = 8) -> Page:
        """Shuffle the body, add distractors up to a random length in ``[low, high]``."""
        base = len(self.lead) + len(self.body)
        target = self.rng.randint(max(low, base), max(base, high))
        pool = list(distractors)
        self.rng.shuffle(pool)
        body = self.body + [(s, ()) for s in pool[: max(0, target - base)]]
        self.rng.shuffle(body)
        sentences, facts = [], {}
        for sentence, names in self.lead + body:
            for name in names:
                facts[name] = len(sentences)
            sentences.append(sentence)
        return Page(self.title, self.kind, tuple(sentences), facts)


def _country_page(rng: random.Random, country: Country, cities: Mapping[str, City]) -> Page:
    name, capital = country.name, country.capital
    own = [c for c in cities.values() if c.country == name]
    w = _PageWriter(rng, name, "country")
    w.first(
        rng.choice(
            (
                f"{name} is a country whose capital is {capital}.",
                f"{name} is a country; its capital and seat of government is {capital}.",
            )
        ),
        "capital",
    )
    population = _number(country.population)
    w.add(
        rng.choice(
            (
                f"{name} has a population of {population}.",
                f"About {population} people live in {name}.",
            )
        ),
        "population",
    )
    biggest = max(own, key=lambda c: c.population).name
    distractors = [
        f"The official language of {name} is {country.language}.",
        f"The largest city of {name} by population is {biggest}.",
        f"{name} is divided into {rng.randint(4, 30)} provinces.",
        f"Its national football team first played in {rng.randint(1900, 1990)}.",
        f"Its currency was introduced in {rng.randint(1800, 2000)}.",
    ]
    return w.page(distractors)


def _city_page(
    rng: random.Random, city: City, organisations: Mapping[str, Organisation], others: _Others
) -> Page:
    name, country = city.name, city.country
    w = _PageWriter(rng, name, "city")
    w.first(
        rng.choice(
            (
                f"{name} is a city in {country}.",
                f"{name} is a city located in {country}.",
                f"{name} is a {rng.choice(('river', 'market', 'port', 'university'))} "
                f"town in {country}.",
            )
        ),
        "country",
    )
    population = _number(city.population)
    w.add(
        rng.choice(
            (
                f"{name} has a population of {population}.",
                f"The city has a population of {population}.",
                f"Its population is {population}.",
            )
        ),
        "population",
    )
    here = [o.name for o in organisations.values() if o.location == name]
    distractors = [
        f"{name} lies on the {city.river} river.",
        f"The town is first recorded in {city.first_recorded}.",
        f"{name} is known for {city.feature}.",
        f"{name} is twinned with {others.city(name)}.",
        f"The city has {rng.randint(2, 40)} public libraries.",
    ]
    if here:
        distractors.append(f"{name} is home to {rng.choice(here)}.")
    return w.page(distractors)


def _person_page(
    rng: random.Random,
    namer: _Namer,
    person: Person,
    organisations: Mapping[str, Organisation],
    others: _Others,
) -> Page:
    name, he = person.name, person.pronoun
    his = "his" if he == "he" else "her"
    He, His = he.capitalize(), his.capitalize()
    year, city = person.birth_year, person.birth_city
    w = _PageWriter(rng, name, "person")
    article = "an" if person.occupation[0] in "aeiou" else "a"
    style = rng.randrange(4)
    if style == 0:
        w.first(
            f"{name} is {article} {person.occupation} born in {city} in {year}.",
            "birth_year",
            "birth_city",
        )
    elif style == 1:
        w.first(f"{name} is {article} {person.occupation}.")
        w.add(f"{He} was born in {year} in {city}.", "birth_year", "birth_city")
    elif style == 2:
        w.first(f"{name} (born {year}) is {article} {person.occupation}.", "birth_year")
        w.add(f"{He} was born in the city of {city}.", "birth_city")
    else:
        interest = rng.choice(_INTERESTS)
        w.first(f"{name} is {article} {person.occupation}.")
        w.add(
            f"Born in {city} in {year}, {he} showed an early interest in {interest}.",
            "birth_year",
            "birth_city",
        )
    distractors = [
        f"{He} moved to {others.city(city)} in {year + rng.randint(16, 40)}.",
        f"{He} has {rng.randint(0, 5)} children.",
        f'{His} best-known work is "The {rng.choice(_TITLE_WORDS)} {rng.choice(_TITLE_NOUNS)}".',
        f"{He} received the {namer.word(2)} Prize in {year + rng.randint(25, 50)}.",
    ]
    university = others.organisation("university")
    if university is not None:
        distractors.append(f"{He} studied at {university}.")
    company = others.organisation("company")
    if company is not None:
        distractors.append(f"{He} worked for {company} for {rng.randint(2, 30)} years.")
    founded = [o for o in organisations.values() if o.founder == name]
    if founded:
        org = rng.choice(founded)
        distractors.append(f"{He} founded {org.name} in {org.founded}.")
    return w.page(distractors)


def _organisation_page(rng: random.Random, org: Organisation, others: _Others) -> Page:
    w = _PageWriter(rng, org.name, org.kind)
    write = {"company": _company_lines, "university": _university_lines}.get(org.kind, _band_lines)
    return w.page(write(rng, w, org, others))


def _company_lines(
    rng: random.Random, w: _PageWriter, org: Organisation, others: _Others
) -> list[str]:
    """Write a company's page into ``w``; return its distractor sentences."""
    name, founder, year, city = org.name, org.founder, org.founded, org.location
    size = _number(org.size)
    article = "an" if org.sector[0] in "aeiou" else "a"
    if rng.random() < 0.5:
        w.first(
            f"{name} is {article} {org.sector} company founded by {founder} in {year}.",
            "founder",
            "founded",
        )
    else:
        w.first(f"{name} is {article} {org.sector} company.")
        w.add(f"It was founded in {year} by {founder}.", "founder", "founded")
    w.add(
        rng.choice(
            (
                f"The company is headquartered in {city}.",
                f"Its headquarters are in {city}.",
            )
        ),
        "location",
    )
    w.add(
        rng.choice((f"{name} has {size} employees.", f"The company employs {size} people.")),
        "size",
    )
    return [
        f"It makes {_PRODUCTS[org.sector]}.",
        f"Its current chief executive is {others.person(founder)}.",
        f"In {min(year + rng.randint(5, 40), 2023)}, it opened an office in "
        f"{others.city(city)}.",
        f"{name} reported sales of {rng.randint(5, 900)} million in {rng.randint(2000, 2023)}.",
    ]


def _university_lines(
    rng: random.Random, w: _PageWriter, org: Organisation, others: _Others
) -> list[str]:
    """Write a university's page into ``w``; return its distractor sentences."""
    name, founder, year, city = org.name, org.founder, org.founded, org.location
    size = _number(org.size)
    w.first(f"{name} is a public university founded in {year}.", "founded")
    w.add(
        rng.choice((f"It was founded by {founder}.", f"Its founder was {founder}.")),
        "founder",
    )
    w.add(
        rng.choice((f"The university is located in {city}.", f"Its main campus is in {city}.")),
        "location",
    )
    w.add(rng.choice((f"{name} has {size} students.", f"It enrolls {size} students.")), "size")
    return [
        f"The university has {rng.randint(3, 15)} faculties.",
        f"Its library holds {_number(rng.randint(20, 900) * 1000)} volumes.",
        f"Its current rector is {others.person(founder)}.",
        f"In {min(year + rng.randint(10, 60), 2023)}, it opened a second campus in "
        f"{others.city(city)}.",
    ]


def _band_lines(
    rng: random.Random, w: _PageWriter, org: Organisation, others: _Others
) -> list[str]:
    """Write a band's page into ``w``; return its distractor sentences."""
    name, founder, year, city = org.name, org.founder, org.founded, org.location
    size = _number(org.size)
    w.first(f"{name} are a {org.sector} band founded in {year}.", "founded")
    w.add(
        rng.choice(
            (
                f"The band was founded by {founder}.",
                f"{founder} founded the band and still writes most of its songs.",
            )
        ),
        "founder",
    )
    w.add(
        rng.choice((f"The band is based in {city}.", f"They are based in {city}.")), "location"
    )
    albums = "album" if org.size == 1 else "albums"
    w.add(
        rng.choice(
            (
                f"The band has released {size} {albums}.",
                f"{name} have released {size} studio {albums}.",
            )
        ),
        "size",
    )
    return [
        f"Their drummer is {others.person(founder)}.",
        f"They toured {rng.randint(2, 30)} countries in "
        f"{min(year + rng.randint(1, 20), 2023)}.",
        f'Their best-known song is "{rng.choice(_TITLE_WORDS)} {rng.choice(_TITLE_NOUNS)}".',
        f"They played their first concert in {others.city(city)}.",
    ]
