"""``lumos-gym evaluate``: run an agent on envs or a suite and print the summary (table or JSON)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from lumos_gym.agents.base import FILE_MODULE_PREFIX, AgentConfig
from lumos_gym.agents.plugins import SPEC_HELP, agent_class
from lumos_gym.cli.args import (
    add_format,
    base_url,
    nonnegative_float,
    nonnegative_int,
    out_path,
    parse_kwargs,
    parse_model_args,
    positive_int,
    print_json,
    temperature,
)
from lumos_gym.envs import load_plugins
from lumos_gym.errors import AgentLoadError, ModelSpecError
from lumos_gym.evaluation.evaluate import EvaluationResult, RunConfig, evaluate
from lumos_gym.evaluation.summary import format_table
from lumos_gym.models.factory import ModelOptions, check_backend_options, default_backend


def add_evaluate(sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` verb."""
    p = sub.add_parser(
        "evaluate", help="run an agent on envs or a suite and print a summary table",
        description="Run an agent on envs or a suite. With no flag: lumos-i on the offline "
        "suite with SmolLM2-135M and its shipped adapters (the openvino backend on a CPU where "
        "it is installed, else hf).",
    )
    _add_task_flags(p)
    _add_model_flags(p)
    _add_run_flags(p)
    p.set_defaults(func=cmd_evaluate)


