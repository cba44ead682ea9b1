"""Stars need the interval and the Holm-adjusted test; claims count only envs where both agents
can act, and claim (c) only envs where neither row is at the floor (issue 35, item 5 and 7)."""

from __future__ import annotations

import pytest

from lumos_gym.leaderboard.claims import (
    CLAIMS,
    UNMEASURABLE_C,
    claim_rows,
    claims_markdown,
    generalisation_rows,
)
from lumos_gym.leaderboard.render import diff_text, short_env
from lumos_gym.leaderboard.stats import (
    SIGN_FLIP,
    Comparison,
    PairedDiff,
    Pairing,
    holm,
    with_holm,
)


def _diff(diff, ci, p, n=40, a=0.5, b=None):
    b = a - diff if b is None else b
    return PairedDiff(n, a, b, diff, list(ci), SIGN_FLIP, p)


def test_holm_adjusts_a_family_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2, None, 0.001]) == pytest.approx([0.2, None, 0.002])
    assert holm([]) == []


def test_a_star_needs_the_interval_and_the_adjusted_test():
    # a user's 5-episode run: the bootstrap interval excludes 0, the exact test cannot
    small = _diff(-0.6, (-1.0, -0.2), 0.25, n=5)
    assert small.excludes_zero and not small.significant and "*" not in diff_text(small)
    alone = _diff(0.1, (0.02, 0.18), 0.03)
    assert alone.significant and diff_text(alone).endswith("p=0.030 *")
    family = with_holm({"a": alone, "b": _diff(0.1, (0.01, 0.2), 0.04)})
    assert [d.p_holm for d in family.values()] == pytest.approx([0.06, 0.06])
    assert not any(d.significant for d in family.values())  # 2 envs: neither survives Holm
    assert diff_text(family["a"]) == "+0.100 [0.020, 0.180] p=0.030 (Holm 0.060)"


def _comparison(envs):
    suite = _diff(0.05, (0.01, 0.09), 0.001)
    return Comparison(envs, {}, {}, suite, Pairing({}))


def test_claims_leave_out_the_envs_where_an_agent_cannot_act():
    # cot minus lumos-i: behind on math, "behind" on WebShop only because cot cannot act there
    comparisons = {"cot": _comparison({
        "lumos/MathWord-v0": _diff(-0.4, (-0.5, -0.3), 0.0001),
        "lumos/WebShop-v0": _diff(-0.7, (-0.8, -0.6), 0.0001)})}
    kinds = {"lumos/MathWord-v0": "math", "lumos/WebShop-v0": "web"}

    def can_act(agent, env_id):
        return not (agent == "cot" and kinds[env_id] == "web")

    (agent, verdict), = claim_rows(CLAIMS[0], "lumos-i", comparisons, {"cot": "cot"}, can_act)
    assert agent == "cot" and verdict.ahead == ["lumos/MathWord-v0"]
    assert verdict.left_out == ["lumos/WebShop-v0"] and verdict.why == "cannot act"
    assert verdict.suite is None  # the suite score averages the env cot cannot act in
    # without the declaration, WebShop would count as a win
    (_, counted), = claim_rows(CLAIMS[0], "lumos-i", comparisons, {"cot": "cot"})
    assert counted.ahead == ["lumos/MathWord-v0", "lumos/WebShop-v0"]
    lines = "\n".join(claims_markdown("ref", "lumos-i", comparisons, {"cot": "cot"}, [],
                                      short_env, diff_text, can_act=can_act))
    assert "| 1: MathWord-v0 | 0 | 0 | 1: WebShop-v0 (cannot act) |" in lines


def test_claim_c_leaves_out_envs_at_the_floor_and_says_when_nothing_is_left():
    # the domain-specific row minus the unified one: 0.000 against 0.000 on WebShop, 0.000
    # against 0.030 on Mind2Web (at the floor on both)
    comparisons = {"math-only": _comparison({
        "lumos/WebShop-v0": _diff(0.0, (0.0, 0.0), 1.0, a=0.0, b=0.0),
        "lumos/Mind2Web-v0": _diff(-0.03, (-0.05, -0.01), 0.001, a=0.0, b=0.03)})}
    agents = {"math-only": "lumos-i", "ref": "lumos-i"}
    trained = {"ref": frozenset({"math", "qa"}), "math-only": frozenset({"math"})}
    (family, verdict), = generalisation_rows("ref", "lumos-i", comparisons, agents, trained)
    assert family == "math" and not (verdict.ahead or verdict.behind or verdict.undecided)
    assert sorted(verdict.left_out) == ["lumos/Mind2Web-v0", "lumos/WebShop-v0"]
    text = "\n".join(claims_markdown("ref", "lumos-i", comparisons, agents, [], short_env,
                                     diff_text, trained))
    assert UNMEASURABLE_C in text
    assert "| (c) | Lumos-I on math alone | `math-only` | - | - |" in text  # no paper figure
