"""``lumos-gym rescore``: score a results folder's episodes again with today's scorers.

A scorer that changes (a defect fixed, an official rule adopted: see docs/metrics.md) leaves
every results folder written before it scored by the old rule. Running the agents again would
cost hours and change nothing but the scores, so the episodes are scored again from what they
recorded:

* **Envs whose episodes end with ``Answer(...)``** (math, QA, code, multimodal): the recorded
  prediction is scored by the env's own :meth:`~lumos_gym.envs.base.LumosEnv.score` on the
  same task. Episodes that ended without an answer (a step limit, an agent error) keep their
  metrics: no scorer ran on them.
* **Envs that end episodes themselves** (web, games): the recorded actions are replayed in a
  fresh env on the same task and seed (:class:`~lumos_gym.envs.replay.Replay`), and the env's
  final metrics are taken, as the runner took them. Every observation of the replay must equal
  the recorded one, but for the reward itself where the last one shows it (WebShop binds the
  purchase's reward to a variable); an episode whose replay differs otherwise keeps its old
  metrics and is counted as ``diverged`` (the env is not deterministic on it, or its data
  changed), never silently rescored. The recorded observations stay as the agent saw them.

The folder is rewritten in place, atomically (its episode file, gzipped or not as it was,
``summary.json``, and ``run.json``, whose envs get the ``scorer`` they were scored with and whose
``rescored`` list gets an entry: the commit, the envs, the counts). The run's configuration and
fingerprint do not change: the agent's outputs are the same.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.envs.registration import make_env
from lumos_gym.envs.replay import Replay
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.results import (
    ResultsError,
    env_key,
    episodes_path,
    read_episodes,
    read_results,
)
from lumos_gym.evaluation.summary import provenance_for_summary, summarize
from lumos_gym.gitinfo import git_provenance
from lumos_gym.jsonl import write_json_atomic

__all__ = ["EnvRescore", "RescoreReport", "rescore_folder", "write_episodes"]

#: Statuses whose metrics came from the env's scorer (the others never reached one).
SCORED_STATUSES = ("completed", "step-limit")


@dataclass
class EnvRescore:
    """What rescoring did to one env's episodes (an env id and its arguments)."""

    env_id: str
    kwargs: dict[str, Any]
    scorer: str | None = None
    episodes: int = 0
    rescored: int = 0
    changed: int = 0
    diverged: int = 0
    reward_before: float = 0.0
    reward_after: float = 0.0
    examples: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The entry ``run.json``'s ``rescored`` list keeps for this env."""
        return {"env_id": self.env_id, "kwargs": self.kwargs, "scorer": self.scorer,
                "episodes": self.episodes, "rescored": self.rescored, "changed": self.changed,
                "diverged": self.diverged,
                "mean_reward_before": round(self.reward_before / max(self.episodes, 1), 6),
                "mean_reward_after": round(self.reward_after / max(self.episodes, 1), 6)}


@dataclass
class RescoreReport:
    """What :func:`rescore_folder` did to one results folder."""

    folder: Path
    envs: list[EnvRescore]
    written: bool

    @property
    def changed(self) -> int:
        """Episodes whose metrics changed."""
        return sum(e.changed for e in self.envs)

    @property
    def diverged(self) -> int:
        """Episodes whose replay did not reproduce the recorded observations."""
        return sum(e.diverged for e in self.envs)

    def lines(self) -> list[str]:
        """One line per env: the scorer, the counts and the mean reward before and after."""
        out = []
        for e in self.envs:
            n = max(e.episodes, 1)
            out.append(
                f"{self.folder}: {e.env_id} {json.dumps(e.kwargs, sort_keys=True)} "
                f"[{e.scorer}]: {e.episodes} episodes, {e.rescored} rescored, {e.changed} "
                f"changed, {e.diverged} diverged; mean reward {e.reward_before / n:.4f} -> "
                f"{e.reward_after / n:.4f}")
            out += [f"    {example}" for example in e.examples]
        return out


