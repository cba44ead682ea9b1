"""An agent that asks a model: one arithmetic expression, worked out with the Calculator.

Run it with ``lumos-gym evaluate --agent own_agents.ask_model:ExpressionAgent --env
MathWord-v0 --model MODEL`` (``docs/examples`` on ``PYTHONPATH``; docs/agents.md, "Write your
own agent").

The agent plays one model role, ``policy``: it yields an :class:`~lumos_gym.agents.Ask` for that
role and receives the model's :class:`~lumos_gym.models.base.Completion`. Which model plays the
role is the run's business (``--backend``, ``--model``, ``--model-args``), and the runner sends
the asks of many episodes to it in one batch, so the agent is straight-line code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lumos_gym.agents import Act, Agent, Ask
from lumos_gym.agents.base import EpisodeLogic

PROMPT = """Write one arithmetic expression whose value answers the question.

Question: Ana has 52 T-shirts. She sells 37 of them. How many T-shirts does Ana have left?
Expression: 52 - 37

Question: {question}
Expression:"""


def expression(text: str) -> str:
    """The expression in the model's answer: its first line, without ``$`` and thousands commas."""
    lines = text.strip().splitlines() or [""]
    return lines[0].replace("$", "").replace(",", "").strip()


class ExpressionAgent(Agent):
    """Asks its model for one arithmetic expression, computes it with Calculator, answers."""

    name = "expression"
    roles: ClassVar[tuple[str, ...]] = ("policy",)

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Ask once, calculate, then answer with the result (an empty answer if that failed)."""
        request = self.request(prompt=PROMPT.format(question=observation.strip()), stop=("\n",))
        completion = yield Ask("policy", request)
        outcome = yield Act(f"R1 = Calculator({expression(completion.text) or 0})")
        if outcome.terminated:
            return
        failed = outcome.observation.startswith("Error")
        outcome = yield Act("Answer()" if failed else "Answer(R1)")
        if not outcome.terminated:  # the env refused the answer: give up with an empty one
            yield Act("Answer()")
