"""StrategyQA: the loader of its official files (and BIG-bench's), and its gold plan.

See :mod:`lumos_gym.envs.qa.data` for the formats read.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym.envs.qa.data.common import (
    _as_records,
    _check_unique,
    _clean,
    _Fields,
    _gold_answer,
    _parse_json,
    _read_source,
    _Source,
    _split_name,
)
from lumos_gym.envs.qa.data.plans import (
    _REFERENCE,
    GoldPlanError,
    PlanStep,
    _make_task,
    _plain,
    _PlanBuilder,
    _require_answer,
    _resolve,
    qa_subgoal,
)
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError

_STRATEGY_EXPECTED = (
    "StrategyQA JSON records with qid, question, answer (bool), facts, decomposition and "
    "evidence, or BIG-bench's {'examples': [...]}"
)
_PARAGRAPHS_EXPECTED = "StrategyQA paragraphs: a JSON object {id: {title, content, ...}}"

#: Members of the official zip archive, by split name.
_STRATEGY_MEMBERS = {
    "train": "strategyqa_train.json",
    "train_filtered": "strategyqa_train_filtered.json",
    "test": "strategyqa_test.json",
}
_STRATEGY_PARAGRAPH_MEMBER = "strategyqa_train_paragraphs.json"


def _strategy_step_evidence(evidence: object, step: int) -> tuple[str, list[str]]:
    """``("retrieval", ids)``, ``("operation", [])`` or ``("no_evidence", [])`` of one step.

    Annotators are read in order; the first one whose evidence for the step is not
    ``no_evidence`` decides.
    """
    for annotator in evidence if isinstance(evidence, list | tuple) else ():
        if not isinstance(annotator, list | tuple) or step >= len(annotator):
            continue
        items = annotator[step]
        items = items if isinstance(items, list | tuple) else [items]
        ids = [
            pid
            for item in items
            if isinstance(item, list | tuple)
            for pid in item
            if isinstance(pid, str) and pid.strip()
        ]
        if ids:
            return "retrieval", list(dict.fromkeys(ids))
        if "operation" in items:
            return "operation", []
    return "no_evidence", []


def _paragraph_title(pid: str, documents: object) -> str:
    for doc in documents if isinstance(documents, list | tuple) else ():
        if isinstance(doc, Mapping) and doc.get("id") == pid and isinstance(doc.get("title"), str):
            return doc["title"]
    head, sep, _ = pid.rpartition("-")
    return head if sep and head.strip() else pid


def strategyqa_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a StrategyQA task, from its decomposition and evidence.

    One subgoal per decomposition step. A retrieval step (an annotator gives paragraph ids)
    queries each evidence page (``KnowledgeQuery(title)``, ``ParagraphRetrieve(R, Query: q) =
    Paragraph(Title-N)``) then asks ``QA([evidence], Question: q)``; an ``operation`` or
    ``no_evidence`` step asks ``QA`` over the results it references (or every earlier result).
    A reference ``#k`` becomes the variable of step ``k``'s ``QA`` action in the actions (the
    env substitutes its value) and "the result of Subgoal k" in the subgoal text.

    StrategyQA does not record the sub-answers, so every ``QA`` action but the last has no
    ``= result`` tail; the last step answers the question and its tail is ``yes`` or ``no``.

    Raises:
        GoldPlanError: no decomposition, a dangling ``#k``, an evidence paragraph missing from
            the paragraphs file, or a first step with neither evidence nor an earlier result.
    """
    answer = _require_answer(task)
    steps = task.meta.get("decomposition")
    if not isinstance(steps, list | tuple) or not steps:
        raise GoldPlanError("the task has no decomposition")
    evidence = task.meta.get("evidence")
    documents = task.meta.get("documents")
    plan = _PlanBuilder()
    results: list[str] = []
    for k, step in enumerate(steps, 1):
        if not isinstance(step, str) or not step.strip():
            raise GoldPlanError(f"decomposition step {k} is not a question")
        where = f"decomposition step {k}"
        text = _plain(step, f"the question of step {k}")
        question = _resolve(text, results, where)
        subgoal = qa_subgoal(
            _resolve(text, [f"the result of Subgoal {j}" for j in range(1, k)], where)
        )
        used = [results[int(j) - 1] for j in dict.fromkeys(_REFERENCE.findall(text))]
        kind, ids = _strategy_step_evidence(evidence, k - 1)
        context: list[str] = []
        if kind == "retrieval":
            pages: dict[str, list[str]] = {}
            known = {
                d.get("id") for d in documents if isinstance(d, Mapping) and d.get("id")
            } if isinstance(documents, list | tuple) else set()
            for pid in ids:
                if known and pid not in known:
                    raise GoldPlanError(f"{where}: the evidence paragraph {pid!r} is missing")
                pages.setdefault(_paragraph_title(pid, documents), []).append(_clean(pid))
            for title, pids in pages.items():
                page = plan.knowledge(title)
                tail = ", ".join(f"Paragraph({pid})" for pid in pids)
                context.append(plan.retrieve(page, question, tail))
        else:
            context = used or list(results)
            if not context:
                raise GoldPlanError(f"{where} has no evidence paragraph and no earlier result")
        results.append(plan.qa(context, question, answer if k == len(steps) else None))
        plan.subgoal(subgoal)
    return plan.steps()


