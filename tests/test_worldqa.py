"""WorldQA: the world generator, its questions and gold plans, the env and the converter.

Answers are re-derived here from the world's entity records by reading each question with
regular expressions, independently of the generator's plan builder; the oracle replays run the
real retrieval tools (BM25) and the reference QA backend over the whole world.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter

import gymnasium as gym
import pytest
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.actions import format_action, parse_actions
from lumos_gym.conversion.annotation import Annotation, format_subgoal_plan, parse_subgoal_plan
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.conversion.worldqa_rules import worldqa_annotation
from lumos_gym.envs import ENVS
from lumos_gym.envs.checks import replay_gold
from lumos_gym.envs.qa.worldqa import (
    FAMILIES,
    FAMILY_KINDS,
    World,
    WorldQAEnv,
    build_world,
    generate_tasks,
    word_split,
)
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError
from lumos_gym.retrieval import Document

ORACLE = {"privileged": True, "qa_backend": "reference", "retrieve_backend": "bm25"}
_FIXED_WORDS = {
    "the", "of", "university", "institute", "technology", "college", "industries", "systems",
    "motors", "foods", "textiles", "shipping", "energy", "instruments", "publishing",
    "pharmaceuticals", "lanterns", "foxes", "engines", "tides", "comets", "ravens", "harbours",
    "mirrors", "orchards", "pilots", "satellites", "wolves", "meadows", "sparrows",
}


def tasks_of(seed: int, split: str = "test", num_tasks: int = 10) -> tuple[World, list[Task]]:
    world = build_world(seed=seed, split=split)
    return world, generate_tasks(world, num_tasks=num_tasks)


# ---------------------------------------------------------------------------------------------
# An independent solver: each question read with a regex and answered from entity records


def _entity(world: World, name: str):
    for table in (world.people, world.organisations, world.cities, world.countries):
        if name in table:
            return table[name]
    raise AssertionError(f"the question names {name!r}, which is no entity")


def _fact(world: World, name: str, fact: str) -> int:
    return int(getattr(_entity(world, name), fact))


def _country_of_birth(world: World, person: str) -> str:
    return world.cities[world.people[person].birth_city].country


def _location_country(world: World, org: str) -> str:
    return world.cities[world.organisations[org].location].country


def _more(world: World, a: str, b: str, fact: str, smaller: bool = False) -> str:
    va, vb = _fact(world, a, fact), _fact(world, b, fact)
    assert va != vb, f"tie between {a} and {b}"
    return (a if va < vb else b) if smaller else (a if va > vb else b)


def _positive(value: int) -> str:
    assert value > 0
    return str(value)


_SOLVERS = [
    (r"In which country was the founder of (.+) born\?",
     lambda w, x: _country_of_birth(w, w.organisations[x].founder)),
    (r"In which year was the founder of (.+) born\?",
     lambda w, x: str(w.people[w.organisations[x].founder].birth_year)),
    (r"In which country (?:is|are) (.+) (?:headquartered|located|based)\?",
     lambda w, x: _location_country(w, x)),
    (r"What is the population of the city where (.+) was born\?",
     lambda w, p: str(w.cities[w.people[p].birth_city].population)),
    (r"What is the capital of the country where (.+) was born\?",
     lambda w, p: w.countries[_country_of_birth(w, p)].capital),
    (r"Who was born first, (.+) or (.+)\?", lambda w, a, b: _more(w, a, b, "birth_year", True)),
    (r"Which (?:company|university|band) (?:has|has released) more \w+, (.+) or (.+)\?",
     lambda w, a, b: _more(w, a, b, "size")),
    (r"Which was founded earlier, (.+) or (.+)\?", lambda w, a, b: _more(w, a, b, "founded", True)),
    (r"Which city has a larger population, (.+) or (.+)\?",
     lambda w, a, b: _more(w, a, b, "population")),
    (r"Were (.+) and (.+) born in the same city\?",
     lambda w, a, b: "yes" if w.people[a].birth_city == w.people[b].birth_city else "no"),
    (r"Were (.+) and (.+) born in the same country\?",
     lambda w, a, b: "yes" if _country_of_birth(w, a) == _country_of_birth(w, b) else "no"),
    (r"Are (.+) and (.+) located in the same country\?",
     lambda w, a, b: "yes" if _location_country(w, a) == _location_country(w, b) else "no"),
    (r"How many years after the birth of its founder was (.+) founded\?",
     lambda w, x: _positive(w.organisations[x].founded
                            - w.people[w.organisations[x].founder].birth_year)),
    (r"How many years after the birth of (?!its founder)(.+) was (.+) founded\?",
     lambda w, p, x: _positive(w.organisations[x].founded - w.people[p].birth_year)),
    (r"How many years after (?!the birth of )(.+) was (.+) founded\?",
     lambda w, y, x: _positive(w.organisations[x].founded - w.organisations[y].founded)),
    (r"How many more employees does (.+) have than (.+)\?",
     lambda w, x, y: _positive(_fact(w, x, "size") - _fact(w, y, "size"))),
    (r"How many more inhabitants does (.+) have than (.+)\?",
     lambda w, x, y: _positive(_fact(w, x, "population") - _fact(w, y, "population"))),
    (r"How many albums have (.+) and (.+) released in total\?",
     lambda w, x, y: str(_fact(w, x, "size") + _fact(w, y, "size"))),
]


def solve(world: World, question: str) -> str:
    """Answer a question from the world's records; exactly one pattern must read it."""
    answers = []
    for pattern, solver in _SOLVERS:
        match = re.fullmatch(pattern, question)
        if match:
            answers.append(solver(world, *match.groups()))
    assert len(answers) == 1, f"{len(answers)} readings of {question!r}"
    return answers[0]


