"""Round limits: recovered from the commit that played a folder, and warned about on a board.

The recovery runs on a real git repository made in the test, whose small ``lumos_gym`` package
defines the limits table at two commits (web 10, then web 15 with a WebShop limit of 5); the
child process imports the commit's package, never the lumos-gym under test.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.round_limits import (
    limits_at_commit,
    played_commit,
    recover_round_limits,
)
from lumos_gym.leaderboard.render import load_board
from lumos_gym.leaderboard.render.markdown import render_markdown

TABLES = {
    "old": 'LUMOS_ROUNDS = {"web": 10, "math": 8}\n',
    "new": 'LUMOS_ROUNDS = {"web": 15, "math": 8}\nDATASET_ROUNDS = {"webshop": 5}\n',
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@example.org", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A git repository with a two-commit ``lumos_gym`` package: the old limits, then new."""
    root = tmp_path_factory.mktemp("repo")
    _git(root, "init", "-q")
    agents = root / "lumos_gym" / "agents"
    agents.mkdir(parents=True)
    (root / "lumos_gym" / "__init__.py").write_text("")
    (agents / "__init__.py").write_text("")
    commits = {}
    for name, table in TABLES.items():
        (agents / "lumos.py").write_text(table)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", name)
        commits[name] = _git(root, "rev-parse", "HEAD")
    return root, commits


def _run_json(folder: Path, **run) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def test_the_limits_are_those_of_the_commit_asked(repo):
    root, commits = repo
    assert limits_at_commit(commits["old"], repo=root) == {
        "task_types": {"math": 8, "web": 10}, "datasets": {}}
    assert limits_at_commit(commits["new"], repo=root) == {
        "task_types": {"math": 8, "web": 15}, "datasets": {"webshop": 5}}


def test_a_folder_gets_its_played_commits_limits_and_says_how(repo, tmp_path):
    root, commits = repo
    folder = _run_json(tmp_path / "row", git={"commit": commits["old"], "dirty": False},
                       sessions=[{"git": {"commit": commits["old"], "dirty": False}}])
    assert recover_round_limits(folder, repo=root, write=False)["round_limits"][
        "task_types"]["web"] == 10
    assert "round_limits" not in json.loads((folder / "run.json").read_text())  # dry run
    record = recover_round_limits(folder, repo=root)
    run = json.loads((folder / "run.json").read_text())
    assert run["round_limits"] == {"task_types": {"math": 8, "web": 10}, "datasets": {}}
    assert run["round_limits_recovered"]["from_commit"] == commits["old"] == record["from_commit"]
    assert recover_round_limits(folder, repo=root) is None  # recorded: nothing to do


@pytest.mark.parametrize(("run", "message"), [
    ({"git": {"commit": "a" * 40, "dirty": True}}, "differed from commit aaaaaaaaaaaa"),
    ({"git": {"commit": "a" * 40, "dirty": False},
      "sessions": [{"git": {"commit": "b" * 40, "dirty": False}}]}, "played at 2 commits"),
    ({"git": None}, "run recorded no commit"),
    ({"git": {"commit": "a" * 40}}, "did not record whether its checkout differed"),
])
def test_what_cannot_be_known_is_refused(run, message):
    with pytest.raises(EvaluationError, match=message):
        played_commit(run)


def test_an_unknown_commit_or_a_folder_without_git_is_refused(repo, tmp_path):
    root, _ = repo
    with pytest.raises(EvaluationError, match="is not in"):
        limits_at_commit("d" * 40, repo=root)
    with pytest.raises(EvaluationError, match="not a git checkout"):
        limits_at_commit("d" * 40, repo=tmp_path)
    folder = _run_json(tmp_path / "dirty", git={"commit": "d" * 40, "dirty": True})
    with pytest.raises(EvaluationError, match="cannot recover its round limits"):
        recover_round_limits(folder, repo=root)


