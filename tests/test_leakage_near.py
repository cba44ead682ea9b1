"""Near duplicates in the leakage check: reworded problems, rebuilt games (``--strict``)."""

from __future__ import annotations

import json
import re

import gymnasium as gym

from lumos_gym.cli import main
from lumos_gym.conversion.leakage import (
    EvalTasks,
    check_leakage,
    near_keys,
    number_key,
    opening_room,
    read_training,
    walkthrough,
)
from lumos_gym.envs.tasks import Task

#: MathWord level 3: three steps, so three numbers or more in every question.
LEVEL3 = {"split": "test", "levels": [3], "num_tasks": 3}
#: MathWord level 1: one step, two numbers.
LEVEL1 = {"split": "test", "levels": [1], "num_tasks": 3}
NAMES = re.compile(r"\b(?!How\b|What\b|The\b|This\b|On\b|If\b|After\b|Each\b)[A-Z][a-z]+\b")


def _tasks(kwargs):
    env = gym.make("lumos/MathWord-v0", **kwargs)
    try:
        return list(env.unwrapped.tasks)
    finally:
        env.close()


def _reworded(task: Task) -> str:
    """The question with other names and another opening: its numbers kept."""
    return "Here is a problem. " + NAMES.sub("Zed", task.question).replace(" has ", " holds ")


def _annotations(folder, tasks, *, text=_reworded):
    folder.mkdir(parents=True)
    with open(folder / "annotations.jsonl", "w") as f:
        for n, task in enumerate(tasks):
            f.write(json.dumps({"id": f"copied/{n}", "task": text(task), "answer": task.answer,
                                "task_type": "math", "subgoal_plan": "Subgoal 1: x"}) + "\n")
    return folder


def test_number_keys_mask_the_words_and_keep_the_numbers_and_answer():
    one = number_key("Tom has 1,200 apples and $3.50. He eats twice 7.", "42")
    two = number_key("Mia holds $1200 pears and 3.5 coins; twice, she sells 7 of them", "42.0")
    assert one == two == (("1200", "2", "3.5", "7"), "42")
    assert number_key("How many circles are there?", "3") is None  # no number
    assert number_key("Ann has 3 pens.", "") is None  # no answer
    strong = near_keys(Task("a", "Ann has 3 pens, 4 cups and 5 hats.", "12", "math"))
    weak = near_keys(Task("b", "Ann has 3 pens and 4 cups.", "7", "math"))
    assert [(k.kind, k.strong) for k in strong + weak] == [("numbers", True), ("numbers", False)]
    assert near_keys(Task("c", "Buy 3 red mugs under 40 dollars", "b0123", "web")) == []


def test_game_keys_are_the_walkthrough_its_room_and_the_goal():
    goal_text = "Your task is to: put a clean soapbar in garbagecan."
    commands = ["go to countertop 1", "take soapbar 1 from countertop 1", "go to sinkbasin 1",
                "clean soapbar 1 with sinkbasin 1"]
    game = Task("g", goal_text, "won", "game", meta={"gold_commands": commands})
    walk, goal = near_keys(game)  # no opening observation: the walkthrough alone decides
    assert (walk.kind, walk.strong, goal.kind, goal.strong) == ("walkthrough", True, "goal",
                                                                False)
    assert walk.value == walkthrough(game) and len(walk.value) == 4
    room = "You are in the middle of a room: a countertop 1, a sinkbasin 1."
    game = Task("g", goal_text, "won", "game",
                meta={"gold_commands": commands, "observation": f"{room}\n\n{goal_text}"})
    assert opening_room(game) == "you are in the middle of a room a countertop 1 a sinkbasin 1"
    same, walk, goal = near_keys(game)  # the same walkthrough from another room is weak
    assert [(k.kind, k.strong) for k in (same, walk, goal)] == [
        ("game", True), ("walkthrough", False), ("goal", False)]
    assert same.value == (walk.value, opening_room(game))
    coin = Task("c", "Pick up the coin.", "won", "game",
                gold_actions=("R1 = Command(go east); R2 = Command(go north)",
                              "R3 = Command(take coin)"))
    assert walkthrough(coin) == ("go east", "go north", "take coin")
    assert not near_keys(coin)[0].strong  # moves and one other command: weak


def test_reworded_problems_are_near_duplicates_not_shared_tasks(tmp_path):
    tests = _tasks(LEVEL3)
    folder = _annotations(tmp_path / "train", tests[:2])
    report = check_leakage(read_training([folder]), [EvalTasks("lumos/MathWord-v0", LEVEL3)])
    row = report.envs[0]
    assert (row.same_text, row.same_id, row.shared_tasks) == (0, 0, 0) and report.clean
    assert (row.near_duplicates, row.weak_near_duplicates) == (2, 0)
    assert report.near_duplicates == 2
    assert row.near_examples[0].startswith(f"{tests[0].id} ~ copied/0 (numbers ")
    totals = report.to_dict()["total"]
    assert (totals["near_duplicates"], totals["weak_near_duplicates"]) == (2, 0)
    assert report.to_dict()["envs"]["lumos/MathWord-v0"]["near_examples"] == row.near_examples
    assert "near duplicates (not shared tasks): 2, and 0 weak" in report.format()


def test_problems_with_two_numbers_are_weak_matches(tmp_path):
    tests = _tasks(LEVEL1)
    folder = _annotations(tmp_path / "train", tests[:1])
    row = check_leakage(read_training([folder]), [EvalTasks("lumos/MathWord-v0", LEVEL1)]).envs[0]
    assert (row.near_duplicates, row.weak_near_duplicates) == (0, 1)
    assert row.near_examples == [f"weak: {tests[0].id} ~ copied/0 (numbers "
                                 f"{', '.join(sorted(number_key(tests[0].question, '1')[0]))}; "
                                 f"answer {tests[0].answer})"]


def test_an_exact_copy_counts_as_shared_and_not_again_as_a_near_duplicate(tmp_path):
    tests = _tasks(LEVEL3)
    folder = _annotations(tmp_path / "train", tests[:1], text=lambda task: task.question)
    row = check_leakage(read_training([folder]), [EvalTasks("lumos/MathWord-v0", LEVEL3)]).envs[0]
    assert (row.shared_tasks, row.near_duplicates, row.weak_near_duplicates) == (1, 0, 0)


def test_cli_fails_on_near_duplicates_only_with_strict(tmp_path, capsys):
    suite = tmp_path / "mine.json"
    suite.write_text(json.dumps({"name": "mine", "envs": [
        {"env": "lumos/MathWord-v0", "kwargs": LEVEL3}]}))
    folder = _annotations(tmp_path / "train", _tasks(LEVEL3)[:1])
    args = ["data", "leakage", "--train", str(folder), "--suite", str(suite)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no leakage" in out and "near duplicates of lumos/MathWord-v0: 1, weak 0" in out
    assert main([*args, "--strict"]) == 1
    assert "--strict: 1 near duplicate(s)" in capsys.readouterr().out
    # weak matches never fail, --strict or not
    weak = _annotations(tmp_path / "weak", _tasks(LEVEL1)[:1])
    suite.write_text(json.dumps({"name": "mine", "envs": [
        {"env": "lumos/MathWord-v0", "kwargs": LEVEL1}]}))
    assert main(["data", "leakage", "--train", str(weak), "--suite", str(suite), "--strict"]) == 0
