"""WorldQA's world: the entities of a generated world, their pages and :class:`World`.

The entities are countries, cities, people and organisations (companies, universities, bands);
each has one encyclopedia :class:`Page`.

:func:`~lumos_gym.envs.qa.worldqa.generator.build_world` makes a world.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.retrieval.documents import Document

_YEAR_FACTS = frozenset({"birth_year", "founded", "first_recorded"})


@dataclass(frozen=True)
class Country:
    """A country of the world.

    Attributes:
        name: its name (a page title).
        capital: the name of its capital city.
        population: its number of inhabitants.
        language: its official language.
    """

    name: str
    capital: str
    population: int
    language: str


@dataclass(frozen=True)
class City:
    """A city.

    Attributes:
        name: its name (a page title).
        country: the name of its country.
        population: its number of inhabitants.
        river: the river it lies on.
        first_recorded: the year it is first recorded (a distractor).
        feature: what it is known for (a distractor).
    """

    name: str
    country: str
    population: int
    river: str
    first_recorded: int
    feature: str


@dataclass(frozen=True)
class Person:
    """A person.

    Attributes:
        name: full name (a page title).
        pronoun: ``"he"`` or ``"she"``.
        occupation: e.g. ``"botanist"``.
        birth_year: the year of birth.
        birth_city: the name of the city of birth.
    """

    name: str
    pronoun: str
    occupation: str
    birth_year: int
    birth_city: str


@dataclass(frozen=True)
class Organisation:
    """A company, university or band.

    Attributes:
        name: its name (a page title).
        kind: ``"company"``, ``"university"`` or ``"band"``.
        founder: the name of the person who founded it.
        founded: the founding year.
        location: the city of its headquarters (company), campus (university) or base (band).
        size: employees (company), students (university) or albums released (band).
        sector: the industry of a company, the genre of a band, ``"public"`` for a university.
    """

    name: str
    kind: str
    founder: str
    founded: int
    location: str
    size: int
    sector: str


@dataclass(frozen=True)
class Page:
    """An entity's encyclopedia page.

    Attributes:
        title: the entity name.
        kind: ``"country"``, ``"city"``, ``"person"`` or the organisation kind.
        sentences: the page, one sentence each.
        facts: fact name (``"birth_year"``, ``"founder"``...) to the index of the sentence that
            states it.
    """

    title: str
    kind: str
    sentences: tuple[str, ...]
    facts: Mapping[str, int]

    @property
    def text(self) -> str:
        """Return the page text (the sentences joined by spaces)."""
        return " ".join(self.sentences)

    def document(self) -> Document:
        """Return the page as a retrieval document."""
        return Document(title=self.title, text=self.text)


@dataclass(frozen=True)
class World:
    """A generated world: its entities and their pages.

    Attributes:
        seed: the generator seed.
        split: ``"train"`` or ``"test"``.
        countries: by name, in generation order.
        cities: by name.
        people: by name.
        organisations: by name.
        pages: by title; one page per entity, countries first, then cities, people and
            organisations.
    """

    seed: int
    split: str
    countries: Mapping[str, Country]
    cities: Mapping[str, City]
    people: Mapping[str, Person]
    organisations: Mapping[str, Organisation]
    pages: Mapping[str, Page] = field(repr=False)

    def documents(self) -> list[Document]:
        """Return every page as a :class:`~lumos_gym.retrieval.Document`, in page order."""
        return [page.document() for page in self.pages.values()]

    def organisations_of(self, kind: str | None = None) -> list[Organisation]:
        """Return the organisations of one kind (all when ``kind`` is None), in order."""
        return [o for o in self.organisations.values() if kind is None or o.kind == kind]

    def value(self, title: str, fact: str) -> str:
        """Return a fact as the entity's page writes it (numbers with thousands commas).

        Args:
            title: an entity name.
            fact: ``birth_year``, ``birth_city``, ``founder``, ``founded``, ``location``,
                ``size``, ``country``, ``population`` or ``capital``.

        Raises:
            KeyError: no such entity or fact.
        """
        entity: Any = (
            self.people.get(title)
            or self.organisations.get(title)
            or self.cities.get(title)
            or self.countries.get(title)
        )
        if entity is None:
            raise KeyError(f"no entity called {title!r}")
        value = getattr(entity, fact)
        if isinstance(value, int) and fact not in _YEAR_FACTS:
            return _number(value)
        return str(value)


def _number(value: int) -> str:
    """Write a count as a page does, with thousands commas (years are written plainly)."""
    return f"{value:,}"
