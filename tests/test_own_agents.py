"""Agents of one's own: ``--agent module:Class`` and ``file.py:Class``, plugins, provenance.

The two agents of docs/agents.md ("Write your own agent", in docs/examples/own_agents) run
through the real command line into results folders that ``lumos-gym leaderboard`` renders;
the rule-based one needs no model, the other asks the tiny random model built here (and, for
exact actions, a scripted backend through the library call).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ScriptedBackend

from lumos_gym.agents import AGENTS, make_agent
from lumos_gym.agents import plugins as agent_plugins
from lumos_gym.cli import main
from lumos_gym.errors import AgentLoadError, LumosGymError, RegistryError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
CALCULATOR = EXAMPLES / "own_agents" / "calculator.py"


@pytest.fixture
def examples(monkeypatch):
    """docs/examples importable, as a user's PYTHONPATH would make it."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


def _evaluate(capsys, *args: str) -> int:
    code = main(["evaluate", "--no-progress", *args])
    capsys.readouterr()
    return code


def _board(capsys, *folders: Path) -> str:
    capsys.readouterr()
    assert main(["leaderboard", *map(str, folders)]) == 0
    return capsys.readouterr().out


# --- naming an agent, and the errors ----------------------------------------------------------


def test_a_file_agent_loads_and_records_its_file_and_checksum(tmp_path):
    agent = make_agent(f"{CALCULATOR}:CalculatorAgent")
    source = agent.describe()["source"]
    assert agent.name == "calculator" and set(source) == {"class", "file", "sha256"}
    assert source["file"] == str(CALCULATOR) and len(source["sha256"]) == 64
    again = make_agent(f"{CALCULATOR}:CalculatorAgent")
    assert type(again) is type(agent)  # one import per file content
    assert "source" not in make_agent("oracle").describe()  # lumos-gym's own: the commit says


def test_a_module_agent_records_its_module(examples):
    source = make_agent("own_agents.ask_model:ExpressionAgent").describe()["source"]
    assert source["module"] == "own_agents.ask_model" and source["class"] == "ExpressionAgent"
    assert source["file"].endswith("ask_model.py") and len(source["sha256"]) == 64


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


HEAD = "from lumos_gym.agents import Act, Agent\n"


@pytest.mark.parametrize(("body", "attr", "message"), [
    ("", "Missing", "has no 'Missing'"),
    ("def helper():\n    pass\n", "helper", "is a function, not a subclass of"),
    ("class Plain:\n    pass\n", "Plain", "the class Plain, not a subclass of"),
    ("class Half(Agent):\n    name = 'half'\n", "Half", "is abstract: it does not define episode"),
    ("class NoName(Agent):\n    def episode(self, o, i):\n        yield Act('Answer()')\n",
     "NoName", "has no name: set a class attribute"),
    ("class Fake(Agent):\n    name = 'react'\n"
     "    def episode(self, o, i):\n        yield Act('x')\n", "Fake",
     r"name 'react', which is another agent's \(built-in\)"),
    ("import not_a_module_anywhere\n", "X", "failed: ModuleNotFoundError: No module named"),
    ("raise RuntimeError('broken on purpose')\n", "X", "failed: RuntimeError: broken on purpose"),
])
def test_an_agent_that_cannot_be_loaded_is_a_clear_error(tmp_path, body, attr, message):
    path = _write(tmp_path, "mine.py", HEAD + body)
    with pytest.raises(AgentLoadError, match=message):
        make_agent(f"{path}:{attr}")


def test_missing_files_modules_and_names_are_clear(tmp_path, capsys):
    with pytest.raises(AgentLoadError, match="agent file .*nothere.py does not exist"):
        make_agent(f"{tmp_path / 'nothere.py'}:Agent")
    with pytest.raises(AgentLoadError, match="no module named 'nowhere_pkg.agents'"):
        make_agent("nowhere_pkg.agents:Mine")
    with pytest.raises(RegistryError, match="Did you mean 'react'.*package.module:Class"):
        make_agent("reakt")
    path = _write(tmp_path, "bare.py", HEAD)
    with pytest.raises(AgentLoadError, match="name the class in the file: .*bare.py:ClassName"):
        make_agent(path)
    # on the command line: one line, status 2, nothing written
    out = tmp_path / "out"
    assert main(["evaluate", "--agent", f"{tmp_path / 'nothere.py'}:X", "--env", "MathWord-v0",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and not out.exists()


# --- the two examples of docs/agents.md, through the command line ------------------------------


def test_the_rule_based_example_runs_and_its_row_says_what_ran(tmp_path, capsys):
    out = tmp_path / "calculator"
    assert _evaluate(capsys, "--agent", f"{CALCULATOR}:CalculatorAgent", "--env",
                     "MathWord-v0", "-k", "levels=1", "--limit", "6", "--out", str(out)) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 6 and {r["agent"] for r in records} == {"calculator"}
    assert all(r["turns"][0]["action"].startswith("R1 = Calculator(") for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["mean"] >= 0.5  # keyword rules solve most level-1 problems
    run = json.loads((out / "run.json").read_text())
    assert run["agent"]["source"]["sha256"] == agent_sha(CALCULATOR)
    board = _board(capsys, out)
    assert "| calculator |" in board and "MathWord-v0" in board
    assert f"agent calculator.py:CalculatorAgent (sha256 {agent_sha(CALCULATOR)[:8]})" in board


def agent_sha(path: Path) -> str:
    from lumos_gym.envs.sources import file_sha256

    return file_sha256(path)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("torch")
    from conftest import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=1024)


def test_the_model_calling_example_runs_on_a_model_named_on_the_command_line(
    examples, tiny_model, tmp_path, capsys
):
    out = tmp_path / "expression"
    assert _evaluate(capsys, "--agent", "own_agents.ask_model:ExpressionAgent", "--env",
                     "MathWord-v0", "--limit", "2", "--backend", "hf", "--model",
                     str(tiny_model), "--device", "cpu", "--model-args", "max_context=512",
                     "--max-new-tokens", "6", "--out", str(out)) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["output_tokens"] > 0 for r in records)
    assert all(r["status"] == "completed" for r in records)
    run = json.loads((out / "run.json").read_text())
    assert run["model_args"] == {"device": "cpu", "max_context": 512}
    assert run["agent"]["source"]["module"] == "own_agents.ask_model"
    board = _board(capsys, out)
    assert "| expression |" in board
    assert "agent own_agents.ask_model:ExpressionAgent" in board
    assert "model args device=cpu, max_context=512" in board


def test_the_model_calling_example_sends_the_models_expression_to_the_calculator(
    examples, tmp_path
):
    prompts = []

    def model(request):
        prompts.append(request.prompt)
        return "52 - 37\nQuestion: and more"

    result = evaluate(RunConfig("own_agents.ask_model:ExpressionAgent", envs=["MathWord-v0"],
                                limit=2, out=tmp_path, progress=False,
                                backends={"policy": ScriptedBackend(model)}))
    actions = [[t.get("action") for t in r["turns"] if t.get("action")] for r in result.records]
    assert actions == [["R1 = Calculator(52 - 37)", "Answer(R1)"]] * 2
    assert all(p.endswith("Expression:") and "Question:" in p for p in prompts)


# --- resuming ---------------------------------------------------------------------------------


def test_a_killed_run_of_a_file_agent_resumes_and_a_changed_file_is_refused(tmp_path, capsys):
    agent = tmp_path / "my_calc.py"
    shutil.copy(CALCULATOR, agent)
    out = tmp_path / "out"
    args = ["--agent", f"{agent}:CalculatorAgent", "--env", "MathWord-v0", "--limit", "4",
            "--out", str(out)]
    assert _evaluate(capsys, *args) == 0
    episodes = out / "episodes.jsonl"
    lines = episodes.read_text().splitlines(keepends=True)
    episodes.write_text("".join(lines[:2]))  # killed after two episodes
    assert _evaluate(capsys, *args, "--resume") == 0
    assert len(episodes.read_text().splitlines()) == 4
    agent.write_text(agent.read_text().replace('"pays"', '"pays", "loses"'))
    episodes.write_text("".join(lines[:2]))
    assert main(["evaluate", "--no-progress", *args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "another configuration" in err and "sha256" in err


# --- plugins ----------------------------------------------------------------------------------


@pytest.fixture
def plugin(tmp_path, monkeypatch, examples):
    """An installed package (as pip writes its metadata) whose entry points name two agents:
    the docs' calculator, and a module that does not exist."""
    info = tmp_path / "own_agents_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: own-agents-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[lumos_gym.agents]\ncalculator = own_agents.calculator:CalculatorAgent\n"
        "broken-plugin = own_agents.missing:Agent\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    agent_plugins.load_agent_plugins.cache_clear()
    yield
    for name in ("calculator", "broken-plugin"):
        if name in AGENTS:
            AGENTS.unregister(name)
        agent_plugins.PLUGINS.pop(name, None)
    agent_plugins.load_agent_plugins.cache_clear()


def test_plugin_agents_are_listed_with_where_they_come_from_and_run_by_name(
    plugin, tmp_path, capsys
):
    assert main(["agents"]) == 0
    listing = capsys.readouterr().out
    line = next(row for row in listing.splitlines() if row.startswith("calculator "))
    assert "plugin own-agents-plugin 0.1 (own_agents.calculator:CalculatorAgent)" in line
    assert "(none)" in line and "Reads a word problem by keywords" in line
    broken = next(row for row in listing.splitlines() if row.startswith("broken-plugin "))
    assert "cannot be loaded" in broken and "own_agents.missing" in broken
    assert "built-in" in next(r for r in listing.splitlines() if r.startswith("lumos-i "))
    out = tmp_path / "plugin-run"
    assert _evaluate(capsys, "--agent", "calculator", "--env", "MathWord-v0", "--limit", "2",
                     "--out", str(out)) == 0
    source = json.loads((out / "run.json").read_text())["agent"]["source"]
    assert source["module"] == "own_agents.calculator"
    with pytest.raises(AgentLoadError, match="broken-plugin.*cannot be imported"):
        make_agent("broken-plugin")


def test_a_file_agent_cannot_be_sent_to_ray_workers(tmp_path):
    pytest.importorskip("ray")
    with pytest.raises(LumosGymError, match="cannot run on Ray workers"):
        evaluate(RunConfig(f"{CALCULATOR}:CalculatorAgent", envs=["MathWord-v0"], limit=1,
                           out=tmp_path, ray="local", progress=False))
