"""Gold plans of the complex-QA datasets: the Lumos actions a decomposition is written as.

A plan is a tuple of :class:`PlanStep` (a subgoal and its grounded :class:`PlanAction`),
written by :class:`_PlanBuilder` with globally numbered ``R<n>`` variables; each dataset's
plan builder (``hotpotqa_plan``... in the dataset's module) uses the phrasing rules here
(:func:`relation_question`, :func:`qa_subgoal`, ``#k`` references). :func:`_make_task`
builds a loader's task record and attaches its gold plan (``gold_actions``, ``subgoals``,
``sub_answers``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lumos_gym.actions import parse_action, references
from lumos_gym.envs.qa.data.common import _clean, answer_type
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import ActionParseError, DataError
from lumos_gym.scoring.answers import normalize_text

# ---------------------------------------------------------------------------------------------
# Gold plans


class GoldPlanError(DataError):
    """A task's gold decomposition cannot be written as Lumos actions; the message says why."""


@dataclass(frozen=True)
class PlanAction:
    """One grounded action of a gold plan.

    Attributes:
        text: the action without tail, e.g. ``"R1 = KnowledgeQuery(Julius Caesar)"``.
        result: the annotation tail (``"WikipediaPage(Julius Caesar)"``, an answer), or None
            where the dataset does not know it.
    """

    text: str
    result: str | None = None

    @property
    def output(self) -> str:
        """The variable the action binds."""
        return self.text.split(" = ", 1)[0]


@dataclass(frozen=True)
class PlanStep:
    """One subgoal of a gold plan and its actions."""

    subgoal: str
    actions: tuple[PlanAction, ...]


class _PlanBuilder:
    """Writes Lumos QA actions with globally numbered ``R<n>`` variables, subgoal by subgoal."""

    def __init__(self) -> None:
        self._steps: list[PlanStep] = []
        self._pending: list[PlanAction] = []
        self._count = 0

    def _add(self, name: str, args: str, result: str | None, *, free_text: str) -> str:
        self._count += 1
        var = f"R{self._count}"
        text = f"{var} = {name}({args})"
        if _BRACKETS.search(free_text):  # without brackets in the text, the action is sound
            try:
                parsed = parse_action(text)
            except ActionParseError as e:
                raise GoldPlanError(f"{name}({args}) is not a valid action: {e}") from e
            if parsed.name != name or parsed.args != args or parsed.result is not None:
                raise GoldPlanError(f"{name}({args}) does not read back as one action")
        tail = None if result is None else _clean(result)
        if tail is not None and not tail:
            raise GoldPlanError(f"{name}({args}) has an empty result")
        self._pending.append(PlanAction(text, tail))
        return var

    def knowledge(self, title: str) -> str:
        title = _plain(title, "the page title")
        return self._add(
            "KnowledgeQuery", title, f"WikipediaPage({title})", free_text=title
        )

    def retrieve(self, source: str, query: str, result: str | None) -> str:
        return self._add(
            "ParagraphRetrieve", f"{source}, Query: {query}", result, free_text=query
        )

    def qa(self, context: Sequence[str], question: str, result: str | None) -> str:
        args = f"[{', '.join(context)}], Question: {question}"
        return self._add("QA", args, result, free_text=question)

    def subgoal(self, text: str) -> None:
        text = _clean(text)
        if not text or not self._pending:
            raise GoldPlanError("a subgoal without text or actions")
        self._steps.append(PlanStep(text, tuple(self._pending)))
        self._pending = []

    def steps(self) -> tuple[PlanStep, ...]:
        if self._pending or not self._steps:
            raise GoldPlanError("the plan is empty or ends without a subgoal")
        return tuple(self._steps)


_BRACKETS = re.compile(r"[()\[\]{}]")


def _plain(text: object, what: str) -> str:
    """Text placed inside an action: one line, with no ``R<n>`` the env would substitute."""
    text = _clean(text)
    if not text:
        raise GoldPlanError(f"{what} is empty")
    refs = [r for r in references(text) if r != "Output"]
    if refs:
        raise GoldPlanError(
            f"{what} {text!r} mentions {refs[0]}, which the action language reads as a variable"
        )
    return text


def gold_actions(steps: Sequence[PlanStep]) -> tuple[str, ...]:
    """Return the oracle trajectory of a gold plan.

    Args:
        steps: the plan.

    Returns:
        One ``; ``-joined step per subgoal (actions without tails), then ``Answer(R<n>)`` with
        the variable of the plan's last action.
    """
    out = ["; ".join(action.text for action in step.actions) for step in steps]
    out.append(f"Answer({steps[-1].actions[-1].output})")
    return tuple(out)


def plan_sub_answers(steps: Sequence[PlanStep]) -> dict[str, str]:
    """Return ``{question: answer}`` of the plan's ``QA`` actions whose answer is known.

    The questions are written as in the actions (StrategyQA's with their ``R<n>``), so that a
    privileged env's reference ``QA`` backend answers the gold actions when they are replayed.
    """
    known = {}
    for step in steps:
        for action in step.actions:
            parsed = parse_action(action.text)
            question = parsed.arguments().get("Question") if parsed.name == "QA" else None
            if question is not None and action.result is not None:
                known[question] = action.result
    return known


