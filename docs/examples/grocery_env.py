"""A complete lumos-gym environment in one file: grocery bills (see docs/adding-an-env.md).

Tasks ask what a basket of groceries costs. The agent looks prices up with a new tool,
``PriceLookup(item)``, and adds them with the built-in ``Calculator``, then answers.
"""

from __future__ import annotations

import random

from lumos_gym.actions import Action
from lumos_gym.envs import Task, register_env
from lumos_gym.envs.base import LumosEnv
from lumos_gym.envs.sources import GeneratedSource
from lumos_gym.errors import ToolError
from lumos_gym.scoring.answers import math_accuracy
from lumos_gym.tools import TOOLS, Tool, ToolContext, ToolResult, ToolSpec, register_tool

# 1. The data: a price table the tool reads. A real env would read a file or a service.
PRICES = {"apple": "0.5", "pear": "0.75", "bread": "2.25", "milk": "1.2", "eggs": "3"}


# 2. A tool: a spec (name, signature, one-line doc) and a run method. Bad input raises
#    ToolError; the env turns it into an "Error: ..." observation.
class PriceLookup(Tool):
    """Return the unit price of a grocery item."""

    spec = ToolSpec("PriceLookup", "PriceLookup(item)", "Return the unit price of the item")

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Look the item up; names are matched case-insensitively."""
        item = action.args.strip().lower()
        if item not in PRICES:
            raise ToolError(f"no price for {item!r}; items: {', '.join(sorted(PRICES))}")
        return ToolResult((PRICES[item],))


if "PriceLookup" not in TOOLS:
    register_tool("PriceLookup", PriceLookup)


# 3. Tasks: a seeded generator gives stable ids and, for `lumos-gym check`, gold actions.
def make_tasks(n: int, seed: int) -> list[Task]:
    """Make ``n`` grocery-bill tasks from ``seed``."""
    tasks = []
    for index in range(n):
        rng = random.Random(f"grocery-{seed}-{index}")
        items = rng.sample(sorted(PRICES), 2)
        counts = [rng.randint(1, 6) for _ in items]
        total = sum(c * float(PRICES[i]) for c, i in zip(counts, items, strict=True))
        basket = " and ".join(f"{c} {i}" for c, i in zip(counts, items, strict=True))
        gold = (
            f"R1 = PriceLookup({items[0]}); R2 = PriceLookup({items[1]})",
            f"R3 = Calculator({counts[0]} * R1 + {counts[1]} * R2)",
            "Answer(R3)",
        )
        tasks.append(
            Task(
                id=f"grocery/{seed}/{index}",
                question=f"How much do {basket} cost in dollars?",
                answer=f"{total:g}",
                task_type="math",
                gold_actions=gold,
            )
        )
    return tasks


# 4. The env: a LumosEnv subclass naming its task type, tools and metric.
class GroceryEnv(LumosEnv):
    """Grocery bills: look prices up, then calculate."""

    task_type = "math"
    default_tools = ("PriceLookup", "Calculator")
    primary_metric = "accuracy"

    def __init__(
        self, *, num_tasks: int = 10, seed: int = 0, render_mode: str | None = None,
        privileged: bool = False,
    ):
        source = GeneratedSource(
            lambda: make_tasks(num_tasks, seed),
            {"generator": "grocery", "num_tasks": num_tasks, "seed": seed},
        )
        # privileged=True (the oracle, replay checks) puts each task's gold actions in `info`
        super().__init__(tasks=source, render_mode=render_mode, privileged=privileged)

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Score the answer with the math accuracy metric."""
        return {"accuracy": math_accuracy(prediction, task.answer)}


# 5. Registration: the id becomes usable with gymnasium.make, lumos-gym envs/check/play.
def register() -> None:
    """Register ``lumos/Grocery-v0`` (safe to call twice)."""
    from lumos_gym.envs import ENVS

    if "lumos/Grocery-v0" not in ENVS:
        register_env(
            "lumos/Grocery-v0",
            "grocery_env:GroceryEnv",
            sources=("generated",),
            size="num_tasks (default 10)",
            description="Grocery bills: PriceLookup then Calculator (the docs' worked example)",
            max_episode_steps=8,
        )


register()
