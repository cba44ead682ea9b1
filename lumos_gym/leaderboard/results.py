"""Results folders of ``lumos-gym evaluate``: metrics with uncertainty, summaries, shards, merge.

A results folder holds ``episodes.jsonl`` (one episode record a line), ``run.json`` (the run's
provenance and configuration fingerprint) and ``summary.json`` (:func:`summarize`).

**Metrics.** Each env reports the metrics of its task type (:data:`METRICS`), read from the
episode records: the first is the env's primary metric, whose per-episode value is the
record's ``reward`` (the env's terminal reward is its primary metric); the others are read
from the record's ``metrics``. An episode that ended without metrics (an agent or tool error,
a context limit) scores 0 on every metric; one that ended in ``infra-error`` is not scored
(below). Each metric gets its mean over episodes, the
standard error of that mean (sample standard deviation / sqrt(n)) and a 95% percentile
bootstrap interval: :data:`BOOTSTRAP_RESAMPLES` resamples of the env's episodes with
replacement, drawn by ``numpy.random.default_rng(BOOTSTRAP_SEED)``, the interval being the
2.5th and 97.5th percentiles of the resampled means. Episodes are sorted by key first, so the
summary depends only on the set of episodes: a sharded run merged equals the whole run.

**Levels.** An env whose tasks have difficulty levels or task families (MathWord's levels,
WorldQA's question families...) has its episodes' ``group`` written by ``lumos-gym evaluate``
(:func:`lumos_gym.leaderboard.plan.task_group`); its summary then also holds ``groups``: the
primary metric per group, with the same standard errors and intervals.

**Suite score.** The unweighted mean over envs of each env's primary-metric mean (every env
counts the same, whatever its number of episodes). Its standard error is
``sqrt(sum of the envs' squared SEs) / number of envs`` (envs are independent); its interval
is a percentile bootstrap resampling the episodes within each env (one generator seeded with
:data:`BOOTSTRAP_SEED`, envs in sorted order).

**Failures of the machinery.** An episode that ended in ``infra-error`` (:func:`is_infra_error`:
a backend or env server failed, not the agent) has no score: it is left out of every mean,
standard error and interval (per env, per level, the suite score and the pooled one) and
counted apart, as ``infra_errors`` beside ``episodes`` (which counts every record) and under
``statuses``; a summary without one has neither key, as before. An env whose every episode
ended so has ``None`` for its means and is left out of the suite score. ``lumos-gym evaluate
--resume`` plays such episodes again; the leaderboard flags a row that still has any and
``--validate`` refuses its folder. Records written before the status existed called these
``agent-error``; :func:`episode_status` reads the ones whose ``reason`` is a known message of
the machinery (:data:`LEGACY_INFRA_REASONS`) as ``infra-error`` (the file is not rewritten).

**Determinism.** Two runs with the same seed give equal summaries apart from the keys in
:data:`NONDETERMINISTIC_KEYS` (``timing``: wall, env, tool and model seconds; ``provenance``:
when, where and with which code the run was made); :func:`comparable` drops them.
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

import numpy as np

from lumos_gym import __version__
from lumos_gym.agents.runner import INFRA_ERROR, STATUSES
from lumos_gym.envs import ENVS
from lumos_gym.envs.registration import fill_from_families
from lumos_gym.errors import LumosGymError
from lumos_gym.jsonl import write_json_atomic
from lumos_gym.leaderboard.provenance import adapter_weights
from lumos_gym.text import table

#: Resamples of each bootstrap interval.
BOOTSTRAP_RESAMPLES = 1000
#: The seed of every bootstrap generator (fixed: summaries are deterministic).
BOOTSTRAP_SEED = 0
#: The coverage of the intervals.
CONFIDENCE = 0.95
#: Resamples drawn per numpy call (bounds memory; the draws do not depend on it).
_CHUNK = 100
#: The version of the summary layout (2: metrics, intervals, suite score, timing apart).
SUMMARY_FORMAT = 2
#: Summary keys that differ between identical runs; :func:`comparable` drops them.
NONDETERMINISTIC_KEYS = ("timing", "provenance")
#: The rule of the suite score, written into every summary.
SCORE_RULE = (
    "unweighted mean over envs of each env's primary-metric mean; se = sqrt(sum se_env^2) / "
    "envs; ci95 = percentile bootstrap resampling episodes within each env"
)


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


# -------------------------------------------------------------------------------- metrics
@dataclass(frozen=True)
class Metric:
    """A metric of a summary.

    Attributes:
        name: its name in the summary.
        key: its key in an episode record's ``metrics``; None for the record's ``reward`` (the
            env's primary metric).
    """

    name: str
    key: str | None = None


#: (task type, the env's primary metric) → the metrics reported, the primary one first; from the
#: env families' records (``metrics`` of :class:`lumos_gym.envs.families.Family`).
METRICS: dict[tuple[str, str], tuple[Metric, ...]] = {}
fill_from_families(METRICS, lambda family: [
    ((family.task_type, primary), tuple(Metric(name, key) for name, key in metrics))
    for primary, metrics in family.metrics.items()
])


def metrics_for(task_type: str | None, primary_metric: str | None) -> tuple[Metric, ...]:
    """Return the metrics of an env; an unknown pair reports its primary metric only."""
    known = METRICS.get((str(task_type), str(primary_metric)))
    return known if known else (Metric(primary_metric or "reward"),)


def env_kind(env_id: str, records: Sequence[Mapping[str, Any]]) -> tuple[str | None, str | None]:
    """Return the task type and primary metric of an env's records.

    Records written by ``lumos-gym evaluate`` carry both; older ones fall back to the env
    class's attributes (None when the env is not registered here).
    """
    for record in records:
        if record.get("task_type") and record.get("primary_metric"):
            return str(record["task_type"]), str(record["primary_metric"])
    try:
        cls = ENVS.get(env_id).env_class()
        return str(cls.task_type), str(cls.primary_metric)
    except Exception:  # an env of a plugin not installed here: report its reward only
        return None, None


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


def resampled_means(
    values: np.ndarray, rng: np.random.Generator, resamples: int, *, chunk: int = _CHUNK
) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of ``values``, drawn ``chunk`` rows at a time.

    The chunk size is part of the draw (numpy's bounded integers do not carry their buffer
    across calls), so each statistic keeps its own to stay reproducible.
    """
    n = len(values)
    means = np.empty(resamples)
    for start in range(0, resamples, chunk):
        stop = min(start + chunk, resamples)
        index = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[index].mean(axis=1)
    return means


def percentile_interval(means: np.ndarray, confidence: float = CONFIDENCE) -> list[float]:
    """The ``confidence`` percentile interval of bootstrap ``means``, as ``[low, high]``."""
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return [float(low), float(high)]


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[float] | None:
    """Return the 95% percentile bootstrap interval of the mean of ``values`` (None if empty)."""
    if not values:
        return None
    rng = np.random.default_rng(seed)
    return percentile_interval(resampled_means(np.asarray(values, dtype=float), rng, resamples))


def metric_stats(values: Sequence[float]) -> dict[str, Any]:
    """Return ``{"mean", "se", "ci95"}`` of per-episode values."""
    mean, se = mean_se(values)
    return {"mean": mean, "se": se, "ci95": bootstrap_ci(values)}


# -------------------------------------------------------------------------------- summary
def _sort_key(record: Mapping[str, Any]) -> str:
    return str(record.get("key") or f"{record['env_id']}|{record.get('task_id')}")


def _counts(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    # infra-error is counted only when an episode has it: the summaries of runs without one
    # keep the layout they always had
    statuses = {s: 0 for s in STATUSES if s != INFRA_ERROR}
    for r in records:
        status = episode_status(r)
        statuses[status] = statuses.get(status, 0) + 1
    steps = [int(r.get("steps", 0)) for r in records]
    return {
        "statuses": statuses,
        "steps": {"total": sum(steps), "mean": sum(steps) / len(steps) if steps else 0.0},
        "invalid_actions": sum(int(r.get("invalid_actions", 0)) for r in records),
        "tool_errors": sum(int(r.get("tool_errors", 0)) for r in records),
        "input_tokens": sum(int(r.get("input_tokens", 0)) for r in records),
        "output_tokens": sum(int(r.get("output_tokens", 0)) for r in records),
    }


def _timing(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {
        name: round(sum(float(r.get(name, 0.0)) for r in records), 3)
        for name in ("wall_s", "env_s", "tool_s", "model_s")
    }


def metric_values(record: Mapping[str, Any], metric: Metric) -> float:
    """Return one episode's value of ``metric`` (0 when the episode has no such metric)."""
    if metric.key is None:
        return float(record.get("reward", 0.0))
    value = (record.get("metrics") or {}).get(metric.key, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


_NO_SCORE: dict[str, Any] = {"mean": None, "se": None, "ci95": None}


def _scored_stats(values: Sequence[float]) -> dict[str, Any]:
    """:func:`metric_stats` of the scored episodes' values; ``None`` for each without any."""
    return metric_stats(values) if values else dict(_NO_SCORE)


def _with_infra(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{"infra_errors": n}`` when ``n`` of ``records`` ended in ``infra-error``, else empty."""
    n = infra_errors(records)
    return {"infra_errors": n} if n else {}


def _env_summary(env_id: str, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    task_type, primary = env_kind(env_id, records)
    metrics = metrics_for(task_type, primary)
    scored = [r for r in records if not is_infra_error(r)]
    stats = {m.name: _scored_stats([metric_values(r, m) for r in scored]) for m in metrics}
    head = stats[metrics[0].name]
    summary = {
        "episodes": len(records),
        **_with_infra(records),
        "task_type": task_type,
        "primary_metric": metrics[0].name,
        "mean": head["mean"],
        "se": head["se"],
        "ci95": head["ci95"],
        "metrics": stats,
        **_counts(records),
    }
    groups = group_stats(scored)
    if groups:
        summary["groups"] = groups
    return summary


def group_stats(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Return level (or task family) → episodes, mean, se and ci95 of the primary metric.

    The group of an episode is its record's ``group`` (``lumos-gym evaluate`` writes it for
    envs whose tasks have levels or families); empty unless every record has one and there are
    two groups or more. Episodes that ended in ``infra-error`` are left out.
    """
    records = [r for r in records if not is_infra_error(r)]
    if not records or not all(r.get("group") for r in records):
        return {}
    by_group: dict[str, list[float]] = {}
    for record in records:
        by_group.setdefault(str(record["group"]), []).append(float(record.get("reward", 0.0)))
    if len(by_group) < 2:
        return {}
    return {g: {"episodes": len(v), **metric_stats(v)} for g, v in sorted(by_group.items())}


def _suite_score(by_env: Mapping[str, Sequence[Mapping[str, Any]]], envs: Mapping[str, Any]):
    if not by_env:
        return {"rule": SCORE_RULE, "envs": 0, "mean": 0.0, "se": 0.0, "ci95": None}
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    total = np.zeros(BOOTSTRAP_RESAMPLES)
    for records in by_env.values():  # sorted by env id
        values = np.asarray([float(r.get("reward", 0.0)) for r in records], dtype=float)
        total += resampled_means(values, rng, BOOTSTRAP_RESAMPLES)
    interval = percentile_interval(total / len(by_env))
    return {**suite_mean_se([envs[e] for e in by_env]), "ci95": interval}


def suite_mean_se(envs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The suite score of env summaries (their ``mean`` and ``se``), without an interval.

    The rule (:data:`SCORE_RULE`): the unweighted mean of the envs' means; its standard
    error is ``sqrt(sum se_env^2) / envs`` (a missing SE counts as 0).
    """
    if not envs:
        return {"rule": SCORE_RULE, "envs": 0, "mean": 0.0, "se": 0.0, "ci95": None}
    k = len(envs)
    return {
        "rule": SCORE_RULE,
        "envs": k,
        "mean": sum(float(e["mean"]) for e in envs) / k,
        "se": math.sqrt(sum(float(e.get("se") or 0.0) ** 2 for e in envs)) / k,
        "ci95": None,
    }


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Summarise episode records: per env, the suite score, all episodes pooled, and timing.

    Returns:
        ``{"format", "bootstrap", "envs", "score", "overall", "timing"}``. Each env holds its
        ``metrics`` (name → mean, se, ci95), its primary metric again as ``mean``/``se``/
        ``ci95``, status counts, steps, invalid actions, tool errors and tokens, and, when its
        episodes carry a level or task family, ``groups`` (:func:`group_stats`). ``overall``
        pools every episode's reward (mean, se, ci95) with the same counts. ``timing`` holds
        the seconds spent per env and overall (the only part that differs between identical
        runs).
    """
    ordered = sorted(records, key=_sort_key)
    by_env: dict[str, list[Mapping[str, Any]]] = {}
    for record in ordered:
        by_env.setdefault(record["env_id"], []).append(record)
    by_env = dict(sorted(by_env.items()))
    envs = {env_id: _env_summary(env_id, rs) for env_id, rs in by_env.items()}
    scored = [r for r in ordered if not is_infra_error(r)]
    rewards = [float(r.get("reward", 0.0)) for r in scored]
    pooled = metric_stats(rewards) if rewards or not ordered else dict(_NO_SCORE)
    scored_by_env = {env_id: kept for env_id, rs in by_env.items()
                     if (kept := [r for r in rs if not is_infra_error(r)])}
    score = _suite_score(scored_by_env, envs)
    if by_env and not scored_by_env:  # every episode ended in infra-error: no score at all
        score = {**score, "mean": None, "se": None}
    return {
        "format": SUMMARY_FORMAT,
        "bootstrap": {"method": "percentile", "resamples": BOOTSTRAP_RESAMPLES,
                      "seed": BOOTSTRAP_SEED, "confidence": CONFIDENCE},
        "envs": envs,
        "score": score,
        "overall": {"episodes": len(ordered), **_with_infra(ordered), **pooled,
                    **_counts(ordered)},
        "timing": {
            "envs": {env_id: _timing(rs) for env_id, rs in by_env.items()},
            "overall": _timing(ordered),
        },
    }


def comparable(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``summary`` without the keys that differ between identical runs (timing...)."""
    return {k: v for k, v in summary.items() if k not in NONDETERMINISTIC_KEYS}


def _interval_text(ci: Sequence[float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def format_table(summary: Mapping[str, Any]) -> str:
    """Render a summary as a plain-text table (primary metric with SE and 95% interval)."""
    headers = ["env", "episodes", "metric", "mean ± se", "95% interval", "other metrics",
               "completed", "other statuses", "steps", "tokens in/out"]
    rows = []

    def row(name: str, group: Mapping[str, Any], metric: str, others: str) -> list[str]:
        statuses = group.get("statuses")
        rest = ", ".join(f"{s} {c}" for s, c in (statuses or {}).items()
                         if c and s != "completed")
        steps = group.get("steps")
        tokens = f"{group['input_tokens']}/{group['output_tokens']}" if statuses else "-"
        mean = ("-" if group["mean"] is None  # every episode ended in infra-error
                else f"{group['mean']:.3f} ± {group['se']:.3f}")
        return [
            name, str(group["episodes"]), metric, mean,
            _interval_text(group.get("ci95")), others or "-",
            str(statuses.get("completed", 0)) if statuses else "-", rest or "-",
            f"{steps['mean']:.1f}" if isinstance(steps, Mapping) else "-", tokens,
        ]

    for name, group in summary["envs"].items():
        metrics = group.get("metrics", {})
        primary = group.get("primary_metric", "reward")
        others = ", ".join(f"{m} {s['mean']:.3f}" for m, s in metrics.items()
                           if m != primary and s["mean"] is not None)
        rows.append(row(name, group, primary, others))
        for level, stats in (group.get("groups") or {}).items():
            rows.append(row(f"  {level}", stats, primary, ""))
    score = summary.get("score")
    if score and score.get("envs"):
        total = {"episodes": summary["overall"]["episodes"], **score}
        rows.append(row("suite score", total, f"mean of {score['envs']} envs", ""))
    rows.append(row("overall", summary["overall"], "all episodes", ""))
    text = table(headers, rows)
    infra = int(summary["overall"].get("infra_errors") or 0)
    if infra:
        text += (f"\n{infra} episode(s) ended in infra-error (the backend or env server failed, "
                 "not the agent): left out of every mean; lumos-gym evaluate --resume with the "
                 "same --out plays them again")
    return text


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


# ---------------------------------------------------------------------------------- merging
@dataclass
class MergeReport:
    """What :func:`merge_results` did."""

    out: Path
    summary: dict[str, Any]
    episodes: int
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: planned episodes not merged: ``missing`` plus those of shards not given (``--partial``)
    missing_count: int = 0
    absent_shards: list[int] = field(default_factory=list)


def _listing(keys: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


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


def _check_same(folders: Sequence[ResultsFolder], what: str, get) -> None:
    first = folders[0]
    for other in folders[1:]:
        if get(other) != get(first):
            diff = "; ".join(differences(get(first), get(other))[:4]) or "differs"
            raise ResultsError(
                f"{first.path} and {other.path} are results of different {what} ({diff}); "
                "merge only shards of one run"
            )


def merge_results(
    shard_dirs: Sequence[str | Path], out: str | Path, *, partial: bool = False
) -> MergeReport:
    """Join the results folders of ``lumos-gym evaluate --shard i/n`` runs into one.

    Refuses shards of different configurations (agent, models), lumos-gym versions or
    episode plans (suite, limits, seeds); overlapping shards (an episode in two folders); and,
    unless ``partial``, missing episodes or shards. Corrupt or truncated lines are skipped
    with a warning (the valid records still load). The merged ``episodes.jsonl`` is sorted by
    episode key and its ``summary.json`` equals an unsharded run's (apart from timing and
    provenance).

    Raises:
        ResultsError: any of the above, naming the folders and episodes concerned.
    """
    if not shard_dirs:
        raise ResultsError("name the results folders to merge")
    out_dir = Path(out)
    if (out_dir / "episodes.jsonl").exists():
        raise ResultsError(f"{out_dir} already holds results; merge into a new folder")
    folders = [read_results(p) for p in shard_dirs]
    warnings = [p for f in folders for p in f.problems] + _check_one_run(folders)
    absent = _absent_shards(folders, partial)
    merged = _join_records(folders)
    planned: set[str] = set()
    for folder in folders:
        planned.update(folder.planned or folder.records)
    missing = sorted(planned - set(merged))
    if missing and not partial:
        raise ResultsError(
            f"{len(missing)} planned episode(s) have no valid record: {_listing(missing)}; "
            "run the shard again with the same --out to finish it (or pass --partial)"
        )
    # a record outside the plan is a result of a larger earlier run in the same folder
    records = [merged[k] for k in sorted(merged) if k in planned]
    run, count = _merged_run(folders, planned, len(records), missing, absent)
    incomplete = bool(missing or absent)
    summary = _write_merged(out_dir, records, run, count if incomplete else None)
    return MergeReport(out_dir, summary, len(records), warnings, missing,
                       count if incomplete else 0, [int(i) for i in absent])


def _check_one_run(folders: Sequence[ResultsFolder]) -> list[str]:
    """Refuse folders of different runs; return a warning when another lumos-gym made them."""
    warnings = []
    _check_same(folders, "configurations", lambda f: f.run.get("fingerprint"))
    _check_same(folders, "adapter weights", lambda f: adapter_weights(f.run))
    _check_same(folders, "lumos-gym versions", lambda f: f.run.get("lumos_gym"))
    version = folders[0].run.get("lumos_gym")
    if version != __version__:
        warnings.append(
            f"the shards were made by lumos-gym {version}, this is {__version__}: the summary "
            "is recomputed with this version's metrics"
        )
    _check_same(folders, "episode plans (suite, envs, limits or seeds)",
                lambda f: (f.run.get("plan") or {}).get("keys_sha256"))
    return warnings


def _absent_shards(folders: Sequence[ResultsFolder], partial: bool) -> list[str]:
    """Return the shards of the split not given; refuse a mixed split or a shard given twice.

    Raises:
        ResultsError: whole runs mixed with shards, shards of different splits, a shard
            given twice, or (unless ``partial``) a shard not given.
    """
    shards = [f.shard for f in folders]
    if all(s is None for s in shards):
        return []
    counts = {s[1] for s in shards if s is not None}
    if None in shards or len(counts) > 1:
        shown = ", ".join(f"{s[0]}/{s[1]}" if s else "whole" for s in shards)
        raise ResultsError(f"merge shards of one split: every folder needs --shard I/N with "
                           f"the same N (got {shown})")
    seen: dict[int, Path] = {}
    for folder, (i, _) in zip(folders, shards, strict=True):  # type: ignore[misc]
        if i in seen:
            raise ResultsError(f"{seen[i]} and {folder.path} are both shard {i}")
        seen[i] = folder.path
    n = counts.pop()
    absent = [str(i) for i in range(1, n + 1) if i not in seen]
    if absent and not partial:
        raise ResultsError(f"shard(s) {', '.join(absent)} of {n} are not given")
    return absent


def _join_records(folders: Sequence[ResultsFolder]) -> dict[str, dict[str, Any]]:
    """Return every folder's records by key; refuse an episode found in two folders."""
    owner: dict[str, Path] = {}
    overlap: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for key, record in folder.records.items():
            if key in owner:
                overlap.append(f"{key} ({owner[key]} and {folder.path})")
                continue
            owner[key] = folder.path
            merged[key] = record
    if overlap:
        raise ResultsError(f"{len(overlap)} episode(s) are in more than one folder: "
                           f"{_listing(overlap)}")
    return merged


def _merged_run(
    folders: Sequence[ResultsFolder], planned: set[str], merged: int, missing: list[str],
    absent: list[str],
) -> tuple[dict[str, Any], int]:
    """Return the merged run.json and how many planned episodes it lacks.

    The first folder's run.json, with the whole plan, where each shard came from and, when
    episodes or shards are missing, which.
    """
    plan = folders[0].run.get("plan") or {}
    total = plan.get("episodes")
    run = dict(folders[0].run)
    run["plan"] = {**plan, "shard": None, "keys": sorted(planned),
                   "episodes": total if total is not None else len(planned)}
    run["merged_from"] = [
        {"path": str(f.path), "shard": list(f.shard) if f.shard else None,
         "episodes": len(f.records), "git": f.run.get("git"), "started": f.run.get("started"),
         "hardware": f.run.get("hardware")}
        for f in folders
    ]
    # with shards not given, their keys are unknown here: the plan's count says how many
    count = (total if total is not None else len(planned)) - merged
    if missing or absent:
        run["missing"] = missing
        run["partial"] = {"absent_shards": [int(i) for i in absent], "missing_episodes": count}
    return run, count


def _write_merged(
    out_dir: Path, records: Sequence[Mapping[str, Any]], run: Mapping[str, Any],
    missing: int | None,
) -> dict[str, Any]:
    """Write the merged folder (episodes sorted by key, run.json, summary.json); return the summary.

    ``missing``: the planned episodes not merged, noted in the summary (None: none).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "episodes.jsonl", "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    write_json_atomic(out_dir / "run.json", run)
    summary = summarize(records)
    summary["provenance"] = provenance_for_summary(run)
    if missing is not None:
        summary["missing_episodes"] = missing
    write_json_atomic(out_dir / "summary.json", summary)
    return summary


def provenance_for_summary(run: Mapping[str, Any]) -> dict[str, Any]:
    """Return run.json's provenance for summary.json (the plan's key list left out)."""
    provenance = {k: v for k, v in run.items() if k != "plan"}
    plan = dict(run.get("plan") or {})
    plan.pop("keys", None)
    provenance["plan"] = plan
    return provenance