# ---------------------------------------------------------------------------------------------
# The generator


def test_same_seed_same_world_and_tasks_and_other_seed_differs():
    world_a, tasks_a = tasks_of(3)
    world_b, tasks_b = tasks_of(3)
    assert world_a.documents() == world_b.documents()
    assert tasks_a == tasks_b
    world_c, tasks_c = tasks_of(4)
    assert {d.title for d in world_c.documents()}.isdisjoint(d.title for d in world_a.documents())
    assert [t.question for t in tasks_c] != [t.question for t in tasks_a]


def test_world_shape_and_documents():
    world = build_world(seed=0, num_countries=3, num_cities=9, num_people=20, num_organisations=9)
    docs = world.documents()
    assert len(docs) == 3 + 9 + 20 + 9
    assert all(isinstance(d, Document) and d.id == d.title for d in docs)
    assert len({d.title for d in docs}) == len(docs)
    kinds = Counter(o.kind for o in world.organisations.values())
    assert set(kinds) == {"company", "university", "band"} and min(kinds.values()) >= 2
    assert all(3 <= len(page.sentences) <= 8 for page in world.pages.values())
    for city in world.cities.values():
        assert city.country in world.countries
    for country in world.countries.values():
        assert world.cities[country.capital].country == country.name
    for org in world.organisations.values():
        assert org.founded - world.people[org.founder].birth_year >= 22


@pytest.mark.parametrize("seed", range(0, 40, 8))
def test_names_share_no_generated_word(seed):
    world = build_world(seed=seed)
    owner: dict[str, str] = {}
    for title in world.pages:
        for word in re.findall(r"[A-Za-z]+", title):
            if word.lower() in _FIXED_WORDS:
                continue
            assert word.lower() not in owner, f"{title!r} and {owner[word.lower()]!r} share {word}"
            owner[word.lower()] = title


def test_splits_share_no_name_and_no_question():
    for seed in range(3):
        test_world, test_tasks = tasks_of(seed, "test")
        train_world, train_tasks = tasks_of(seed, "train")
        assert set(test_world.pages).isdisjoint(train_world.pages)
        assert {t.question for t in test_tasks}.isdisjoint(t.question for t in train_tasks)
        assert {t.id.split("/")[1] for t in train_tasks} == {"train"}
        for title in test_world.pages:
            generated = [w for w in title.split() if w.lower() not in _FIXED_WORDS]
            assert all(word_split(w) == "test" for w in generated), title


