"""The rule-based converter of Mind2Web tasks: gold steps into a unified web annotation.

Lumos converted Mind2Web with GPT-4 from ``'; '.join(action_reprs)`` (docs/lumos-format.md §1.2);
the steps already say what to do, so rules give the same shape offline: one subgoal per gold
step, rendered like Lumos' ``translate_action`` (``Type ATLANTA in the combobox Departing
from``, ``Click span Atlanta, GA (ATL)``...), each grounded as one web action chained through
the page variables (§1.4)::

    Subgoal 1: Type ATLANTA in the combobox Departing from
    Action 1-1: R1 = TYPE(Env, QUERY: Type ATLANTA in the combobox Departing from, TEXT: ATLANTA)

    Subgoal 2: Click span Atlanta, GA ATL
    Action 2-1: R2 = CLICK(R1, QUERY: Click span Atlanta, GA ATL)

Web actions carry no ``= result`` tail. The annotation replays in the Mind2Web env with the
oracle ranker (its ``replay_options``) to reward 1.0. A task is rejected when a step has no
gold element on its page (the element cannot be chosen: Mind2Web keeps only the positives that
survived its HTML cleaning) or when a value cannot be written inside an action.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lumos_gym.conversion.annotation import Annotation, AnnotationError, make_subgoals
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs.tasks import Task
from lumos_gym.envs.web.mind2web_data import Operation, grounded_action, step_subgoal
from lumos_gym.errors import DataError

__all__ = ["mind2web_annotation"]


def _steps(task: Task) -> tuple[Sequence[Mapping[str, Any]], list[str]]:
    actions = task.meta.get("actions")
    reprs = task.meta.get("action_reprs")
    if not isinstance(actions, Sequence) or not actions:
        raise ConversionError(f"{task.id}: no Mind2Web actions in the task's meta")
    if not isinstance(reprs, Sequence) or len(reprs) != len(actions):
        raise ConversionError(f"{task.id}: action_reprs do not match the actions")
    return actions, [str(r) for r in reprs]


def mind2web_annotation(task: Task) -> Annotation:
    """Convert a Mind2Web task (from :func:`~lumos_gym.envs.web.mind2web_data.record_task`).

    Raises:
        ConversionError: a step without a gold element, a value that cannot be written in an
            action, or a task without Mind2Web steps.
    """
    actions, reprs = _steps(task)
    plan = []
    for n, (action, action_repr) in enumerate(zip(actions, reprs, strict=True)):
        if not action.get("pos_candidates"):
            raise ConversionError(f"{task.id}: step {n + 1} has no gold element on its page")
        try:
            operation = Operation.from_record(action.get("operation"), f"{task.id}, step {n + 1}")
            grounded = grounded_action(n, action_repr, operation)
        except DataError as e:
            raise ConversionError(f"{task.id}: {e}") from e
        plan.append((step_subgoal(action_repr, operation), [grounded]))
    try:
        subgoals = make_subgoals(plan)
    except AnnotationError as e:
        raise ConversionError(f"{task.id}: {e}") from e
    return Annotation(
        id=task.id,
        dataset="mind2web",
        task_type="web",
        task=task.question,
        subgoals=subgoals,
        answer=task.answer,
        meta={"converter": "rules/mind2web", "website": task.meta.get("website", "")},
    )
