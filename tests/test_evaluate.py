"""``lumos-gym evaluate``: suites, results files, resume, summary and the command line."""

from __future__ import annotations

import json
import math

import pytest
from conftest import ScriptedBackend

from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.output import ResultsFile
from lumos_gym.evaluation.suites import SUITES, suite_entries
from lumos_gym.evaluation.summary import format_table, mean_se, summarize
from lumos_gym.leaderboard.render import load_board


def test_oracle_evaluation_writes_results_and_summary(tmp_path):
    evaluate(RunConfig("oracle", envs=["GSM8K-v0", "lumos/SVAMP-v0"], limit=3, out=tmp_path,
                       progress=False))
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 6
    records = [json.loads(line) for line in lines]
    assert {r["status"] for r in records} == {"completed"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["overall"]["mean"] == 1.0 and summary["overall"]["episodes"] == 6
    assert set(summary["envs"]) == {"lumos/GSM8K-v0", "lumos/SVAMP-v0"}
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["agent"]["name"] == "oracle" and run["lumos_gym"]
    assert all(record["key"] and record["turns"] for record in records)


def test_a_killed_run_resumes_without_losing_or_repeating(tmp_path):
    calls = []

    def answer(request):
        calls.append(request)
        return "4"

    backend = ScriptedBackend(answer)
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=4, out=tmp_path,
                       backends={"policy": backend}, progress=False))
    assert len(calls) == 4
    path = tmp_path / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])  # killed mid-write
    calls.clear()
    with pytest.raises(EvaluationError, match="already holds 2 episodes; pass --resume"):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=4, out=tmp_path,
                           backends={"policy": backend}, progress=False))
    assert not calls
    result = evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=4, out=tmp_path, resume=True,
                                backends={"policy": backend}, progress=False))
    assert len(calls) == 2 and result.resumed == 2
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == 4 and len({r["key"] for r in records}) == 4
    assert result.summary["overall"]["episodes"] == 4


def test_results_file_recovers_only_complete_lines(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"key": "a", "x": 1}\n{"key": "b"')
    results = ResultsFile(path)
    assert list(results.done) == ["a"]
    results.append({"key": "c"})
    results.close()
    assert path.read_text() == '{"key": "a", "x": 1}\n{"key": "c"}\n'


def test_mean_se_uses_the_sample_deviation():
    assert mean_se([]) == (0.0, 0.0)
    assert mean_se([1.0]) == (1.0, 0.0)
    mean, se = mean_se([0.0, 1.0, 1.0, 0.0])
    assert mean == 0.5 and math.isclose(se, math.sqrt((4 * 0.25 / 3) / 4))


def test_summary_counts_every_status():
    records = [
        {"env_id": "e", "reward": 1.0, "status": "completed"},
        {"env_id": "e", "reward": 0.0, "status": "agent-error"},
    ]
    summary = summarize(records)
    assert summary["envs"]["e"]["statuses"]["agent-error"] == 1
    table = format_table(summary)
    assert "0.500 ± 0.500" in table and "agent-error 1" in table


def test_suites_and_bad_names():
    assert [e.env_id for e in suite_entries()] == [e.env_id for e in SUITES["default"]]
    assert suite_entries(envs=["GSM8K-v0"], limit=2)[0].limit == 2
    with pytest.raises(EvaluationError, match="unknown suite"):
        suite_entries(suite="nope")
    with pytest.raises(EvaluationError, match="not both"):
        suite_entries(envs=["GSM8K-v0"], suite="math")
    with pytest.raises(EvaluationError, match="needs --base-url"):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1,
                           models=ModelOptions(backend="openai", model="m"), progress=False))