def _yes_no(value: object) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false"):
        return "yes" if value.strip().lower() in ("yes", "true") else "no"
    return None


def _strategy_evidence(f: _Fields) -> None:
    """Validate ``evidence``: annotators × steps × (id list | "operation" | "no_evidence")."""
    for a, annotator in enumerate(f.items("evidence") or []):
        if not isinstance(annotator, list):
            raise f.error(f"evidence[{a}] is not a list of steps")
        for s, items in enumerate(annotator):
            if not isinstance(items, list):
                raise f.error(f"evidence[{a}][{s}] is not a list")
            for item in items:
                ok = item in ("operation", "no_evidence") or (
                    isinstance(item, list) and all(isinstance(x, str) for x in item)
                )
                if not ok:
                    raise f.error(
                        f"evidence[{a}][{s}] holds {item!r}; expected paragraph-id lists, "
                        "'operation' or 'no_evidence'"
                    )


def _read_paragraphs(path: Path) -> dict[str, dict[str, Any]]:
    src = _read_source(path, "paragraphs", {"paragraphs": _STRATEGY_PARAGRAPH_MEMBER},
                       _PARAGRAPHS_EXPECTED)
    parsed = _parse_json(src, _PARAGRAPHS_EXPECTED)
    if not isinstance(parsed, dict):
        raise DataError(f"{src.name}: not a JSON object; expected {_PARAGRAPHS_EXPECTED}")
    for pid, para in parsed.items():
        if not (
            isinstance(para, dict)
            and isinstance(para.get("title"), str)
            and isinstance(para.get("content"), str)
        ):
            raise DataError(
                f"{src.name}: paragraph {pid!r} lacks a text title or content; "
                f"expected {_PARAGRAPHS_EXPECTED}"
            )
    return parsed


