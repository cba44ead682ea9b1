"""Paired statistics between two runs: differences of means, their intervals and paired tests.

Two runs of the same episodes are compared episode by episode. Episodes pair by their env,
task and seed (:func:`pair_key`; the env's other arguments are left out, so the oracle's
``privileged`` episodes pair with everyone's); an episode present in one run only is counted
apart and left out of every number, and so is one that ended in ``infra-error`` in either run
(a backend or env server failed: it has no score,
:func:`~lumos_gym.evaluation.results.is_infra_error`). Pairs are sorted by key before
anything is drawn, so every result depends only on the two sets of episodes, never on the
order of their files.

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

An agent trained with several seeds (a *seed group*) has, on each env, a matrix of values: a
row per training seed, a column per task (:class:`SeedMatrix`). Its score and its differences
to other rows get a two-level bootstrap (:func:`two_level_bootstrap`), which resamples the
training seeds as well as the tasks, so that an interval holds the luck of training as well as
that of the test tasks; :func:`compare_groups` adds the paired test (a sign-flip test of the
per-task differences averaged over the seeds).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from itertools import product
from typing import Any

import numpy as np

from lumos_gym.evaluation.results import is_infra_error
from lumos_gym.evaluation.summary import Metric, metric_values, percentile_interval, resampled_means

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

#: Each env's primary metric: its episodes' ``reward``.
PRIMARY = Metric("reward")

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
    p_holm: float | None = None

    @property
    def excludes_zero(self) -> bool:
        """Whether the 95% interval lies wholly above or wholly below 0."""
        return self.ci95 is not None and (self.ci95[0] > 0.0 or self.ci95[1] < 0.0)

    @property
    def significant(self) -> bool:
        """Whether the difference is decided: its interval and its test both say so.

        The interval must exclude 0, and the test's p-value, Holm-adjusted over its family when
        it has one (:func:`with_holm`), must be below 0.05. Both are asked: an interval can
        exclude 0 where the exact test cannot reach 0.05 (a handful of episodes), and a
        p-value that holds the training seeds fixed can be small while the seed-aware interval
        holds 0.
        """
        p = self.p_holm if self.p_holm is not None else self.p_value
        return self.excludes_zero and p is not None and p < SIGNIFICANCE

    def to_dict(self) -> dict[str, Any]:
        """Return the difference as JSON-ready values."""
        return {
            "n": self.n, "mean_a": self.mean_a, "mean_b": self.mean_b, "diff": self.diff,
            "ci95": self.ci95, "excludes_zero": self.excludes_zero, "test": self.test,
            "p_value": self.p_value, "p_holm": self.p_holm, "significant": self.significant,
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
        with_holm({e: paired_difference(*values) for e, values in by_env.items()}), groups,
        per_metric, suite_difference(by_env), pairing,
    )


#: The level below which a (Holm-adjusted) p-value counts as significant.
SIGNIFICANCE = 0.05


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (``None`` stays ``None``).

    Sorted ascending, the i-th of m p-values (from 0) becomes ``max over j <= i of
    min(1, (m - j) * p_j)``: the family-wise error stays at the level for any dependence.
    """
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def with_holm(diffs: Mapping[str, PairedDiff]) -> dict[str, PairedDiff]:
    """The differences with their p-values Holm-adjusted as one family.

    A family is the envs of one row's comparison, or of one claim; differences without pairs
    are left as they are.
    """
    keys = [k for k, d in diffs.items() if d.n and d.p_value is not None]
    adjusted = holm([diffs[k].p_value for k in keys])
    out = dict(diffs)
    for key, p in zip(keys, adjusted, strict=True):
        out[key] = replace(diffs[key], p_holm=p)
    return out


# ------------------------------------------------------------------ training seeds × tasks
@dataclass(frozen=True)
class SeedMatrix:
    """One agent's per-episode values on one env: a row per training seed, a column per task.

    Attributes:
        seeds: each row's training seed (a label: a seed number, or a tuple of them).
        tasks: each column's task, as its :func:`pair_key` (sorted).
        values: ``len(seeds) x len(tasks)`` values; NaN where that seed has no scored episode
            of that task (never run, or ended in ``infra-error``).
    """

    seeds: tuple[Hashable, ...]
    tasks: tuple[str, ...]
    values: np.ndarray


def seed_matrices(
    runs: Mapping[Hashable, Iterable[Mapping[str, Any]]], *, envs: Iterable[str] | None = None,
    metric: Metric = PRIMARY,
) -> dict[str, SeedMatrix]:
    """Return env id → the :class:`SeedMatrix` of one agent's runs (seed → its records).

    Every env's matrix has a row for each seed of ``runs`` (in their order), all NaN for a
    seed without that env. Episodes that ended in ``infra-error`` are left out (NaN), and a
    repeated episode counts once (the first), as in :func:`pair_records`.
    """
    wanted = set(envs) if envs is not None else None
    labels = list(runs)
    found: dict[str, dict[str, dict[int, float]]] = {}
    for row, label in enumerate(labels):
        for key, record in _by_key(runs[label]).items():
            env_id = str(record["env_id"])
            if wanted is None or env_id in wanted:
                found.setdefault(env_id, {}).setdefault(key, {})[row] = metric_values(record,
                                                                                      metric)
    out = {}
    for env_id, by_task in sorted(found.items()):
        tasks = sorted(by_task)
        values = np.full((len(labels), len(tasks)), np.nan)
        for col, key in enumerate(tasks):
            for row, value in by_task[key].items():
                values[row, col] = value
        out[env_id] = SeedMatrix(tuple(labels), tuple(tasks), values)
    return out


def _seeds_of(matrices: Mapping[str, SeedMatrix]) -> tuple[Hashable, ...]:
    """The seeds every matrix of one agent shares (ValueError when they differ)."""
    seeds = {m.seeds for m in matrices.values()}
    if len(seeds) != 1:
        raise ValueError(f"one agent's matrices must share their seeds, got {sorted(seeds)}")
    return next(iter(seeds))


def _aligned(a: SeedMatrix, b: SeedMatrix, matched: bool) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's values on the tasks both have (B's rows in A's seed order when matched).

    Matched seeds: a cell stays only when both scored it (the cells are differenced). A task
    stays when each side keeps at least one cell of it.
    """
    common = sorted(set(a.tasks) & set(b.tasks))
    where_a = {t: i for i, t in enumerate(a.tasks)}
    where_b = {t: i for i, t in enumerate(b.tasks)}
    xa = a.values[:, [where_a[t] for t in common]]
    xb = b.values[:, [where_b[t] for t in common]]
    if matched:
        xb = xb[[b.seeds.index(s) for s in a.seeds]]
        both = ~np.isnan(xa) & ~np.isnan(xb)
        xa, xb = np.where(both, xa, np.nan), np.where(both, xb, np.nan)
    keep = (~np.isnan(xa)).any(axis=0) & (~np.isnan(xb)).any(axis=0)
    return xa[:, keep], xb[:, keep]


def _draw_counts(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """``rows x n`` counts: how often each of ``n`` items is drawn, ``n`` draws a row."""
    index = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
    return np.bincount(index.ravel(), minlength=rows * n).reshape(rows, n).astype(float)


def _drawn_means(values: np.ndarray, seeds: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """Each replicate's mean over its drawn seeds of each seed's mean over its drawn tasks.

    ``values``: seeds x tasks (NaN: no cell); ``seeds`` and ``tasks``: replicates x seeds and
    replicates x tasks draw counts. A seed counts in a replicate when one of its drawn tasks
    has a cell; a replicate where none does is NaN.
    """
    present = ~np.isnan(values)
    sums = tasks @ np.where(present, values, 0.0).T
    cells = tasks @ present.T.astype(float)
    seed_means = np.divide(sums, cells, out=np.zeros_like(sums), where=cells > 0)
    weights = np.where(cells > 0, seeds, 0.0)
    total = weights.sum(axis=1)
    return np.divide((weights * seed_means).sum(axis=1), total,
                     out=np.full(len(total), np.nan), where=total > 0)


def _point(values: np.ndarray) -> float:
    """The mean over seeds (with a cell) of each seed's mean over its cells."""
    k, n = values.shape
    return float(_drawn_means(values, np.ones((1, k)), np.ones((1, n)))[0])


@dataclass(frozen=True)
class Estimate:
    """A two-level bootstrap estimate: one agent's mean, or A's minus B's.

    Attributes:
        value: the estimate (``mean_a - mean_b`` for a difference, else ``mean_a``).
        ci95: the percentile interval of the replicates (None when none has a value).
        se: the standard deviation of the replicates.
        mean_a: A's mean over the cells counted (the mean over seeds of each seed's mean).
        mean_b: B's mean over the cells counted (None for one agent alone).
        tasks: the tasks resampled (for the suite: the sum over its envs).
        envs: for the suite, the envs it averages (else 0).
    """

    value: float
    ci95: list[float] | None
    se: float | None
    mean_a: float
    mean_b: float | None
    tasks: int
    envs: int = 0


@dataclass(frozen=True)
class TwoLevel:
    """The two-level bootstrap of one agent, or of two agents' difference (A minus B).

    Attributes:
        envs: env id → its estimate (envs with cells on both sides only).
        suite: the suite score's estimate (None without envs).
        matched: for a difference, whether seed pairs were drawn (None for one agent).
    """

    envs: dict[str, Estimate]
    suite: Estimate | None
    matched: bool | None


def _estimate(
    value: float, replicates: np.ndarray, mean_a: float, mean_b: float | None, tasks: int,
    confidence: float, envs: int = 0,
) -> Estimate:
    kept = replicates[~np.isnan(replicates)]
    ci = percentile_interval(kept, confidence) if kept.size else None
    se = float(kept.std(ddof=1)) if kept.size > 1 else None
    return Estimate(value, ci, se, mean_a, mean_b, tasks, envs)


def two_level_bootstrap(
    a: Mapping[str, SeedMatrix], b: Mapping[str, SeedMatrix] | None = None, *,
    resamples: int = PAIRED_RESAMPLES, seed: int = PAIRED_SEED,
    confidence: float = PAIRED_CONFIDENCE,
) -> TwoLevel:
    r"""Resample training seeds and tasks: one agent's score, or two agents' difference.

    Data: on env ``e``, agent A has values ``x[s, t]`` for its ``k`` training seeds ``s`` and
    the env's ``n`` tasks ``t`` (:class:`SeedMatrix`; every seed ran the same tasks, so seeds
    and tasks are crossed). A cell is missing where seed ``s`` has no scored episode of task
    ``t`` (``infra-error`` episodes are left out): each seed is then averaged over the cells
    it has. For a multiset ``S`` of seeds and ``T`` of tasks,

        m(S, T) = mean over s in S' of [ sum_{t in T} x[s, t] / |{t in T: x[s, t] present}| ],

    where ``S'`` holds the seeds of ``S`` (with their repeats) that have a cell among ``T``.
    The estimate is ``m`` over every seed and task once: the mean over seeds of each seed's
    mean (a single-seed row is a ``1 x n`` matrix, and its estimate is its mean).

    One replicate ``r`` draws ``S_r``: ``k`` seeds with replacement from the agent's ``k``,
    and, independently, ``T_r``: ``n`` tasks with replacement from the env's ``n``, and takes
    ``m(S_r, T_r)``. The suite score's replicate is the mean over envs of the envs'
    replicates: ``S_r`` is drawn once per replicate and shared by every env (a seed is one
    trained model, on every env), ``T_r`` is drawn within each env. The 95% interval is the
    2.5th and 97.5th percentiles of ``resamples`` replicates (2,000), drawn by
    ``numpy.random.default_rng(seed)`` (0): first the seed draws of every replicate (A's, then
    B's when drawn apart), then each env's task draws, envs in sorted order.

    A minus B (``b`` given; only the tasks both have count):

    * matched seeds (A and B have the same seeds: the pairs share a training seed): a cell
      counts when both have it; replicate ``r`` draws seed *pairs* ``S_r`` and tasks ``T_r``
      and takes ``m`` of the differenced cells ``x_A[s, t] - x_B[s, t]``, so whatever a
      training seed does to both agents cancels;
    * otherwise (other seeds, or a group against a single-seed row): A's seeds and B's are
      drawn independently, the tasks jointly (both ran them), and the replicate is
      ``m_A(S_r^A, T_r) - m_B(S_r^B, T_r)``, each side over its own cells.

    Returns:
        per env and for the suite: the estimate, its interval and the replicates' standard
        deviation.
    """
    if not a:
        return TwoLevel({}, None, None if b is None else False)
    seeds_a = _seeds_of(a)
    matched: bool | None = None
    data: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    if b is None:
        data = {e: (m.values, None) for e, m in sorted(a.items())
                if m.values.size and not np.isnan(m.values).all()}
    elif b:
        seeds_b = _seeds_of(b)
        matched = set(seeds_a) == set(seeds_b)
        for env_id in sorted(set(a) & set(b)):
            xa, xb = _aligned(a[env_id], b[env_id], matched)
            if xa.shape[1]:
                data[env_id] = (xa, xb)
    rng = np.random.default_rng(seed)
    draws_a = _draw_counts(rng, resamples, len(seeds_a))
    draws_b = draws_a
    if b and not matched:
        draws_b = _draw_counts(rng, resamples, len(_seeds_of(b)))
    envs: dict[str, Estimate] = {}
    total = np.zeros(resamples)
    for env_id, (xa, xb) in data.items():
        n = xa.shape[1]
        replicates = np.empty(resamples)
        for start in range(0, resamples, _CHUNK):
            stop = min(start + _CHUNK, resamples)
            tasks = _draw_counts(rng, stop - start, n)
            replicates[start:stop] = _drawn_means(xa, draws_a[start:stop], tasks)
            if xb is not None:
                replicates[start:stop] -= _drawn_means(xb, draws_b[start:stop], tasks)
        mean_a = _point(xa)
        mean_b = _point(xb) if xb is not None else None
        value = mean_a - (mean_b or 0.0)
        envs[env_id] = _estimate(value, replicates, mean_a, mean_b, n, confidence)
        total += replicates
    if not envs:
        return TwoLevel({}, None, matched)
    k = len(envs)
    mean_b = (sum(e.mean_b for e in envs.values() if e.mean_b is not None) / k
              if b is not None else None)
    suite = _estimate(sum(e.value for e in envs.values()) / k, total / k,
                      sum(e.mean_a for e in envs.values()) / k, mean_b,
                      sum(e.tasks for e in envs.values()), confidence, k)
    return TwoLevel(envs, suite, matched)


def _task_test(x: np.ndarray, y: np.ndarray) -> tuple[float, str, tuple[int, int] | None]:
    """The paired test of per-task values: exact McNemar for 0/1 values, else sign-flip."""
    diffs = x - y
    if _is_binary(x) and _is_binary(y):
        a_only, b_only = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
        return mcnemar_exact(a_only, b_only), MCNEMAR, (a_only, b_only)
    p, test = sign_flip_test(diffs)
    return p, test, None


def compare_seed_matrices(
    a: Mapping[str, SeedMatrix], b: Mapping[str, SeedMatrix]
) -> Comparison:
    """Compare two agents' seed matrices (A minus B): per env and for the suite score.

    Differences and intervals: :func:`two_level_bootstrap`. The test: each task's values are
    averaged over the seeds that count (matched seeds: the cells both have), and the per-task
    averages are tested as paired values: exact McNemar when each side is a single seed and
    every value is 0 or 1, else the sign-flip test (:func:`sign_flip_test`; for the suite
    score weighted as in :func:`suite_difference`). ``n`` counts tasks.
    """
    boot = two_level_bootstrap(a, b)
    single = len(_seeds_of(a)) == 1 and len(_seeds_of(b)) == 1 if a and b else False
    envs: dict[str, PairedDiff] = {}
    diffs: list[float] = []
    weights: list[float] = []
    for env_id, est in boot.envs.items():
        xa, xb = _aligned(a[env_id], b[env_id], bool(boot.matched))
        x, y = np.nanmean(xa, axis=0), np.nanmean(xb, axis=0)
        if single:
            p, test, discordant = _task_test(x, y)
        else:
            (p, test), discordant = sign_flip_test(x - y), None
        envs[env_id] = PairedDiff(est.tasks, est.mean_a, float(est.mean_b or 0.0), est.value,
                                  est.ci95, test, p, discordant)
        diffs.extend(x - y)
        weights.extend([1.0 / (len(boot.envs) * len(x))] * len(x))
    envs = with_holm(envs)
    if boot.suite is None:
        return Comparison(envs, {}, {}, _empty(), Pairing({}))
    s = boot.suite
    p, test = sign_flip_test(diffs, weights=weights)
    suite = PairedDiff(s.tasks, s.mean_a, float(s.mean_b or 0.0), s.value, s.ci95, test, p,
                       None, s.envs)
    return Comparison(envs, {}, {}, suite, Pairing({}))


def compare_groups(
    runs_a: Mapping[Hashable, Iterable[Mapping[str, Any]]],
    runs_b: Mapping[Hashable, Iterable[Mapping[str, Any]]], *, envs: Iterable[str] | None = None,
) -> Comparison:
    """Compare two agents over their training seeds (A minus B) on their primary metric.

    ``runs_a`` and ``runs_b``: training seed → that seed's episode records (one seed for a
    single-seed row). The seeds are matched when both sides have the same ones. See
    :func:`compare_seed_matrices`; the comparison has no levels, other metrics or pairing.
    """
    wanted = list(envs) if envs is not None else None
    return compare_seed_matrices(seed_matrices(runs_a, envs=wanted),
                                 seed_matrices(runs_b, envs=wanted))


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
    "SIGNIFICANCE",
    "SIGN_FLIP",
    "SIGN_FLIP_EXACT",
    "Estimate",
    "SeedMatrix",
    "TwoLevel",
    "compare_groups",
    "compare_records",
    "compare_seed_matrices",
    "holm",
    "mcnemar_exact",
    "pair_key",
    "pair_records",
    "paired_bootstrap_ci",
    "paired_difference",
    "sign_flip_test",
    "seed_matrices",
    "suite_difference",
    "two_level_bootstrap",
    "with_holm",
]
