"""``lumos-gym reproduce``: build, train and score the reference agents (offline)."""

from __future__ import annotations

import argparse
import logging

from lumos_gym.cli.args import count, nonnegative_int, out_path, positive_int
from lumos_gym.errors import LumosGymError


def add_reproduce(sub: argparse._SubParsersAction) -> None:
    """Add the ``reproduce`` verb."""
    p = sub.add_parser(
        "reproduce", help="build, train and score the reference agents (offline)",
        description="Build the offline splits, train each agent on the same mixture and budget, "
        "evaluate the untrained base and every trained agent on the offline test splits, and "
        "write OUT/report.md (per env and per level). Finished steps are skipped, so a killed "
        "run resumes.",
    )
    p.add_argument("what", choices=["offline"], help="offline: the default model, no download")
    p.add_argument("--out", type=out_path, default="runs/reference", help="output folder")
    p.add_argument("--agents", default="lumos-i",
                   help="comma-separated: lumos-i, lumos-o, integrated, react, cot, direct")
    p.add_argument("--num-tasks", type=count, default=200,
                   help="data build size, 1 to 1000000 (default 200)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="the training seed, at least 0, and the mixture's unless --mix-seed is "
                   "given")
    p.add_argument("--mix-seed", type=nonnegative_int, default=None,
                   help="the seed that draws the cpu budget's mixture, at least 0 (default: "
                   "--seed); keep it fixed to train seeds of one agent on the same records")
    p.add_argument("--base-model", default="smollm2-135m")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads for training, at least 1")
    p.add_argument("--batch-size", type=positive_int, default=8,
                   help="evaluation batch size, at least 1 (default 8)")
    p.add_argument("--budget", default="cpu", choices=["cpu", "gpu"],
                   help="cpu: a 640-record mixture, 110 steps a model (about 25 min each on two "
                   "cores); gpu: every record, 3 epochs of the gpu-small recipe")
    p.add_argument("--until", default="report", choices=["data", "train", "report"],
                   help="data: stop after building the data; train: stop after training "
                   "(e.g. on a GPU machine without the envs)")
    p.add_argument("--parallel", type=positive_int, default=1,
                   help="models trained at once, each in its own process; at least 1")
    p.add_argument("--families", default="",
                   help="train on these env families' records alone (comma-separated: math, qa, "
                   "code, web, multimodal, games): the domain-specific agents")
    p.add_argument("--leave-out", default="",
                   help="train without these env families' records (comma-separated), which "
                   "become unseen tasks for the agents")
    p.add_argument("--no-base", action="store_true", help="do not score the untrained base")
    p.add_argument("--ship", action="store_true",
                   help="copy the Lumos-I adapters and their card into the package")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Build the offline data, train the reference agents, score them, optionally ship Lumos-I."""
    # training stack: the workflow imports lumos_gym.training, kept off the --help path
    from lumos_gym.workflows.reproduce import render_report, reproduce_offline, ship_reference

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    agents = _names(args.agents)
    report = reproduce_offline(
        args.out, agents=agents, num_tasks=args.num_tasks, seed=args.seed,
        base_model=args.base_model, threads=args.threads, batch_size=args.batch_size,
        include_base=not args.no_base, progress=not args.no_progress, budget=args.budget,
        until=args.until, parallel=args.parallel, only_families=_names(args.families),
        leave_out=_names(args.leave_out), mix_seed=args.mix_seed,
    )
    if args.until == "data":
        print(f"data: {report['data']}")
        return 0
    if args.until == "train":
        print(f"trained: {', '.join(report['models'])} into {args.out}/models")
        return 0

    print(render_report(report["scores"]))
    if args.ship:
        if "lumos-i" not in agents:
            raise LumosGymError("--ship copies the Lumos-I adapters: include lumos-i in --agents")
        print(f"shipped: {ship_reference(args.out)}")
    return 0


def _names(text: str) -> list[str]:
    """The names of a comma-separated list (empty items dropped)."""
    return [name.strip() for name in text.split(",") if name.strip()]
