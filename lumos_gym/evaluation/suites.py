"""Suites: named sets of envs to evaluate on, each a JSON file in ``evaluation/suites``.

A suite file names its envs (with constructor arguments, task ids, limits, step limits and
seeds); :func:`load_suite` reads and checks one, :func:`get_suite` finds one by name or path,
and :func:`suite_entries` turns a suite (or env ids given one by one) into the entries a run
plans (:mod:`lumos_gym.evaluation.plan`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from lumos_gym.envs.registration import resolve_env_id
from lumos_gym.errors import EvaluationError, LumosGymError

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
        excluded: the entries of the same env in the suites this one excludes (its ``exclude``):
            their tasks are left out of this entry's (by id, and by question text).
    """

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    limit: int | None = None
    task_ids: tuple[str, ...] | None = None
    max_steps: int | None = None
    seeds: tuple[int, ...] | None = None
    excluded: tuple[SuiteEntry, ...] = ()


#: What a suite is for (its file's ``role``): ``test`` suites report results and are never used
#: to choose anything; ``validation`` suites are where choices are made (checkpoints, learning
#: rates, round limits); a ``development`` suite is for trying agents and diagnosing them.
SUITE_ROLES = ("test", "validation", "development")


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
    role: str = ""
    exclude: tuple[str, ...] = ()

    def episodes(self) -> int | None:
        """Return the number of episodes when every entry lists its task ids, else None."""
        total = 0
        for entry in self.entries:
            if entry.task_ids is None:
                return None  # known only once the env is built
            count = len(entry.task_ids[: entry.limit])
            total += count * len(entry.seeds or self.seeds)
        return total


_SUITE_KEYS = {"name", "aliases", "description", "source", "seeds", "max_steps", "envs", "role",
               "exclude"}
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
    (default ``[0]``), ``max_steps`` (every env's step limit), ``source`` (a note), ``role``
    (one of :data:`SUITE_ROLES`) and ``exclude`` (suites whose tasks this one leaves out: a test
    suite excludes the development suite's tasks), and
    ``envs``: a list of ``{"env": ID, "kwargs": {...}, "limit": N, "task_ids": [...],
    "max_steps": N, "seeds": [...]}`` with only ``env`` required.

    Raises:
        EvaluationError: the file is not valid JSON, has unknown or ill-typed fields, or names
            an env that is not registered here; the message names the file and the env.
    """
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
    role = data.get("role", "")
    if role and role not in SUITE_ROLES:
        raise EvaluationError(f"suite file {shown}: role {role!r} is not one of "
                              f"{', '.join(SUITE_ROLES)}")
    exclude = data.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        raise EvaluationError(f"suite file {shown}: exclude must be a list of suite names")
    return Suite(
        name, str(data.get("description", "")), tuple(entries), seeds,
        tuple(str(a) for a in aliases), shown, hashlib.sha256(text.encode()).hexdigest(),
        str(role), tuple(exclude),
    )


def _suite_files(folder: str | Path | None = None) -> Iterator[tuple[str, Path]]:
    if folder is not None:
        for path in sorted(Path(folder).glob("*.json")):
            yield str(path), path
        return
    shipped = resources.files("lumos_gym.evaluation").joinpath("suites")
    for item in sorted(shipped.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            yield f"lumos_gym/evaluation/suites/{item.name}", Path(str(item))


def load_suites(folder: str | Path | None = None) -> tuple[dict[str, Suite], dict[str, str]]:
    """Load every suite file of ``folder`` (default: the package's ``evaluation/suites``).

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

    A ``.json`` file is read first; a shipped suite's name wins over another file of that name.

    Raises:
        EvaluationError: an unknown name, a folder, or a suite file that does not load.
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
    if Path(name).is_file():  # not a name: the file says what is wrong with it
        return load_suite(name)
    if Path(name).is_dir():
        raise EvaluationError(f"{name} is a folder; a suite is one of {known}, or a .json file")
    raise EvaluationError(f"unknown suite {name!r}; known: {known} (or a suite .json file)")


class _SuiteTable(Mapping):
    """Name → the entries of that shipped suite, loaded on first use (kept for old callers)."""

    def __getitem__(self, name: str) -> tuple[SuiteEntry, ...]:
        return get_suite(name).entries

    def __iter__(self) -> Iterator[str]:
        return iter(load_suites()[0])

    def __len__(self) -> int:
        return len(load_suites()[0])


#: Suite name → its entries (read from ``lumos_gym/evaluation/suites/*.json``).
SUITES: Mapping[str, tuple[SuiteEntry, ...]] = _SuiteTable()


def _excluded(suite: Suite, entry: SuiteEntry) -> tuple[SuiteEntry, ...]:
    """The entries of ``entry``'s env in the suites ``suite`` excludes."""
    found = []
    for name in suite.exclude:
        other = get_suite(name)
        if other.name == suite.name:
            raise EvaluationError(f"suite {suite.name} excludes itself")
        found += [e for e in other.entries if e.env_id == entry.env_id]
    return tuple(found)


def suite_role(name: str) -> str:
    """The role of the suite ``name`` (``""`` when its file gives none)."""
    return get_suite(name).role


def suite_entries(
    *, envs: Sequence[str] = (), suite: str | None = None, limit: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[SuiteEntry]:
    """Return the envs to run: the named ones, else the suite's (``offline`` when neither)."""
    if envs and suite:
        raise EvaluationError("give --env or --suite, not both")
    if envs:
        entries = [SuiteEntry(resolve_env_id(e)) for e in envs]
    else:
        chosen = get_suite(suite or DEFAULT_SUITE)
        entries = [replace(e, seeds=e.seeds or chosen.seeds, excluded=_excluded(chosen, e))
                   for e in chosen.entries]
    extra = dict(env_kwargs or {})
    return [
        replace(e, kwargs={**e.kwargs, **extra}, limit=limit if limit is not None else e.limit)
        for e in entries
    ]