def _answer_metrics(
    env: Any, task: Any, record: Mapping[str, Any]
) -> dict[str, float] | None:
    """The metrics of an answer-ending episode under the env's scorer (None: not rescorable)."""
    if record.get("status") != "completed":
        return None
    return dict(env.unwrapped.score(record.get("prediction") or "", task))


def _same_but_reward(recorded: str, replayed: str, reward: float | None) -> bool:
    """Whether the recorded last observation is the replayed one but for the reward it shows.

    A web env binds the purchase's reward to the last variable (``R12 = 0.8``): under another
    scorer the number there differs, and nothing else may. The reward the agent saw is not kept
    apart from the record's, which an earlier rescore may have changed, so any number is
    accepted where the replay shows its reward.
    """
    if recorded == replayed:
        return True
    if reward is None:
        return False
    pieces = re.split(rf"(?<![\d.]){re.escape(str(float(reward)))}(?![\d])", replayed)
    if len(pieces) == 1:
        return False
    number = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
    return re.fullmatch(number.join(re.escape(p) for p in pieces), recorded) is not None


def _replayed_metrics(
    env: Any, record: Mapping[str, Any]
) -> tuple[dict[str, float] | None, float | None, str | None]:
    """Replay an episode's actions: ``(metrics, reward, None)``, or ``(None, None, why)``."""
    actions = [t for t in record.get("turns") or () if "action" in t]
    replay = Replay(env, record["task_id"], seed=record.get("seed", 0))
    outcome = None
    for n, turn in enumerate(actions, 1):
        outcome = replay.step(turn["action"])
        ended = outcome.terminated or outcome.truncated
        recorded = str(turn.get("observation"))
        if ended and n == len(actions):  # the last observation may show the reward itself
            same = _same_but_reward(recorded, outcome.observation, outcome.reward)
        else:
            same = outcome.observation == recorded
        if not same:
            return None, None, f"step {n}: the observation differs from the recorded one"
        if ended and n < len(actions):
            return None, None, f"the replay ended at step {n} of {len(actions)}"
    if outcome is None:
        return None, None, "no action to replay"
    if outcome.terminated:
        return dict(outcome.info.get("metrics") or {}), outcome.reward, None
    if outcome.truncated and outcome.info.get("metrics_so_far"):
        return dict(outcome.info["metrics_so_far"]), outcome.reward, None
    return None, None, "the replay did not end the episode"


def _rescore_env(
    env_id: str, kwargs: Mapping[str, Any], records: Sequence[dict[str, Any]],
    make: Callable[..., Any],
) -> EnvRescore:
    """Rescore one env's records in place; return what changed."""
    result = EnvRescore(env_id, dict(kwargs), episodes=len(records))
    env = make(env_id, **dict(kwargs))
    try:
        unwrapped = env.unwrapped
        result.scorer = getattr(unwrapped, "scorer", None)
        by_answer = bool(getattr(unwrapped, "ends_by_answer", True))
        tasks = {task.id: task for task in getattr(unwrapped, "tasks", ())}
        for record in records:
            result.reward_before += float(record.get("reward") or 0.0)
            if record["task_id"] not in tasks:
                result.diverged += 1
                result.examples.append(f"{record['task_id']}: not among the env's tasks now")
                result.reward_after += float(record.get("reward") or 0.0)
                continue
            if by_answer:
                metrics = _answer_metrics(env, tasks[record["task_id"]], record)
                reward = None if metrics is None else float(metrics[unwrapped.primary_metric])
                why = None
            elif record.get("status") in SCORED_STATUSES and record.get("metrics"):
                metrics, reward, why = _replayed_metrics(env, record)
            else:
                metrics, reward, why = None, None, None
            if why is not None:
                result.diverged += 1
                if len(result.examples) < 5:
                    result.examples.append(f"{record['task_id']}: diverged, {why}")
            if metrics is None or reward is None:
                result.reward_after += float(record.get("reward") or 0.0)
                continue
            result.rescored += 1
            if metrics != record.get("metrics") or reward != record.get("reward"):
                result.changed += 1
                if len(result.examples) < 5:
                    result.examples.append(
                        f"{record['task_id']}: reward {record.get('reward')} -> {reward}")
                record["metrics"], record["reward"] = metrics, reward
            result.reward_after += reward
    finally:
        env.close()
    return result


