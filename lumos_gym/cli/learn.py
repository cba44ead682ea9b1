"""``lumos-gym improve`` and ``grpo``: modules that learn from the envs' rewards."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from lumos_gym.agents.base import AgentConfig
from lumos_gym.cli.args import (
    at_least,
    finite_float,
    nonnegative_float,
    nonnegative_int,
    out_path,
    parse_kwargs,
    positive_int,
    temperature,
)
from lumos_gym.conversion.leakage import leakage_summary
from lumos_gym.envs.registration import make_env, resolve_env_id
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.suites import get_suite
from lumos_gym.models.factory import ModelOptions, default_backend
from lumos_gym.workflows.improve import ImproveConfig, check_train_tasks, improve

#: A GRPO group: advantages are relative to the group, so it holds two episodes or more.
GROUP_SIZE = at_least(int, 2, "an integer")


def _env(value: str) -> tuple[str, dict[str, Any]]:
    """``ENV[:KEY=VALUE,...]``: an env id and its constructor arguments (JSON values)."""
    env_id, _, rest = value.partition(":")
    pairs = [p for p in re.split(r",(?=\w+=)", rest) if p]  # levels=[1,2] keeps its comma
    return resolve_env_id(env_id), parse_kwargs(pairs)


def env_split(env_id: str, kwargs: dict[str, Any]) -> str:
    """The split an env built with ``kwargs`` serves (its ``split``, else the one given)."""
    env = make_env(env_id, **kwargs)
    try:
        return str(getattr(env.unwrapped, "split", None) or kwargs.get("split") or "")
    finally:
        env.close()


def check_splits(envs: list[tuple[str, dict[str, Any]]], *, flag: str,
                 allowed: tuple[str, ...]) -> None:
    """Refuse an env whose split is not one of ``allowed``: test episodes never choose or train.

    Raises:
        LumosGymError: naming the env, its split and the split to use.
    """
    for env_id, kwargs in envs:
        split = env_split(env_id, kwargs)
        if not split.startswith(allowed):
            raise LumosGymError(
                f"{flag} {env_id} serves the {split or 'default'} split; {flag} takes "
                f"{' or '.join(allowed)} splits only (e.g. split={allowed[0]}): test episodes "
                "are for reporting, never for choosing or training (docs/results.md)"
            )


def val_suite_envs(name: str) -> list[tuple[str, dict[str, Any]]]:
    """The envs of a validation suite, refusing a suite marked as a test suite."""
    suite = get_suite(name)
    if suite.role == "test":
        raise LumosGymError(f"--val-suite {name}: a test suite (its file's role); choose on a "
                            "validation suite, e.g. --val-suite validation")
    return [(entry.env_id, dict(entry.kwargs)) for entry in suite.entries]


def _modules(args: argparse.Namespace) -> dict[str, str]:
    if args.agent == "integrated":
        return {"policy": args.policy} if args.policy else {}
    return {k: v for k, v in (("planner", args.planner), ("grounder", args.grounder)) if v}


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", default="lumos-i", choices=["lumos-i", "integrated"])
    p.add_argument("--planner", help="the planner's starting LoRA folder (lumos-i)")
    p.add_argument("--grounder", help="the grounder's starting LoRA folder (lumos-i)")
    p.add_argument("--policy", help="the policy's starting LoRA folder (integrated)")
    p.add_argument("--train-env", action="append", default=[], required=True,
                   metavar="ENV[:K=V,...]", help="a train-split env, repeatable, e.g. "
                   "'MathWord-v0:split=train,num_tasks=50'")
    p.add_argument("--out", type=out_path, required=True, help="the run's folder")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="tasks per train env, at least 1")
    p.add_argument("--temperature", type=temperature, default=None,
                   help="sampling temperature, at least 0")
    p.add_argument("--max-new-tokens", type=positive_int, default=None, help="at least 1")
    p.add_argument("--max-rounds", type=positive_int, default=None, help="at least 1")
    p.add_argument("--device", default="auto")
    p.add_argument("--leakage-suite", default="compare", metavar="SUITE",
                   help="check the train envs' tasks against this suite's test tasks before "
                   "anything runs, and record it (default compare; 'none' skips)")


def _leakage_suite(args: argparse.Namespace) -> str | None:
    return None if args.leakage_suite.lower() == "none" else args.leakage_suite


def _print_leakage(summary: dict[str, Any] | None) -> None:
    if summary:
        print(f"leakage: the train tasks share {summary['shared_tasks']} of the "
              f"{summary['test_tasks']} test tasks of {summary['suite']!r} (same envs)")


def add_improve(sub: argparse._SubParsersAction) -> None:
    """Add the ``improve`` verb (expert iteration)."""
    p = sub.add_parser("improve", help="expert iteration: sample, keep the good episodes, "
                       "train on them, score on validation; N rounds")
    _add_common(p)
    p.add_argument("--val-env", action="append", default=[],
                   metavar="ENV[:K=V,...]", help="a validation-split env, repeatable (a test "
                   "split is refused)")
    p.add_argument("--val-suite", default=None, metavar="SUITE",
                   help="score each round on this suite's envs (e.g. validation; a suite whose "
                   "role is test is refused)")
    p.add_argument("--val-limit", type=positive_int, default=None,
                   help="tasks per validation env, at least 1")
    p.add_argument("--rounds", type=positive_int, default=2, help="at least 1 (default 2)")
    p.add_argument("--samples", type=positive_int, default=4,
                   help="episodes per task and round, at least 1 (default 4)")
    p.add_argument("--min-reward", type=finite_float, default=1.0,
                   help="the least reward of a kept episode, any finite number (default 1)")
    p.add_argument("--recipe", default="cpu-small", help="the training recipe")
    p.add_argument("--max-steps", type=positive_int, default=None,
                   help="training steps per round, at least 1")
    p.add_argument("--train-batch-size", type=positive_int, default=None,
                   help="records a forward pass in training, at least 1 (the recipe's by "
                   "default)")
    p.add_argument("--grad-accum", type=positive_int, default=None,
                   help="forward passes an optimizer step, at least 1 (with --train-batch-size 4 "
                   "and --grad-accum 2, the step of 8 records in half the memory)")
    p.add_argument("--lr", type=nonnegative_float, action="append", default=[], dest="lrs",
                   help="a learning rate to try (at least 0), repeatable: each round trains one "
                   "candidate per rate and keeps the best on validation (default: the recipe's)")
    p.add_argument("--backend", default=None, choices=["hf", "openvino", "openai", "vllm"],
                   help="the engine of the sampling and scoring runs (by default as evaluate's)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="episodes in flight, at least 1 (default 32)")
    p.set_defaults(func=cmd_improve)


def cmd_improve(args: argparse.Namespace) -> int:
    """Run expert iteration and print its rounds."""
    agent = AgentConfig(max_rounds=args.max_rounds, max_new_tokens=args.max_new_tokens or 128)
    val_envs = [_env(e) for e in args.val_env]
    if args.val_suite:
        val_envs += val_suite_envs(args.val_suite)
    if not val_envs:
        raise LumosGymError("name the validation envs: --val-env ENV:split=validation, or "
                            "--val-suite validation")
    train_envs = [_env(e) for e in args.train_env]
    check_splits(train_envs, flag="--train-env", allowed=("train",))
    check_splits(val_envs, flag="--val-env", allowed=("validation", "dev"))
    report = improve(ImproveConfig(
        args.agent, _modules(args), args.out, train_envs, val_envs, rounds=args.rounds,
        samples=args.samples,
        temperature=args.temperature or 0.7, limit=args.limit, val_limit=args.val_limit,
        min_reward=args.min_reward, recipe=args.recipe,
        train={k: v for k, v in (("max_steps", args.max_steps),
                                 ("batch_size", args.train_batch_size),
                                 ("grad_accum", args.grad_accum)) if v},
        lrs=args.lrs, leakage_suite=_leakage_suite(args),
        models=ModelOptions(backend=args.backend or default_backend(),
                            batch_size=args.batch_size,
                            options={} if args.device == "auto" else {"device": args.device}),
        agent_config=agent,
    ))
    _print_leakage(report.get("leakage"))
    for row in report["rounds"]:
        tried = "".join(f", lr {c['lr']:g}: {c['validation']:.4f}"
                        for c in row.get("candidates", ()))
        print(f"round {row['round']}: validation {row['validation']:.4f}{tried}")
    print(f"chosen: round {report['chosen_round']}: {json.dumps(report['chosen_adapters'])}")
    return 0


def add_grpo(sub: argparse._SubParsersAction) -> None:
    """Add the ``grpo`` verb."""
    p = sub.add_parser("grpo", help="GRPO on whole episodes: the modules learn online from "
                       "the envs' rewards")
    _add_common(p)
    p.add_argument("--recipe", default=None, choices=["cpu-small", "gpu-small"])
    for flag, kind in (("--steps", positive_int), ("--tasks-per-step", positive_int),
                       ("--group-size", GROUP_SIZE), ("--lr", nonnegative_float),
                       ("--beta", nonnegative_float), ("--invalid-penalty", finite_float),
                       ("--micro-batch", positive_int), ("--save-steps", positive_int),
                       ("--batch-size", positive_int), ("--seed", nonnegative_int)):
        p.add_argument(flag, type=kind, default=None, help=kind.range)
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_grpo)


def cmd_grpo(args: argparse.Namespace) -> int:
    """Run GRPO and print where the adapters are."""
    from lumos_gym.training.grpo import grpo, grpo_config  # heavy: torch

    if not _modules(args):
        raise LumosGymError("give the starting adapters: --planner and --grounder, or --policy")
    envs = [_env(e) for e in args.train_env]
    check_splits(envs, flag="--train-env", allowed=("train",))
    _print_leakage(leakage_summary(check_train_tasks(
        envs, args.out, suite=_leakage_suite(args), limit=args.limit)))
    report = grpo(grpo_config(
        args.recipe, adapters=_modules(args), envs=envs,
        out=args.out, agent=args.agent, steps=args.steps, tasks_per_step=args.tasks_per_step,
        group_size=args.group_size, temperature=args.temperature, lr=args.lr, beta=args.beta,
        invalid_penalty=args.invalid_penalty, max_new_tokens=args.max_new_tokens,
        max_rounds=args.max_rounds, micro_batch=args.micro_batch, limit=args.limit,
        save_steps=args.save_steps, seed=args.seed, device=args.device,
        batch_size=args.batch_size, resume=args.resume or None,
        progress=False if args.no_progress else None,
    ))
    print(f"reward {report['first_reward']} -> {report['final_reward']} over "
          f"{report['steps']} steps ({report['seconds']} s, {report['sampled_tokens']} tokens "
          f"sampled, {report['device']})")
    print("adapters: " + ", ".join(f"{r}={p}" for r, p in report["adapters"].items()))
    return 0
