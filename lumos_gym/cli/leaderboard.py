"""``lumos-gym suites``, ``merge`` and ``leaderboard``: suites, joined shards and ranked runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lumos_gym.cli.args import add_format, print_json
from lumos_gym.envs import load_plugins
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.merge import merge_results
from lumos_gym.evaluation.suites import Suite, get_suite, load_suites
from lumos_gym.evaluation.summary import format_table
from lumos_gym.jsonl import folder_problem
from lumos_gym.leaderboard.render import (
    attach_reference,
    load_board,
    render_comparison,
    task_sets_problem,
    validate,
    write_board,
)
from lumos_gym.text import table


def add_suites(sub: argparse._SubParsersAction) -> None:
    """Add the ``suites`` verb."""
    p = sub.add_parser("suites", help="list the evaluation suites, or show one")
    p.add_argument("name", nargs="?", default=None, help="a suite name or .json file")
    add_format(p, "the table")
    p.set_defaults(func=cmd_suites)


def cmd_suites(args: argparse.Namespace) -> int:
    """List the suites, or show one suite's envs (as a table, or as JSON)."""
    load_plugins()
    if args.name:
        suite = get_suite(args.name)
        if args.format == "json":
            print_json(_suite_entry(suite, entries=True))
        else:
            _print_suite(suite)
        return 0
    suites, errors = load_suites()
    entries = [_suite_entry(suite) for name, suite in sorted(suites.items()) if name == suite.name]
    if args.format == "json":
        print_json(entries)
    else:
        rows = [[e["name"], ", ".join(env.removeprefix("lumos/") for env in e["envs"]),
                 str(e["episodes"]) if e["episodes"] is not None else "-", e["description"]]
                for e in entries]
        print(table(["suite", "envs", "episodes", "description"], rows))
    for message in errors.values():
        print(f"lumos-gym suites: error: {message}", file=sys.stderr)
    return 1 if errors else 0


def _suite_entry(suite: Suite, *, entries: bool = False) -> dict[str, Any]:
    """A suite as JSON data: its envs' ids, or (``entries``) each env entry as in its file."""
    data: dict[str, Any] = {
        "name": suite.name, "aliases": list(suite.aliases), "description": suite.description,
        "path": suite.path, "seeds": list(suite.seeds), "episodes": suite.episodes(),
        "envs": [e.env_id for e in suite.entries],
    }
    if entries:
        data["sha256"] = suite.sha256
        data["envs"] = [{
            "env": e.env_id, "kwargs": dict(e.kwargs), "limit": e.limit,
            "task_ids": list(e.task_ids) if e.task_ids is not None else None,
            "max_steps": e.max_steps, "seeds": list(e.seeds or suite.seeds),
        } for e in suite.entries]
    return data


def _print_suite(suite: Suite) -> None:
    """Print one suite: its description, aliases and a row per env."""
    print(f"{suite.name} ({suite.path}): {suite.description}")
    if suite.aliases:
        print(f"aliases: {', '.join(suite.aliases)}")
    rows = []
    for e in suite.entries:
        tasks = (f"{len(e.task_ids)} ids" if e.task_ids is not None else "all")
        if e.limit is not None:
            tasks = f"first {e.limit}" + ("" if e.task_ids is None else f" of {tasks}")
        rows.append([
            e.env_id, json.dumps(dict(e.kwargs), sort_keys=True) if e.kwargs else "-", tasks,
            str(e.max_steps) if e.max_steps else "registered",
            ", ".join(map(str, e.seeds or suite.seeds)),
        ])
    print(table(["env", "kwargs", "tasks", "max steps", "seeds"], rows))


