"""``lumos-gym rescore``: score results folders again with today's scorers."""

from __future__ import annotations

import argparse

from lumos_gym.envs import load_plugins
from lumos_gym.leaderboard.rescore import print_report, rescore_folder


def add_rescore(sub: argparse._SubParsersAction) -> None:
    """Add the ``rescore`` verb."""
    p = sub.add_parser(
        "rescore", help="score results folders again with the current scorers (docs/metrics.md)",
        description="Score each results folder's episodes again with the scorers of this "
        "version: an answer is scored again on its task; a web or game episode is replayed "
        "action by action (every observation must equal the recorded one, else the episode "
        "keeps its metrics and counts as diverged). The folder's episodes, summary.json and "
        "run.json (the scorer of each env, a 'rescored' entry) are rewritten in place.",
    )
    p.add_argument("folders", nargs="+", metavar="RESULTS", help="results folders")
    p.add_argument("--env", action="append", default=[], metavar="ENV",
                   help="rescore only this env (repeatable; default: every env)")
    p.add_argument("--dry-run", action="store_true",
                   help="report what would change, write nothing")
    p.set_defaults(func=cmd_rescore)


def cmd_rescore(args: argparse.Namespace) -> int:
    """Rescore each folder and print what changed; status 1 when an episode diverged."""
    load_plugins()
    diverged = 0
    for folder in args.folders:
        report = rescore_folder(folder, envs=args.env, write=not args.dry_run)
        print_report(report)
        diverged += report.diverged
    return 1 if diverged else 0
