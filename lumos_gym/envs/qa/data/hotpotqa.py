"""HotpotQA: the loader of its official files, its gold plan and its hub rows.

See :mod:`lumos_gym.envs.qa.data` for the formats read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lumos_gym.envs.qa.data.common import (
    _check_unique,
    _clean,
    _Fields,
    _gold_answer,
    _read_source,
    _records,
    _split_name,
    _supporting_facts,
    _titled_paragraphs,
)
from lumos_gym.envs.qa.data.plans import (
    GoldPlanError,
    PlanStep,
    _make_task,
    _names,
    _plain,
    _PlanBuilder,
    _require_answer,
)
from lumos_gym.envs.tasks import Task

_HOTPOT_EXPECTED = (
    "HotpotQA JSON records with _id, question, answer, supporting_facts [[title, sent_id]] and "
    "context [[title, [sentences]]] (or the Lumos question/answer/type records)"
)


def hotpotqa_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a HotpotQA task, from its supporting facts.

    One subgoal per supporting page, in the order the supporting facts first name it
    (``KnowledgeQuery(title) = WikipediaPage(title)``, then ``ParagraphRetrieve(R, Query:
    question) = Paragraph(title)``), then a final subgoal ``QA([evidence], Question:
    question) = answer`` (yes/no comparisons too).

    Raises:
        GoldPlanError: no supporting facts, no answer, or text that cannot be an action.
    """
    answer = _require_answer(task)
    facts = task.meta.get("supporting_facts")
    titles: list[str] = []
    for fact in facts if isinstance(facts, list | tuple) else ():
        if isinstance(fact, list | tuple) and fact and isinstance(fact[0], str):
            title = _clean(fact[0])
            if title and title not in titles:
                titles.append(title)
    if not titles:
        raise GoldPlanError("the task has no supporting facts")
    question = _plain(task.question, "the question")
    plan = _PlanBuilder()
    evidence = []
    for title in titles:
        page = plan.knowledge(title)
        evidence.append(plan.retrieve(page, question, f"Paragraph({title})"))
        plan.subgoal(f"Find the relevant information about {title}.")
    plan.qa(evidence, question, answer)
    plan.subgoal(f"Answer the question based on the information about {_names(titles)}.")
    return plan.steps()


def load_hotpotqa(path: str | Path, split: str = "dev", *, unlabeled: bool = False) -> list[Task]:
    """Load a HotpotQA file: train/dev distractor, dev/test fullwiki, or the Lumos eval file.

    Args:
        path: the official JSON list.
        split: the split name used in task ids (``hotpotqa/{split}/{_id}``; the position in
            the file for records without ``_id``, as in the Lumos evaluation file).
        unlabeled: accept records without ``answer`` (the test fullwiki file), loading them
            with an empty answer and ``meta["labeled"] = False``.

    Returns:
        One task per record, in file order. ``meta`` holds every field but ``question`` and
        ``answer`` verbatim, ``documents`` (the context paragraphs), ``aliases`` (none),
        ``answer_type``, and for records with supporting facts the gold plan of
        :func:`hotpotqa_plan` (``gold_actions``, ``subgoals``, and in ``sub_answers`` its final
        question with the answer).

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record (the message names the
            record), a record without answer (unless ``unlabeled``), or duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _HOTPOT_EXPECTED
    src = _read_source(path, split, {}, exp)
    tasks = []
    for rec in _records(src, exp):
        f = _Fields(src, rec, exp)
        question = f.text("question").strip()
        value = f.text("answer", required=False)
        answer = _gold_answer(f, value, dataset="HotpotQA", unlabeled=unlabeled)
        f.text("type", required=False)
        f.text("level", required=False)
        _supporting_facts(f)
        documents = [
            {"title": title, "text": "".join(sentences)}
            for title, sentences in _titled_paragraphs(f, "context")
        ]
        local_id = (f.text("_id", required=False) or "").strip() or str(rec.index)
        tasks.append(
            _make_task(
                "hotpotqa", split, local_id, question, answer, raw=rec.data,
                documents=documents, plan=hotpotqa_plan, labeled=bool(answer),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks


def _hub_pairs(value: object, first: str, second: str) -> list[list[Any]] | None:
    if isinstance(value, Mapping):
        pairs = zip(value.get(first) or [], value.get(second) or [], strict=False)
        return [list(pair) for pair in pairs]
    return value if isinstance(value, list) else None


def write_hotpotqa_hub_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Write hub rows of ``hotpotqa/hotpot_qa`` as an official HotpotQA JSON list.

    The hub stores ``id`` and column-wise ``supporting_facts`` (``title``/``sent_id``) and
    ``context`` (``title``/``sentences``); the official file has ``_id`` and
    ``[[title, sent_id]]`` / ``[[title, [sentences]]]`` lists. Rows already in the official
    layout are written as they are; an empty answer (the hub's test rows) is left out.

    Args:
        rows: the hub rows.
        path: the JSON file to write.
    """
    records = []
    for row in rows:
        record: dict[str, Any] = {"_id": row.get("_id", row.get("id"))}
        for key in ("question", "answer", "type", "level"):
            if row.get(key) not in (None, ""):
                record[key] = row[key]
        facts = _hub_pairs(row.get("supporting_facts"), "title", "sent_id")
        if facts:
            record["supporting_facts"] = facts
        context = _hub_pairs(row.get("context"), "title", "sentences")
        if context is not None:
            record["context"] = context
        records.append(record)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False)
