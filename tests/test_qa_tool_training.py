"""QA-tool training records from WorldQA, adapter folders as the QA model, the default model.

Records are built from real WorldQA train tasks; the tiny random Llama of conftest.py is
trained into a LoRA adapter on them with the real trainer, then serves as the ``QA`` tool's
model (named as a folder, and as the reference adapter the default model picks).
"""

from __future__ import annotations

import json
import re

import pytest

from lumos_gym.actions import parse_action
from lumos_gym.conversion.annotation import Annotation, make_subgoals, write_annotations
from lumos_gym.conversion.qa_tool import qa_tool_records, write_qa_tool_records
from lumos_gym.conversion.worldqa_rules import worldqa_annotation
from lumos_gym.envs.qa.worldqa import WorldQAEnv
from lumos_gym.tools import qa
from lumos_gym.tools.base import ToolContext
from lumos_gym.tools.qa import (
    DEFAULT_QA_MODEL,
    QA,
    QA_NO_CONTEXT_PROMPT,
    default_qa_model,
    parse_qa_output,
)

QUESTION = re.compile(r"\nQuestion: (.*)\n")


@pytest.fixture(scope="module")
def tasks():
    env = WorldQAEnv(split="train", num_tasks=2)  # two questions of each family
    try:
        return list(env.tasks)
    finally:
        env.close()


@pytest.fixture(scope="module")
def built(tasks):
    return qa_tool_records(tasks)


# ------------------------------------------------------------------------------------ records
def test_every_qa_call_of_the_gold_plans_gives_one_record(tasks, built):
    calls = sum(step.count("= QA(") for task in tasks for step in task.gold_actions)
    assert built.annotations == len(tasks) and not built.failed and built.skipped == 0
    assert len(built.records) + built.duplicates == calls
    assert built.kinds == {"context": len(built.records)} and built.unparsable == 0
    gold = {q: a for task in tasks for q, a in task.meta["sub_answers"].items()}
    for i, record in enumerate(built.records):
        assert record["dataset"] == "qa_tool" and record["id"] == f"qa_tool_{i}"
        user, assistant = record["messages"]
        assert (user["role"], assistant["role"]) == ("user", "assistant")
        question = QUESTION.search(user["content"]).group(1)
        assert assistant["content"] == f"Answer: {gold[question]}"
        assert parse_qa_output(assistant["content"]) == gold[question]
        assert "\nContext: Evidence 1: " in user["content"] or "same" in question


def test_records_hold_the_prompts_the_tool_sends(tasks, built, scripted):
    """A model that knows only the records solves every task through the real QA tool."""
    answers = {r["messages"][0]["content"]: r["messages"][1]["content"] for r in built.records}
    backend = scripted(lambda request: answers.get(request.messages[0]["content"], "No answer"))
    env = WorldQAEnv(split="train", num_tasks=2, qa_model=backend, retrieve_backend="bm25")
    try:
        for task in tasks:
            env.reset(options={"task_id": task.id})
            for step in task.gold_actions:
                _, reward, terminated, _, _ = env.step(step)
            assert terminated and reward == 1.0, task.id
    finally:
        env.close()
    sent = [request.messages[0]["content"] for batch in backend.batches for request in batch]
    assert set(sent) == set(answers)  # every prompt sent has a record, and no retry was sent


def test_ids_and_bytes_are_stable_and_annotation_files_give_the_same(tasks, built, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert write_qa_tool_records(tasks, first) == len(built.records)
    annotations = tmp_path / "worldqa-train.jsonl"
    plan = make_subgoals([("Add 1 and 2.", ["R1 = Calculator(1 + 2) = 3"])])
    other = Annotation("mathword/train/0", "mathword", "math", "Add 1 and 2.", plan, "3")
    write_annotations([other, *map(worldqa_annotation, tasks)], annotations)
    assert write_qa_tool_records([annotations], second) == len(built.records)
    assert first.read_bytes() == second.read_bytes()
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    assert rows == built.records == qa_tool_records(tasks).records
    assert qa_tool_records([annotations]).skipped == 1


def test_retry_prompts_are_added_only_on_request(tasks, built):
    with_retries = qa_tool_records(tasks[:1], include_retries=True)
    assert with_retries.kinds["no-context"] == with_retries.kinds["context"] > 0
    retry = with_retries.records[1]["messages"]
    question = QUESTION.search(with_retries.records[0]["messages"][0]["content"]).group(1)
    assert retry[0]["content"] == QA_NO_CONTEXT_PROMPT.format(question=question)
    assert retry[1] == with_retries.records[0]["messages"][1]


def test_a_world_built_otherwise_is_refused(tasks):
    with pytest.raises(Exception, match="world_options"):
        qa_tool_records(tasks[:1], world_options={"num_people": 40})


# ------------------------------------------------------------------------ adapters as models
@pytest.fixture(scope="module")
def adapter(tmp_path_factory, built):
    pytest.importorskip("peft")
    from conftest import save_tiny_model

    from lumos_gym.training import TrainConfig, train

    root = tmp_path_factory.mktemp("qa-adapter")
    tiny = save_tiny_model(root / "tiny", max_positions=2048)
    data = root / "qa-tool.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in built.records[:8]))
    config = TrainConfig(data=[str(data)], base_model=str(tiny), out=str(root / "adapter"),
                         max_steps=2, lr=1e-2, eval_fraction=0, batch_size=4, max_length=1024,
                         report_to="none", device="cpu", threads=1)
    return train(config).out


def _ask(tool: QA) -> tuple[str, list[dict]]:
    ctx = ToolContext(variables={"R1": "Ada Lovelace was born in London."})
    action = parse_action("R2 = QA([R1], Question: Where was Ada born?)")
    try:
        (answer,) = tool.run(action, ctx).values
        return answer, ctx.state["QA"]
    finally:
        tool.close()


@pytest.mark.full
def test_an_adapter_folder_is_a_qa_model(adapter):
    from lumos_gym.models.hf import HFBackend

    tool = QA(model=f"hf:{adapter}")
    answer, calls = _ask(tool)
    assert answer and calls and all(c["stop_reason"] != "error" for c in calls)
    assert tool.chat is False  # trained on Lumos' framing: the raw prompt, not a chat template
    with HFBackend(str(adapter), device="cpu") as backend:  # the folder alone is a model
        assert backend.adapter == "default"
        assert backend.info().details["adapters"]["default"] == str(adapter)


def test_the_default_model_is_the_reference_adapter_when_it_ships(adapter, tmp_path, monkeypatch):
    monkeypatch.delenv(qa.QA_REFERENCE_ENV, raising=False)
    monkeypatch.setattr(qa, "QA_REFERENCE_ADAPTER", tmp_path / "qa-smollm2-135m")
    assert default_qa_model() == DEFAULT_QA_MODEL == QA().model  # no adapter shipped
    monkeypatch.setattr(qa, "QA_REFERENCE_ADAPTER", adapter)
    assert default_qa_model() == f"hf:{adapter}" == QA().model
    assert default_qa_model(reference=False) == DEFAULT_QA_MODEL
    answer, _ = _ask(QA())
    assert answer
    monkeypatch.setenv(qa.QA_REFERENCE_ENV, "0")
    assert default_qa_model() == DEFAULT_QA_MODEL == QA().model
