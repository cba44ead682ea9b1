"""``lumos-gym agents``: the registered agents, where each comes from and the roles it asks."""

from __future__ import annotations

import argparse

from lumos_gym.agents import AGENTS, load_agent_plugins
from lumos_gym.agents.plugins import agent_origin, registered_agent
from lumos_gym.cli.args import add_format, print_json
from lumos_gym.errors import LumosGymError
from lumos_gym.text import table


def add_agents(sub: argparse._SubParsersAction) -> None:
    """Add the ``agents`` verb."""
    p = sub.add_parser(
        "agents", help="list the agents",
        description="List the built-in agents and those of installed plugins (the entry-point "
        "group lumos_gym.agents). Agents of your own need no registration: evaluate --agent "
        "package.module:Class or --agent path/to/file.py:Class (docs/agents.md).",
    )
    add_format(p, "the table")
    p.set_defaults(func=cmd_agents)


def cmd_agents(args: argparse.Namespace) -> int:
    """Print the registered agents, where each comes from and the model roles it asks.

    ``--format json``: a JSON list of them instead of the table.
    """
    load_agent_plugins()
    entries = []
    for name in AGENTS.names():
        origin = agent_origin(name)
        try:
            cls = registered_agent(name)
        except LumosGymError as e:  # a broken plugin is listed with its error
            entries.append({"name": name, "roles": None, "from": origin,
                            "description": f"cannot be loaded: {e}"})
            continue
        doc = ((cls.__doc__ or "").strip().splitlines() or [""])[0]
        entries.append({"name": name, "roles": list(cls.roles), "from": origin,
                        "description": doc})
    if args.format == "json":
        print_json(entries)
        return 0
    rows = [[e["name"], "?" if e["roles"] is None else ", ".join(e["roles"]) or "(none)",
             e["from"], e["description"]] for e in entries]
    print(table(["agent", "roles", "from", "description"], rows))
    print("\nyour own: lumos-gym evaluate --agent package.module:Class, or --agent "
          "path/to/file.py:Class (see docs/agents.md)")
    return 0
