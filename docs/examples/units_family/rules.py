"""The units family's converter (a task's gold steps to an annotation) and replay env."""

from __future__ import annotations

from collections.abc import Sequence

from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs import Task
from units_family.env import UnitsEnv


def units_annotation(task: Task) -> Annotation:
    """Convert a task's gold steps (``meta["steps"]``) into one subgoal each.

    Raises:
        ConversionError: the task has no gold steps.
    """
    steps = task.meta.get("steps")
    if not steps:
        raise ConversionError("the task has no gold steps in meta['steps']")
    plan = [(step["subgoal"], [f"{step['action']} = {step['value']}"]) for step in steps]
    return Annotation(
        id=task.id, dataset="units", task_type="units", task=task.question,
        subgoals=make_subgoals(plan), answer=task.answer, meta={"converter": "rules/units"},
    )


def replay_env(tasks: Sequence[Task], dataset: str) -> UnitsEnv:
    """Build the env that replays annotations of ``tasks`` (``verify_annotations``)."""
    return UnitsEnv(tasks=tasks)