def _archive_has(path: Path, member: str) -> bool:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as archive:
            return any(n.rsplit("/", 1)[-1] == member for n in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _strategy_documents(
    evidence: object, facts: Sequence[str] | None, term: str | None,
    paragraphs: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[list[dict[str, str]], list[str]]:
    """The documents of a record and the evidence ids missing from the paragraphs file."""
    if paragraphs is None:
        title = term or "Facts"
        return [{"title": title, "text": fact} for fact in facts or ()], []
    ids: dict[str, None] = {}
    for annotator in evidence if isinstance(evidence, list) else ():
        for items in annotator:
            for item in items:
                if isinstance(item, list):
                    ids.update(dict.fromkeys(item))
    documents, missing = [], []
    for pid in ids:
        para = paragraphs.get(pid)
        if para is None:
            missing.append(pid)
        else:
            documents.append({"id": pid, "title": para["title"], "text": para["content"]})
    return documents, missing


def _bigbench_answer(example: Mapping[str, Any]) -> str | None:
    scores = example.get("target_scores")
    if isinstance(scores, Mapping):
        numbers = {k: v for k, v in scores.items() if isinstance(v, int | float)}
        ranked = sorted(numbers.items(), key=lambda kv: -kv[1])
        if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
            return _yes_no(ranked[0][0])
    target = example.get("target")
    target = target[0] if isinstance(target, list) and target else target
    match = re.match(r"\s*(yes|no)\b", target, re.IGNORECASE) if isinstance(target, str) else None
    return match.group(1).lower() if match else None


def _load_bigbench(src: _Source, split: str, task: Mapping[str, Any]) -> list[Task]:
    exp = "BIG-bench task.json with examples [{input, target, target_scores}]"
    examples = task.get("examples")
    if not isinstance(examples, list) or not examples:
        raise DataError(f"{src.name}: a JSON object without 'examples'; expected {exp}")
    tasks = []
    for i, example in enumerate(examples):
        where = f"{src.name}: examples[{i}]"
        if not isinstance(example, dict):
            raise DataError(f"{where} is a {type(example).__name__}; expected {exp}")
        question = example.get("input")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{where} has no text 'input'; expected {exp}")
        answer = _bigbench_answer(example)
        if answer is None:
            raise DataError(f"{where}: no Yes/No answer in target_scores or target; expected {exp}")
        target = example.get("target")
        target = target[0] if isinstance(target, list) and target else target
        rationale = None
        if isinstance(target, str):
            rationale = re.sub(r"^\s*(yes|no)\b[.,:]?\s*", "", target, flags=re.IGNORECASE)
            rationale = rationale.strip() or None
        raw = {k: v for k, v in example.items() if k != "input"}
        tasks.append(
            _make_task("strategyqa", split, str(i), question.strip(), answer, raw=raw,
                       documents=[], rationale=rationale)
        )
    return tasks


def load_strategyqa(
    path: str | Path,
    split: str = "train",
    *,
    unlabeled: bool = False,
    paragraphs: str | Path | None = None,
) -> list[Task]:
    """Load a StrategyQA file (train, train_filtered, test, Lumos eval or BIG-bench).

    Args:
        path: the JSON file, or the official ``strategyqa_dataset.zip`` (the split names
            its member: ``train``, ``train_filtered`` or ``test``).
        split: the split name used in task ids (``strategyqa/{split}/{qid}``; the position for
            records without ``qid``, as in the Lumos and BIG-bench files).
        unlabeled: accept records without ``answer`` (``strategyqa_test.json``).
        paragraphs: a ``strategyqa_train_paragraphs.json`` file (or the zip holding it); the
            evidence paragraphs of each record become its documents. By default the official
            zip's own paragraphs file is used when ``path`` is that zip; otherwise each fact
            is a document titled with the term.

    Returns:
        One task per record, in file order. ``answer`` is ``"yes"`` or ``"no"``;
        ``rationale`` is the facts joined by spaces (BIG-bench: the target's justification);
        ``meta`` holds every other field verbatim, the QA conventions, ``missing_paragraphs``
        (evidence ids absent from the paragraphs file) and the gold plan of
        :func:`strategyqa_plan` for decomposed records.

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record, an answer that is not
            a boolean (or yes/no), a record without answer (unless ``unlabeled``), or
            duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _STRATEGY_EXPECTED
    src = _read_source(path, split, _STRATEGY_MEMBERS, exp)
    parsed = _parse_json(src, exp)
    if isinstance(parsed, dict) and "examples" in parsed:
        return _load_bigbench(src, split, parsed)
    records = _as_records(src, parsed, exp)
    if paragraphs is None and _archive_has(path, _STRATEGY_PARAGRAPH_MEMBER):
        paragraphs = path
    para_map = _read_paragraphs(Path(paragraphs)) if paragraphs is not None else None
    tasks = []
    for rec in records:
        f = _Fields(src, rec, exp)
        question = f.text("question").strip()
        answer: str | None = None
        if f.present("answer"):
            answer = _yes_no(rec.data["answer"])
            if answer is None:
                raise f.error(f"field 'answer' is {rec.data['answer']!r}, not true/false")
        gold = _gold_answer(f, answer, dataset="StrategyQA", unlabeled=unlabeled)
        term = f.text("term", required=False)
        f.text("description", required=False)
        facts = f.texts("facts")
        f.texts("decomposition")
        _strategy_evidence(f)
        documents, missing = _strategy_documents(rec.data.get("evidence"), facts, term, para_map)
        raw = dict(rec.data)
        if para_map is not None:
            raw["missing_paragraphs"] = missing
        local_id = (f.text("qid", required=False) or "").strip() or str(rec.index)
        tasks.append(
            _make_task(
                "strategyqa", split, local_id, question, gold, raw=raw, documents=documents,
                rationale=" ".join(x.strip() for x in facts) if facts else None,
                plan=strategyqa_plan, labeled=bool(gold),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks
