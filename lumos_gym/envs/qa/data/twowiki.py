"""2WikiMultihopQA: the loader of its official files (or release zip), and its gold plan.

See :mod:`lumos_gym.envs.qa.data` for the formats read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lumos_gym.envs.qa.data.common import (
    _check_unique,
    _clean,
    _Fields,
    _gold_answer,
    _join_sentences,
    _read_source,
    _records,
    _split_name,
    _supporting_facts,
    _titled_paragraphs,
    answer_type,
)
from lumos_gym.envs.qa.data.plans import (
    GoldPlanError,
    PlanStep,
    _make_task,
    _names,
    _plain,
    _PlanBuilder,
    _require_answer,
    _same,
    relation_question,
)
from lumos_gym.envs.tasks import Task

_TWOWIKI_EXPECTED = (
    "2WikiMultihopQA JSON records with _id, type, question, context [[title, [sentences]]], "
    "supporting_facts, evidences [[subject, relation, object]] and answer"
)

#: Members of the release zip archives, by split name.
_TWOWIKI_MEMBERS = {
    **{part: f"{part}.json" for part in ("train", "dev", "test")},
    **{f"ids_{part}": f"{part}.json" for part in ("train", "dev", "test")},
}


def _match_title(entity: str, titles: Sequence[str]) -> str:
    """The context title of an evidence entity: exact, case-blind, or before ``" ("``."""
    for title in titles:
        if title == entity:
            return title
    folded = entity.casefold()
    for title in titles:
        if title.casefold() == folded:
            return title
    for title in titles:
        if title.split(" (", 1)[0].strip().casefold() == folded:
            return title
    return entity


def _triples(task: Task) -> list[tuple[str, str, str]]:
    raw = task.meta.get("evidences")
    triples = []
    for j, item in enumerate(raw if isinstance(raw, list | tuple) else ()):
        if not (
            isinstance(item, list | tuple)
            and len(item) == 3
            and all(isinstance(x, str) and x.strip() for x in item)
        ):
            raise GoldPlanError(f"evidence {j} is not [subject, relation, object]")
        triples.append((_clean(item[0]), _clean(item[1]), _clean(item[2])))
    if not triples:
        raise GoldPlanError("the task has no evidence triples")
    return triples


def twowiki_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a 2WikiMultihopQA task, from its evidence triples.

    Each triple ``[subject, relation, object]`` is one subgoal (``KnowledgeQuery(<context title
    of the subject>)``, ``ParagraphRetrieve(R, Query: What is the <relation> of <subject>?)``,
    ``QA([R], Question: ...) = <object>``). Compositional and inference questions need the
    triples to chain (each subject is the previous object) to the answer; comparison and
    bridge-comparison questions (and yes/no answers) end with ``QA([every retrieved paragraph],
    Question: question) = answer``.

    Raises:
        GoldPlanError: no triples, a malformed triple, or triples that do not chain to the
            answer of a compositional or inference question.
    """
    answer = _require_answer(task)
    triples = _triples(task)
    kind = str(task.meta.get("type") or "").replace("-", "_")
    compare = "comparison" in kind or answer_type(answer) == "yes/no"
    if not compare:
        chained = all(_same(b[0], a[2]) for a, b in zip(triples, triples[1:], strict=False))
        if not chained or not _same(triples[-1][2], answer):
            raise GoldPlanError("the evidence triples do not chain to the answer")
    context = task.meta.get("context")
    titles = [
        c[0]
        for c in (context if isinstance(context, list | tuple) else ())
        if isinstance(c, list | tuple) and c and isinstance(c[0], str)
    ]
    plan = _PlanBuilder()
    evidence = []
    for k, (subject, relation, obj) in enumerate(triples, 1):
        question, subgoal = relation_question(subject, relation)
        question = _plain(question, f"the question of triple {k}")
        title = _match_title(subject, titles)
        page = plan.knowledge(title)
        evidence.append(plan.retrieve(page, question, f"Paragraph({_clean(title)})"))
        last = k == len(triples) and not compare
        plan.qa([evidence[-1]], question, answer if last else obj)
        plan.subgoal(subgoal)
    if compare:  # over the paragraphs: the values alone do not say whose they are
        relation = triples[-1][1]
        entities = list(dict.fromkeys(s for s, r, _ in triples if r == relation))
        plan.qa(evidence, _plain(task.question, "the question"), answer)
        plan.subgoal(f"Compare {_names(entities)} to answer the question.")
    return plan.steps()


def _evidences(f: _Fields) -> list[tuple[str, str, str]]:
    out = []
    for j, item in enumerate(f.items("evidences") or []):
        if not (
            isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)
        ):
            raise f.error(f"evidences[{j}] is not [subject, relation, object]")
        out.append((item[0], item[1], item[2]))
    return out


def load_twowiki(path: str | Path, split: str = "dev", *, unlabeled: bool = False) -> list[Task]:
    """Load a 2WikiMultihopQA file (``train.json``, ``dev.json``, ``test.json``, any release).

    Args:
        path: the JSON list, or a release zip (the split names the member: ``dev`` for
            ``dev.json``; ``ids_dev`` too, for the release with ``evidences_id``).
        split: the split name used in task ids (``2wikimultihopqa/{split}/{_id}``).
        unlabeled: accept records without ``answer`` (``test.json``).

    Returns:
        One task per record, in file order. ``meta`` holds every field but ``question`` and
        ``answer`` verbatim (``type``, ``entity_ids``, ``evidences``, ``evidences_id``,
        ``answer_id``...), ``documents`` (the context paragraphs, sentences joined with a
        space where they have none), ``sub_answers`` (one question per evidence triple, as in
        :func:`twowiki_plan`) and the gold plan where the triples allow one.

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record, a record without
            answer (unless ``unlabeled``), or duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _TWOWIKI_EXPECTED
    src = _read_source(path, split, _TWOWIKI_MEMBERS, exp)
    tasks = []
    for rec in _records(src, exp):
        f = _Fields(src, rec, exp)
        question = f.text("question").strip()
        value = f.text("answer", required=False)
        answer = _gold_answer(f, value, dataset="2WikiMultihopQA", unlabeled=unlabeled)
        f.text("type", required=False)
        f.text("entity_ids", required=False)
        _supporting_facts(f)
        triples = _evidences(f)
        documents = [
            {"title": title, "text": _join_sentences(sentences)}
            for title, sentences in _titled_paragraphs(f, "context")
        ]
        sub_answers = {relation_question(s, r)[0]: _clean(o) for s, r, o in triples}
        local_id = (f.text("_id", required=False) or "").strip() or str(rec.index)
        tasks.append(
            _make_task(
                "2wikimultihopqa", split, local_id, question, answer, raw=rec.data,
                documents=documents, sub_answers=sub_answers, plan=twowiki_plan,
                labeled=bool(answer),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks
