"""``lumos-gym agents``: the registered agents and the model roles each asks."""

from __future__ import annotations

import argparse

from lumos_gym.agents import AGENTS
from lumos_gym.text import table


def add_agents(sub: argparse._SubParsersAction) -> None:
    """Add the ``agents`` verb."""
    p = sub.add_parser("agents", help="list the agents")
    p.set_defaults(func=cmd_agents)


def cmd_agents(args: argparse.Namespace) -> int:
    """Print the registered agents and the model roles each asks."""
    rows = []
    for name in AGENTS.names():
        cls = AGENTS.get(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        rows.append([name, ", ".join(cls.roles) or "(none)", doc])
    print(table(["agent", "roles", "description"], rows))
    return 0
