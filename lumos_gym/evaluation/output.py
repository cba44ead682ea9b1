"""The results folder a run writes: its append-only episodes file, and when it may append.

A run appends each finished episode to ``episodes.jsonl`` through :class:`ResultsFile` (one
line, flushed and fsynced, so a killed run loses nothing). A folder that already holds
episodes is refused unless the run resumes the same run: :func:`check_existing` (the agent
and the plan, before any model loads) and :func:`check_resumable` (the models and the shard,
once built).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym import __version__
from lumos_gym.agents.base import Agent
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.identity import adapter_weights, portable_paths
from lumos_gym.evaluation.results import ResultsError, differences, env_key, read_episodes
from lumos_gym.jsonl import append_jsonl, atomic_writer, drop_partial_line


class ResultsFile:
    """An append-only JSONL file of episode records that survives a kill.

    Each record is one line, flushed and fsynced. On opening, a torn last line is cut off and
    the complete lines are read back (:func:`~lumos_gym.evaluation.results.read_episodes`,
    strictly: their keys, recomputed from each record's env, arguments, task and seed, say
    which episodes are done); any other unreadable line is an error, never silently dropped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        drop_partial_line(path)
        if path.exists():
            try:
                self.done, duplicates = read_episodes(path, strict=True)
            except ResultsError as e:
                raise EvaluationError(
                    f"{e}; move the file away or pass another --out (lumos-gym merge skips "
                    "such lines)"
                ) from None
            if duplicates:  # a copied line: drop it, or validation fails the whole run
                for problem in duplicates:
                    print(f"warning: {problem.removesuffix(', skipped')}, dropped from the file",
                          file=sys.stderr)
                with atomic_writer(path) as f:
                    for record in self.done.values():
                        append_jsonl(f, record)
        self._file: Any = None  # opened by the first append

    def forget(self, keys: Sequence[str]) -> int:
        """Drop the records of ``keys`` from the file (rewritten atomically); return how many.

        A resumed run plays them again (the episodes that ended in ``infra-error``): the file
        then holds each episode once, with its new record.
        """
        dropped = [k for k in keys if k in self.done]
        if not dropped:
            return 0
        for key in dropped:
            del self.done[key]
        with atomic_writer(self.path) as f:
            for record in self.done.values():
                append_jsonl(f, record)
        return len(dropped)

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


class TokensFile:
    """The append-only token sidecar of a run (``tokens.jsonl``, :mod:`lumos_gym.agents.tokens`).

    One line per episode, flushed and fsynced as :class:`ResultsFile` does; a torn last line
    is cut on opening. A resumed run appends the episodes it plays.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        drop_partial_line(path)
        self._file: Any = None

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one episode's call entries durably."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (close())
        append_jsonl(self._file, row)

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def check_existing(
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


def check_resumable(
    out_dir: Path, expected: Mapping[str, Any], shard: tuple[int, int] | None = None,
    adapters: Mapping[str, Any] | None = None, envs: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Refuse to append to results made with another agent, model configuration or shard.

    ``adapters`` (:func:`~lumos_gym.evaluation.identity.adapter_weights` of this run) is
    compared with the recorded run's where both name adapter weights: a retrained adapter under
    the same name is another configuration. ``envs`` (this run's env provenance) is compared
    env by env with the recorded one: an env with the same arguments whose tasks' checksum
    differs (another data file, a changed generator) holds other tasks under the same ids; an
    env scored with another scorer (``scorer`` in each env's record: a scorer fixed since, or
    another chosen with the ``scorer`` option) holds episodes scored by another rule, so the
    folder is refused with a pointer to ``lumos-gym rescore``. A folder written before scorers
    were recorded is resumed with that advice as a warning.

    Results of another lumos-gym version are resumed with a warning (the episodes already
    there were scored by that version).
    """
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
    if not isinstance(recorded_run, Mapping):
        recorded_run = {}
    weights = adapter_weights(recorded_run)
    if adapters and weights and weights != dict(adapters):
        raise EvaluationError(_other_configuration(
            out_dir, {"adapter weights": weights}, {"adapter weights": dict(adapters)}))
    changed = _changed_tasks(recorded_run.get("envs"), envs)
    if changed:
        raise EvaluationError(
            f"{out_dir} holds episodes of other tasks of {', '.join(changed)} (the same env "
            "arguments, another checksum of its tasks: another data file or generator); pass "
            "another --out, or delete the folder to start again")
    rescored, unrecorded = _changed_scorers(recorded_run.get("envs"), envs)
    if rescored:
        raise EvaluationError(
            f"{out_dir} holds episodes scored by another scorer ({'; '.join(rescored)}); score "
            f"them with this one first (lumos-gym rescore {out_dir}), or pass another --out")
    if unrecorded:
        print(f"warning: {out_dir} does not record the scorer of {', '.join(unrecorded)} (it "
              "was written before lumos-gym recorded scorers); if its scores predate this "
              f"version's scorers, run lumos-gym rescore {out_dir}", file=sys.stderr)
    plan = recorded_run.get("plan") or {}
    before = tuple(plan["shard"]) if plan.get("shard") else None
    if "plan" in recorded_run and before != shard:
        shown = [f"shard {s[0]}/{s[1]}" if s else "the whole run" for s in (before, shard)]
        raise EvaluationError(f"{out_dir} holds {shown[0]}, not {shown[1]}; pass another --out")
    version = recorded_run.get("lumos_gym")
    if version and version != __version__:
        print(f"warning: {out_dir} was started by lumos-gym {version}, this is {__version__}",
              file=sys.stderr)


def _tasks_by_env(envs: Any) -> dict[str, tuple[str, str]]:
    """(env id and arguments) → (env id, its tasks' checksum), from run.json's ``envs``."""
    out: dict[str, tuple[str, str]] = {}
    for env in envs if isinstance(envs, list) else ():
        if not isinstance(env, Mapping):
            continue
        data = env.get("data")
        checksum = data.get("tasks_sha256") if isinstance(data, Mapping) else None
        if checksum:
            key = env_key(env.get("env_id"), env.get("kwargs"))
            out[key] = (str(env.get("env_id")), str(checksum))
    return out


def _changed_tasks(recorded: Any, now: Sequence[Mapping[str, Any]]) -> list[str]:
    """The envs whose tasks' checksum differs between a recorded run and this one."""
    before, after = _tasks_by_env(recorded), _tasks_by_env(list(now))
    return sorted({after[k][0] for k in before.keys() & after.keys()
                   if before[k][1] != after[k][1]})


def _changed_scorers(
    recorded: Any, now: Sequence[Mapping[str, Any]]
) -> tuple[list[str], list[str]]:
    """Return the envs of both runs scored otherwise, and those the recorded run names no scorer of.

    An env this run names no scorer of (an env class without one) is left out of both.
    """

    def by_key(envs: Any) -> dict[str, Mapping[str, Any]]:
        return {env_key(e.get("env_id"), e.get("kwargs")): e
                for e in (envs if isinstance(envs, list) else ()) if isinstance(e, Mapping)}

    before, after = by_key(recorded), by_key(list(now))
    changed, unrecorded = [], []
    for key in sorted(before.keys() & after.keys()):
        old, new = before[key].get("scorer"), after[key].get("scorer")
        if new is None:
            continue
        if "scorer" not in before[key]:
            unrecorded.append(str(after[key].get("env_id")))
        elif old != new:
            changed.append(f"{after[key].get('env_id')}: {old} there, {new} now")
    return changed, unrecorded


def _other_configuration(out_dir: Path, recorded: Any, now: Any) -> str:
    """The refusal of a folder holding another configuration, naming what differs."""
    found = differences(recorded, json.loads(json.dumps(now, default=str)),
                        names=("there", "now"))
    shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
    return (f"{out_dir} holds results of another configuration ({shown or 'fingerprints differ'});"
            " pass another --out, or delete the folder to start again")
