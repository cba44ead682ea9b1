"""What the verbs print for scripts and for people: ``--format json``, suggestions for mistyped
flags and verbs, and ``check`` on an env that its oracle cannot verify."""

from __future__ import annotations

import json

import pytest

from lumos_gym.cli import main
from lumos_gym.envs.checks import check_env_id


def json_out(capsys, argv: list[str], code: int = 0):
    assert main(argv) == code
    return json.loads(capsys.readouterr().out)


def test_envs_agents_and_suites_as_json(capsys):
    envs = {e["id"]: e for e in json_out(capsys, ["envs", "--format", "json"])}
    gsm8k = envs["lumos/GSM8K-v0"]
    assert gsm8k["task_type"] == "math" and gsm8k["terminal"] == "Answer"
    assert gsm8k["tools"][:2] == ["Calculator", "SetEquation"] and "bundled" in gsm8k["sources"]
    assert envs["lumos/WebShop-v0"]["terminal"] == "Stop"
    assert gsm8k["max_episode_steps"] > 0 and gsm8k["entry_point"].endswith("Env")

    agents = {a["name"]: a for a in json_out(capsys, ["agents", "--format", "json"])}
    assert agents["lumos-i"]["roles"] == ["planner", "grounder"] and agents["oracle"]["roles"] == []
    assert all(a["description"] for a in agents.values())

    suites = {s["name"]: s for s in json_out(capsys, ["suites", "--format", "json"])}
    assert "lumos/GSM8K-v0" in suites["offline"]["envs"] and suites["offline"]["description"]
    offline = json_out(capsys, ["suites", "offline", "--format", "json"])
    assert offline["name"] == "offline" and offline["sha256"]
    entry = offline["envs"][0]
    assert set(entry) == {"env", "kwargs", "limit", "task_ids", "max_steps", "seeds"}
    assert [e["env"] for e in offline["envs"]] == suites["offline"]["envs"]


def test_data_status_as_json(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    [gsm8k] = json_out(capsys, ["data", "status", "gsm8k", "--format", "json"])
    assert gsm8k["name"] == "gsm8k" and gsm8k["license"] and gsm8k["homepage"]
    [test_file] = [f for f in gsm8k["files"] if f["split"] == "test"]
    assert test_file["present"] is False and test_file["url"].startswith("https://")
    assert test_file["path"].startswith(str(tmp_path))
    assert main(["data", "build", "--format", "json"]) == 2
    assert "--format json is for `data status`" in capsys.readouterr().err


def test_evaluate_prints_the_summary_as_json_and_its_progress_on_stderr(capsys, tmp_path):
    assert main(["evaluate", "--agent", "oracle", "--env", "MathWord-v0", "--limit", "2",
                 "--out", str(tmp_path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)  # stdout holds the summary alone
    assert summary == json.loads((tmp_path / "summary.json").read_text())
    assert summary["envs"]["lumos/MathWord-v0"]["episodes"] == 2
    # stderr is no terminal here: the progress comes as plain lines, then the paths
    assert "episodes 2/2 (" in err and "completed 2)" in err
    assert f"results: {tmp_path / 'episodes.jsonl'}" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["evaluate", "--limt", "5"],
     "lumos-gym evaluate: error: unrecognized arguments: --limt 5 (did you mean --limit?)"),
    (["evaluate", "--limt=5", "--sed", "1"],
     "(--limt: did you mean --limit?; --sed: did you mean --seed?)"),
    (["check", "all", "--replay-limt", "2"], "(did you mean --replay-limit?)"),
    (["evalute"], "invalid choice: 'evalute' (choose from "),
    (["evalute"], ") (did you mean 'evaluate'?)"),
    (["data", "statu"], "(did you mean 'status'?)"),
    (["envs", "--format", "jsn"], "(did you mean 'json'?)"),
])
def test_a_mistyped_flag_or_choice_gets_a_suggestion(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err


def test_an_unknown_flag_far_from_every_flag_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--bogus"])
    assert capsys.readouterr().err.rstrip().endswith("unrecognized arguments: --bogus")


def test_check_marks_an_env_without_gold_actions_unverified(capsys, monkeypatch):
    report = check_env_id("lumos/Bamboogle-v0")  # its bundled questions have no gold plans
    assert report.api_ok and report.replays == [] and report.gold_tasks == 0
    assert report.status == "unverified" and not report.ok
    assert main(["check", "Bamboogle-v0"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("lumos/Bamboogle-v0: unverified (api ok, 8 tasks, oracle 0/0")
    assert "warning: not verified: none of the 8 tasks has gold actions" in out

    import lumos_gym.envs

    monkeypatch.setattr(lumos_gym.envs, "env_ids", lambda: ["lumos/Bamboogle-v0"])
    assert main(["check", "all"]) == 0  # reported among the others, as an env without data is
    assert "lumos/Bamboogle-v0: unverified" in capsys.readouterr().out
    assert main(["check", "GSM8K-v0", "--replay-limit", "0"]) == 0  # asked for no replay
    out = capsys.readouterr().out
    assert "unverified" in out and "replay limit 0: 24 tasks have gold actions" in out


def test_progress_logs_leave_out_the_web_shops_request_lines(caplog, monkeypatch):
    """A data build or training run prints its own steps, not one httpx line per shop page."""
    import logging  # this test alone reads loggers

    from lumos_gym.cli.args import CHATTY_LOGGERS, log_progress

    for name in CHATTY_LOGGERS:  # restored after the test
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    log_progress()
    with caplog.at_level(logging.INFO):
        logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1/s/x/search")
        logging.getLogger("lumos_gym.training").info("step 1")
    assert [record.name for record in caplog.records] == ["lumos_gym.training"]
