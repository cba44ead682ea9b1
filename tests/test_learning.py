"""Learning from the envs: token capture, expert iteration and GRPO (issue 21).

The unit tests run on plain data; the ``full`` ones run the tiny random Llama of conftest.py
(4096 positions, as Lumos prompts are long) through the command line and the training loops.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lumos_gym.agents.tokens import compact_calls, expand_calls, read_tokens
from lumos_gym.errors import LumosGymError
from lumos_gym.models.base import TokenTrace


# ------------------------------------------------------------------------- token entries
def test_call_entries_share_the_prefix_of_an_earlier_call_and_expand_back():
    first = TokenTrace(tuple(range(20)), (100, 101), (-0.5, -0.25))
    # the planner's next prompt re-reads the first prompt and answer, then a feedback turn
    second = TokenTrace((*range(20), 100, 101, 7, 8), (102,), (-1.0,), loss_mask=(1,))
    other = TokenTrace((50, 51), (52,), (-2.0,))
    entries = compact_calls([(0, "planner", first), (2, "grounder", other),
                             (4, "planner", second)])
    assert entries[2]["prefix"] == [0, 22] and entries[2]["prompt_ids"] == [7, 8]
    assert "prefix" not in entries[0] and "loss_mask" not in entries[0]
    assert entries[2]["loss_mask"] == [1]
    expanded = expand_calls(json.loads(json.dumps(entries)))
    assert expanded[2]["prompt_ids"] == list(second.prompt_ids)
    assert [e["turn"] for e in expanded] == [0, 2, 4]
    assert expanded[0]["logprobs"] == [-0.5, -0.25]


def test_read_tokens_skips_a_torn_last_line_and_keeps_the_last_line_of_an_episode(tmp_path):
    path = tmp_path / "tokens.jsonl"
    one = compact_calls([(0, "policy", TokenTrace((1, 2), (3,), (-0.1,)))])
    two = compact_calls([(0, "policy", TokenTrace((1, 2), (4,), (-0.2,)))])
    path.write_text(json.dumps({"key": "a", "calls": one}) + "\n"
                    + json.dumps({"key": "a", "calls": two}) + "\n" + '{"key": "b", "ca')
    found = read_tokens(path)
    assert list(found) == ["a"] and found["a"][0]["completion_ids"] == [4]


def test_a_trace_needs_one_logprob_per_token():
    with pytest.raises(ValueError):
        TokenTrace((1,), (2, 3), (-0.1,))


# ----------------------------------------------------------------- the tiny model, captured
torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from conftest import save_tiny_model  # noqa: E402

from lumos_gym.cli import main  # noqa: E402

MATH = ["--agent", "lumos-i", "--env", "lumos/MathWord-v0", "-k", "num_tasks=3",
        "-k", "levels=[1]", "--device", "cpu", "--max-new-tokens", "12", "--max-rounds", "2",
        "--no-progress", "--backend", "hf"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)  # a tiny model only pays for thread hand-offs
    return save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=4096)


def _teacher_forced(model, trace: dict) -> list[float]:
    ids = torch.tensor([trace["prompt_ids"] + trace["completion_ids"]])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits.float(), dim=-1)[0]
    start = len(trace["prompt_ids"]) - 1
    return [logprobs[start + j, t].item() for j, t in enumerate(trace["completion_ids"])]


@pytest.mark.full
def test_evaluate_record_tokens_writes_each_calls_tokens_beside_the_episodes(tmp_path, tiny):
    from transformers import AutoModelForCausalLM

    from lumos_gym.leaderboard.render import validate_dir

    out = tmp_path / "results"
    assert main(["evaluate", *MATH, "-k", "split=train", "--model", str(tiny), "--temperature",
                 "1.0", "--record-tokens", "--out", str(out)]) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").open()]
    tokens = read_tokens(out / "tokens.jsonl")
    assert len(episodes) == 3 and set(tokens) == {e["key"] for e in episodes}
    assert all("tokens" not in e for e in episodes)  # the episode file keeps its layout
    assert validate_dir(out) == []
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    for episode in episodes:
        calls = tokens[episode["key"]]
        asked = [i for i, turn in enumerate(episode["turns"]) if "role" in turn]
        assert [c["turn"] for c in calls] == asked
        for call in calls:
            assert call["role"] == episode["turns"][call["turn"]]["role"]
            assert len(call["logprobs"]) == len(call["completion_ids"]) > 0
            expected = _teacher_forced(model, call)
            assert max(abs(a - b) for a, b in zip(expected, call["logprobs"], strict=True)) < 1e-3
    # without the flag no sidecar is written
    plain = tmp_path / "plain"
    assert main(["evaluate", *MATH, "-k", "split=train", "--model", str(tiny), "--limit", "1",
                 "--out", str(plain)]) == 0
    assert not (plain / "tokens.jsonl").exists()


# ----------------------------------------------------------------------- expert iteration
def _answers_of(records: list[dict]) -> dict[str, str]:
    """Every prompt a Lumos agent sends for these exported conversations → the record's answer."""
    from lumos_gym import prompts

    answers = {}
    for record in records:
        messages = record["messages"]
        for i, message in enumerate(messages):
            if message["role"] == "assistant":
                answers[prompts.render_inference(messages[:i])] = message["content"]
    return answers


