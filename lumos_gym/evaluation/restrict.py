"""``lumos-gym restrict``: bring a results folder to the current version of its suite's file.

A suite file changes without its episodes changing: a test suite that now leaves out the tasks
of the development suite (``exclude``), a ``role`` added. A folder scored under the older file
then fails ``leaderboard --validate`` (another version of the suite file), though every episode
the suite now plans is in it, played exactly as it would be now (episode keys name the env, its
arguments, the task and the seed).

:func:`restrict_folder` plans the suite as it is now, keeps the folder's episodes of that plan
and drops the others, and refuses when a planned episode is missing (restricting never makes
episodes up: run ``evaluate --resume`` for those). It rewrites, atomically, the episode file
(gzipped or not as it was), ``summary.json`` (recomputed from the kept episodes), and
``run.json``: the suite's record (its file's checksum), the plan, each env's task ids and
excluded tasks, and a ``restricted`` entry (the commit that restricted, the suite file's
checksums before and after, the episodes dropped per env and their keys). The agent's outputs,
the run's configuration and fingerprint do not change.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.agents.plugins import reads_gold_answers
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.plan import plan_episodes
from lumos_gym.evaluation.rescore import write_episodes
from lumos_gym.evaluation.results import ResultsError, episodes_path, read_episodes, read_results
from lumos_gym.evaluation.suites import get_suite, suite_entries
from lumos_gym.evaluation.summary import provenance_for_summary, summarize
from lumos_gym.gitinfo import git_provenance
from lumos_gym.jsonl import write_json_atomic

__all__ = ["RestrictReport", "restrict_folder"]


@dataclass
class RestrictReport:
    """What restricting one folder did (or would do)."""

    folder: Path
    suite: str
    kept: int = 0
    dropped: dict[str, list[str]] = field(default_factory=dict)
    sha256_before: str | None = None
    sha256_after: str = ""
    written: bool = False

    @property
    def dropped_count(self) -> int:
        """Episodes dropped, over every env."""
        return sum(len(keys) for keys in self.dropped.values())

    def line(self) -> str:
        """One line saying what happened to the folder."""
        verb = "rewrote" if self.written else "would rewrite"
        per_env = ", ".join(f"{env.split('/')[-1]} {len(keys)}"
                            for env, keys in sorted(self.dropped.items()))
        return (f"{self.folder}: kept {self.kept} episodes of suite {self.suite}, dropped "
                f"{self.dropped_count}{f' ({per_env})' if per_env else ''}; {verb} the folder")


def restrict_folder(folder: str | Path, suite: str, *, write: bool = True) -> RestrictReport:
    """Keep the folder's episodes of ``suite`` as its file is now (see the module docstring).

    Raises:
        EvaluationError: not a results folder, a run of another suite, a shard, or a folder
            that lacks an episode the suite now plans.
    """
    folder = Path(folder)
    try:
        results = read_results(folder)
        if results.problems:
            raise ResultsError(f"unreadable episode lines ({results.problems[0]})")
        records, _ = read_episodes(episodes_path(folder), strict=True)
    except ResultsError as e:
        raise EvaluationError(f"{folder}: {e}") from None
    run = results.run
    chosen = get_suite(suite)
    recorded = run.get("suite") if isinstance(run.get("suite"), Mapping) else None
    if recorded is None or recorded.get("name") not in (chosen.name, *chosen.aliases):
        named = recorded.get("name") if recorded else "no suite (envs named one by one)"
        raise EvaluationError(f"{folder}: a run of {named}, not of suite {chosen.name}")
    if (run.get("plan") or {}).get("shard"):
        raise EvaluationError(f"{folder}: a shard; merge the shards first (lumos-gym merge)")
    agent = run.get("agent")
    name = agent.get("name") if isinstance(agent, Mapping) else None
    plan = plan_episodes(suite_entries(suite=suite), privileged=reads_gold_answers(str(name)))
    planned = set(plan.by_key)
    missing = sorted(planned - set(records))
    if missing:
        raise EvaluationError(
            f"{folder}: {len(missing)} episode(s) that suite {chosen.name} plans are not in it "
            f"(e.g. {missing[0]}): restricting only drops episodes; play them with lumos-gym "
            f"evaluate --resume --out {folder}"
        )
    report = RestrictReport(folder, chosen.name, sha256_before=recorded.get("sha256"),
                            sha256_after=chosen.sha256)
    for key, record in records.items():
        if key not in planned:
            report.dropped.setdefault(str(record.get("env_id")), []).append(key)
    report.kept = len(planned)
    if write:
        kept = [record for key, record in records.items() if key in planned]
        _write_back(folder, kept, run, plan, report, chosen)
        report.written = True
    return report


def _write_back(
    folder: Path, kept: list[dict[str, Any]], run: dict[str, Any], plan: Any,
    report: RestrictReport, chosen: Any,
) -> None:
    """Write the kept episodes, ``run.json`` (suite, plan, envs, ``restricted``), the summary."""
    path = episodes_path(folder)
    assert path is not None
    write_episodes(path, kept)
    run["suite"] = {**run["suite"], "sha256": chosen.sha256}
    described = plan.describe()
    shard = (run.get("plan") or {}).get("shard")
    run["plan"] = {**described, "shard": shard}
    now = {p.entry.env_id: p.provenance for p in plan.envs}
    for env in run.get("envs") or ():
        if isinstance(env, dict) and env.get("env_id") in now:
            fresh = now[env["env_id"]]
            env["task_ids"] = fresh.get("task_ids")
            if "excluded" in fresh:
                env["excluded"] = fresh["excluded"]
    run.setdefault("restricted", []).append({
        "git": git_provenance(), "suite": chosen.name,
        "suite_sha256_before": report.sha256_before, "suite_sha256_after": chosen.sha256,
        "kept": report.kept, "dropped": {env: len(keys) for env, keys in report.dropped.items()},
        "dropped_keys": sorted(k for keys in report.dropped.values() for k in keys),
    })
    write_json_atomic(folder / "run.json", run)
    summary = summarize(kept)
    summary["provenance"] = provenance_for_summary(run)
    write_json_atomic(folder / "summary.json", summary)


def main_lines(folders: list[str], suite: str, *, write: bool) -> int:
    """Restrict each folder and print a line for it; 1 when one could not be restricted."""
    status = 0
    for folder in folders:
        try:
            print(restrict_folder(folder, suite, write=write).line())
        except EvaluationError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
    return status

