"""Module attribution: the counterfactual Lumos-I agents, the attribution, its table and pages.

The agents run on the real GSM8K env and tools with scripted models; the attribution cases are
small enough to check by hand.
"""

from __future__ import annotations

import functools
import json

import gymnasium as gym
import pytest
from conftest import ScriptedBackend

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym import prompts
from lumos_gym.agents import Note, make_agent
from lumos_gym.agents.counterfactual import adopt_actions, match_subgoal, subgoal_score
from lumos_gym.agents.lumos import IterativeState
from lumos_gym.agents.runner import EpisodeSpec, Runner
from lumos_gym.cli import main
from lumos_gym.conversion.gold import gold_info, gold_plan
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.leaderboard.attribution import (
    AttributionError,
    attribute,
    attribute_runs,
    render_markdown,
)
from lumos_gym.leaderboard.render import load_board, render_html
from lumos_gym.leaderboard.render import render_markdown as board_markdown

ENV = "lumos/GSM8K-v0"
MUFFINS, BUSES = "gsm8k/sample/0", "gsm8k/sample/1"  # answers 4 and 598


@functools.cache
def _task(task_id):
    env = gym.make(ENV)
    try:
        base = env.unwrapped
        return next(t for t in base.tasks if t.id == task_id), base.dataset
    finally:
        env.close()


def _gold(task_id):
    return gold_plan(*_task(task_id))


def _subgoal_asked(request):
    """The subgoal a Lumos-I grounder prompt asks for (its last one)."""
    return request.prompt.rsplit("Subgoal to be grounded: ", 1)[1].split("\n", 1)[0]


def _spec(task_id, agent_info=None):
    return EpisodeSpec(ENV, task_id, {}, 0, agent_info or gold_info(*_task(task_id)))


# ------------------------------------------------------------------------------ gold plans
def test_gold_plan_is_the_converters_annotation_as_the_modules_write_it():
    plan = _gold(MUFFINS)
    assert plan == [
        {"subgoal": "Subgoal 1: Calculate how many muffins Lena sells in the morning",
         "actions": "R1 = Calculator(36*3/4)"},
        {"subgoal": "Subgoal 2: Calculate how many muffins she sells in total",
         "actions": "R2 = Calculator(R1+5)"},
        {"subgoal": "Subgoal 3: Calculate how many muffins she has left",
         "actions": "R3 = Calculator(36-R2)"},
    ]
    task, _ = _task(MUFFINS)
    assert gold_info(task, "no-such-dataset")["gold_plan"] is None
    assert "no-such-dataset" in gold_info(task, "no-such-dataset")["gold_plan_error"]


# ---------------------------------------------------------------------------- the agents
def test_gold_plan_agent_grounds_the_gold_subgoals_with_its_own_grounder():
    plan = _gold(MUFFINS)
    actions = {step["subgoal"]: step["actions"] for step in plan}
    grounder = ScriptedBackend(lambda r: actions[_subgoal_asked(r)])
    agent = make_agent("lumos-i+gold-plan")
    assert agent.roles == ("grounder",) and agent.counterfactual_of == "lumos-i"
    [record] = Runner(agent, {"grounder": grounder}).run([_spec(MUFFINS)])
    assert record.status == "completed" and record.reward == 1.0, record.reason
    planned = [t for t in record.turns if t.get("role") == "planner"]
    assert [t["output"] for t in planned] == [
        prompts.plan_turn(k, step["subgoal"]) for k, step in enumerate(plan, 1)
    ]
    assert all(t["gold"] for t in planned)
    # the grounder saw Lumos-I's prompt with the gold subgoals, one turn each
    assert [_subgoal_asked(b[0]) for b in grounder.batches] == [s["subgoal"] for s in plan]
    assert [t["action"] for t in record.turns if "action" in t][-1] == "Answer(R3)"


def test_counterfactual_agents_without_a_gold_plan_end_with_the_reason():
    grounder = ScriptedBackend(lambda r: "R1 = Calculator(1+1)")
    none = {"gold_plan": None, "gold_plan_error": "ConversionError: no marks"}
    for name in ("lumos-i+gold-plan", "lumos-i+gold-ground"):
        backends = {"planner": grounder, "grounder": grounder}
        [record] = Runner(make_agent(name), backends).run([_spec(MUFFINS, none)])
        assert record.status == "agent-error"
        assert "no gold plan for this task: ConversionError: no marks" in record.reason


