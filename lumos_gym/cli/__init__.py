"""The ``lumos-gym`` command. Each verb parses its flags and calls one library function."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lumos_gym.errors import DataError, LumosGymError
from lumos_gym.text import table


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


def _at_least(kind: type, minimum: float, name: str) -> Callable[[str], Any]:
    """An argparse type: a ``kind`` (int or float) of at least ``minimum``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {text}")
        return value

    return parse


positive_int = _at_least(int, 1, "an integer")
nonnegative_float = _at_least(float, 0, "a number")

# ------------------------------------------------------------------------------------- verbs
def cmd_envs(args: argparse.Namespace) -> int:
    """Print the table of registered envs."""
    from lumos_gym.envs import ENVS, env_ids

    rows = []
    for env_id in env_ids():
        info = ENVS.get(env_id)
        cls = info.env_class()
        terminal = "Answer" if cls.ends_by_answer else "Stop"
        tools = [*cls.default_tools, terminal] if cls.default_tools else ["(tools by option)"]
        rows.append([env_id, cls.task_type, ", ".join(tools), ", ".join(info.sources), info.size])
    print(table(["id", "task type", "actions", "sources", "size"], rows))
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
        try:
            report = check_env_id(env_id, kwargs=kwargs, replay_limit=args.replay_limit)
        except DataError as e:
            if args.env != "all":
                raise
            # `check all` covers every env that has data here; an official-only dataset that
            # is not downloaded (A-OKVQA, ScienceQA) is reported, not failed
            print(f"{env_id}: skipped (no data here: {str(e).split(';')[0]})")
            continue
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
    from lumos_gym.workflows.play import play

    options: dict[str, Any] = {}
    if args.task_id:
        options["task_id"] = args.task_id
    kwargs = _parse_kwargs(args.kwarg)
    play(resolve_env_id(args.env), kwargs=kwargs, seed=args.seed, options=options)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    """Download official dataset files or show where they go."""
    from lumos_gym.envs import datasets as data

    if args.action == "build":
        from lumos_gym.conversion.pipeline import build_offline_data

        for line in build_offline_data(args.out, num_tasks=args.num_tasks):
            print(line)
        print("official files (not fetched): see `lumos-gym data status all`")
        return 0
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


def _role_paths(pairs: Sequence[str]) -> dict[str, str]:
    """Parse ``--adapter`` values: ``ROLE=PATH`` for one role, a bare ``PATH`` for every role."""
    adapters: dict[str, str] = {}
    for pair in pairs:
        role, sep, path = pair.partition("=")
        if sep and role in ("planner", "grounder", "policy", "*"):
            adapters[role] = path
        else:
            adapters["*"] = pair
    return adapters


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run an agent on envs or a suite, write the results and print the summary table."""
    from lumos_gym.agents.base import AgentConfig
    from lumos_gym.envs import load_plugins
    from lumos_gym.leaderboard.evaluate import ModelOptions, RunConfig, evaluate  # this verb only
    from lumos_gym.leaderboard.results import format_table  # this verb only

    load_plugins()
    options: dict[str, Any] = {}
    if args.device:
        options["device"] = args.device
    if args.dtype:
        options["dtype"] = args.dtype
    models = ModelOptions(
        backend=args.backend, model=args.model, planner=args.planner, grounder=args.grounder,
        adapters=_role_paths(args.adapter), base_url=args.base_url,
        batch_size=args.batch_size, options=options, reference=not args.no_reference,
    )
    config = AgentConfig(
        max_rounds=args.max_rounds, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, seed=args.seed if args.seed is not None else 0,
    )
    result = evaluate(RunConfig(
        args.agent, envs=args.env, suite=args.suite, limit=args.limit,
        env_kwargs=_parse_kwargs(args.kwarg), models=models, agent_config=config,
        seed=args.seed, shard=args.shard, out=args.out, resume=args.resume, ray=args.ray,
        workers=args.workers, worker_gpus=args.worker_gpus, wall_timeout=args.wall_timeout,
        keep_prompts=args.keep_prompts, progress=not args.no_progress,
        argv=sys.argv[1:],
    ))
    print(format_table(result.summary))
    print(f"results: {result.out / 'episodes.jsonl'}, {result.out / 'summary.json'}")
    return 0


def cmd_suites(args: argparse.Namespace) -> int:
    """List the suites, or show one suite's envs."""
    from lumos_gym.envs import load_plugins
    from lumos_gym.leaderboard.evaluate import get_suite, load_suites

    load_plugins()
    if args.name:
        suite = get_suite(args.name)
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
        return 0
    suites, errors = load_suites()
    rows = []
    for name, suite in sorted(suites.items()):
        if name != suite.name:
            continue
        episodes = suite.episodes()
        rows.append([
            name, ", ".join(e.env_id.removeprefix("lumos/") for e in suite.entries),
            str(episodes) if episodes is not None else "-", suite.description,
        ])
    print(table(["suite", "envs", "episodes", "description"], rows))
    for message in errors.values():
        print(f"lumos-gym suites: error: {message}", file=sys.stderr)
    return 1 if errors else 0


