"""Reading a board imports none of the run machinery.

A fresh interpreter reads, validates and renders the committed boards (``leaderboards/``)
through the leaderboard's Python API, and then no agent, model, training, conversion or tool
code, no env implementation, no Ray and none of ``lumos_gym.evaluation``'s run modules may be
loaded. ``import lumos_gym`` itself registers the env ids with Gymnasium (documented: ``import
lumos_gym  # registers the lumos/* ids``), which loads ``gymnasium`` and the env registration
records; the board must add no env module to those.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lumos_gym.agents import AGENTS
from lumos_gym.agents.plugins import registered_agent
from lumos_gym.envs.tasks import TASK_TYPES
from lumos_gym.leaderboard.agents import (
    BUILT_IN,
    AgentFacts,
    agent_can_act,
    counterfactual_roles,
    reads_gold_answers,
)

ROOT = Path(__file__).resolve().parents[1]
BOARDS = ROOT / "leaderboards"

#: Loaded by no board: the libraries and lumos-gym parts that run episodes or train.
FORBIDDEN_LIBRARIES = ("torch", "transformers", "ray", "peft", "vllm", "openvino", "openai")
FORBIDDEN_PARTS = ("lumos_gym.agents", "lumos_gym.models", "lumos_gym.training",
                   "lumos_gym.conversion", "lumos_gym.tools", "lumos_gym.retrieval",
                   "lumos_gym.scoring", "lumos_gym.databuild", "lumos_gym.serving",
                   "lumos_gym.workflows", "lumos_gym.cli")
RUN_MODULES = ("provenance", "backends", "usage", "output", "evaluate", "distributed",
               "rescore", "restrict")

READ_A_BOARD = """
import json, sys
from pathlib import Path

import lumos_gym

registered = set(sys.modules)

import lumos_gym.leaderboard
from lumos_gym.evaluation.merge import merge_results
from lumos_gym.evaluation.summary import format_table
from lumos_gym.leaderboard.attribution import attribute_runs
from lumos_gym.leaderboard.render import (
    attach_reference, load_board, render_comparison, validate, write_board,
)
from lumos_gym.leaderboard.viewer import load_run

boards, out = Path(sys.argv[1]), Path(sys.argv[2])
compare = sorted(str(p) for p in (boards / "compare").iterdir() if p.is_dir())
offline = sorted(str(p) for p in (boards / "offline").iterdir() if p.is_dir())
written = {}
for name, paths, suite in (("compare", compare, "compare"), ("offline", offline, "offline")):
    board = load_board(paths, suite=suite)
    board.paper = True
    attach_reference(board, "lumos-i-s0")
    for fmt in ("md", "html", "csv"):
        written[f"{name}.{fmt}"] = bool(write_board(board, fmt, str(out / f"{name}.{fmt}"),
                                                    trajectories=name == "offline"))
written["compare"] = bool(render_comparison(
    load_board(compare, suite="compare", group_seeds=False), "lumos-i-s1", "lumos-i-s0"))
checked, problems = validate([str(boards / "compare" / "lumos-i-s0")])
written["validate"] = checked
attribution, _ = attribute_runs(boards / "offline" / "lumos-i",
                                boards / "offline" / "lumos-i+gold-plan",
                                boards / "offline" / "lumos-i+gold-ground")
written["attribution"] = bool(attribution.episodes)
written["view"] = bool(load_run(str(boards / "compare" / "cot")))
print(json.dumps({
    "written": written,
    "registered": sorted(m for m in registered if m.startswith("lumos_gym.envs")),
    "modules": sorted(sys.modules),
}))
"""


@pytest.fixture(scope="module")
def board_read(tmp_path_factory) -> dict:
    """What a fresh interpreter loaded to read, validate and render the committed boards."""
    out = tmp_path_factory.mktemp("boards")
    done = subprocess.run([sys.executable, "-c", READ_A_BOARD, str(BOARDS), str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_boards_were_read(board_read):
    written = board_read["written"]
    assert all(written.values()) and written["validate"] == 1


def test_reading_a_board_loads_no_run_machinery(board_read):
    modules = board_read["modules"]
    assert [m for m in FORBIDDEN_LIBRARIES if m in modules] == []
    assert [m for m in modules if m.startswith(FORBIDDEN_PARTS)] == []
    run = tuple(f"lumos_gym.evaluation.{m}" for m in RUN_MODULES)
    assert [m for m in modules if m in run] == []


def test_reading_a_board_loads_no_env_beyond_the_registration(board_read):
    envs = [m for m in board_read["modules"] if m.startswith("lumos_gym.envs")]
    assert board_read["registered"]  # import lumos_gym registers the ids
    assert sorted(set(envs) - set(board_read["registered"])) == []


def _class_facts(name: str) -> AgentFacts:
    cls = registered_agent(name)
    return AgentFacts(bool(getattr(cls, "single_step", False)),
                      bool(getattr(cls, "needs_privileged_info", False)),
                      getattr(cls, "counterfactual_of", None), getattr(cls, "replaces", None))


def test_the_built_in_facts_are_the_classes_facts():
    """The leaderboard's table of built-in agents says what their classes say."""
    ours = [n for n in AGENTS if registered_agent(n).__module__.startswith("lumos_gym.")]
    assert sorted(BUILT_IN) == sorted(ours)
    for name in BUILT_IN:
        assert BUILT_IN[name] == _class_facts(name), name
        cls = registered_agent(name)
        for task_type in (*TASK_TYPES, None):
            assert agent_can_act(name, task_type) == cls.can_act(task_type), (name, task_type)


def test_an_agent_not_built_in_is_asked_of_its_class():
    assert agent_can_act("an-agent-not-known-here", "web")
    assert not reads_gold_answers("an-agent-not-known-here")
    assert counterfactual_roles("an-agent-not-known-here") is None
    assert counterfactual_roles("lumos-i+gold-plan") == ("lumos-i", "planner")
