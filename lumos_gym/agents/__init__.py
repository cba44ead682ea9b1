"""Agents and the runner that batches their model calls (see :mod:`lumos_gym.agents.base`).

Agents are registered by name, lazily: ``make_agent("lumos-i")`` imports only that agent.
Agents of your own are named ``package.module:Class`` or ``path/to/file.py:Class``, or added
by an installed plugin (the entry-point group ``lumos_gym.agents``): see
:mod:`lumos_gym.agents.plugins`.
"""

from __future__ import annotations

from typing import Any

from lumos_gym.agents.base import AGENTS, Act, Agent, AgentConfig, Ask, Note, StepOutcome
from lumos_gym.agents.plugins import agent_class, load_agent_plugins

for _name, _path in {
    "lumos-i": "lumos_gym.agents.lumos:LumosIterativeAgent",
    "lumos-o": "lumos_gym.agents.lumos:LumosOnetimeAgent",
    "integrated": "lumos_gym.agents.baselines:IntegratedAgent",
    "react": "lumos_gym.agents.baselines:ReActAgent",
    "cot": "lumos_gym.agents.baselines:CoTAgent",
    "direct": "lumos_gym.agents.baselines:DirectAgent",
    "oracle": "lumos_gym.agents.oracle:OracleAgent",
    "lumos-i+gold-plan": "lumos_gym.agents.counterfactual:GoldPlanAgent",
    "lumos-i+gold-ground": "lumos_gym.agents.counterfactual:GoldGroundAgent",
}.items():
    AGENTS.register(_name, _path)


def make_agent(name: str, config: AgentConfig | None = None, **settings: Any) -> Agent:
    """Return the agent registered as ``name``.

    Args:
        name: e.g. ``"lumos-i"`` (``lumos-gym agents`` lists them, plugins' included), or
            ``"package.module:Class"``, or ``"path/to/file.py:Class"``.
        config: the agent settings; or give them as keyword arguments.
        **settings: :class:`AgentConfig` fields, when ``config`` is None.

    Raises:
        AgentLoadError: a module or file agent that cannot be loaded (see
            :func:`~lumos_gym.agents.plugins.agent_class`).
        RegistryError: an unknown name.
    """
    cls = agent_class(name)
    return cls(config or AgentConfig(**settings))


__all__ = [
    "AGENTS",
    "Act",
    "Agent",
    "AgentConfig",
    "Ask",
    "Note",
    "StepOutcome",
    "agent_class",
    "load_agent_plugins",
    "make_agent",
]
