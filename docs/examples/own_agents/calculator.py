"""A rule-based agent: word problems read by keywords, worked out with the env's Calculator.

Run it with ``lumos-gym evaluate --agent docs/examples/own_agents/calculator.py:CalculatorAgent
--env MathWord-v0 -k levels=1`` (docs/agents.md, "Write your own agent").

No model: ``roles`` is empty, so the run loads none. Each sentence of the problem that holds a
number (the question excepted) is one step: the first number starts the sum, and each later one
is added, subtracted, multiplied or divided by, as the sentence's verbs say. The steps become
``R1 = Calculator(52 - 37)``, ``R2 = Calculator(R1 * 3)``..., and ``Answer(R2)`` submits the
last result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from lumos_gym.agents import Act, Agent
from lumos_gym.agents.base import EpisodeLogic

NUMBER = re.compile(r"\d+(?:\.\d+)?")

#: Words that make a sentence's number an operation other than ``+`` (checked in this order).
OPERATIONS = (
    ("/", ("divides", "equally", "shares", "splits")),
    ("*", ("times", "every", "each")),
    ("-", ("gives", "sells", "spends", "uses", "eats", "loses", "pays")),
)


def operation(sentence: str) -> str:
    """The operation a sentence applies to the running result: ``+ - * /``."""
    words = set(re.findall(r"[a-z]+", sentence.lower()))
    for symbol, keywords in OPERATIONS:
        if words.intersection(keywords):
            return symbol
    return "+"


def formulas(problem: str) -> list[str]:
    """The Calculator formulas that work the problem out, one per step."""
    steps = []
    for sentence in re.split(r"(?<=[.?!])\s+", problem.strip()):
        numbers = NUMBER.findall(sentence.replace(",", ""))
        if numbers and not sentence.endswith("?"):
            steps.append((operation(sentence), numbers[0]))
    if not steps:
        return []
    result = [f"{steps[0][1]} + 0"] if len(steps) == 1 else []
    previous = steps[0][1]
    for k, (symbol, number) in enumerate(steps[1:], 1):
        result.append(f"{previous} {symbol} {number}")
        previous = f"R{k}"
    return result


class CalculatorAgent(Agent):
    """Reads a word problem by keywords and works it out with Calculator actions (no model)."""

    name = "calculator"
    roles: ClassVar[tuple[str, ...]] = ()

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Send one Calculator action per step, then answer with the last result."""
        steps = formulas(observation) if "Calculator" in info.get("action_names", ()) else []
        for k, formula in enumerate(steps, 1):
            outcome = yield Act(f"R{k} = Calculator({formula})")
            if outcome.terminated:
                return
        yield Act(f"Answer(R{len(steps)})" if steps else "Answer()")
