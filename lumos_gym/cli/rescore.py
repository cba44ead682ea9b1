"""``lumos-gym rescore`` and ``restrict``: results folders brought to today's scorers and suites."""

from __future__ import annotations

import argparse
import sys

from lumos_gym.envs import load_plugins
from lumos_gym.errors import EvaluationError, LumosGymError
from lumos_gym.evaluation.rescore import print_report, rescore_folder
from lumos_gym.evaluation.restrict import main_lines
from lumos_gym.evaluation.round_limits import recover_round_limits


def _folders_verb(
    sub: argparse._SubParsersAction, name: str, *, help: str, description: str, dry_run: str
) -> argparse.ArgumentParser:
    """A verb that rewrites results folders in place: the folders, and ``--dry-run``."""
    p = sub.add_parser(name, help=help, description=description)
    p.add_argument("folders", nargs="+", metavar="RESULTS", help="results folders")
    p.add_argument("--dry-run", action="store_true", help=dry_run)
    return p


def add_rescore(sub: argparse._SubParsersAction) -> None:
    """Add the ``rescore`` verb."""
    p = _folders_verb(
        sub, "rescore",
        help="score results folders again with the current scorers (docs/metrics.md)",
        description="Score each results folder's episodes again with the scorers of this "
        "version: an answer is scored again on its task; a web or game episode is replayed "
        "action by action (every observation must equal the recorded one, else the episode "
        "keeps its metrics and counts as diverged). The folder's episodes, summary.json and "
        "run.json (the scorer of each env, a 'rescored' entry) are rewritten in place.",
        dry_run="report what would change, write nothing",
    )
    p.add_argument("--env", action="append", default=[], metavar="ENV",
                   help="rescore only this env (repeatable; default: every env)")
    p.add_argument("--recover-round-limits", action="store_true",
                   help="instead of rescoring: record, in each folder whose run.json lacks "
                   "round_limits (made before lumos-gym recorded them), the limits of the code "
                   "that played it, read from that commit's package; the run and its sessions "
                   "must be one clean commit of this git checkout (round_limits_recovered says "
                   "so); episodes and scores are left as they are")
    p.set_defaults(func=cmd_rescore)


def cmd_rescore(args: argparse.Namespace) -> int:
    """Rescore each folder (or recover its round limits) and print what changed.

    Status 1 when an episode diverged, or a folder's round limits could not be known.
    """
    if args.recover_round_limits:
        if args.env:
            raise LumosGymError("--env rescores some envs; --recover-round-limits rescores "
                                "none: give one or the other")
        unknown = sum(not _recover(folder, write=not args.dry_run) for folder in args.folders)
        if unknown:
            print(f"{unknown} folder(s) left without round limits (named above)",
                  file=sys.stderr)
        return 1 if unknown else 0
    load_plugins()
    diverged = 0
    for folder in args.folders:
        report = rescore_folder(folder, envs=args.env, write=not args.dry_run)
        print_report(report)
        diverged += report.diverged
    return 1 if diverged else 0


def _recover(folder: str, *, write: bool) -> bool:
    """Recover a folder's round limits (``--recover-round-limits``) and print what was done.

    Returns False when they cannot be known (the reason is printed; the other folders go on).
    """
    try:
        record = recover_round_limits(folder, write=write)
    except EvaluationError as e:
        print(f"lumos-gym rescore: {e}", file=sys.stderr)
        return False
    if record is None:
        print(f"{folder}: round limits already recorded")
        return True
    limits = record["round_limits"]
    shown = ", ".join(f"{k} {v}" for k, v in {**limits["task_types"],
                                               **limits["datasets"]}.items())
    verb = "recorded" if write else "would record"
    print(f"{folder}: {verb} the round limits of {record['from_commit'][:12]}: {shown}")
    return True


def add_restrict(sub: argparse._SubParsersAction) -> None:
    """Add the ``restrict`` verb."""
    p = _folders_verb(
        sub, "restrict",
        help="keep the episodes a suite plans now (after its file changed)",
        description="Plan SUITE as its file is now, keep each results folder's episodes of "
        "that plan and drop the others (a test suite that now leaves out the development "
        "suite's tasks), and rewrite the folder: episodes, summary.json, and run.json (the "
        "suite's checksum, the plan, a 'restricted' entry naming every dropped episode). A "
        "folder that lacks a planned episode is refused: restricting never adds episodes.",
        dry_run="report what would be dropped, write nothing",
    )
    p.add_argument("--suite", required=True, help="the suite the folders were run on")
    p.set_defaults(func=cmd_restrict)


def cmd_restrict(args: argparse.Namespace) -> int:
    """Restrict each folder and print what it kept and dropped; status 1 on a refused one."""
    load_plugins()
    return main_lines(args.folders, args.suite, write=not args.dry_run)