def test_a_validation_world_shares_no_name_with_train_or_test():
    for seed in range(2):
        val_world, val_tasks = tasks_of(seed, "validation")
        train_world, train_tasks = tasks_of(seed, "train")
        test_world, _ = tasks_of(seed, "test")
        assert set(val_world.pages).isdisjoint(train_world.pages)
        assert set(val_world.pages).isdisjoint(test_world.pages)
        assert {t.question for t in val_tasks}.isdisjoint(t.question for t in train_tasks)
        assert {t.id.split("/")[1] for t in val_tasks} == {"validation"}
        for title in val_world.pages:
            generated = [w for w in title.split() if w.lower() not in _FIXED_WORDS]
            assert all(word_split(w) == "train" for w in generated), title
        for task in val_tasks:
            assert solve(val_world, task.question) == task.answer.replace(",", ""), task.id


def test_answers_are_unambiguous_over_many_seeds():
    checked = 0
    for seed in range(25):
        world, tasks = tasks_of(seed, "test" if seed % 2 else "train", num_tasks=6)
        assert len({t.question for t in tasks}) == len(tasks)
        for task in tasks:
            assert solve(world, task.question) == task.answer.replace(",", ""), task.id
            checked += 1
    assert checked == 25 * 6 * len(FAMILIES)


def test_every_family_and_kind_is_generated():
    kinds: Counter[str] = Counter()
    yes_no: Counter[str] = Counter()
    for seed in range(4):
        _, tasks = tasks_of(seed, num_tasks=15)
        assert Counter(t.meta["family"] for t in tasks) == dict.fromkeys(FAMILIES, 15)
        kinds.update(t.meta["kind"] for t in tasks)
        yes_no.update(t.answer for t in tasks if t.meta["family"] == "yesno")
    assert set(kinds) == {k for ks in FAMILY_KINDS.values() for k in ks}
    assert min(yes_no["yes"], yes_no["no"]) >= 15  # both answers are common


def test_task_fields_and_gold_plan_shape():
    _, tasks = tasks_of(1)
    for task in tasks:
        assert re.fullmatch(r"worldqa/test/1/\d+", task.id)
        assert task.task_type == "qa"
        meta = task.meta
        assert meta["answer_type"] in ("yes/no", "span", "number")
        assert len(meta["subgoals"]) == len(task.gold_actions) - 1 == len(meta["tails"])
        assert task.gold_actions[-1] == f"Answer(R{_count_variables(task)})"
        outputs = [v for step in task.gold_actions[:-1] for a in parse_actions(step)
                   for v in a.outputs]
        assert outputs == [f"R{i}" for i in range(1, len(outputs) + 1)]
        if meta["answer_type"] == "yes/no":
            assert task.answer in ("yes", "no")
        if meta["answer_type"] == "number":
            assert task.answer.isdigit()
        if meta["family"] == "arithmetic":
            assert parse_actions(task.gold_actions[-2])[0].name == "Calculator"


def _count_variables(task: Task) -> int:
    return sum(len(parse_actions(step)) for step in task.gold_actions[:-1])


def test_pages_state_the_facts_asked():
    for seed in (0, 7):
        world, tasks = tasks_of(seed)
        for task in tasks:
            lookups = [
                (a.args.split("Question: ", 1)[1], tail)
                for step, tails in zip(task.gold_actions, task.meta["tails"], strict=False)
                for a, tail in zip(parse_actions(step), tails, strict=True)
                if a.name == "QA" and a.args.startswith("[R") and ", " not in a.args.split("]")[0]
            ]
            assert len(lookups) == len(task.meta["evidence"])
            for (question, answer), (title, index) in zip(
                lookups, task.meta["evidence"], strict=True
            ):
                assert task.meta["sub_answers"][question] == answer
                assert title in question
                assert answer in world.pages[title].sentences[index], (title, question)


def test_ids_are_stable_whatever_families_are_asked():
    world = build_world(seed=2)
    everything = {t.id: t for t in generate_tasks(world, num_tasks=5)}
    for family in FAMILIES:
        some = generate_tasks(world, num_tasks=3, families=[family])
        assert all(everything[t.id] == t for t in some)


