"""``lumos-gym data``: build the offline splits, get official files, check leakage."""

from __future__ import annotations

import argparse
from pathlib import Path

from lumos_gym.cli.args import add_format, count, out_path, print_json
from lumos_gym.conversion.leakage import check_leakage, eval_tasks, read_training
from lumos_gym.conversion.pipeline import build_offline_data
from lumos_gym.envs import datasets as data
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.suites import suite_entries
from lumos_gym.jsonl import write_json_atomic


def add_data(sub: argparse._SubParsersAction) -> None:
    """Add the ``data`` verb."""
    p = sub.add_parser(
        "data", help="build the offline splits, download official files, show their status, "
        "or check training data against test tasks for leakage",
        description="build: the offline splits. download / status: the official files. "
        "leakage: compare training data (--train: a data build folder, a folder of .jsonl "
        "files or files) with a suite's test tasks (task texts, task ids, and the entities of "
        "the generated worlds), and reports near duplicates apart (the same numbers and answer, "
        "the same game walkthrough); exits 1 when they share a task or an entity, or with "
        "--strict also on a near duplicate.",
    )
    p.add_argument("action", choices=["build", "download", "status", "leakage"])
    p.add_argument("name", nargs="?", default="all",
                   help="a dataset name (gsm8k, svamp, asdiv...) or 'all' (download, status)")
    p.add_argument("--out", type=out_path, default="data", help="build: the output folder")
    p.add_argument("--num-tasks", type=count, default=None,
                   help="build: procedural tasks per difficulty level, 1 to 1000000 (default 200: "
                   "the games take minutes to generate; 1 for a quick try); leakage: the size of a "
                   "data build without splits.json")
    p.add_argument("--split", action="append", default=[], help="only this split, repeatable")
    p.add_argument("--force", action="store_true", help="download again")
    p.add_argument("--train", action="append", default=[], metavar="PATH",
                   help="leakage: training data (repeatable; default: the --out folder)")
    p.add_argument("--suite", default="compare",
                   help="leakage: the suite whose test tasks are checked (default compare)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="leakage: also write the report as JSON")
    p.add_argument("--record", nargs="+", default=[], metavar="RESULTS",
                   help="leakage: write the check into each results folder's run.json, for runs "
                   "whose adapters were trained elsewhere: every training file their cards name "
                   "must be in the data build (--train DATA) with the card's SHA-256")
    p.add_argument("--strict", action="store_true",
                   help="leakage: exit 1 on a near duplicate too (weak matches never fail)")
    add_format(p, "the file list of `data status`")
    p.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    """Download official dataset files or show where they go."""
    if args.format == "json" and args.action != "status":
        raise LumosGymError(f"--format json is for `data status`, not `data {args.action}`")
    if args.action == "build":
        return _build(args)
    if args.action == "leakage":
        return _leakage(args)
    names = data.DATASETS.names() if args.name == "all" else [args.name]
    if args.action == "download":
        return _download(args, names)
    return _status(names, as_json=args.format == "json")


def _build(args: argparse.Namespace) -> int:
    """Build the offline splits into ``--out``."""
    for line in build_offline_data(args.out, num_tasks=args.num_tasks or 200):
        print(line)
    print("official files (not fetched): see `lumos-gym data status all`")
    return 0


def _leakage(args: argparse.Namespace) -> int:
    """Check the training data against the suite's test tasks; exit 1 on any overlap.

    Near duplicates are printed and recorded but fail only with ``--strict``.
    """
    if args.record:
        return _record(args)
    training = read_training(args.train or [args.out], num_tasks=args.num_tasks)
    tests = eval_tasks(suite_entries(suite=args.suite))
    report = check_leakage(training, tests, log=print)
    print(report.format())
    if args.json:
        write_json_atomic(args.json, {"suite": args.suite, **report.to_dict()})
        print(f"report: {args.json}")
    if not report.clean:
        return 1
    if args.strict and report.near_duplicates:
        print(f"--strict: {report.near_duplicates} near duplicate(s) of training tasks")
        return 1
    return 0


def _record(args: argparse.Namespace) -> int:
    """Write the leakage check of each results folder into its run.json (``--record``)."""
    from lumos_gym.evaluation.provenance import record_leakage  # provenance (heavy): off --help

    if len(args.train) != 1:
        raise LumosGymError("--record checks against one data build: give --train DATA once")
    checks: dict[tuple[str, ...], object] = {}
    for folder in args.record:
        print(record_leakage(Path(folder), Path(args.train[0]), checks=checks))
    return 0


def _download(args: argparse.Namespace, names: list[str]) -> int:
    """Download the official files of ``names``."""
    for name in names:
        paths = data.download(name, splits=args.split or None, force=args.force)
        for path in paths:
            print(f"{name}: {path}")
    return 0


def _status(names: list[str], *, as_json: bool = False) -> int:
    """Print where each file of ``names`` goes and whether it is there (or all that as JSON)."""
    entries = []
    for name in names:
        info = data.DATASETS.get(name)
        files = [{"split": f.split, "path": str(path), "present": present, "url": f.url}
                 for f, path, present in data.status(name)]
        entries.append({"name": name, "license": info.license, "homepage": info.homepage,
                        "files": files})
    if as_json:
        print_json(entries)
        return 0
    for entry in entries:
        print(f"{entry['name']} ({entry['license']}; {entry['homepage']})")
        for f in entry["files"]:
            state = "present" if f["present"] else f"missing: fetch {f['url']}"
            print(f"  {f['split']:15s} {f['path']}  [{state}]")
    return 0
