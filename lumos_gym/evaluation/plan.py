"""The episode plan of a run: which episodes of which envs, and which of them this shard runs.

:func:`plan_env` builds an env once to list its episodes (tasks × seeds) and record its
provenance; :func:`plan_episodes` does so for every entry of a run, keys each episode
(:func:`spec_key`) and selects one shard of them (:func:`shard_keys`: round-robin over the
sorted keys).

Planning builds envs, and takes the tasks a test suite leaves out and the gold plans of the
counterfactual agents from the conversion layer. The leaderboard imports this module to plan a
suite again for ``--validate --suite``; so that reading a board otherwise imports no
conversion, agent or training code, the functions that need that code (and the collecting of
provenance) import it themselves.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from lumos_gym.envs.registration import make_env
from lumos_gym.episodes import EpisodeSpec
from lumos_gym.errors import EvaluationError, LumosGymError
from lumos_gym.evaluation.results import ResultsError, episode_key, keys_sha256
from lumos_gym.evaluation.suites import SuiteEntry

#: The task meta keys that name a task's group when it has no level, in order of preference.
GROUP_KEYS = ("family", "task_type", "kind", "subdomain")


def task_group(meta: Mapping[str, Any]) -> str:
    """The difficulty level of a task (``"level 2"``), else its family or type, else ``"all"``.

    Results tables give each env a row per group (``summary.json``'s ``groups``, the
    reproduce report), read from the task's ``meta``: ``level``, else the first of
    :data:`GROUP_KEYS` it has.
    """
    if "level" in meta:
        return f"level {meta['level']}"
    for key in GROUP_KEYS:
        if key in meta:
            return str(meta[key])
    return "all"


@dataclass
class EnvPlan:
    """The episodes of one env, its provenance and the group of each task.

    Attributes:
        entry: the suite entry.
        specs: its episodes.
        provenance: what ``run.json`` records of the env.
        groups: task id → :func:`task_group`; empty when every task's group is ``all``.
    """

    entry: SuiteEntry
    specs: list[EpisodeSpec]
    provenance: dict[str, Any]
    groups: dict[str, str] = field(default_factory=dict)


def plan_env(
    entry: SuiteEntry, *, seed: int | None = None, privileged: bool = False,
    gold_plans: bool = False,
) -> EnvPlan:
    """Build the env of ``entry`` once: its episodes (tasks × seeds) and its provenance.

    Args:
        entry: the env, its arguments, tasks, step limit and seeds.
        seed: one seed for every episode, overriding the entry's seeds.
        privileged: build the envs with their ``replay_options`` (the oracle agent).
        gold_plans: give each episode its task's gold plan (``agent_info``, from
            :func:`lumos_gym.conversion.gold.gold_info`) for the counterfactual agents; the
            env's arguments, and so the episode keys, stay those of an ordinary run.
    """
    kwargs = dict(entry.kwargs)
    if entry.max_steps is not None:
        kwargs["max_episode_steps"] = entry.max_steps  # taken by gymnasium.make
    env = make_env(entry.env_id, **kwargs)
    try:
        unwrapped = env.unwrapped
        available = unwrapped.task_ids()
        replay_options = dict(getattr(unwrapped, "replay_options", {}))
        provenance = _env_provenance(entry, env, kwargs, len(available))
        groups = {t.id: task_group(t.meta or {}) for t in getattr(unwrapped, "tasks", ())}
        excluded = excluded_tasks(entry, available)
    finally:
        env.close()
    if entry.excluded:
        provenance["excluded"] = excluded
        left_out = set(excluded)
        available = [t for t in available if t not in left_out]
    task_ids = _task_ids(entry, available)
    golds = _gold_infos(unwrapped, task_ids) if gold_plans else {}
    groups = {t: groups.get(t, "all") for t in task_ids}
    if all(g == "all" for g in groups.values()):
        groups = {}
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
    specs = [EpisodeSpec(entry.env_id, t, kwargs, s, golds.get(t, {}))
             for t in task_ids for s in seeds]
    provenance.update({"task_ids": task_ids, "seeds": seeds})
    return EnvPlan(entry, specs, provenance, groups)


def excluded_tasks(entry: SuiteEntry, task_ids: Iterable[str]) -> list[str]:
    """The ``task_ids`` that the entries ``entry`` excludes also plan.

    A test suite leaves out the tasks of the development suite (``exclude`` in its file), so
    that nothing chosen or diagnosed on development episodes is scored again as a test result.
    Tasks match by id, even where the env's arguments make another task of that id (a shop of
    another size): ids are what runs and results name, and dropping a few more is the safe
    side. Question texts do not identify a task (a picture's or a game's question repeats).
    """
    if not entry.excluded:
        return []
    # the conversion layer (its rules and pipeline: heavy), only for a suite that excludes
    # another's tasks (module docstring)
    from lumos_gym.conversion.leakage import excluded_ids

    ids = excluded_ids(entry.excluded)
    return [t for t in task_ids if t in ids]


def _gold_infos(unwrapped: Any, task_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Task id → the gold plan of each of ``task_ids`` (tasks of the built env ``unwrapped``)."""
    # the conversion layer (heavy), only for the counterfactual agents' runs
    from lumos_gym.conversion.gold import gold_info

    tasks = {task.id: task for task in getattr(unwrapped, "tasks", ())}
    dataset = getattr(unwrapped, "dataset", None)
    return {t: gold_info(tasks[t], dataset) if t in tasks else
            {"gold_plan": None, "gold_plan_error": f"{t} is not among the env's tasks"}
            for t in task_ids}


def _env_provenance(
    entry: SuiteEntry, env: gym.Env, kwargs: Mapping[str, Any], available: int
) -> dict[str, Any]:
    """What ``run.json`` records of one built env: its id, version, kind and data."""
    # provenance imports the agents, conversion and training layers: only when planning
    from lumos_gym.evaluation.provenance import data_provenance

    unwrapped = env.unwrapped
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
        "scorer": getattr(unwrapped, "scorer", None),
        "tasks_available": available,
        "data": data_provenance(env, kwargs),
    }
    source_split = (provenance["data"].get("source") or {}).get("split")
    provenance["split"] = getattr(unwrapped, "split", None) or source_split or kwargs.get("split")
    return provenance


def _task_ids(entry: SuiteEntry, available: Sequence[str]) -> list[str]:
    """The entry's tasks (its ``task_ids``, else every task), the first ``limit`` of them."""
    if entry.task_ids is None:
        return list(available)[: entry.limit]
    unknown = [t for t in entry.task_ids if t not in set(available)]
    if unknown:
        raise EvaluationError(
            f"{entry.env_id} has no task(s) {', '.join(unknown[:5])}"
            f"{' ...' if len(unknown) > 5 else ''} (with {dict(entry.kwargs)})"
        )
    return list(entry.task_ids)[: entry.limit]


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


# ---------------------------------------------------------------------------------- shards
def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``"i/n"`` (1 <= i <= n) into ``(i, n)``."""
    left, sep, right = str(text).partition("/")
    try:
        i, n = int(left), int(right)
    except ValueError:
        i = n = 0
    if not sep or n < 1 or not 1 <= i <= n:
        raise ResultsError(f"--shard takes I/N with 1 <= I <= N (e.g. 1/4), got {text!r}")
    return i, n


def shard_keys(keys: Iterable[str], shard: tuple[int, int]) -> list[str]:
    """Return shard ``i`` of ``n``: round-robin over the sorted keys (positions i-1, i-1+n...).

    Sorted keys group episodes by env, so every shard gets a near-equal part of every env.
    """
    i, n = shard
    return sorted(set(keys))[i - 1 :: n]


# ------------------------------------------------------------------------------- the plan
@dataclass
class EpisodePlan:
    """The episodes of a run.

    Attributes:
        envs: each env's plan, in the order of the run's entries.
        by_key: every planned episode by its key (every shard's).
        selected: the keys this run executes, sorted (one shard's, or all).
        shard: ``(i, n)``, or None for the whole run.
    """

    envs: list[EnvPlan]
    by_key: dict[str, EpisodeSpec]
    selected: list[str]
    shard: tuple[int, int] | None = None

    def kinds(self) -> dict[str, tuple[Any, Any]]:
        """Return env id → (task type, primary metric), written into every episode record."""
        return {p.entry.env_id: (p.provenance["task_type"], p.provenance["primary_metric"])
                for p in self.envs}

    def groups(self) -> dict[str, dict[str, str]]:
        """Return env id → task id → group, for the envs whose tasks have levels or families."""
        return {p.entry.env_id: p.groups for p in self.envs if p.groups}

    def describe(self) -> dict[str, Any]:
        """Return the plan as ``run.json`` records it (the identity of a run and its shard)."""
        return {
            "episodes": len(self.by_key), "keys_sha256": keys_sha256(self.by_key),
            "shard": list(self.shard) if self.shard else None, "keys": self.selected,
        }


def plan_episodes(
    entries: Iterable[SuiteEntry], *, seed: int | None = None, privileged: bool = False,
    shard: tuple[int, int] | None = None, gold_plans: bool = False,
) -> EpisodePlan:
    """Plan every entry's env (see :func:`plan_env`) and select the episodes of ``shard``.

    Raises:
        EvaluationError: envs that cannot be planned, all of them named at once (every missing
            data file in one message, not one per attempt).
    """
    plans, failed = [], []
    for entry in entries:
        try:
            plans.append(plan_env(entry, seed=seed, privileged=privileged,
                                  gold_plans=gold_plans))
        except LumosGymError as e:
            failed.append(str(e))
    if len(failed) == 1:
        raise EvaluationError(failed[0])
    if failed:
        raise EvaluationError(f"{len(failed)} envs cannot be planned:\n  " + "\n  ".join(failed))
    by_key = {spec_key(s): s for plan in plans for s in plan.specs}
    selected = shard_keys(by_key, shard) if shard else sorted(by_key)
    return EpisodePlan(plans, by_key, selected, shard)
