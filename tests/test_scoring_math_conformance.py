"""Conformance of the named math rules with the official scorers they reproduce (issue 34).

Each expected value below is what the official rule gives, worked out from its source:

* ``gsm8k/official``: openai/grade-school-math ``grade_school_math/dataset.py``: ``is_correct``
  extracts ``#### (\\-?[0-9\\.\\,]+)`` from the completion and from the gold solution, removes
  commas and compares the strings; a prediction is scored as the completion ``"#### " + pred``.
* ``gsm8k/lumos``: allenai/lumos ``eval/gsm/run_eval.py``: ``results[final_variable] ==
  answer``, the gold being the text after ``####`` with ``re.sub(r"(\\d),(\\d)", ...)``.
* ``svamp/lumos``: allenai/lumos ``eval/svamp/run_eval.py``: ``== str(int(Answer))``.
* ``math/exact`` and ``math/lenient``: lumos-gym's own rules (no official scorer exists for
  SVAMP's answers, ASDiv or MathWord), checked against the rule texts of their records.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from lumos_gym.envs.math.official import SCORER_CHOICES, MathEnv, MathWordEnv, math_scorer
from lumos_gym.envs.tasks import Task
from lumos_gym.scoring.answers import (
    EXACT_DECIMAL_DIGITS,
    GSM8K_INVALID,
    MATH_RULES,
    SCORERS,
    answers_match,
    exact_answer_match,
    gsm8k_extract_answer,
    gsm8k_is_correct,
    gsm8k_lumos_correct,
    lenient_answer_match,
    math_accuracy,
    svamp_lumos_correct,
)
from lumos_gym.scoring.scorers import all_scorers

# ---------------------------------------------------------------------------------------------
# The defects measured in issue 34: a wrong answer the old 1e-6 tolerance accepted


@pytest.mark.parametrize(
    ("pred", "gold"),
    [("1450001", "1450000"), ("1000001", "1000000"), ("1800.00018", "1800")],
)
def test_no_rule_accepts_a_wrong_answer_near_a_large_gold(pred, gold):
    assert answers_match(pred, gold) is False  # the default: math/exact
    for name, rule in MATH_RULES.items():
        assert rule(pred, gold) is False, name
    # the conversion rules' explicit tolerance still sees them as the same written value
    assert answers_match(pred, gold, rel_tol=1e-6) is True


# ---------------------------------------------------------------------------------------------
# gsm8k/official: GSM8K's is_correct on "#### " + prediction


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("1800", True),
        ("1,800", True),  # commas removed
        ("1800 dollars", True),  # the regex stops at the number
        ("1800.00", False),  # "1800.00" != "1800"
        ("1.800e+03", False),  # reads "1.800"
        ("3600/2", False),  # reads "3600"
        ("eighteen hundred", False),  # [invalid]
        ("$1800", False),  # "$" right after the mark: [invalid]
        ("1800.", False),  # the dot is part of the run: "1800."
        (" 1800", False),  # two spaces after the mark: [invalid]
        ("", False),
        (None, False),
    ],
)
def test_gsm8k_official_on_1800(pred, expected):
    assert gsm8k_is_correct(pred, "1800") is expected


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("-10", "-10", True),
        ("-10.0", "-10", False),
        ("eighteen", "18", False),
        ("18", "18", True),
        ("The answer is #### 18", "18", True),  # search finds the later mark, as is_correct does
    ],
)
def test_gsm8k_official_cases(pred, gold, expected):
    assert gsm8k_is_correct(pred, gold) is expected


def test_gsm8k_extract_answer_reads_the_gold_solution_as_the_official_script():
    solution = "She pays 3 * 600 = <<3*600=1800>>1,800 dollars.\n#### 1,800"
    assert gsm8k_extract_answer(solution) == "1800"
    assert gsm8k_is_correct("1800", solution) is True  # a whole solution as gold works too
    assert gsm8k_extract_answer("no mark") == GSM8K_INVALID
    with pytest.raises(ValueError, match="GSM8K"):
        gsm8k_is_correct("5", "five")  # is_correct asserts the gold has a number


# ---------------------------------------------------------------------------------------------
# gsm8k/lumos and svamp/lumos: exact strings


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("1800", "1,800", True),  # the gold's commas between digits go
        ("1800", "1800", True),
        ("1,800", "1800", False),  # the prediction is compared as it is
        ("1800.0", "1800", False),
        ("1800 ", "1800", False),
        ("-10.0", "-10", False),
        ("eighteen", "18", False),
        ("1234567", "1,234,567", True),
    ],
)
def test_gsm8k_lumos(pred, gold, expected):
    assert gsm8k_lumos_correct(pred, gold) is expected


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [("38", "38", True), ("38.0", "38", False), ("2", "2.5", True), ("2.5", "2.5", False)],
)
def test_svamp_lumos_compares_with_the_truncated_integer(pred, gold, expected):
    assert svamp_lumos_correct(pred, gold) is expected


# ---------------------------------------------------------------------------------------------
# math/exact (the default) and math/lenient


@pytest.mark.parametrize(
    ("pred", "gold", "exact", "lenient"),
    [
        ("1800.00", "1800", True, True),  # the same value
        ("1.800e+03", "1800", True, True),
        ("$1,800", "1800", True, True),
        ("1800 dollars", "1800", True, True),
        ("-10.0", "-10", True, True),
        ("3600/2", "1800", False, True),  # an unreduced expression: lenient only
        ("eighteen", "18", False, True),  # a number word: lenient only
        ("1800.00018", "1800", False, False),
        ("1801", "1800", False, False),
        ("1/3", "1/3", True, True),  # a fraction in lowest terms is a number
        ("2/6", "1/3", False, True),
        ("1 1/2", "3/2", True, True),
        ("1.5", "3/2", True, True),
        ("0.333333333333", "1/3", True, True),  # 12 significant digits, as the Calculator writes
        ("0.3333333333333", "1/3", True, True),
        ("0.33333333333", "1/3", False, True),  # 11 digits: lenient only
        ("0.33", "1/3", False, True),
        ("0.34", "1/3", False, False),  # not the rounded value
        ("0.333333333334", "1/3", False, False),
        ("3.33333333333", "20/6", True, True),  # 12 significant digits
        ("0.833333333333", "5:6", True, True),  # a ratio with no finite decimal
        ("0.83", "5:6", False, True),
        ("6:8", "3:4", True, True),
        ("0.75", "3:4", True, True),
        ("3.14", "3.14159", False, False),  # a finite gold is matched only by its value
        ("3", "2.5", False, False),
        ("3, 2", "3; 2", True, True),
        ("The Bag of Rice.", "the bag of rice", True, True),
        ("one", "1", False, True),
        (None, "1", False, False),
    ],
)
def test_exact_and_lenient(pred, gold, exact, lenient):
    assert exact_answer_match(pred, gold) is exact
    assert answers_match(pred, gold) is exact  # the default rule
    assert lenient_answer_match(pred, gold) is lenient
    assert math_accuracy(pred, gold) == float(exact)
    assert math_accuracy(pred, gold, scorer="math/lenient") == float(lenient)


def test_lenient_never_accepts_a_wrong_integer():
    for gold in ("1800", "1000000", "1450000", "-10", "0"):
        value = int(gold)
        for near in (value - 1, value + 1):
            assert not lenient_answer_match(str(near), gold)
        for noise in ("0.4", "0.00018", "0.5", "0.000000001"):
            assert not lenient_answer_match(str(Fraction(value) + Fraction(noise)), gold)
            assert not lenient_answer_match(f"{value}{noise[1:]}", gold)


def test_the_exact_digits_are_the_calculators():
    from lumos_gym.tools.math import SIGNIFICANT_DIGITS

    assert EXACT_DECIMAL_DIGITS == SIGNIFICANT_DIGITS


def test_math_accuracy_refuses_an_unknown_rule():
    with pytest.raises(ValueError, match="math/exact"):
        math_accuracy("1", "1", scorer="math/fuzzy")


# ---------------------------------------------------------------------------------------------
# The records and the envs


def test_every_math_rule_has_a_record_and_the_records_name_the_defaults():
    names = {s.name for s in SCORERS}
    assert names == set(MATH_RULES)
    declared = all_scorers()
    assert declared["gsm8k/official"].envs == ("lumos/GSM8K-v0",)
    assert set(declared["math/exact"].envs) == {
        "lumos/SVAMP-v0", "lumos/ASDiv-v0", "lumos/MathWord-v0"
    }
    assert "no official scorer" in declared["math/exact"].reproduces
    assert "is_correct" in declared["gsm8k/official"].reproduces


@pytest.mark.parametrize(
    ("env_id", "scorer"),
    [
        ("lumos/GSM8K-v0", "gsm8k/official"),
        ("lumos/SVAMP-v0", "math/exact"),
        ("lumos/ASDiv-v0", "math/exact"),
        ("lumos/MathWord-v0", "math/exact"),
    ],
)
def test_registered_envs_score_with_their_default(env_id, scorer):
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        assert env.unwrapped.scorer == scorer
    finally:
        env.close()


def _task(answer: str) -> Task:
    return Task(id="gsm8k/test/x", question="How much?", answer=answer, task_type="math")


def test_math_env_scores_with_the_chosen_rule():
    task = _task("1800")
    cases = {
        None: {"1800": 1.0, "1800.00": 0.0, "3600/2": 0.0},
        "official": {"1800": 1.0, "1800.00": 0.0},
        "gsm8k/lumos": {"1800": 1.0, "1800 dollars": 0.0},
        "exact": {"1800.00": 1.0, "3600/2": 0.0, "eighteen hundred": 0.0},
        "lenient": {"3600/2": 1.0, "1800.00018": 0.0},
    }
    for scorer, expected in cases.items():
        env = MathEnv(dataset="gsm8k", tasks=[task], scorer=scorer)
        for pred, value in expected.items():
            assert env.score(pred, task) == {"accuracy": value}, (scorer, pred)


def test_scorer_short_names_resolve_per_dataset():
    assert math_scorer("gsm8k") == "gsm8k/official"
    assert math_scorer("gsm8k", "lumos") == "gsm8k/lumos"
    assert math_scorer("svamp") == "math/exact"
    assert math_scorer("svamp", "lumos") == "svamp/lumos"
    assert math_scorer("asdiv", "lenient") == "math/lenient"
    assert math_scorer("mathword", "math/exact") == "math/exact"
    assert set(SCORER_CHOICES["gsm8k"].values()) <= set(MATH_RULES)
    assert MathEnv(dataset="svamp", scorer="lumos").scorer == "svamp/lumos"
    assert MathWordEnv(num_tasks=1, scorer="lenient").scorer == "math/lenient"


@pytest.mark.parametrize(("dataset", "scorer"), [("asdiv", "official"), ("svamp", "gsm8k/lumos"),
                                                 ("gsm8k", "fuzzy")])
def test_a_scorer_the_dataset_lacks_is_refused_with_the_choices(dataset, scorer):
    with pytest.raises(ValueError, match="choose one of .*'exact' \\(math/exact\\)"):
        MathEnv(dataset=dataset, scorer=scorer)
