"""The agents and the runner, on the real math envs and tools, with scripted model answers."""

from __future__ import annotations

import pytest
from conftest import ScriptedBackend, turn_number

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym import prompts
from lumos_gym.agents import AGENTS, make_agent
from lumos_gym.agents.lumos import round_limit
from lumos_gym.agents.runner import STATUSES, EpisodeSpec, Runner
from lumos_gym.models.base import Completion

ENV = "lumos/GSM8K-v0"
TASK_ID = "gsm8k/sample/0"  # Lena's 36 muffins: sells 3/4, then 5 more; 4 are left
QUESTION = (
    "Lena bakes 36 muffins for a school fair. She sells 3/4 of them in the morning and 5 more in "
    "the afternoon. How many muffins does she have left at the end of the day?"
)
SUBGOALS = [
    "Subgoal 1: Calculate how many muffins Lena sells in the morning.",
    "Subgoal 2: Calculate how many muffins she sells in total.",
    "Subgoal 3: Calculate how many muffins are left.",
]
GROUNDED = ["R1 = Calculator(36*3/4)", "R2 = Calculator(R1+5)", "R3 = Calculator(36-R2)"]
PLANS = [SUBGOALS[0], *(prompts.KEEP_PLANNING + s for s in SUBGOALS[1:]), prompts.STOP_PLANNING]


def spec(task_id=TASK_ID, **kwargs):
    return EpisodeSpec(ENV, task_id, kwargs)


def by_turn(answers):
    """A script answering the k-th call of an episode with ``answers[k-1]``."""
    return lambda request: answers[min(turn_number(request), len(answers)) - 1] + "\nnoise"


def run(agent, backends, specs, **kwargs):
    return Runner(agent, backends, keep_prompts=True, **kwargs).run(specs)


def test_lumos_i_runs_the_original_loop_byte_for_byte():
    planner, grounder = ScriptedBackend(by_turn(PLANS)), ScriptedBackend(by_turn(GROUNDED))
    [record] = run(make_agent("lumos-i"), {"planner": planner, "grounder": grounder}, [spec()])
    assert record.status == "completed", record.reason
    assert record.prediction == "4" and record.reward == 1.0
    last_plan = planner.batches[-1][0].prompt
    assert last_plan == (
        "<|user|>\nPlease provide a reasonable subgoal-based plan to solve the given task.\n"
        f"Task: {QUESTION}; Initial Environment Description: None.\n<|assistant|>\n"
        f"{PLANS[0]}\n\n<|user|>\nThe executed result for Subgoal 1 is 27. Should we stop "
        f"planning?\n<|assistant|>\n{PLANS[1]}\n\n<|user|>\nThe executed result for Subgoal 2 is "
        f"32. Should we stop planning?\n<|assistant|>\n{PLANS[2]}\n\n<|user|>\nThe executed "
        "result for Subgoal 3 is 4. Should we stop planning?\n<|assistant|>\n"
    )
    last_ground = grounder.batches[-1][0].prompt
    instruction = prompts.GROUND_INSTRUCTIONS["maths"].replace("{task}", QUESTION)
    assert last_ground == (
        f"<|user|>\n{instruction}Subgoal to be grounded: {SUBGOALS[0]}\n<|assistant|>\n"
        f"{GROUNDED[0]}\n\n<|user|>\nSubgoal to be grounded: {SUBGOALS[1]}\n<|assistant|>\n"
        f"{GROUNDED[1]}\n\n<|user|>\nSubgoal to be grounded: {SUBGOALS[2]}\n<|assistant|>\n"
    )
    assert all(r.stop == prompts.MODULE_STOP for b in planner.batches for r in b)
    assert [t["action"] for t in record.turns if "action" in t] == [*GROUNDED, "Answer(R3)"]


def test_lumos_i_stops_at_an_execution_error_and_answers_the_last_value():
    grounded = ["R1 = Calculator(36*3/4)", "R2 = Calculator(R9 + 1)"]
    planner, grounder = ScriptedBackend(by_turn(PLANS)), ScriptedBackend(by_turn(grounded))
    [record] = run(make_agent("lumos-i"), {"planner": planner, "grounder": grounder}, [spec()])
    assert record.status == "completed" and record.prediction == "27" and record.reward == 0.0
    assert len(planner.batches) == 2