def _add_task_flags(p: argparse.ArgumentParser) -> None:
    """The agent and what it runs on."""
    p.add_argument("--agent", default="lumos-i", help=f"{SPEC_HELP} (default: lumos-i)")
    p.add_argument("--env", action="extend", nargs="+", default=[], metavar="ID",
                   help="env ids, one or more (--env A B), repeatable (--env A --env B)")
    p.add_argument("--suite", default=None,
                   help="suite name (lumos-gym suites) or suite .json file (default: offline)")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="at most N tasks per env, at least 1")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (JSON value), repeatable")


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """The models of the agent's roles, and how they run."""
    p.add_argument("--backend", default=None, choices=["hf", "openvino", "openai", "vllm"],
                   help="openvino: OpenVINO GenAI on the CPU (the openvino extra; the default "
                   "where it is installed and there is no GPU, or $LUMOS_GYM_BACKEND); hf: "
                   "transformers in this process (the default elsewhere); openai: a server; "
                   "vllm: a GPU engine")
    p.add_argument("--model", default=None,
                   help="model of every role: hub id, local folder or 'smollm2-135m' (default)")
    p.add_argument("--planner", default=None,
                   help="the planner's model, or a LoRA folder from lumos-gym train")
    p.add_argument("--grounder", default=None,
                   help="the grounder's model, or a LoRA folder from lumos-gym train")
    p.add_argument("--adapter", action="append", default=[], metavar="[ROLE=]PATH",
                   help="peft adapter folder, for one role (planner=..., grounder=...) or all")
    p.add_argument("--base-url", type=base_url, default=None,
                   help="OpenAI-compatible server, http://HOST:PORT[/v1] (openai backend)")
    p.add_argument("--no-reference", action="store_true",
                   help="with no model named, run the untrained base model instead of the "
                   "shipped reference adapters (lumos-i)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="episodes in flight (batch size), at least 1 (32 by default: the demo's "
                   "episodes were the same at 8, 16 and 32, and 32 was the fastest)")
    p.add_argument("--device", default=None, help="torch device (hf) or OpenVINO device (openvino)")
    p.add_argument("--dtype", default=None,
                   help="torch dtype (hf, vllm), or the precision of the openvino backend "
                   "(f32, bf16)")
    p.add_argument("--model-args", action="append", default=[], metavar="KEY=VALUE,...",
                   help="backend constructor arguments, e.g. timeout=120,max_retries=2,"
                   "mode=chat (openai; mode: auto, chat or completions), and for openai each "
                   "role's served model: planner=NAME,grounder=NAME,policy=NAME (default for "
                   "an agent with shipped adapters: AGENT-ROLE, as `lumos-gym serve --agent` "
                   "names them); max_context=4096 (hf, openvino), threads=4 (openvino); values "
                   "are JSON when they parse, else text; an unknown key is refused with the "
                   "backend's keys; recorded in run.json")
    p.add_argument("--max-rounds", type=positive_int, default=None,
                   help="plan/ground rounds per episode, at least 1 (default: Lumos' limit per "
                   "task type or dataset)")
    p.add_argument("--max-new-tokens", type=positive_int, default=128,
                   help="tokens a completion may have, at least 1 (default 128)")
    p.add_argument("--temperature", type=temperature, default=0.0,
                   help="sampling temperature, at least 0 (default 0: greedy)")
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="the seed of every episode and of the agent, at least 0 (default: the "
                   "suite's, 0)")


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """Sharding, output, resuming and the Ray workers."""
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run shard I of N (round-robin over the sorted episode keys); join the "
                   "shards' --out folders with lumos-gym merge")
    p.add_argument("--wall-timeout", type=nonnegative_float, default=None,
                   help="seconds an episode may run, at least 0; then it ends as step-limit")
    p.add_argument("--infra-retries", type=nonnegative_int, default=2, metavar="N",
                   help="play an episode that ended in infra-error (the backend or env server "
                   "failed: an engine that dropped the request, a server that timed out "
                   "through its retries, not the agent) again from the start, up to N more "
                   "times, at least 0 (default 2; 0: record it at once); --resume plays those "
                   "left again")
    p.add_argument("--out", type=out_path, default=None,
                   help="results folder (default: a new results/AGENT-SUITE-YYYYmmdd-HHMMSS "
                   "per run, which results/latest then names)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out (a killed one), or with no --out the one "
                   "results/latest names (if any): only the episodes not written yet are run, "
                   "and those that ended in infra-error; without it a folder holding episodes "
                   "is refused")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run the episodes on Ray actors: this machine's Ray with no ADDRESS, "
                   "else a cluster (auto, ray://HOST:10001); needs lumos-gym[ray]")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="Ray actors, at least 1 (default: one per cluster CPU, or per "
                   "--worker-gpus)")
    p.add_argument("--worker-gpus", type=nonnegative_float, default=0.0,
                   help="GPUs per Ray actor, at least 0 (each hf/vllm actor loads its own model "
                   "copy)")
    p.add_argument("--keep-prompts", action="store_true", help="store prompts in the records")
    p.add_argument("--record-tokens", action="store_true",
                   help="also write tokens.jsonl: each model call's prompt and completion token "
                   "ids and log-probabilities (hf, openvino; a server that returns them)")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="answer a model request asked before (same model, prompt, stop "
                   "strings, budget, temperature and seed) from the cache in DIR, and add each "
                   "new answer to it: a repeated or killed API run never pays twice (a sampled "
                   "answer replays its first draw); processes may share DIR; hits and tokens "
                   "saved go in run.json; not with --record-tokens")
    p.add_argument("--prices", type=price_pair, default=None, metavar="IN,OUT",
                   help="USD per million prompt and completion tokens: run.json's usage then "
                   "gives the cost (and the cache's saving)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_format(p, "the summary (the progress stays on stderr)")


def price_pair(text: str) -> tuple[float, float]:
    """Parse ``--prices IN,OUT``: two non-negative numbers (USD per million tokens).

    Raises:
        argparse.ArgumentTypeError: not two numbers, or a negative or infinite one.
    """
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        values = (float(parts[0]), float(parts[1]))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected IN,OUT: two numbers (USD per million prompt and completion tokens), "
            f"got {text!r}") from None
    if not all(0 <= v < float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"prices must be non-negative numbers, got {text!r}")
    return values


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run an agent on envs or a suite, write the results and print the summary (or its JSON)."""
    load_plugins()
    check_agent(args.agent, agent_config(args))
    as_json = args.format == "json"
    # with --format json, stdout holds the summary alone: what the run prints goes to stderr
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        result = run_evaluate(args, model_options(args), agent_config(args))
    written = f"results: {result.out / 'episodes.jsonl'}, {result.out / 'summary.json'}"
    if as_json:
        print_json(result.summary)
        print(written, file=sys.stderr)
    else:
        print(format_table(result.summary))
        print(written)
    return 0


def check_agent(spec: str, config: AgentConfig) -> None:
    """Load the agent ``spec`` names, and make one when it is the user's own (``file.py:Class``).

    Whatever goes wrong becomes one error line, before any env or model loads: a file or
    module that fails to import, one that exits (``SystemExit``, even with status 0) while
    it is imported, and a constructor that raises.

    Raises:
        AgentLoadError: the agent cannot be loaded or made.
    """
    before = set(sys.modules)
    try:
        cls = agent_class(spec)
    except SystemExit as e:
        for name in set(sys.modules) - before:  # the module that exited half-imported
            if name.startswith(FILE_MODULE_PREFIX):
                del sys.modules[name]
        raise AgentLoadError(f"importing {spec} failed: it exited (SystemExit: {e.code})"
                             ) from None
    if ":" not in spec:
        return  # a registered agent: its constructor is lumos-gym's (or its plugin's) own
    try:
        cls(config)
    except (Exception, SystemExit) as e:
        raise AgentLoadError(f"{spec}: making the agent failed: {type(e).__name__}: {e}"
                             ) from None


def role_paths(pairs: Sequence[str]) -> dict[str, str]:
    """Parse ``--adapter`` values: ``ROLE=PATH`` for one role, a bare ``PATH`` for every role."""
    adapters: dict[str, str] = {}
    for pair in pairs:
        role, sep, path = pair.partition("=")
        if sep and role in ("planner", "grounder", "policy", "*"):
            adapters[role] = path
        else:
            adapters["*"] = pair
    return adapters


def model_options(args: argparse.Namespace) -> ModelOptions:
    """The models of the run, from the model flags.

    Raises:
        ModelSpecError: ``--model-args`` that the backend does not take, that repeat
            ``--device`` or ``--dtype``, or that hold an API key.
    """
    backend = args.backend or default_backend()
    options: dict[str, Any] = {}
    if args.device:
        options["device"] = args.device
    if args.dtype:
        options["dtype"] = args.dtype
    given = parse_model_args(args.model_args)
    served = served_role_models(backend, given)
    if "api_key" in given:
        raise ModelSpecError("--model-args: give api_key_env=VARIABLE (the environment variable "
                             "that holds the key), not the key: the command line is recorded")
    twice = sorted(set(given) & set(options))
    if twice:
        raise ModelSpecError(f"--model-args: {twice[0]} is given by --{twice[0]} too; give it "
                             "once")
    if given:
        check_backend_options(backend, given)  # before any env or model loads
    options.update(given)
    return ModelOptions(
        backend=backend, model=args.model or served.get("policy"),
        planner=args.planner or served.get("planner"),
        grounder=args.grounder or served.get("grounder"),
        adapters=role_paths(args.adapter), base_url=args.base_url,
        batch_size=args.batch_size, options=options, reference=not args.no_reference,
    )


def served_role_models(backend: str, given: dict[str, Any]) -> dict[str, str]:
    """Take the roles' served model names out of ``--model-args`` (the ``openai`` backend).

    ``--model-args planner=NAME,grounder=NAME`` (and ``policy=NAME``) name the model each role
    asks the server for, as ``--planner``/``--grounder``/``--model`` do; the flags win.

    Raises:
        ModelSpecError: a role name given to another backend (it has --planner/--grounder).
    """
    roles = [key for key in ROLE_KEYS if key in given]
    if roles and backend != "openai":
        flag = "--model" if roles[0] == "policy" else f"--{roles[0]}"
        raise ModelSpecError(f"--model-args {roles[0]}=...: a role's served model name is for "
                             f"--backend openai; give {flag} instead")
    return {key: str(given.pop(key)) for key in roles}


ROLE_KEYS = ("planner", "grounder", "policy")
"""The roles whose served model ``--model-args`` may name (``openai`` backend)."""


def agent_config(args: argparse.Namespace) -> AgentConfig:
    """The agent's rounds, decoding and seed, from the flags."""
    return AgentConfig(
        max_rounds=args.max_rounds, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, seed=args.seed if args.seed is not None else 0,
    )


def run_evaluate(
    args: argparse.Namespace, models: ModelOptions, config: AgentConfig
) -> EvaluationResult:
    """The one call of :func:`~lumos_gym.evaluation.evaluate.evaluate` for these flags."""
    return evaluate(RunConfig(
        args.agent, envs=args.env, suite=args.suite, limit=args.limit,
        env_kwargs=parse_kwargs(args.kwarg), models=models, agent_config=config,
        seed=args.seed, shard=args.shard, out=args.out, resume=args.resume, ray=args.ray,
        workers=args.workers, worker_gpus=args.worker_gpus, wall_timeout=args.wall_timeout,
        max_infra_retries=args.infra_retries,
        keep_prompts=args.keep_prompts, record_tokens=args.record_tokens,
        cache=args.cache, prices=args.prices,
        progress=not args.no_progress, argv=sys.argv[1:],
    ))