def test_bad_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="split"):
        build_world(split="dev")
    with pytest.raises(ValueError, match="cities per country"):
        build_world(num_countries=5, num_cities=6)
    with pytest.raises(ValueError, match="families"):
        generate_tasks(build_world(), families=["riddles"])
    tiny = build_world(num_countries=2, num_cities=4, num_people=4, num_organisations=6)
    with pytest.raises(LumosGymError, match="bigger world"):
        generate_tasks(tiny, num_tasks=200, families=["comparison"])


# ---------------------------------------------------------------------------------------------
# The env


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_replay_reaches_full_accuracy(seed):
    split = "train" if seed == 1 else "test"
    env = WorldQAEnv(seed=seed, split=split, num_tasks=8, **ORACLE)
    assert len(env.tasks) == 32
    for task in env.tasks:
        result = replay_gold(env, task)
        assert result.ok, (task.id, task.question, result.errors, result.reward)
    env.close()


def test_retrieval_finds_the_evidence_sentence():
    """ParagraphRetrieve (BM25) over KnowledgeQuery's pages keeps the stating sentence."""
    env = WorldQAEnv(seed=5, **ORACLE)
    found = total = 0
    for task in env.tasks:
        env.reset(options={"task_id": task.id})
        evidence = iter(task.meta["evidence"])
        for step in task.gold_actions[:-1]:
            _, _, _, _, info = env.step(step)
            for action in parse_actions(step):
                if action.name == "ParagraphRetrieve":
                    title, index = next(evidence)
                    total += 1
                    found += (
                        env.world.pages[title].sentences[index]
                        in (info["variables"][action.outputs[0]])
                    )
    assert total > 60 and found / total >= 0.95


def test_world_is_the_knowledge_query_corpus():
    env = WorldQAEnv(seed=0, num_tasks=2, **ORACLE)
    task = env.tasks[0]
    env.reset(options={"task_id": task.id})
    some_city = next(iter(env.world.cities))
    obs, *_ = env.step(f"R1 = KnowledgeQuery({some_city})")
    assert obs.startswith(f"R1 = WikipediaPage({some_city})")
    obs, *_ = env.step("R2 = KnowledgeQuery(Qqqzzx)")
    assert obs.startswith("Error:") and "no page matches" in obs


def test_scores_aliases_and_wrong_answers():
    env = WorldQAEnv(seed=0, num_tasks=10, **ORACLE)
    numbers = [t for t in env.tasks if t.meta["aliases"]]
    assert numbers, "some numeric answer has a thousands-comma alias"
    task = numbers[0]
    assert env.score(task.meta["aliases"][0], task)["accuracy"] == 1.0
    yes_no = next(t for t in env.tasks if t.meta["answer_type"] == "yes/no")
    env.reset(options={"task_id": yes_no.id})
    wrong = "no" if yes_no.answer == "yes" else "yes"
    _, reward, terminated, _, info = env.step(f"Answer({wrong})")
    assert terminated and reward == 0.0 and info["gold_answer"] == yes_no.answer


def test_source_provenance_and_reset_info():
    env = WorldQAEnv(seed=4, num_tasks=3, families="bridge", num_people=40, num_organisations=12)
    described = env.source.describe()
    assert described["kind"] == "generated" and described["seed"] == 4
    assert described["families"] == ["bridge"] and len(described["sha256"]) == 64
    assert len(env.world.pages) == 6 + 30 + 40 + 12
    obs, info = env.reset(seed=0)
    assert info["task_type"] == "qa" and "gold_actions" not in info
    assert info["instruction_actions"][:3] == ["KnowledgeQuery", "ParagraphRetrieve", "QA"]
    assert obs in {t.question for t in env.tasks}


def test_gymnasium_env_checker_passes():
    # An unregistered spec: gymnasium's render-mode check needs the env to have one.
    spec = EnvSpec("test/WorldQA-v0", entry_point=WorldQAEnv, kwargs={"num_tasks": 2, **ORACLE})
    env = gym.make(spec, disable_env_checker=True, render_mode="ansi").unwrapped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=False, skip_close_check=True)
    assert not [str(w.message) for w in caught]
    env.close()


