"""Summaries of episode records: metrics with uncertainty, levels, the suite score.

:func:`summarize` turns the records of a results folder into its ``summary.json``; ``lumos-gym
evaluate`` writes it, ``merge``, ``rescore`` and ``restrict`` write it again, and the
leaderboard recomputes it from the episodes.

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
(:func:`lumos_gym.evaluation.plan.task_group`); its summary then also holds ``groups``: the
primary metric per group, with the same standard errors and intervals.

**Suite score.** The unweighted mean over envs of each env's primary-metric mean (every env
counts the same, whatever its number of episodes). Its standard error is
``sqrt(sum of the envs' squared SEs) / number of envs`` (envs are independent); its interval
is a percentile bootstrap resampling the episodes within each env (one generator seeded with
:data:`BOOTSTRAP_SEED`, envs in sorted order).

**Failures of the machinery.** An episode that ended in ``infra-error``
(:func:`lumos_gym.evaluation.results.is_infra_error`) is left out of every mean, standard
error and interval (per env, per level, the suite score and the pooled one) and counted apart,
as ``infra_errors`` beside ``episodes`` (which counts every record) and under ``statuses``; a
summary without one has neither key, as before. An env whose every episode ended so has
``None`` for its means and is left out of the suite score.

**Determinism.** Two runs with the same seed give equal summaries apart from the keys in
:data:`NONDETERMINISTIC_KEYS` (``timing``: wall, env, tool and model seconds; ``provenance``:
when, where and with which code the run was made); :func:`comparable` drops them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos_gym.envs import ENVS
from lumos_gym.envs.registration import fill_from_families
from lumos_gym.episodes import INFRA_ERROR, STATUSES
from lumos_gym.evaluation.results import episode_status, infra_errors, is_infra_error
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


def provenance_for_summary(run: Mapping[str, Any]) -> dict[str, Any]:
    """Return run.json's provenance for summary.json (the plan's key list left out)."""
    provenance = {k: v for k, v in run.items() if k != "plan"}
    plan = dict(run.get("plan") or {})
    plan.pop("keys", None)
    provenance["plan"] = plan
    return provenance