@pytest.mark.full
def test_an_expert_iteration_round_exports_the_good_episodes_and_trains_on_them(
    tmp_path, tiny, capsys
):
    from conftest import ScriptedBackend

    from lumos_gym.conversion.annotation import read_annotations
    from lumos_gym.conversion.exports import export_records
    from lumos_gym.conversion.pipeline import convert_env
    from lumos_gym.evaluation.evaluate import RunConfig, evaluate

    env = ("lumos/MathWord-v0", {"split": "train", "num_tasks": 4, "levels": [1]})
    convert_env(env[0], out=tmp_path / "gold.jsonl", env_kwargs=env[1])
    gold = list(read_annotations(tmp_path / "gold.jsonl"))
    assert len(gold) == 4
    exported = {fmt: list(export_records(gold, fmt))
                for fmt in ("plan-iterative", "ground-iterative")}
    # the "sampled" modules: right on three tasks, a wrong action on the last one
    answers = _answers_of(exported["plan-iterative"] + exported["ground-iterative"])
    wrong = gold[-1].task

    def module(request):
        text = answers.get(request.prompt, "Subgoal 1: give up.")
        return text.replace("Calculator(", "Calculator(1+") if wrong in request.prompt else text

    backends = {role: ScriptedBackend(module) for role in ("planner", "grounder")}
    results = tmp_path / "samples"
    evaluate(RunConfig("lumos-i", envs=[env[0]], env_kwargs=env[1], backends=backends,
                       out=results, progress=False))
    out = tmp_path / "data"
    assert main(["export", "--from-results", str(results), "--min-reward", "1",
                 "--out", str(out)]) == 0
    assert "4 episodes, 1 below the reward" in capsys.readouterr().out
    for fmt, records in exported.items():
        kept = [json.loads(line)["messages"] for line in (out / f"{fmt}.jsonl").open()]
        # what the good episodes did is what the converted annotations say, byte for byte
        assert kept == [r["messages"] for r in records[:3]]
    assert all((out / f"{fmt}.jsonl").stat().st_size for fmt in ("integrated", "react", "cot"))
    report = json.loads((out / "export.json").read_text())
    assert report["annotations"] == 3 and report["sources"][0]["agent"] == "lumos-i"

    # the planner continues from its adapter on the kept records
    common = ["--base-model", str(tiny), "--max-steps", "2", "--max-length", "1024",
              "--batch-size", "2", "--eval-fraction", "0", "--report-to", "none",
              "--device", "cpu", "--threads", "1"]
    first, second = tmp_path / "planner-0", tmp_path / "planner-1"
    data = str(out / "plan-iterative.jsonl")
    assert main(["train", "--data", data, "--out", str(first), *common]) == 0
    assert main(["train", "--data", data, "--out", str(second), "--init-adapter", str(first),
                 *common]) == 0
    saved = json.loads((second / "lumos_train_config.json").read_text())
    assert saved["init_adapter"] == str(first)


# ----------------------------------------------------------------------------------- GRPO
def test_group_advantages_are_relative_to_the_group():
    from lumos_gym.training.grpo import group_advantages

    assert group_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    assert group_advantages([1.0, 0.0], scale=False) == [0.5, -0.5]
    scaled = group_advantages([1.0, 0.0, 0.0, 0.0])
    assert scaled[0] > 0 > scaled[1] and abs(sum(scaled)) < 1e-9


def test_the_grpo_loss_raises_the_logprob_of_a_better_than_average_completion():
    from lumos_gym.training.grpo import grpo_token_loss

    logp = torch.tensor([[-1.0, -2.0], [-1.0, -2.0]], requires_grad=True)
    loss, kl = grpo_token_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]),
                               torch.tensor([[1.0, 1.0], [1.0, 0.0]]), beta=0.1)
    loss.sum().backward()
    assert (logp.grad[0] < 0).all() and logp.grad[1, 0] > 0 and logp.grad[1, 1] == 0
    assert kl.abs().sum() == 0  # no divergence from an identical reference


def _start_adapter(tiny, folder, seed):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM",
                      init_lora_weights=False)  # random B: the adapter changes the model
    get_peft_model(model, lora).save_pretrained(folder)
    return str(folder)


def _lora_weights(folder):
    from safetensors.torch import load_file

    return load_file(f"{folder}/adapter_model.safetensors")


@pytest.mark.full
def test_a_tiny_grpo_run_trains_both_modules_checkpoints_and_resumes(tmp_path, tiny, monkeypatch):
    from lumos_gym.training import grpo as grpo_module

    # a random model never solves a task; reward the episodes by the spaces the modules wrote,
    # which vary between samples, so that every group teaches something
    monkeypatch.setattr(grpo_module, "episode_reward", lambda record, penalty=0.0: float(
        sum(turn.get("output", "").count(" ") for turn in record.turns)))
    adapters = {role: _start_adapter(tiny, tmp_path / f"start-{role}", n)
                for n, role in enumerate(("planner", "grounder"))}
    settings = dict(adapters=adapters, out=str(tmp_path / "grpo"), steps=2, tasks_per_step=2,
                    group_size=3, max_new_tokens=6, max_rounds=1, micro_batch=2, lr=1e-2,
                    save_steps=1, device="cpu", batch_size=6,
                    envs=[("lumos/MathWord-v0", {"split": "train", "num_tasks": 3,
                                                 "levels": [1]})])
    report = grpo_module.grpo(grpo_module.grpo_config("cpu-small", **settings))
    out = tmp_path / "grpo"
    assert [h["step"] for h in report["history"]] == [1, 2]
    assert all(h["samples"] > 0 and h["tokens"] > 0 for h in report["history"]), report["history"]
    assert report["history"][1]["kl"] > 0  # the second step's policy has left the reference
    assert report["sampled_tokens"] > 0 and report["device"] == "cpu"
    assert grpo_module.checkpoint_report(out / "checkpoint-1")["device"] == "cpu"  # per step
    for role, start in adapters.items():
        before, after = _lora_weights(start), _lora_weights(out / role)
        assert before.keys() == after.keys()
        assert any(not torch.equal(before[k], after[k]) for k in before)
        assert json.loads((out / role / "adapter_config.json").read_text())[
            "base_model_name_or_path"] == str(tiny)
        assert (out / "checkpoint-2" / role / "adapter_model.safetensors").is_file()
    with pytest.raises(grpo_module.TrainingError, match="--resume"):
        grpo_module.grpo(grpo_module.grpo_config("cpu-small", **settings))
    again = grpo_module.grpo(grpo_module.grpo_config("cpu-small", **{**settings, "steps": 3},
                                                     resume=True))
    assert [h["step"] for h in again["history"]] == [1, 2, 3]
    assert again["resumed_from_step"] == 2
    # the run's seconds count the steps of both sessions, this session's stand apart
    assert again["seconds"] == round(sum(h["seconds"] for h in again["history"]), 1)
    assert again["seconds"] >= report["seconds"] > 0  # the first session's steps included
    # the trained modules play through evaluate as any adapter does
    assert main(["evaluate", *MATH, "-k", "split=test", "--limit", "1", "--out",
                 str(tmp_path / "eval"), "--planner", str(out / "planner"), "--grounder",
                 str(out / "grounder")]) == 0


