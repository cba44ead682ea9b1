"""MuSiQue: the loader of its official JSON lines files (or release zip), and its gold plan.

See :mod:`lumos_gym.envs.qa.data` for the formats read.
"""

from __future__ import annotations

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
)
from lumos_gym.envs.qa.data.plans import (
    GoldPlanError,
    PlanStep,
    _hop,
    _make_task,
    _plain,
    _PlanBuilder,
    _require_answer,
    _resolve,
    _same,
)
from lumos_gym.envs.tasks import Task

_MUSIQUE_EXPECTED = (
    "MuSiQue JSON lines with id, paragraphs [{idx, title, paragraph_text, is_supporting}], "
    "question, question_decomposition, answer and answer_aliases"
)

#: Members of the release zip archive, by split name.
_MUSIQUE_MEMBERS = {
    f"{kind}_{part}": f"musique_{kind}_v1.0_{part}.jsonl"
    for kind in ("ans", "full")
    for part in ("train", "dev", "test")
}


def _musique_hops(decomposition: object) -> list[tuple[str, str, str, Any]]:
    """``(question, subgoal, answer, paragraph_support_idx)`` per step, ``#k`` resolved."""
    if not isinstance(decomposition, list | tuple) or not decomposition:
        raise GoldPlanError("the task has no question_decomposition")
    answers: list[str] = []
    hops = []
    for k, step in enumerate(decomposition, 1):
        if not isinstance(step, Mapping) or not isinstance(step.get("question"), str):
            raise GoldPlanError(f"decomposition step {k} has no question")
        answer = step.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise GoldPlanError(f"decomposition step {k} has no answer")
        text = _resolve(step["question"], answers, f"decomposition step {k}")
        question, subgoal = _hop(text)
        answers.append(_clean(answer))
        hops.append((question, subgoal, answers[-1], step.get("paragraph_support_idx")))
    return hops


def musique_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a MuSiQue task, from its question decomposition.

    One subgoal per decomposition step, ``#k`` replaced by the answer of step ``k`` and
    ``subject >> relation`` hops phrased as questions: ``KnowledgeQuery(<supporting
    paragraph's title>)``, ``ParagraphRetrieve(R, Query: q)``, ``QA([R], Question: q) =
    <step answer>``; the last step's answer must be the task's answer (or an alias).

    Raises:
        GoldPlanError: an unanswerable task, a step without supporting paragraph, a dangling
            ``#k``, or a last answer that is not the task's.
    """
    answer = _require_answer(task)
    if task.meta.get("answerable") is False:
        raise GoldPlanError("the question is unanswerable (answerable: false)")
    hops = _musique_hops(task.meta.get("question_decomposition"))
    paragraphs = task.meta.get("paragraphs")
    titles = {
        p["idx"]: p.get("title")
        for p in (paragraphs if isinstance(paragraphs, list | tuple) else ())
        if isinstance(p, Mapping) and isinstance(p.get("idx"), int)
    }
    aliases = task.meta.get("aliases")
    accepted = [answer, *(aliases if isinstance(aliases, list | tuple) else ())]
    if not any(_same(hops[-1][2], a) for a in accepted if isinstance(a, str)):
        raise GoldPlanError(
            f"the last step's answer {hops[-1][2]!r} is not the task's answer {answer!r}"
        )
    plan = _PlanBuilder()
    for k, (question, subgoal, step_answer, support) in enumerate(hops, 1):
        title = titles.get(support) if isinstance(support, int) else None
        if not isinstance(title, str) or not title.strip():
            raise GoldPlanError(f"decomposition step {k} has no supporting paragraph")
        question = _plain(question, f"the question of step {k}")
        page = plan.knowledge(title)
        evidence = plan.retrieve(page, question, f"Paragraph({_clean(title)})")
        plan.qa([evidence], question, answer if k == len(hops) else step_answer)
        plan.subgoal(subgoal)
    return plan.steps()


def musique_sub_answers(decomposition: object) -> dict[str, str]:
    """Return ``{sub-question: answer}`` of a MuSiQue decomposition (``#k`` resolved).

    The questions are phrased as in :func:`musique_plan`, so they are the ``Question:`` texts of
    its ``QA`` actions.

    Raises:
        GoldPlanError: the decomposition is missing or malformed.
    """
    return {question: answer for question, _, answer, _ in _musique_hops(decomposition)}


def _musique_paragraphs(f: _Fields) -> list[Mapping[str, Any]]:
    paragraphs = f.items("paragraphs", required=True) or []
    for j, p in enumerate(paragraphs):
        ok = (
            isinstance(p, dict)
            and isinstance(p.get("idx"), int)
            and isinstance(p.get("title"), str)
            and isinstance(p.get("paragraph_text"), str)
            and isinstance(p.get("is_supporting", False), bool)
        )
        if not ok:
            raise f.error(f"paragraphs[{j}] is not {{idx, title, paragraph_text, is_supporting}}")
    return paragraphs


def _musique_decomposition(f: _Fields) -> None:
    for j, step in enumerate(f.items("question_decomposition") or []):
        support = step.get("paragraph_support_idx") if isinstance(step, dict) else None
        ok = (
            isinstance(step, dict)
            and isinstance(step.get("question"), str)
            and isinstance(step.get("answer"), str)
            and (support is None or (isinstance(support, int) and not isinstance(support, bool)))
        )
        if not ok:
            raise f.error(
                f"question_decomposition[{j}] is not {{id, question, answer, "
                "paragraph_support_idx}"
            )


def load_musique(
    path: str | Path, split: str = "ans_dev", *, unlabeled: bool = False
) -> list[Task]:
    """Load a MuSiQue file (MuSiQue-Ans or MuSiQue-Full, any split).

    Args:
        path: a ``musique_*_v1.0_*.jsonl`` file, or the release zip (the split names the
            member: ``ans_train``, ``ans_dev``, ``ans_test``, ``full_train``...).
        split: the split name used in task ids (``musique/{split}/{id}``, with the suffix
            ``:unanswerable`` for ``answerable: false`` records and ``#2``... for the later
            copies of an id in an unlabeled full file).
        unlabeled: accept records without ``answer`` (the test files).

    Returns:
        One task per record, in file order. ``meta`` holds every field but ``question`` and
        ``answer`` verbatim (``answerable`` included: ``False`` marks an unanswerable
        question), ``documents`` (the paragraphs), ``aliases`` (``answer_aliases``),
        ``sub_answers`` (each decomposition question, ``#k`` resolved and phrased as in
        :func:`musique_plan`, with its answer) and, for answerable records, the gold plan.

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record, a record without
            answer (unless ``unlabeled``), or duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _MUSIQUE_EXPECTED
    src = _read_source(path, split, _MUSIQUE_MEMBERS, exp)
    tasks = []
    seen: dict[str, int] = {}
    for rec in _records(src, exp):
        f = _Fields(src, rec, exp)
        record_id = f.text("id").strip()
        question = f.text("question").strip()
        paragraphs = _musique_paragraphs(f)
        _musique_decomposition(f)
        value = f.text("answer", required=False)
        answer = _gold_answer(f, value, dataset="MuSiQue", unlabeled=unlabeled)
        aliases = f.texts("answer_aliases") or []
        answerable = f.boolean("answerable", required=False)
        try:
            sub_answers = musique_sub_answers(rec.data.get("question_decomposition"))
        except GoldPlanError:
            sub_answers = {}
        local_id = record_id + (":unanswerable" if answerable is False else "")
        if not answer and answerable is None:  # unlabeled full files repeat each id
            seen[local_id] = seen.get(local_id, 0) + 1
            if seen[local_id] > 1:
                local_id = f"{local_id}#{seen[local_id]}"
        documents = [{"title": p["title"], "text": p["paragraph_text"]} for p in paragraphs]
        tasks.append(
            _make_task(
                "musique", split, local_id, question, answer, raw=rec.data,
                documents=documents, aliases=aliases, sub_answers=sub_answers,
                plan=musique_plan, labeled=bool(answer),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks
