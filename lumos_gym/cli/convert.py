"""``lumos-gym convert`` and ``export``: annotations from rationales, training records from them."""

from __future__ import annotations

import argparse

from lumos_gym.cli.args import finite_float, out_path, parse_kwargs, positive_int
from lumos_gym.conversion.pipeline import convert_env, export_files
from lumos_gym.envs.registration import check_env_kwargs, resolve_env_id
from lumos_gym.errors import LumosGymError
from lumos_gym.workflows.improve import export_from_results


def add_convert(sub: argparse._SubParsersAction) -> None:
    """Add the ``convert`` verb."""
    p = sub.add_parser("convert", help="convert an env's rationales into verified annotations")
    p.add_argument("--env", required=True, help="env id whose tasks are converted")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (JSON value), e.g. split=train, source=PATH")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="only the first N tasks, at least 1")
    p.add_argument("--llm", default=None, metavar="BACKEND:MODEL[@URL]",
                   help="rewrite rationales with a model (hf:..., openai:MODEL@URL, vllm:...)")
    p.add_argument("--no-verify", action="store_true", help="skip replay verification")
    p.add_argument("--out", type=out_path, required=True, help="JSONL file of kept annotations")
    p.add_argument("--rejected", default=None, help="JSONL of rejected items with reasons")
    p.add_argument("--batch-size", type=positive_int, default=8,
                   help="rationales rewritten together, at least 1 (default 8)")
    p.set_defaults(func=cmd_convert)


def cmd_convert(args: argparse.Namespace) -> int:
    """Convert an env's rationales into verified unified annotations."""
    env_kwargs = parse_kwargs(args.kwarg)
    check_env_kwargs(resolve_env_id(args.env), env_kwargs)  # before any task is generated
    summary = convert_env(
        args.env, out=args.out, env_kwargs=env_kwargs, limit=args.limit,
        llm=args.llm, verify=not args.no_verify, rejected_path=args.rejected,
        batch_size=args.batch_size,
    )
    print(summary.format())
    return 0


def add_export(sub: argparse._SubParsersAction) -> None:
    """Add the ``export`` verb."""
    p = sub.add_parser("export", help="export annotations (or good episodes) as training records")
    p.add_argument("inputs", nargs="*", help="annotation JSONL files")
    p.add_argument("--format", default=None,
                   help="plan-iterative, ground-iterative, plan-onetime, ground-onetime, "
                   "integrated, react, cot or direct (with --from-results: only this one)")
    p.add_argument("--from-results", action="append", default=[], metavar="RESULTS",
                   help="a results folder of sampled episodes (repeatable): its episodes that "
                   "reach --min-reward become records of every format, in the folder --out")
    p.add_argument("--min-reward", type=finite_float, default=1.0,
                   help="with --from-results: the least reward of a kept episode, any finite "
                   "number (default 1)")
    p.add_argument("--out", type=out_path, required=True,
                   help="JSONL file of training records (a folder with --from-results)")
    p.add_argument("--dataset", default=None,
                   help="records' dataset name and id prefix ('unified' mixes domains)")
    p.add_argument("--hf-dir", default=None, help="also save a Hugging Face datasets folder")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """Export annotation files as training records of one format, or episodes as records."""
    if args.from_results:
        report = export_from_results(args.from_results + args.inputs, args.out,
                                     min_reward=args.min_reward,
                                     formats=[args.format] if args.format else None)
        print(f"{report['episodes']} episodes, {report['below_min_reward']} below the reward, "
              f"{sum(report['rejected'].values())} rejected {report['rejected']}, "
              f"{report['duplicates']} duplicates: {report['annotations']} annotations")
        print(f"records in {args.out}: " + ", ".join(f"{fmt} {n}" for fmt, n in
                                                     report["records"].items()))
        return 0
    if not args.inputs or not args.format:
        raise LumosGymError("give annotation files and --format, or --from-results RESULTS")
    summary = export_files(args.inputs, args.format, args.out, dataset=args.dataset,
                           hf_dir=args.hf_dir)
    print(summary.format())
    print(f"records: {args.out}" + (f"; HF dataset: {args.hf_dir}" if args.hf_dir else ""))
    return 0
