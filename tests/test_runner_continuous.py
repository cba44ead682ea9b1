"""The runner's continuous batching, on the real math envs with stepped scripted backends.

A :class:`~conftest.SteppedBackend` decodes like a continuous-batching engine (each request a
scripted number of steps; it joins the running batch when submitted and leaves when done), so
these tests check what the runner does with one: an episode whose request finished asks again
while a long request of the same backend is still decoding, the records equal those of the
round-by-round path (``continuous=False``, one ``generate`` a turn), and a backend failure ends
only the episodes whose asks it held. Nothing here measures time.
"""

from __future__ import annotations

import pytest
from conftest import ScriptedBackend, SteppedBackend
from test_agents import GROUNDED, PLANS, SUBGOALS, by_turn

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym import prompts
from lumos_gym.agents import make_agent
from lumos_gym.agents.runner import EpisodeSpec, Runner
from lumos_gym.models.base import GenerationRequest, QueuedSession

ENV = "lumos/GSM8K-v0"
MUFFINS, BUSES, OMAR = "36 muffins", "14 buses", "Omar earns"  # tasks gsm8k/sample/0, 1, 2
TIMING = ("wall_s", "env_s", "tool_s", "model_s")


def spec(n: int) -> EpisodeSpec:
    return EpisodeSpec(ENV, f"gsm8k/sample/{n}")


def is_plan(request: GenerationRequest) -> bool:
    return "subgoal-based plan" in (request.prompt or "")


def about(text: str):
    return lambda request: text in (request.prompt or "")


def lumos_o_answer(request: GenerationRequest) -> str:
    return "; ".join(SUBGOALS) if is_plan(request) else "; ".join(GROUNDED)


def without_timing(records):
    return {r.task_id: {k: v for k, v in r.to_dict().items() if k not in TIMING} for r in records}


def test_a_finished_row_asks_again_while_a_long_one_decodes():
    # one backend for both roles (one session); the muffins plan takes 50 steps, the rest 2
    backend = SteppedBackend(
        lumos_o_answer, steps=lambda r: 50 if is_plan(r) and MUFFINS in r.prompt else 2
    )
    agent = make_agent("lumos-o")
    records = Runner(agent, {"planner": backend, "grounder": backend}).run([spec(0), spec(1)])
    assert [r.task_id for r in records] == ["gsm8k/sample/1", "gsm8k/sample/0"]
    assert all(r.status == "completed" for r in records)
    [long_done] = backend.finished_at(lambda r: is_plan(r) and MUFFINS in r.prompt)
    [bus_plan_done] = backend.finished_at(lambda r: is_plan(r) and BUSES in r.prompt)
    [bus_ground_asked] = backend.submitted_at(lambda r: not is_plan(r) and BUSES in r.prompt)
    [bus_ground_done] = backend.finished_at(lambda r: not is_plan(r) and BUSES in r.prompt)
    # the bus episode's next ask joined the batch the step after its plan left, and was answered,
    # while the muffins plan was still decoding
    assert bus_plan_done == bus_ground_asked == 2
    assert bus_ground_done == 4 < long_done == 50


def test_a_new_episode_starts_as_soon_as_one_ends():
    backend = SteppedBackend(lambda r: "4", steps=lambda r: 30 if MUFFINS in r.prompt else 1)
    records = Runner(make_agent("direct"), {"policy": backend}, max_in_flight=2).run(
        [spec(0), spec(1), spec(2)]
    )
    assert [r.task_id for r in records] == ["gsm8k/sample/1", "gsm8k/sample/2", "gsm8k/sample/0"]
    assert backend.submitted_at(about(OMAR)) == [1]  # started when the bus episode ended
    assert backend.finished_at(about(OMAR)) == [2] and backend.finished_at(about(MUFFINS)) == [30]


@pytest.mark.parametrize("agent_name", ["lumos-i", "lumos-o", "react"])
def test_records_equal_the_round_by_round_path(agent_name):
    scripts = {
        "lumos-i": {"planner": by_turn(PLANS), "grounder": by_turn(GROUNDED)},
        "lumos-o": {"planner": lumos_o_answer, "grounder": lumos_o_answer},
        "react": {"policy": lambda r: f"Thought: go.\nAction: {GROUNDED[0]}; Answer(R1)"},
    }[agent_name]
    specs = [spec(n) for n in range(5)]

    def steps(request: GenerationRequest) -> int:  # uneven lengths: episodes drift apart
        return 1 + (len(request.prompt or "") * 7) % 13

    def run(continuous: bool):
        backends = {role: SteppedBackend(script, steps) for role, script in scripts.items()}
        runner = Runner(make_agent(agent_name), backends, max_in_flight=3,
                        keep_prompts=True, continuous=continuous)
        return runner.run(specs), backends

    continuous, stepped = run(True)
    rounds, queued = run(False)
    assert without_timing(continuous) == without_timing(rounds)
    assert {r.status for r in continuous} == {"completed"}
    # the round-by-round path sent whole rounds; the continuous one a request at a time
    assert max(len(b) for backend in queued.values() for b in backend.batches) > 1
    assert all(len(b) == 1 for backend in stepped.values() for b in backend.batches)


def test_the_default_session_batches_each_turn_like_rounds():
    planner = ScriptedBackend(by_turn(PLANS[:1] + [prompts.STOP_PLANNING]))
    grounder = ScriptedBackend(by_turn(GROUNDED))
    assert isinstance(planner.open_session(), QueuedSession)
    records = Runner(make_agent("lumos-i"), {"planner": planner, "grounder": grounder},
                     max_in_flight=4).run([spec(n) for n in range(4)])
    assert len(records) == 4
    assert [len(b) for b in planner.batches] == [4, 4] and [len(b) for b in grounder.batches] == [4]


def test_a_backend_failure_ends_only_the_episodes_it_held():
    def ground(request: GenerationRequest) -> str:
        if BUSES in request.prompt:
            raise RuntimeError("the grounder is on fire")
        return "; ".join(GROUNDED)

    planner = SteppedBackend(lumos_o_answer, steps=lambda r: 30 if MUFFINS in r.prompt else 1)
    grounder = SteppedBackend(ground, steps=lambda r: 3)
    records = Runner(make_agent("lumos-o"), {"planner": planner, "grounder": grounder},
                     max_infra_retries=0).run([spec(0), spec(1), spec(2)])
    status = {r.task_id: (r.status, r.reason or "") for r in records}
    # the bus and Omar groundings were in flight together when the bus one failed: the
    # backend's failure, not the agents'
    assert status["gsm8k/sample/1"][0] == status["gsm8k/sample/2"][0] == "infra-error"
    assert "on fire" in status["gsm8k/sample/1"][1] and "on fire" in status["gsm8k/sample/2"][1]
    # the muffins plan, decoding on the planner meanwhile, went on; its grounding came later
    assert status["gsm8k/sample/0"] == ("completed", "")
    assert [r.task_id for r in records][-1] == "gsm8k/sample/0"
    assert grounder.submitted_at(about(MUFFINS)) == [3]  # the session stayed usable


def test_wall_timeout_and_statuses_in_flight():
    backend = SteppedBackend(lambda r: f"Action: {GROUNDED[0]}", steps=lambda r: 2)
    records = Runner(make_agent("react"), {"policy": backend}, wall_timeout=0.0).run(
        [spec(0), spec(1)]
    )
    assert [r.status for r in records] == ["step-limit", "step-limit"]
    assert all("wall timeout" in r.reason for r in records)
    assert all(len(r.turns) == 1 for r in records)  # ended on its first completion


def test_each_sampled_call_gets_its_own_seed_and_greedy_calls_keep_the_agents():
    def seeds(temperature: float) -> list[int]:
        planner = ScriptedBackend(by_turn(PLANS[:1] + [prompts.STOP_PLANNING]))
        grounder = ScriptedBackend(by_turn(GROUNDED))
        agent = make_agent("lumos-i", temperature=temperature, seed=7)
        specs = [spec(0), spec(1), EpisodeSpec(ENV, "gsm8k/sample/0", seed=1)]
        Runner(agent, {"planner": planner, "grounder": grounder}, max_in_flight=3).run(specs)
        return [r.seed for b in planner.batches + grounder.batches for r in b]

    sampled = seeds(0.7)
    assert len(sampled) == 9 and len(set(sampled)) == 9  # every task, episode seed and call
    assert sorted(seeds(0.7)) == sorted(sampled)  # and the same again
    assert seeds(0.0) == [7] * 9
