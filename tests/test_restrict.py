"""Test suites leave out the development suite's tasks, and ``lumos-gym restrict`` brings a
results folder to its suite's current file (issue 35: a development suite apart from the test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.plan import plan_env
from lumos_gym.evaluation.restrict import restrict_folder
from lumos_gym.evaluation.suites import get_suite, load_suite, suite_entries
from lumos_gym.leaderboard.render import validate

MATH = {"env": "lumos/MathWord-v0", "kwargs": {"split": "test", "levels": [1], "num_tasks": 3}}


def _suite(path: Path, **fields) -> Path:
    path.write_text(json.dumps({"name": path.stem, "description": "t", "envs": [MATH], **fields}))
    return path


def test_every_development_suite_shares_no_task_with_the_test_suites():
    """The demo suite's tasks, on which agents were diagnosed, are no test suite's tasks."""
    test_ids: dict[str, set[str]] = {}
    for name in ("compare", "learning", "generalisation"):
        assert get_suite(name).role == "test"
        assert set(get_suite(name).exclude) == {"offline", "reproduce-tests"}
        for entry in suite_entries(suite=name):
            test_ids.setdefault(entry.env_id, set()).update(plan_env(entry).provenance["task_ids"])
    for name in ("offline", "reproduce-tests", "math", "qa", "web", "games", "multimodal", "code",
                 "validation"):
        assert get_suite(name).role in ("development", "validation")
        shared = {e.env_id: set(plan_env(e).provenance["task_ids"]) & test_ids.get(e.env_id, set())
                  for e in suite_entries(suite=name)}
        assert sum(len(s) for s in shared.values()) == 0, (name, shared)
    # compare keeps its 1,118 tasks but the 132 ids of the development suites
    assert sum(len(ids) for ids in test_ids.values()) == 986


def test_the_reproduce_tests_suite_is_reproduces_own_test_suite():
    """If reproduce scores on other tasks, they must be added to the suite compare excludes."""
    from lumos_gym.workflows.reproduce import TEST_SUITE

    entries = {e.env_id: e for e in get_suite("reproduce-tests").entries}
    assert set(entries) == {t.env_id for t in TEST_SUITE}
    for test_env in TEST_SUITE:
        entry = entries[test_env.env_id]
        if entry.task_ids is None:
            assert (dict(entry.kwargs), entry.limit) == (dict(test_env.kwargs), test_env.limit)
        else:  # ALFWorld: reproduce's tasks now and before 8bbc47a, by id
            env_ids = plan_env(type(entry)(test_env.env_id, test_env.kwargs, test_env.limit))
            assert set(env_ids.provenance["task_ids"]) <= set(entry.task_ids)


def test_a_suite_role_must_be_known(tmp_path):
    with pytest.raises(EvaluationError, match="role 'final' is not one of test, validation"):
        load_suite(_suite(tmp_path / "s.json", role="final"))
    with pytest.raises(EvaluationError, match="exclude must be a list"):
        load_suite(_suite(tmp_path / "s.json", exclude="offline"))


def test_restrict_drops_what_the_suite_now_excludes_and_validates(tmp_path, capsys):
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps({"name": "dev", "description": "d", "role": "development", "envs": [
        {**MATH, "kwargs": {**MATH["kwargs"], "num_tasks": 1}}]}))
    suite = _suite(tmp_path / "mine.json")
    out = tmp_path / "run"
    evaluate(RunConfig("oracle", suite=str(suite), out=out, progress=False))
    before = (out / "episodes.jsonl").read_text().splitlines()
    assert len(before) == 3
    _suite(suite, role="test", exclude=[str(dev)])  # the file changes: dev's task is left out
    assert validate([out], suite=str(suite))[1]  # another version of the suite file
    assert restrict_folder(out, str(suite), write=False).dropped_count == 1
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3  # a dry run writes nothing
    assert main(["restrict", str(out), "--suite", str(suite)]) == 0
    assert "kept 2 episodes of suite mine, dropped 1 (MathWord-v0 1)" in capsys.readouterr().out
    run = json.loads((out / "run.json").read_text())
    assert run["plan"]["episodes"] == 2
    assert run["restricted"][0]["dropped"] == {"lumos/MathWord-v0": 1}
    assert [k.split("|")[2] for k in run["restricted"][0]["dropped_keys"]] == run["envs"][0][
        "excluded"]
    assert run["envs"][0]["excluded"] and len(run["envs"][0]["task_ids"]) == 2
    assert validate([out], suite=str(suite)) == (1, [])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["episodes"] == 2
    # restricting never adds episodes: a folder without a planned one is refused
    lines = (out / "episodes.jsonl").read_text().splitlines()
    (out / "episodes.jsonl").write_text(lines[0] + "\n")
    with pytest.raises(EvaluationError, match="1 episode.s. that suite mine plans are not in it"):
        restrict_folder(out, str(suite))
    with pytest.raises(EvaluationError, match="a run of mine, not of suite compare"):
        restrict_folder(out, "compare")


def test_the_leakage_check_reads_the_test_suite_without_its_excluded_tasks():
    from lumos_gym.conversion.leakage import eval_tasks

    checked = {spec.env_id: spec for spec in eval_tasks(suite_entries(suite="learning"))}
    assert len(checked["lumos/MathWord-v0"].exclude) == 50  # reproduce's 10 a level
    assert "worldqa/test/0/0" in checked["lumos/WorldQA-v0"].exclude  # offline's first