def write_episodes(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Write the records where they were read from, atomically, gzipped if the file was."""
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    tmp.write_bytes(data)
    tmp.replace(path)


def rescore_folder(
    folder: str | Path, *, envs: Sequence[str] = (), write: bool = True,
    make: Callable[..., Any] = make_env,
) -> RescoreReport:
    """Score a results folder's episodes again with the current scorers (module docstring).

    Args:
        folder: a results folder (``episodes.jsonl`` or ``.gz``, ``run.json``).
        envs: rescore only these env ids (the ``lumos/`` prefix may be left out); all if empty.
        write: rewrite the folder (False: only report what would change).
        make: builds an env from its id and arguments (``gym.make`` with a clear error).

    Raises:
        EvaluationError: not a results folder, or one whose episodes cannot be read.
    """
    folder = Path(folder)
    try:
        results = read_results(folder)
        if results.problems:
            raise ResultsError(f"unreadable episode lines ({results.problems[0]}); fix or "
                               "merge the folder first")
        # the records as written (read_results adds a key to each), rewritten as they were
        records, _ = read_episodes(episodes_path(folder), strict=True)
    except ResultsError as e:
        raise EvaluationError(f"{folder}: {e}") from None
    wanted = {e if "/" in e else f"lumos/{e}" for e in envs}
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records.values():
        if wanted and record["env_id"] not in wanted:
            continue
        groups.setdefault(env_key(record["env_id"], record.get("env_kwargs") or {}),
                          []).append(record)
    if wanted and not groups:
        raise EvaluationError(f"{folder} has no episodes of {', '.join(sorted(wanted))}")
    report = RescoreReport(folder, [], write)
    for key in sorted(groups):
        env_id, kwargs = json.loads(key)
        report.envs.append(_rescore_env(env_id, kwargs, groups[key], make))
    if write:
        _write_back(folder, records, results.run, report)
    return report


def _write_back(
    folder: Path, records: Mapping[str, dict[str, Any]], run: dict[str, Any],
    report: RescoreReport,
) -> None:
    """Write the rescored episodes, ``run.json`` (scorers, a ``rescored`` entry) and the summary."""
    path = episodes_path(folder)
    assert path is not None
    ordered = list(records.values())
    write_episodes(path, ordered)
    scorers = {env_key(e.env_id, e.kwargs): e.scorer for e in report.envs}
    for env in run.get("envs") or ():
        if isinstance(env, dict):
            key = env_key(str(env.get("env_id")), env.get("kwargs") or {})
            if key in scorers:
                env["scorer"] = scorers[key]
    run.setdefault("rescored", []).append({
        "git": git_provenance(), "envs": [e.as_json() for e in report.envs],
        "changed": report.changed, "diverged": report.diverged})
    write_json_atomic(folder / "run.json", run)
    summary = summarize(ordered)
    summary["provenance"] = provenance_for_summary(run)
    write_json_atomic(folder / "summary.json", summary)


def print_report(report: RescoreReport, *, file: Any = None) -> None:
    """Print a report's lines and its closing count (to standard output by default)."""
    file = sys.stdout if file is None else file
    for line in report.lines():
        print(line, file=file)
    verb = "rewrote" if report.written else "would rewrite"
    print(f"{report.folder}: {report.changed} episodes changed, {report.diverged} diverged; "
          f"{verb} the folder", file=file)
