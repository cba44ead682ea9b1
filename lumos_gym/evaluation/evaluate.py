"""``lumos-gym evaluate``: run an agent on envs or a suite and write its results.

A run is described by one :class:`RunConfig`; :func:`evaluate` carries it out in steps, each
in its own module: the suite (:mod:`.suites`), the episodes and the shard
(:func:`.plan.plan_episodes`), the model backends (:mod:`.backends`) or Ray actors
(:mod:`.distributed`), the batched :class:`~lumos_gym.agents.runner.Runner`, each finished
episode appended to ``episodes.jsonl`` (:class:`.output.ResultsFile`: one JSON line, flushed
and fsynced, so a killed run loses nothing and resumes where it stopped), then the summary
(:func:`.summary.summarize`: metrics per task type with standard errors and bootstrap
intervals, the suite score) written atomically into ``summary.json``. ``run.json`` and
``summary.json`` carry the provenance (:mod:`.provenance`), and the model calls the run sent,
their tokens, and what the request cache answered (:mod:`.usage`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Any

from lumos_gym.agents import make_agent
from lumos_gym.agents.base import Agent, AgentConfig
from lumos_gym.agents.runner import EpisodeRecord, EpisodeSpec, Runner
from lumos_gym.agents.tokens import TOKENS_FILE
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.backends import agent_backends
from lumos_gym.evaluation.distributed import RayPool
from lumos_gym.evaluation.folders import (
    LATEST,
    RESULTS_ROOT,
    default_out,
    follow_latest,
    point_latest,
    run_label,
)
from lumos_gym.evaluation.identity import adapter_weights, fingerprint
from lumos_gym.evaluation.output import (
    ResultsFile,
    TokensFile,
    check_existing,
    check_resumable,
)
from lumos_gym.evaluation.plan import EpisodePlan, parse_shard, plan_episodes
from lumos_gym.evaluation.provenance import model_args, provenance, run_leakage
from lumos_gym.evaluation.results import episode_key, episodes_path, is_infra_error
from lumos_gym.evaluation.suites import (  # noqa: F401  (load_suites: the cli's suites verb)
    DEFAULT_SUITE,
    Suite,
    get_suite,
    load_suites,
    suite_entries,
)
from lumos_gym.evaluation.summary import (  # noqa: F401  (mean_se: workflows.reproduce's)
    mean_se,
    provenance_for_summary,
    summarize,
)
from lumos_gym.evaluation.usage import (
    check_prices,
    counted_backends,
    open_cache,
    role_usage,
    usage_blocks,
    usage_line,
)
from lumos_gym.jsonl import folder_problem, write_json_atomic
from lumos_gym.models.base import Backend
from lumos_gym.models.caching import Usage
from lumos_gym.models.factory import BackendSet, ModelOptions


@dataclass(frozen=True)
class RunConfig:
    """Everything one :func:`evaluate` run takes; refused when made if it cannot run.

    Attributes:
        agent: an agent name (``lumos-i``, ``lumos-o``, ``integrated``, ``react``, ``cot``,
            ``direct``, ``oracle``, a plugin's), ``package.module:Class``,
            ``path/to/file.py:Class`` (:func:`~lumos_gym.agents.plugins.agent_class`), or an
            agent.
        envs: env ids (the ``lumos/`` prefix may be left out).
        suite: a suite name (``lumos-gym suites``) or suite file; ``offline`` when no env is
            named.
        limit: the most tasks per env (overrides the suite's).
        env_kwargs: constructor arguments for every env.
        models: how to build the backends (ignored when ``backends`` is given).
        backends: ready backends per role (they are not closed here; with ``ray`` they must
            pickle).
        agent_config: the agent's settings (when ``agent`` is a name).
        seed: the seed of every episode (default: the suite's seeds, else 0).
        shard: ``(i, n)`` or ``"i/n"``: run only shard i of n (:func:`.plan.shard_keys`:
            round-robin over the sorted episode keys); merge the shards' folders with
            :func:`.merge.merge_results`.
        out: the results folder; by default a new one per run,
            ``results/<agent>-<suite or envs>-<YYYYmmdd-HHMMSS>``, which ``results/latest`` then
            names (:mod:`.folders`).
        resume: continue the run whose episodes ``out`` already holds (only the episodes not
            there are run, and those there that ended in ``infra-error``, whose records are
            dropped from the file first; the configuration must match); with no ``out``, the
            run that ``results/latest`` names, if any. Without it, a folder holding episodes
            is refused.
        ray: run the episodes on Ray actors (:mod:`lumos_gym.evaluation.distributed`):
            ``True`` or ``"local"`` for this machine's Ray, else a cluster address (``auto``,
            ``ray://host:10001``).
        workers: Ray actors (default: one per CPU of the cluster, or per ``worker_gpus``).
        worker_gpus: GPUs reserved per Ray actor.
        max_invalid_actions: end an episode after this many invalid actions in a row.
        max_infra_retries: play an episode that ended in ``infra-error`` (a backend or env
            server failed, not the agent) again, up to this many more times, before recording
            it (:class:`~lumos_gym.agents.runner.Runner`).
        wall_timeout: seconds an episode may take.
        keep_prompts: store every prompt in the episode records.
        record_tokens: also write ``tokens.jsonl``: each module call's prompt and completion
            token ids and log-probabilities (:mod:`lumos_gym.agents.tokens`), for training on
            the episodes; ``episodes.jsonl`` is unchanged.
        cache: a folder of cached model answers (:mod:`lumos_gym.models.caching`): a request
            asked before of the same model (prompt or messages, stop strings, budget,
            temperature, seed) is answered from it and never sent, so a repeated or killed run
            does not pay twice; a sampled answer replays its first draw. Several processes
            (Ray workers, shards) may share it. Not with ``record_tokens`` (the cache keeps
            text only).
        prices: USD per million prompt and completion tokens: ``run.json`` then gives the
            cost of the tokens sent (and of those the cache saved).
        progress: show a progress bar.
        argv: the command line, recorded for provenance.
        provenance: more entries for ``run.json`` (and the summary's provenance), e.g. the
            leakage check of ``lumos-gym reproduce``; never part of the fingerprint. Without a
            ``leakage`` entry here, the run records its own
            (:func:`~.provenance.run_leakage`: its test tasks against the files its adapters
            were trained on, or ``{"status": "unknown", "reason": ...}``).

    Raises:
        EvaluationError: ``workers`` or ``worker_gpus`` without ``ray``; a ``limit`` or
            ``workers`` below 1; ``cache`` with ``record_tokens``; ``prices`` that are not two
            non-negative numbers.
    """

    agent: str | Agent
    _: KW_ONLY
    envs: Sequence[str] = ()
    suite: str | None = None
    limit: int | None = None
    env_kwargs: Mapping[str, Any] | None = None
    models: ModelOptions | None = None
    backends: Mapping[str, Backend] | None = None
    agent_config: AgentConfig | None = None
    seed: int | None = None
    shard: tuple[int, int] | str | None = None
    out: str | Path | None = None
    resume: bool = False
    ray: str | bool | None = None
    workers: int | None = None
    worker_gpus: float = 0.0
    max_invalid_actions: int = 5
    max_infra_retries: int = 2
    wall_timeout: float | None = None
    keep_prompts: bool = False
    record_tokens: bool = False
    cache: str | Path | None = None
    prices: tuple[float, float] | None = None
    progress: bool = True
    argv: Sequence[str] | None = None
    provenance: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.ray in (None, False) and (self.workers is not None or self.worker_gpus):
            raise EvaluationError("--workers and --worker-gpus need --ray")
        for name, value in (("--limit", self.limit), ("--workers", self.workers)):
            if value is not None and value < 1:
                raise EvaluationError(f"{name} must be at least 1, got {value}")
        if self.max_infra_retries < 0:
            raise EvaluationError(f"--infra-retries must be at least 0, got "
                                  f"{self.max_infra_retries}")
        if self.seed is not None and self.seed < 0:  # every episode would fail its reset
            raise EvaluationError(f"--seed must be at least 0, got {self.seed}")
        if self.cache is not None and self.record_tokens:
            raise EvaluationError("--cache keeps the text of answers, not their tokens; drop "
                                  "--cache or --record-tokens")
        object.__setattr__(self, "prices", check_prices(self.prices))

    def runner_settings(self) -> dict[str, Any]:
        """Return the :class:`~lumos_gym.agents.runner.Runner` settings of this run."""
        return {
            "max_in_flight": self.models.batch_size if self.models else 8,
            "max_invalid_actions": self.max_invalid_actions, "wall_timeout": self.wall_timeout,
            "keep_prompts": self.keep_prompts, "record_tokens": self.record_tokens,
            "max_infra_retries": self.max_infra_retries,
        }


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns."""

    out: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    resumed: int = 0
    usage: dict[str, Any] | None = None
    """``run.json``'s ``usage`` and ``cache`` blocks (None for an agent without models)."""


def evaluate(config: RunConfig) -> EvaluationResult:
    """Run ``config.agent`` on the episodes of its envs or suite; write the results to its out.

    The episodes ``out`` already holds are not run again (with ``resume``), except those that
    ended in ``infra-error`` (:func:`~lumos_gym.evaluation.results.is_infra_error`: a backend
    or env server failed), which are dropped from the file and played again; the summary
    covers every episode of the run (of its shard) that the folder then holds. When the
    episodes have run (or stopped on an error), ``run.json`` gets this session's model calls
    (:func:`.usage.usage_blocks`), and a line about them is printed.

    Raises:
        EvaluationError: an unknown agent or suite, envs that cannot be planned, a folder
            holding results of another run, or one that cannot be written.
    """
    if isinstance(config.agent, str):
        agent = make_agent(config.agent, config.agent_config)
    else:
        agent = config.agent
    shard = _shard(config.shard)
    chosen = None if config.envs else get_suite(config.suite or DEFAULT_SUITE)
    entries = suite_entries(envs=config.envs, suite=config.suite, limit=config.limit,
                            env_kwargs=config.env_kwargs)
    privileged = bool(getattr(agent, "needs_privileged_info", False))
    plan = plan_episodes(entries, seed=config.seed, privileged=privileged, shard=shard,
                         gold_plans=bool(getattr(agent, "needs_gold_plan", False)))
    out_dir, new_default = _out_dir(config, agent.name, chosen)
    problem = folder_problem(out_dir)
    if problem:  # before any model loads
        raise EvaluationError(f"cannot write the results to {out_dir}: {problem}")
    problem = folder_problem(config.cache) if config.cache is not None else None
    if problem:
        raise EvaluationError(f"cannot write the cache to {config.cache}: {problem}")
    results = ResultsFile(out_dir / "episodes.jsonl")
    tokens = TokensFile(out_dir / TOKENS_FILE) if config.record_tokens else None
    if results.done:
        check_existing(out_dir, results.done, plan.by_key, agent, config.resume)
    # episodes that ended in infra-error (the machinery failed) are played again
    again = [k for k in plan.selected if k in results.done and is_infra_error(results.done[k])]
    todo = [plan.by_key[k] for k in plan.selected if k not in results.done or k in again]
    resumed = len(plan.selected) - len(todo)
    with contextlib.closing(results), _closing(tokens), \
            _Executor(agent, config, len(todo)) as executor:
        extra = _extra_provenance(config, agent)
        if "leakage" not in extra:  # a caller's own check (reproduce's) is kept
            extra["leakage"] = run_leakage(executor.provenance, entries)
        run = _start_run(out_dir, executor, chosen, plan, extra)
        results.forget(again)  # once the folder is known to take this run: never a refused one
        if new_default:
            point_latest(out_dir)
        if resumed or again:
            retried = f"; {len(again)} that ended in infra-error run again" if again else ""
            print(f"resuming: {resumed} of {len(plan.selected)} episodes already in "
                  f"{results.path}{retried}")
        started = time.perf_counter()
        try:
            executor.run(todo, _recorder(results, plan.kinds(), plan.groups(), tokens),
                         progress=config.progress)
        except BaseException:
            if executor.pool is None:  # Ray actors may be busy with queued chunks: not asked
                with contextlib.suppress(Exception):  # a stopped run records what it sent
                    _record_usage(out_dir, run, executor, config)
            else:
                with contextlib.suppress(Exception):  # the driver's own record: no actor asked
                    _record_ray(out_dir, run, executor.pool)
            raise
        if executor.pool is not None:
            _record_ray(out_dir, run, executor.pool)
        usage = _record_usage(out_dir, run, executor, config)
        seconds = time.perf_counter() - started  # the episodes' time, models loaded before
    if usage is not None:
        print(usage_line(executor.usage, cache=config.cache is not None, prices=config.prices,
                         seconds=seconds))
    records = [results.done[k] for k in plan.selected if k in results.done]
    summary = summarize(records)
    summary["provenance"] = provenance_for_summary(run)
    write_json_atomic(out_dir / "summary.json", summary)
    return EvaluationResult(out_dir, summary, records, resumed, usage)


def _record_usage(
    out_dir: Path, run: dict[str, Any], executor: _Executor, config: RunConfig
) -> dict[str, Any] | None:
    """Add this session's ``usage`` (and ``cache``) blocks to ``run`` and ``run.json``.

    Returns the blocks, or None for an agent without models (``run`` is left as it is).
    """
    if not executor.collect_usage():
        return None
    blocks = usage_blocks(executor.usage, cache=config.cache, prices=config.prices)
    run.update(blocks)
    write_json_atomic(out_dir / "run.json", run)
    return blocks


def _record_ray(out_dir: Path, run: dict[str, Any], pool: RayPool) -> None:
    """Add what the Ray workers did to ``run``'s ``ray`` block, and write ``run.json``.

    That is, the episodes each node ran and the chunks sent again after a node was lost
    (:meth:`.distributed.RayPool.report`).
    """
    run["ray"] = {**run.get("ray", {}), **pool.report()}
    write_json_atomic(out_dir / "run.json", run)


def _extra_provenance(config: RunConfig, agent: Agent) -> dict[str, Any]:
    """The run config's ``provenance``, and the backend options when backends are built here."""
    extra = dict(config.provenance or {})
    if config.models is not None and config.backends is None and agent.roles:
        extra["model_args"] = model_args(config.models.options)
    return extra


def _out_dir(config: RunConfig, agent: str, chosen: Suite | None) -> tuple[Path, bool]:
    """The run's results folder, and whether it is a new default one (``latest`` then names it).

    ``out`` when given; else, to resume, the folder ``results/latest`` names (when there is
    none, nothing is lost: the run starts afresh); else a new :func:`~.folders.default_out`
    folder.
    """
    if config.out is not None:
        return Path(config.out), False
    pointer = RESULTS_ROOT / LATEST
    if config.resume and pointer.exists():
        folder = follow_latest(pointer)
        print(f"resuming {folder} ({pointer})")
        return folder, False
    label = run_label(chosen.name if chosen else None, config.envs)
    return default_out(agent, label), True


def _shard(shard: tuple[int, int] | str | None) -> tuple[int, int] | None:
    """Return ``shard`` as a checked ``(i, n)``, or None for the whole run."""
    if isinstance(shard, str):
        return parse_shard(shard)
    if shard is not None:
        return parse_shard(f"{shard[0]}/{shard[1]}")
    return None


class _Executor:
    """Where a run's episodes run: this process, with its backends, or Ray actors (``ray``).

    Made before any episode runs, it knows the run's fingerprint and provenance (a Ray
    run's come from its first worker). Every role's backend is wrapped to count its model
    calls and, with the run's ``cache``, to answer repeated ones (:mod:`.usage`; in each Ray
    worker too). Closing it closes the backends built here (never those given) or ends the
    actors.
    """

    def __init__(self, agent: Agent, config: RunConfig, episodes: int) -> None:
        self.agent = agent
        self.settings = config.runner_settings()
        self.pool: RayPool | None = None
        self.built = BackendSet()
        self.own = config.backends is None
        self.usage: dict[str, Usage] = {}
        self.has_models = bool(agent.roles) or bool(config.backends)
        try:
            if config.ray not in (None, False):
                self.pool = RayPool(
                    agent, models=config.models or ModelOptions(), backends=config.backends,
                    runner=self.settings,
                    address=None if config.ray is True else str(config.ray),
                    workers=config.workers, worker_gpus=config.worker_gpus,
                    max_workers=max(1, episodes), cache=config.cache,
                )
                described = self.pool.describe(config.argv)
                self.fingerprint = described["fingerprint"]
                self.provenance = described["provenance"]
            else:
                self.built = counted_backends(
                    agent_backends(agent, config.models or ModelOptions(), config.backends),
                    open_cache(config.cache),
                )
                self.fingerprint = fingerprint(agent, self.built)
                self.provenance = provenance(agent, self.built, config.argv)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> _Executor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(
        self, specs: Sequence[EpisodeSpec], on_record: Callable[[EpisodeRecord], None], *,
        progress: bool,
    ) -> None:
        """Run ``specs``, handing each finished episode's record to ``on_record``."""
        if self.pool is not None:
            self.pool.run(specs, chunk=self.settings["max_in_flight"], on_record=on_record,
                          progress=progress)
        else:
            Runner(self.agent, self.built, **self.settings).run(
                specs, on_record=on_record, progress=progress
            )

    def collect_usage(self) -> bool:
        """Gather the model calls so far into :attr:`usage`; False when no role has a model."""
        if self.pool is None:
            self.usage = {role: replace(counts) for role, counts in role_usage(self.built).items()}
            return bool(self.built)
        if self.has_models:
            self.usage = self.pool.usage()
        return self.has_models

    def close(self) -> None:
        """End the Ray actors, and close the backends built here."""
        if self.pool is not None:
            self.pool.close()
        if self.own:
            self.built.close()


def _start_run(
    out_dir: Path, executor: _Executor, chosen: Suite | None, plan: EpisodePlan,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Check that ``out_dir`` may take this run, write its ``run.json``, and return it.

    ``extra`` entries (the run config's ``provenance``) are added to ``run.json`` first, so
    they never replace what the run itself records. A resumed run (episodes already there)
    records this session's code and start at the top and keeps each earlier session's under
    ``sessions`` (start, commit, version, command line), so the file still says which code
    wrote the episodes that were there.
    """
    envs = [p.provenance for p in plan.envs]
    check_resumable(out_dir, executor.fingerprint, plan.shard,
                    adapter_weights(executor.provenance), envs)
    run = {**dict(extra or {}), **executor.provenance}
    earlier = _earlier_sessions(out_dir)
    if earlier:
        run["sessions"] = earlier
    run["suite"] = (
        {"name": chosen.name, "file": chosen.path, "sha256": chosen.sha256} if chosen else None
    )
    run["envs"] = envs
    run["plan"] = plan.describe()
    run["fingerprint"] = executor.fingerprint
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "run.json", run)
    return run


def _earlier_sessions(out_dir: Path) -> list[dict[str, Any]]:
    """The sessions of the run ``out_dir`` holds episodes of, oldest first (none: a new run)."""
    episodes = episodes_path(out_dir)
    if episodes is None or episodes.stat().st_size == 0:
        return []
    try:
        previous = json.loads((out_dir / "run.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(previous, dict):
        return []
    sessions = [s for s in previous.get("sessions") or [] if isinstance(s, dict)]
    session = {k: previous.get(k) for k in ("started", "git", "lumos_gym", "argv")}
    for block in ("usage", "cache"):  # a session stopped before its end recorded none
        if block in previous:
            session[block] = previous[block]
    sessions.append(session)
    return sessions


def _closing(file: TokensFile | None) -> contextlib.AbstractContextManager[Any]:
    return contextlib.closing(file) if file is not None else contextlib.nullcontext()


def _recorder(
    results: ResultsFile, kinds: Mapping[str, tuple[Any, Any]],
    groups: Mapping[str, Mapping[str, str]] | None = None,
    tokens: TokensFile | None = None,
) -> Callable[[EpisodeRecord], None]:
    """Return the callback that appends each finished episode to ``results``, with its key.

    Episodes of an env whose tasks have levels or families (``groups``: env id → task id →
    group) also get their task's ``group``, which the summary tables by. With ``tokens``, an
    episode's call entries go there first, so every episode in ``results`` has its tokens.
    """

    def on_record(record: EpisodeRecord) -> None:
        key = episode_key(record.env_id, record.env_kwargs, record.task_id, record.seed)
        if tokens is not None:
            tokens.append({"key": key, "calls": record.tokens or []})
        task_type, primary = kinds.get(record.env_id, (None, None))
        row = {"key": key, **record.to_dict(), "task_type": task_type,
               "primary_metric": primary}
        group = (groups or {}).get(record.env_id, {}).get(record.task_id)
        if group is not None:
            row["group"] = group
        results.append(row)

    return on_record
