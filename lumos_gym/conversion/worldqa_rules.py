"""Rule-based converter of WorldQA tasks into unified annotations.

A WorldQA task (:mod:`lumos_gym.envs.qa.worldqa`) carries its gold decomposition: one grounded
step per subgoal (``Task.gold_actions``, the last one ``Answer(R<n>)``), the subgoal texts
(``meta["subgoals"]``) and each action's result (``meta["tails"]``): ``WikipediaPage(<title>)``
for ``KnowledgeQuery``, ``Paragraph(<title>-<k>)`` (the page's ``k``-th sentence states the
fact) for ``ParagraphRetrieve``, and the sub-answer or computed value for ``QA`` and
``Calculator``. The annotation writes each action with its tail, as Lumos' converted
annotations do::

    Subgoal 1: Obtain the founder of Lotre Motors.
    Action 1-1: R1 = KnowledgeQuery(Lotre Motors) = WikipediaPage(Lotre Motors)
    Action 1-2: R2 = ParagraphRetrieve(R1, Query: Who founded Lotre Motors?) = Paragraph(...)
    Action 1-3: R3 = QA([R2], Question: Who founded Lotre Motors?) = Thoshais Haithland

The final ``Answer`` step is not a subgoal: the answer is the last subgoal's last result.
"""

from __future__ import annotations

from dataclasses import replace

from lumos_gym.actions import Action, format_action, parse_actions
from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import ActionParseError
from lumos_gym.scoring.qa import normalize_answer

__all__ = ["worldqa_annotation"]


def _strings(value: object, name: str) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConversionError(f"meta[{name!r}] must be a list of strings")
    return list(value)


def _final_variable(task: Task) -> str:
    """Return ``R<n>`` of the closing ``Answer(R<n>)`` step."""
    try:
        (final,) = parse_actions(task.gold_actions[-1])
    except (ActionParseError, ValueError) as e:
        raise ConversionError(f"the last gold step is not one Answer action: {e}") from e
    if final.name != "Answer" or final.outputs:
        raise ConversionError(f"the last gold step must be Answer(R<n>), got {final.args!r}")
    return final.args.strip()


def _step_actions(step: str, tails: list[str], k: int) -> list[str]:
    try:
        actions: list[Action] = parse_actions(step)
    except ActionParseError as e:
        raise ConversionError(f"gold step {k} does not parse: {e}") from e
    if len(actions) != len(tails):
        raise ConversionError(
            f"gold step {k} has {len(actions)} actions but {len(tails)} result tails"
        )
    return [format_action(replace(a, result=tail)) for a, tail in zip(actions, tails, strict=True)]


def worldqa_annotation(task: Task) -> Annotation:
    """Convert a WorldQA task from its gold decomposition.

    Args:
        task: a task of :func:`lumos_gym.envs.qa.worldqa.generate_tasks`.

    Returns:
        The annotation (dataset ``worldqa``, task type ``qa``): one subgoal per gold step but
        the last, each action with its result tail; ``meta`` keeps the family, kind, answer
        type and aliases.

    Raises:
        ConversionError: no question or answer, subgoals, steps and tails that do not line
            up, an action that does not parse, a last step other than ``Answer(R<n>)`` naming
            the last result, or a last result that is not the answer.
    """
    if not task.question.strip() or not task.answer.strip():
        raise ConversionError("the task has no question or no gold answer")
    if len(task.gold_actions) < 2:
        raise ConversionError("the task has no gold decomposition (gold_actions)")
    subgoals = _strings(task.meta.get("subgoals"), "subgoals")
    tails = task.meta.get("tails")
    if not isinstance(tails, list | tuple):
        raise ConversionError("meta['tails'] must hold the result tails of every step")
    steps = task.gold_actions[:-1]
    if not len(subgoals) == len(steps) == len(tails):
        raise ConversionError(
            f"{len(subgoals)} subgoals, {len(steps)} gold steps before Answer and "
            f"{len(tails)} tail lists do not line up"
        )
    plan = [
        (subgoal, _step_actions(step, _strings(step_tails, "tails"), k))
        for k, (subgoal, step, step_tails) in enumerate(zip(subgoals, steps, tails, strict=True), 1)
    ]
    final = _final_variable(task)
    last = parse_actions(steps[-1])[-1]
    if last.outputs != (final,):
        raise ConversionError(f"Answer({final}) does not name the last result {last.outputs}")
    result = _strings(tails[-1], "tails")[-1]
    accepted = [task.answer, *(str(a) for a in task.meta.get("aliases") or ())]
    if normalize_answer(result) not in {normalize_answer(a) for a in accepted}:
        raise ConversionError(f"the last result {result!r} is not the answer {task.answer!r}")
    return Annotation(
        id=task.id,
        dataset="worldqa",
        task_type="qa",
        task=task.question,
        subgoals=make_subgoals(plan),
        answer=task.answer,
        meta={
            "converter": "rules/worldqa",
            "family": task.meta.get("family"),
            "kind": task.meta.get("kind"),
            "answer_type": task.meta.get("answer_type"),
            "aliases": list(task.meta.get("aliases") or ()),
        },
    )