def test_gold_ground_agent_uses_gold_actions_for_the_subgoals_that_match():
    plan = _gold(MUFFINS)
    answers = [
        "Subgoal 1: calculate how many muffins Lena sells in the MORNING.",  # equal, normalised
        "No, I will keep planning. Subgoal 2: Calculate the price of one muffin.",  # no match
        "No, I will keep planning. Subgoal 3: Calculate how many muffins she has left.",
        prompts.STOP_PLANNING,
    ]
    planner = ScriptedBackend(lambda r: answers[r.prompt.count("<|assistant|>") - 1])
    grounder = ScriptedBackend(lambda r: "R2 = Calculator(27+5)")
    agent = make_agent("lumos-i+gold-ground")
    [record] = Runner(agent, {"planner": planner, "grounder": grounder}).run([_spec(MUFFINS)])
    assert record.status == "completed" and record.reward == 1.0, record.reason
    # the grounder was asked for the unmatched subgoal only
    assert [_subgoal_asked(b[0]) for b in grounder.batches] == [
        "Subgoal 2: Calculate the price of one muffin."
    ]
    gold = [t for t in record.turns if t.get("role") == "grounder" and t.get("gold")]
    assert [(t["output"], t["gold_subgoal"], t["match"]) for t in gold] == [
        (plan[0]["actions"], plan[0]["subgoal"], 1.0),
        (plan[2]["actions"], plan[2]["subgoal"], 1.0),
    ]
    assert record.prediction == "4"


def _grounds_with_gold(task_type, index, subgoal, gold):
    """Whether gold-ground's grounding hook takes gold actions (a note) or asks the grounder."""
    agent = make_agent("lumos-i+gold-ground")
    info = {"task_type": task_type, "gold_plan": [
        {"subgoal": line, "actions": f"R{k} = Click(x{k})"} for k, line in enumerate(gold, 1)
    ]}
    state = IterativeState(info, [], [{"role": "user", "content": subgoal}])
    first = next(agent.ground_subgoal(index, subgoal, state))
    return first.turn["output"] if isinstance(first, Note) else None


def test_gold_ground_matches_in_place_where_steps_change_the_env_state():
    gold = ["Subgoal 1: Search two relevant items.",
            "Subgoal 2: Select the most relevant features of item b0aaaaaaaa.",
            "Subgoal 3: Select the most relevant features of item b0bbbbbbbb."]
    planned = "Subgoal 2: Select the most relevant features of item b0bbbbbbbb."
    # web and games: the 2nd planned subgoal matches the 2nd gold subgoal or none
    assert _grounds_with_gold("web", 2, planned, gold) is None
    assert _grounds_with_gold("game", 3, planned, gold) == "R3 = Click(x3)"
    # maths, QA...: any gold subgoal not used yet
    assert _grounds_with_gold("qa", 2, planned, gold) == "R3 = Click(x3)"


# ------------------------------------------------------------------------ matching rule
def test_matching_rule_cases():
    gold = ["Subgoal 1: Calculate the total cost of the apples.",
            "Subgoal 2: Select the most relevant features of item b0qi6s621x.",
            "Subgoal 3: Calculate the total cost of the apples and pears."]
    # equal after normalisation (label, case, punctuation, articles)
    assert match_subgoal("Subgoal 7: calculate total cost of apples", gold) == (0, 1.0)
    # equal to the third once normalised, though the first is close too (F1 0.83)
    assert match_subgoal("Calculate the total cost of apples and the pears", gold) == (2, 1.0)
    # one token more than the first (5 of 6 shared: F1 0.909), than the third 0.769: the first
    score = subgoal_score("Calculate the total cost of the red apples", gold[0])
    assert score == pytest.approx(2 * 5 / 6 * 1 / (5 / 6 + 1))
    assert match_subgoal("Calculate the total cost of the red apples", gold)[0] == 0
    # another item id: a digit token differs, never a match however close the words
    assert subgoal_score("Select the most relevant features of item b0zzzzzzzz.", gold[1]) == 0
    # below the threshold: F1 of "compute cost" against five tokens is 2*1/2*1/5/(0.5+0.2)=0.29
    assert match_subgoal("Compute the cost", gold) is None
    assert match_subgoal("Compute the cost", gold, threshold=0.25) is not None
    # a gold subgoal is used once per episode: then the third, 5 of 7 tokens (F1 10/12)
    assert match_subgoal("Calculate the total cost of the apples", gold, used={0}) == (
        2, pytest.approx(5 / 6))
    assert match_subgoal("Calculate the total cost of the apples", gold, used={0, 2}) is None


