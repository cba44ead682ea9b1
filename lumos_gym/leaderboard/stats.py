"""Paired statistics between two runs: differences of means, their intervals and paired tests.

Two runs of the same episodes are compared episode by episode. Episodes pair by their env,
task and seed (:func:`pair_key`; the env's other arguments are left out, so the oracle's
``privileged`` episodes pair with everyone's); an episode present in one run only is counted
apart and left out of every number, and so is one that ended in ``infra-error`` in either run
(a backend or env server failed: it has no score, :func:`~.results.is_infra_error`). Pairs are
sorted by key before anything is drawn, so every result depends only on the two sets of
episodes, never on the order of their files.

For one env (or one level of an env) with paired values ``a_i`` and ``b_i``:

* the difference is ``mean(a) - mean(b)``, the mean of the paired differences ``d_i``;
* its 95% interval is a percentile bootstrap of the paired differences:
  :data:`PAIRED_RESAMPLES` resamples of the ``d_i`` with replacement, drawn by
  ``numpy.random.default_rng(PAIRED_SEED)``, the interval being the 2.5th and 97.5th
  percentiles of the resampled means;
* its test is the exact McNemar test when every value of both runs is 0 or 1 (two-sided
  binomial test of the discordant pairs at 1/2), otherwise a paired sign-flip (permutation)
  test of the mean difference: exact over every sign assignment when at most
  :data:`EXACT_FLIPS` differences are not 0, else :data:`FLIP_RESAMPLES` random assignments
  (seeded), with ``p = (1 + extreme) / (1 + resamples)``.

For the suite score (the unweighted mean over envs of each env's mean): the difference is the
mean over envs of the envs' differences; its interval resamples the paired differences within
each env (one generator, envs in sorted order) and averages the envs' resampled means; its
test is the sign-flip test of that weighted mean (each env's pairs weighing ``1 / (envs *
pairs of the env)``). Only envs where both runs have paired episodes count.

Two agents each trained with several seeds compare over the seeds they share
(:func:`compare_seeds`): episodes pair by task and training seed, each task's values are
averaged over the seeds, and the tasks' averages are compared as above, so the interval
resamples tasks (the unit both seeds share) and holds the seeds' spread inside each task.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from typing import Any

import numpy as np

from lumos_gym.leaderboard.results import (
    Metric,
    is_infra_error,
    metric_values,
    percentile_interval,
    resampled_means,
)

#: Resamples of each paired bootstrap interval.
PAIRED_RESAMPLES = 2000
#: The seed of every generator here (fixed: comparisons are deterministic).
PAIRED_SEED = 0
#: The coverage of the intervals.
PAIRED_CONFIDENCE = 0.95
#: At most this many non-zero differences: the sign-flip test enumerates every assignment.
EXACT_FLIPS = 16
#: Random sign assignments of the sign-flip test beyond :data:`EXACT_FLIPS`.
FLIP_RESAMPLES = 10000
#: Rows drawn per numpy call (bounds memory; the draws do not depend on it).
_CHUNK = 500
#: Differences closer than this to the observed one count as equally extreme (float noise).
_TOLERANCE = 1e-9

#: The names of the tests, as results show them.
MCNEMAR = "mcnemar-exact"
SIGN_FLIP_EXACT = "sign-flip-exact"
SIGN_FLIP = "sign-flip"
NO_TEST = "none"


# --------------------------------------------------------------------------------- pairing
def pair_key(record: Mapping[str, Any]) -> str:
    """Return the key two runs' episodes pair by: env id, task id and seed."""
    return f"{record['env_id']}|{record.get('task_id')}|seed={int(record.get('seed') or 0)}"


@dataclass
class Pairing:
    """The episodes of two runs, paired.

    Attributes:
        pairs: env id → the paired records ``(key, record of A, record of B)``, sorted by key.
        only_a: env id → episodes of A without a partner in B.
        only_b: env id → episodes of B without a partner in A.
        mismatched: keys whose two records show different task texts (left unpaired).
    """

    pairs: dict[str, list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]]
    only_a: dict[str, int] = field(default_factory=dict)
    only_b: dict[str, int] = field(default_factory=dict)
    mismatched: list[str] = field(default_factory=list)

    def unpaired(self) -> int:
        """Return the number of episodes left out (either side, mismatches included)."""
        return (sum(self.only_a.values()) + sum(self.only_b.values())
                + 2 * len(self.mismatched))


