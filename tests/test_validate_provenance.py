"""``leaderboard --validate`` on a board: one scoring commit, clean checkouts, round limits.

One real ``evaluate`` run (the oracle on two GSM8K tasks) is copied into small boards whose
``run.json`` is then edited by hand: another commit, a dirty flag, an earlier session, a
rescore, no ``round_limits``. Each refusal has a test, and so has the flag that lifts it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lumos_gym.cli import main
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.leaderboard.render import scoring_passes, validate

OTHER = "b" * 40
LATER = "c" * 40
DELETE = object()


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One results folder written by evaluate (its run.json: this checkout's commit, clean)."""
    out = tmp_path_factory.mktemp("made") / "oracle"
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=2, out=out, progress=False))
    return out


def _board(made: Path, tmp_path: Path, n: int = 3) -> list[Path]:
    folders = []
    for i in range(n):
        folder = tmp_path / f"run{i}"
        shutil.copytree(made, folder)
        folders.append(folder)
    return folders


def _edit(folder: Path, **changes) -> dict:
    run = json.loads((folder / "run.json").read_text())
    for key, value in changes.items():
        if value is DELETE:
            del run[key]
        else:
            run[key] = value
    (folder / "run.json").write_text(json.dumps(run))
    return run


def _commit(folder: Path) -> str:
    return json.loads((folder / "run.json").read_text())["git"]["commit"]


def _validate(folders, *flags) -> int:
    return main(["leaderboard", "--validate", *map(str, folders), *flags])


def test_evaluate_records_round_limits_and_a_board_at_one_commit_is_valid(made, tmp_path):
    run = json.loads((made / "run.json").read_text())
    assert set(run["round_limits"]) == {"task_types", "datasets"}
    folders = _board(made, tmp_path)
    assert validate(folders) == (3, [])
    assert scoring_passes(run) == [("run", run["git"]["commit"], False)]


def test_mixed_commits_are_refused_and_the_odd_folder_named(made, tmp_path, capsys):
    a, b, c = _board(made, tmp_path)
    _edit(c, git={"commit": OTHER, "dirty": False})
    problems = validate([a, b, c])[1]
    assert len(problems) == 1
    assert problems[0].startswith(f"{c / 'run.json'}: scored at {OTHER[:12]} (run)")
    assert f"the board's commit is {_commit(a)[:12]}, which scored 2 of its 3" in problems[0]
    assert _validate([a, b, c]) == 2
    assert "--allow-mixed-commits" in capsys.readouterr().out
    assert _validate([a, b, c], "--allow-mixed-commits") == 0


def test_two_folders_at_two_commits_are_both_named(made, tmp_path):
    a, b = _board(made, tmp_path, 2)
    _edit(b, git={"commit": OTHER, "dirty": False})
    problems = validate([a, b])[1]
    assert [p.split(":")[0] for p in problems] == [str(a / "run.json"), str(b / "run.json")]
    assert all("were scored at 2 commits" in p for p in problems)
    assert validate([a, b], allow_mixed_commits=True)[1] == []


def test_a_dirty_checkout_is_refused_unless_allowed(made, tmp_path):
    a, b, c = _board(made, tmp_path)
    _edit(b, git={"commit": _commit(a), "dirty": True})
    problems = validate([a, b, c])[1]
    assert problems == [f"{b / 'run.json'}: scored from a dirty checkout (run at "
                        f"{_commit(a)[:12]}: the code differed from its commit); score it again "
                        "from a clean checkout (lumos-gym rescore), or pass --allow-dirty"]
    assert _validate([a, b, c]) == 2
    assert _validate([a, b, c], "--allow-dirty") == 0
    # one folder alone is refused too
    assert validate([b])[1] == problems


def test_a_session_at_another_commit_is_refused(made, tmp_path):
    a, b, c = _board(made, tmp_path)
    _edit(c, sessions=[{"started": "2025-01-01T00:00:00+0000",
                        "git": {"commit": OTHER, "dirty": False}}])
    problems = validate([a, b, c])[1]
    assert len(problems) == 1 and problems[0].startswith(str(c / "run.json"))
    assert f"{OTHER[:12]} (session 1)" in problems[0]
    assert f"{_commit(a)[:12]} (run)" in problems[0]
    assert validate([c])[1]  # one folder played at two commits: refused alone as well
    assert validate([a, b, c], allow_mixed_commits=True)[1] == []
    # a dirty earlier session is a dirty scoring pass
    _edit(c, sessions=[{"git": {"commit": _commit(a), "dirty": True}}])
    assert ["session 1" in p and "dirty" in p for p in validate([a, b, c])[1]] == [True]
    assert validate([a, b, c], allow_dirty=True)[1] == []


def test_the_scoring_commit_of_a_rescored_folder_is_its_rescore(made, tmp_path, capsys):
    a, b, c = _board(made, tmp_path)
    envs = [{"env_id": "lumos/GSM8K-v0", "kwargs": {}, "episodes": 2}]
    _edit(c, rescored=[{"git": {"commit": OTHER, "dirty": False}, "envs": envs}])
    problems = validate([a, b, c])[1]
    assert len(problems) == 1
    assert problems[0].startswith(f"{c / 'run.json'}: scored at {OTHER[:12]} (rescore 1),")
    assert _validate([a, b, c]) == 2
    capsys.readouterr()
    assert _validate([a, b, c], "--allow-mixed-commits") == 0
    # every folder rescored at one commit: one board, whatever commit played the episodes
    for folder in (a, b):
        _edit(folder, rescored=[{"git": {"commit": OTHER, "dirty": False}, "envs": envs}])
    assert validate([a, b, c]) == (3, [])
    # the last rescore counts; a dirty run under a clean rescore is not dirty any more
    _edit(a, git={"commit": LATER, "dirty": True},
          rescored=[{"git": {"commit": LATER, "dirty": True}, "envs": envs},
                    {"git": {"commit": OTHER, "dirty": False}, "envs": envs}])
    assert validate([a, b, c]) == (3, [])
    # a rescore of another env leaves this env scored by the run
    _edit(b, rescored=[{"git": {"commit": OTHER, "dirty": False},
                        "envs": [{"env_id": "lumos/SVAMP-v0", "kwargs": {}}]}])
    problems = validate([a, b, c])[1]
    assert len(problems) == 1 and problems[0].startswith(str(b / "run.json"))
    assert f"scored at {_commit(made)[:12]} (run)" in problems[0]


def test_missing_round_limits_are_refused_unless_allowed(made, tmp_path):
    a, b, c = _board(made, tmp_path)
    _edit(b, round_limits=DELETE)
    problems = validate([a, b, c])[1]
    assert len(problems) == 1 and problems[0].startswith(f"{b / 'run.json'}: no round_limits")
    assert _validate([a, b, c]) == 2
    assert _validate([a, b, c], "--allow-missing-round-limits") == 0


def test_a_run_without_a_recorded_commit_is_named(made, tmp_path):
    a, b, c = _board(made, tmp_path)
    _edit(c, git=None)  # a run outside a git checkout
    problems = validate([a, b, c])[1]
    assert len(problems) == 1
    assert problems[0].startswith(f"{c / 'run.json'}: scored at no commit recorded (run)")
    assert not any("no commit recorded" in p for p in validate([a, b])[1])