def test_adopt_actions_keeps_gold_names_when_free_and_renames_otherwise():
    names = {}
    assert adopt_actions("R1 = Calculator(36*3/4)", names, []) == "R1 = Calculator(36*3/4)"
    assert names == {"R1": "R1"}
    # the episode bound R1 and R2 itself: gold R2 becomes R3; its reference R1 is gold R1's
    assert adopt_actions("R2 = Calculator(R1+5)", names, ["R1", "R2"]) == "R3 = Calculator(R1+5)"
    # gold R3 reads gold R2, now R3; gold R3 itself can keep no name below R4
    text = "R3 = Calculator(36-R2); R4 = Calculator(R3*2)"
    assert adopt_actions(text, names, ["R1", "R2", "R3"]) == (
        "R4 = Calculator(36-R3); R5 = Calculator(R4*2)"
    )
    assert adopt_actions("not an action (", {}, ["R1"]) == "not an action ("


# --------------------------------------------------------------------------- attribution
def _rec(task, reward, status="completed", tool_errors=0, turns=()):
    return {"env_id": f"lumos/{task[0]}", "task_id": task, "reward": reward, "status": status,
            "tool_errors": tool_errors, "reason": None, "turns": list(turns)}


GOLD_TURN = {"role": "grounder", "output": "R1 = Calculator(1)", "gold": True}


def test_attribution_hand_checked_cases():
    agent = {  # env A: six episodes, one solved; env B: one failed
        "A1": _rec("A1", 1.0), "A2": _rec("A2", 0.0), "A3": _rec("A3", 0.5),
        "A4": _rec("A4", 0.0, tool_errors=2), "A5": _rec("A5", 0.0), "A6": _rec("A6", 0.0),
        "B1": _rec("B1", 0.0, status="env-error"),
    }
    plan = {
        "A1": _rec("A1", 1.0), "A2": _rec("A2", 1.0), "A3": _rec("A3", 0.0),
        "A4": _rec("A4", 0.0), "A5": _rec("A5", 0.0),
        "A6": _rec("A6", 0.0, status="agent-error") | {"reason": "ValueError: no gold plan"},
        "B1": _rec("B1", 0.0),
    }
    ground = {
        "A2": _rec("A2", 1.0, turns=[GOLD_TURN]),   # planning comes first
        "A3": _rec("A3", 1.0, turns=[GOLD_TURN]),   # grounding
        "A4": _rec("A4", 1.0),                      # solved without gold actions: not grounding
        "A5": _rec("A5", 0.0, turns=[GOLD_TURN]),   # unexplained
        "B1": _rec("B1", 0.0),
    }                                               # A6: missing here, no gold plan there
    result = attribute(agent, plan, ground, run="lumos-i", agent="lumos-i")
    modules = {k: e.module for k, e in result.episodes.items()}
    assert modules == {"A2": "planning", "A3": "grounding", "A4": "execution",
                       "A5": "unexplained", "A6": "unexplained", "B1": "execution"}
    a, b, total = result.envs["lumos/A"], result.envs["lumos/B"], result.envs["all"]
    assert (a.episodes, a.failed, a.tool_errors, a.no_counterfactual) == (6, 5, 1, 1)
    assert a.modules == {"planning": 1, "grounding": 1, "execution": 1, "unexplained": 2}
    assert a.share("unexplained") == 0.4 and b.modules["execution"] == 1
    assert (total.episodes, total.failed) == (7, 6) and list(result.envs)[-1] == "all"
    assert result.episodes["A6"].gold_plan is None and result.episodes["A3"].gold_grounded == 1
    table = render_markdown(result)
    assert "| A | 6 | 5 | 1 (20%) | 1 (20%) | 1 (20%) | 2 (40%) | 1 (20%) | 1 |" in table
    assert "| all | 7 | 6 | 1 (17%) | 1 (17%) | 2 (33%) | 2 (33%) | 1 (17%) | 1 |" in table
    # without counterfactual runs nothing is planning or grounding
    alone = attribute(agent)
    assert alone.envs["all"].modules == {"planning": 0, "grounding": 0, "execution": 2,
                                         "unexplained": 4}


