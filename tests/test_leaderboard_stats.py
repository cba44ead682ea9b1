"""Paired statistics (``lumos_gym.leaderboard.stats``) on cases small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest

from lumos_gym.evaluation.summary import Metric
from lumos_gym.leaderboard.stats import (
    EXACT_FLIPS,
    MCNEMAR,
    NO_TEST,
    SIGN_FLIP,
    SIGN_FLIP_EXACT,
    compare_records,
    mcnemar_exact,
    pair_key,
    pair_records,
    paired_bootstrap_ci,
    paired_difference,
    sign_flip_test,
    suite_difference,
)


def _record(env, task, reward, *, seed=0, group=None, task_text=None, **extra):
    record = {"env_id": env, "task_id": task, "seed": seed, "reward": reward, **extra}
    if group is not None:
        record["group"] = group
    if task_text is not None:
        record["task"] = task_text
    return record


# ------------------------------------------------------------------------------- the tests
def test_mcnemar_exact_by_hand():
    # no discordant pair: nothing to test
    assert mcnemar_exact(0, 0) == 1.0
    # 5 pairs all one way: 2 * (1/2)^5
    assert mcnemar_exact(0, 5) == mcnemar_exact(5, 0) == 2 / 32
    # 1 against 9: 2 * (C(10,0) + C(10,1)) / 2^10 = 22 / 1024
    assert mcnemar_exact(1, 9) == 22 / 1024
    # balanced: capped at 1
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(1, 2) == 1.0


def test_sign_flip_exact_by_hand():
    # three equal differences: only +++ and --- are as extreme, 2 of 8 assignments
    assert sign_flip_test([1.0, 1.0, 1.0]) == (0.25, SIGN_FLIP_EXACT)
    # zeros carry no sign: the same as the three non-zero ones
    assert sign_flip_test([0.0, 1.0, 0.0, 1.0, 1.0]) == (0.25, SIGN_FLIP_EXACT)
    # [2, -1]: |sum| = 1; assignments give |1|, |3|, |-3|, |-1|: all four at least 1
    assert sign_flip_test([2.0, -1.0]) == (1.0, SIGN_FLIP_EXACT)
    # [3, 1, 1]: sums 5, 3, 3, 1, -1, -3, -3, -5; |.| >= 5 for two of eight
    assert sign_flip_test([3.0, 1.0, 1.0]) == (0.25, SIGN_FLIP_EXACT)
    assert sign_flip_test([0.0, 0.0]) == (1.0, SIGN_FLIP_EXACT)
    assert sign_flip_test([]) == (1.0, SIGN_FLIP_EXACT)
    # weights scale each term: [1 * 1, 3 * 1] is [1, 3], as extreme as [3, 1]
    assert sign_flip_test([1.0, 1.0], weights=[1.0, 3.0]) == (0.5, SIGN_FLIP_EXACT)


def test_sign_flip_sampled_beyond_the_exact_limit():
    n = EXACT_FLIPS + 4
    p, test = sign_flip_test([1.0] * n, resamples=2000, seed=3)
    assert test == SIGN_FLIP
    # the exact value is 2 / 2^20; sampled: (1 + extreme) / (1 + resamples), near 1/2001
    assert p == pytest.approx(1 / 2001, abs=2 / 2001)
    # the same seed draws the same signs
    assert sign_flip_test([1.0] * n, resamples=2000, seed=3) == (p, test)
    half = [1.0, -1.0] * (n // 2)
    assert sign_flip_test(half, resamples=2000)[0] == 1.0  # sum 0: every draw as extreme


# -------------------------------------------------------------------------------- intervals
def test_paired_bootstrap_ci():
    assert paired_bootstrap_ci([]) is None
    assert paired_bootstrap_ci([0.5, 0.5, 0.5]) == [0.5, 0.5]  # no spread
    low, high = paired_bootstrap_ci([0.0, 1.0] * 20)
    assert low < 0.5 < high and high - low < 0.4
    assert paired_bootstrap_ci([0.0, 1.0] * 20) == [low, high]  # seeded


def test_paired_difference_of_binary_values_uses_mcnemar():
    a = [1, 1, 1, 1, 1, 0, 1, 0]
    b = [0, 0, 0, 0, 0, 0, 1, 0]
    d = paired_difference(a, b)
    assert (d.n, d.mean_a, d.mean_b, d.diff) == (8, 0.75, 0.125, 0.625)
    assert (d.test, d.discordant, d.p_value) == (MCNEMAR, (5, 0), 2 / 32)
    assert d.ci95 is not None and d.ci95[0] > 0 and d.excludes_zero
    equal = paired_difference([1, 0, 1], [1, 0, 1])
    assert (equal.diff, equal.ci95, equal.p_value, equal.excludes_zero) == (
        0.0, [0.0, 0.0], 1.0, False)


def test_paired_difference_of_graded_values_uses_the_sign_flip_test():
    d = paired_difference([0.5, 0.75, 1.0], [0.25, 0.5, 0.75])
    assert d.diff == pytest.approx(0.25) and d.test == SIGN_FLIP_EXACT
    assert d.p_value == 0.25 and d.discordant is None
    assert d.ci95 == pytest.approx([0.25, 0.25])
    empty = paired_difference([], [])
    assert (empty.n, empty.test, empty.ci95, empty.p_value) == (0, NO_TEST, None, None)
    with pytest.raises(ValueError):
        paired_difference([1.0], [])


def test_suite_difference_weighs_envs_equally():
    by_env = {
        "b": ([1.0, 1.0], [0.0, 0.0]),        # env difference 1
        "a": ([0.0] * 6, [0.0] * 6),          # env difference 0, three times the episodes
        "c": ([], []),                        # no pairs: left out
    }
    d = suite_difference(by_env)
    assert (d.envs, d.n, d.diff, d.mean_a, d.mean_b) == (2, 8, 0.5, 0.5, 0.0)
    assert d.ci95 == [0.5, 0.5]  # within each env the differences never vary
    # non-zero terms: two of weight 1/(2*2), so 2 extreme assignments of 4
    assert (d.test, d.p_value) == (SIGN_FLIP_EXACT, 0.5)
    assert suite_difference({}).test == NO_TEST
    assert suite_difference(dict(reversed(list(by_env.items())))) == d  # order of envs


# ---------------------------------------------------------------------------------- pairing
def test_pairing_by_env_task_and_seed():
    a = [
        _record("e1", "t1", 1.0, env_kwargs={"privileged": True}),
        _record("e1", "t2", 0.0),
        _record("e1", "t2", 1.0, seed=1),
        _record("e2", "t9", 1.0),
        _record("e1", "t3", 1.0, task_text="What is 2 + 2?"),
    ]
    b = [
        _record("e1", "t2", 1.0),
        _record("e1", "t1", 0.0, env_kwargs={}),       # other arguments: still paired
        _record("e1", "t3", 1.0, task_text="What is 3 + 3?"),  # another task under one id
        _record("e3", "t1", 0.0),
    ]
    pairing = pair_records(a, b)
    assert list(pairing.pairs) == ["e1"]
    assert [k for k, _, _ in pairing.pairs["e1"]] == ["e1|t1|seed=0", "e1|t2|seed=0"]
    assert pairing.only_a == {"e1": 1, "e2": 1} and pairing.only_b == {"e3": 1}
    assert pairing.mismatched == ["e1|t3|seed=0"] and pairing.unpaired() == 5
    assert pair_key(a[2]) == "e1|t2|seed=1"


def test_compare_records_per_env_level_metric_and_suite():
    a, b = [], []
    for n in range(4):
        a.append(_record("m", f"m{n}", 1.0, group=f"level {n % 2 + 1}"))
        b.append(_record("m", f"m{n}", float(n % 2), group=f"level {n % 2 + 1}"))
    for n in range(3):
        a.append(_record("w", f"w{n}", 0.5, metrics={"success": 0.0}))
        b.append(_record("w", f"w{n}", 0.25, metrics={"success": 1.0}))
    # records are given in any order: the result is the same
    forward = compare_records(a, b, metrics={"w": (Metric("reward"), Metric("success", "success"))})
    backward = compare_records(a[::-1], b[::-1],
                               metrics={"w": (Metric("reward"), Metric("success", "success"))})
    assert forward.to_dict() == backward.to_dict()
    m, w = forward.envs["m"], forward.envs["w"]
    assert (m.diff, m.test, m.discordant) == (0.5, MCNEMAR, (2, 0))
    assert (w.diff, w.test) == (0.25, SIGN_FLIP_EXACT)
    assert {g: d.diff for g, d in forward.groups["m"].items()} == {"level 1": 1.0, "level 2": 0.0}
    assert "w" not in forward.groups  # no levels recorded
    assert forward.metrics["w"]["success"].diff == -1.0
    assert list(forward.metrics["m"]) == ["reward"]
    assert forward.suite.diff == pytest.approx((0.5 + 0.25) / 2) and forward.suite.envs == 2
    only = compare_records(a, b, envs=["w"])
    assert list(only.envs) == ["w"] and only.suite.diff == pytest.approx(0.25)
    assert np.isfinite(forward.suite.p_value)