def test_cli_evaluate_prints_a_table(tmp_path, capsys):
    code = main(["evaluate", "--agent", "oracle", "--env", "MathWord-v0", "--limit", "2",
                 "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert "lumos/MathWord-v0" in out and "1.000 ± 0.000" in out and "overall" in out


@pytest.mark.parametrize(("flag", "value"), [("--limit", "0"), ("--limit", "-1"),
                                           ("--batch-size", "0"), ("--max-rounds", "0"),
                                           ("--max-new-tokens", "x"), ("--wall-timeout", "-2")])
def test_cli_refuses_counts_below_one_without_a_traceback(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as exited:
        main(["evaluate", "--agent", "oracle", flag, value, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"argument {flag}: " in err and "Traceback" not in err
    with pytest.raises(EvaluationError, match="--limit must be at least 1, got 0"):
        evaluate(RunConfig("oracle", envs=["SVAMP-v0"], limit=0, out=tmp_path, progress=False))


def test_every_env_that_cannot_be_planned_is_named_at_once(tmp_path):
    suite = tmp_path / "two.json"
    suite.write_text(json.dumps({"name": "two", "description": "d", "envs": [
        {"env": "lumos/GSM8K-v0", "kwargs": {"source": str(tmp_path / "no-gsm8k.jsonl")}},
        {"env": "lumos/SVAMP-v0", "kwargs": {"source": str(tmp_path / "no-svamp.json")}},
    ]}))
    with pytest.raises(EvaluationError, match="2 envs cannot be planned") as raised:
        evaluate(RunConfig("oracle", suite=str(suite), out=tmp_path / "out", progress=False))
    assert "no-gsm8k.jsonl" in str(raised.value) and "no-svamp.json" in str(raised.value)


def test_cli_agents_lists_them(capsys):
    assert main(["agents"]) == 0
    out = capsys.readouterr().out
    assert "lumos-i" in out and "planner, grounder" in out and "react" in out


def test_cli_fails_fast_on_a_missing_model(tmp_path, capsys):
    code = main(["evaluate", "--model", str(tmp_path / "no-such-model"), "--limit", "1",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "no-such-model" in err
    assert not (tmp_path / "out" / "episodes.jsonl").exists() or not (
        tmp_path / "out" / "episodes.jsonl"
    ).read_text()


# ------------------------------------------------------------------ a real model, end to end
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from conftest import save_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model only pays for thread hand-offs
    yield save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=2048)
    torch.set_num_threads(threads)


def _actions(result):
    return {
        r["task_id"]: [(t.get("role"), t.get("output"), t.get("action")) for t in r["turns"]]
        for r in result.records
    }


@pytest.mark.parametrize("agent", ["lumos-i", "lumos-o", "integrated", "react", "cot", "direct"])
@pytest.mark.full
def test_batched_and_sequential_greedy_runs_give_identical_actions(tiny_model, tmp_path, agent):
    from lumos_gym.agents.base import AgentConfig

    runs = {}
    for batch_size in (1, 4):
        runs[batch_size] = evaluate(RunConfig(
            agent, envs=["MathWord-v0"], limit=4,
            models=ModelOptions(model=str(tiny_model), batch_size=batch_size,
                                options={"device": "cpu"}),
            agent_config=AgentConfig(max_new_tokens=10, max_rounds=2),
            out=tmp_path / f"batch-{batch_size}", progress=False,
        ))
    assert len(runs[1].records) == 4
    assert all(r["output_tokens"] > 0 for r in runs[1].records)
    assert _actions(runs[1]) == _actions(runs[4])


def test_planner_and_grounder_adapters_on_one_base(tiny_model, tmp_path):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    folders = {}
    for seed, role in enumerate(["planner", "grounder"]):
        import torch

        torch.manual_seed(seed)
        base = AutoModelForCausalLM.from_pretrained(tiny_model)
        config = peft.LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False)
        folders[role] = tmp_path / role
        peft.get_peft_model(base, config).save_pretrained(folders[role])
    code = main(["evaluate", "--model", str(tiny_model), "--env", "GSM8K-v0", "--limit", "2",
                 "--adapter", f"planner={folders['planner']}",
                 "--adapter", f"grounder={folders['grounder']}", "--device", "cpu",
                 "--max-new-tokens", "6", "--max-rounds", "1", "--out", str(tmp_path / "out"),
                 "--no-progress"])
    assert code == 0
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["backends"]["planner"]["details"]["adapter"] == "planner"
    assert run["backends"]["grounder"]["details"]["adapter"] == "grounder"
    with pytest.raises(Exception, match="adapter"):
        evaluate(RunConfig("lumos-i", envs=["GSM8K-v0"], limit=1, progress=False,
                           out=tmp_path / "x",
                           models=ModelOptions(model=str(tiny_model),
                                               adapters={"*": str(tmp_path / "no")})))


@pytest.mark.full
def test_evaluate_over_http_against_lumos_gym_serve(tiny_model, tmp_path):
    """`lumos-gym serve` in its own process, `evaluate --backend openai` against it."""
    from conftest import served

    with served(tiny_model) as url:
        code = main(["evaluate", "--backend", "openai", "--base-url", url, "--model", "tiny",
                     "--agent", "lumos-o", "--env", "GSM8K-v0", "--limit", "3",
                     "--max-new-tokens", "8", "--out", str(tmp_path), "--no-progress"])
        assert code == 0
        records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").open()]
        assert len(records) == 3 and all(r["status"] == "completed" for r in records)
        assert all(r["output_tokens"] > 0 for r in records)
        assert main(["evaluate", "--backend", "openai", "--base-url", url, "--model", "tini",
                     "--limit", "1", "--out", str(tmp_path / "wrong"), "--no-progress"]) == 2
    shown = load_board([tmp_path]).entries[0].models
    assert shown == "grounder: tiny (openai), planner: tiny (openai)"


def test_resume_refuses_results_of_another_configuration(tmp_path):
    backend = ScriptedBackend(lambda request: "4")
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=tmp_path,
                       backends={"policy": backend}, progress=False))
    with pytest.raises(EvaluationError, match="another configuration"):
        evaluate(RunConfig("cot", envs=["GSM8K-v0"], limit=1, out=tmp_path,
                           backends={"policy": backend}, resume=True, progress=False))
    again = evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=tmp_path, resume=True,
                               backends={"policy": backend}, progress=False))
    assert again.resumed == 1 and again.summary["overall"]["episodes"] == 2


def test_resume_refuses_results_of_other_numerics(tmp_path):
    fp32 = ScriptedBackend(lambda request: "4", details={"dtype": "float32", "weights": "f32"})
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=tmp_path,
                       backends={"policy": fp32}, progress=False))
    run = json.loads((tmp_path / "run.json").read_text())
    # fp32 adds nothing: folders written before numerics were fingerprinted still resume
    assert run["fingerprint"]["models"] == {"policy": ["scripted", "scripted", None]}
    for details, shown in (({"dtype": "bfloat16"}, "bfloat16"),
                           ({"dtype": "float32", "weights": "int8"}, "int8 weights")):
        other = ScriptedBackend(lambda request: "4", details=details)
        with pytest.raises(EvaluationError, match=f"another configuration.*{shown}"):
            evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=tmp_path, resume=True,
                               backends={"policy": other}, progress=False))
    again = evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=tmp_path, resume=True,
                               backends={"policy": fp32}, progress=False))
    assert again.resumed == 1
    bf16 = ScriptedBackend(lambda request: "4", details={"dtype": "bfloat16"})
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=tmp_path / "bf16",
                       backends={"policy": bf16}, progress=False))
    shown = load_board([tmp_path / "bf16"]).entries[0].models
    assert shown == "policy: scripted (bfloat16)"


