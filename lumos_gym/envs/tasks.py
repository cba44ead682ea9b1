"""Task records: what an environment reads from a task source."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TASK_TYPES = ("math", "qa", "code", "web", "multimodal", "game")
#: The task types that registered families added to :data:`TASK_TYPES` (filled by
#: :func:`lumos_gym.envs.registration.register_family`).
ADDED_TASK_TYPES: list[str] = []
#: Task types whose episodes the environment ends (a purchase, a win) rather than ``Answer``,
#: and whose Lumos planner feedback restates the subgoal instead of quoting a result.
ENV_ENDED_TYPES = ("web", "game")


def rounds_from_tables(task_id: object, task_type: object, task_types: Mapping[str, int],
                       datasets: Mapping[str, int]) -> int:
    """The most subgoals of an episode, from a table of round limits.

    Its dataset's (the first part of the task id: ``svamp/sample/3`` is SVAMP's) in
    ``datasets``, else its task type's in ``task_types``, else 5. The agents read the tables
    of the registered families; a board reads those a run recorded (``run.json``'s
    ``round_limits``).
    """
    dataset = str(task_id or "").partition("/")[0]
    if dataset in datasets:
        return int(datasets[dataset])
    return int(task_types.get(str(task_type), 5))


@dataclass(frozen=True)
class Task:
    """One problem of a benchmark.

    Attributes:
        id: a stable id, unique within its dataset and split (e.g. ``"gsm8k/test/17"``).
        question: the task text shown to the agent.
        answer: the gold answer as text (for math, the number as the dataset writes it).
        task_type: one of :data:`TASK_TYPES`, or the task type of a registered family.
        rationale: the dataset's own gold reasoning text, verbatim, when it has one.
        gold_actions: an oracle trajectory: one string per ``step`` call (each may hold several
            ``; ``-joined grounded actions), the last one ending the episode (``Answer(...)``).
        meta: any other field of the source record, kept for converters and reports.
    """

    id: str
    question: str
    answer: str
    task_type: str
    rationale: str | None = None
    gold_actions: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task_type not in TASK_TYPES and self.task_type not in ADDED_TASK_TYPES:
            known = (*TASK_TYPES, *ADDED_TASK_TYPES)
            raise ValueError(f"task_type must be one of {known}, got {self.task_type!r}")
