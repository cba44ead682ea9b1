"""The validation splits of the seven envs of ``compare`` share nothing with train or test.

For each env the validation split is built at a small size and compared with the test split (at
the compare suite's size where that is cheap) and with the train split at a small size: no task
id, no task, no gold solution and no generated entity (a world's names, a picture, a target
product, a game) in common. Generated questions share templates on purpose (a Scenes question
asks "How many circles are there?" of many pictures; a level-1 coin collector is "take coin"
in every room), so for the envs with entities a task is its text *with* its entity, as the
leakage check (:mod:`lumos_gym.conversion.leakage`) counts it; that check is run too, with the
validation tasks in the place of the training data (:func:`training_from_envs`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.conversion.leakage import (
    ENTITY_READERS,
    EvalTasks,
    check_leakage,
    normalise_text,
    training_from_envs,
)
from lumos_gym.envs.tasks import Task

# ---------------------------------------------------------------------------------------------
# Helpers


def tasks_of(env_id: str, **kwargs: Any) -> list[Task]:
    env = gym.make(env_id, **kwargs)
    try:
        return list(env.unwrapped.tasks)
    finally:
        env.close()


def assert_disjoint(name: str, ours: Iterable[Any], theirs: Iterable[Any]) -> None:
    shared = set(ours) & set(theirs)
    assert not shared, f"{name} shared: {sorted(map(str, shared))[:3]}"


def assert_no_leak(env_id: str, validation: Mapping[str, Any],
                   others: Iterable[Mapping[str, Any]]) -> None:
    """The leakage check of the validation tasks (as training data) against ``others``."""
    report = check_leakage(training_from_envs([(env_id, dict(validation))]),
                           [EvalTasks(env_id, dict(kwargs)) for kwargs in others])
    assert report.clean, report.format()
    assert all(e.same_id == 0 for e in report.envs), report.format()


def picture(task: Task) -> str:
    return hashlib.sha256(json.dumps(task.meta["scene"], sort_keys=True).encode()).hexdigest()


def folder_digests(task: Task) -> set[str]:
    """The SHA-256 of every file of a game's folder (the game file, TextWorld's json...)."""
    folder = Path(task.meta["path"]).parent
    return {hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir() if f.is_file()}


# ---------------------------------------------------------------------------------------------
# MathWord and WorldQA (the pattern the others follow)


@pytest.mark.full
def test_mathword_validation_shares_no_problem_with_train_or_test():
    env_id = "lumos/MathWord-v0"
    val = tasks_of(env_id, split="validation", levels=[1, 2], num_tasks=5)
    test = tasks_of(env_id, split="test", levels=[1, 2], num_tasks=40)  # compare's size
    train = tasks_of(env_id, split="train", levels=[1, 2], num_tasks=5)
    assert len(val) == 10 and {t.meta["split"] for t in val} == {"validation"}
    for other in (test, train):
        assert_disjoint("id", (t.id for t in val), (t.id for t in other))
        assert_disjoint("question", (t.question for t in val), (t.question for t in other))
        assert_disjoint("rationale", (t.rationale for t in val), (t.rationale for t in other))
    assert_no_leak(env_id, {"split": "validation", "levels": [1, 2], "num_tasks": 5},
                   [{"split": "test", "levels": [1, 2], "num_tasks": 40},
                    {"split": "train", "levels": [1, 2], "num_tasks": 5}])


@pytest.mark.full
def test_worldqa_validation_shares_no_name_or_question_with_train_or_test():
    env_id = "lumos/WorldQA-v0"
    worlds, tasks = {}, {}
    for split, n in (("validation", 3), ("test", 50), ("train", 3)):
        env = gym.make(env_id, split=split, num_tasks=n)
        try:
            worlds[split], tasks[split] = set(env.unwrapped.world.pages), env.unwrapped.tasks
        finally:
            env.close()
    assert {t.id.split("/")[1] for t in tasks["validation"]} == {"validation"}
    for other in ("test", "train"):
        assert_disjoint("page title", worlds["validation"], worlds[other])
        mine, theirs = tasks["validation"], tasks[other]
        assert_disjoint("id", (t.id for t in mine), (t.id for t in theirs))
        assert_disjoint("question", (t.question for t in mine), (t.question for t in theirs))
        assert_disjoint("gold actions", (t.gold_actions for t in mine),
                        (t.gold_actions for t in theirs))
    assert_no_leak(env_id, {"split": "validation", "num_tasks": 3},
                   [{"split": "test", "num_tasks": 50}, {"split": "train", "num_tasks": 3}])


# ---------------------------------------------------------------------------------------------
# Scenes


def test_scenes_validation_pictures_are_neither_train_nor_test_pictures():
    env_id = "lumos/Scenes-v0"
    val = tasks_of(env_id, split="validation", num_tasks=2)
    test = tasks_of(env_id, split="test", num_tasks=14)  # compare's size
    train = tasks_of(env_id, split="train", num_tasks=20)  # the data build's size
    assert len(val) == 30 and all(t.id.startswith("scenes/validation/0/") for t in val)
    assert len({picture(t) for t in val}) == len(val)
    for other in (test, train):
        assert_disjoint("id", (t.id for t in val), (t.id for t in other))
        assert_disjoint("picture", map(picture, val), map(picture, other))
        # questions and short answers are templates ("How many objects are there?" -> "4"):
        # a task is its question about its picture, with the gold steps read off that picture
        assert_disjoint("question on a picture", ((t.question, picture(t)) for t in val),
                        ((t.question, picture(t)) for t in other))
        assert_disjoint("gold on a picture", ((t.gold_actions, picture(t)) for t in val),
                        ((t.gold_actions, picture(t)) for t in other))
    assert_no_leak(env_id, {"split": "validation", "num_tasks": 2},
                   [{"split": "test", "num_tasks": 14}, {"split": "train", "num_tasks": 20}])


# ---------------------------------------------------------------------------------------------
# WebShop and Mind2Web (recorded from the shop)


@pytest.mark.full
def test_webshop_validation_targets_only_the_products_its_shop_adds():
    from lumos_gym.envs.web.shop.catalog import generate_catalog, validation_catalog

    env_id = "lumos/WebShop-v0"
    shop = validation_catalog(0, 1000)
    train_shop, test_shop = generate_catalog(0, 1000), generate_catalog(0, 1200)
    assert list(shop)[:1000] == list(train_shop)  # the train shop, then products of its own
    added = [p.asin for p in list(shop)[1000:]]
    assert len(added) == 200 and set(added) == shop.validation_asins
    assert_disjoint("asin", added, [p.asin for p in test_shop])  # compare's test shop

    val = tasks_of(env_id, split="validation", num_tasks=10)
    test = tasks_of(env_id, split="test", num_tasks=200, num_products=1200)  # compare's
    train = tasks_of(env_id, split="train", num_tasks=100)
    assert [t.id for t in val] == [f"webshop/validation/0/{n}" for n in range(10)]
    targets = {t.meta["goal"]["asin"] for t in val}
    assert targets <= shop.validation_asins
    for other in (test, train):
        assert_disjoint("id", (t.id for t in val), (t.id for t in other))
        assert_disjoint("instruction", (t.question for t in val), (t.question for t in other))
        assert_disjoint("target product", targets, (t.meta["goal"]["asin"] for t in other))
        assert_disjoint("gold actions", (t.gold_actions for t in val),
                        (t.gold_actions for t in other))
    assert_no_leak(env_id, {"split": "validation", "num_tasks": 10},
                   [{"split": "test", "num_tasks": 200, "num_products": 1200},
                    {"split": "train", "num_tasks": 100}])


def test_webshop_validation_needs_the_validation_shop():
    from lumos_gym.envs.web.shop.catalog import generate_catalog
    from lumos_gym.envs.web.shop.instructions import generate_goals
    from lumos_gym.errors import LumosGymError

    with pytest.raises(LumosGymError, match="validation shop"):
        generate_goals(generate_catalog(0, 50), split="validation", num_tasks=1)


@pytest.mark.full
def test_mind2web_recorded_validation_targets_no_product_of_the_train_shop(tmp_path, monkeypatch):
    from lumos_gym.envs.web.mind2web_record import CATALOG_SEED, CATALOG_SIZE
    from lumos_gym.envs.web.shop.catalog import generate_catalog

    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    env_id = "lumos/Mind2Web-v0"
    validation = {"source": "record", "split": "validation", "num_tasks": 4}
    val = tasks_of(env_id, **validation)
    test = tasks_of(env_id, task_page=False)  # the bundled test_website set
    train = tasks_of(env_id, source="record", split="train", num_tasks=4)
    assert {t.meta["split"] for t in val} == {"validation"}
    assert all(t.id.startswith("mind2web/validation/") for t in val)
    target = ENTITY_READERS[env_id]
    products = set().union(*(target(None, t) for t in val))
    assert len(products) == len(val)
    # train and test recordings (of any size) target products of the train shop, whose titles
    # the validation targets never have
    titles = {f"product:{normalise_text(p.title)}"
              for p in generate_catalog(seed=CATALOG_SEED, num_products=CATALOG_SIZE)}
    assert_disjoint("target product", products, titles)
    for other in (test, train):
        assert_disjoint("id", (t.id for t in val), (t.id for t in other))
        assert_disjoint("task", (t.question for t in val), (t.question for t in other))
        assert_disjoint("gold actions", (t.gold_actions for t in val),
                        (t.gold_actions for t in other))
    assert_no_leak(env_id, validation,
                   [{"task_page": False}, {"source": "record", "split": "train", "num_tasks": 4}])


# ---------------------------------------------------------------------------------------------
# TextWorld


def test_textworld_validation_game_seeds_are_above_every_train_and_test_seed():
    from lumos_gym.envs.games.textworld import VALIDATION_SEEDS, recipes

    def seeds(split: str, num_games: int) -> set[int]:
        return {r.seed_for(attempt) for r in recipes(split=split, levels=[1, 2, 3, 4, 5],
                                                     num_games=num_games)
                for attempt in range(8)}  # every retry seed too

    val = recipes(split="validation", levels=[1, 2, 3, 4, 5], num_games=20)
    assert min(seeds("validation", 20)) >= VALIDATION_SEEDS
    assert max(seeds("test", 20) | seeds("train", 200)) < VALIDATION_SEEDS
    assert {r.task_id.split("/")[1] for r in val} == {"validation"}
    cooking = [r for r in val if r.challenge == "tw-cooking"]
    assert cooking and {r.settings["split"] for r in cooking} == {"valid"}  # TextWorld's own
    assert not any(r.settings.get("test") for r in val if r.challenge == "tw-simple")


@pytest.mark.slow  # three games, about 20 s; the default run checks the seed ranges
def test_textworld_validation_game_is_neither_the_train_nor_the_test_game(tmp_path):
    # game 1 of level 1 (a coin collector, the smallest games) in each split
    games = {}
    for split in ("validation", "test", "train"):
        kwargs = {"split": split, "seed": 1, "num_games": 1, "cache_dir": str(tmp_path)}
        (task,) = tasks_of("lumos/TextWorld-v0", **kwargs)
        games[split] = (task, kwargs)
    val, val_kwargs = games["validation"]
    assert val.id == "textworld/validation/tw-coin_collector-l1/1"
    assert val.meta["split"] == "validation"
    uuid = {s: json.loads((Path(t.meta["path"]).parent / "tw-game.json").read_text())
            ["metadata"]["uuid"] for s, (t, _) in games.items()}
    for split in ("test", "train"):
        other, kwargs = games[split]
        assert other.meta["tw_seed"] != val.meta["tw_seed"]
        assert uuid[split] != uuid["validation"]  # TextWorld's name of the game (its seeds)
        assert_disjoint("game file", folder_digests(val), folder_digests(other))
        assert_no_leak("lumos/TextWorld-v0", val_kwargs, [kwargs])


# ---------------------------------------------------------------------------------------------
# ALFWorld


def _content(problem: Any) -> str:
    return problem.description + problem.pddl.split("\n", 1)[1]  # without the problem's name


def _first_problem(task_type: str, seed: int, split: str, level: int) -> Any:
    from lumos_gym.envs.games.alfworld import generate_problem

    return next(p for a in range(40)
                if (p := generate_problem(task_type, seed, split=split, attempt=a, level=level)))


@pytest.mark.full
def test_alfworld_validation_problems_are_none_of_the_train_or_test_problems():
    from lumos_gym.envs.games.alfworld import VALIDATION_GUARD, split_of

    # the type whose small rooms repeat most (level 1) and one with two objects
    for task_type in ("pick_clean_then_place_in_recep", "pick_two_obj_and_place"):
        for level in (1, 2):
            val = [_first_problem(task_type, s, "validation", level) for s in range(10)]
            guarded = {_content(_first_problem(task_type, s, "train", level))
                       for s in range(VALIDATION_GUARD)}
            tests = {_content(_first_problem(task_type, s, "test", level)) for s in range(9)}
            assert_disjoint("problem", map(_content, val), guarded | tests)
            if level == 1:  # small rooms: validation draws train-digest problems only
                assert {split_of(p) for p in val} == {"train"}


@pytest.mark.full
def test_alfworld_validation_games_share_no_game_with_the_test_games(tmp_path):
    # the train problems are compared above, over 500 seeds, without the planner
    env_id = "lumos/ALFWorld-v0"
    common = {"levels": [1, 2], "num_tasks": 1, "task_types": [3], "cache_dir": str(tmp_path)}
    games = {s: tasks_of(env_id, split=s, **common) for s in ("validation", "test")}
    val = games["validation"]
    assert [t.id for t in val] == [
        "alfworld/validation/gen-l1/pick_clean_then_place_in_recep/0",
        "alfworld/validation/gen-l2/pick_clean_then_place_in_recep/0",
    ]
    assert {t.meta["split"] for t in val} == {"validation"}

    def problem(task: Task) -> str:
        game = json.loads(Path(task.meta["path"]).read_text())
        return game["grammar"] + game["pddl_problem"].split("\n", 1)[1]

    assert_disjoint("game", map(problem, val), map(problem, games["test"]))
    assert_disjoint("game file", set().union(*map(folder_digests, val)),
                    set().union(*map(folder_digests, games["test"])))
    assert_no_leak(env_id, {"split": "validation", **common}, [{"split": "test", **common}])


# ---------------------------------------------------------------------------------------------
# The suite


def test_the_validation_suite_holds_the_compare_envs_at_their_validation_splits():
    from lumos_gym.cli.learn import check_splits, val_suite_envs
    from lumos_gym.evaluation.suites import get_suite

    validation, compare = get_suite("validation"), get_suite("compare")
    assert validation.role == "validation"
    # what improve --val-suite validation chooses on: validation splits only
    check_splits(val_suite_envs("validation"), flag="--val-suite", allowed=("validation",))
    assert [e.env_id for e in validation.entries] == [e.env_id for e in compare.entries]
    for mine, theirs in zip(validation.entries, compare.entries, strict=True):
        assert mine.kwargs["split"] == "validation"
        assert theirs.kwargs["split"] != "validation"
        assert mine.task_ids is None
        same = {k for k in theirs.kwargs if k not in ("split", "num_tasks", "num_games",
                                                       "num_products")}
        assert {k: mine.kwargs.get(k) for k in same} == {k: theirs.kwargs[k] for k in same}
