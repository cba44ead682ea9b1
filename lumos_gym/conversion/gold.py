"""Gold plans for the counterfactual agents: a task's subgoals and their grounded actions.

A task's gold plan is its unified annotation, made by the dataset's rule-based converter
(:func:`lumos_gym.conversion.rules.convert_task`, the same one that writes the training data),
in the bytes the Lumos-I modules are trained to answer: each subgoal line as the planner writes
it (``Subgoal 2: ...``) and its actions as the grounder writes them (``; ``-joined, no result
tails, an ``Output`` variable renamed to the next ``R<n>``: the ``ground-iterative`` export).

The counterfactual agents (:mod:`lumos_gym.agents.counterfactual`) get it as
``info["gold_plan"]``, a list of ``{"subgoal": ..., "actions": ...}``; the run's plan
(:func:`lumos_gym.evaluation.plan.plan_env`) builds it once per task with :func:`gold_info`.
The env is not made privileged, so its tools (model-backed ``QA``, rankers) stay those of the
agent the counterfactual stands in for, and the episode keys stay the same.
"""

from __future__ import annotations

from typing import Any

from lumos_gym.conversion.exports import ground_iterative
from lumos_gym.conversion.rules import convert_task
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError

#: The ``info`` key of a task's gold plan; None when the task has none (``GOLD_PLAN_ERROR``
#: then says why).
GOLD_PLAN = "gold_plan"
GOLD_PLAN_ERROR = "gold_plan_error"


def gold_plan(task: Task, dataset: str) -> list[dict[str, str]]:
    """Return the gold plan of ``task``: one ``{"subgoal", "actions"}`` per subgoal.

    Args:
        task: the task, with its dataset's gold rationale or decomposition.
        dataset: the converter's dataset name (the env's ``dataset``: ``gsm8k``, ``worldqa``).

    Raises:
        LumosGymError: no converter for ``dataset``, or the task cannot be converted.
    """
    annotation = convert_task(task, dataset)
    grounded = [m["content"] for m in ground_iterative(annotation) if m["role"] == "assistant"]
    return [
        {"subgoal": subgoal.line, "actions": actions}
        for subgoal, actions in zip(annotation.subgoals, grounded, strict=True)
    ]


def gold_info(task: Task, dataset: str | None) -> dict[str, Any]:
    """Return the ``agent_info`` of an episode of ``task`` for an agent reading gold plans.

    Never raises: a task without a gold plan (no converter, a rationale the rules cannot
    convert) gets ``{"gold_plan": None, "gold_plan_error": "<why>"}``, and the agent ends that
    episode as an ``agent-error`` naming the reason.
    """
    if dataset is None:
        return {GOLD_PLAN: None, GOLD_PLAN_ERROR: "the env names no dataset to convert"}
    try:
        return {GOLD_PLAN: gold_plan(task, dataset)}
    except (LumosGymError, ValueError, KeyError, TypeError, IndexError) as e:
        return {GOLD_PLAN: None, GOLD_PLAN_ERROR: f"{type(e).__name__}: {e}"}


__all__ = ["GOLD_PLAN", "GOLD_PLAN_ERROR", "gold_info", "gold_plan"]
