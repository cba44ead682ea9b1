"""Results folders of ``lumos-gym evaluate``: the one reader of their episode files.

A results folder holds ``episodes.jsonl`` (one episode record a line, as
:class:`lumos_gym.episodes.EpisodeRecord` writes it; ``episodes.jsonl.gz`` once published),
``run.json`` (the run's provenance and configuration fingerprint) and ``summary.json``
(:func:`lumos_gym.evaluation.summary.summarize`). Each episode has a key (:func:`episode_key`:
its env, arguments, task and seed); :func:`read_episodes` reads a file by key and
:func:`read_results` a whole folder, for merging, the leaderboard, validation and a resumed run.

**Failures of the machinery.** An episode that ended in ``infra-error`` (:func:`is_infra_error`:
a backend or env server failed, not the agent) has no score: summaries leave it out of every
mean, standard error and interval and count it apart (:mod:`lumos_gym.evaluation.summary`).
``lumos-gym evaluate --resume`` plays such episodes again; the leaderboard flags a row that
still has any and ``--validate`` refuses its folder. Records written before the status existed
called these ``agent-error``; :func:`episode_status` reads the ones whose ``reason`` is a known
message of the machinery (:data:`LEGACY_INFRA_REASONS`) as ``infra-error`` (the file is not
rewritten).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.episodes import INFRA_ERROR
from lumos_gym.errors import LumosGymError


class ResultsError(LumosGymError):
    """A results folder cannot be read, or shards cannot be merged."""


# ------------------------------------------------------------------ failures of the machinery
#: The ``reason`` of an ``agent-error`` record that was a failure of the machinery, written
#: before the ``infra-error`` status existed; each pattern matches the whole reason, as the
#: backend wrote it: the openvino backend's request that the pipeline dropped (``IGNORED``: no
#: room in its key/value cache), and the openai backend's transient failure (a timeout, a
#: connection error, HTTP 429 or 5xx) that lasted through every retry.
LEGACY_INFRA_REASONS = (
    re.compile(r"the OpenVINO pipeline did not finish the request \(\w+\)"),
    re.compile(r"POST \S+ .+ \(gave up after \d+ attempts\)", re.DOTALL),
)


def episode_status(record: Mapping[str, Any]) -> str:
    """Return an episode record's status, an old record's failure of the machinery migrated.

    ``agent-error`` with one of the :data:`LEGACY_INFRA_REASONS` reads as ``infra-error``; any
    other record's status is its own.
    """
    status = str(record.get("status", ""))
    if status == "agent-error":
        reason = str(record.get("reason") or "")
        if any(pattern.fullmatch(reason) for pattern in LEGACY_INFRA_REASONS):
            return INFRA_ERROR
    return status


def is_infra_error(record: Mapping[str, Any]) -> bool:
    """Whether an episode ended in ``infra-error`` (a backend or env server failed).

    Such an episode has no score: summaries leave it out of their means and count it apart.
    """
    return episode_status(record) == INFRA_ERROR


def infra_errors(records: Iterable[Mapping[str, Any]]) -> int:
    """Return how many of ``records`` ended in ``infra-error``."""
    return sum(is_infra_error(r) for r in records)


# ------------------------------------------------------------------------- episode keys
def env_key(env_id: object, env_kwargs: object) -> str:
    """Return the key of one env of a run: its id and constructor arguments, as JSON.

    ``run.json``'s env records and the episode records of one env share it (resume compares
    the two runs' envs by it; ``rescore`` groups episodes by it).
    """
    return json.dumps([env_id, env_kwargs], sort_keys=True, default=str)


def episode_key(env_id: str, env_kwargs: Mapping[str, Any], task_id: str, seed: int) -> str:
    """Return the key of one episode: env id, constructor arguments, task id and seed."""
    kwargs = json.dumps(dict(env_kwargs), sort_keys=True)
    return f"{env_id}|{kwargs}|{task_id}|seed={int(seed)}"


def record_key(record: Mapping[str, Any]) -> str:
    """Return an episode record's key, recomputed from its fields (older files had no seed)."""
    if "env_id" in record and "task_id" in record:
        return episode_key(
            record["env_id"], record.get("env_kwargs") or {}, record["task_id"],
            int(record.get("seed") or 0),
        )
    return str(record["key"])


def keys_sha256(keys: Iterable[str]) -> str:
    """Return the SHA-256 of sorted episode keys (one a line): the identity of a plan."""
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


# -------------------------------------------------------------------------- reading folders
@dataclass
class ResultsFolder:
    """A results folder read for merging: its run, its valid records and what was wrong."""

    path: Path
    run: dict[str, Any]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def shard(self) -> tuple[int, int] | None:
        """Return the folder's ``(i, n)`` shard, or None for a whole run."""
        shard = (self.run.get("plan") or {}).get("shard")
        return (int(shard[0]), int(shard[1])) if shard else None

    @property
    def planned(self) -> list[str] | None:
        """Return the episode keys the run planned, when run.json lists them."""
        keys = (self.run.get("plan") or {}).get("keys")
        return list(keys) if keys is not None else None


