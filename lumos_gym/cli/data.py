"""``lumos-gym data``: build the offline splits, download official files, or show their status."""

from __future__ import annotations

import argparse

from lumos_gym.cli.args import positive_int
from lumos_gym.conversion.pipeline import build_offline_data
from lumos_gym.envs import datasets as data


def add_data(sub: argparse._SubParsersAction) -> None:
    """Add the ``data`` verb."""
    p = sub.add_parser(
        "data", help="build the offline splits, download official files, or show their status"
    )
    p.add_argument("action", choices=["build", "download", "status"])
    p.add_argument("name", nargs="?", default="all",
                   help="a dataset name (gsm8k, svamp, asdiv...) or 'all' (download, status)")
    p.add_argument("--out", default="data", help="build: the output folder")
    p.add_argument("--num-tasks", type=positive_int, default=200,
                   help="build: procedural tasks per difficulty level (default 200: the games "
                   "take minutes to generate; 1 for a quick try)")
    p.add_argument("--split", action="append", default=[], help="only this split, repeatable")
    p.add_argument("--force", action="store_true", help="download again")
    p.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    """Download official dataset files or show where they go."""
    if args.action == "build":
        return _build(args)
    names = data.DATASETS.names() if args.name == "all" else [args.name]
    if args.action == "download":
        return _download(args, names)
    return _status(names)


def _build(args: argparse.Namespace) -> int:
    """Build the offline splits into ``--out``."""
    for line in build_offline_data(args.out, num_tasks=args.num_tasks):
        print(line)
    print("official files (not fetched): see `lumos-gym data status all`")
    return 0


def _download(args: argparse.Namespace, names: list[str]) -> int:
    """Download the official files of ``names``."""
    for name in names:
        paths = data.download(name, splits=args.split or None, force=args.force)
        for path in paths:
            print(f"{name}: {path}")
    return 0


def _status(names: list[str]) -> int:
    """Print where each file of ``names`` goes and whether it is there."""
    for name in names:
        info = data.DATASETS.get(name)
        print(f"{name} ({info.license}; {info.homepage})")
        for data_file, path, present in data.status(name):
            state = "present" if present else f"missing: fetch {data_file.url}"
            print(f"  {data_file.split:15s} {path}  [{state}]")
    return 0