def test_lumos_i_round_limit():
    planner = ScriptedBackend(lambda r: "No, I will keep planning. Subgoal 9: Add one more.")
    grounder = ScriptedBackend(lambda r: "R1 = Calculator(1+1)")
    agent = make_agent("lumos-i", max_rounds=3)
    [record] = run(agent, {"planner": planner, "grounder": grounder}, [spec()])
    assert len(planner.batches) == 3 and record.status == "completed"


def test_round_limits_are_the_original_loops():
    # allenai/lumos eval/*/run_eval.py: GSM8K 16 and SVAMP 4 alternating module calls,
    # HotpotQA 10, Mind2Web 15 rounds of a subgoal each, WebShop 10 alternating calls
    limits = {("math", "gsm8k/sample/0"): 8, ("math", "svamp/sample/sample-1"): 2,
              ("qa", "hotpotqa/sample/x"): 5, ("web", "mind2web/test_website/x"): 15,
              ("web", "webshop/test/0/0"): 5, ("game", "textworld/test/x/0"): 10}
    for (task_type, task_id), limit in limits.items():
        assert round_limit({"task_type": task_type, "task_id": task_id}) == limit, task_id
    planner = ScriptedBackend(lambda r: "No, I will keep planning. Subgoal 9: Add one more.")
    grounder = ScriptedBackend(lambda r: "R1 = Calculator(1+1)")
    [record] = run(make_agent("lumos-i"), {"planner": planner, "grounder": grounder},
                   [EpisodeSpec("lumos/SVAMP-v0", "svamp/sample/sample-1", {})])
    assert len(planner.batches) == 2 and record.status == "completed"


def test_lumos_o_plans_grounds_and_executes_once():
    plan = "; ".join(SUBGOALS)
    backend = ScriptedBackend(
        lambda r: plan if "subgoal-based plan" in r.prompt else "; ".join(GROUNDED)
    )
    [record] = run(make_agent("lumos-o"), {"planner": backend, "grounder": backend}, [spec()])
    assert record.status == "completed" and record.reward == 1.0
    ground_prompt = backend.batches[1][0].prompt
    instruction = prompts.GROUND_INSTRUCTIONS["maths"].replace("{task}", QUESTION)
    assert ground_prompt == (
        f"<|user|>\n{instruction}Subgoals to be grounded: {plan}\n<|assistant|>\n"
    )


INTEGRATED = [
    f"{SUBGOALS[0]}\nActions: {GROUNDED[0]}",
    f"No, I will keep planning. {SUBGOALS[1]}\nActions: {GROUNDED[1]}",
    f"No, I will keep planning. {SUBGOALS[2]}\nActions: {GROUNDED[2]}",
    "Yes, I will stop planning.",
]


def test_integrated_agent():
    policy = ScriptedBackend(by_turn(INTEGRATED))
    [record] = run(make_agent("integrated"), {"policy": policy}, [spec()])
    assert record.status == "completed" and record.reward == 1.0
    assert "The executed result for Subgoal 2 is 32. Should we stop planning?" in (
        policy.batches[-1][0].prompt
    )


def test_integrated_agent_keeps_one_subgoal_a_turn():
    """A model that writes on into later subgoals: only the executed one stays in the history."""
    answers = [f"{INTEGRATED[0]}\n{SUBGOALS[1]}\nActions: R2 = Calculator(0)", *INTEGRATED[1:]]
    policy = ScriptedBackend(by_turn(answers))
    [record] = run(make_agent("integrated"), {"policy": policy}, [spec()])
    assert record.status == "completed" and record.reward == 1.0
    second = policy.batches[1][0].prompt
    assert f"{SUBGOALS[0]}\nActions: {GROUNDED[0]}\n\n<|user|>\nThe executed result" in second
    assert "Calculator(0)" not in second
    # the record keeps what the model wrote
    assert "Calculator(0)" in record.turns[0]["output"]


def test_react_agent():
    steps = [
        f"Thought: first the morning sales.\nAction: {GROUNDED[0]}",
        f"Thought: then the total.\nAction: {GROUNDED[1]}; {GROUNDED[2]}",
        "Thought: done.\nAction: Answer(R3)",
    ]
    policy = ScriptedBackend(lambda r: steps[r.prompt.count("Observation:")])
    [record] = run(make_agent("react"), {"policy": policy}, [spec()])
    assert record.status == "completed" and record.reward == 1.0
    assert "Observation: R1 = 27\n" in policy.batches[-1][0].prompt


