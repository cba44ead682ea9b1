"""``lumos-gym evaluate``: run an agent on envs or a suite and write its results.

The steps, each a small function: resolve the episodes (:func:`episode_specs`), build the
model backends (:func:`build_backends`), run them with the batched
:class:`~lumos_gym.agents.runner.Runner`, append each finished episode to ``episodes.jsonl``
(one JSON line, flushed and fsynced, so a killed run loses nothing and resumes where it
stopped), then summarise (:func:`summarize`: mean ± standard error per env and overall) into
``summary.json`` (written atomically) and a printed table.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium as gym

from lumos_gym.agents import make_agent
from lumos_gym.agents.backends import BACKENDS
from lumos_gym.agents.backends.base import Backend
from lumos_gym.agents.base import Agent, AgentConfig
from lumos_gym.agents.runner import STATUSES, EpisodeRecord, EpisodeSpec, Runner
from lumos_gym.errors import LumosGymError
from lumos_gym.jsonl import append_jsonl, drop_partial_line, write_json_atomic
from lumos_gym.text import table

#: The default model of each backend (None: the user must name one).
DEFAULT_MODELS: dict[str, str | None] = {"hf": "smollm2-135m", "openai": None, "vllm": None}


@dataclass(frozen=True)
class SuiteEntry:
    """One env of a suite: its id, constructor arguments and how many tasks to run."""

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    limit: int | None = None


#: Named suites. ``default`` holds one offline env per task type that exists so far; it grows
#: as env families land, and stays small enough to finish in minutes on two CPU cores.
SUITES: dict[str, tuple[SuiteEntry, ...]] = {
    "default": (
        SuiteEntry("lumos/GSM8K-v0"),
        SuiteEntry("lumos/WorldQA-v0", {"num_tasks": 3}),
        SuiteEntry("lumos/MBPP-v0"),
        SuiteEntry("lumos/WebShop-v0", {"num_tasks": 8}),
        SuiteEntry("lumos/Mind2Web-v0", {"task_page": False}, limit=8),
        SuiteEntry("lumos/Scenes-v0", {"split": "test", "num_tasks": 1}),
        SuiteEntry("lumos/TextWorld-v0", {"num_games": 4}),
    ),
    "qa": (
        SuiteEntry("lumos/WorldQA-v0"),
        SuiteEntry("lumos/HotpotQA-v0"),
        SuiteEntry("lumos/StrategyQA-v0"),
        SuiteEntry("lumos/MuSiQue-v0"),
        SuiteEntry("lumos/2WikiMultihopQA-v0"),
        SuiteEntry("lumos/Bamboogle-v0"),
    ),
    "code": (SuiteEntry("lumos/HumanEval-v0"), SuiteEntry("lumos/MBPP-v0")),
    "web": (SuiteEntry("lumos/WebShop-v0"), SuiteEntry("lumos/Mind2Web-v0", {"task_page": False})),
    "games": (
        SuiteEntry("lumos/TextWorld-v0", {"num_games": 4}),
        SuiteEntry("lumos/ALFWorld-v0", {"num_tasks": 1}),
        SuiteEntry("lumos/TextWorldExpress-v0", {"num_tasks": 1}),
    ),
    "multimodal": (SuiteEntry("lumos/Scenes-v0", {"split": "test", "num_tasks": 1}),),
    "math": (
        SuiteEntry("lumos/GSM8K-v0"),
        SuiteEntry("lumos/SVAMP-v0"),
        SuiteEntry("lumos/ASDiv-v0"),
        SuiteEntry("lumos/MathWord-v0"),
    ),
}


class EvaluationError(LumosGymError):
    """The evaluation cannot start: a bad suite, env, model or results folder."""


# ------------------------------------------------------------------------------ episodes
def suite_entries(
    *, envs: Sequence[str] = (), suite: str | None = None, limit: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[SuiteEntry]:
    """Return the envs to run: the named ones, else the suite's (``default`` when neither)."""
    from lumos_gym.envs.registration import resolve_env_id

    if envs and suite:
        raise EvaluationError("give --env or --suite, not both")
    if envs:
        entries = [SuiteEntry(resolve_env_id(e)) for e in envs]
    else:
        name = suite or "default"
        if name not in SUITES:
            raise EvaluationError(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
        entries = list(SUITES[name])
    extra = dict(env_kwargs or {})
    return [
        SuiteEntry(e.env_id, {**e.kwargs, **extra}, limit if limit is not None else e.limit)
        for e in entries
    ]


def episode_specs(
    entries: Iterable[SuiteEntry], *, seed: int = 0, privileged: bool = False
) -> list[EpisodeSpec]:
    """Return one episode per task of each entry (the first ``limit`` tasks, in file order).

    With ``privileged`` (the oracle agent), envs are built with their ``replay_options``.
    """
    specs: list[EpisodeSpec] = []
    for entry in entries:
        kwargs = dict(entry.kwargs)
        try:
            env = gym.make(entry.env_id, **kwargs)
        except LumosGymError:
            raise
        except Exception as e:
            raise EvaluationError(f"cannot make {entry.env_id} with {kwargs}: {e}") from e
        try:
            task_ids = env.unwrapped.task_ids()
            replay_options = dict(getattr(env.unwrapped, "replay_options", {}))
        finally:
            env.close()
        if privileged:
            # an agent that reads gold trajectories replays them as the env's checks do
            # (reference backends for model-backed tools), so it needs no model
            kwargs.update({"privileged": True, **replay_options})
        for task_id in task_ids[: entry.limit]:
            specs.append(EpisodeSpec(entry.env_id, task_id, kwargs, seed))
    return specs


# ------------------------------------------------------------------------------ backends
@dataclass
class ModelOptions:
    """How to build the agent's models.

    Attributes:
        backend: ``hf``, ``openai`` or ``vllm``.
        model: the model of every role (a hub id, a local folder, ``smollm2-135m``, or the
            served name for ``openai``); the backend's default when None.
        planner: the planner's model, overriding ``model``.
        grounder: the grounder's model, overriding ``model``.
        adapters: role → peft adapter folder; the role ``*`` applies to every role.
        base_url: the server of the ``openai`` backend.
        batch_size: the most requests one backend call completes at once (``hf``/``vllm``) or
            keeps in flight (``openai``).
        options: further backend constructor arguments (``device``, ``dtype``...).
        reference: use the reference adapters shipped for the agent (see
            :mod:`lumos_gym.agents.reference`) when no model, role model or adapter is named.
    """

    backend: str = "hf"
    model: str | None = None
    planner: str | None = None
    grounder: str | None = None
    adapters: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    batch_size: int = 8
    options: dict[str, Any] = field(default_factory=dict)
    reference: bool = True

    def names_a_model(self) -> bool:
        """Whether the user named any model or adapter (then no reference adapter applies)."""
        return bool(self.model or self.planner or self.grounder or self.adapters)

    def model_for(self, role: str) -> str:
        """Return the model name of ``role``."""
        named = {"planner": self.planner, "grounder": self.grounder}.get(role)
        chosen = named or self.model or DEFAULT_MODELS.get(self.backend)
        if not chosen:
            raise EvaluationError(f"the {self.backend} backend needs --model (or --{role})")
        return chosen

    def adapter_for(self, role: str) -> str | None:
        """Return the adapter of ``role``, if any."""
        return self.adapters.get(role) or self.adapters.get("*")


def _base_backend(options: ModelOptions, model: str, adapters: dict[str, str]) -> Backend:
    cls = BACKENDS.get(options.backend)
    kwargs = dict(options.options)
    if options.backend == "openai":
        if adapters:
            raise EvaluationError(
                "the openai backend cannot apply adapters; serve the adapted model instead "
                "(lumos-gym serve --model BASE --adapter PATH)"
            )
        if not options.base_url:
            raise EvaluationError("the openai backend needs --base-url")
        return cls(model, base_url=options.base_url, max_concurrency=options.batch_size, **kwargs)
    if options.backend == "hf":
        return cls(model, adapters=adapters or None, batch_size=options.batch_size, **kwargs)
    return cls(model, adapters=adapters or None, **kwargs)


class BackendSet(dict):
    """Role → backend, plus the loaded backends that adapter views share.

    ``close()`` closes every backend once, the shared ones included (a view's own ``close``
    leaves the weights it borrows alone).
    """

    def __init__(self) -> None:
        super().__init__()
        self.owned: list[Backend] = []

    def close(self) -> None:
        """Close every distinct backend once."""
        seen: set[int] = set()
        for backend in [*self.values(), *self.owned]:
            if id(backend) not in seen:
                seen.add(id(backend))
                backend.close()


def role_model(options: ModelOptions, role: str) -> tuple[str, str | None]:
    """The model and adapter of ``role``; a LoRA output folder stands for its base + itself.

    Raises:
        EvaluationError: an adapter folder given both as the role's model and as ``--adapter``.
    """
    model, adapter = options.model_for(role), options.adapter_for(role)
    if options.backend in ("hf", "vllm"):
        from lumos_gym.agents.backends.hf import split_model_name

        base, folder = split_model_name(model)
        if folder is not None:
            if adapter:
                raise EvaluationError(
                    f"{model!r} is an adapter folder (its base is {base!r}); give it as the "
                    f"{role}'s model or as --adapter, not both"
                )
            return base, folder
    return model, adapter


def with_reference(agent_name: str, options: ModelOptions) -> ModelOptions:
    """``options`` with the agent's shipped reference adapters when nothing else is named."""
    from lumos_gym.agents.reference import reference_models

    if not options.reference or options.backend != "hf" or options.names_a_model():
        return options
    models = reference_models(agent_name)
    if not models:
        return options
    return replace(options, planner=models.get("planner"),
                               grounder=models.get("grounder"))  # fmt: skip


def build_backends(roles: Sequence[str], options: ModelOptions) -> BackendSet:
    """Build one backend per distinct model and map each role to it (or to an adapter view).

    Roles that use the same model without adapters share one backend object, so the runner
    batches their requests together. Fails fast (before any episode) on a bad model name,
    a missing adapter or an unreachable server.
    """
    by_model: dict[str, list[str]] = {}
    role_adapters: dict[str, str] = {}
    for role in roles:
        model, adapter = role_model(options, role)
        by_model.setdefault(model, []).append(role)
        if adapter:
            role_adapters[role] = adapter
    backends = BackendSet()
    try:
        for model, model_roles in by_model.items():
            adapters = {r: role_adapters[r] for r in model_roles if r in role_adapters}
            base = _base_backend(options, model, adapters)
            backends.owned.append(base)
            for role in model_roles:
                if not adapters:
                    backends[role] = base
                else:  # hf and vllm give views that share the loaded weights
                    name = role if role in adapters else None
                    backends[role] = base.with_adapter(name)  # type: ignore[attr-defined]
    except BaseException:
        backends.close()
        raise
    return backends


# ------------------------------------------------------------------------------- results
class ResultsFile:
    """An append-only JSONL file of episode records that survives a kill.

    Each record is one line, flushed and fsynced. On opening, a torn last line is cut off and
    the complete lines are read back (their keys say which episodes are done); any other
    unreadable line is an error, never silently dropped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        drop_partial_line(path)
        if path.exists():
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    try:
                        record = json.loads(line)
                        self.done[record["key"]] = record
                    except (ValueError, KeyError, TypeError) as e:
                        raise EvaluationError(
                            f"{path}:{n} is not an episode record ({e}); move the file away "
                            "or pass another --out"
                        ) from None
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record durably."""
        append_jsonl(self._file, record)
        self.done[record["key"]] = dict(record)

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Return the mean and its standard error (sample standard deviation / sqrt(n))."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def _group_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    mean, se = mean_se([float(r.get("reward", 0.0)) for r in records])
    statuses = {s: 0 for s in STATUSES}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "episodes": len(records),
        "mean": mean,
        "se": se,
        "statuses": statuses,
        "input_tokens": sum(int(r.get("input_tokens", 0)) for r in records),
        "output_tokens": sum(int(r.get("output_tokens", 0)) for r in records),
        "wall_s": round(sum(float(r.get("wall_s", 0.0)) for r in records), 3),
    }


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the summary: per env and overall, mean ± SE of the reward and status counts."""
    by_env: dict[str, list[Mapping[str, Any]]] = {}
    everything: list[Mapping[str, Any]] = []
    for record in records:
        by_env.setdefault(record["env_id"], []).append(record)
        everything.append(record)
    return {
        "envs": {env_id: _group_summary(rs) for env_id, rs in sorted(by_env.items())},
        "overall": _group_summary(everything),
    }


def format_table(summary: Mapping[str, Any]) -> str:
    """Render a summary as a plain-text table."""
    headers = ["env", "episodes", "score", "completed", "other statuses", "tokens in/out"]
    rows = []
    for name, group in [*summary["envs"].items(), ("overall", summary["overall"])]:
        others = ", ".join(
            f"{status} {count}"
            for status, count in group["statuses"].items()
            if count and status != "completed"
        )
        rows.append([
            name, str(group["episodes"]), f"{group['mean']:.3f} ± {group['se']:.3f}",
            str(group["statuses"].get("completed", 0)), others or "-",
            f"{group['input_tokens']}/{group['output_tokens']}",
        ])  # fmt: skip
    return table(headers, rows)


# ------------------------------------------------------------------------------ the run
@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns."""

    out: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    resumed: int = 0


