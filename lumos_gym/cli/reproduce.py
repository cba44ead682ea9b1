"""``lumos-gym reproduce``: the reference agents (offline), or the paper's 7B run (paper)."""

from __future__ import annotations

import argparse

from lumos_gym.cli.args import (
    at_least,
    between,
    count,
    log_progress,
    nonnegative_int,
    out_path,
    positive_int,
)
from lumos_gym.errors import LumosGymError

#: The flags one ``what`` reads and the other refuses.
PAPER_FLAGS = ("dry_run", "gpus", "domain", "modules", "data", "gpu_memory_gb", "gpu_tflops",
               "mfu")
OFFLINE_FLAGS = ("agents", "num_tasks", "seed", "mix_seed", "threads", "batch_size", "budget",
                 "until", "parallel", "families", "leave_out", "no_base", "ship", "no_progress")

#: A card's memory in GiB, its peak in TFLOPS, the share of the peak reached.
gib = at_least(float, 1, "a size in GiB")
tflops = at_least(float, 1, "a number of TFLOPS")
utilisation = between(float, 0.01, 1, "a share")
gpu_count = between(int, 1, 64, "a number of GPUs")


def add_reproduce(sub: argparse._SubParsersAction) -> None:
    """Add the ``reproduce`` verb."""
    p = sub.add_parser(
        "reproduce", help="the reference agents (offline), or the paper's 7B run (paper)",
        description="offline: build the offline splits, train each agent on the same mixture "
        "and budget, evaluate the untrained base and every trained agent on the offline test "
        "splits, and write OUT/report.md (per env and per level). paper: the Lumos paper's "
        "full fine-tuning of a 7B model per module under DeepSpeed ZeRO-3, scored with vLLM; "
        "--dry-run resolves it (settings, parameters, memory per GPU, steps, FLOPs) without "
        "GPUs. Finished steps are skipped, so a killed run resumes.",
    )
    p.add_argument("what", choices=["offline", "paper"],
                   help="offline: the default model, no download; paper: the paper's 7B run")
    p.add_argument("--out", type=out_path, default=None,
                   help="output folder (default: runs/reference, or runs/paper)")
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
    p.add_argument("--base-model", default=None,
                   help="the model to train (default: smollm2-135m; paper: "
                   "meta-llama/Llama-2-7b-hf, whose architecture the dry run has built in when "
                   "it is not cached here; or a local model folder, read from local files)")
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
    _add_paper_flags(p)
    # what each flag holds when not given, for the check that `what` reads every flag given
    unset = {a.dest: a.default for a in p._actions if a.dest in (*PAPER_FLAGS, *OFFLINE_FLAGS)}
    p.set_defaults(func=cmd_reproduce, unset=unset)


def _add_paper_flags(p: argparse.ArgumentParser) -> None:
    """The flags of ``reproduce paper``."""
    p.add_argument("--dry-run", action="store_true",
                   help="paper: resolve the run and print it (settings, parameters, memory per "
                   "GPU, steps, tokens, FLOPs, GPU-hours); needs no GPU and no download")
    p.add_argument("--gpus", type=gpu_count, default=None,
                   help="paper: GPUs, one process each, 1 to 64 (default 2, as the original "
                   "scripts; 8 also divides the batch of 128)")
    p.add_argument("--domain", default=None,
                   choices=["maths", "complex_qa", "web_agent", "unified"],
                   help="paper: whose record counts and evaluation sets (default maths)")
    p.add_argument("--modules", default=None,
                   help="paper: comma-separated of plan-iterative, ground-iterative, "
                   "plan-onetime, ground-onetime (default: the domain's)")
    p.add_argument("--data", nargs="+", default=None, metavar="FILE",
                   help="paper: training files, MODULE=FILE or a file whose name holds the "
                   "module (plan-iterative.jsonl, lumos_maths_plan_iterative.jsonl); default: "
                   "data/lumos/lumos_DOMAIN_MODULE.jsonl, or the paper's counts when absent")
    p.add_argument("--gpu-memory-gb", type=gib, default=None,
                   help="paper: one card's memory in GiB, at least 1 (default 80)")
    p.add_argument("--gpu-tflops", type=tflops, default=None,
                   help="paper: one card's peak dense bf16 TFLOPS, at least 1 (default 989, "
                   "H100 SXM; A100: 312)")
    p.add_argument("--mfu", type=utilisation, default=None,
                   help="paper: the model FLOPs utilisation assumed, 0.01 to 1 (default 0.4)")


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run ``reproduce offline`` or ``reproduce paper``."""
    _check_flags(args)
    if args.what == "paper":
        return cmd_paper(args)
    # training stack: the workflow imports lumos_gym.training, kept off the --help path
    from lumos_gym.workflows.reproduce import render_report, reproduce_offline, ship_reference

    log_progress()
    agents = _names(args.agents)
    args.out = args.out or "runs/reference"
    report = reproduce_offline(
        args.out, agents=agents, num_tasks=args.num_tasks, seed=args.seed,
        base_model=args.base_model or "smollm2-135m", threads=args.threads,
        batch_size=args.batch_size,
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


def cmd_paper(args: argparse.Namespace) -> int:
    """Print the paper run (``--dry-run``), or print its commands and run them on the GPUs."""
    # training stack and torch: the workflow imports them, kept off the --help path
    from lumos_gym.workflows import paper

    plan = paper.plan_paper(
        args.out or "runs/paper", base_model=args.base_model or paper.LLAMA2_7B,
        gpus=args.gpus or 2, domain=args.domain or "maths",
        modules=_names(args.modules or ""), data=args.data or (),
        gpu_memory_gib=args.gpu_memory_gb or paper.GPU_MEMORY_GIB,
        gpu_tflops=args.gpu_tflops or paper.GPU_TFLOPS, mfu=args.mfu or paper.MFU,
    )
    if args.dry_run:
        print(paper.render_dry_run(plan))
        return 0
    return paper.run_paper(plan)


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse a flag of the other ``what`` (``--dry-run`` with offline, ``--agents`` with paper).

    Raises:
        LumosGymError: a flag given that the chosen ``what`` does not read.
    """
    other = OFFLINE_FLAGS if args.what == "paper" else PAPER_FLAGS
    given = [name for name in other if getattr(args, name) != args.unset[name]]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise LumosGymError(f"{flag} is not a flag of `reproduce {args.what}`")


def _names(text: str) -> list[str]:
    """The names of a comma-separated list (empty items dropped)."""
    return [name.strip() for name in text.split(",") if name.strip()]
