"""The ``lumos-gym`` verbs envs, check, play and data, through ``main`` as a shell would call it."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from lumos_gym.cli import main
from lumos_gym.envs import datasets as data


def test_envs_lists_the_math_envs(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for env_id in ("lumos/GSM8K-v0", "lumos/SVAMP-v0", "lumos/ASDiv-v0", "lumos/MathWord-v0"):
        assert env_id in out
    assert "Calculator, SetEquation" in out and "bundled" in out


def test_check_one_env(capsys):
    assert main(["check", "GSM8K-v0", "--replay-limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "lumos/GSM8K-v0: ok" in out and "oracle 3/3 at full reward" in out
    assert out.startswith("lumos/GSM8K-v0: ok")  # the render check's frame is not printed


def test_unknown_env_is_one_line(capsys):
    assert main(["check", "GSM9K-v0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GSM8K-v0" in err  # the suggestion


@pytest.mark.parametrize(("args", "message"), [
    (["check", "nomod:lumos/Tiny-v0"], "cannot import 'nomod' for 'nomod:lumos/Tiny-v0'"),
    (["evaluate", "--agent", "oracle", "--env", "nomod:lumos/Tiny-v0"], "cannot import 'nomod'"),
    (["check", "GSM8K-v0", "-k", "foo=1"], "cannot make lumos/GSM8K-v0 with {'foo': 1}: "),
    (["play", "GSM8K-v0", "-k", "foo=1"], "unexpected keyword argument 'foo'"),
])
def test_a_bad_module_or_env_argument_is_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_play_reads_actions_and_shows_metrics(monkeypatch, capsys):
    lines = ["", "R1 = Calculator(36*3/4)", "R2 = Bogus(1)"]
    typed = iter([*lines, "R2 = Calculator(36 - (R1 + 5)); Answer(R2)"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    assert main(["play", "GSM8K-v0", "--task-id", "gsm8k/sample/0"]) == 0
    out = capsys.readouterr().out
    assert "R1 = 27" in out and "Error: unknown action 'Bogus'" in out
    assert "metrics: {'accuracy': 1.0}; gold answer: 4" in out


def test_play_quits_on_eof(monkeypatch):
    def eof(prompt=""):
        raise EOFError

    monkeypatch.setattr("builtins.input", eof)
    assert main(["play", "MathWord-v0", "--seed", "1"]) == 0


@pytest.fixture
def local_dataset(tmp_path, monkeypatch):
    """A dataset whose canonical location is a local file (no network in tests)."""
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "upstream" / "test.jsonl"
    source.parent.mkdir()
    source.write_text('{"question": "1+1?", "answer": "1+1 = <<1+1=2>>2\\n#### 2"}\n')
    info = data.DatasetInfo(
        name="tiny-gsm", files=(data.DataFile("test", "test.jsonl", source.as_uri()),),
        homepage="https://example.invalid", license="test",
    )
    data.register_dataset(info)
    yield source
    data.DATASETS._entries.pop("tiny-gsm")


def test_data_status_and_download(local_dataset, capsys):
    assert main(["data", "status", "tiny-gsm"]) == 0
    assert "missing: fetch file://" in capsys.readouterr().out
    assert main(["data", "download", "tiny-gsm"]) == 0
    cached = data.dataset_path("tiny-gsm", "test")
    assert cached.read_bytes() == local_dataset.read_bytes()
    recorded = (cached.parent / "checksums.json").read_text()
    assert hashlib.sha256(local_dataset.read_bytes()).hexdigest() in recorded
    assert main(["data", "status", "tiny-gsm"]) == 0
    assert "[present]" in capsys.readouterr().out
    cached.write_text("tampered\n")
    assert main(["data", "download", "tiny-gsm"]) == 2
    assert "checksum" in capsys.readouterr().err


def test_data_download_unreachable_names_the_file(local_dataset, capsys):
    local_dataset.unlink()
    assert main(["data", "download", "tiny-gsm"]) == 2
    err = capsys.readouterr().err
    assert "save it as" in err and str(data.dataset_path("tiny-gsm", "test")) in err


def test_console_script_runs():
    done = subprocess.run([sys.executable, "-m", "lumos_gym.cli", "--version"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.startswith("lumos-gym ")


def test_environments_doc_python_example_runs(capsys):
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "environments.md"
    code = doc.read_text(encoding="utf-8").split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, str(doc), "exec"), {"__name__": "doc"})
    assert capsys.readouterr().out.startswith("{'accuracy': 1.0}")


def test_check_all_reports_an_env_without_data_and_goes_on(capsys, monkeypatch, tmp_path):
    import lumos_gym.envs

    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    monkeypatch.setattr(lumos_gym.envs, "env_ids", lambda: ["lumos/AOKVQA-v0", "lumos/SVAMP-v0"])
    assert main(["check", "all", "--replay-limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "lumos/AOKVQA-v0: skipped (no data here:" in out and "lumos/SVAMP-v0: ok" in out
    assert main(["check", "AOKVQA-v0"]) == 2  # named alone, a missing download is an error
