"""WorldQA: offline multi-hop QA over a procedurally generated encyclopedia.

A seeded generator builds a small invented world (no real people or places): countries, cities
in those countries, people born in those cities, and organisations (companies, universities,
bands) founded by those people and based in those cities, with years and counts. Every entity
gets an encyclopedia page of 3-8 sentences written from varied templates; besides the facts
that questions ask about, pages hold distracting sentences (where someone moved, who runs a
company, when a city was first recorded...), so that retrieval matters. ``KnowledgeQuery``
searches all of the world's pages, a few hundred by default.

Questions come in four families, each with a gold Lumos decomposition (subgoals, grounded
actions, sub-answers):

============== ==================================================================================
family         kinds (an example question)
============== ==================================================================================
``bridge``     ``founder_country`` (In which country was the founder of X born?),
               ``founder_birth_year``, ``location_country``, ``birth_city_population``,
               ``birth_country_capital``
``comparison`` ``born_first`` (Who was born first, A or B?), ``more_employees`` (Which company
               has more employees, X or Y?), ``more_students``, ``more_albums``,
               ``founded_first``, ``larger_city``
``yesno``      ``same_birth_city``, ``same_birth_country`` (Were A and B born in the same
               country?), ``same_location_country``
``arithmetic`` ``years_after_birth`` (How many years after A's birth was X founded?),
               ``founder_age_gap``, ``founding_gap``, ``employee_difference``,
               ``album_total``, ``population_difference``
============== ==================================================================================

Each fact lookup is one subgoal grounded as Lumos grounds it::

    R1 = KnowledgeQuery(X); R2 = ParagraphRetrieve(R1, Query: Who founded X?);
    R3 = QA([R2], Question: Who founded X?)

(a page already fetched in the episode is not fetched again). Comparisons and yes/no questions
end with a ``QA`` over earlier results (the evidence of a comparison, whose lines carry the
names; the two looked-up values of a yes/no question), arithmetic with ``Calculator``, and
every plan with ``Answer(R<n>)``. Answers are unambiguous: names are unique in a world (no two
names share a generated word), and comparisons with ties are rejected.

Determinism and splits: the world of ``(split, seed)`` is drawn from ``random.Random`` seeded
with ``"worldqa/<split>/<seed>"``, and the questions of each family from their own generator,
so task ``i`` of a family never depends on how many tasks or which other families are made.
Every generated word of a ``test`` world hashes into the test bucket (one in five) and every
word of a ``train`` world into the others, so the two splits share no entity name and hence no
question, whatever seeds they use. A ``validation`` world (for choices made before a test run)
draws train-bucket words, none of them a word of the train world of the same seed and sizes.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.envs.qa.base import QAEnv
from lumos_gym.envs.sources import GeneratedSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError
from lumos_gym.retrieval.documents import Document

__all__ = [
    "FAMILIES",
    "FAMILY_KINDS",
    "SPLITS",
    "City",
    "Country",
    "Organisation",
    "Page",
    "Person",
    "World",
    "WorldQAEnv",
    "build_world",
    "family_tasks",
    "generate_tasks",
    "word_split",
]

FAMILIES = ("bridge", "comparison", "yesno", "arithmetic")
"""The question families, in the order that task ids interleave them."""

FAMILY_KINDS: dict[str, tuple[str, ...]] = {
    "bridge": (
        "founder_country",
        "founder_birth_year",
        "location_country",
        "birth_city_population",
        "birth_country_capital",
    ),
    "comparison": (
        "born_first",
        "more_employees",
        "more_students",
        "more_albums",
        "founded_first",
        "larger_city",
    ),
    "yesno": ("same_birth_city", "same_birth_country", "same_location_country"),
    "arithmetic": (
        "years_after_birth",
        "founder_age_gap",
        "founding_gap",
        "employee_difference",
        "album_total",
        "population_difference",
    ),
}
"""The question kinds of each family."""

SPLITS = ("train", "validation", "test")

_TEST_BUCKETS = 5  # one generated word in five belongs to test worlds
_ATTEMPTS_PER_TASK = 60
_YEAR_FACTS = frozenset({"birth_year", "founded", "first_recorded"})

# ---------------------------------------------------------------------------------------------
# Words

_ONSETS = (
    "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    "br", "dr", "gr", "kl", "st", "tr", "th", "sh", "h", "j",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou", "ia")
_CODAS = ("", "", "", "", "n", "r", "l", "s", "m", "th", "rk", "nd")
_CITY_ENDINGS = ("mora", "holm", "ford", "vik", "stad", "port", "dale", "mere", "gard", "ona")
_COUNTRY_ENDINGS = ("ia", "land", "ara", "estan", "ovia", "ica")
_LANGUAGE_ENDINGS = ("ese", "ish", "ic", "an")
_COMPANY_KINDS = (
    ("Industries", "manufacturing"),
    ("Systems", "software"),
    ("Motors", "car"),
    ("Foods", "food"),
    ("Textiles", "textile"),
    ("Shipping", "shipping"),
    ("Energy", "energy"),
    ("Instruments", "electronics"),
    ("Publishing", "publishing"),
    ("Pharmaceuticals", "pharmaceutical"),
)
_UNIVERSITY_FORMS = (
    "{} University",
    "University of {}",
    "{} Institute of Technology",
    "{} College",
)
_BAND_NOUNS = (
    "Lanterns", "Foxes", "Engines", "Tides", "Comets", "Ravens", "Harbours", "Mirrors",
    "Orchards", "Pilots", "Satellites", "Wolves", "Meadows", "Sparrows",
)
_GENRES = ("rock", "folk", "jazz", "pop", "punk", "electronic", "blues", "indie")
_OCCUPATIONS = (
    "painter", "engineer", "chemist", "novelist", "architect", "economist", "violinist",
    "botanist", "journalist", "mathematician", "sculptor", "surgeon", "historian", "poet",
    "geologist", "film director", "photographer", "astronomer", "lawyer", "composer",
)
_INTERESTS = (
    "music", "mathematics", "drawing", "chess", "languages", "astronomy", "gardening",
    "theatre", "machines", "poetry",
)
_CITY_FEATURES = (
    "its old harbour", "a large covered market", "its stone bridges", "a botanical garden",
    "its glass factories", "a medieval cathedral", "its summer music festival",
    "a busy railway junction", "its textile mills", "a hilltop fortress",
)
_PRODUCTS = {
    "manufacturing": "machine parts",
    "software": "accounting software",
    "car": "small cars and delivery vans",
    "food": "canned soups and biscuits",
    "textile": "woollen cloth",
    "shipping": "freight services",
    "energy": "wind turbines",
    "electronics": "measuring instruments",
    "publishing": "school textbooks",
    "pharmaceutical": "generic medicines",
}
_TITLE_WORDS = (
    "Quiet", "Northern", "Glass", "Silent", "Last", "Winter", "Paper", "Hidden", "Long",
    "Distant", "Salt", "Iron", "Lantern", "River", "Harvest", "Morning",
)
_TITLE_NOUNS = (
    "Garden", "Voyage", "Letters", "Season", "Bridge", "Orchard", "Shore", "Hours", "Song",
    "Tower", "Road", "Mirror",
)


def word_split(word: str) -> str:
    """Return the split a generated word belongs to (``"test"`` for one word in five).

    Args:
        word: a generated word, e.g. ``"Velmora"``.

    Returns:
        ``"test"`` or ``"train"``, from the SHA-256 of the lower-cased word.
    """
    digest = hashlib.sha256(word.lower().encode()).digest()
    return "test" if digest[0] % _TEST_BUCKETS == 0 else "train"


class _Namer:
    """Draws new words, each unique in the world and in the bucket of the world's split."""

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng = rng
        self.split = split
        self.used: set[str] = set()

    def word(self, syllables: int, ending: str = "") -> str:
        for _ in range(10_000):
            parts = [
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(syllables)
            ]
            word = ("".join(parts) + ending).capitalize()
            if len(word) < 4 or word.lower() in self.used or word_split(word) != self.split:
                continue
            self.used.add(word.lower())
            return word
        raise LumosGymError("the word space is exhausted; use a smaller world")


