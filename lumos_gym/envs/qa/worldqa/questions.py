"""WorldQA's questions: the four question families and their gold decompositions.

Each family's maker draws a question of one kind over a world with its answer and its gold
plan (:class:`_Plan`: one fact lookup per subgoal, then a ``QA`` or ``Calculator`` step);
:func:`family_tasks` and :func:`generate_tasks` number them into tasks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.envs.qa.worldqa.world import Person, World
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError

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


_ATTEMPTS_PER_TASK = 60


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
