"""``lumos-gym envs``, ``check`` and ``play``: list, check and play the registered envs."""

from __future__ import annotations

import argparse
from typing import Any

from lumos_gym import envs as registered  # env_ids is looked up per call (tests replace it)
from lumos_gym.cli.args import add_format, nonnegative_int, parse_kwargs, print_json
from lumos_gym.envs.checks import CheckReport, check_env_id
from lumos_gym.envs.registration import resolve_env_id
from lumos_gym.errors import DataError
from lumos_gym.text import table
from lumos_gym.workflows.play import play


def add_envs(sub: argparse._SubParsersAction) -> None:
    """Add the ``envs`` verb."""
    p = sub.add_parser("envs", help="list the registered environments")
    add_format(p, "the table")
    p.set_defaults(func=cmd_envs)


def cmd_envs(args: argparse.Namespace) -> int:
    """Print the table of registered envs (or a JSON list of them)."""
    entries = [_env_entry(env_id) for env_id in registered.env_ids()]
    if args.format == "json":
        print_json(entries)
        return 0
    rows = []
    for e in entries:
        actions = [*e["tools"], e["terminal"]] if e["tools"] else ["(tools by option)"]
        rows.append([e["id"], e["task_type"], ", ".join(actions), ", ".join(e["sources"]),
                     e["size"]])
    print(table(["id", "task type", "actions", "sources", "size"], rows))
    return 0


def _env_entry(env_id: str) -> dict[str, Any]:
    """What ``envs`` shows of one env: its registration and its class's task type and tools."""
    info = registered.ENVS.get(env_id)
    cls = info.env_class()
    return {
        "id": env_id, "task_type": cls.task_type, "tools": list(cls.default_tools),
        "terminal": "Answer" if cls.ends_by_answer else "Stop", "sources": list(info.sources),
        "size": info.size, "description": info.description,
        "max_episode_steps": info.max_episode_steps, "entry_point": info.entry_point,
    }


def add_check(sub: argparse._SubParsersAction) -> None:
    """Add the ``check`` verb."""
    p = sub.add_parser("check", help="check an env (or all): Gymnasium checker + oracle replay")
    p.add_argument("env", help="an env id, or 'all'")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (JSON value), repeatable")
    p.add_argument("--replay-limit", type=nonnegative_int, default=None,
                   help="replay the gold actions of at most N tasks per env, at least 0 (an env "
                   "whose oracle replays none is 'unverified': named alone, the check fails)")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Run the env checker and oracle replay on one env or all."""
    ids = registered.env_ids() if args.env == "all" else [resolve_env_id(args.env)]
    kwargs = parse_kwargs(args.kwarg)
    failed = 0
    for env_id in ids:
        try:
            report = check_env_id(env_id, kwargs=kwargs, replay_limit=args.replay_limit)
        except DataError as e:
            if args.env != "all":
                raise
            # `check all` covers every env that has data here; an official-only dataset that
            # is not downloaded (A-OKVQA, ScienceQA) is reported, not failed
            print(f"{env_id}: skipped (no data here: {str(e).split(';')[0]})")
            continue
        _print_check(env_id, report)
        # `check all` reports an env whose data gives no gold actions, as it does an env with
        # no data; named alone, such an env fails the check (--replay-limit 0 asks for none)
        unverifiable = report.status == "unverified" and not report.gold_tasks
        failed += report.status == "FAILED" or (args.env != "all" and unverifiable)
    return 1 if failed else 0


def _print_check(env_id: str, report: CheckReport) -> None:
    """Print one env's check: a status line, then its problems and warnings."""
    replayed = len(report.replays)
    full = sum(r.ok for r in report.replays)
    print(
        f"{env_id}: {report.status} (api {'ok' if report.api_ok else 'failed'}, "
        f"{report.tasks} tasks, oracle {full}/{replayed} at full reward)"
    )
    if report.api_error:
        print(f"  api: {report.api_error}")
    if report.unverified_reason:
        print(f"  warning: not verified: {report.unverified_reason}")
    for message in report.warnings:
        print(f"  warning: {message}")
    for replay in report.replays:
        if not replay.ok:
            detail = "; ".join(replay.errors) or f"reward {replay.reward}"
            print(f"  {replay.task_id}: {detail}")


def add_play(sub: argparse._SubParsersAction) -> None:
    """Add the ``play`` verb."""
    p = sub.add_parser("play", help="play an env by typing grounded actions")
    p.add_argument("env", help="an env id, e.g. lumos/MathWord-v0")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seed", type=nonnegative_int, default=None, help="at least 0")
    p.add_argument("--task-id", default=None)
    p.set_defaults(func=cmd_play)


def cmd_play(args: argparse.Namespace) -> int:
    """Play an env by typing grounded actions."""
    options: dict[str, Any] = {}
    if args.task_id:
        options["task_id"] = args.task_id
    kwargs = parse_kwargs(args.kwarg)
    play(resolve_env_id(args.env), kwargs=kwargs, seed=args.seed, options=options)
    return 0
