"""The leakage check (``lumos_gym.conversion.leakage``, ``lumos-gym data leakage``)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from lumos_gym.cli import main
from lumos_gym.conversion.leakage import (
    EvalTasks,
    TextIndex,
    build_splits,
    check_leakage,
    eval_tasks,
    normalise_text,
    read_training,
)
from lumos_gym.conversion.pipeline import OFFLINE_SPLITS, SPLITS_FILE, split_kwargs
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.suites import SuiteEntry

MATH = {"levels": [1], "num_tasks": 4}
SCENES = {"num_tasks": 1, "kinds": ["count_all", "colour_of", "read_card"]}
WORLD = {"num_tasks": 1, "families": ["bridge"]}


def _tasks(env_id, kwargs):
    env = gym.make(env_id, **kwargs)
    try:
        return list(env.unwrapped.tasks)
    finally:
        env.close()


def _data_folder(tmp_path, splits, *, messages=()):
    """A data build folder: annotations of every task of ``splits`` (env id, kwargs), their
    ``splits.json``, training records holding ``messages``, and a test file never read."""
    folder = tmp_path / "data"
    (folder / "annotations").mkdir(parents=True)
    (folder / "train").mkdir()
    (folder / "test").mkdir()
    with open(folder / "annotations" / "all.jsonl", "w") as f:
        for env_id, kwargs in splits:
            for task in _tasks(env_id, kwargs):
                f.write(json.dumps({"id": task.id, "dataset": "x", "task_type": task.task_type,
                                    "task": task.question, "subgoal_plan": "Subgoal 1: go"})
                        + "\n")
    (folder / "annotations" / "all.rejected.jsonl").write_text('{"task": "ignored"}\n')
    with open(folder / "train" / "react.jsonl", "w") as f:
        for text in messages:
            f.write(json.dumps({"id": "r", "messages": [
                {"role": "user", "content": f"Task: {text}; Initial Environment Description"},
                {"role": "assistant", "content": "Thought: ..."}]}) + "\n")
    # the test file of a data build holds test tasks: it must never count as training data
    (folder / "test" / "t.jsonl").write_text(json.dumps({"id": "x", "task": "t",
                                                          "subgoal_plan": "s"}) + "\n")
    manifest = [{"name": f"s{n}", "env_id": e, "kwargs": k, "role": "train"}
                for n, (e, k) in enumerate(splits)]
    (folder / SPLITS_FILE).write_text(json.dumps({"num_tasks": 1, "splits": manifest}))
    return folder


# ----------------------------------------------------------------------------------- texts
def test_texts_are_normalised_and_found_at_word_boundaries():
    assert normalise_text("  What's 2+2?\nＡＢ ﬁ_x ") == "what s 2 2 ab fi x"
    index = TextIndex()
    index.add("Task: How many circles are there?; Initial Environment Description: None.")
    index.add("Task: how many  CIRCLES are there?; initial environment description: none.")
    index.add("")
    assert len(index) == 1  # the same normalised text once, the empty one never
    assert index.contains("How many circles are there")
    assert index.contains("circles are there?")
    assert not index.contains("circle")  # a word boundary, not a prefix
    assert not index.contains("how many squares are there")
    assert not index.contains("")


def test_read_training_takes_annotations_and_records_never_test_files(tmp_path):
    folder = _data_folder(tmp_path, [("lumos/MathWord-v0", {"split": "train", **MATH})],
                          messages=["Ada has 3 pens."])
    data = read_training([folder])
    assert sorted(f.name for f in data.files) == ["all.jsonl", "react.jsonl"]
    assert len(data.ids) == 4 and all(i.startswith("mathword/L1/") for i in data.ids)
    assert data.has_text(normalise_text("Ada has 3 pens.")) and len(data.index) == 1
    assert data.splits == [("lumos/MathWord-v0", {"split": "train", **MATH})]
    assert read_training([folder / "train" / "react.jsonl"]).ids == set()
    with pytest.raises(LumosGymError, match="no training data"):
        read_training([tmp_path / "absent"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(LumosGymError, match="no training file"):
        read_training([tmp_path / "empty"])


def test_splits_of_a_data_build_without_its_manifest(tmp_path):
    (tmp_path / ".built").write_text(json.dumps({"num_tasks": 2}))
    splits = build_splits(tmp_path, None)
    train = [s for s in OFFLINE_SPLITS if s.role == "train"]
    assert splits == [(s.env_id, split_kwargs(s, 2)) for s in train]
    mathword = dict(splits)["lumos/MathWord-v0"]
    assert mathword["num_tasks"] == 2  # takes --num-tasks as it is
    webshop = next(s for s in train if s.env_id == "lumos/WebShop-v0")
    assert split_kwargs(webshop, 2)["num_tasks"] == max(1, webshop.kwargs["num_tasks"] * 2 // 200)
    assert build_splits(tmp_path, 200) == [(s.env_id, split_kwargs(s, 200)) for s in train]


# ----------------------------------------------------------------------------------- check
@pytest.mark.full
def test_math_train_and_test_splits_share_nothing_and_a_copy_is_found(tmp_path):
    test = [EvalTasks("lumos/MathWord-v0", {"split": "test", **MATH})]
    clean = check_leakage(read_training([_data_folder(
        tmp_path / "a", [("lumos/MathWord-v0", {"split": "train", **MATH})])]), test)
    row = clean.envs[0]
    assert clean.clean and (row.test_tasks, row.same_text, row.shared_tasks) == (4, 0, 0)
    assert row.train_tasks is None  # no entities in a math problem
    # the test problems copied into the training data: four shared tasks, by id and by text
    leaky = check_leakage(read_training([_data_folder(
        tmp_path / "b", [("lumos/MathWord-v0", {"split": "test", **MATH})])]), test)
    row = leaky.envs[0]
    assert not leaky.clean and (row.same_text, row.same_id, row.shared_tasks) == (4, 4, 4)
    assert "LEAKAGE: 4 shared task(s)" in leaky.format()
    # one problem's text inside a training record (no annotation): a shared task too
    task = _tasks("lumos/MathWord-v0", {"split": "test", **MATH})[2]
    folder = _data_folder(tmp_path / "c", [], messages=[task.question])
    row = check_leakage(read_training([folder]), test).envs[0]
    assert (row.same_text, row.same_id, row.shared_tasks, row.examples) == (1, 0, 1, [task.id])


@pytest.mark.full
def test_scenes_share_question_templates_but_no_picture(tmp_path):
    test = [EvalTasks("lumos/Scenes-v0", {"split": "test", **SCENES})]
    folder = _data_folder(tmp_path / "a", [("lumos/Scenes-v0", {"split": "train", **SCENES})])
    row = check_leakage(read_training([folder]), test).envs[0]
    # "How many objects are there?" is asked of every picture: the same text, not the same task
    assert row.same_text >= 1 and row.shared_tasks == 0
    assert (row.train_tasks, row.entities, row.shared_entities) == (3, 3, 0) and row.clean
    # the test pictures in the training data: shared pictures and shared tasks
    folder = _data_folder(tmp_path / "b", [("lumos/Scenes-v0", {"split": "test", **SCENES})])
    row = check_leakage(read_training([folder]), test).envs[0]
    assert (row.shared_entities, row.shared_tasks, row.clean) == (3, 3, False)
    assert any(e.startswith("picture:") for e in row.examples)


@pytest.mark.full
def test_worldqa_worlds_share_no_name(tmp_path):
    test = [EvalTasks("lumos/WorldQA-v0", {"split": "test", **WORLD})]
    folder = _data_folder(tmp_path / "a", [("lumos/WorldQA-v0", {"split": "train", **WORLD})])
    report = check_leakage(read_training([folder]), test)
    row = report.envs[0]
    assert row.world_names > 100 and row.shared_world_names == 0 and report.clean
    assert report.to_dict()["envs"]["lumos/WorldQA-v0"]["clean"] is True
    folder = _data_folder(tmp_path / "b", [("lumos/WorldQA-v0", {"split": "test", **WORLD})])
    row = check_leakage(read_training([folder]), test).envs[0]
    assert row.shared_world_names == row.world_names and row.shared_tasks == 1


def test_suite_entries_choose_the_test_tasks(tmp_path):
    entries = [SuiteEntry("lumos/MathWord-v0", {"split": "test", **MATH},
                          task_ids=("mathword/L1/0/0", "nope"), limit=1)]
    spec = eval_tasks(entries)[0]
    assert (spec.task_ids, spec.limit) == (("mathword/L1/0/0", "nope"), 1)
    folder = _data_folder(tmp_path, [("lumos/MathWord-v0", {"split": "train", **MATH})])
    assert check_leakage(read_training([folder]), [spec]).envs[0].test_tasks == 1


def test_cli_data_leakage_exits_1_on_an_overlap(tmp_path, capsys):
    suite = tmp_path / "mine.json"
    suite.write_text(json.dumps({"name": "mine", "envs": [
        {"env": "lumos/MathWord-v0", "kwargs": {"split": "test", **MATH}}]}))
    clean = _data_folder(tmp_path / "a", [("lumos/MathWord-v0", {"split": "train", **MATH})])
    out = tmp_path / "report.json"
    assert main(["data", "leakage", "--train", str(clean), "--suite", str(suite),
                 "--json", str(out)]) == 0
    assert "no leakage" in capsys.readouterr().out
    assert json.loads(out.read_text())["clean"] is True
    leaky = _data_folder(tmp_path / "b", [("lumos/MathWord-v0", {"split": "test", **MATH})])
    assert main(["data", "leakage", "--out", str(leaky), "--suite", str(suite)]) == 1
    assert "LEAKAGE" in capsys.readouterr().out


def test_the_tasks_a_learning_run_draws_from_are_checked_before_it_runs(tmp_path):
    from lumos_gym.conversion.leakage import leakage_summary, training_from_envs
    from lumos_gym.workflows.improve import check_train_tasks

    suite = tmp_path / "mine.json"
    suite.write_text(json.dumps({"name": "mine", "envs": [
        {"env": "lumos/MathWord-v0", "kwargs": {"split": "test", **MATH}},
        {"env": "lumos/WorldQA-v0", "kwargs": {"split": "test", **WORLD}},
        {"env": "lumos/Scenes-v0", "kwargs": {"split": "test", **SCENES}}]}))
    train = [("lumos/MathWord-v0", {"split": "train", **MATH}),
             ("lumos/WorldQA-v0", {"split": "train", **WORLD})]
    data = training_from_envs(train, limit=3)
    assert sorted(i.split("/")[0] for i in data.ids) == ["mathword"] * 3 + ["worldqa"]
    assert data.splits == train
    report = check_train_tasks(train, tmp_path / "run", suite=str(suite), limit=3)
    assert report["clean"] and report["suite"] == str(suite)
    assert sorted(report["envs"]) == ["lumos/MathWord-v0", "lumos/WorldQA-v0"]  # its envs only
    assert report["envs"]["lumos/WorldQA-v0"]["train_tasks"] == 1  # entities were compared
    assert json.loads((tmp_path / "run" / "leakage.json").read_text()) == report
    assert leakage_summary(report) == {"suite": str(suite), "clean": True, "test_tasks": 5,
                                       "shared_tasks": 0}
    # training on the test split itself shares every task: refused before anything runs
    with pytest.raises(LumosGymError, match="share test tasks of the"):
        check_train_tasks([("lumos/MathWord-v0", {"split": "test", **MATH})],
                          tmp_path / "leaky", suite=str(suite))
    leaky = json.loads((tmp_path / "leaky" / "leakage.json").read_text())
    assert leaky["total"]["shared_tasks"] == 4 and leaky["clean"] is False
    assert check_train_tasks(train, tmp_path / "skip", suite=None) is None
    assert not (tmp_path / "skip").exists()