@pytest.mark.full
def test_the_improve_and_grpo_verbs_run_on_the_tiny_model(tmp_path, tiny, capsys):
    adapters = [f"--{role}={_start_adapter(tiny, tmp_path / role, n)}"
                for n, role in enumerate(("planner", "grounder"))]
    env = "MathWord-v0:split=train,num_tasks=2,levels=[1,2]"
    common = [*adapters, "--train-env", env, "--limit", "1", "--max-new-tokens", "6",
              "--max-rounds", "1", "--device", "cpu"]
    assert main(["grpo", *common, "--out", str(tmp_path / "grpo"), "--recipe", "cpu-small",
                 "--steps", "1", "--tasks-per-step", "1", "--group-size", "2"]) == 0
    assert "adapters: planner=" in capsys.readouterr().out
    # a random model keeps no episode: improve samples, exports and says so
    code = main(["improve", *common, "--out", str(tmp_path / "ei"), "--val-env",
                 "MathWord-v0:split=validation,num_tasks=1,levels=[1]", "--rounds", "1",
                 "--samples", "2"])
    assert code == 2 and "no plan-iterative record was kept" in capsys.readouterr().err
    exported = tmp_path / "ei" / "round-1" / "data" / "export.json"
    report = json.loads(exported.read_text())
    assert report["episodes"] == 2 and report["annotations"] == 0
    # run again: the samples and the export are there, so neither is made again
    exported.write_text(json.dumps({**report, "mark": 1}))
    code = main(["improve", *common, "--out", str(tmp_path / "ei"), "--val-env",
                 "MathWord-v0:split=validation,num_tasks=1,levels=[1]", "--rounds", "1",
                 "--samples", "2"])
    assert code == 2 and "no plan-iterative record was kept" in capsys.readouterr().err
    assert json.loads(exported.read_text())["mark"] == 1
    # learning rates to choose among are checked before anything runs
    code = main(["improve", *common, "--out", str(tmp_path / "ei-lr"), "--val-env",
                 "MathWord-v0:split=validation,num_tasks=1,levels=[1]", "--lr", "1e-3",
                 "--lr", "1e-3"])
    assert code == 2 and "positive and distinct" in capsys.readouterr().err
    assert not (tmp_path / "ei-lr").exists()
    # test episodes never choose nor train: a test split, or a suite marked test, is refused
    code = main(["improve", *common, "--out", str(tmp_path / "ei-test"), "--val-env",
                 "MathWord-v0:split=test,num_tasks=1,levels=[1]"])
    assert code == 2 and "--val-env lumos/MathWord-v0 serves the test split" in (
        capsys.readouterr().err)
    code = main(["improve", *common, "--out", str(tmp_path / "ei-test"), "--val-suite", "compare"])
    assert code == 2 and "--val-suite compare: a test suite" in capsys.readouterr().err
    testing = [a if a != env else "MathWord-v0:split=test,num_tasks=1,levels=[1]" for a in common]
    code = main(["grpo", *testing, "--out", str(tmp_path / "grpo-test")])
    assert code == 2 and "--train-env lumos/MathWord-v0 serves the test split" in (
        capsys.readouterr().err)
    assert not (tmp_path / "ei-test").exists() and not (tmp_path / "grpo-test").exists()


@pytest.mark.full
def test_each_learning_rate_trains_a_candidate_and_validation_keeps_the_best(tmp_path, tiny):
    from lumos_gym.agents.base import AgentConfig
    from lumos_gym.conversion.annotation import read_annotations
    from lumos_gym.conversion.exports import export_records, write_records
    from lumos_gym.conversion.pipeline import convert_env
    from lumos_gym.models.factory import ModelOptions
    from lumos_gym.training.trainer import REPORT_FILE
    from lumos_gym.workflows import improve as ei

    env = ("lumos/MathWord-v0", {"split": "train", "num_tasks": 2, "levels": [1]})
    convert_env(env[0], out=tmp_path / "gold.jsonl", env_kwargs=env[1])
    gold = list(read_annotations(tmp_path / "gold.jsonl"))
    folder = tmp_path / "round-1"
    for fmt in ("plan-iterative", "ground-iterative"):
        assert write_records(export_records(gold, fmt), folder / "data" / f"{fmt}.jsonl") == 2
    adapters = {role: _start_adapter(tiny, tmp_path / f"start-{role}", n)
                for n, role in enumerate(("planner", "grounder"))}
    config = ei.ImproveConfig(
        "lumos-i", adapters, tmp_path, [env],
        [("lumos/MathWord-v0", {"split": "validation", "num_tasks": 1, "levels": [1]})],
        lrs=[1e-3, 5e-2], models=ModelOptions(backend="hf", options={"device": "cpu"}),
        train={"max_steps": 2, "warmup_ratio": 0, "batch_size": 2, "eval_fraction": 0,
               "device": "cpu", "threads": 1},
        agent_config=AgentConfig(max_new_tokens=6, max_rounds=1))
    candidates = ei._train_candidates(config, folder, adapters)
    assert [c["lr"] for c in candidates] == [1e-3, 5e-2]
    seconds = ei.round_seconds(folder, candidates)  # no samples or export in this folder
    assert seconds["training"] > 0 and seconds["validation"] is not None
    assert seconds["sampling"] is None and seconds["export"] is None
    for c in candidates:
        for role, trained in c["adapters"].items():
            assert trained == str(folder / "models" / f"lr-{c['lr']:g}" / role)
            saved = json.loads((Path(trained) / "lumos_train_config.json").read_text())
            assert saved["lr"] == c["lr"] and saved["init_adapter"] == adapters[role]
        assert (folder / "validation" / f"lr-{c['lr']:g}" / "0" / "summary.json").is_file()
    small, large = (_lora_weights(c["adapters"]["planner"]) for c in candidates)
    start = _lora_weights(adapters["planner"])
    moved = [sum(float((w[k] - start[k]).abs().sum()) for k in start) for w in (small, large)]
    assert 0 < moved[0] < moved[1]  # each candidate trained at its own rate
    assert ei.best_candidate(candidates) is max(candidates, key=lambda c: c["validation"])
    # a run again with one of the rates reuses its candidate: nothing is trained or scored again
    again = ei._train_candidates(replace(config, lrs=[5e-2]), folder, adapters)
    assert again == candidates[1:]
    # a run killed while training a module (its folder there, no report) goes on in that folder
    report = Path(candidates[1]["adapters"]["planner"]) / REPORT_FILE
    report.unlink()
    again = ei._train_candidates(replace(config, lrs=[5e-2]), folder, adapters)
    assert report.is_file() and again[0]["adapters"] == candidates[1]["adapters"]
    with pytest.raises(LumosGymError, match="positive and distinct"):
        ei.ImproveConfig("lumos-i", adapters, tmp_path, [env], [env], lrs=[1e-3, 1e-3])