def _adapter(folder, weights: bytes):
    """An adapter folder as provenance reads it: only its weights file is checksummed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return {"adapter": "policy", "adapters": {"policy": str(folder)}}


def test_resume_refuses_other_adapter_weights_under_the_same_name(tmp_path):
    out = tmp_path / "run"
    first = ScriptedBackend(lambda request: "4", details=_adapter(tmp_path / "a", b"seed 0"))
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=out,
                       backends={"policy": first}, progress=False))
    retrained = ScriptedBackend(lambda request: "4", details=_adapter(tmp_path / "a", b"seed 1"))
    with pytest.raises(EvaluationError, match="another configuration.*adapter weights"):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=out, resume=True,
                           backends={"policy": retrained}, progress=False))
    moved = ScriptedBackend(lambda request: "4", details=_adapter(tmp_path / "b", b"seed 0"))
    again = evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=out, resume=True,
                               backends={"policy": moved}, progress=False))
    assert again.resumed == 1  # the same weights in another folder: the same configuration


def test_resume_refuses_an_env_whose_tasks_changed_under_the_same_arguments(tmp_path):
    data = tmp_path / "gsm8k.jsonl"
    record = {"question": "Ann has 2 pens and buys 2. How many?", "answer": "2+2 = 4\n#### 4"}
    data.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    backend = ScriptedBackend(lambda request: "4")

    def run(resume):
        return evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=tmp_path / "run",
                                  env_kwargs={"source": str(data)}, resume=resume,
                                  backends={"policy": backend}, progress=False))

    run(False)
    assert run(True).resumed == 2  # the same file: resumed
    record["question"] = "Bob has 3 pens and buys 1. How many?"  # another task, the same id
    data.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(EvaluationError, match="other tasks of lumos/GSM8K-v0"):
        run(True)
