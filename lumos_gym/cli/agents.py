"""``lumos-gym agents``: the registered agents and the model roles each asks."""

from __future__ import annotations

import argparse

from lumos_gym.agents import AGENTS
from lumos_gym.cli.args import add_format, print_json
from lumos_gym.text import table


def add_agents(sub: argparse._SubParsersAction) -> None:
    """Add the ``agents`` verb."""
    p = sub.add_parser("agents", help="list the agents")
    add_format(p, "the table")
    p.set_defaults(func=cmd_agents)


def cmd_agents(args: argparse.Namespace) -> int:
    """Print the registered agents and the model roles each asks (or a JSON list of them)."""
    entries = []
    for name in AGENTS.names():
        cls = AGENTS.get(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        entries.append({"name": name, "roles": list(cls.roles), "description": doc})
    if args.format == "json":
        print_json(entries)
        return 0
    rows = [[e["name"], ", ".join(e["roles"]) or "(none)", e["description"]] for e in entries]
    print(table(["agent", "roles", "description"], rows))
    return 0