def test_a_rounds_seconds_are_read_from_the_files_its_steps_left(tmp_path):
    """A round killed after sampling and run again still reports the sampling it did."""
    from lumos_gym.training.trainer import REPORT_FILE
    from lumos_gym.workflows.improve import EXPORT_REPORT, round_seconds

    folder = tmp_path / "round-1"
    for n, (sub, spent) in enumerate([("samples/seed-0/0", 600), ("samples/seed-1/0", 700),
                                      ("validation/lr-0.0001/0", 90)]):
        results = folder / sub
        results.mkdir(parents=True)
        (results / "run.json").write_text(json.dumps({"started": "2026-11-26T10:00:00+0000"}))
        (results / "summary.json").write_text(json.dumps({"overall": {"output_tokens": n}}))
        done = datetime(2026, 11, 26, 10, 0, tzinfo=UTC).timestamp() + spent
        os.utime(results / "summary.json", (done, done))
    (folder / "data").mkdir()
    (folder / "data" / EXPORT_REPORT).write_text(json.dumps({"seconds": 660.5}))
    candidates = [{"lr": 1e-4, "adapters": {}}]
    for role, spent in (("planner", 476.1), ("grounder", 626.0)):
        module = folder / "models" / "lr-0.0001" / role
        module.mkdir(parents=True)
        (module / REPORT_FILE).write_text(json.dumps({"seconds": spent}))
        candidates[0]["adapters"][role] = str(module)
    assert round_seconds(folder, candidates) == {
        "sampling": 1300.0, "export": 660.5, "training": 1102.1, "validation": 90.0}
    (folder / "models" / "lr-0.0001" / "grounder" / REPORT_FILE).unlink()  # killed training
    assert round_seconds(folder, candidates)["training"] is None


def test_the_best_candidate_is_the_first_of_those_tied_on_validation():
    from lumos_gym.workflows.improve import best_candidate

    candidates = [{"lr": 1e-4, "validation": 0.5}, {"lr": 4e-4, "validation": (0.4 + 0.6) / 2},
                  {"lr": 1e-3, "validation": 0.25}]
    assert best_candidate(candidates)["lr"] == 1e-4
    assert best_candidate([*candidates, {"lr": 2e-3, "validation": 0.51}])["lr"] == 2e-3


def test_a_validation_tie_chooses_the_earlier_round():
    from lumos_gym.workflows.improve import chosen_round

    rounds = [{"round": 0, "validation": (0.6 + 0.7) / 2},
              {"round": 1, "validation": (0.525 + 0.775) / 2},
              {"round": 2, "validation": 0.5}]
    assert rounds[1]["validation"] > rounds[0]["validation"]  # by float rounding alone
    assert chosen_round(rounds)["round"] == 0
    assert chosen_round([*rounds, {"round": 3, "validation": 0.66}])["round"] == 3
