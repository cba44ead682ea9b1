"""``lumos-gym attribute``: attribute an agent run's failed episodes to its modules."""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from lumos_gym.envs import load_plugins
from lumos_gym.leaderboard.attribution import (
    ATTRIBUTION_NOTE,
    attribute_runs,
    render_csv_rows,
    render_markdown,
    to_json,
)


def add_attribute(sub: argparse._SubParsersAction) -> None:
    """Add the ``attribute`` verb."""
    p = sub.add_parser(
        "attribute", help="attribute an agent run's failed episodes to planning, grounding or "
        "execution, from its counterfactual runs",
        description="Compare an agent's results folder, episode by episode, with the runs of "
        "its counterfactual agents (lumos-gym evaluate --agent lumos-i+gold-plan and "
        "--agent lumos-i+gold-ground, same models and episodes) and attribute each failed "
        "episode to planning, grounding, execution or unexplained, per env. "
        + ATTRIBUTION_NOTE,
    )
    p.add_argument("run", help="the agent's results folder (e.g. results/lumos-i)")
    p.add_argument("--gold-plan", default=None, metavar="RESULTS",
                   help="the results folder of the gold-plan run (lumos-i+gold-plan)")
    p.add_argument("--gold-ground", default=None, metavar="RESULTS",
                   help="the results folder of the gold-grounding run (lumos-i+gold-ground)")
    p.add_argument("--format", default="md", choices=["md", "csv", "json"])
    p.add_argument("--out", default=None, help="write the table to this file (default: print)")
    p.set_defaults(func=cmd_attribute)


def cmd_attribute(args: argparse.Namespace) -> int:
    """Attribute the run's failed episodes and print (or write) the table."""
    load_plugins()
    attribution, warnings = attribute_runs(args.run, args.gold_plan, args.gold_ground)
    for warning in warnings:
        print(f"lumos-gym attribute: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        text = to_json(attribution)
    elif args.format == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["run", "agent", "env", "module", "count", "share", "failed",
                         "episodes"])
        writer.writerows(render_csv_rows([attribution]))
        text = out.getvalue()
    else:
        text = ATTRIBUTION_NOTE + "\n\n" + render_markdown(attribution)
    if args.out is None:
        sys.stdout.write(text)
    else:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"attribution: {path}")
    return 0