@pytest.mark.parametrize(
    ("agent", "answer"),
    [("cot", "She sells 27 then 32 in total, so 36-32=4. Answer is 4."), ("direct", "4")],
)
def test_cot_and_direct(agent, answer):
    policy = ScriptedBackend(lambda r: answer)
    [record] = run(make_agent(agent), {"policy": policy}, [spec()])
    assert record.status == "completed" and record.reward == 1.0
    assert policy.batches[0][0].prompt == f"<|user|>\n{QUESTION}\n<|assistant|>\n"


def test_oracle_agent_replays_gold_actions():
    records = run(make_agent("oracle"), {}, [spec(privileged=True), spec("gsm8k/sample/1",
                                                                            privileged=True)])
    assert [r.status for r in records] == ["completed", "completed"]
    assert all(r.reward == 1.0 for r in records)


@pytest.mark.parametrize("name", ["lumos-i", "lumos-o", "integrated", "react", "cot", "direct"])
@pytest.mark.parametrize("garbage", ["", "(((", "R1 = Calculator(", "Answer(", "x" * 500])
@pytest.mark.full
def test_garbage_never_takes_the_run_down(name, garbage):
    agent = make_agent(name, max_rounds=2)
    backend = ScriptedBackend(lambda r: garbage)
    records = run(agent, {role: backend for role in agent.roles}, [spec(), spec("gsm8k/sample/1")])
    assert len(records) == 2
    assert all(r.status in STATUSES for r in records)


@pytest.mark.full
def test_batching_sends_all_pending_asks_together():
    backend = ScriptedBackend(by_turn(PLANS[:1] + [prompts.STOP_PLANNING]))
    grounder = ScriptedBackend(by_turn(GROUNDED))
    specs = [spec(f"gsm8k/sample/{i}") for i in range(8)]
    records = run(make_agent("lumos-i"), {"planner": backend, "grounder": grounder}, specs,
                  max_in_flight=8)
    assert len(records) == 8
    assert [len(b) for b in backend.batches] == [8, 8]
    assert [len(b) for b in grounder.batches] == [8]


def test_shared_backend_batches_both_roles():
    answers = {"plan": SUBGOALS[0], "ground": GROUNDED[0]}
    backend = ScriptedBackend(
        lambda r: answers["plan" if "subgoal-based plan" in r.prompt else "ground"]
    )
    specs = [spec(f"gsm8k/sample/{i}") for i in range(4)]
    run(make_agent("lumos-o"), {"planner": backend, "grounder": backend}, specs, max_in_flight=4)
    assert [len(b) for b in backend.batches] == [4, 4]


def test_backend_failure_and_context_limit_become_statuses():
    def explode(request):
        raise RuntimeError("the server is on fire")

    # a backend that raises failed as a whole (the machinery, not the agent): tried again, and
    # recorded as an infra-error once every try failed
    records = run(make_agent("direct"), {"policy": ScriptedBackend(explode)}, [spec()])
    assert records[0].status == "infra-error" and "on fire" in records[0].reason

    class TooLong(ScriptedBackend):
        def generate(self, requests):
            return [Completion("", "error", error="prompt exceeds the context length of 8")
                    for _ in requests]

    records = run(make_agent("direct"), {"policy": TooLong(str)}, [spec()])
    assert records[0].status == "context-limit"


def test_env_error_and_invalid_action_limit():
    records = run(make_agent("direct"), {"policy": ScriptedBackend(str)},
                  [EpisodeSpec(ENV, "no-such-task")])
    assert records[0].status == "env-error"
    react = make_agent("react", max_rounds=10)
    records = run(react, {"policy": ScriptedBackend(lambda r: "Action: R1 = Nope(1)")}, [spec()],
                  max_invalid_actions=3)
    assert records[0].status == "invalid-action-limit"


def test_registry_lists_the_agents_and_the_counterfactuals():
    assert set(AGENTS.names()) == {
        "lumos-i", "lumos-o", "integrated", "react", "cot", "direct", "oracle",
        "lumos-i+gold-plan", "lumos-i+gold-ground",
    }
    with pytest.raises(KeyError, match="Did you mean .*'lumos-i'"):
        make_agent("lumos-j")


def test_one_step_agents_cannot_act_where_the_env_needs_several_actions():
    from lumos_gym.agents.plugins import agent_can_act

    for name in ("cot", "direct"):
        assert not agent_can_act(name, "web") and not agent_can_act(name, "game")
        assert agent_can_act(name, "math") and agent_can_act(name, "qa")
    for name in ("lumos-i", "lumos-o", "integrated", "react", "oracle"):
        assert all(agent_can_act(name, kind) for kind in ("web", "game", "math"))
    assert agent_can_act("an-agent-not-known-here", "web")  # nothing says it cannot
