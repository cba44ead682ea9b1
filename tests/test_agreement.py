"""The agreement of two runs: module calls that saw the same prompt, and identical episodes."""

from __future__ import annotations

import gymnasium as gym
from conftest import ScriptedBackend

from lumos_gym.cli import main
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.leaderboard.agreement import Agreement, agreement, episode_agreement, overall
from lumos_gym.leaderboard.stats import pair_records


def _record(turns, status="completed", task_id="t1", env_id="lumos/GSM8K-v0"):
    return {"env_id": env_id, "task_id": task_id, "seed": 0, "task": "q", "status": status,
            "reward": 0.0, "turns": turns}


def _call(role, output, **extra):
    return {"role": role, "output": output, **extra}


def _step(action, observation):
    return {"action": action, "observation": observation}


EPISODE = [_call("planner", "Subgoal 1: add"), _call("grounder", "R1 = Calculator(1 + 2)"),
           _step("R1 = Calculator(1 + 2)", "R1 = 3"), _call("planner", "Subgoal 2: answer"),
           _call("grounder", "Answer(3)"), _step("Answer(3)", "Answer submitted: 3")]


def test_identical_episodes_compare_every_call():
    found = episode_agreement(_record(EPISODE), _record(list(EPISODE)))
    assert (found.episodes, found.same_episodes) == (1, 1)
    assert found.calls == {"planner": 2, "grounder": 2} and found.same == found.calls
    assert found.share == 1.0


def test_counting_stops_at_the_first_different_output():
    other = list(EPISODE)
    other[1] = _call("grounder", "R1 = Calculator(2 + 1)")
    found = episode_agreement(_record(EPISODE), _record(other))
    # the first planner call and the grounder call that differed saw the same prompt; later
    # calls saw another one and are not compared
    assert found.calls == {"planner": 1, "grounder": 1}
    assert found.same == {"planner": 1, "grounder": 0}
    assert (found.same_episodes, found.total_calls, found.total_same) == (0, 2, 1)


def test_a_different_observation_ends_the_comparison():
    other = list(EPISODE)
    other[2] = _step("R1 = Calculator(1 + 2)", "R1 = 3.0")  # a tool that answered otherwise
    found = episode_agreement(_record(EPISODE), _record(other))
    assert found.calls == {"planner": 1, "grounder": 1} and found.same == found.calls
    assert found.same_episodes == 0


def test_kept_prompts_decide_whether_a_call_is_compared():
    a = [_call("planner", "Subgoal 1: add", prompt="p1"), _call("grounder", "x", prompt="g1")]
    b = [_call("planner", "Subgoal 1: add", prompt="p1"), _call("grounder", "x", prompt="g2")]
    found = episode_agreement(_record(a), _record(b))
    assert found.calls == {"planner": 1} and found.same == {"planner": 1}
    # one run without prompts: the prompts are not part of the comparison
    found = episode_agreement(_record(a), _record([_call("planner", "Subgoal 1: add"),
                                                   _call("grounder", "x")]))
    assert found.calls == {"planner": 1, "grounder": 1} and found.same_episodes == 1


def test_gold_turns_are_not_calls_and_status_counts_for_same_episodes():
    gold = [_call("planner", "Subgoal 1: add", gold=True), *EPISODE[1:]]
    found = episode_agreement(_record(gold), _record(list(gold), status="agent-error"))
    assert found.calls == {"grounder": 2, "planner": 1} and found.same == found.calls
    assert found.same_episodes == 0  # the same turns, another status
    shorter = episode_agreement(_record(EPISODE), _record(EPISODE[:3]))
    assert shorter.total_calls == shorter.total_same == 2 and shorter.same_episodes == 0


def test_agreement_per_env_and_overall():
    a = [_record(EPISODE, task_id="t1"), _record(EPISODE, task_id="t2"),
         _record(EPISODE, task_id="m1", env_id="lumos/MBPP-v0")]
    other = list(EPISODE)
    other[3] = _call("planner", "Subgoal 2: check")
    b = [_record(EPISODE, task_id="t1"), _record(other, task_id="t2"),
         _record(EPISODE, task_id="m1", env_id="lumos/MBPP-v0")]
    by_env = agreement(pair_records(a, b))
    assert set(by_env) == {"lumos/GSM8K-v0", "lumos/MBPP-v0"}
    gsm = by_env["lumos/GSM8K-v0"]
    assert (gsm.episodes, gsm.same_episodes, gsm.total_calls, gsm.total_same) == (2, 1, 7, 6)
    total = overall(by_env)
    assert (total.episodes, total.same_episodes, total.total_calls, total.total_same) == \
        (3, 2, 11, 10)
    assert total.to_dict()["by_role"] == {"grounder": {"calls": 5, "same_outputs": 5},
                                          "planner": {"calls": 6, "same_outputs": 5}}
    assert Agreement().share is None


def _answers(wrong_on):
    """A scripted model: answers every question with "3", and "4" on the question holding
    ``wrong_on`` (so two runs differ on that one episode)."""
    def answer(request):
        prompt = request.prompt or str(request.messages)
        return "The answer is 4" if wrong_on and wrong_on in prompt else "The answer is 3"
    return answer


def test_compare_prints_the_share_of_identical_outputs(tmp_path, capsys):
    env = gym.make("lumos/GSM8K-v0")
    first = env.unwrapped.tasks[0].question
    env.close()
    for name, wrong_on in (("a", None), ("b", first)):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=4, out=tmp_path / name,
                           backends={"policy": ScriptedBackend(_answers(wrong_on))},
                           progress=False, models=ModelOptions(batch_size=1)))
    assert main(["leaderboard", "--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    section = out.split("## The same outputs", 1)[1]
    assert "| GSM8K-v0 | 4 | 3/4 | 4 | 3/4 (75.0%) | 3/4 (75.0%) |" in section
    assert "| all | 4 | 3/4 | 4 | 3/4 (75.0%) | 3/4 (75.0%) |" in section
