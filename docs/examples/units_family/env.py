"""The units family's tasks, tool and env."""

from __future__ import annotations

import random
from collections.abc import Sequence

from lumos_gym.actions import Action
from lumos_gym.envs import Task
from lumos_gym.envs.base import LumosEnv
from lumos_gym.envs.sources import GeneratedSource
from lumos_gym.errors import ToolError
from lumos_gym.scoring.answers import math_accuracy
from lumos_gym.tools import TOOLS, Tool, ToolContext, ToolResult, ToolSpec, register_tool

#: How many of the small unit make one of the big one.
FACTORS = {
    ("kilometre", "metre"): 1000,
    ("metre", "centimetre"): 100,
    ("kilogram", "gram"): 1000,
    ("hour", "minute"): 60,
    ("minute", "second"): 60,
}
#: The tools of the family, in the order its grounding instruction lists them (the record's
#: tool list names this).
UNITS_TOOLS = ("UnitFactor", "Calculator")


class UnitFactor(Tool):
    """Return how many of the small unit make one of the big unit."""

    spec = ToolSpec("UnitFactor", "UnitFactor(big_unit, small_unit)",
                    "Return how many small units make one big unit")

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Look the pair of units up; names are matched case-insensitively."""
        units = tuple(u.strip().lower() for u in action.arguments().positional)
        if units not in FACTORS:
            known = "; ".join(f"{big}, {small}" for big, small in FACTORS)
            raise ToolError(f"no factor for {', '.join(units)!r}; known: {known}")
        return ToolResult((str(FACTORS[units]),))  # type: ignore[index]


if "UnitFactor" not in TOOLS:  # a second import (a reload, a notebook) must not fail
    register_tool("UnitFactor", UnitFactor)


def make_tasks(split: str, n: int, seed: int) -> list[Task]:
    """Make ``n`` conversion tasks of ``split`` from ``seed``, with gold steps for the converter."""
    tasks = []
    for index in range(n):
        rng = random.Random(f"units-{split}-{seed}-{index}")
        (big, small), factor = rng.choice(sorted(FACTORS.items()))
        count, rest = rng.randint(2, 9), rng.randint(1, factor - 1)
        total = count * factor + rest
        steps = [
            {"subgoal": f"Find how many {small}s make a {big}.",
             "action": f"R1 = UnitFactor({big}, {small})", "value": str(factor)},
            {"subgoal": f"Calculate the total in {small}s.",
             "action": f"R2 = Calculator({count} * R1 + {rest})", "value": str(total)},
        ]
        tasks.append(Task(
            id=f"units/{split}/{seed}/{index}",
            question=f"How many {small}s are {count} {big}s and {rest} {small}s?",
            answer=str(total),
            task_type="units",
            rationale=f"A {big} is {factor} {small}s, so the total is {count} * {factor} + "
            f"{rest} = {total} {small}s.",
            gold_actions=(*(step["action"] for step in steps), "Answer(R2)"),
            meta={"steps": steps},
        ))
    return tasks


class UnitsEnv(LumosEnv):
    """Unit conversions: look the factor up, then calculate."""

    task_type = "units"
    default_tools = UNITS_TOOLS
    primary_metric = "accuracy"
    dataset = "units"

    def __init__(
        self, *, split: str = "test", num_tasks: int = 4, seed: int = 0,
        tasks: Sequence[Task] | None = None, render_mode: str | None = None,
        privileged: bool = False,
    ):
        source = GeneratedSource(
            lambda: make_tasks(split, num_tasks, seed),
            {"generator": "units", "split": split, "num_tasks": num_tasks, "seed": seed},
        )
        super().__init__(tasks=source if tasks is None else tasks, render_mode=render_mode,
                         privileged=privileged)

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Score the answer: numeric accuracy (the reward) and exact text match."""
        return {"accuracy": math_accuracy(prediction, task.answer),
                "exact_match": float(prediction.strip() == task.answer)}
