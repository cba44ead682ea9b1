"""Counterfactual Lumos-I agents: one module replaced by the task's gold data.

They exist to attribute Lumos-I's failures to a module
(:mod:`lumos_gym.leaderboard.attribution`): an episode Lumos-I fails but solves with the gold
plan failed in planning; one it solves when the gold actions ground its own subgoals failed in
grounding. Both read ``info["gold_plan"]``, the task's subgoals with their grounded actions as
the modules' training targets write them (:mod:`lumos_gym.conversion.gold`), which the run's
plan gives each episode (``needs_gold_plan``); the env is not privileged, so every tool (the
model-backed ``QA``, the rankers) is the one Lumos-I used. They run Lumos-I's models
(``counterfactual_of``: the reference adapters of ``lumos-i`` when none is named) and, reading
gold data, are never ranked on the leaderboard.

* ``lumos-i+gold-plan``: the planner is replaced by the gold subgoals, fed one at a time as
  the Lumos-I planner would answer them (``Subgoal 1: ...``, then ``No, I will keep planning.
  Subgoal 2: ...``); the trained grounder grounds each and the loop runs as Lumos-I's (an
  execution error still ends planning). Every gold subgoal is played, whatever the round
  limit. Each gold subgoal is recorded as a planner turn with ``"gold": true``.
* ``lumos-i+gold-ground``: the trained planner plans; when its subgoal matches a gold subgoal
  (:func:`match_subgoal`), that subgoal's gold actions are executed instead of asking the
  grounder (recorded as a grounder turn with ``"gold": true``, the gold subgoal and the match
  score); other subgoals are grounded by the trained grounder.

**Matching** (:func:`match_subgoal`). Both subgoals lose their ``Subgoal k:`` label and are
normalised as SQuAD answers are (lower case, no punctuation or articles,
:func:`~lumos_gym.scoring.qa.normalize_answer`). A planned subgoal matches a gold subgoal not
used yet in the episode when the normalised texts are equal, or when their token F1 is at least
:data:`MATCH_F1` (0.8; ``extra={"match_f1": x}`` of the agent config changes it) and both hold
the same tokens with a digit (numbers, item ids such as ``b0qi6s621x``: a subgoal about another
quantity or another item is another subgoal). The best-scoring gold subgoal wins, the earliest
on ties. In web and game envs (:data:`~lumos_gym.envs.tasks.ENV_ENDED_TYPES`), whose state
the steps change (the page, the room), the k-th planned subgoal can match only the k-th gold
subgoal: gold actions presuppose the state the gold trajectory was in at that point (WebShop's
second item is reached by ``Click(< prev)`` from the first one's page), so a gold subgoal taken
out of its place would fail for a reason that is neither module's. Elsewhere (maths, QA, code,
pictures: steps only bind variables) any gold subgoal not used yet can match.

**Variables.** Gold actions name their variables as the gold plan numbers them. Used as they
are, they would overwrite the episode's own ``R<n>`` whenever the planner's plan differs from
the gold one, so :func:`adopt_actions` renames them: an output of a gold action keeps its name
unless the episode has bound that ``R<n>`` or a higher one, and then gets the next free one; a
reference to the output of a gold subgoal used earlier in the episode follows its new name (a
reference to a gold subgoal never used keeps its name and so reads the episode's own variable of
that number). When the planner follows the gold plan, the names stay as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from lumos_gym.actions import Action, format_action, parse_actions
from lumos_gym.agents.base import EpisodeLogic, Note
from lumos_gym.agents.lumos import IterativeState, LumosIterativeAgent, ModuleLogic
from lumos_gym.envs.tasks import ENV_ENDED_TYPES
from lumos_gym.errors import ActionParseError
from lumos_gym.prompts import plan_turn
from lumos_gym.scoring.qa import f1, normalize_answer

#: The least token F1 at which a planned subgoal matches a gold one (with the same digit tokens).
MATCH_F1 = 0.8
_LABEL = re.compile(r"^\s*Subgoal\s*\d+\s*:\s*", re.IGNORECASE)
_R_VARIABLE = re.compile(r"\bR(\d+)\b")


def gold_steps(info: Mapping[str, Any]) -> list[dict[str, str]]:
    """Return the episode's gold plan (``info["gold_plan"]``).

    Raises:
        ValueError: the run gave no gold plan, or the task has none (the reason is named), so
            the episode ends as an ``agent-error``.
    """
    plan = info.get("gold_plan")
    if plan is None:
        why = info.get("gold_plan_error") or "the run gave no gold plan (agent_info)"
        raise ValueError(f"no gold plan for this task: {why}")
    if not plan:
        raise ValueError("no gold plan for this task: its gold plan has no subgoal")
    return [dict(step) for step in plan]


def subgoal_text(subgoal: str) -> str:
    """Return a subgoal without its ``Subgoal k:`` label, normalised (SQuAD's rule)."""
    return normalize_answer(_LABEL.sub("", subgoal.strip(), count=1))


def _digit_tokens(text: str) -> list[str]:
    return sorted(token for token in text.split() if any(ch.isdigit() for ch in token))


def subgoal_score(planned: str, gold: str) -> float:
    """Return how well ``planned`` matches ``gold`` (both normalised by :func:`subgoal_text`).

    1.0 when the texts are equal; 0.0 when their tokens with a digit differ; else their token F1.
    """
    a, b = subgoal_text(planned), subgoal_text(gold)
    if a == b:
        return 1.0
    if _digit_tokens(a) != _digit_tokens(b):
        return 0.0
    return f1(a, b)


def match_subgoal(
    planned: str, gold: Sequence[str], *, used: Iterable[int] = (), threshold: float = MATCH_F1
) -> tuple[int, float] | None:
    """Return ``(index, score)`` of the gold subgoal that ``planned`` matches, or None.

    Args:
        planned: the planner's subgoal (with or without its ``Subgoal k:`` label).
        gold: the gold subgoal lines, in order.
        used: indexes of gold subgoals already used in the episode (never matched again).
        threshold: the least token F1 of a match (equal normalised texts always match).
    """
    taken = set(used)
    best: tuple[int, float] | None = None
    for index, line in enumerate(gold):
        if index in taken:
            continue
        score = subgoal_score(planned, line)
        if score >= threshold and (best is None or score > best[1]):
            best = (index, score)
    return best


def adopt_actions(text: str, names: dict[str, str], taken: Iterable[str]) -> str:
    """Rename the variables of gold actions for use in an episode (see the module's doc).

    Args:
        text: the gold actions of one subgoal, ``; ``-joined.
        names: gold variable → the episode's variable, for the gold subgoals used so far;
            updated with this subgoal's outputs.
        taken: the variables the episode has bound.

    Returns:
        the actions to execute: ``text`` itself when no name changes (or it does not parse).
    """
    try:
        actions = parse_actions(text)
    except ActionParseError:
        return text
    numbers = [int(m.group(1)) for v in taken if (m := _R_VARIABLE.fullmatch(v))]
    free = max(numbers, default=0) + 1
    adopted = []
    for action in actions:
        args = _R_VARIABLE.sub(lambda m: names.get(m.group(0), m.group(0)), action.args)
        outputs = []
        for variable in action.outputs:
            if m := _R_VARIABLE.fullmatch(variable):
                number = max(int(m.group(1)), free)  # the gold name, unless bound already
                names[variable] = f"R{number}"
                free = number + 1
            outputs.append(names.get(variable, variable))
        adopted.append(Action(tuple(outputs), action.name, args, None))
    renamed = [format_action(a, with_result=False) for a in adopted]
    original = [format_action(a, with_result=False) for a in actions]
    return text if renamed == original else "; ".join(renamed)


class GoldPlanAgent(LumosIterativeAgent):
    """Lumos-I with the gold plan: the trained grounder grounds the task's gold subgoals."""

    name = "lumos-i+gold-plan"
    roles: ClassVar[tuple[str, ...]] = ("grounder",)
    counterfactual_of: ClassVar[str | None] = "lumos-i"
    replaces: ClassVar[str | None] = "planner"
    needs_gold_plan: ClassVar[bool] = True

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Run Lumos-I's loop with the gold subgoals as the planner's answers."""
        gold_steps(info)  # no gold plan: the episode ends here, naming why
        yield from super().episode(observation, info)

    def round_limit(self, task_type: str, state: IterativeState) -> int:
        """Return the number of gold subgoals: the whole gold plan is played."""
        del task_type
        return len(gold_steps(state.info))

    def next_subgoal(self, index: int, state: IterativeState) -> ModuleLogic:
        """Return gold subgoal ``index`` as the planner would write it, recorded as a note."""
        output = plan_turn(index, gold_steps(state.info)[index - 1]["subgoal"])
        yield Note({"role": "planner", "output": output, "gold": True})
        return output


class GoldGroundAgent(LumosIterativeAgent):
    """Lumos-I whose subgoals matching a gold subgoal are grounded by its gold actions."""

    name = "lumos-i+gold-ground"
    counterfactual_of: ClassVar[str | None] = "lumos-i"
    replaces: ClassVar[str | None] = "grounder"
    needs_gold_plan: ClassVar[bool] = True

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Run Lumos-I's loop, grounding matched subgoals with the gold actions."""
        gold_steps(info)  # no gold plan: the episode ends here, naming why
        yield from super().episode(observation, info)

    def ground_subgoal(self, index: int, subgoal: str, state: IterativeState) -> ModuleLogic:
        """Return the gold actions of the matching gold subgoal, else ask the grounder."""
        steps = gold_steps(state.info)
        used: set[int] = state.memo.setdefault("used", set())
        excluded = set(used)
        if state.info.get("task_type") in ENV_ENDED_TYPES:  # only the gold subgoal of its place
            excluded |= set(range(len(steps))) - {index - 1}
        threshold = float(self.config.extra.get("match_f1", MATCH_F1))
        match = match_subgoal(subgoal, [s["subgoal"] for s in steps], used=excluded,
                              threshold=threshold)
        if match is None:
            return (yield from super().ground_subgoal(index, subgoal, state))
        found, score = match
        used.add(found)
        bound = state.outcome.info.get("variables", {}) if state.outcome is not None else {}
        actions = adopt_actions(steps[found]["actions"], state.memo.setdefault("names", {}),
                                bound)
        yield Note({"role": "grounder", "output": actions, "gold": True,
                    "gold_subgoal": steps[found]["subgoal"], "match": round(score, 3)})
        return actions


__all__ = [
    "MATCH_F1",
    "GoldGroundAgent",
    "GoldPlanAgent",
    "adopt_actions",
    "gold_steps",
    "match_subgoal",
    "subgoal_score",
    "subgoal_text",
]
