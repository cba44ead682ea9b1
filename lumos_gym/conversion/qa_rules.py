"""Rule-based converters for complex QA: gold decompositions into unified annotations.

The original Lumos asked GPT-4 to rewrite StrategyQA and MuSiQue decompositions into subgoals
and ``KnowledgeQuery`` / ``ParagraphRetrieve`` / ``QA`` actions (docs/lumos-format.md §1.2). The
datasets' own gold annotations allow the same plans to be written by rules, offline and
deterministically; the plans are built by :data:`lumos_gym.envs.qa.data.GOLD_PLANS` (the same
plans give the tasks' ``gold_actions``), and each converter here turns one into an
:class:`~lumos_gym.conversion.annotation.Annotation`:

* ``hotpotqa``: one subgoal per supporting page (``KnowledgeQuery(title) =
  WikipediaPage(title)``, ``ParagraphRetrieve(R, Query: question) = Paragraph(title)``), then
  ``QA([evidence], Question: question) = answer``;
* ``musique``: one subgoal per decomposition step, ``#k`` resolved to the earlier answers and
  ``subject >> relation`` hops phrased as questions, each step's ``QA`` tail its answer;
* ``strategyqa``: one subgoal per decomposition step; ``operation`` steps ask ``QA`` over the
  earlier results they reference. StrategyQA does not record sub-answers, so only the last
  ``QA`` action has a tail (``yes``/``no``); the others have none (the annotation format allows
  an action without tail, and the env computes the values when the plan is replayed);
* ``2wikimultihopqa``: one subgoal per evidence triple (tail: the triple's object), the triples
  chaining to the answer, or a final comparison ``QA`` for comparison questions.

Each converter takes a :class:`~lumos_gym.envs.tasks.Task` and returns an annotation or raises
:class:`~lumos_gym.conversion.rules.ConversionError` saying why; converting a task twice gives
the same annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError, module_converters
from lumos_gym.envs.qa.data import GOLD_PLANS, GoldPlanError
from lumos_gym.envs.tasks import Task

__all__ = [
    "QA_CONVERTERS",
    "hotpotqa_annotation",
    "musique_annotation",
    "qa_annotation",
    "strategyqa_annotation",
    "twowiki_annotation",
]

#: Fields of ``Task.meta`` copied into the annotation's meta when present.
_KEPT_META = ("type", "level", "answer_type", "aliases", "answerable")


def qa_annotation(task: Task, dataset: str) -> Annotation:
    """Convert a complex-QA task with the gold plan of ``dataset``.

    Args:
        task: a task of the dataset's loader (:mod:`lumos_gym.envs.qa.data`).
        dataset: ``hotpotqa``, ``musique``, ``strategyqa`` or ``2wikimultihopqa``.

    Returns:
        The annotation: ``task_type="qa"``, the task's question and answer, and in ``meta``
        the converter's name plus the task's ``type``, ``level``, ``answer_type``, ``aliases``
        and ``answerable`` where it has them.

    Raises:
        ConversionError: not a QA task, no question or answer, or a gold decomposition that
            cannot be written as actions (the message says why).
        KeyError: ``dataset`` has no gold plan.
    """
    plan_of = GOLD_PLANS[dataset]
    if task.task_type != "qa":
        raise ConversionError(f"a {task.task_type!r} task, not a QA task")
    if not isinstance(task.question, str) or not task.question.strip():
        raise ConversionError("the task has no question text")
    if not isinstance(task.answer, str) or not task.answer.strip():
        raise ConversionError("the task has no gold answer")
    try:
        steps = plan_of(task)
    except GoldPlanError as e:
        raise ConversionError(str(e)) from e
    plan = [
        (
            step.subgoal,
            [a.text if a.result is None else f"{a.text} = {a.result}" for a in step.actions],
        )
        for step in steps
    ]
    meta: dict[str, Any] = {"converter": f"rules/{dataset}"}
    meta.update((k, task.meta[k]) for k in _KEPT_META if task.meta.get(k) is not None)
    return Annotation(
        id=task.id,
        dataset=dataset,
        task_type="qa",
        task=task.question.strip(),
        subgoals=make_subgoals(plan),
        answer=task.answer.strip(),
        meta=meta,
    )


def hotpotqa_annotation(task: Task) -> Annotation:
    """Convert a HotpotQA task from its supporting facts (see :func:`qa_annotation`)."""
    return qa_annotation(task, "hotpotqa")


def musique_annotation(task: Task) -> Annotation:
    """Convert a MuSiQue task from its question decomposition (see :func:`qa_annotation`).

    Unanswerable tasks (``answerable: false``) and steps without a supporting paragraph raise
    :class:`ConversionError`.
    """
    return qa_annotation(task, "musique")


def strategyqa_annotation(task: Task) -> Annotation:
    """Convert a StrategyQA task from its decomposition and evidence.

    Only the last ``QA`` action has a tail (the yes/no answer): the dataset does not record
    the sub-answers, so the other ``QA`` actions are written without ``= result``. See
    :func:`qa_annotation`.
    """
    return qa_annotation(task, "strategyqa")


def twowiki_annotation(task: Task) -> Annotation:
    """Convert a 2WikiMultihopQA task from its evidence triples (see :func:`qa_annotation`)."""
    return qa_annotation(task, "2wikimultihopqa")


QA_CONVERTERS: Mapping[str, Callable[[Task], Annotation]] = module_converters(__name__)
"""The rule-based converter of each complex-QA dataset of this module, as the QA family's
record (``lumos_gym/envs/qa``) names them."""