# ---------------------------------------------------------------------------------------------
# The world


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


# ---------------------------------------------------------------------------------------------
# Pages


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


# ---------------------------------------------------------------------------------------------
# Questions and their gold decompositions

_LOOKUP_QUESTIONS: dict[str, tuple[str, str]] = {
    "birth_year": ("In which year was {} born?", "Obtain the birth year of {}."),
    "birth_city": ("In which city was {} born?", "Obtain the city where {} was born."),
    "founder": ("Who founded {}?", "Obtain the founder of {}."),
    "founded": ("In which year {be} {} founded?", "Obtain the year {} {be} founded."),
    "country": ("In which country is {}?", "Obtain the country where {} is located."),
    "population": ("What is the population of {}?", "Obtain the population of {}."),
    "capital": ("What is the capital of {}?", "Obtain the capital of {}."),
}
_KIND_QUESTIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("location", "company"): (
        "In which city is {} headquartered?",
        "Obtain the city where {} is headquartered.",
    ),
    ("location", "university"): (
        "In which city is {} located?",
        "Obtain the city where {} is located.",
    ),
    ("location", "band"): ("In which city are {} based?", "Obtain the city where {} are based."),
    ("size", "company"): (
        "How many employees does {} have?",
        "Obtain the number of employees of {}.",
    ),
    ("size", "university"): (
        "How many students does {} have?",
        "Obtain the number of students of {}.",
    ),
    ("size", "band"): ("How many albums have {} released?", "Obtain the number of albums of {}."),
}


@dataclass
class _Plan:
    """A gold decomposition under construction: steps, their result tails, sub-answers."""

    world: World
    subgoals: list[str] = field(default_factory=list)
    steps: list[list[str]] = field(default_factory=list)
    tails: list[list[str]] = field(default_factory=list)
    sub_answers: dict[str, str] = field(default_factory=dict)
    evidence: list[list[Any]] = field(default_factory=list)
    pages: dict[str, str] = field(default_factory=dict)
    count: int = 0

    def var(self) -> str:
        self.count += 1
        return f"R{self.count}"

    def lookup(self, title: str, fact: str) -> tuple[str, str, str]:
        """Add a subgoal looking ``fact`` up on ``title``'s page.

        Returns:
            The answer variable, the evidence variable and the answer text.
        """
        page = self.world.pages[title]
        if fact in ("location", "size"):
            question, subgoal = _KIND_QUESTIONS[(fact, page.kind)]
        else:
            question, subgoal = _LOOKUP_QUESTIONS[fact]
        be = "were" if page.kind == "band" else "was"  # band names are plural
        question, subgoal = question.format(title, be=be), subgoal.format(title, be=be)
        answer = self.world.value(title, fact)
        actions, tails = [], []
        page_var = self.pages.get(title)
        if page_var is None:
            page_var = self.pages[title] = self.var()
            actions.append(f"{page_var} = KnowledgeQuery({title})")
            tails.append(f"WikipediaPage({title})")
        evidence = self.var()
        actions.append(f"{evidence} = ParagraphRetrieve({page_var}, Query: {question})")
        sentence = page.facts[fact]
        tails.append(f"Paragraph({title}-{sentence + 1})")
        result = self.var()
        actions.append(f"{result} = QA([{evidence}], Question: {question})")
        tails.append(answer)
        self._step(subgoal, actions, tails)
        self.sub_answers[question] = answer
        self.evidence.append([title, sentence])
        return result, evidence, answer

    def ask(self, subgoal: str, contexts: Sequence[str], question: str, answer: str) -> str:
        """Add a final subgoal answering ``question`` with ``QA`` over earlier results."""
        result = self.var()
        self._step(
            subgoal, [f"{result} = QA([{', '.join(contexts)}], Question: {question})"], [answer]
        )
        self.sub_answers[question] = answer
        return result

    def calculate(self, subgoal: str, formula: str, value: int) -> str:
        """Add a final subgoal computing ``formula`` with ``Calculator``."""
        result = self.var()
        self._step(subgoal, [f"{result} = Calculator({formula})"], [str(value)])
        return result

    def _step(self, subgoal: str, actions: list[str], tails: list[str]) -> None:
        self.subgoals.append(subgoal)
        self.steps.append(actions)
        self.tails.append(tails)


@dataclass(frozen=True)
class _Draft:
    """A question, its answer and its gold plan, before it gets an id."""

    kind: str
    question: str
    answer: str
    answer_type: str
    plan: _Plan
    final: str
    aliases: tuple[str, ...] = ()


def _pick2(rng: random.Random, items: Sequence[Any]) -> tuple[Any, Any]:
    a, b = rng.sample(list(items), 2)
    return a, b


def _number_answer(value: int) -> tuple[str, tuple[str, ...]]:
    """A numeric answer written plainly, with the thousands-comma form as an alias."""
    written = f"{value:,}"
    return str(value), ((written,) if written != str(value) else ())


_LOCATED = {"company": ("is", "headquartered"), "university": ("is", "located"),
            "band": ("are", "based")}


def _bridge(world: World, rng: random.Random, kind: str) -> _Draft | None:
    plan = _Plan(world)
    people = list(world.people.values())
    orgs = world.organisations_of()
    if kind == "founder_country":
        org = rng.choice(orgs)
        question = f"In which country was the founder of {org.name} born?"
        _, _, founder = plan.lookup(org.name, "founder")
        _, _, city = plan.lookup(founder, "birth_city")
        final, _, answer = plan.lookup(city, "country")
        return _Draft(kind, question, answer, "span", plan, final)
    if kind == "founder_birth_year":
        org = rng.choice(orgs)
        question = f"In which year was the founder of {org.name} born?"
        _, _, founder = plan.lookup(org.name, "founder")
        final, _, answer = plan.lookup(founder, "birth_year")
        return _Draft(kind, question, answer, "number", plan, final)
    if kind == "location_country":
        org = rng.choice(orgs)
        verb, participle = _LOCATED[org.kind]
        question = f"In which country {verb} {org.name} {participle}?"
        _, _, city = plan.lookup(org.name, "location")
        final, _, answer = plan.lookup(city, "country")
        return _Draft(kind, question, answer, "span", plan, final)
    if kind == "birth_city_population":
        person = rng.choice(people)
        question = f"What is the population of the city where {person.name} was born?"
        _, _, city = plan.lookup(person.name, "birth_city")
        final, _, written = plan.lookup(city, "population")
        answer, aliases = _number_answer(world.cities[city].population)
        return _Draft(kind, question, answer, "number", plan, final, aliases)
    person = rng.choice(people)  # birth_country_capital
    question = f"What is the capital of the country where {person.name} was born?"
    _, _, city = plan.lookup(person.name, "birth_city")
    _, _, country = plan.lookup(city, "country")
    final, _, answer = plan.lookup(country, "capital")
    return _Draft(kind, question, answer, "span", plan, final)


_COMPARISONS: dict[str, tuple[str, str, str, str]] = {
    # kind: (entity pool, fact, question, final subgoal); "first"/"earlier" pick the smaller
    "born_first": (
        "people",
        "birth_year",
        "Who was born first, {} or {}?",
        "Determine who was born first.",
    ),
    "more_employees": (
        "company",
        "size",
        "Which company has more employees, {} or {}?",
        "Determine which company has more employees.",
    ),
    "more_students": (
        "university",
        "size",
        "Which university has more students, {} or {}?",
        "Determine which university has more students.",
    ),
    "more_albums": (
        "band",
        "size",
        "Which band has released more albums, {} or {}?",
        "Determine which band has released more albums.",
    ),
    "founded_first": (
        "organisations",
        "founded",
        "Which was founded earlier, {} or {}?",
        "Determine which was founded earlier.",
    ),
    "larger_city": (
        "cities",
        "population",
        "Which city has a larger population, {} or {}?",
        "Determine which city has a larger population.",
    ),
}
_SMALLER_WINS = ("born_first", "founded_first")


def _pool(world: World, name: str) -> list[str]:
    if name == "people":
        return list(world.people)
    if name == "cities":
        return list(world.cities)
    if name == "organisations":
        return list(world.organisations)
    return [o.name for o in world.organisations_of(name)]


def _raw(world: World, title: str, fact: str) -> int:
    entity: Any = world.people.get(title) or world.organisations.get(title)
    entity = entity or world.cities.get(title) or world.countries.get(title)
    return int(getattr(entity, fact))


def _comparison(world: World, rng: random.Random, kind: str) -> _Draft | None:
    pool, fact, template, subgoal = _COMPARISONS[kind]
    a, b = _pick2(rng, _pool(world, pool))
    va, vb = _raw(world, a, fact), _raw(world, b, fact)
    if va == vb:
        return None  # a tie has no answer
    winner = (a if va < vb else b) if kind in _SMALLER_WINS else (a if va > vb else b)
    question = template.format(a, b)
    plan = _Plan(world)
    _, evidence_a, _ = plan.lookup(a, fact)
    _, evidence_b, _ = plan.lookup(b, fact)
    final = plan.ask(subgoal, [evidence_a, evidence_b], question, winner)
    return _Draft(kind, question, winner, "span", plan, final)


def _yesno(world: World, rng: random.Random, kind: str) -> _Draft | None:
    want_yes = rng.random() < 0.5
    plan = _Plan(world)
    if kind in ("same_birth_city", "same_birth_country"):
        people = list(world.people.values())
        a = rng.choice(people)
        home = world.cities[a.birth_city]

        def same(p: Person) -> bool:
            if kind == "same_birth_city":
                return p.birth_city == a.birth_city
            return world.cities[p.birth_city].country == home.country

        others = [
            p
            for p in people
            if p is not a
            and same(p) == want_yes
            and (kind == "same_birth_city" or p.birth_city != a.birth_city)
        ]
        if not others:
            return None
        b = rng.choice(others)
        what = "city" if kind == "same_birth_city" else "country"
        question = f"Were {a.name} and {b.name} born in the same {what}?"
        results = []
        for person in (a, b):
            result, _, city = plan.lookup(person.name, "birth_city")
            if kind == "same_birth_country":
                result, _, _ = plan.lookup(city, "country")
            results.append(result)
        subgoal = f"Determine whether {a.name} and {b.name} were born in the same {what}."
    else:  # same_location_country
        orgs = world.organisations_of()
        x = rng.choice(orgs)
        home = world.cities[x.location].country
        others_o = [
            o
            for o in orgs
            if o is not x
            and o.location != x.location
            and (world.cities[o.location].country == home) == want_yes
        ]
        if not others_o:
            return None
        y = rng.choice(others_o)
        question = f"Are {x.name} and {y.name} located in the same country?"
        results = []
        for org in (x, y):
            _, _, city = plan.lookup(org.name, "location")
            result, _, _ = plan.lookup(city, "country")
            results.append(result)
        subgoal = f"Determine whether {x.name} and {y.name} are located in the same country."
    answer = "yes" if want_yes else "no"
    final = plan.ask(subgoal, results, question, answer)
    return _Draft(kind, question, answer, "yes/no", plan, final)


