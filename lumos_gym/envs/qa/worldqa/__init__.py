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

The modules: :mod:`~lumos_gym.envs.qa.worldqa.words` (generated names and the fixed
vocabulary), :mod:`~lumos_gym.envs.qa.worldqa.world` (the entities, pages and :class:`World`),
:mod:`~lumos_gym.envs.qa.worldqa.pages` (the page templates),
:mod:`~lumos_gym.envs.qa.worldqa.generator` (:func:`build_world`),
:mod:`~lumos_gym.envs.qa.worldqa.questions` (the question families and their gold plans) and
:mod:`~lumos_gym.envs.qa.worldqa.env` (:class:`WorldQAEnv`). Every public name is importable
from this package.
"""

from __future__ import annotations

from lumos_gym.envs.qa.worldqa.env import WorldQAEnv
from lumos_gym.envs.qa.worldqa.generator import SPLITS, build_world
from lumos_gym.envs.qa.worldqa.questions import (
    FAMILIES,
    FAMILY_KINDS,
    family_tasks,
    generate_tasks,
)
from lumos_gym.envs.qa.worldqa.words import word_split
from lumos_gym.envs.qa.worldqa.world import City, Country, Organisation, Page, Person, World

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
