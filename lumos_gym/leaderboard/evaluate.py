"""``lumos-gym evaluate``: run an agent on envs or a suite and write its results.

The steps, each a small function: load the suite (:func:`get_suite`: a JSON file in
``lumos_gym/leaderboard/suites``), resolve the episodes (:func:`plan_episodes`, optionally one
shard of them), build the model backends (:func:`build_backends`), run them with the batched
:class:`~lumos_gym.agents.runner.Runner`, append each finished episode to ``episodes.jsonl``
(one JSON line, flushed and fsynced, so a killed run loses nothing and resumes where it
stopped), then summarise (:func:`lumos_gym.leaderboard.results.summarize`: metrics per task type
with standard errors and bootstrap intervals, the suite score) into ``summary.json`` (written
atomically) and a printed table. ``run.json`` and ``summary.json`` carry the provenance
(:func:`provenance`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import gymnasium as gym

from lumos_gym.agents import make_agent
from lumos_gym.agents.base import Agent, AgentConfig
from lumos_gym.agents.runner import EpisodeRecord, EpisodeSpec, Runner
from lumos_gym.envs.registration import make_env
from lumos_gym.errors import EvaluationError, LumosGymError
from lumos_gym.jsonl import append_jsonl, drop_partial_line, write_json_atomic
from lumos_gym.leaderboard.results import (  # noqa: F401  (mean_se, format_table: re-exported)
    ResultsError,
    episode_key,
    format_table,
    keys_sha256,
    mean_se,
    parse_shard,
    provenance_for_summary,
    record_key,
    shard_keys,
    summarize,
)
from lumos_gym.models.base import Backend
from lumos_gym.models.factory import (  # noqa: F401  (DEFAULT_MODELS, role_model: re-exported)
    DEFAULT_MODELS,
    BackendSet,
    ModelOptions,
    build_backends,
    role_model,
)

#: The suite run when neither an env nor a suite is named.
DEFAULT_SUITE = "offline"


@dataclass(frozen=True)
class SuiteEntry:
    """One env of a suite.

    Attributes:
        env_id: the env id.
        kwargs: its constructor arguments (split, source, counts...).
        limit: run the first ``limit`` tasks (of ``task_ids`` when given, else in file order).
        task_ids: run these tasks, in this order (None: every task).
        max_steps: the env's step limit (Gymnasium's ``max_episode_steps``; None: the
            registered one).
        seeds: the seeds of each task's episodes (one episode per seed; None: the suite's).
    """

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    limit: int | None = None
    task_ids: tuple[str, ...] | None = None
    max_steps: int | None = None
    seeds: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Suite:
    """A named set of envs to evaluate on, read from a JSON file (see :func:`load_suite`)."""

    name: str
    description: str
    entries: tuple[SuiteEntry, ...]
    seeds: tuple[int, ...] = (0,)
    aliases: tuple[str, ...] = ()
    path: str = ""
    sha256: str = ""

    def episodes(self) -> int | None:
        """Return the number of episodes when every entry lists its task ids, else None."""
        total = 0
        for entry in self.entries:
            if entry.task_ids is None:
                return None  # known only once the env is built
            count = len(entry.task_ids[: entry.limit])
            total += count * len(entry.seeds or self.seeds)
        return total


# -------------------------------------------------------------------------------- suites
_SUITE_KEYS = {"name", "aliases", "description", "source", "seeds", "max_steps", "envs"}
_ENTRY_KEYS = {"env", "kwargs", "limit", "task_ids", "max_steps", "seeds"}


def _seeds(value: Any, where: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(type(s) is int for s in value):
        raise EvaluationError(f"{where}: seeds must be a non-empty list of integers")
    return tuple(value)


def _count(value: Any, where: str, what: str) -> int | None:
    if value is not None and (type(value) is not int or value < 1):
        raise EvaluationError(f"{where}: {what} must be a positive integer, got {value!r}")
    return value


def load_suite(path: str | Path, *, shown: str | None = None) -> Suite:
    """Read and check a suite file.

    The file is a JSON object: ``name``, ``description``, optional ``aliases``, ``seeds``
    (default ``[0]``), ``max_steps`` (every env's step limit) and ``source`` (a note), and
    ``envs``: a list of ``{"env": ID, "kwargs": {...}, "limit": N, "task_ids": [...],
    "max_steps": N, "seeds": [...]}`` with only ``env`` required.

    Raises:
        EvaluationError: the file is not valid JSON, has unknown or ill-typed fields, or names
            an env that is not registered here; the message names the file and the env.
    """
    from lumos_gym.envs.registration import resolve_env_id

    shown = shown or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as e:
        raise EvaluationError(f"cannot read suite file {shown}: {e}") from None
    except ValueError as e:
        raise EvaluationError(f"suite file {shown} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("envs"), list) or not data["envs"]:
        raise EvaluationError(f"suite file {shown}: expected an object with a non-empty 'envs'")
    unknown = set(data) - _SUITE_KEYS
    if unknown:
        raise EvaluationError(f"suite file {shown}: unknown field(s) {', '.join(sorted(unknown))}")
    name = str(data.get("name") or Path(path).stem)
    seeds = _seeds(data.get("seeds"), shown) or (0,)
    suite_steps = _count(data.get("max_steps"), shown, "max_steps")
    entries, seen = [], set()
    for n, raw in enumerate(data["envs"], 1):
        where = f"suite file {shown}, env {n}"
        if not isinstance(raw, dict) or not isinstance(raw.get("env"), str):
            raise EvaluationError(f"{where}: expected an object with an 'env' id")
        unknown = set(raw) - _ENTRY_KEYS
        if unknown:
            raise EvaluationError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            env_id = resolve_env_id(raw["env"])
        except LumosGymError as e:
            raise EvaluationError(f"suite file {shown} names env {raw['env']!r}, which is not "
                                  f"registered here ({e})") from None
        if env_id in seen:
            raise EvaluationError(f"{where}: {env_id} appears twice (one entry per env id)")
        seen.add(env_id)
        kwargs = raw.get("kwargs") or {}
        task_ids = raw.get("task_ids")
        if not isinstance(kwargs, dict):
            raise EvaluationError(f"{where}: kwargs must be an object")
        if task_ids is not None and (not isinstance(task_ids, list) or not task_ids
                                     or not all(isinstance(t, str) for t in task_ids)):
            raise EvaluationError(f"{where}: task_ids must be a non-empty list of strings")
        entries.append(SuiteEntry(
            env_id, kwargs, _count(raw.get("limit"), where, "limit"),
            tuple(task_ids) if task_ids is not None else None,
            _count(raw.get("max_steps"), where, "max_steps") or suite_steps,
            _seeds(raw.get("seeds"), where),
        ))
    aliases = data.get("aliases") or []
    return Suite(
        name, str(data.get("description", "")), tuple(entries), seeds,
        tuple(str(a) for a in aliases), shown, hashlib.sha256(text.encode()).hexdigest(),
    )


def _suite_files(folder: str | Path | None = None) -> Iterator[tuple[str, Path]]:
    if folder is not None:
        for path in sorted(Path(folder).glob("*.json")):
            yield str(path), path
        return
    shipped = resources.files("lumos_gym.leaderboard").joinpath("suites")
    for item in sorted(shipped.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            yield f"lumos_gym/leaderboard/suites/{item.name}", Path(str(item))


def load_suites(folder: str | Path | None = None) -> tuple[dict[str, Suite], dict[str, str]]:
    """Load every suite file of ``folder`` (default: the package's ``leaderboard/suites``).

    Returns:
        ``(suites, errors)``: name (and alias) → suite, and file → error message for each
        suite file that does not load (the others still do).
    """
    suites: dict[str, Suite] = {}
    errors: dict[str, str] = {}
    for shown, path in _suite_files(folder):
        try:
            suite = load_suite(path, shown=shown)
        except EvaluationError as e:
            errors[shown] = str(e)
            continue
        for name in (suite.name, *suite.aliases):
            if name in suites:
                errors[shown] = f"suite name {name!r} is also used by {suites[name].path}"
                continue
            suites[name] = suite
    return suites, errors


def suite_names() -> list[str]:
    """Return the names of the shipped suites (aliases left out), sorted."""
    suites, _ = load_suites()
    return sorted({s.name for s in suites.values()})


def get_suite(name: str) -> Suite:
    """Return the suite called ``name`` (or an alias), or read the suite file ``name``.

    Raises:
        EvaluationError: an unknown name, or a suite file that does not load.
    """
    if name.endswith(".json") and Path(name).is_file():
        return load_suite(name)
    suites, errors = load_suites()
    if name in suites:
        return suites[name]
    for shown, message in errors.items():
        if Path(shown).stem == name:
            raise EvaluationError(message)
    known = ", ".join(sorted({s.name for s in suites.values()}))
    raise EvaluationError(f"unknown suite {name!r}; known: {known} (or a suite .json file)")


class _SuiteTable(Mapping):
    """Name → the entries of that shipped suite, loaded on first use (kept for old callers)."""

    def __getitem__(self, name: str) -> tuple[SuiteEntry, ...]:
        return get_suite(name).entries

    def __iter__(self) -> Iterator[str]:
        return iter(load_suites()[0])

    def __len__(self) -> int:
        return len(load_suites()[0])


#: Suite name → its entries (read from ``lumos_gym/leaderboard/suites/*.json``).
SUITES: Mapping[str, tuple[SuiteEntry, ...]] = _SuiteTable()


# ------------------------------------------------------------------------------ episodes
def suite_entries(
    *, envs: Sequence[str] = (), suite: str | None = None, limit: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[SuiteEntry]:
    """Return the envs to run: the named ones, else the suite's (``offline`` when neither)."""
    from lumos_gym.envs.registration import resolve_env_id

    if envs and suite:
        raise EvaluationError("give --env or --suite, not both")
    if envs:
        entries = [SuiteEntry(resolve_env_id(e)) for e in envs]
    else:
        chosen = get_suite(suite or DEFAULT_SUITE)
        entries = [replace(e, seeds=e.seeds or chosen.seeds) for e in chosen.entries]
    extra = dict(env_kwargs or {})
    return [
        replace(e, kwargs={**e.kwargs, **extra}, limit=limit if limit is not None else e.limit)
        for e in entries
    ]


def _file_digest(path: Path) -> str | None:
    from lumos_gym.envs.sources import file_sha256

    try:
        return file_sha256(path) if path.is_file() else None
    except OSError:
        return None


def data_provenance(env: gym.Env, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Return where an env's tasks come from, with checksums.

    Covered: an env built on a task source (``env.source``: bundled, official and hub files
    with their SHA-256, generator parameters with a checksum of the generated tasks); any
    ``data_path``/``path`` attribute of the unwrapped env and any constructor argument that
    names an existing file (SHA-256) or folder (path only: folders can be large); and always
    ``tasks_sha256``, a checksum of the env's tasks (ids, questions, answers), which covers
    envs that build their task lists themselves.
    """
    from lumos_gym.envs.sources import tasks_sha256

    unwrapped = env.unwrapped
    info: dict[str, Any] = {}
    source = getattr(unwrapped, "source", None)
    if source is not None and hasattr(source, "describe"):
        try:
            info["source"] = source.describe()
        except Exception as e:  # provenance must never stop a run
            info["source"] = {"error": str(e)}
    files: dict[str, Any] = {}
    candidates = {f"attr:{a}": getattr(unwrapped, a, None) for a in ("data_path", "path")}
    candidates.update({f"kwarg:{k}": v for k, v in kwargs.items()})
    for name, value in candidates.items():
        if not isinstance(value, str | os.PathLike) or not str(value):
            continue
        path = Path(value).expanduser()
        try:
            if path.is_file():
                files[name] = {"path": str(value), "sha256": _file_digest(path)}
            elif path.is_dir():
                files[name] = {"path": str(value), "sha256": None}
        except OSError:
            continue
    if files:
        info["files"] = files
    try:
        info["tasks_sha256"] = tasks_sha256(list(getattr(unwrapped, "tasks", [])))
    except (TypeError, ValueError):
        info["tasks_sha256"] = None
    return info


@dataclass
class EnvPlan:
    """The episodes of one env and its provenance."""

    entry: SuiteEntry
    specs: list[EpisodeSpec]
    provenance: dict[str, Any]


def plan_env(entry: SuiteEntry, *, seed: int | None = None, privileged: bool = False) -> EnvPlan:
    """Build the env of ``entry`` once: its episodes (tasks × seeds) and its provenance.

    Args:
        entry: the env, its arguments, tasks, step limit and seeds.
        seed: one seed for every episode, overriding the entry's seeds.
        privileged: build the envs with their ``replay_options`` (the oracle agent).
    """
    kwargs = dict(entry.kwargs)
    if entry.max_steps is not None:
        kwargs["max_episode_steps"] = entry.max_steps  # taken by gymnasium.make
    env = make_env(entry.env_id, **kwargs)
    try:
        unwrapped = env.unwrapped
        available = unwrapped.task_ids()
        replay_options = dict(getattr(unwrapped, "replay_options", {}))
        spec = env.spec
        provenance = {
            "env_id": entry.env_id,
            "kwargs": dict(kwargs),
            "version": spec.version if spec is not None else None,
            "entry_point": str(spec.entry_point) if spec is not None else None,
            "env_version": getattr(unwrapped, "version", None),
            "max_episode_steps": spec.max_episode_steps if spec is not None else None,
            "task_type": getattr(unwrapped, "task_type", None),
            "primary_metric": getattr(unwrapped, "primary_metric", None),
            "tasks_available": len(available),
            "data": data_provenance(env, kwargs),
        }
        source_split = (provenance["data"].get("source") or {}).get("split")
        provenance["split"] = getattr(unwrapped, "split", None) or source_split or kwargs.get(
            "split"
        )
    finally:
        env.close()
    if entry.task_ids is not None:
        unknown = [t for t in entry.task_ids if t not in set(available)]
        if unknown:
            raise EvaluationError(
                f"{entry.env_id} has no task(s) {', '.join(unknown[:5])}"
                f"{' ...' if len(unknown) > 5 else ''} (with {dict(entry.kwargs)})"
            )
        task_ids = list(entry.task_ids)
    else:
        task_ids = list(available)
    task_ids = task_ids[: entry.limit]
    seeds = [seed] if seed is not None else list(entry.seeds or (0,))
    if privileged:
        # an agent that reads gold trajectories replays them as the env's checks do
        # (reference backends for model-backed tools), so it needs no model
        if not _takes(type(unwrapped), "privileged"):
            raise EvaluationError(
                f"{entry.env_id} does not take privileged=True, which the oracle needs to read "
                "gold actions: add `privileged: bool = False` to its __init__ and pass it on to "
                "LumosEnv.__init__ (docs/adding-an-env.md)"
            )
        kwargs.update({"privileged": True, **replay_options})
    specs = [EpisodeSpec(entry.env_id, t, kwargs, s) for t in task_ids for s in seeds]
    provenance.update({"task_ids": task_ids, "seeds": seeds})
    return EnvPlan(entry, specs, provenance)


def _takes(cls: type, name: str) -> bool:
    """Whether ``cls(...)`` accepts the keyword ``name`` (named, or through ``**kwargs``)."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def episode_specs(
    entries: Iterable[SuiteEntry], *, seed: int | None = None, privileged: bool = False
) -> list[EpisodeSpec]:
    """Return one episode per task and seed of each entry (the first ``limit`` tasks).

    With ``privileged`` (the oracle agent), envs are built with their ``replay_options``.
    """
    return [s for e in entries for s in plan_env(e, seed=seed, privileged=privileged).specs]


def spec_key(spec: EpisodeSpec) -> str:
    """Return the results key of an episode (its env, arguments, task and seed)."""
    return episode_key(spec.env_id, spec.env_kwargs, spec.task_id, spec.seed)


# ------------------------------------------------------------------------------ backends
def with_reference(agent_name: str, options: ModelOptions) -> ModelOptions:
    """``options`` with the agent's shipped reference adapters when nothing else is named."""
    from lumos_gym.models.reference import reference_models

    if not options.reference or options.backend != "hf" or options.names_a_model():
        return options
    models = reference_models(agent_name)
    if not models:
        return options
    return replace(options, planner=models.get("planner"),
                               grounder=models.get("grounder"))


def agent_backends(
    agent: Agent, options: ModelOptions, backends: Mapping[str, Backend] | None = None
) -> BackendSet:
    """The backends of ``agent``'s roles (none for an agent without roles).

    ``backends`` as given, else built from ``options``, with the agent's reference adapters
    when no model is named.
    """
    built = BackendSet()
    if backends is not None:
        built.update(backends)
    elif agent.roles:
        built = build_backends(agent.roles, with_reference(agent.name, options))
    return built


# ------------------------------------------------------------------------------- results
class ResultsFile:
    """An append-only JSONL file of episode records that survives a kill.

    Each record is one line, flushed and fsynced. On opening, a torn last line is cut off and
    the complete lines are read back (their keys, recomputed from each record's env, arguments,
    task and seed, say which episodes are done); any other unreadable line is an error, never
    silently dropped.
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
                        self.done[record_key(record)] = record
                    except (ValueError, KeyError, TypeError, AttributeError) as e:
                        raise EvaluationError(
                            f"{path}:{n} is not an episode record ({e}); move the file away "
                            "or pass another --out (lumos-gym merge skips such lines)"
                        ) from None
        self._file: Any = None  # opened by the first append

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record durably."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (close())
        append_jsonl(self._file, record)
        self.done[record["key"]] = dict(record)

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def _check_existing(
    out_dir: Path, done: Mapping[str, Any], plan: Mapping[str, Any], agent: Agent, resume: bool
) -> None:
    """Refuse a folder holding episodes unless ``--resume`` continues the same run in it.

    Checked before any model loads: the agent and its settings (the models are checked once
    built, by :func:`check_resumable`), and the plan: every episode there must belong to this
    run's episodes (a larger ``--limit`` extends a run; another suite, limit or seed would mix
    two runs in one folder).
    """
    recorded = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fingerprint_there = json.loads((out_dir / "run.json").read_text("utf-8"))["fingerprint"]
        recorded = fingerprint_there.get("agent")
    now = portable_paths(json.loads(json.dumps(agent.describe(), default=str)))
    if recorded is not None and recorded != now:
        raise EvaluationError(_other_configuration(out_dir, {"agent": recorded}, {"agent": now}))
    count = f"{len(done)} episode{'s' if len(done) != 1 else ''}"
    if not resume:
        raise EvaluationError(
            f"{out_dir} already holds {count}; pass --resume to continue that run (only the "
            "episodes not there are run), or another --out"
        )
    outside = sorted(k for k in done if k not in plan)
    if outside:
        raise EvaluationError(
            f"{out_dir} holds {len(outside)} of its {count} outside this run's plan (e.g. "
            f"{outside[0]}): they were made with other envs, suite, --limit or seeds, and "
            "resuming would mix two runs; pass another --out"
        )


# ------------------------------------------------------------------------------ the run
@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns."""

    out: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    resumed: int = 0


def portable_paths(value: Any) -> Any:
    """``value`` (JSON-like) with this machine's paths written so that they travel.

    A path inside the installed package becomes ``<lumos_gym>/...`` (the shipped reference
    adapters), one inside the cache ``<cache>/...`` (the converted default model), one inside
    the home folder ``~/...``; other strings are kept. Results folders then carry no machine
    path of these kinds, and a run resumes from another checkout of the same code.
    """
    import os

    import lumos_gym
    from lumos_gym.jsonl import cache_root

    roots = [(str(Path(lumos_gym.__file__).resolve().parent), "<lumos_gym>"),
             (str(cache_root().resolve()), "<cache>"),
             (str(Path("~").expanduser().resolve()), "~")]

    def convert(item: Any) -> Any:
        if isinstance(item, dict):  # keys too: adapter checksums are keyed by folder
            return {convert(k): convert(v) for k, v in item.items()}
        if isinstance(item, list):
            return [convert(v) for v in item]
        if isinstance(item, str) and item.startswith(os.sep):
            for root, name in roots:
                if item == root or item.startswith(root + os.sep):
                    return name + item[len(root):]
        return item

    return convert(value)


def fingerprint(agent: Agent, backends: Mapping[str, Backend]) -> dict[str, Any]:
    """Return what must match for a run to resume another: the agent and each role's model."""
    models = {}
    for role, backend in sorted(backends.items()):
        info = backend.info()
        models[role] = [info.backend, info.model_id, info.details.get("adapter")]
    return portable_paths(
        json.loads(json.dumps({"agent": agent.describe(), "models": models}, default=str))
    )


def check_resumable(
    out_dir: Path, expected: Mapping[str, Any], shard: tuple[int, int] | None = None
) -> None:
    """Refuse to append to results made with another agent, model configuration or shard.

    Results of another lumos-gym version are resumed with a warning (the episodes already
    there were scored by that version).
    """
    from lumos_gym import __version__

    path = out_dir / "run.json"
    if not path.exists() or not (out_dir / "episodes.jsonl").exists():
        return
    try:
        recorded_run = json.loads(path.read_text(encoding="utf-8"))
        recorded = recorded_run.get("fingerprint")
    except (ValueError, AttributeError):
        recorded_run, recorded = {}, None
    if recorded is not None and recorded != expected:
        raise EvaluationError(_other_configuration(out_dir, recorded, expected))
    plan = recorded_run.get("plan") or {}
    before = tuple(plan["shard"]) if plan.get("shard") else None
    if "plan" in recorded_run and before != shard:
        shown = [f"shard {s[0]}/{s[1]}" if s else "the whole run" for s in (before, shard)]
        raise EvaluationError(f"{out_dir} holds {shown[0]}, not {shown[1]}; pass another --out")
    version = recorded_run.get("lumos_gym")
    if version and version != __version__:
        print(f"warning: {out_dir} was started by lumos-gym {version}, this is {__version__}",
              file=sys.stderr)


def _other_configuration(out_dir: Path, recorded: Any, now: Any) -> str:
    """The refusal of a folder holding another configuration, naming what differs."""
    from lumos_gym.leaderboard.results import differences

    found = differences(recorded, json.loads(json.dumps(now, default=str)),
                        names=("there", "now"))
    shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
    return (f"{out_dir} holds results of another configuration ({shown or 'fingerprints differ'});"
            " pass another --out, or delete the folder to start again")


def _git() -> dict[str, Any] | None:
    """Return the commit (and whether the tree differs from it) of a git checkout, else None."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
            timeout=10, check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit or None, "dirty": bool(status.strip())}


def _hardware() -> dict[str, Any]:
    """Return the CPU model and count, and the GPUs when torch is already loaded."""
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "gpus": []}
    torch = sys.modules.get("torch")  # only a backend that loaded torch can use a GPU
    if torch is not None:
        try:
            if torch.cuda.is_available():
                count = torch.cuda.device_count()
                info["gpus"] = [torch.cuda.get_device_name(i) for i in range(count)]
        except Exception:  # provenance must never stop a run
            pass
    return info


def _adapter_checksums(backends: Mapping[str, Backend]) -> dict[str, dict[str, str | None]]:
    """Return role → adapter folder → SHA-256 of its ``adapter_model.safetensors`` (or .bin)."""
    out: dict[str, dict[str, str | None]] = {}
    for role, backend in sorted(backends.items()):
        folders = backend.info().details.get("adapters") or {}
        for folder in dict(folders).values():
            base = Path(str(folder))
            weights = [base / "adapter_model.safetensors", base / "adapter_model.bin"]
            found = next((w for w in weights if w.is_file()), None)
            out.setdefault(role, {})[str(folder)] = _file_digest(found) if found else None
    return out


def provenance(
    agent: Agent, backends: Mapping[str, Backend], argv: Sequence[str] | None
) -> dict[str, Any]:
    """Return what made a run: code, agent, models, decoding, machine (for run.json).

    The caller adds the envs, the suite, the plan and the fingerprint.
    """
    from importlib.metadata import PackageNotFoundError, version

    from lumos_gym import __version__

    versions = {}
    for package in ("gymnasium", "numpy", "torch", "transformers", "peft", "sympy", "vllm"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            continue
    described = agent.describe()
    config = dict(described.get("config") or {})
    backend_info = {role: vars(b.info()) for role, b in sorted(backends.items())}
    return portable_paths(json.loads(json.dumps({
        "lumos_gym": __version__,
        "git": _git(),
        "argv": list(argv) if argv is not None else None,
        "agent": described,
        "decoding": {k: config.get(k) for k in ("max_new_tokens", "temperature", "seed",
                                                 "max_rounds")},
        "backends": backend_info,
        "backend": sorted({info["backend"] for info in backend_info.values()}),
        "models": {role: info["model_id"] for role, info in backend_info.items()},
        "adapters": _adapter_checksums(backends),
        "hardware": _hardware(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }, default=str)))


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
    seed: int | None = None,
    shard: tuple[int, int] | str | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    ray: str | bool | None = None,
    workers: int | None = None,
    worker_gpus: float = 0.0,
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
        suite: a suite name (``lumos-gym suites``) or suite file; ``offline`` when no env is
            named.
        limit: the most tasks per env (overrides the suite's).
        env_kwargs: constructor arguments for every env.
        models: how to build the backends (ignored when ``backends`` is given).
        backends: ready backends per role (they are not closed here; with ``ray`` they must
            pickle).
        agent_config: the agent's settings (when ``agent`` is a name).
        seed: the seed of every episode (default: the suite's seeds, else 0).
        shard: ``(i, n)`` or ``"i/n"``: run only shard i of n (:func:`~lumos_gym.leaderboard.
            results.shard_keys`: round-robin over the sorted episode keys); merge the shards'
            folders with :func:`~lumos_gym.leaderboard.results.merge_results`.
        out: the results folder (default ``results/AGENT``).
        resume: continue the run whose episodes ``out`` already holds (only the episodes not
            there are run; the configuration must match). Without it, a folder holding
            episodes is refused.
        ray: run the episodes on Ray actors (:mod:`lumos_gym.leaderboard.distributed`): ``True`` or
            ``"local"`` for this machine's Ray, else a cluster address (``auto``,
            ``ray://host:10001``).
        workers: Ray actors (default: one per CPU of the cluster, or per ``worker_gpus``).
        worker_gpus: GPUs reserved per Ray actor.
        max_invalid_actions: end an episode after this many invalid actions in a row.
        wall_timeout: seconds an episode may take.
        keep_prompts: store every prompt in the episode records.
        progress: show a progress bar.
        argv: the command line, recorded for provenance.
    """
    if ray in (None, False) and (workers is not None or worker_gpus):
        raise EvaluationError("--workers and --worker-gpus need --ray")
    for name, value in (("--limit", limit), ("--workers", workers)):
        if value is not None and value < 1:
            raise EvaluationError(f"{name} must be at least 1, got {value}")
    if isinstance(agent, str):
        agent = make_agent(agent, agent_config)
    if isinstance(shard, str):
        shard = parse_shard(shard)
    elif shard is not None:
        shard = parse_shard(f"{shard[0]}/{shard[1]}")
    chosen = None if envs else get_suite(suite or DEFAULT_SUITE)
    entries = suite_entries(envs=envs, suite=suite, limit=limit, env_kwargs=env_kwargs)
    privileged = bool(getattr(agent, "needs_privileged_info", False))
    plans, failed = [], []
    for entry in entries:  # every missing data file at once, not one per attempt
        try:
            plans.append(plan_env(entry, seed=seed, privileged=privileged))
        except LumosGymError as e:
            failed.append(str(e))
    if len(failed) == 1:
        raise EvaluationError(failed[0])
    if failed:
        raise EvaluationError(f"{len(failed)} envs cannot be planned:\n  " + "\n  ".join(failed))
    by_key = {spec_key(s): s for plan in plans for s in plan.specs}
    selected = shard_keys(by_key, shard) if shard else sorted(by_key)
    kinds = {p.entry.env_id: (p.provenance["task_type"], p.provenance["primary_metric"])
             for p in plans}
    out_dir = Path(out) if out is not None else Path("results") / agent.name
    results = ResultsFile(out_dir / "episodes.jsonl")
    if results.done:
        _check_existing(out_dir, results.done, by_key, agent, resume)
    todo = [by_key[k] for k in selected if k not in results.done]
    resumed = len(selected) - len(todo)
    runner_settings = {
        "max_in_flight": models.batch_size if models else 8,
        "max_invalid_actions": max_invalid_actions, "wall_timeout": wall_timeout,
        "keep_prompts": keep_prompts,
    }
    own = backends is None
    built = BackendSet()
    pool = None
    try:
        if ray not in (None, False):
            from lumos_gym.leaderboard.distributed import RayPool

            pool = RayPool(
                agent, models=models or ModelOptions(), backends=backends,
                runner=runner_settings, address=None if ray is True else str(ray),
                workers=workers, worker_gpus=worker_gpus, max_workers=max(1, len(todo)),
            )
            described = pool.describe(argv)
            expected, run = described["fingerprint"], described["provenance"]
        else:
            built = agent_backends(agent, models or ModelOptions(), backends)
            expected, run = fingerprint(agent, built), provenance(agent, built, argv)
        check_resumable(out_dir, expected, shard)
        run["suite"] = (
            {"name": chosen.name, "file": chosen.path, "sha256": chosen.sha256} if chosen else None
        )
        run["envs"] = [p.provenance for p in plans]
        run["plan"] = {
            "episodes": len(by_key), "keys_sha256": keys_sha256(by_key),
            "shard": list(shard) if shard else None, "keys": selected,
        }
        run["fingerprint"] = expected
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out_dir / "run.json", run)
        if resumed:
            print(f"resuming: {resumed} of {len(selected)} episodes already in {results.path}")

        def on_record(record: EpisodeRecord) -> None:
            key = episode_key(record.env_id, record.env_kwargs, record.task_id, record.seed)
            task_type, primary = kinds.get(record.env_id, (None, None))
            results.append({"key": key, **record.to_dict(), "task_type": task_type,
                            "primary_metric": primary})

        if pool is not None:
            pool.run(todo, chunk=runner_settings["max_in_flight"], on_record=on_record,
                     progress=progress)
        else:
            Runner(agent, built, **runner_settings).run(
                todo, on_record=on_record, progress=progress
            )
    finally:
        results.close()
        if pool is not None:
            pool.close()
        if own:
            built.close()
    records = [results.done[k] for k in selected if k in results.done]
    summary = summarize(records)
    summary["provenance"] = provenance_for_summary(run)
    write_json_atomic(out_dir / "summary.json", summary)
    return EvaluationResult(out_dir, summary, records, resumed)
