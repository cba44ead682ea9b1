"""``lumos-gym rescore``: results folders scored again with today's scorers, and what run.json
records of the scorer that ran (issue 34)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.rescore import rescore_folder
from lumos_gym.evaluation.results import read_results


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]


def _write(folder: Path, records: list[dict]) -> None:
    (folder / "episodes.jsonl").write_text(
        "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory) -> Path:
    """The oracle on 3 MathWord tasks and 2 WebShop tasks (gold actions: every reward known)."""
    out = tmp_path_factory.mktemp("rescore") / "oracle"
    evaluate(RunConfig("oracle", envs=["MathWord-v0"], limit=3, out=out, progress=False))
    web = out.parent / "web"
    evaluate(RunConfig("oracle", envs=["WebShop-v0"], limit=2, out=web, progress=False))
    # one folder holding both envs' episodes and both runs' env records
    run = json.loads((out / "run.json").read_text())
    run["envs"] += json.loads((web / "run.json").read_text())["envs"]
    (out / "run.json").write_text(json.dumps(run))
    _write(out, _records(out) + _records(web))
    return out


@pytest.fixture
def folder(oracle_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("episodes.jsonl", "run.json"):
        (copy / name).write_bytes((oracle_run / name).read_bytes())
    return copy


def test_run_json_names_the_scorer_of_each_env(oracle_run):
    envs = {e["env_id"]: e for e in json.loads((oracle_run / "run.json").read_text())["envs"]}
    assert envs["lumos/MathWord-v0"]["scorer"] == "math/exact"
    assert envs["lumos/WebShop-v0"]["scorer"] == "webshop/official"


def test_rescoring_restores_scores_an_old_scorer_gave(folder):
    records = _records(folder)
    original = {r["task_id"]: (r["reward"], r["metrics"]) for r in records}
    assert all(reward == 1.0 for reward, _ in original.values())  # the oracle wins every task
    for r in records:  # as an older, wrong scorer might have written them
        r["reward"] = 0.25
        r["metrics"] = {**r["metrics"], r["primary_metric"]: 0.25}
    _write(folder, records)
    report = rescore_folder(folder)
    assert report.changed == len(records) and report.diverged == 0
    rescored = _records(folder)
    after = {r["task_id"]: (r["reward"], r["metrics"]) for r in rescored}
    assert after == original
    # nothing else of a record changes: every field as written (its key too), in file order
    assert [{k: v for k, v in r.items() if k not in ("reward", "metrics")} for r in rescored] \
        == [{k: v for k, v in r.items() if k not in ("reward", "metrics")} for r in records]
    assert all("key" in r for r in rescored)
    run = json.loads((folder / "run.json").read_text())
    assert run["rescored"][-1]["changed"] == len(records)
    assert {e["scorer"] for e in run["rescored"][-1]["envs"]} == {"math/exact",
                                                                    "webshop/official"}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["overall"]["mean"] == pytest.approx(1.0)


def test_a_dry_run_writes_nothing(folder):
    before = (folder / "episodes.jsonl").read_bytes()
    records = _records(folder)
    records[0]["reward"] = 0.0
    _write(folder, records)
    tampered = (folder / "episodes.jsonl").read_bytes()
    report = rescore_folder(folder, write=False)
    assert report.changed == 1 and (folder / "episodes.jsonl").read_bytes() == tampered
    assert before != tampered and not (folder / "summary.json").exists()


def test_a_replay_that_differs_keeps_the_recorded_metrics_and_fails_the_command(folder, capsys):
    records = _records(folder)
    web = next(r for r in records if r["env_id"] == "lumos/WebShop-v0")
    step = next(t for t in web["turns"] if "action" in t)
    step["observation"] += " (not what the env said)"
    web["reward"] = 0.5
    _write(folder, records)
    assert main(["rescore", str(folder), "--env", "WebShop-v0"]) == 1
    out = capsys.readouterr().out
    assert "1 diverged" in out and "the observation differs" in out
    kept = next(r for r in _records(folder) if r["task_id"] == web["task_id"])
    assert kept["reward"] == 0.5  # never silently rescored


def test_a_gzipped_published_folder_is_rewritten_gzipped(folder):
    records = _records(folder)
    records[0]["reward"] = 0.0
    (folder / "episodes.jsonl").unlink()
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    (folder / "episodes.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    assert rescore_folder(folder, envs=["MathWord-v0"]).changed == 1
    again = read_results(folder).records
    assert all(r["reward"] == 1.0 for r in again.values())
    assert not (folder / "episodes.jsonl").exists()


def test_unknown_env_filter_is_a_clear_error(folder):
    with pytest.raises(EvaluationError, match="no episodes of lumos/GSM8K-v0"):
        rescore_folder(folder, envs=["GSM8K-v0"])


def test_resume_refuses_episodes_scored_by_another_scorer(tmp_path, capsys):
    out = tmp_path / "run"
    config = RunConfig("oracle", envs=["MathWord-v0"], limit=2, out=out, progress=False)
    evaluate(config)
    records = _records(out)
    _write(out, records[:1])  # one episode left to run
    run = json.loads((out / "run.json").read_text())
    run["envs"][0]["scorer"] = "math/an-older-rule"
    (out / "run.json").write_text(json.dumps(run))
    resumed = RunConfig("oracle", envs=["MathWord-v0"], limit=2, out=out, progress=False,
                        resume=True)
    with pytest.raises(EvaluationError, match="lumos-gym rescore"):
        evaluate(resumed)
    del run["envs"][0]["scorer"]  # a folder written before scorers were recorded
    (out / "run.json").write_text(json.dumps(run))
    evaluate(resumed)
    assert "does not record the scorer" in capsys.readouterr().err
    assert len(_records(out)) == 2


def test_a_last_observation_showing_the_old_reward_is_not_a_divergence(folder):
    """WebShop binds the purchase's reward to the last variable: an old scorer's reward shows
    there, and only there may the replay differ from the record."""
    records = _records(folder)
    web = next(r for r in records if r["env_id"] == "lumos/WebShop-v0")
    last = [t for t in web["turns"] if "action" in t][-1]
    assert last["observation"].endswith("= 1.0")
    last["observation"] = last["observation"].removesuffix("1.0") + "0.25"
    web["reward"], web["metrics"]["reward"] = 0.25, 0.25
    _write(folder, records)
    report = rescore_folder(folder, envs=["WebShop-v0"])
    assert (report.changed, report.diverged) == (1, 0)
    rescored = next(r for r in _records(folder) if r["task_id"] == web["task_id"])
    assert rescored["reward"] == 1.0
    # what the agent saw stays as recorded
    assert [t for t in rescored["turns"] if "action" in t][-1]["observation"].endswith("0.25")
    # a second pass reads the rescored record (reward 1.0) beside the observation the agent
    # saw (0.25): still the same episode, nothing to change
    again = rescore_folder(folder, envs=["WebShop-v0"])
    assert (again.changed, again.diverged) == (0, 0)
    # a last observation that differs elsewhere is still a divergence
    records = _records(folder)
    web = next(r for r in records if r["task_id"] == rescored["task_id"])
    last = [t for t in web["turns"] if "action" in t][-1]
    last["observation"] = "another page\n" + last["observation"]
    _write(folder, records)
    assert rescore_folder(folder, envs=["WebShop-v0"], write=False).diverged == 1