def _arithmetic(world: World, rng: random.Random, kind: str) -> _Draft | None:
    plan = _Plan(world)
    if kind in ("years_after_birth", "founder_age_gap"):
        org = rng.choice(world.organisations_of())
        if kind == "founder_age_gap":
            person = world.people[org.founder]
            question = f"How many years after the birth of its founder was {org.name} founded?"
            plan.lookup(org.name, "founder")
        else:
            person = rng.choice(list(world.people.values()))
            if person.birth_year >= org.founded or person.name == org.founder:
                return None
            question = f"How many years after the birth of {person.name} was {org.name} founded?"
        born, _, _ = plan.lookup(person.name, "birth_year")
        founded, _, _ = plan.lookup(org.name, "founded")
        value = org.founded - person.birth_year
        subgoal = "Calculate how many years passed between the two years."
        formula = f"{founded} - {born}"
    elif kind == "founding_gap":
        x, y = _pick2(rng, world.organisations_of())
        if x.founded == y.founded:
            return None
        if x.founded < y.founded:
            x, y = y, x
        question = f"How many years after {y.name} was {x.name} founded?"
        later, _, _ = plan.lookup(x.name, "founded")
        earlier, _, _ = plan.lookup(y.name, "founded")
        value = x.founded - y.founded
        subgoal = "Calculate how many years passed between the two founding years."
        formula = f"{later} - {earlier}"
    elif kind in ("employee_difference", "population_difference"):
        if kind == "employee_difference":
            x_name, y_name = _pick2(rng, _pool(world, "company"))
            fact, noun = "size", "employees"
            question = "How many more employees does {} have than {}?"
        else:
            x_name, y_name = _pick2(rng, list(world.cities))
            fact, noun = "population", "inhabitants"
            question = "How many more inhabitants does {} have than {}?"
        vx, vy = _raw(world, x_name, fact), _raw(world, y_name, fact)
        if vx == vy:
            return None
        if vx < vy:
            x_name, y_name, vx, vy = y_name, x_name, vy, vx
        question = question.format(x_name, y_name)
        big, _, _ = plan.lookup(x_name, fact)
        small, _, _ = plan.lookup(y_name, fact)
        value = vx - vy
        subgoal = f"Calculate the difference between the two numbers of {noun}."
        formula = f"{big} - {small}"
    else:  # album_total
        x_name, y_name = _pick2(rng, _pool(world, "band"))
        question = f"How many albums have {x_name} and {y_name} released in total?"
        first, _, _ = plan.lookup(x_name, "size")
        second, _, _ = plan.lookup(y_name, "size")
        value = _raw(world, x_name, "size") + _raw(world, y_name, "size")
        subgoal = "Calculate the total number of albums."
        formula = f"{first} + {second}"
    final = plan.calculate(subgoal, formula, value)
    answer, aliases = _number_answer(value)
    return _Draft(kind, question, answer, "number", plan, final, aliases)


_FAMILY_MAKERS: dict[str, Callable[[World, random.Random, str], _Draft | None]] = {
    "bridge": _bridge,
    "comparison": _comparison,
    "yesno": _yesno,
    "arithmetic": _arithmetic,
}


def _kind_available(world: World, kind: str) -> bool:
    needs = {"more_employees": "company", "more_students": "university", "more_albums": "band",
             "employee_difference": "company", "album_total": "band"}
    return kind not in needs or len(world.organisations_of(needs[kind])) >= 2


def _task(world: World, draft: _Draft, family: str, number: int) -> Task:
    plan = draft.plan
    gold = tuple("; ".join(actions) for actions in plan.steps) + (f"Answer({draft.final})",)
    return Task(
        id=f"worldqa/{world.split}/{world.seed}/{number}",
        question=draft.question,
        answer=draft.answer,
        task_type="qa",
        gold_actions=gold,
        meta={
            "family": family,
            "kind": draft.kind,
            "answer_type": draft.answer_type,
            "aliases": list(draft.aliases),
            "subgoals": list(plan.subgoals),
            "sub_answers": dict(plan.sub_answers),
            "tails": [list(t) for t in plan.tails],
            "evidence": [list(e) for e in plan.evidence],
            "world": {"seed": world.seed, "split": world.split},
        },
    )