def add_merge(sub: argparse._SubParsersAction) -> None:
    """Add the ``merge`` verb."""
    p = sub.add_parser(
        "merge", help="merge a LoRA adapter into its base model, or join results shards",
        description="lumos-gym merge ADAPTER --out DIR saves the adapter merged into its base "
        "model. lumos-gym merge RESULTS... --out DIR joins results folders (evaluate --shard "
        "I/N) into one: it refuses shards of different configurations, versions or suites, "
        "and overlapping or missing episodes.",
    )
    p.add_argument("inputs", nargs="+", metavar="ADAPTER | RESULTS",
                   help="a LoRA folder (lumos-gym train output), or results folders")
    p.add_argument("--out", required=True, help="folder for the merged model or results")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"],
                   help="adapter merge: the saved dtype")
    p.add_argument("--partial", action="store_true",
                   help="results merge: write what there is when episodes or shards are missing")
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge a LoRA adapter into its base model, or results folders (shards) into one."""
    inputs = [Path(p) for p in args.inputs]
    if all((p / "episodes.jsonl").is_file() for p in inputs):
        return _merge_results(args, inputs)
    absent = [str(p) for p in inputs if not p.exists()]
    if absent:
        raise LumosGymError(f"no such folder: {', '.join(absent)}")
    if len(inputs) != 1 or any((p / "episodes.jsonl").is_file() for p in inputs):
        raise LumosGymError(
            "merge takes one LoRA adapter folder, or results folders (each with "
            "episodes.jsonl) to join; these are neither: " + ", ".join(map(str, inputs))
        )
    return _merge_adapter(args)


def _merge_results(args: argparse.Namespace, inputs: list[Path]) -> int:
    """Join results folders (the shards of one run) into ``--out``."""
    report = merge_results(inputs, args.out, partial=args.partial)
    for message in report.warnings:
        print(f"warning: {message}", file=sys.stderr)
    print(format_table(report.summary))
    absent = ", ".join(map(str, report.absent_shards))
    missing = (f" ({report.missing_count} missing"
               + (f"; shard(s) {absent} not given" if absent else "") + ")"
               if report.missing_count else "")
    print(f"merged {len(inputs)} folders, {report.episodes} episodes{missing}: "
          f"{report.out / 'episodes.jsonl'}, {report.out / 'summary.json'}")
    return 0


def _merge_adapter(args: argparse.Namespace) -> int:
    """Save the LoRA adapter ``inputs[0]`` merged into its base model."""
    from lumos_gym.training.trainer import merge_adapter  # training stack: off the --help path

    print(f"merged model: {merge_adapter(args.inputs[0], args.out, dtype=args.dtype)}")
    return 0


def add_leaderboard(sub: argparse._SubParsersAction) -> None:
    """Add the ``leaderboard`` verb."""
    p = sub.add_parser(
        "leaderboard", help="rank results folders (md, html, csv, png) or validate them",
        description="Rank runs by suite score with each env's primary metric and its 95% "
        "bootstrap interval, beside the Lumos paper's reported numbers. RESULTS are results "
        "folders (lumos-gym evaluate --out) or folders of them (results/<run>/<Env>/); folders "
        "with the same agent configuration form one run. --validate checks submissions "
        "instead: files present and readable, version, every planned episode once, the summary "
        "recomputed from the episodes, provenance, no episode that ended in infra-error (unless "
        "--allow-infra-errors), every folder scored at one commit (unless "
        "--allow-mixed-commits) from a clean checkout (unless --allow-dirty), the agent's round "
        "limits recorded (unless --allow-missing-round-limits); it prints one line per problem "
        "and exits 2 "
        "when there is any. --reference RUN adds each row's paired difference to RUN (per env "
        "and for the suite, paired bootstrap interval, McNemar or sign-flip test); --compare A "
        "B prints the full paired table of two runs. Runs of one agent trained with several "
        "seeds on the same data and budget are one row, 'agent (k seeds)', whose intervals "
        "resample the seeds as well as the tasks (--no-seed-groups: a row per seed).",
    )
    p.add_argument("results", nargs="*", metavar="RESULTS",
                   help="results folders (with --compare, may be left out when A and B are "
                   "folders)")
    p.add_argument("--format", default="md", choices=["md", "html", "csv", "png"],
                   help="md (default), html (+ trajectory pages), csv, or png (needs the "
                   "leaderboard extra: matplotlib)")
    p.add_argument("--out", default=None, metavar="FILE_OR_DIR",
                   help="output file, or folder for leaderboard.<format> (md and csv print "
                   "without it)")
    p.add_argument("--suite", default=None,
                   help="columns: this suite's envs; with --validate: the suite the runs must be")
    p.add_argument("--no-trajectories", action="store_true",
                   help="html: the board page alone, without a trajectory page per run and env")
    p.add_argument("--validate", action="store_true",
                   help="check the results folders instead of rendering them")
    p.add_argument("--allow-infra-errors", action="store_true",
                   help="with --validate: accept folders with episodes that ended in "
                   "infra-error (the backend or env server failed; left out of the means) "
                   "instead of refusing them")
    p.add_argument("--allow-mixed-commits", action="store_true",
                   help="with --validate: accept folders scored at different commits (each "
                   "folder's last scoring pass: its last rescore, else the run and its "
                   "sessions) instead of refusing them")
    p.add_argument("--allow-dirty", action="store_true",
                   help="with --validate: accept folders scored from a checkout whose code "
                   "differed from its commit (git.dirty) instead of refusing them")
    p.add_argument("--allow-missing-round-limits", action="store_true",
                   help="with --validate: accept folders whose run.json lacks round_limits "
                   "(made before lumos-gym recorded them) instead of refusing them")
    p.add_argument("--reference", default=None, metavar="RUN",
                   help="also show each row's paired difference to this run (a run name, a "
                   "results folder, or 'top': the top-ranked run that is not a ceiling), with "
                   "paired bootstrap intervals and paired tests, per env and for the suite; a "
                   "run of a seed group stands for its group")
    p.add_argument("--paper", action="store_true",
                   help="also show the Lumos paper's reported numbers (never ranked) and, with "
                   "--reference naming a Lumos-I row, the paper's claims measured")
    p.add_argument("--allow-different-tasks", action="store_true",
                   help="rank rows that cover different tasks (env, task, seed) together, with "
                   "a warning on the board, instead of refusing them")
    p.add_argument("--no-seed-groups", action="store_true",
                   help="show each training seed's run as a row of its own instead of one row "
                   "per seed group (the comparisons are then run by run)")
    p.add_argument("--compare", nargs=2, default=None, metavar=("A", "B"),
                   help="print the full paired comparison of two runs (A minus B: suite, each "
                   "env, level and metric) instead of the board; md (default) or csv")
    p.set_defaults(func=cmd_leaderboard)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Rank results folders and render the table, or validate submitted results folders."""
    if args.validate:
        if not args.results:
            raise LumosGymError("--validate needs the results folders to check")
        return _validate(args)
    if args.compare:
        return _compare(args)
    if not args.results:
        raise LumosGymError("name the results folders to rank")
    board = load_board(args.results, suite=args.suite, group_seeds=not args.no_seed_groups)
    board.paper = args.paper
    problem = task_sets_problem(board)
    if problem is not None:
        if not args.allow_different_tasks:
            raise LumosGymError(f"{problem}; rank them over the same tasks (the whole suite, "
                                "lumos-gym restrict after a suite changed), or pass "
                                "--allow-different-tasks")
        board.warnings.append(f"{problem}: ranked together by --allow-different-tasks")
    for message in board.warnings:
        print(f"lumos-gym leaderboard: warning: {message}", file=sys.stderr)
    if args.reference is not None:
        attach_reference(board, args.reference)
    written = write_board(board, args.format, args.out, trajectories=not args.no_trajectories)
    if isinstance(written, str):
        print(written, end="")
    else:
        extra = f" and {len(written) - 1} trajectory pages" if len(written) > 1 else ""
        grouped = (f" in {len(board.rows)} rows, {len(board.groups)} of them seed groups"
                   if board.groups else "")
        print(f"leaderboard: {written[0]}{extra} ({len(board.entries)} runs{grouped})")
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Print (or write to ``--out``) the paired comparison of the two runs of ``--compare``."""
    # --compare sets two runs side by side, episode by episode: no seed groups
    board = load_board(args.results or args.compare, suite=args.suite, group_seeds=False)
    for message in board.warnings:
        print(f"lumos-gym leaderboard: warning: {message}", file=sys.stderr)
    text = render_comparison(board, *args.compare, fmt=args.format)
    if args.out is None:
        print(text, end="")
        return 0
    path = Path(args.out)
    problem = folder_problem(path.parent) or (f"{path} is a folder" if path.is_dir() else None)
    if problem:
        raise LumosGymError(f"cannot write {path}: {problem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"comparison: {path}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    """Check submitted results folders; print one line per problem, exit 2 when any."""
    checked, problems = validate(args.results, suite=args.suite,
                                 allow_infra_errors=args.allow_infra_errors,
                                 allow_mixed_commits=args.allow_mixed_commits,
                                 allow_dirty=args.allow_dirty,
                                 allow_missing_round_limits=args.allow_missing_round_limits)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {checked} results folder(s)", file=sys.stderr)
        return 2
    print(f"{checked} results folder(s) valid")
    return 0
