"""``lumos-gym train``: fine-tune a model on exported records (LoRA or full)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from lumos_gym.cli.args import (
    fraction,
    log_progress,
    nonnegative_float,
    nonnegative_int,
    out_path,
    positive_int,
)
from lumos_gym.errors import LumosGymError

if TYPE_CHECKING:  # annotations only: importing the training stack stays lazy
    from lumos_gym.training.config import TrainConfig
    from lumos_gym.training.trainer import TrainResult


def add_train(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` verb."""
    p = sub.add_parser(
        "train", help="fine-tune a model on exported records (LoRA or full)",
        description="Fine-tune a model on training records (lumos-gym export) with loss on "
        "assistant text only. Recipes: lumos-paper (the paper's full fine-tuning), cpu-small "
        "(LoRA for a CPU), gpu-small (the same LoRA, bigger batches, 3 epochs). Flags "
        "override the recipe. For N GPUs: accelerate launch "
        "--config_file CFG --num_processes N -m lumos_gym.cli train ..., with CFG one of the "
        "package's lumos_gym/training/accelerate/*.yaml (docs/training.md).",
    )
    p.add_argument("--data", action="append", required=True, metavar="FILE",
                   help="training records (JSONL with 'messages'), repeatable")
    p.add_argument("--base-model", default="smollm2-135m",
                   help="alias, local folder or hub id (default: smollm2-135m)")
    p.add_argument("--out", type=out_path, required=True,
                   help="output folder (checkpoints, logs, result)")
    p.add_argument("--recipe", default=None, help="lumos-paper, cpu-small or gpu-small")
    p.add_argument("--lora", type=positive_int, default=None, metavar="R",
                   help="LoRA rank, at least 1")
    p.add_argument("--full", action="store_true", help="train every weight (no LoRA)")
    p.add_argument("--lora-targets", default=None,
                   help="comma-separated module names, or all-linear (default)")
    p.add_argument("--init-adapter", default=None, help="continue training this LoRA adapter")
    _add_schedule_flags(p)
    p.set_defaults(func=cmd_train)


def _add_schedule_flags(p: argparse.ArgumentParser) -> None:
    """The recipe overrides: steps, batches, packing, precision, evaluation and saving."""
    p.add_argument("--epochs", type=nonnegative_float, default=None, help="at least 0")
    p.add_argument("--max-steps", type=nonnegative_int, default=None,
                   help="optimizer steps, at least 0 (0: use epochs)")
    p.add_argument("--lr", type=nonnegative_float, default=None,
                   help="learning rate, at least 0")
    p.add_argument("--max-length", type=positive_int, default=None,
                   help="tokens per record, at least 1")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="rows per device per pass, at least 1")
    p.add_argument("--grad-accum", type=positive_int, default=None, help="at least 1")
    p.add_argument("--total-batch", type=positive_int, default=None,
                   help="rows per optimizer step over all processes, at least 1; the "
                   "accumulation follows the process count, so a run resumes with another "
                   "count on the same batches")
    pack = p.add_mutually_exclusive_group()
    pack.add_argument("--pack", dest="pack", action="store_true", default=None,
                      help="pack records into max-length rows (no cross-record attention)")
    pack.add_argument("--no-pack", dest="pack", action="store_false",
                      help="length-grouped padded batches instead")
    p.add_argument("--precision", default=None, choices=["auto", "bf16", "fp16", "fp32"])
    p.add_argument("--eval-fraction", type=fraction, default=None,
                   help="held-out share, 0 to 1")
    p.add_argument("--eval-steps", type=positive_int, default=None, help="at least 1")
    p.add_argument("--save-steps", type=positive_int, default=None, help="at least 1")
    p.add_argument("--logging-steps", type=positive_int, default=None,
                   help="optimizer steps between loss logs, at least 1")
    p.add_argument("--max-records", type=positive_int, default=None, help="at least 1")
    p.add_argument("--seed", type=nonnegative_int, default=None, help="at least 0")
    p.add_argument("--merge", action="store_true", help="also save a merged model (OUT/merged)")
    p.add_argument("--resume", action="store_true", help="continue from OUT's last checkpoint")
    p.add_argument("--device", default=None, help="auto, cpu or cuda")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads, at least 1")
    p.add_argument("--report-to", default=None, choices=["tensorboard", "none"])


def cmd_train(args: argparse.Namespace) -> int:
    """Train a model on exported records (one run; ``accelerate launch`` for many GPUs)."""
    from lumos_gym.training import config_from_recipe, train  # training stack: off --help

    if args.lora is not None and args.full:
        raise LumosGymError("give --lora R or --full, not both")
    log_progress()
    config = config_from_recipe(
        args.recipe, data=args.data, full=args.full, base_model=args.base_model, out=args.out,
        lora_r=args.lora, epochs=args.epochs, max_steps=args.max_steps, lr=args.lr,
        max_length=args.max_length, batch_size=args.batch_size, grad_accum=args.grad_accum,
        total_batch=args.total_batch,
        pack=args.pack, precision=args.precision, eval_fraction=args.eval_fraction,
        eval_steps=args.eval_steps, save_steps=args.save_steps,
        logging_steps=args.logging_steps, max_records=args.max_records,
        seed=args.seed, merge=args.merge or None, resume=args.resume or None,
        init_adapter=args.init_adapter, device=args.device, threads=args.threads,
        lora_targets=tuple(args.lora_targets.split(",")) if args.lora_targets else None,
        report_to=args.report_to,
    )
    result = train(config)
    if int(os.environ.get("RANK", "0")) == 0:  # under `accelerate launch`, one process says it
        _print_result(config, result)
    return 0


def _print_result(config: TrainConfig, result: TrainResult) -> None:
    """Print what a training run wrote, its losses and how to evaluate it."""
    report = result.report
    kind = "model" if config.lora_r is None else "adapter"
    print(f"{kind}: {result.out} ({report['steps']} steps, logged loss {report['first_loss']:.3f}"
          f" -> {report['final_loss']:.3f}, mean {report['mean_loss']:.3f}, "
          f"{report['tokens_per_second']} tokens/s)")
    if report["eval_losses"]:
        print(f"eval loss: {report['eval_losses'][-1][1]:.3f}")
    if result.merged:
        print(f"merged model: {result.merged}")
    role = "--model" if config.lora_r is None else "--planner/--grounder/--model"
    print(f"use it: lumos-gym evaluate {role} {result.out}")
