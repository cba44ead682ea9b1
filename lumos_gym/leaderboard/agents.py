"""What the leaderboard reads of an agent by its name, without importing the agent.

A board names each row's agent (``run.json``'s ``agent``), and three facts about that agent
change what the board says of the row: whether it answers in one step (``single_step``: it
cannot act in web and game envs, which its claims leave out), whether it reads the gold answers
(``needs_privileged_info``: the oracle, a ceiling that is never ranked), and, for a
counterfactual agent, which agent it stands in for and which of its modules it replaces with
gold data (``counterfactual_of``, ``replaces``). The classes say so in their attributes
(:class:`lumos_gym.agents.base.Agent`); importing one loads the agents layer and with it the
env and model code, so :data:`BUILT_IN` holds the same facts for lumos-gym's own agents, and
reading a board imports no agent. A name it does not list (a plugin's agent, one this
installation does not know) is looked up in :mod:`lumos_gym.agents.plugins`, as it always was.
``tests/test_leaderboard_imports.py`` checks that :data:`BUILT_IN` says what the classes say.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos_gym.envs.tasks import ENV_ENDED_TYPES
from lumos_gym.errors import LumosGymError


@dataclass(frozen=True)
class AgentFacts:
    """The attributes of an agent class that a board reads (see the module docstring)."""

    single_step: bool = False
    needs_privileged_info: bool = False
    counterfactual_of: str | None = None
    replaces: str | None = None


#: lumos-gym's own agents (``lumos-gym agents``), by name.
BUILT_IN: dict[str, AgentFacts] = {
    "lumos-i": AgentFacts(),
    "lumos-o": AgentFacts(),
    "integrated": AgentFacts(),
    "react": AgentFacts(),
    "cot": AgentFacts(single_step=True),
    "direct": AgentFacts(single_step=True),
    "oracle": AgentFacts(needs_privileged_info=True),
    "lumos-i+gold-plan": AgentFacts(counterfactual_of="lumos-i", replaces="planner"),
    "lumos-i+gold-ground": AgentFacts(counterfactual_of="lumos-i", replaces="grounder"),
}


def reads_gold_answers(name: str) -> bool:
    """Whether the agent ``name`` reads gold answers (False for an unknown one)."""
    facts = BUILT_IN.get(name)
    if facts is None:
        # not one of lumos-gym's agents: its class says (the agents layer, heavy)
        from lumos_gym.agents import plugins

        return plugins.reads_gold_answers(name)
    return facts.needs_privileged_info


def agent_can_act(name: str, task_type: str | None) -> bool:
    """Whether the agent ``name`` can act in envs of ``task_type`` (True for an unknown one)."""
    facts = BUILT_IN.get(name)
    if facts is None:
        # not one of lumos-gym's agents: its class says (the agents layer, heavy)
        from lumos_gym.agents import plugins

        return plugins.agent_can_act(name, task_type)
    return not (facts.single_step and task_type in ENV_ENDED_TYPES)


def counterfactual_roles(name: str) -> tuple[str | None, str | None] | None:
    """``(counterfactual_of, replaces)`` of the agent ``name``; None for an unknown one."""
    facts = BUILT_IN.get(name)
    if facts is None:
        # not one of lumos-gym's agents: its class says (the agents layer, heavy)
        from lumos_gym.agents.plugins import registered_agent

        try:
            cls = registered_agent(name)
        except LumosGymError:
            return None
        return getattr(cls, "counterfactual_of", None), getattr(cls, "replaces", None)
    return facts.counterfactual_of, facts.replaces
