"""What the runner reports: whose fault a crash is, and its progress without a terminal.

A tool that crashes (an exception other than lumos-gym's own errors) is the env's tool, not the
agent: the env shows it as an ``Error:`` observation and names it in ``info["tool_crash"]``, and
the runner ends the episode as ``tool-error``. An env whose ``step`` itself raises ends it as
``env-error``.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from conftest import ScriptedBackend

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.actions import ToolSpec
from lumos_gym.agents import make_agent
from lumos_gym.agents.runner import EpisodeSpec, Runner
from lumos_gym.envs.math.official import MathEnv
from lumos_gym.tools.base import TOOLS, Tool, register_tool

TASK = "gsm8k/sample/0"  # Lena's 36 muffins: 4 are left


class Explodes(Tool):
    """A tool with a bug: every call raises a plain Python exception."""

    spec = ToolSpec("Explode", "Explode(x)", "Raise, whatever x is")

    def run(self, action, ctx):
        raise KeyError("a bug in the tool")


class BrokenStepEnv(MathEnv):
    """GSM8K's sample whose ``step`` itself raises (a bug outside every tool)."""

    def rewrite_action(self, text: str) -> str:
        raise RuntimeError("the env is broken")


class ExplodingCalculatorEnv(MathEnv):
    """GSM8K's sample where every ``Calculator`` call goes to the crashing tool."""

    def rewrite_action(self, text: str) -> str:
        return text.replace("Calculator(", "Explode(")


@pytest.fixture
def explode_tool():
    register_tool("Explode", Explodes)
    yield
    TOOLS.unregister("Explode")


@pytest.fixture
def registered():
    """Register env classes on GSM8K's sample under test ids; unregister them afterwards."""
    ids = []

    def register(name: str, cls: type[MathEnv]) -> str:
        ids.append(f"lumos/{name}-v0")
        gym.register(id=ids[-1], entry_point=cls, kwargs={"dataset": "gsm8k"})
        return ids[-1]

    yield register
    for env_id in ids:
        gym.registry.pop(env_id)


def react(*actions: str):
    """A ReAct agent whose k-th answer is ``Action: actions[k]``, the last one repeated."""
    replies = iter(actions)
    last = [actions[-1]]

    def script(request):
        last[0] = next(replies, last[0])
        return f"Thought: go on\nAction: {last[0]}"

    return make_agent("react", max_rounds=6), {"policy": ScriptedBackend(script)}


def test_a_crashing_tool_is_a_tool_error_named_by_the_env(explode_tool):
    env = gym.make("lumos/GSM8K-v0", tools=["Calculator", "Explode"])
    env.reset(options={"task_id": TASK})
    observation, _, terminated, _, info = env.step("R1 = Explode(3)")
    assert observation == "Error: Explode failed: KeyError: 'a bug in the tool'"
    assert info["tool_crash"] == "Explode failed: KeyError: 'a bug in the tool'"
    assert info["tool_errors"] == 1 and not terminated
    _, _, _, _, info = env.step("R1 = Calculator(1 + 1)")
    assert "tool_crash" not in info  # named in the step it happened in only
    env.close()

    agent, backends = react("R1 = Calculator(36 * 3 / 4)", "R2 = Explode(R1)", "Answer(4)")
    spec = EpisodeSpec("lumos/GSM8K-v0", TASK, {"tools": ["Calculator", "Explode"]})
    [record] = Runner(agent, backends).run([spec])
    assert record.status == "tool-error", (record.status, record.reason)
    assert record.reason == "Explode failed: KeyError: 'a bug in the tool'"
    assert record.steps == 2 and record.tool_errors == 1


def test_the_oracle_meeting_a_crashing_tool_is_not_an_agent_error(explode_tool, registered):
    # its gold actions ran out after the crash, which made the episode an agent-error
    env_id = registered("ExplodingCalculator", ExplodingCalculatorEnv)
    spec = EpisodeSpec(env_id, TASK, {"tools": ["Calculator", "Explode"], "privileged": True})
    [record] = Runner(make_agent("oracle"), {}).run([spec])
    assert record.status == "tool-error" and "KeyError" in record.reason
    assert record.turns[0]["action"].startswith("R1 = Calculator(")


def test_an_env_whose_step_raises_is_an_env_error(registered):
    agent, backends = react("R1 = Calculator(1 + 1)")
    env_id = registered("BrokenStep", BrokenStepEnv)
    [record] = Runner(agent, backends).run([EpisodeSpec(env_id, TASK)])
    assert record.status == "env-error"
    assert record.reason.startswith("RuntimeError: the env is broken")


def test_without_a_terminal_the_progress_is_plain_lines_on_stderr(capsys):
    agent, backends = react("Answer(4)")
    specs = [EpisodeSpec("lumos/GSM8K-v0", f"gsm8k/sample/{i}") for i in range(20)]
    records = Runner(agent, backends, max_in_flight=4).run(specs, progress=True)
    assert len(records) == 20
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and "\r" not in err  # no bar redrawn in a log file
    # a line per tenth of the run (two episodes) at least, and one at the end
    for done in range(2, 21, 2):
        assert any(line.startswith(f"episodes {done}/20 (") for line in lines), (done, lines)
    assert lines[-1].startswith("episodes 20/20 (") and lines[-1].endswith("completed 20)")
    assert " ep/s, " in lines[-1] and " tok/s; " in lines[-1]