@pytest.mark.skipif("lumos/WorldQA-v0" not in ENVS, reason="lumos/WorldQA-v0 not registered yet")
def test_registered_id_makes_the_env():
    env = gym.make("lumos/WorldQA-v0", num_tasks=2, **ORACLE)
    assert isinstance(env.unwrapped, WorldQAEnv)
    task = env.unwrapped.tasks[0]
    env.reset(options={"task_id": task.id})
    for step in task.gold_actions:
        *_, terminated, _, info = env.step(step)
    assert terminated and info["metrics"]["accuracy"] == 1.0


# ---------------------------------------------------------------------------------------------
# The converter


def test_converter_round_trips_through_subgoal_plan_text():
    _, tasks = tasks_of(6, num_tasks=5)
    for task in tasks:
        annotation = worldqa_annotation(task)
        assert annotation.task_type == "qa" and annotation.dataset == "worldqa"
        text = annotation.to_dict()["subgoal_plan"]
        assert format_subgoal_plan(parse_subgoal_plan(text)) == text
        assert Annotation.from_dict(annotation.to_dict()) == annotation
        assert [s.text for s in annotation.subgoals] == task.meta["subgoals"]
        untailed = [
            "; ".join(format_action(a.action, with_result=False) for a in subgoal.actions)
            for subgoal in annotation.subgoals
        ]
        assert untailed == list(task.gold_actions[:-1])
        first = annotation.subgoals[0].actions[0].action
        assert first.name == "KnowledgeQuery" and first.result == f"WikipediaPage({first.args})"
        assert annotation.actions[-1].action.result.replace(",", "") == task.answer


def test_converted_annotation_replays_with_its_tails():
    env = WorldQAEnv(seed=8, num_tasks=4, **ORACLE)
    for task in env.tasks:
        annotation = worldqa_annotation(task)
        env.reset(options={"task_id": task.id})
        for subgoal in annotation.subgoals:
            actions = [a.action for a in subgoal.actions]
            text = "; ".join(format_action(a, with_result=False) for a in actions)
            observation, _, _, _, info = env.step(text)
            assert "Error:" not in observation
            for action in actions:
                (var,) = action.outputs
                if action.name == "KnowledgeQuery":
                    assert f"{var} = {action.result}" in observation
                elif action.name in ("QA", "Calculator"):
                    assert info["variables"][var] == action.result
        _, reward, terminated, _, _ = env.step(f"Answer(R{len(annotation.actions)})")
        assert terminated and reward == 1.0


def test_converter_rejects_inconsistent_tasks():
    _, tasks = tasks_of(0, num_tasks=1)
    task = tasks[0]

    def broken(**changes) -> Task:
        meta = {**task.meta, **changes.pop("meta", {})}
        fields = {"id": task.id, "question": task.question, "answer": task.answer,
                  "task_type": "qa", "gold_actions": task.gold_actions, "meta": meta}
        return Task(**{**fields, **changes})

    cases = [
        (broken(meta={"tails": None}), "tails"),
        (broken(meta={"subgoals": task.meta["subgoals"][:-1]}), "line up"),
        (broken(answer="Nowhere"), "not the answer"),
        (broken(gold_actions=(*task.gold_actions[:-1], "Answer(R1)")), "last result"),
        (broken(gold_actions=(*task.gold_actions[:-1], "R9 = QA(x)")), "Answer"),
        (
            broken(
                gold_actions=("R1 = KnowledgeQuery(", "Answer(R1)"),
                meta={"subgoals": ["s"], "tails": [["t"]]},
            ),
            "does not parse",
        ),
    ]
    for bad, needle in cases:
        with pytest.raises(ConversionError, match=needle):
            worldqa_annotation(bad)


@pytest.mark.slow
def test_oracle_replay_with_the_embedding_retriever():
    env = WorldQAEnv(seed=0, num_tasks=5, privileged=True, qa_backend="reference")
    assert all(replay_gold(env, task).ok for task in env.tasks)