# ----------------------------------------------------------------- end to end, scripted
def _scripts():
    """Lumos-I's scripted modules: on the muffins it plans well and grounds badly, on the buses
    it plans badly and grounds every gold subgoal well."""
    muffins, buses = _gold(MUFFINS), _gold(BUSES)
    plans = {"Lena": [s["subgoal"] for s in muffins], "buses": ["Subgoal 1: Count the seats"]}
    right = {s["subgoal"]: s["actions"] for s in buses}

    def planner(request):
        plan = plans["Lena" if "Lena" in request.prompt else "buses"]
        turn = request.prompt.count("<|assistant|>")
        return prompts.plan_turn(turn, plan[turn - 1]) if turn <= len(plan) else (
            prompts.STOP_PLANNING)

    return planner, lambda r: right.get(_subgoal_asked(r), "R1 = Calculator(1+1)")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("attribution")
    planner, grounder = _scripts()
    for agent, folder in (("lumos-i", "lumos-i"), ("lumos-i+gold-plan", "gold-plan"),
                          ("lumos-i+gold-ground", "gold-ground")):
        backends = {"planner": ScriptedBackend(planner), "grounder": ScriptedBackend(grounder)}
        evaluate(RunConfig(agent, envs=["GSM8K-v0"], limit=2, out=root / folder,
                           backends=backends, progress=False))
    return root


@pytest.mark.full
def test_attribute_verb_on_real_runs(results, capsys):
    attribution, warnings = attribute_runs(results / "lumos-i", results / "gold-plan",
                                           results / "gold-ground")
    assert warnings == []
    modules = {e.task_id: e.module for e in attribution.episodes.values()}
    assert modules == {MUFFINS: "grounding", BUSES: "planning"}
    # the same episode keys: the counterfactual envs are not privileged
    keys = [json.loads(line)["key"] for line in
            (results / "gold-plan" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(keys) == sorted(attribution.episodes)
    assert main(["attribute", str(results / "lumos-i"), "--gold-plan",
                 str(results / "gold-plan"), "--gold-ground", str(results / "gold-ground")]) == 0
    out = capsys.readouterr().out
    assert "| GSM8K-v0 | 2 | 2 | 1 (50%) | 1 (50%) | 0 (0%) | 0 (0%) | 0 (0%) | 0 |" in out
    assert main(["attribute", str(results / "lumos-i"), "--gold-plan",
                 str(results / "gold-plan"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["envs"]["all"]["modules"]["planning"] == 1
    # a folder given as the wrong counterfactual, or a run of another agent, is refused
    with pytest.raises(AttributionError, match="gold grounding run, given as the gold plan"):
        attribute_runs(results / "lumos-i", gold_plan=results / "gold-ground")
    with pytest.raises(AttributionError, match="not a counterfactual of lumos-i"):
        attribute_runs(results / "lumos-i", gold_plan=results / "lumos-i")


@pytest.mark.full
def test_attribution_on_the_leaderboard_and_trajectory_pages(results, tmp_path):
    board = load_board([results])
    kinds = {e.name: e.rank_text for e in board.entries}
    assert kinds == {"lumos-i": "1", "gold-plan": "counterfactual",
                     "gold-ground": "counterfactual"}
    assert [e.name for e in board.entries][0] == "lumos-i"  # counterfactuals are never ranked
    [attribution] = board.attributions
    assert attribution.run == "lumos-i" and attribution.envs["all"].failed == 2
    text = board_markdown(board)
    assert "## Module attribution" in text
    assert "| GSM8K-v0 | 2 | 2 | 1 (50%) | 1 (50%) | 0 (0%) | 0 (0%) | 0 (0%) | 0 |" in text
    render_html(board, tmp_path / "index.html")
    page = (tmp_path / "index.html").read_text()
    assert "Module attribution" in page and "index-trajectories/lumos-i/GSM8K-v0.html" in page
    viewer = (tmp_path / "index-trajectories" / "lumos-i" / "GSM8K-v0.html").read_text()
    assert viewer.count("attributed to") == 2
    assert "attributed to</span> grounding: reward 0;" in viewer
    assert "attributed to</span> planning: reward 0;" in viewer