def family_tasks(world: World, family: str, num_tasks: int) -> list[tuple[int, Task]]:
    """Return the first ``num_tasks`` questions of one family, numbered for the task ids.

    Question ``i`` of family ``f`` gets number ``i * len(FAMILIES) + FAMILIES.index(f)``, so
    ids are stable whichever families are asked for.

    Args:
        world: the world.
        family: one of :data:`FAMILIES`.
        num_tasks: how many questions.

    Returns:
        ``(number, task)`` pairs in question order.

    Raises:
        ValueError: an unknown family.
        LumosGymError: the world is too small to give that many distinct questions.
    """
    if family not in _FAMILY_MAKERS:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    make = _FAMILY_MAKERS[family]
    kinds = [k for k in FAMILY_KINDS[family] if _kind_available(world, k)]
    rng = random.Random(f"worldqa/{world.split}/{world.seed}/{family}")
    seen: set[str] = set()
    out: list[tuple[int, Task]] = []
    attempts = 0
    while len(out) < num_tasks:
        attempts += 1
        if attempts > _ATTEMPTS_PER_TASK * (num_tasks + 1):
            raise LumosGymError(
                f"worldqa: only {len(out)} distinct {family} questions in a world of "
                f"{len(world.pages)} pages; ask for fewer tasks or a bigger world"
            )
        draft = make(world, rng, rng.choice(kinds))
        if draft is None or draft.question in seen:
            continue
        seen.add(draft.question)
        number = len(out) * len(FAMILIES) + FAMILIES.index(family)
        out.append((number, _task(world, draft, family, number)))
    return out


def generate_tasks(
    world: World, *, num_tasks: int = 10, families: Sequence[str] = FAMILIES
) -> list[Task]:
    """Generate ``num_tasks`` questions per family over ``world``, ordered by id number.

    Args:
        world: the world.
        num_tasks: questions per family.
        families: which families (default all).

    Returns:
        The tasks, families interleaved (ids ``worldqa/<split>/<seed>/<n>``).
    """
    if num_tasks < 0:
        raise ValueError(f"num_tasks must be >= 0, got {num_tasks}")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; choose from {FAMILIES}")
    numbered = [pair for f in dict.fromkeys(families) for pair in family_tasks(world, f, num_tasks)]
    return [task for _, task in sorted(numbered, key=lambda pair: pair[0])]


# ---------------------------------------------------------------------------------------------
# The environment


class WorldQAEnv(QAEnv):
    """Multi-hop QA over a generated world; ``KnowledgeQuery`` searches all of its pages.

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"`` (see :func:`build_world`).
        num_tasks: questions per family.
        families: the question families (default all of :data:`FAMILIES`).
        seed: the world and question seed.
        num_countries: countries of the world.
        num_cities: cities of the world.
        num_people: people of the world.
        num_organisations: organisations of the world.
        **options: :class:`~lumos_gym.envs.qa.base.QAEnv` options (``qa_model``, ``qa_backend``,
            ``retrieve_backend``, ``judge``) and :class:`~lumos_gym.envs.base.LumosEnv`
            options (``limit``, ``render_mode``, ``privileged``, ``tools``). ``corpus``
            defaults to the world's pages.
    """

    def __init__(
        self,
        *,
        split: str = "test",
        num_tasks: int = 10,
        families: Sequence[str] | str = FAMILIES,
        seed: int = 0,
        num_countries: int = 6,
        num_cities: int = 30,
        num_people: int = 120,
        num_organisations: int = 48,
        **options: Any,
    ) -> None:
        families = (families,) if isinstance(families, str) else tuple(families)
        sizes = {
            "num_countries": num_countries,
            "num_cities": num_cities,
            "num_people": num_people,
            "num_organisations": num_organisations,
        }
        self.world = build_world(seed=seed, split=split, **sizes)
        world = self.world

        def generate() -> list[Task]:
            return generate_tasks(world, num_tasks=num_tasks, families=families)

        params = {"generator": "worldqa", "split": split, "seed": seed, "num_tasks": num_tasks,
                  "families": list(families), **sizes}
        options.setdefault("corpus", world.documents())
        super().__init__(tasks=GeneratedSource(generate, params), dataset="worldqa", **options)