_REQUIRED = ("env_id", "task_id", "status")


EPISODES_FILES = ("episodes.jsonl", "episodes.jsonl.gz")
"""The episode file of a results folder: as a run writes it, or gzipped to publish it."""


def episodes_path(folder: str | Path) -> Path | None:
    """The episode file of ``folder`` (``episodes.jsonl``, else ``episodes.jsonl.gz``), or None.

    A run writes and resumes ``episodes.jsonl``; a published results folder (the comparison
    suite's rows in ``leaderboards/``) may hold it gzipped, which every reader accepts.
    """
    for name in EPISODES_FILES:
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


def read_episodes(
    path: str | Path, *, strict: bool = False
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Read the episode records of an ``episodes.jsonl``, by episode key.

    The one reader of episode files: merge, the leaderboard, validation and a resumed run all
    use it. Each line is one JSON record; its key is recomputed from its env, arguments, task
    and seed (:func:`record_key`).

    By default (reading results) every valid record is kept, with its ``key``: a torn last
    line (a killed run), a line that is not an episode record (no ``env_id``, ``task_id`` or
    ``status``) and a second record of the same episode are skipped, each named in the
    problems returned. With ``strict`` (a file a run appends to, its torn last line already
    cut) every line must be a record with a key, kept as written; a second record of an
    episode is skipped and named too (a resumed run drops it from the file). Read as results
    (not ``strict``), an old record of a failure of the machinery gets the status
    ``infra-error`` (:func:`episode_status`); the file is left as it is.

    Returns:
        ``(records, problems)``: key → record, and one line per skipped line naming it.

    Raises:
        ResultsError: with ``strict``, the first line that is not an episode record.
    """
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ResultsError(f"{path} is not a readable gzip file ({e})") from None
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the empty rest after the last newline
    torn = 0 if data.endswith(b"\n") else len(lines)
    records: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for n, raw in enumerate(lines, 1):
        if not strict and not raw.strip():
            continue
        if n == torn:
            problem = "a truncated last line (a killed run)"
        else:
            try:
                key, record = _episode_record(raw, () if strict else _REQUIRED)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                problem = f"not an episode record ({e})"
            else:
                if key not in records:
                    records[key] = record if strict else {
                        **record, "key": key, "status": episode_status(record)}
                else:  # skipped in strict mode too: a run never writes an episode twice
                    problems.append(f"{path}:{n}: a second record of {key}, skipped")
                continue
        if strict:
            raise ResultsError(f"{path}:{n} is {problem}")
        problems.append(f"{path}:{n}: {problem}, skipped")
    return records, problems


def _episode_record(raw: bytes, required: Sequence[str]) -> tuple[str, Any]:
    """Parse one line into ``(key, record)``; raise ValueError (or a lookup error) if not one."""
    record = json.loads(raw)
    missing = [k for k in required if k not in record]
    if missing:
        raise ValueError(f"no {', '.join(missing)}")
    return record_key(record), record


def read_results(path: str | Path) -> ResultsFolder:
    """Read a results folder, keeping every valid episode record.

    A line that is not a JSON episode record (a torn last line of a killed run, a corrupt or
    hand-edited line), or a second record of the same episode, is skipped and named in
    ``problems``; the other records still load (:func:`read_episodes`).

    Raises:
        ResultsError: no ``episodes.jsonl`` (or ``.gz``), or no readable ``run.json`` (without
            it the configuration of the results cannot be checked).
    """
    folder = Path(path)
    episodes = episodes_path(folder)
    if episodes is None:
        raise ResultsError(f"{folder} is not a results folder (no episodes.jsonl)")
    try:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        if not isinstance(run, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        raise ResultsError(f"{folder} has no run.json (its configuration is unknown)") from None
    except ValueError as e:
        raise ResultsError(f"{folder / 'run.json'} is not valid JSON ({e})") from None
    records, problems = read_episodes(episodes)
    return ResultsFolder(folder, run, records, problems)


# ------------------------------------------------------------------------ comparing runs
def differences(
    a: Any, b: Any, *, names: tuple[str, str] = ("in the first", "in the second"),
    rel_tol: float = 0.0, prefix: str = "",
) -> list[str]:
    """The dotted paths where two JSON values differ, each with both values.

    Numbers compare within ``rel_tol`` (relative); a key present on one side only is named as
    missing on the other.
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                out.append(f"{prefix}{key} (missing {names[0 if key not in a else 1]})")
                continue
            out += differences(a[key], b[key], names=names, rel_tol=rel_tol,
                               prefix=f"{prefix}{key}.")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for n, (x, y) in enumerate(zip(a, b, strict=True))
                for d in differences(x, y, names=names, rel_tol=rel_tol,
                                     prefix=f"{prefix}{n}.")]
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        if math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=1e-12 if rel_tol else 0.0):
            return []
    elif a == b:
        return []
    return [f"{prefix.rstrip('.')} ({a!r} {names[0]}, {b!r} {names[1]})"]
