"""Bad paths, files and flags on the command line: one error line and status 2, no traceback."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\xff\xfe"
ORACLE = ["evaluate", "--agent", "oracle", "--env", "GSM8K-v0", "--limit", "2", "--no-progress"]


def one_error_line(capsys, args, needle):
    """Run the command line: it must fail with one error line holding ``needle``."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"lumos-gym {args[0]}: error: ") and needle in err, err


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished oracle run of two episodes."""
    out = tmp_path_factory.mktemp("run")
    assert main([*ORACLE, "--out", str(out)]) == 0
    return out


@pytest.fixture
def read_only(tmp_path, monkeypatch):
    """A folder nobody may write in (also for root, whom the mode does not stop)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        not (Path(path) == folder and mode & os.W_OK) and access(path, mode, **kw)))
    yield folder
    folder.chmod(0o755)


@pytest.mark.parametrize("where", ["file", "under a file", "read-only"])
def test_an_out_that_cannot_be_written(where, tmp_path, read_only, run, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    out, says = {
        "file": (a_file, f"{a_file} is a file, not a folder"),
        "under a file": (a_file / "sub", f"{a_file} is a file, not a folder"),
        "read-only": (read_only / "sub", f"{read_only} is not writable"),
    }[where]
    one_error_line(capsys, [*ORACLE, "--out", str(out)], says)
    one_error_line(capsys, ["leaderboard", str(run), "--out", str(out)], says)
    one_error_line(capsys, ["leaderboard", str(run), "--format", "html", "--out", str(out)], says)
    one_error_line(capsys, ["leaderboard", "--compare", str(run), str(run), "--out",
                            str(out / "compare.md")], says)


def test_an_operating_system_error_names_its_file(tmp_path, run, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    one_error_line(capsys, ["merge", str(run), "--out", str(a_file)], f"{a_file}: ")


def test_files_that_are_not_text(tmp_path, capsys):
    fake = tmp_path / "fake.png"
    fake.write_bytes(PNG)
    one_error_line(capsys, ["export", str(fake), "--format", "react", "--out",
                            str(tmp_path / "x.jsonl")], "no annotation could be read")
    one_error_line(capsys, ["train", "--data", str(fake), "--out", str(tmp_path / "t")],
                   "is not text")
    one_error_line(capsys, ["evaluate", "--agent", "oracle", "--suite", str(fake)],
                   "is not valid JSON")
    one_error_line(capsys, [*ORACLE, "-k", f"source={fake}"], "not UTF-8 text")


def test_a_folder_is_not_a_source_nor_a_suite(tmp_path, capsys):
    one_error_line(capsys, [*ORACLE, "-k", f"source={tmp_path}"], f"{tmp_path} is a folder")
    one_error_line(capsys, ["evaluate", "--agent", "oracle", "--suite", str(tmp_path)],
                   f"{tmp_path} is a folder")


def test_a_negative_seed_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main([*ORACLE, "--seed", "-1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --seed: must be at least 0" in err
    with pytest.raises(EvaluationError, match="--seed must be at least 0, got -1"):
        evaluate(RunConfig("oracle", envs=["GSM8K-v0"], seed=-1, out=tmp_path, progress=False))
    assert not (tmp_path / "episodes.jsonl").exists()


def test_resume_refuses_a_line_that_is_not_utf8(tmp_path, run, capsys):
    out = tmp_path / "run"
    shutil.copytree(run, out)
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    (out / "episodes.jsonl").write_bytes(lines[0].replace(b"gsm8k", b"gsm\xff8k", 1) + lines[1])
    one_error_line(capsys, [*ORACLE, "--out", str(out), "--resume"],
                   "episodes.jsonl:1 is not an episode record ('utf-8' codec can't decode")


def test_resume_drops_a_copied_line_with_a_warning(tmp_path, run, capsys):
    out = tmp_path / "run"
    shutil.copytree(run, out)
    episodes = out / "episodes.jsonl"
    original = episodes.read_bytes()
    episodes.write_bytes(original + original.splitlines(keepends=True)[0])
    assert main([*ORACLE, "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "episodes.jsonl:3: a second record of" in err
    assert "dropped from the file" in err
    assert episodes.read_bytes() == original
    assert main(["leaderboard", "--validate", str(out)]) == 0