def cmd_agents(args: argparse.Namespace) -> int:
    """Print the registered agents and the model roles each asks."""
    from lumos_gym.agents import AGENTS

    rows = []
    for name in AGENTS.names():
        cls = AGENTS.get(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        rows.append([name, ", ".join(cls.roles) or "(none)", doc])
    print(table(["agent", "roles", "description"], rows))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a model over an OpenAI-compatible HTTP API until interrupted."""
    from lumos_gym.models.serve import serve

    serve(
        args.model, adapter=args.adapter, host=args.host, port=args.port,
        served_model_name=args.served_model_name, device=args.device, dtype=args.dtype,
        batch_size=args.batch_size, max_context=args.max_context,
    )
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """Convert an env's rationales into verified unified annotations."""
    from lumos_gym.conversion.pipeline import convert_env

    summary = convert_env(
        args.env, out=args.out, env_kwargs=_parse_kwargs(args.kwarg), limit=args.limit,
        llm=args.llm, verify=not args.no_verify, rejected_path=args.rejected,
        batch_size=args.batch_size,
    )
    print(summary.format())
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export annotation files as training records of one format."""
    from lumos_gym.conversion.pipeline import export_files

    summary = export_files(args.inputs, args.format, args.out, dataset=args.dataset,
                           hf_dir=args.hf_dir)
    print(summary.format())
    print(f"records: {args.out}" + (f"; HF dataset: {args.hf_dir}" if args.hf_dir else ""))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train a model on exported records (one run; ``accelerate launch`` for many GPUs)."""
    import logging

    from lumos_gym.training import config_from_recipe, train

    if args.lora is not None and args.full:
        raise LumosGymError("give --lora R or --full, not both")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = config_from_recipe(
        args.recipe, data=args.data, full=args.full, base_model=args.base_model, out=args.out,
        lora_r=args.lora, epochs=args.epochs, max_steps=args.max_steps, lr=args.lr,
        max_length=args.max_length, batch_size=args.batch_size, grad_accum=args.grad_accum,
        pack=args.pack, precision=args.precision, eval_fraction=args.eval_fraction,
        eval_steps=args.eval_steps, save_steps=args.save_steps, max_records=args.max_records,
        seed=args.seed, merge=args.merge or None, resume=args.resume or None,
        init_adapter=args.init_adapter, device=args.device, threads=args.threads,
        lora_targets=tuple(args.lora_targets.split(",")) if args.lora_targets else None,
        report_to=args.report_to,
    )
    result = train(config)
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
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge a LoRA adapter into its base model, or results folders (shards) into one."""
    from pathlib import Path

    inputs = [Path(p) for p in args.inputs]
    if all((p / "episodes.jsonl").is_file() for p in inputs):
        from lumos_gym.leaderboard.results import format_table, merge_results

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
    absent = [str(p) for p in inputs if not p.exists()]
    if absent:
        raise LumosGymError(f"no such folder: {', '.join(absent)}")
    if len(inputs) != 1 or any((p / "episodes.jsonl").is_file() for p in inputs):
        raise LumosGymError(
            "merge takes one LoRA adapter folder, or results folders (each with "
            "episodes.jsonl) to join; these are neither: " + ", ".join(map(str, inputs))
        )
    from lumos_gym.training.trainer import merge_adapter

    print(f"merged model: {merge_adapter(args.inputs[0], args.out, dtype=args.dtype)}")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Rank results folders and render the table, or validate submitted results folders."""
    from lumos_gym.leaderboard.render import load_board, validate, write_board

    if args.validate:
        checked, problems = validate(args.results, suite=args.suite)
        for problem in problems:
            print(problem)
        if problems:
            print(f"{len(problems)} problem(s) in {checked} results folder(s)", file=sys.stderr)
            return 2
        print(f"{checked} results folder(s) valid")
        return 0
    board = load_board(args.results, suite=args.suite)
    for message in board.warnings:
        print(f"lumos-gym leaderboard: warning: {message}", file=sys.stderr)
    written = write_board(board, args.format, args.out)
    if isinstance(written, str):
        print(written, end="")
    else:
        extra = f" and {len(written) - 1} trajectory pages" if len(written) > 1 else ""
        print(f"leaderboard: {written[0]}{extra} ({len(board.entries)} runs)")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Build the offline data, train the reference agents, score them, optionally ship Lumos-I."""
    import logging

    from lumos_gym.workflows.reproduce import reproduce_offline, ship_reference

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    report = reproduce_offline(
        args.out, agents=agents, num_tasks=args.num_tasks, seed=args.seed,
        base_model=args.base_model, threads=args.threads, batch_size=args.batch_size,
        include_base=not args.no_base, progress=not args.no_progress, budget=args.budget,
        until=args.until, parallel=args.parallel,
    )
    from lumos_gym.workflows.reproduce import render_report

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

    p = sub.add_parser("agents", help="list the agents")
    p.set_defaults(func=cmd_agents)

    p = sub.add_parser(
        "evaluate", help="run an agent on envs or a suite and print a summary table",
        description="Run an agent on envs or a suite. With no flag: lumos-i on the offline "
        "suite with SmolLM2-135M (hf backend, CPU).",
    )
    p.add_argument("--agent", default="lumos-i", help="agent name (lumos-gym agents)")
    p.add_argument("--env", action="append", default=[], help="env id, repeatable")
    p.add_argument("--suite", default=None,
                   help="suite name (lumos-gym suites) or suite .json file (default: offline)")
    p.add_argument("--limit", type=positive_int, default=None, help="at most N tasks per env")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (JSON value), repeatable")
    p.add_argument("--backend", default="hf", choices=["hf", "openai", "vllm"])
    p.add_argument("--model", default=None,
                   help="model of every role: hub id, local folder or 'smollm2-135m' (default)")
    p.add_argument("--planner", default=None,
                   help="the planner's model, or a LoRA folder from lumos-gym train")
    p.add_argument("--grounder", default=None,
                   help="the grounder's model, or a LoRA folder from lumos-gym train")
    p.add_argument("--adapter", action="append", default=[], metavar="[ROLE=]PATH",
                   help="peft adapter folder, for one role (planner=..., grounder=...) or all")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server (openai backend)")
    p.add_argument("--no-reference", action="store_true",
                   help="with no model named, run the untrained base model instead of the "
                   "shipped reference adapters (lumos-i)")
    p.add_argument("--batch-size", type=positive_int, default=8,
                   help="episodes in flight (batch size)")
    p.add_argument("--device", default=None, help="torch device (hf backend)")
    p.add_argument("--dtype", default=None, help="torch dtype (hf backend)")
    p.add_argument("--max-rounds", type=positive_int, default=None,
                   help="plan/ground rounds per episode (default: Lumos' limit per task type)")
    p.add_argument("--max-new-tokens", type=positive_int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None,
                   help="the seed of every episode and of the agent (default: the suite's, 0)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run shard I of N (round-robin over the sorted episode keys); join the "
                   "shards' --out folders with lumos-gym merge")
    p.add_argument("--wall-timeout", type=nonnegative_float, default=None,
                   help="seconds an episode may run; then it ends as step-limit")
    p.add_argument("--out", default=None, help="results folder (default: results/AGENT)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out (a killed one): only the episodes not "
                   "written yet are run; without it a folder holding episodes is refused")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run the episodes on Ray actors: this machine's Ray with no ADDRESS, "
                   "else a cluster (auto, ray://HOST:10001); needs lumos-gym[ray]")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="Ray actors (default: one per cluster CPU, or per --worker-gpus)")
    p.add_argument("--worker-gpus", type=nonnegative_float, default=0.0,
                   help="GPUs per Ray actor (each hf/vllm actor loads its own model copy)")
    p.add_argument("--keep-prompts", action="store_true", help="store prompts in the records")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("suites", help="list the evaluation suites, or show one")
    p.add_argument("name", nargs="?", default=None, help="a suite name or .json file")
    p.set_defaults(func=cmd_suites)

    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API")
    p.add_argument("--model", default="smollm2-135m",
                   help="hub id, local folder or 'smollm2-135m' (default)")
    p.add_argument("--adapter", default=None, help="peft adapter folder")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-context", type=int, default=None)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("convert", help="convert an env's rationales into verified annotations")
    p.add_argument("--env", required=True, help="env id whose tasks are converted")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (JSON value), e.g. split=train, source=PATH")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    p.add_argument("--llm", default=None, metavar="BACKEND:MODEL[@URL]",
                   help="rewrite rationales with a model (hf:..., openai:MODEL@URL, vllm:...)")
    p.add_argument("--no-verify", action="store_true", help="skip replay verification")
    p.add_argument("--out", required=True, help="JSONL file of kept annotations")
    p.add_argument("--rejected", default=None, help="JSONL of rejected items with reasons")
    p.add_argument("--batch-size", type=int, default=8)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("export", help="export annotations as training records")
    p.add_argument("inputs", nargs="+", help="annotation JSONL files")
    p.add_argument("--format", required=True,
                   help="plan-iterative, ground-iterative, plan-onetime, ground-onetime, "
                   "integrated, react, cot or direct")
    p.add_argument("--out", required=True, help="JSONL file of training records")
    p.add_argument("--dataset", default=None,
                   help="records' dataset name and id prefix ('unified' mixes domains)")
    p.add_argument("--hf-dir", default=None, help="also save a Hugging Face datasets folder")
    p.set_defaults(func=cmd_export)

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
    p.add_argument("--out", required=True, help="output folder (checkpoints, logs, result)")
    p.add_argument("--recipe", default=None, help="lumos-paper, cpu-small or gpu-small")
    p.add_argument("--lora", type=int, default=None, metavar="R", help="LoRA rank")
    p.add_argument("--full", action="store_true", help="train every weight (no LoRA)")
    p.add_argument("--lora-targets", default=None,
                   help="comma-separated module names, or all-linear (default)")
    p.add_argument("--init-adapter", default=None, help="continue training this LoRA adapter")
    p.add_argument("--epochs", type=float, default=None)
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (0: use epochs)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--max-length", type=int, default=None, help="tokens per record")
    p.add_argument("--batch-size", type=int, default=None, help="rows per device per pass")
    p.add_argument("--grad-accum", type=int, default=None)
    pack = p.add_mutually_exclusive_group()
    pack.add_argument("--pack", dest="pack", action="store_true", default=None,
                      help="pack records into max-length rows (no cross-record attention)")
    pack.add_argument("--no-pack", dest="pack", action="store_false",
                      help="length-grouped padded batches instead")
    p.add_argument("--precision", default=None, choices=["auto", "bf16", "fp16", "fp32"])
    p.add_argument("--eval-fraction", type=float, default=None, help="held-out share")
    p.add_argument("--eval-steps", type=int, default=None)
    p.add_argument("--save-steps", type=int, default=None)
    p.add_argument("--max-records", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--merge", action="store_true", help="also save a merged model (OUT/merged)")
    p.add_argument("--resume", action="store_true", help="continue from OUT's last checkpoint")
    p.add_argument("--device", default=None, help="auto, cpu or cuda")
    p.add_argument("--threads", type=int, default=None, help="CPU threads")
    p.add_argument("--report-to", default=None, choices=["tensorboard", "none"])
    p.set_defaults(func=cmd_train)

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

    p = sub.add_parser(
        "leaderboard", help="rank results folders (md, html, csv, png) or validate them",
        description="Rank runs by suite score with each env's primary metric and its 95% "
        "bootstrap interval, beside the Lumos paper's reported numbers. RESULTS are results "
        "folders (lumos-gym evaluate --out) or folders of them (results/<run>/<Env>/); folders "
        "with the same agent configuration form one run. --validate checks submissions "
        "instead: files present and readable, version, every planned episode once, the summary "
        "recomputed from the episodes, provenance; it prints one line per problem and exits 2 "
        "when there is any.",
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results folders")
    p.add_argument("--format", default="md", choices=["md", "html", "csv", "png"],
                   help="md (default), html (+ trajectory pages), csv, or png (needs the "
                   "leaderboard extra: matplotlib)")
    p.add_argument("--out", default=None, metavar="FILE_OR_DIR",
                   help="output file, or folder for leaderboard.<format> (md and csv print "
                   "without it)")
    p.add_argument("--suite", default=None,
                   help="columns: this suite's envs; with --validate: the suite the runs must be")
    p.add_argument("--validate", action="store_true",
                   help="check the results folders instead of rendering them")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser(
        "reproduce", help="build, train and score the reference agents (offline)",
        description="Build the offline splits, train each agent on the same mixture and budget, "
        "evaluate the untrained base and every trained agent on the offline test splits, and "
        "write OUT/report.md (per env and per level). Finished steps are skipped, so a killed "
        "run resumes.",
    )
    p.add_argument("what", choices=["offline"], help="offline: the default model, no download")
    p.add_argument("--out", default="runs/reference", help="output folder")
    p.add_argument("--agents", default="lumos-i",
                   help="comma-separated: lumos-i, lumos-o, integrated, react, cot, direct")
    p.add_argument("--num-tasks", type=positive_int, default=200,
                   help="data build size (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--base-model", default="smollm2-135m")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for training")
    p.add_argument("--batch-size", type=int, default=8, help="evaluation batch size")
    p.add_argument("--budget", default="cpu", choices=["cpu", "gpu"],
                   help="cpu: a 640-record mixture, 110 steps a model (about 25 min each on two "
                   "cores); gpu: every record, 3 epochs of the gpu-small recipe")
    p.add_argument("--until", default="report", choices=["data", "train", "report"],
                   help="data: stop after building the data; train: stop after training "
                   "(e.g. on a GPU machine without the envs)")
    p.add_argument("--parallel", type=int, default=1,
                   help="models trained at once, each in its own process")
    p.add_argument("--no-base", action="store_true", help="do not score the untrained base")
    p.add_argument("--ship", action="store_true",
                   help="copy the Lumos-I adapters and their card into the package")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_reproduce)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors of lumos-gym print one line and exit with status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # a log file sees each line as it comes, not at exit
        reconfigure(line_buffering=True)
    try:
        return int(args.func(args))
    except LumosGymError as e:
        print(f"lumos-gym {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lumos-gym {args.verb}: interrupted", file=sys.stderr)
        return 130

