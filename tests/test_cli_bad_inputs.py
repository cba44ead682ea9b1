"""Bad values on the command line: one error line on stderr, no traceback, status 2.

Out-of-range numbers, counts that would generate for hours, ``-k`` options an env does not
take, agents that cannot be loaded; and each numeric flag's range in its ``--help``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import gymnasium as gym
import pytest

from lumos_gym.cli import args as cli_args
from lumos_gym.cli import build_parser, main
from lumos_gym.cli.args import Number
from lumos_gym.envs.registration import MAX_COUNT, check_env_kwargs
from lumos_gym.errors import LumosGymError
from lumos_gym.leaderboard.cards import card_text
from lumos_gym.leaderboard.viewer import as_shown

ORACLE = ["evaluate", "--agent", "oracle", "--limit", "1", "--no-progress"]
MATHWORD = [*ORACLE, "--env", "MathWord-v0"]


def fails(capsys, args: list[str], needle: str) -> str:
    """Run the command line: status 2 and one error line holding ``needle``, no traceback."""
    try:
        code = main(args)
    except SystemExit as e:  # argparse refuses a value with SystemExit(2)
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"lumos-gym {args[0]}: error: ") and needle in err, err
    return err


@pytest.mark.parametrize(("args", "needle"), [
    (["serve-env", "lumos/GSM8K-v0", "--port", "70000"], "--port: must be 0 to 65535, got 70000"),
    (["serve", "--port", "-5"], "--port: must be 0 to 65535, got -5"),
    (["serve", "--batch-size", "-1"], "--batch-size: must be at least 1"),
    (["serve", "--max-context", "-1"], "--max-context: must be at least 2"),
    (["evaluate", "--base-url", "not-a-url"], "--base-url: expected a URL such as http://"),
    (["evaluate", "--temperature", "nan"], "--temperature: expected a finite number, got 'nan'"),
    (["evaluate", "--temperature", "-0.5"], "--temperature: must be at least 0"),
    (["evaluate", "--out", ""], "--out: expected a path, got an empty string"),
    (["convert", "--env", "GSM8K-v0", "--limit", "-1", "--out", "x.jsonl"],
     "--limit: must be at least 1, got -1"),
    (["check", "GSM8K-v0", "--replay-limit", "-3"], "--replay-limit: must be at least 0"),
    (["data", "build", "--num-tasks", str(10**23)], f"--num-tasks: must be 1 to {MAX_COUNT}"),
    (["data", "build", "--num-tasks", "10**23"], "--num-tasks: expected an integer"),
    (["view", "results", "--serve", "99999"], "--serve: must be 0 to 65535"),
    (["train", "--data", "x.jsonl", "--out", "o", "--eval-fraction", "2"],
     "--eval-fraction: must be 0 to 1"),
    (["grpo", "--train-env", "MathWord-v0", "--out", "o", "--steps", "0"],
     "--steps: must be at least 1"),
])
def test_a_value_out_of_range_is_refused(capsys, args, needle):
    fails(capsys, args, needle)


@pytest.mark.parametrize(("kwarg", "needle"), [
    ("num_tasks=1e400", "num_tasks=1e400: expected a finite number"),
    ("num_tasks=Infinity", "num_tasks=Infinity: expected a finite number"),
    ("num_tasks=NaN", "num_tasks=NaN: expected a finite number"),
    (f"num_tasks={10**26}", f"num_tasks must be 0 to {MAX_COUNT}, got {10**26}"),
    ("num_tasks=abc", "num_tasks takes an integer, got 'abc'"),
    ("num_tasks=2.5", "num_tasks takes an integer, got 2.5"),
    ("level=1", "unexpected keyword argument 'level' (did you mean levels?); its options: "),
    ("max_episode_steps=-1", "max_episode_steps must be at least 1, got -1"),
])
def test_a_bad_env_option_is_refused_before_any_task_is_made(capsys, tmp_path, kwarg, needle):
    err = fails(capsys, [*MATHWORD, "-k", kwarg, "--out", str(tmp_path / "run")], needle)
    if kwarg == "level=1":
        assert "num_tasks" in err and "seed" in err  # the env's real options
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


def test_convert_checks_the_env_options_too(capsys, tmp_path):
    fails(capsys, ["convert", "--env", "MathWord-v0", "-k", f"num_tasks={10**9}", "--out",
                   str(tmp_path / "a.jsonl")], f"num_tasks must be 0 to {MAX_COUNT}")
    assert not (tmp_path / "a.jsonl").exists()


def test_check_env_kwargs_takes_what_the_env_takes():
    check_env_kwargs("lumos/MathWord-v0", {"num_tasks": 3, "levels": [1, 2], "seed": 4,
                                           "split": "train", "max_episode_steps": 5,
                                           "limit": None, "disable_env_checker": True})
    check_env_kwargs("lumos/MathWord-v0", {"num_tasks": 3.0})  # an integral number
    with pytest.raises(LumosGymError, match="num_tasks must be 0 to"):
        check_env_kwargs("lumos/MathWord-v0", {"num_tasks": MAX_COUNT + 1})
    with pytest.raises(LumosGymError, match="limit takes an integer"):
        check_env_kwargs("lumos/GSM8K-v0", {"limit": "all"})
    check_env_kwargs("lumos/No-such-v0", {"anything": 1})  # gym.make names the unknown id
    assert cli_args.MAX_COUNT == MAX_COUNT  # --num-tasks and -k num_tasks: one bound


@pytest.mark.full
def test_a_huge_count_ends_at_once_in_a_fresh_process(tmp_path):
    """The count that generated for hours before any output: refused within seconds."""
    done = subprocess.run(
        [sys.executable, "-m", "lumos_gym.cli", *MATHWORD, "-k", f"num_tasks={10**26}",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "num_tasks must be 0 to" in done.stderr


def _agent_file(tmp_path, body: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text("from lumos_gym.agents import Act, Agent\n" + body)
    return str(path)


@pytest.mark.parametrize(("body", "needle"), [
    ("raise SystemExit(0)\n", "failed: it exited (SystemExit: 0)"),
    ("import sys\nsys.exit(3)\n", "failed: it exited (SystemExit: 3)"),
    ("import not_a_module_anywhere\n", "failed: ModuleNotFoundError"),
    ("class Mine(Agent):\n    name = 'mine-raises'\n"
     "    def __init__(self, config=None):\n        raise RuntimeError('no key')\n"
     "    def episode(self, o, i):\n        yield Act('Answer(1)')\n",
     "making the agent failed: RuntimeError: no key"),
])
def test_an_agent_that_cannot_be_loaded_is_one_line(capsys, tmp_path, body, needle):
    spec = f"{_agent_file(tmp_path, body)}:Mine"
    fails(capsys, ["evaluate", "--agent", spec, "--env", "GSM8K-v0", "--limit", "1",
                   "--no-progress", "--out", str(tmp_path / "run")], needle)
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


@pytest.mark.full
def test_env_takes_several_ids(capsys, tmp_path):
    out = tmp_path / "run"
    assert main([*ORACLE, "--env", "GSM8K-v0", "SVAMP-v0", "--env", "ASDiv-v0",
                 "--out", str(out), "--format", "json"]) == 0
    capsys.readouterr()
    envs = json.loads((out / "summary.json").read_text())["envs"]
    assert set(envs) == {"lumos/GSM8K-v0", "lumos/SVAMP-v0", "lumos/ASDiv-v0"}


def test_a_short_id_in_gym_make_names_the_full_one():
    with pytest.raises(gym.error.NameNotFound, match="give its full id, 'lumos/MathWord-v0'"):
        gym.make("MathWord-v0")


def _numeric_actions():
    """Every flag of every verb with a typed number, as (verb, flag, action)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for verb, verb_parser in sub.choices.items():
        for action in verb_parser._actions:
            if action.option_strings and action.type is not None:
                yield verb, action.option_strings[-1], action


def test_every_numeric_flag_is_range_checked_and_shows_its_range():
    seen = 0
    for verb, flag, action in _numeric_actions():
        assert action.type not in (int, float), f"{verb} {flag}: a bare {action.type.__name__}"
        if isinstance(action.type, Number):
            seen += 1
            assert action.type.range in (action.help or ""), f"{verb} {flag}: {action.help!r}"
    assert seen > 40


def test_the_range_is_in_the_printed_help(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "0 to 65535" in shown and "at least 1" in shown and "at least 2" in shown


def test_a_failed_episode_does_not_show_as_completed():
    failed = {"status": "completed", "reward": 0.0, "prediction": ""}
    assert as_shown(failed) == {"status": "completed, failed", "reward": 0.0,
                                "prediction": "(empty)"}
    solved = {"status": "completed", "reward": 1.0, "prediction": "4"}
    assert as_shown(solved) == solved


def test_a_run_without_a_model_says_so():
    assert "scored at 0123456, no model" in card_text({"git": {"commit": "0123456789"}})
    assert "on ?" not in card_text({"git": {"commit": "0123456789"}, "backend": []})