def _by_key(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for record in records:
        if not is_infra_error(record):  # no score: its partner is left unpaired
            out.setdefault(pair_key(record), record)  # a repeated episode: the first one counts
    return out


def pair_records(
    a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]
) -> Pairing:
    """Pair the episode records of two runs by :func:`pair_key`.

    Two records of one key whose ``task`` texts are both strings and differ are different
    tasks under one id (another data file, another generator): they are named in
    ``mismatched`` and not paired. A record that ended in ``infra-error`` is left out, so its
    partner in the other run counts as that run's only.
    """
    left, right = _by_key(a), _by_key(b)
    pairing = Pairing({})
    for key in sorted(set(left) | set(right)):
        x, y = left.get(key), right.get(key)
        env_id = str((x or y)["env_id"])  # type: ignore[index]
        if y is None:
            pairing.only_a[env_id] = pairing.only_a.get(env_id, 0) + 1
        elif x is None:
            pairing.only_b[env_id] = pairing.only_b.get(env_id, 0) + 1
        elif _same_task(x, y):
            pairing.pairs.setdefault(env_id, []).append((key, x, y))
        else:
            pairing.mismatched.append(key)
    pairing.pairs = dict(sorted(pairing.pairs.items()))
    return pairing


def _same_task(x: Mapping[str, Any], y: Mapping[str, Any]) -> bool:
    tx, ty = x.get("task"), y.get("task")
    return not (isinstance(tx, str) and isinstance(ty, str) and tx != ty)


# ---------------------------------------------------------------------------------- tests
def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Return the two-sided exact McNemar p-value of the discordant pair counts.

    ``a_only`` pairs where only A succeeded, ``b_only`` where only B did: under no
    difference each discordant pair goes either way with probability 1/2, and the p-value is
    ``min(1, 2 * P(X <= min(a_only, b_only)))`` for ``X ~ Binomial(a_only + b_only, 1/2)``
    (1 when there is no discordant pair).
    """
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def sign_flip_test(
    diffs: Sequence[float], *, weights: Sequence[float] | None = None,
    resamples: int = FLIP_RESAMPLES, seed: int = PAIRED_SEED,
) -> tuple[float, str]:
    """Return the two-sided p-value of a paired sign-flip test, and the test's name.

    The statistic is ``|sum(w_i * d_i)|`` (the weighted mean difference; ``w_i = 1`` by
    default). Under no difference each pair's two values are exchangeable, so each ``d_i``
    keeps or flips its sign with probability 1/2. With at most :data:`EXACT_FLIPS` non-zero
    terms every assignment is enumerated (p = the share at least as extreme as the observed
    one); otherwise ``resamples`` assignments are drawn with ``seed`` and
    ``p = (1 + extreme) / (1 + resamples)``.
    """
    w = np.ones(len(diffs)) if weights is None else np.asarray(weights, dtype=float)
    terms = np.asarray(diffs, dtype=float) * w
    terms = terms[terms != 0.0]
    if terms.size == 0:
        return 1.0, SIGN_FLIP_EXACT
    observed = abs(float(terms.sum())) - _TOLERANCE
    if terms.size <= EXACT_FLIPS:
        signs = np.asarray(list(product((1.0, -1.0), repeat=int(terms.size))))
        extreme = int(np.sum(np.abs(signs @ terms) >= observed))
        return extreme / len(signs), SIGN_FLIP_EXACT
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - start)
        signs = rng.choice((1.0, -1.0), size=(rows, terms.size))
        extreme += int(np.sum(np.abs(signs @ terms) >= observed))
    return (1 + extreme) / (1 + resamples), SIGN_FLIP


def _is_binary(values: np.ndarray) -> bool:
    return bool(np.all((values == 0.0) | (values == 1.0)))


# ------------------------------------------------------------------------------ intervals
def paired_bootstrap_ci(
    diffs: Sequence[float], *, resamples: int = PAIRED_RESAMPLES, seed: int = PAIRED_SEED
) -> list[float] | None:
    """Return the 95% percentile bootstrap interval of the mean paired difference.

    The paired differences are resampled with replacement (None when there are none).
    """
    if len(diffs) == 0:
        return None
    rng = np.random.default_rng(seed)
    return percentile_interval(
        resampled_means(np.asarray(diffs, dtype=float), rng, resamples, chunk=_CHUNK),
        PAIRED_CONFIDENCE,
    )


# ---------------------------------------------------------------------------- differences
@dataclass(frozen=True)
class PairedDiff:
    """The paired difference of two runs (A minus B) on one set of episodes.

    Attributes:
        n: paired episodes (for the suite: the sum over its envs).
        mean_a: A's mean over them.
        mean_b: B's mean over them.
        diff: ``mean_a - mean_b``.
        ci95: the paired bootstrap 95% interval of ``diff`` (None without pairs).
        test: :data:`MCNEMAR`, :data:`SIGN_FLIP_EXACT`, :data:`SIGN_FLIP` or :data:`NO_TEST`.
        p_value: the test's two-sided p-value (None without pairs).
        discordant: McNemar's ``(A only, B only)`` counts, else None.
        envs: for a suite difference, the envs it averages (else 0).
    """

    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci95: list[float] | None
    test: str
    p_value: float | None
    discordant: tuple[int, int] | None = None
    envs: int = 0

    @property
    def excludes_zero(self) -> bool:
        """Whether the 95% interval lies wholly above or wholly below 0."""
        return self.ci95 is not None and (self.ci95[0] > 0.0 or self.ci95[1] < 0.0)

    def to_dict(self) -> dict[str, Any]:
        """Return the difference as JSON-ready values."""
        return {
            "n": self.n, "mean_a": self.mean_a, "mean_b": self.mean_b, "diff": self.diff,
            "ci95": self.ci95, "excludes_zero": self.excludes_zero, "test": self.test,
            "p_value": self.p_value,
            "discordant": list(self.discordant) if self.discordant is not None else None,
            **({"envs": self.envs} if self.envs else {}),
        }


def _empty() -> PairedDiff:
    return PairedDiff(0, 0.0, 0.0, 0.0, None, NO_TEST, None)


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDiff:
    """Return the paired difference ``mean(a) - mean(b)`` with its interval and test.

    ``a[i]`` and ``b[i]`` are the two runs' values of episode ``i`` (already in key order).
    """
    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    if not a:
        return _empty()
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diffs = x - y
    if _is_binary(x) and _is_binary(y):
        a_only, b_only = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
        p, test, discordant = mcnemar_exact(a_only, b_only), MCNEMAR, (a_only, b_only)
    else:
        p, test = sign_flip_test(diffs)
        discordant = None
    return PairedDiff(len(a), float(x.mean()), float(y.mean()), float(diffs.mean()),
                      paired_bootstrap_ci(diffs), test, p, discordant)


def suite_difference(by_env: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> PairedDiff:
    """Return the paired difference of suite scores over the envs of ``by_env``.

    ``by_env`` maps env id → the paired values ``(a, b)`` of that env; envs without pairs
    are left out. See the module docstring for the interval and the test.
    """
    envs = {e: (np.asarray(a, dtype=float), np.asarray(b, dtype=float))
            for e, (a, b) in sorted(by_env.items()) if len(a)}
    if not envs:
        return _empty()
    k = len(envs)
    rng = np.random.default_rng(PAIRED_SEED)
    total = np.zeros(PAIRED_RESAMPLES)
    diffs, weights = [], []
    for x, y in envs.values():
        total += resampled_means(x - y, rng, PAIRED_RESAMPLES, chunk=_CHUNK)
        diffs.extend(x - y)
        weights.extend([1.0 / (k * len(x))] * len(x))
    p, test = sign_flip_test(diffs, weights=weights)
    mean_a = sum(float(x.mean()) for x, _ in envs.values()) / k
    mean_b = sum(float(y.mean()) for _, y in envs.values()) / k
    return PairedDiff(sum(len(x) for x, _ in envs.values()), mean_a, mean_b, mean_a - mean_b,
                      percentile_interval(total / k, PAIRED_CONFIDENCE), test, p, None, k)


# ----------------------------------------------------------------------------- two runs
@dataclass
class Comparison:
    """Two runs compared episode by episode (A minus B).

    Attributes:
        envs: env id → the difference on its primary metric (its episodes' ``reward``).
        groups: env id → level or task family → the difference on the primary metric.
        metrics: env id → metric name → the difference (every metric of the env).
        suite: the difference of suite scores over the envs both runs have.
        pairing: the paired episodes and those left out.
    """

    envs: dict[str, PairedDiff]
    groups: dict[str, dict[str, PairedDiff]]
    metrics: dict[str, dict[str, PairedDiff]]
    suite: PairedDiff
    pairing: Pairing

    def to_dict(self) -> dict[str, Any]:
        """Return the comparison as JSON-ready values."""
        return {
            "suite": self.suite.to_dict(),
            "envs": {e: d.to_dict() for e, d in self.envs.items()},
            "groups": {e: {g: d.to_dict() for g, d in gs.items()}
                       for e, gs in self.groups.items()},
            "metrics": {e: {m: d.to_dict() for m, d in ms.items()}
                        for e, ms in self.metrics.items()},
            "only_a": self.pairing.only_a, "only_b": self.pairing.only_b,
            "mismatched": self.pairing.mismatched,
        }


def _values(
    pairs: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]], metric: Metric
) -> tuple[list[float], list[float]]:
    return ([metric_values(x, metric) for _, x, _ in pairs],
            [metric_values(y, metric) for _, _, y in pairs])


def compare_records(
    a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]], *,
    envs: Iterable[str] | None = None,
    metrics: Mapping[str, Sequence[Metric]] | None = None,
) -> Comparison:
    """Compare two runs' episode records: per env, per level of each env, and the suite.

    Args:
        a: the first run's records (A).
        b: the second run's records (B).
        envs: only these envs (default: every env either run has).
        metrics: env id → its metrics (the primary one first) for :attr:`Comparison.metrics`;
            by default each env's primary metric only.

    A level is a record's ``group`` (written by ``lumos-gym evaluate`` for envs whose tasks
    have levels or families); levels are compared when every paired record has one.
    """
    wanted = set(envs) if envs is not None else None
    pairing = pair_records(
        (r for r in a if wanted is None or r["env_id"] in wanted),
        (r for r in b if wanted is None or r["env_id"] in wanted),
    )
    primary = Metric("reward")
    by_env, groups, per_metric = {}, {}, {}
    for env_id, pairs in pairing.pairs.items():
        by_env[env_id] = _values(pairs, primary)
        levels: dict[str, list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]] = {}
        for pair in pairs:
            levels.setdefault(str(pair[1].get("group")), []).append(pair)
        if all(p[1].get("group") for p in pairs) and len(levels) > 1:
            groups[env_id] = {g: paired_difference(*_values(ps, primary))
                              for g, ps in sorted(levels.items())}
        chosen = (metrics or {}).get(env_id) or (primary,)
        per_metric[env_id] = {m.name: paired_difference(*_values(pairs, m)) for m in chosen}
    return Comparison(
        {e: paired_difference(*values) for e, values in by_env.items()}, groups, per_metric,
        suite_difference(by_env), pairing,
    )


@dataclass
class SeedComparison:
    """Two agents compared over their shared training seeds (A minus B), task by task.

    Attributes:
        seeds: how many training seeds were paired.
        envs: env id → the difference of the seed-averaged primary metric.
        suite: the difference of suite scores.
        tasks: the tasks paired in every seed (those missing from one seed are left out).
    """

    seeds: int
    envs: dict[str, PairedDiff]
    suite: PairedDiff
    tasks: int


def compare_seeds(
    runs_a: Sequence[Iterable[Mapping[str, Any]]], runs_b: Sequence[Iterable[Mapping[str, Any]]]
) -> SeedComparison:
    """Compare two agents over training seeds: ``runs_a[i]`` and ``runs_b[i]`` share seed i.

    Each seed's two runs pair by :func:`pair_key`; a task paired in every seed contributes the
    mean over seeds of each agent's primary metric, and those means compare by env and for
    the suite (:func:`paired_difference`, :func:`suite_difference`).
    """
    if len(runs_a) != len(runs_b) or not runs_a:
        raise ValueError(f"need the same seeds on both sides, got {len(runs_a)} and {len(runs_b)}")
    primary = Metric("reward")
    sums: dict[tuple[str, str], list[float]] = {}
    seen: dict[tuple[str, str], int] = {}
    for a, b in zip(runs_a, runs_b, strict=True):
        for env_id, pairs in pair_records(a, b).pairs.items():
            for key, x, y in pairs:
                total = sums.setdefault((env_id, key), [0.0, 0.0])
                total[0] += metric_values(x, primary)
                total[1] += metric_values(y, primary)
                seen[(env_id, key)] = seen.get((env_id, key), 0) + 1
    n = len(runs_a)
    by_env: dict[str, tuple[list[float], list[float]]] = {}
    for (env_id, _key), (sa, sb) in sorted(sums.items()):
        if seen[(env_id, _key)] == n:
            values = by_env.setdefault(env_id, ([], []))
            values[0].append(sa / n)
            values[1].append(sb / n)
    return SeedComparison(
        n, {e: paired_difference(*v) for e, v in by_env.items()}, suite_difference(by_env),
        sum(len(v[0]) for v in by_env.values()),
    )


__all__ = [
    "Comparison",
    "EXACT_FLIPS",
    "FLIP_RESAMPLES",
    "MCNEMAR",
    "NO_TEST",
    "PAIRED_CONFIDENCE",
    "PAIRED_RESAMPLES",
    "PAIRED_SEED",
    "PairedDiff",
    "Pairing",
    "SIGN_FLIP",
    "SIGN_FLIP_EXACT",
    "SeedComparison",
    "compare_records",
    "compare_seeds",
    "mcnemar_exact",
    "pair_key",
    "pair_records",
    "paired_bootstrap_ci",
    "paired_difference",
    "sign_flip_test",
    "suite_difference",
]