def fingerprint(agent: Agent, backends: Mapping[str, Backend]) -> dict[str, Any]:
    """Return what must match for a run to resume another: the agent and each role's model."""
    models = {}
    for role, backend in sorted(backends.items()):
        info = backend.info()
        models[role] = [info.backend, info.model_id, info.details.get("adapter")]
    return json.loads(json.dumps({"agent": agent.describe(), "models": models}, default=str))


def check_resumable(out_dir: Path, expected: Mapping[str, Any]) -> None:
    """Refuse to append to results made with another agent or model configuration."""
    path = out_dir / "run.json"
    if not path.exists() or not (out_dir / "episodes.jsonl").exists():
        return
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("fingerprint")
    except ValueError:
        recorded = None
    if recorded is not None and recorded != expected:
        raise EvaluationError(
            f"{out_dir} holds results of another configuration (recorded {recorded}, now "
            f"{dict(expected)}); pass another --out, or delete the folder to start again"
        )


def _provenance(agent: Agent, backends: Mapping[str, Backend], argv: Sequence[str] | None):
    from importlib.metadata import PackageNotFoundError, version

    from lumos_gym import __version__

    versions = {}
    for package in ("gymnasium", "torch", "transformers", "peft", "sympy"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            continue
    return {
        "lumos_gym": __version__,
        "argv": list(argv) if argv is not None else None,
        "agent": agent.describe(),
        "backends": {role: vars(b.info()) for role, b in backends.items()},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def evaluate(
    agent: str | Agent,
    *,
    envs: Sequence[str] = (),
    suite: str | None = None,
    limit: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    models: ModelOptions | None = None,
    backends: Mapping[str, Backend] | None = None,
    agent_config: AgentConfig | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    max_invalid_actions: int = 5,
    wall_timeout: float | None = None,
    keep_prompts: bool = False,
    progress: bool = True,
    argv: Sequence[str] | None = None,
) -> EvaluationResult:
    """Run ``agent`` on the episodes of ``envs`` or ``suite`` and write the results to ``out``.

    Args:
        agent: an agent name (``lumos-i``, ``lumos-o``, ``integrated``, ``react``, ``cot``,
            ``direct``, ``oracle``) or an agent.
        envs: env ids (the ``lumos/`` prefix may be left out).
        suite: a suite name (:data:`SUITES`); ``default`` when no env is named.
        limit: the most tasks per env (overrides the suite's).
        env_kwargs: constructor arguments for every env.
        models: how to build the backends (ignored when ``backends`` is given).
        backends: ready backends per role (they are not closed here).
        agent_config: the agent's settings (when ``agent`` is a name).
        seed: the seed of every episode.
        out: the results folder; episodes already in its ``episodes.jsonl`` are not run again.
        max_invalid_actions: end an episode after this many invalid actions in a row.
        wall_timeout: seconds an episode may take.
        keep_prompts: store every prompt in the episode records.
        progress: show a progress bar.
        argv: the command line, recorded for provenance.
    """
    if isinstance(agent, str):
        agent = make_agent(agent, agent_config)
    entries = suite_entries(envs=envs, suite=suite, limit=limit, env_kwargs=env_kwargs)
    privileged = bool(getattr(agent, "needs_privileged_info", False))
    specs = episode_specs(entries, seed=seed, privileged=privileged)
    out_dir = Path(out) if out is not None else Path("results") / agent.name
    own = backends is None
    built = BackendSet()
    if backends is not None:
        built.update(backends)
    elif agent.roles:
        built = build_backends(agent.roles, with_reference(agent.name, models or ModelOptions()))
    try:
        check_resumable(out_dir, fingerprint(agent, built))
        results = ResultsFile(out_dir / "episodes.jsonl")
    except BaseException:
        if own:
            built.close()
        raise
    todo = [s for s in specs if s.key not in results.done]
    resumed = len(specs) - len(todo)
    try:
        provenance = _provenance(agent, built, argv)
        provenance["fingerprint"] = fingerprint(agent, built)
        write_json_atomic(out_dir / "run.json", provenance)
        if resumed:
            print(f"resuming: {resumed} of {len(specs)} episodes already in {results.path}")

        def on_record(record: EpisodeRecord) -> None:
            spec_key = EpisodeSpec(
                record.env_id, record.task_id, record.env_kwargs, record.seed
            ).key
            results.append({"key": spec_key, **record.to_dict()})

        runner = Runner(
            agent, built, max_in_flight=(models.batch_size if models else 8),
            max_invalid_actions=max_invalid_actions, wall_timeout=wall_timeout,
            keep_prompts=keep_prompts,
        )  # fmt: skip
        runner.run(todo, on_record=on_record, progress=progress)
    finally:
        results.close()
        if own:
            built.close()
    wanted = {s.key for s in specs}
    records = [r for k, r in results.done.items() if k in wanted]
    summary = summarize(records)
    write_json_atomic(out_dir / "summary.json", summary)
    return EvaluationResult(out_dir, summary, records, resumed)
