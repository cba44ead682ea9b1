"""Tests of the complex-QA task sources: official-format loaders, gold plans, converters."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from lumos_gym.actions import parse_action, parse_actions, references
from lumos_gym.conversion.annotation import (
    Annotation,
    format_subgoal_plan,
    parse_subgoal_plan,
    read_annotations,
    write_annotations,
)
from lumos_gym.conversion.qa_rules import QA_CONVERTERS, qa_annotation
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs import datasets as data
from lumos_gym.envs.qa.data import (
    GOLD_PLANS,
    QA_DATASETS,
    QA_LOADERS,
    SAMPLE_FILES,
    GoldPlanError,
    answer_type,
    hotpotqa_plan,
    load_bamboogle,
    load_hotpotqa,
    load_musique,
    load_strategyqa,
    load_twowiki,
    qa_source,
    qa_subgoal,
    relation_question,
    sample_path,
    write_bamboogle_hub_rows,
    write_hotpotqa_hub_rows,
)
from lumos_gym.envs.sources import BundledSource, FileSource, HubSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError


def bundled(dataset):
    return qa_source(dataset, split="sample", source="bundled").load()


def write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def hotpot_record(**changes):
    record = {
        "_id": "abc123",
        "question": "Which river flows past the town where Ada Brun was born?",
        "answer": "Selna",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["Ada Brun", 0], ["Brenholt", 1]],
        "context": [
            ["Ada Brun", ["Ada Brun was born in Brenholt.", " She was a chemist."]],
            ["Brenholt", ["Brenholt is a town.", " The Selna flows past it."]],
        ],
    }
    record.update(changes)
    return record


# ---------------------------------------------------------------------------------------------
# Bundled samples and shared conventions


@pytest.mark.parametrize("dataset", QA_DATASETS)
def test_bundled_samples_follow_the_qa_task_conventions(dataset):
    tasks = bundled(dataset)
    assert 6 <= len(tasks) <= 12
    assert len({t.id for t in tasks}) == len(tasks)
    for task in tasks:
        assert task.task_type == "qa"
        assert task.id.startswith(f"{dataset}/sample/")
        assert task.question.strip() and task.answer.strip()
        assert task.meta["dataset"] == dataset
        assert task.meta["answer_type"] in ("yes/no", "span", "number")
        assert all(set(d) >= {"title", "text"} for d in task.meta["documents"])
        assert isinstance(task.meta["aliases"], list)
        assert isinstance(task.meta["sub_answers"], dict)
        if task.meta["answer_type"] == "yes/no":
            assert task.answer in ("yes", "no")
        if task.gold_actions:
            assert len(task.meta["subgoals"]) == len(task.gold_actions) - 1
            assert re.fullmatch(r"Answer\(R\d+\)", task.gold_actions[-1])


@pytest.mark.parametrize("dataset", QA_DATASETS)
def test_loading_twice_gives_the_same_tasks(dataset):
    assert bundled(dataset) == bundled(dataset)


@pytest.mark.parametrize("dataset", sorted(GOLD_PLANS))
def test_gold_actions_parse_and_only_use_earlier_variables(dataset):
    planned = [t for t in bundled(dataset) if t.gold_actions]
    assert len(planned) >= 4
    for task in planned:
        bound: set[str] = set()
        for step in task.gold_actions[:-1]:
            for action in parse_actions(step):
                assert action.name in ("KnowledgeQuery", "ParagraphRetrieve", "QA")
                assert set(references(action.args)) <= bound, (task.id, step)
                bound.update(action.outputs)
        final = parse_action(task.gold_actions[-1])
        assert final.name == "Answer" and final.args in bound


def test_sample_files_exist_and_bundled_sources_describe_them():
    for dataset, filename in SAMPLE_FILES.items():
        assert sample_path(dataset).is_file()
        source = qa_source(dataset, split="test", source="bundled")
        assert isinstance(source, BundledSource)
        info = source.describe()
        assert info["path"] == f"lumos_gym/envs/data/qa/{filename}" and info["sha256"]


def test_answer_type_classifies_answers():
    assert answer_type("yes") == answer_type("No.") == "yes/no"
    assert answer_type("14,200") == answer_type("1898") == answer_type("-3.5") == "number"
    assert answer_type("$20") == answer_type("45%") == "number"
    assert answer_type("The Quarry Review") == answer_type("3 May 1938") == "span"


# ---------------------------------------------------------------------------------------------
# HotpotQA


def test_hotpotqa_sample_covers_bridge_comparison_and_yes_no():
    tasks = {t.id.rsplit("/", 1)[1]: t for t in bundled("hotpotqa")}
    bridge = tasks["5c1e0a7f55429e1b7d3a0001"]
    assert bridge.answer == "Tarnholm" and bridge.meta["type"] == "bridge"
    assert bridge.meta["level"] == "medium"
    assert bridge.meta["supporting_facts"] == [["The Glass Orchard", 1], ["Ilse Varga", 1]]
    assert bridge.rationale is None
    yes_no = tasks["5c1e0a7f55429e1b7d3a0002"]
    assert (yes_no.answer, yes_no.meta["answer_type"], yes_no.meta["type"]) == (
        "no", "yes/no", "comparison"
    )
    assert tasks["5c1e0a7f55429e1b7d3a0004"].meta["answer_type"] == "number"


def test_hotpotqa_documents_concatenate_sentences_as_written(tmp_path):
    [task] = load_hotpotqa(write_json(tmp_path / "dev.json", [hotpot_record()]), "dev")
    assert task.id == "hotpotqa/dev/abc123"
    assert task.meta["documents"] == [
        {"title": "Ada Brun", "text": "Ada Brun was born in Brenholt. She was a chemist."},
        {"title": "Brenholt", "text": "Brenholt is a town. The Selna flows past it."},
    ]
    assert task.meta["context"] == hotpot_record()["context"]  # the raw field, verbatim


def test_hotpotqa_gold_plan_queries_each_supporting_page_once():
    task = next(t for t in bundled("hotpotqa") if t.id.endswith("0006"))
    assert task.meta["subgoals"] == [
        "Find the relevant information about Ottilie Brandvik.",
        "Find the relevant information about Selna Bridge.",
        "Answer the question based on the information about Ottilie Brandvik and Selna Bridge.",
    ]
    question = task.question
    assert task.gold_actions == (
        f"R1 = KnowledgeQuery(Ottilie Brandvik); R2 = ParagraphRetrieve(R1, Query: {question})",
        f"R3 = KnowledgeQuery(Selna Bridge); R4 = ParagraphRetrieve(R3, Query: {question})",
        f"R5 = QA([R2, R4], Question: {question})",
        "Answer(R5)",
    )
    assert task.meta["sub_answers"] == {question: "1898"}


def test_hotpotqa_lumos_eval_file_gets_position_ids(tmp_path):
    rows = [
        {"question": "Is Brant older than Corvel?", "answer": "yes", "type": "comparison"},
        {"question": "Who built the Selna Bridge?", "answer": "Ottilie Brandvik", "type": "bridge"},
    ]
    tasks = load_hotpotqa(write_json(tmp_path / "test.json", rows), "lumos_eval")
    assert [t.id for t in tasks] == ["hotpotqa/lumos_eval/0", "hotpotqa/lumos_eval/1"]
    assert tasks[0].meta["type"] == "comparison" and tasks[0].meta["documents"] == []
    assert tasks[1].gold_actions == ()  # no supporting facts, no gold plan


def test_hotpotqa_test_fullwiki_needs_unlabeled(tmp_path):
    record = {"_id": "t1", "question": "Who?", "context": hotpot_record()["context"]}
    path = write_json(tmp_path / "hotpot_test_fullwiki_v1.json", [record])
    with pytest.raises(DataError, match=r"record 0: no gold 'answer'.*unlabeled=True"):
        load_hotpotqa(path, "test_fullwiki")
    [task] = load_hotpotqa(path, "test_fullwiki", unlabeled=True)
    assert task.answer == "" and task.meta["labeled"] is False and task.gold_actions == ()
    assert task.meta["answer_type"] is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"question": None}, r"record 1: missing field 'question'"),
        ({"question": ["x"]}, r"record 1: field 'question' is a list, not text"),
        ({"context": [["Ada Brun", "not a list"]]}, r"record 1: context\[0\] is not \[title"),
        ({"context": {"title": []}}, r"record 1: field 'context' is a dict, not a list"),
        ({"supporting_facts": [["Ada Brun", "0"]]}, r"record 1: supporting_facts\[0\]"),
        ({"_id": "abc123"}, r"duplicate id 'hotpotqa/dev/abc123'"),
        ({"answer": " "}, r"record 1: no gold 'answer'"),
    ],
)
def test_hotpotqa_malformed_records_name_the_file_and_record(tmp_path, change, message):
    bad = hotpot_record(**{"_id": "x", **change})
    path = write_json(tmp_path / "dev.json", [hotpot_record(), bad])
    with pytest.raises(DataError, match=message) as info:
        load_hotpotqa(path, "dev")
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("[{]", "bad JSON at line 1"),
        ("[1, 2]", "record 0 is a int, not a JSON object"),
        ('{"_id": "a"}', "record 0: missing field 'question'"),
        ('"text"', "holds a JSON str"),
        ("[]", "no records found"),
    ],
)
def test_hotpotqa_bad_files_are_data_errors(tmp_path, text, message):
    path = tmp_path / "dev.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(message)):
        load_hotpotqa(path, "dev")


def test_missing_file_or_a_web_page_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_hotpotqa(tmp_path / "nope.json", "dev")
    page = tmp_path / "musique_v1.0.zip"
    page.write_text("<!DOCTYPE html><html><body>Virus scan warning</body></html>")
    with pytest.raises(DataError, match="an HTML page, not the data file"):
        load_musique(page, "ans_dev")


def test_hotpotqa_hub_rows_are_written_in_the_official_layout(tmp_path):
    official = hotpot_record()
    row = {
        "id": official["_id"], "question": official["question"], "answer": official["answer"],
        "type": "bridge", "level": "easy",
        "supporting_facts": {"title": ["Ada Brun", "Brenholt"], "sent_id": [0, 1]},
        "context": {"title": [c[0] for c in official["context"]],
                    "sentences": [c[1] for c in official["context"]]},
    }
    path = tmp_path / "hub.json"
    write_hotpotqa_hub_rows([row], path)
    assert json.loads(path.read_text()) == [official]
    assert load_hotpotqa(path, "dev") == load_hotpotqa(write_json(tmp_path / "o.json", [official]))


def test_hub_rows_from_the_datasets_library_load_offline(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    official = hotpot_record()
    row = {
        "id": official["_id"], "question": official["question"], "answer": official["answer"],
        "type": "bridge", "level": "easy",
        "supporting_facts": {"title": ["Ada Brun", "Brenholt"], "sent_id": [0, 1]},
        "context": {"title": [c[0] for c in official["context"]],
                    "sentences": [c[1] for c in official["context"]]},
    }
    repo = tmp_path / "hotpot-repo"
    repo.mkdir()
    write_jsonl(repo / "validation.jsonl", [row])
    source = HubSource(str(repo), split="validation", loader=load_hotpotqa,
                       writer=write_hotpotqa_hub_rows, cache_path=tmp_path / "c" / "h.json")
    [task] = source.load()
    assert task.meta["supporting_facts"] == official["supporting_facts"]
    assert task.meta["context"] == official["context"] and task.gold_actions
    bamboo = tmp_path / "bamboogle-repo"
    bamboo.mkdir()
    write_jsonl(bamboo / "test.jsonl", [{"Question": "Who?", "Answer": "Ada"}])
    source = HubSource(str(bamboo), split="test", loader=load_bamboogle,
                       writer=write_bamboogle_hub_rows, cache_path=tmp_path / "c" / "b.jsonl")
    assert [(t.question, t.answer) for t in source.load()] == [("Who?", "Ada")]
    assert datasets  # imported only for this test


# ---------------------------------------------------------------------------------------------
# StrategyQA


def strategy_record(**changes):
    record = {
        "qid": "q1",
        "term": "Brenholt",
        "description": "A town",
        "question": "Is Brenholt older than the Selna Bridge?",
        "answer": True,
        "facts": ["Brenholt was founded in 1310.", "The bridge opened in 1898."],
        "decomposition": ["When was Brenholt founded?", "When did the Selna Bridge open?",
                          "Is #1 before #2?"],
        "evidence": [[[["Brenholt-0"]], [["Selna Bridge-1"]], ["operation"]]],
    }
    record.update(changes)
    return record


def test_strategyqa_sample_uses_evidence_paragraphs_as_documents():
    tasks = {t.id.rsplit("/", 1)[1]: t for t in bundled("strategyqa")}
    task = tasks["c41d0e77a9f2b36e5d18"]
    assert task.answer == "no" and task.meta["answer_type"] == "yes/no"
    assert [d["id"] for d in task.meta["documents"]] == [
        "Tarnholm-2", "Skarvik Park-0", "Brenholt FC-1"
    ]
    assert task.meta["documents"][1]["title"] == "Skarvik Park"
    assert task.rationale == " ".join(task.meta["facts"])
    assert tasks["0b9e6a3f2c7d14e8a5b1"].meta["missing_paragraphs"] == ["Acrylic paint-3"]
    # every annotator marks step 1 no_evidence: no gold plan, but the task loads
    assert tasks["9d5c7b1e3a0f26d84c3b"].gold_actions == ()


def test_strategyqa_plan_references_earlier_results_by_variable():
    task = next(t for t in bundled("strategyqa") if t.id.endswith("7e2f1c9a0b3d5e8f1a2c"))
    assert task.gold_actions[-2] == "R7 = QA([R3, R6], Question: Is R3 within the period of R6?)"
    assert task.meta["sub_answers"] == {"Is R3 within the period of R6?": "no"}
    assert task.meta["subgoals"][-1] == (
        "Answer the question: Is the result of Subgoal 1 within the period of the result of "
        "Subgoal 2?"
    )


def test_strategyqa_without_paragraphs_uses_facts(tmp_path):
    [task] = load_strategyqa(write_json(tmp_path / "train.json", [strategy_record()]), "train")
    assert task.id == "strategyqa/train/q1" and task.answer == "yes"
    assert task.meta["documents"] == [
        {"title": "Brenholt", "text": "Brenholt was founded in 1310."},
        {"title": "Brenholt", "text": "The bridge opened in 1898."},
    ]
    assert "missing_paragraphs" not in task.meta
    assert task.gold_actions[0].startswith("R1 = KnowledgeQuery(Brenholt); ")


def test_strategyqa_reads_the_official_zip_with_its_paragraphs(tmp_path):
    archive = tmp_path / "strategyqa_dataset.zip"
    paragraphs = {"Brenholt-0": {"title": "Brenholt", "content": "Founded in 1310.",
                                 "section": "", "headers": [""], "para_index": 0}}
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("strategyqa_train.json", json.dumps([strategy_record()]))
        z.writestr("strategyqa_test.json", json.dumps([{"qid": "t1", "question": "Is it?"}]))
        z.writestr("strategyqa_train_paragraphs.json", json.dumps(paragraphs))
    [task] = load_strategyqa(archive, "train")
    assert task.meta["documents"] == [
        {"id": "Brenholt-0", "title": "Brenholt", "text": "Founded in 1310."}
    ]
    assert task.meta["missing_paragraphs"] == ["Selna Bridge-1"]
    with pytest.raises(DataError, match="strategyqa_test.json.*record 0: no gold 'answer'"):
        load_strategyqa(archive, "test")
    [test] = load_strategyqa(archive, "test", unlabeled=True)
    assert (test.id, test.answer, test.meta["documents"]) == ("strategyqa/test/t1", "", [])
    with pytest.raises(DataError, match="split 'dev' names none of its files"):
        load_strategyqa(archive, "dev")


def test_strategyqa_lumos_eval_and_bigbench_files(tmp_path):
    lumos = [{"question": "Can a koala swim?", "answer": True},
             {"question": "Is ice hot?", "answer": False}]
    tasks = load_strategyqa(write_json(tmp_path / "test.json", lumos), "lumos_eval")
    assert [(t.id, t.answer) for t in tasks] == [
        ("strategyqa/lumos_eval/0", "yes"), ("strategyqa/lumos_eval/1", "no")
    ]
    bigbench = {
        "canary": "a canary string", "name": "strategyqa", "keywords": ["multi-step"],
        "examples": [
            {"input": "Can a koala swim?", "target": "Yes. Koalas can swim short distances.",
             "target_scores": {"Yes": 1, "No": 0}},
            {"input": "Is ice hot?", "target": "No. Ice is frozen water."},
        ],
    }
    tasks = load_strategyqa(write_json(tmp_path / "task.json", bigbench), "bigbench")
    assert [(t.id, t.answer, t.rationale) for t in tasks] == [
        ("strategyqa/bigbench/0", "yes", "Koalas can swim short distances."),
        ("strategyqa/bigbench/1", "no", "Ice is frozen water."),
    ]
    assert tasks[0].meta["target_scores"] == {"Yes": 1, "No": 0}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"answer": "maybe"}, r"record 0: field 'answer' is 'maybe', not true/false"),
        ({"facts": "one fact"}, r"record 0: field 'facts' is a str, not a list"),
        ({"evidence": [[["Brenholt-0"]]]}, r"record 0: evidence\[0\]\[0\] holds 'Brenholt-0'"),
        ({"decomposition": [1, 2]}, r"record 0: decomposition\[0\] is a int, not text"),
    ],
)
def test_strategyqa_malformed_records(tmp_path, change, message):
    path = write_json(tmp_path / "train.json", [strategy_record(**change)])
    with pytest.raises(DataError, match=message):
        load_strategyqa(path, "train")


def test_strategyqa_bad_paragraphs_file(tmp_path):
    path = write_json(tmp_path / "train.json", [strategy_record()])
    bad = write_json(tmp_path / "p.json", {"Brenholt-0": {"title": "Brenholt"}})
    with pytest.raises(DataError, match="paragraph 'Brenholt-0' lacks a text title or content"):
        load_strategyqa(path, "train", paragraphs=bad)


# ---------------------------------------------------------------------------------------------
# MuSiQue


def test_musique_full_sample_keeps_unanswerable_records_flagged():
    tasks = {t.id.rsplit("/", 1)[1]: t for t in bundled("musique")}
    answerable = tasks["2hop__104233_58112"]
    unanswerable = tasks["2hop__104233_58112:unanswerable"]
    assert answerable.meta["answerable"] is True and unanswerable.meta["answerable"] is False
    assert answerable.gold_actions and unanswerable.gold_actions == ()
    assert unanswerable.answer == answerable.answer == "Mattias Korr"
    assert answerable.meta["aliases"] == ["Matthias Korr"]
    assert answerable.meta["answer_aliases"] == ["Matthias Korr"]
    assert answerable.meta["documents"][1] == {
        "title": "Mattias Korr",
        "text": "Mattias Korr was a conductor. He married the composer Ilse Varga in 1925.",
    }


def test_musique_sub_answers_resolve_references_in_order():
    task = next(t for t in bundled("musique") if t.id.endswith("3hop1__220114_51203_7745"))
    assert task.meta["sub_answers"] == {
        "Who designed the Selna Bridge?": "Ottilie Brandvik",
        "Where was Ottilie Brandvik born?": "Harrowgate",
        "What is the country of Harrowgate?": "Veldmark",
    }
    assert task.gold_actions[2] == (
        "R7 = KnowledgeQuery(Harrowgate); R8 = ParagraphRetrieve(R7, Query: What is the country "
        "of Harrowgate?); R9 = QA([R8], Question: What is the country of Harrowgate?)"
    )
    assert task.meta["subgoals"][2] == "Identify the country of Harrowgate."


def musique_record(**changes):
    record = {
        "id": "2hop__1_2",
        "paragraphs": [
            {"idx": 0, "title": "Ada Brun", "paragraph_text": "Ada Brun was born in Brenholt.",
             "is_supporting": True},
            {"idx": 1, "title": "Brenholt", "paragraph_text": "Brenholt lies on the Selna.",
             "is_supporting": True},
        ],
        "question": "Which river flows past the birthplace of Ada Brun?",
        "question_decomposition": [
            {"id": 1, "question": "Ada Brun >> place of birth", "answer": "Brenholt",
             "paragraph_support_idx": 0},
            {"id": 2, "question": "Which river flows past #1?", "answer": "Selna",
             "paragraph_support_idx": 1},
        ],
        "answer": "Selna",
        "answer_aliases": ["River Selna"],
    }
    record.update(changes)
    return record


def test_musique_reads_the_release_zip_and_unlabeled_test_files(tmp_path):
    hidden = {"id": "2hop__1_2", "question": "Which river?",
              "paragraphs": [{"idx": 0, "title": "Ada Brun", "paragraph_text": "..."}]}
    archive = tmp_path / "musique_v1.0.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data/musique_ans_v1.0_dev.jsonl", json.dumps(musique_record()) + "\n")
        z.writestr("data/musique_full_v1.0_test.jsonl", "\n".join([json.dumps(hidden)] * 2))
        z.writestr("__MACOSX/data/._musique_ans_v1.0_dev.jsonl", "junk")
    [task] = load_musique(archive, "ans_dev")
    assert task.id == "musique/ans_dev/2hop__1_2" and "answerable" not in task.meta
    assert task.meta["sub_answers"] == {
        "What is the place of birth of Ada Brun?": "Brenholt",
        "Which river flows past Brenholt?": "Selna",
    }
    assert task.gold_actions[-1] == "Answer(R6)"
    with pytest.raises(DataError, match="record 0 .line 1.: no gold 'answer'"):
        load_musique(archive, "full_test")
    tasks = load_musique(archive, "full_test", unlabeled=True)
    assert [t.id for t in tasks] == ["musique/full_test/2hop__1_2", "musique/full_test/2hop__1_2#2"]
    with pytest.raises(DataError, match="has no musique_full_v1.0_dev.jsonl"):
        load_musique(archive, "full_dev")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"paragraphs": [{"idx": "0", "title": "A", "paragraph_text": "t"}]}, r"paragraphs\[0\]"),
        ({"question_decomposition": [{"question": "q"}]}, r"question_decomposition\[0\]"),
        ({"answer_aliases": "Selna"}, r"field 'answer_aliases' is a str"),
        ({"answerable": "yes"}, r"field 'answerable' is a str, not true/false"),
        ({"id": None}, r"missing field 'id'"),
    ],
)
def test_musique_malformed_records_name_the_line(tmp_path, change, message):
    path = write_jsonl(tmp_path / "dev.jsonl", [musique_record(), musique_record(**change)])
    with pytest.raises(DataError, match=r"record 1 \(line 2\): " + message):
        load_musique(path, "dev")


def test_musique_lines_split_on_newlines_only(tmp_path):
    odd = musique_record(id="2hop__3_4", question="Which river\u2028flows past Brenholt?")
    path = tmp_path / "dev.jsonl"
    rows = [musique_record(), odd]
    path.write_text("\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    tasks = load_musique(path, "dev")
    assert [t.id for t in tasks] == ["musique/dev/2hop__1_2", "musique/dev/2hop__3_4"]
    assert tasks[1].question == "Which river\u2028flows past Brenholt?"


def test_musique_bad_json_line(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(musique_record()) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"record 1 \(line 2\): bad JSON"):
        load_musique(path, "dev")


def test_musique_plan_rejects_a_dangling_reference(tmp_path):
    steps = musique_record()["question_decomposition"]
    steps[0] = dict(steps[0], question="Who followed #3?")
    [task] = load_musique(write_jsonl(tmp_path / "d.jsonl", [musique_record()]), "dev")
    task = Task(task.id, task.question, task.answer, "qa",
                meta={**task.meta, "question_decomposition": steps})
    with pytest.raises(ConversionError, match="step 1 refers to #3"):
        QA_CONVERTERS["musique"](task)


# ---------------------------------------------------------------------------------------------
# 2WikiMultihopQA


def test_twowiki_sample_keeps_every_release_field():
    tasks = {t.meta["type"] + "/" + t.id[-6:]: t for t in bundled("2wikimultihopqa")}
    assert {k.split("/")[0] for k in tasks} == {
        "compositional", "comparison", "inference", "bridge_comparison"
    }
    first = bundled("2wikimultihopqa")[0]
    assert first.meta["entity_ids"] == "Q90011_Q90012" and first.meta["answer_id"] == "Q90013"
    assert first.meta["evidences_id"][0] == ["Q90011", "director", "Q90012"]
    assert first.meta["documents"][0]["text"] == (
        "Clara Pellerin (1910\u20131986) was a stage actress. She was the mother of the "
        "director Jonas Pellerin."
    )
    assert first.meta["sub_answers"]["What is the mother of Jonas Pellerin?"] == "Clara Pellerin"
    # the evidence subject is matched to its context title "... (film)"
    assert first.gold_actions[0].startswith("R1 = KnowledgeQuery(The Salt Orchard (film));")


def test_twowiki_test_file_and_broken_chains(tmp_path):
    test = [{"_id": "t", "type": "comparison", "question": "Which is older?",
             "context": [["A", ["A is old."]]], "entity_ids": "Q1_Q2"}]
    path = write_json(tmp_path / "test.json", test)
    with pytest.raises(DataError, match="no gold 'answer'"):
        load_twowiki(path, "test")
    assert load_twowiki(path, "test", unlabeled=True)[0].id == "2wikimultihopqa/test/t"
    record = dict(bundled("2wikimultihopqa")[0].meta)
    broken = {k: record[k] for k in ("_id", "type", "context", "supporting_facts", "entity_ids")}
    broken.update(question="Who?", answer="Somebody Else",
                  evidences=[["A", "director", "B"], ["C", "mother", "D"]])
    [task] = load_twowiki(write_json(tmp_path / "dev.json", [broken]), "dev")
    assert task.gold_actions == ()
    with pytest.raises(ConversionError, match="do not chain to the answer"):
        QA_CONVERTERS["2wikimultihopqa"](task)


def test_twowiki_malformed_evidence(tmp_path):
    record = {"_id": "x", "question": "Who?", "answer": "B", "context": [],
              "evidences": [["A", "director"]]}
    with pytest.raises(DataError, match=r"record 0: evidences\[0\] is not \[subject"):
        load_twowiki(write_json(tmp_path / "dev.json", [record]), "dev")


# ---------------------------------------------------------------------------------------------
# Bamboogle


def test_bamboogle_csv_sample_reads_quoted_cells():
    tasks = bundled("bamboogle")
    assert [t.id for t in tasks][:2] == ["bamboogle/sample/0", "bamboogle/sample/1"]
    assert tasks[3].question == "In Veldmark, which city is home to the Lindgate Theatre?"
    assert tasks[6].question == 'Which club plays at the stadium nicknamed "the Skarvik"?'
    assert all(t.meta["documents"] == [] and t.gold_actions == () for t in tasks)


def test_bamboogle_json_variants_and_errors(tmp_path):
    hub = write_jsonl(tmp_path / "hub.jsonl", [{"Question": "Who?", "Answer": "Ada"}])
    assert load_bamboogle(hub, "test")[0].answer == "Ada"
    flash = write_jsonl(tmp_path / "f.jsonl",
                        [{"id": "test_0", "question": "Who?", "golden_answers": ["Ada", "A."]}])
    [task] = load_bamboogle(flash, "test")
    assert (task.id, task.answer, task.meta["aliases"], task.meta["id"]) == (
        "bamboogle/test/0", "Ada", ["A."], "test_0"
    )
    missing = tmp_path / "b.csv"
    missing.write_text("Question,Answer\nWho?,Ada\n\nWhat?,\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"row 1 \(line 4\): no text in column 'Answer'"):
        load_bamboogle(missing, "test")
    assert [t.answer for t in load_bamboogle(missing, "test", unlabeled=True)] == ["Ada", ""]
    headerless = tmp_path / "h.csv"
    headerless.write_text("Prompt,Gold\nWho?,Ada\n", encoding="utf-8")
    with pytest.raises(DataError, match="no text in column 'Question'"):
        load_bamboogle(headerless, "test")


# ---------------------------------------------------------------------------------------------
# Sources


def test_official_source_names_the_download_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    source = qa_source("hotpotqa", split="dev", source="official")
    assert isinstance(source, FileSource)
    with pytest.raises(DataError, match="lumos-gym data download hotpotqa"):
        source.load()
    data.copy_into_cache("hotpotqa", "dev", sample_path("hotpotqa"))
    assert [t.id for t in source.load()][0] == "hotpotqa/dev/5c1e0a7f55429e1b7d3a0001"
    zipped = qa_source("musique", split="full_dev", source="official")
    assert zipped.path.name == "musique_v1.0.zip"


def test_path_and_hub_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    path = write_json(tmp_path / "dev.json", [hotpot_record()])
    assert qa_source("hotpotqa", split="dev", source=path).load()[0].id == "hotpotqa/dev/abc123"
    hub = qa_source("hotpotqa", split="dev_fullwiki", source="hub")
    assert isinstance(hub, HubSource)
    assert (hub.repo_id, hub.config, hub.split) == ("hotpotqa/hotpot_qa", "fullwiki", "validation")
    # the cached file is read with the lumos split name in the ids
    hub.cache_path.parent.mkdir(parents=True)
    write_hotpotqa_hub_rows([hotpot_record()], hub.cache_path)
    assert hub.load()[0].id == "hotpotqa/dev_fullwiki/abc123"
    assert qa_source("bamboogle", split="test", source="hub").repo_id == "chiayewken/bamboogle"
    with pytest.raises(ValueError, match="musique has no hub source"):
        qa_source("musique", split="ans_dev", source="hub")
    with pytest.raises(ValueError, match="dataset must be one of"):
        qa_source("squad", split="dev", source="bundled")
    with pytest.raises(ValueError, match="split must be"):
        load_hotpotqa(path, "a/b")


def test_unlabeled_passes_through_qa_source(tmp_path):
    path = write_json(tmp_path / "t.json", [{"_id": "t", "question": "Who?", "context": []}])
    with pytest.raises(DataError, match="unlabeled=True"):
        qa_source("hotpotqa", split="test_fullwiki", source=path).load()
    source = qa_source("hotpotqa", split="test_fullwiki", source=path, unlabeled=True)
    assert source.load()[0].answer == ""


def test_registered_datasets_have_a_loader():
    for name in QA_DATASETS:
        info = data.DATASETS.get(name)
        assert name in QA_LOADERS and info.splits and info.license


@pytest.mark.parametrize("dataset", sorted(GOLD_PLANS))
def test_gold_actions_replay_in_a_privileged_qa_env(dataset):
    qa_env = pytest.importorskip("lumos_gym.envs.qa.base")
    tasks = [t for t in bundled(dataset) if t.gold_actions]
    env = qa_env.QAEnv(tasks=tasks, dataset=dataset, **qa_env.QAEnv.replay_options)
    outcomes = {}
    for task in tasks:
        env.reset(options={"task_id": task.id})
        for step in task.gold_actions:
            observation, reward, terminated, _, _ = env.step(step)
            assert "Error" not in observation or task.meta.get("missing_paragraphs")
        outcomes[task.id] = (terminated, reward)
    env.close()
    # all but the StrategyQA task whose evidence paragraph the sample leaves out
    missing = {t.id for t in tasks if t.meta.get("missing_paragraphs")}
    assert {i for i, o in outcomes.items() if o != (True, 1.0)} == missing


# ---------------------------------------------------------------------------------------------
# Phrasing and converters


def test_subgoal_phrasing_rules():
    assert qa_subgoal("Who designed the Selna Bridge?") == "Find out who designed the Selna Bridge."
    assert qa_subgoal("What is the capital of Veldmark?") == (
        "Find out what is the capital of Veldmark."
    )
    assert qa_subgoal("When did the bridge open?") == (
        "Answer the question: When did the bridge open?"
    )
    assert qa_subgoal("Is #1 larger than #2?") == "Answer the question: Is #1 larger than #2?"
    assert relation_question("Green", "performer") == (
        "What is the performer of Green?", "Identify the performer of Green."
    )
    assert relation_question("Tarnholm", "part of") == (
        "What is Tarnholm part of?", "Identify what Tarnholm is part of."
    )


@pytest.mark.parametrize("dataset", sorted(QA_CONVERTERS))
def test_converters_round_trip_and_are_deterministic(dataset, tmp_path):
    converted = []
    for task in bundled(dataset):
        try:
            annotation = QA_CONVERTERS[dataset](task)
        except ConversionError:
            assert not task.gold_actions
            continue
        assert annotation == QA_CONVERTERS[dataset](task)
        assert annotation.task_type == "qa" and annotation.dataset == dataset
        assert annotation.answer == task.answer and annotation.task == task.question
        assert annotation.meta["converter"] == f"rules/{dataset}"
        text = format_subgoal_plan(annotation.subgoals)
        assert parse_subgoal_plan(text) == annotation.subgoals
        assert Annotation.from_dict(annotation.to_dict()) == annotation
        # the annotation's actions are the task's gold actions plus tails
        steps = ["; ".join(a.action.format(with_result=False) for a in s.actions)
                 for s in annotation.subgoals]
        assert tuple(steps) == task.gold_actions[:-1]
        assert [s.text for s in annotation.subgoals] == task.meta["subgoals"]
        last = annotation.subgoals[-1].actions[-1].action
        assert last.name == "QA" and last.result == task.answer
        converted.append(annotation)
    assert len(converted) >= 4
    path = tmp_path / "a.jsonl"
    assert write_annotations(converted, path) == len(converted)
    assert list(read_annotations(path)) == converted


def test_musique_annotation_tails_follow_the_decomposition():
    task = next(t for t in bundled("musique") if t.id.endswith("2hop__31877_60259"))
    annotation = QA_CONVERTERS["musique"](task)
    assert format_subgoal_plan(annotation.subgoals).splitlines()[:4] == [
        "Subgoal 1: Identify the place of birth of Ilse Varga.",
        "Action 1-1: R1 = KnowledgeQuery(Ilse Varga) = WikipediaPage(Ilse Varga)",
        "Action 1-2: R2 = ParagraphRetrieve(R1, Query: What is the place of birth of Ilse Varga?)"
        " = Paragraph(Ilse Varga)",
        "Action 1-3: R3 = QA([R2], Question: What is the place of birth of Ilse Varga?) = Tarnholm",
    ]
    # the last step answers "the Mervale Islands"; the tail is the task's canonical answer
    assert annotation.subgoals[-1].actions[-1].action.result == "Mervale Islands"


def test_strategyqa_annotation_has_tails_only_where_known():
    task = next(t for t in bundled("strategyqa") if t.id.endswith("f3a8d2c610e47b59c0de"))
    annotation = QA_CONVERTERS["strategyqa"](task)
    qa_tails = [a.action.result for a in annotation.actions if a.action.name == "QA"]
    assert qa_tails == [None, None, "yes"]


@pytest.mark.parametrize(
    ("dataset", "suffix", "reason"),
    [
        ("musique", "2hop__104233_58112:unanswerable", "unanswerable"),
        ("strategyqa", "9d5c7b1e3a0f26d84c3b", "step 1 has no evidence paragraph"),
    ],
)
def test_converters_explain_rejections(dataset, suffix, reason):
    task = next(t for t in bundled(dataset) if t.id.endswith(suffix))
    with pytest.raises(ConversionError, match=reason):
        QA_CONVERTERS[dataset](task)


def test_converter_rejects_tasks_it_cannot_read():
    math = Task("gsm8k/test/0", "What is 2+2?", "4", "math")
    with pytest.raises(ConversionError, match="not a QA task"):
        qa_annotation(math, "hotpotqa")
    bare = Task("hotpotqa/dev/0", "Who?", "Ada", "qa")
    with pytest.raises(ConversionError, match="no supporting facts"):
        QA_CONVERTERS["hotpotqa"](bare)
    unlabeled = Task("hotpotqa/dev/0", "Who?", "", "qa")
    with pytest.raises(ConversionError, match="no gold answer"):
        QA_CONVERTERS["hotpotqa"](unlabeled)
    # text that the action language would misread is refused, not written
    mention = Task("hotpotqa/dev/1", "Did the R2 unit fly?", "yes", "qa",
                   meta={"supporting_facts": [["R2 unit", 0]]})
    with pytest.raises(GoldPlanError, match="mentions R2"):
        hotpotqa_plan(mention)
    unbalanced = Task("hotpotqa/dev/2", "Who wrote (it?", "Ada", "qa",
                      meta={"supporting_facts": [["Ada", 0]]})
    with pytest.raises(ConversionError, match="not a valid action"):
        QA_CONVERTERS["hotpotqa"](unbalanced)