def test_rescore_recovers_them_from_this_checkout(tmp_path, capsys):
    checkout = Path(__file__).resolve().parents[1]
    if not (checkout / ".git").exists():
        pytest.skip("not run from a git checkout of lumos-gym")
    from lumos_gym.evaluation.evaluate import RunConfig, evaluate  # the real run, only here

    out = tmp_path / "oracle"
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=2, out=out, progress=False))
    run = json.loads((out / "run.json").read_text())
    head = _git(checkout, "rev-parse", "HEAD")
    del run["round_limits"]
    run["git"] = {"commit": head, "dirty": False}
    (out / "run.json").write_text(json.dumps(run))
    assert main(["rescore", "--recover-round-limits", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"recorded the round limits of {head[:12]}: " in printed
    recovered = json.loads((out / "run.json").read_text())
    assert recovered["round_limits"] == limits_at_commit(head)
    assert "rescored" not in recovered  # it records the limits; it scores nothing


# ---------------------------------------------------------------------------- the board
def _row(root: Path, name: str, limits: dict | None, *, max_rounds: int | None = None) -> Path:
    folder = root / name
    run = {"agent": {"name": name}, "git": {"commit": "0" * 40, "dirty": False},
           "fingerprint": {"agent": name}, "decoding": {"max_rounds": max_rounds}}
    if limits is not None:
        run["round_limits"] = limits
    _run_json(folder, **run)
    lines = [{"env_id": env, "task_id": f"{dataset}/{i}", "task_type": task_type, "seed": 0,
              "agent": name, "status": "completed", "reward": float(i % 2)}
             for env, dataset, task_type in (("lumos/WebShop-v0", "webshop", "web"),
                                             ("lumos/MathWord-v0", "mathword", "math"))
             for i in range(6)]
    (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


def _limit_lines(board) -> list[str]:
    return [w for w in board.warnings if "round limits" in w]  # not: no summary.json


def test_a_board_warns_where_rows_ran_under_other_limits(tmp_path):
    old = {"task_types": {"web": 10, "math": 8}, "datasets": {}}
    new = {"task_types": {"web": 15, "math": 8}, "datasets": {"webshop": 5}}
    board = load_board([_row(tmp_path, "a", old), _row(tmp_path, "b", new),
                        _row(tmp_path, "c", new)])
    assert _limit_lines(board) == [
        "WebShop-v0: rows ran under different round limits (10: a; 5: b, c); their scores "
        "there are not of the same game"]
    assert "- WebShop-v0: rows ran under different round limits" in render_markdown(board)
    fixed = load_board([_row(tmp_path, "d", new), _row(tmp_path, "e", None, max_rounds=5)])
    assert _limit_lines(fixed) == [  # --max-rounds 5 is e's limit everywhere: WebShop's as d's
        "MathWord-v0: rows ran under different round limits (8: d; 5: e); their scores "
        "there are not of the same game"]
    unknown = load_board([_row(tmp_path, "f", new), _row(tmp_path, "g", None)])
    assert len(_limit_lines(unknown)) == 1
    assert _limit_lines(unknown)[0].startswith("round limits not recorded for g")


def test_a_folder_whose_limits_cannot_be_known_is_named_and_left(tmp_path, capsys):
    from lumos_gym.evaluation.evaluate import RunConfig, evaluate  # the real run, only here

    out = tmp_path / "oracle"
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=2, out=out, progress=False))
    run = json.loads((out / "run.json").read_text())
    del run["round_limits"]
    run["git"] = {"commit": "e" * 40, "dirty": True}
    (out / "run.json").write_text(json.dumps(run))
    before = (out / "run.json").read_text()
    assert main(["rescore", "--recover-round-limits", str(out)]) == 1
    captured = capsys.readouterr()
    assert "cannot recover its round limits" in captured.err
    assert "1 folder(s) left without round limits" in captured.err
    assert (out / "run.json").read_text() == before
    assert main(["rescore", "--recover-round-limits", "--env", "GSM8K-v0", str(out)]) == 2
    assert "give one or the other" in capsys.readouterr().err
