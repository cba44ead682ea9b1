"""Default results folders: one per run, ``results/latest``, resuming it, and the leaderboard."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.folders import (
    default_out,
    follow_latest,
    point_latest,
    run_label,
)
from lumos_gym.leaderboard.render import load_board


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder: ``results/`` is made inside it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, *args: str) -> int:
    code = main(["evaluate", "--agent", "oracle", "--no-progress", *args])
    capsys.readouterr()
    return code


def test_folder_names_say_agent_suite_and_time_and_never_repeat(tmp_path):
    now = time.strptime("2025-03-04 05:06:07", "%Y-%m-%d %H:%M:%S")
    first = default_out("lumos-i+gold-plan", "math", root=tmp_path, now=now)
    assert first == tmp_path / "lumos-i+gold-plan-math-20250304-050607"
    first.mkdir()
    assert default_out("lumos-i+gold-plan", "math", root=tmp_path, now=now).name.endswith("-2")
    assert default_out("my agent/v2", "x", root=tmp_path, now=now).name.startswith("my-agent-v2-x-")
    assert run_label("qa", ["GSM8K-v0"]) == "qa"
    assert run_label(None, ["lumos/GSM8K-v0", "mod:lumos/SVAMP-v0"]) == "GSM8K-v0+SVAMP-v0"
    assert run_label(None, ["A-v0", "B-v0", "C-v0", "D-v0", "E-v0"]) == "A-v0+B-v0+3"


def test_two_runs_without_out_land_in_two_folders_and_latest_names_the_last(workdir, capsys):
    assert _run(capsys, "--suite", "math", "--limit", "1") == 0
    assert _run(capsys, "--env", "MathWord-v0", "--limit", "2") == 0
    folders = sorted(p.name for p in (workdir / "results").iterdir() if p.name != "latest")
    assert len(folders) == 2
    assert folders[0].startswith("oracle-MathWord-v0-") and folders[1].startswith("oracle-math-")
    latest = workdir / "results" / "latest"
    assert latest.is_symlink() and os.readlink(latest).startswith("oracle-MathWord-v0-")
    assert (latest / "summary.json").is_file()
    # the leaderboard reads each run once: results/* holds the latest link beside its run
    board = load_board(sorted((workdir / "results").iterdir()))
    assert sorted(e.name for e in board.entries) == folders
    assert [e.name for e in load_board([latest]).entries] == [os.readlink(latest)]
    # inside one folder given whole, the link is passed over (the two runs of one
    # configuration are one row, as the folders of one argument always are)
    board = load_board([workdir / "results"])
    assert sorted(d.path.name for e in board.entries for d in e.dirs) == folders


def test_resume_without_out_continues_the_latest_run(workdir, capsys):
    # nothing to resume yet: a new run, which latest then names
    assert _run(capsys, "--env", "MathWord-v0", "--limit", "2", "--resume") == 0
    folder = follow_latest(workdir / "results" / "latest")
    episodes = folder / "episodes.jsonl"
    episodes.write_text(episodes.read_text().splitlines(keepends=True)[0])  # killed
    result = evaluate(RunConfig("oracle", envs=["MathWord-v0"], limit=2, resume=True,
                                progress=False))
    assert result.out.resolve() == folder.resolve() and result.resumed == 1
    assert len(episodes.read_text().splitlines()) == 2
    assert len(list((workdir / "results").iterdir())) == 2  # the run and latest, nothing new
    # another run's configuration is refused, as with an explicit --out
    with pytest.raises(EvaluationError, match="outside this run's plan"):
        evaluate(RunConfig("oracle", envs=["SVAMP-v0"], limit=1, resume=True, progress=False))


def test_an_explicit_out_does_not_move_latest(workdir, capsys):
    assert _run(capsys, "--env", "MathWord-v0", "--limit", "1") == 0
    before = os.readlink(workdir / "results" / "latest")
    assert _run(capsys, "--env", "MathWord-v0", "--limit", "1", "--out", "mine") == 0
    assert os.readlink(workdir / "results" / "latest") == before


def test_a_text_file_pointer_is_followed_where_links_are_not_made(workdir, monkeypatch):
    run = workdir / "results" / "oracle-x-1"
    evaluate(RunConfig("oracle", envs=["MathWord-v0"], limit=1, out=run, progress=False))

    def no_links(*args, **kwargs):
        raise OSError("symbolic links are not allowed here")

    monkeypatch.setattr(os, "symlink", no_links)
    pointer = point_latest(run)
    assert pointer is not None and not pointer.is_symlink()
    assert pointer.read_text() == "oracle-x-1\n" and follow_latest(pointer) == run
    board = load_board(sorted((workdir / "results").iterdir()))
    assert [e.name for e in board.entries] == ["oracle-x-1"]
    assert follow_latest(Path("elsewhere")) == Path("elsewhere")


def test_a_results_folder_called_latest_is_never_replaced(workdir, capsys):
    assert _run(capsys, "--env", "MathWord-v0", "--limit", "1", "--out", "results/latest") == 0
    assert _run(capsys, "--env", "MathWord-v0", "--limit", "1") == 0
    latest = workdir / "results" / "latest"
    assert latest.is_dir() and not latest.is_symlink() and (latest / "run.json").is_file()