_WH_START = re.compile(
    r"^(?:(?:in|on|at|for|from|by|during|of|to|with|after|before|since|until)\s+)?"
    r"(?:who|whom|whose|what|which|when|where|why|how)\b",
    re.IGNORECASE,
)
# Auxiliaries: after a wh-word they mostly mean an inverted question ("When did X open?"),
# which does not read as an embedded clause ("find out when did X open").
_AUXILIARY = re.compile(
    r"\b(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|may|might)\b",
    re.IGNORECASE,
)
_COPULA_FIRST = re.compile(
    r"^(?:who|what|which)\s+(?:is|are|was|were)\b(?!.*\b(?:do|does|did)\b)", re.IGNORECASE
)


def relation_question(subject: str, relation: str) -> tuple[str, str]:
    """Phrase a ``subject >> relation`` hop (MuSiQue) or an evidence triple (2Wiki).

    Args:
        subject: the entity, e.g. ``"Green"``.
        relation: the relation, e.g. ``"performer"`` or ``"part of"``.

    Returns:
        ``(question, subgoal)``: ``("What is the performer of Green?", "Identify the
        performer of Green.")``; a relation ending in ``of`` gives ``("What is Green part
        of?", "Identify what Green is part of.")``.
    """
    subject, relation = _clean(subject), _clean(relation)
    if relation.lower().endswith(" of"):
        return f"What is {subject} {relation}?", f"Identify what {subject} is {relation}."
    return f"What is the {relation} of {subject}?", f"Identify the {relation} of {subject}."


def qa_subgoal(question: str) -> str:
    """Phrase a sub-question as a subgoal, by rules.

    Args:
        question: a sub-question, e.g. ``"Who founded the city?"``.

    Returns:
        ``"Find out who founded the city."`` for a wh-question that reads as an embedded
        clause (an opening preposition allowed: ``"In which year..."``; ``"What is the
        capital of X?"`` too), else ``"Answer the question: <question>"`` (yes/no questions
        and inverted ones such as ``"When did X open?"``).
    """
    text = _clean(question)
    wh = _WH_START.match(text)
    if wh and (_COPULA_FIRST.match(text) or not _AUXILIARY.search(text, wh.end())):
        return f"Find out {text[:1].lower()}{text[1:].rstrip('?!. ')}."
    return f"Answer the question: {text}"


def _hop(text: str) -> tuple[str, str]:
    """``(question, subgoal)`` of a decomposition step, ``>>`` hops phrased."""
    subject, sep, relation = text.partition(">>")
    if sep and subject.strip() and relation.strip():
        return relation_question(subject, relation)
    question = _clean(text)
    return question, qa_subgoal(question)


_REFERENCE = re.compile(r"#(\d+)")


def _resolve(text: str, values: Sequence[str], where: str) -> str:
    """Replace ``#k`` with ``values[k - 1]``; a reference to no earlier step is an error."""

    def replace(match: re.Match[str]) -> str:
        k = int(match.group(1))
        if not 1 <= k <= len(values):
            raise GoldPlanError(f"{where} refers to #{k}, which no earlier step answers")
        return values[k - 1]

    return _REFERENCE.sub(replace, text)


def _require_answer(task: Task) -> str:
    answer = _clean(task.answer) if isinstance(task.answer, str) else ""
    if not answer:
        raise GoldPlanError("the task has no gold answer")
    return answer


def _names(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _same(a: str, b: str) -> bool:
    return normalize_text(a) == normalize_text(b)


# ---------------------------------------------------------------------------------------------
# Task records


def _make_task(
    dataset: str,
    split: str,
    local_id: str,
    question: str,
    answer: str,
    *,
    raw: Mapping[str, Any],
    documents: list[dict[str, str]],
    aliases: Sequence[str] = (),
    sub_answers: Mapping[str, str] | None = None,
    rationale: str | None = None,
    plan: Callable[[Task], tuple[PlanStep, ...]] | None = None,
    labeled: bool = True,
) -> Task:
    meta: dict[str, Any] = {"dataset": dataset}
    meta.update((k, v) for k, v in raw.items() if k not in ("question", "answer"))
    meta.update(
        documents=documents,
        aliases=[a for a in aliases if a.strip() and a.strip() != answer],
        sub_answers=dict(sub_answers or {}),
        answer_type=answer_type(answer) if labeled else None,
        labeled=labeled,
    )
    task = Task(
        id=f"{dataset}/{split}/{local_id}",
        question=question,
        answer=answer,
        task_type="qa",
        rationale=rationale,
        meta=meta,
    )
    if plan is None or not labeled:
        return task
    try:
        steps = plan(task)
    except GoldPlanError:
        return task
    known = {**meta["sub_answers"], **plan_sub_answers(steps)}
    return dataclasses.replace(
        task,
        gold_actions=gold_actions(steps),
        meta={**meta, "sub_answers": known, "subgoals": [step.subgoal for step in steps]},
    )
