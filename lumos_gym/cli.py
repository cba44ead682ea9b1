"""The ``lumos-gym`` command. Each verb parses its flags and calls one library function."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from lumos_gym.errors import LumosGymError


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Render a plain-text table with left-aligned columns."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _parse_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """Parse ``key=value`` pairs; values are JSON when they parse as JSON, else strings."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise LumosGymError(f"expected key=value, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value
    return kwargs


# ------------------------------------------------------------------------------------- verbs
def cmd_envs(args: argparse.Namespace) -> int:
    """Print the table of registered envs."""
    from lumos_gym.envs import ENVS, env_ids

    rows = []
    for env_id in env_ids():
        info = ENVS.get(env_id)
        cls = info.env_class()
        tools = [*cls.default_tools, "Answer"] if cls.default_tools else ["(game commands)"]
        rows.append([env_id, cls.task_type, ", ".join(tools), ", ".join(info.sources), info.size])
    print(_table(["id", "task type", "actions", "sources", "size"], rows))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Run the env checker and oracle replay on one env or all."""
    from lumos_gym.envs import env_ids
    from lumos_gym.envs.checks import check_env_id
    from lumos_gym.envs.registration import resolve_env_id

    ids = env_ids() if args.env == "all" else [resolve_env_id(args.env)]
    kwargs = _parse_kwargs(args.kwarg)
    failed = 0
    for env_id in ids:
        report = check_env_id(env_id, kwargs=kwargs, replay_limit=args.replay_limit)
        replayed = len(report.replays)
        full = sum(r.ok for r in report.replays)
        status = "ok" if report.ok else "FAILED"
        print(
            f"{env_id}: {status} (api {'ok' if report.api_ok else 'failed'}, "
            f"{report.tasks} tasks, oracle {full}/{replayed} at full reward)"
        )
        if report.api_error:
            print(f"  api: {report.api_error}")
        for message in report.warnings:
            print(f"  warning: {message}")
        for replay in report.replays:
            if not replay.ok:
                detail = "; ".join(replay.errors) or f"reward {replay.reward}"
                print(f"  {replay.task_id}: {detail}")
        failed += not report.ok
    return 1 if failed else 0


def cmd_play(args: argparse.Namespace) -> int:
    """Play an env by typing grounded actions."""
    from lumos_gym.envs.registration import resolve_env_id
    from lumos_gym.play import play

    options: dict[str, Any] = {}
    if args.task_id:
        options["task_id"] = args.task_id
    kwargs = _parse_kwargs(args.kwarg)
    play(resolve_env_id(args.env), kwargs=kwargs, seed=args.seed, options=options)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    """Download official dataset files or show where they go."""
    from lumos_gym import data

    names = data.DATASETS.names() if args.name == "all" else [args.name]
    if args.action == "download":
        for name in names:
            paths = data.download(name, splits=args.split or None, force=args.force)
            for path in paths:
                print(f"{name}: {path}")
        return 0
    for name in names:
        info = data.DATASETS.get(name)
        print(f"{name} ({info.license}; {info.homepage})")
        for data_file, path, present in data.status(name):
            state = "present" if present else f"missing: fetch {data_file.url}"
            print(f"  {data_file.split:15s} {path}  [{state}]")
    return 0


# -------------------------------------------------------------------------------- the parser
def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of every verb."""
    from lumos_gym import __version__

    parser = argparse.ArgumentParser(
        prog="lumos-gym",
        description="Gymnasium environments, agents and training for Lumos-style agents.",
    )
    parser.add_argument("--version", action="version", version=f"lumos-gym {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = sub.add_parser("envs", help="list the registered environments")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("check", help="check an env (or all): Gymnasium checker + oracle replay")
    p.add_argument("env", help="an env id, or 'all'")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (JSON value), repeatable")
    p.add_argument("--replay-limit", type=int, default=None,
                   help="replay the gold actions of at most N tasks per env")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("play", help="play an env by typing grounded actions")
    p.add_argument("env", help="an env id, e.g. lumos/MathWord-v0")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--task-id", default=None)
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("data", help="download official dataset files, or show their status")
    p.add_argument("action", choices=["download", "status"])
    p.add_argument("name", help="a dataset name (gsm8k, svamp, asdiv...) or 'all'")
    p.add_argument("--split", action="append", default=[], help="only this split, repeatable")
    p.add_argument("--force", action="store_true", help="download again")
    p.set_defaults(func=cmd_data)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors of lumos-gym print one line and exit with status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except LumosGymError as e:
        print(f"lumos-gym {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lumos-gym {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
