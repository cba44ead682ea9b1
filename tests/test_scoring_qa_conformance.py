"""Conformance of the QA metrics with the official scorers they reproduce (issue 34).

The expected values are what the official functions return, worked out from their source:

* ``hotpotqa/official`` and ``2wikimultihopqa/official``: hotpotqa/hotpot
  ``hotpot_evaluate_v1.py`` ``exact_match_score`` and ``f1_score`` (2WikiMultihopQA's
  ``2wikimultihop_evaluate_v1.1.py`` has the same two functions and takes the best over its
  gold answers). ``f1_score`` returns 0 for yes/no/noanswer mismatches and whenever the two
  answers share no token, so two answers that normalise to nothing score F1 0, while
  ``exact_match_score`` compares the two empty strings and gives 1.
* ``musique/official``: StonyBrookNLP/musique ``metrics/answer.py`` ``compute_exact`` and
  ``compute_f1`` (SQuAD's: an empty side scores ``int(gold_toks == pred_toks)``; no yes/no
  rule), the best over the answer and its aliases.
* ``strategyqa/lumos``: allenai/lumos ``eval/strategyqa/run_eval.py``; the record lists where
  lumos-gym's yes/no reading departs from it.
"""

from __future__ import annotations

import pytest

from lumos_gym.envs.qa.base import QAEnv
from lumos_gym.envs.tasks import Task
from lumos_gym.scoring.qa import (
    DATASET_SCORERS,
    DEFAULT_QA_SCORER,
    SCORERS,
    exact_match,
    f1,
    qa_scores,
    yes_no,
)
from lumos_gym.scoring.scorers import all_scorers

# ---------------------------------------------------------------------------------------------
# hotpot_evaluate_v1: exact_match_score and f1_score


@pytest.mark.parametrize(
    ("pred", "gold", "em", "f1_value"),
    [
        # answers that normalise to nothing: EM compares "" with "", F1 has no common token
        ("", "!!!", 1.0, 0.0),
        ("", "The The", 1.0, 0.0),
        ("...", "a an the", 1.0, 0.0),
        ("", "", 1.0, 0.0),
        ("Paris", "!!!", 0.0, 0.0),
        ("", "Paris", 0.0, 0.0),
        # yes, no and noanswer match only themselves
        ("yes", "yes", 1.0, 1.0),
        ("Yes.", "yes", 1.0, 1.0),
        ("yes indeed", "yes", 0.0, 0.0),
        ("no", "no way out", 0.0, 0.0),
        ("noanswer", "noanswer", 1.0, 1.0),
        ("No answer", "noanswer", 0.0, 0.0),  # "no answer" is two tokens, gold is exact-only
        ("no answer", "the answer", 0.0, 2 / 3),  # neither side is exact-only: token overlap
        # ordinary spans
        ("The Eiffel Tower", "eiffel tower", 1.0, 1.0),
        ("Eiffel", "Eiffel Tower", 0.0, 2 / 3),
        ("O'Neil", "oneil", 1.0, 1.0),  # punctuation deleted, not spaced
        ("tower tower", "tower", 0.0, 2 / 3),  # Counter intersection
    ],
)
def test_hotpotqa_em_and_f1(pred, gold, em, f1_value):
    assert exact_match(pred, gold) == em
    assert f1(pred, gold) == pytest.approx(f1_value)
    scores = qa_scores(pred, gold, answer_type="span", scorer="hotpotqa/official")
    assert scores["exact_match"] == em
    assert scores["f1"] == pytest.approx(f1_value)


def test_2wiki_takes_the_best_over_the_gold_answers():
    scores = qa_scores("USA", "United States", aliases=["USA"], scorer="2wikimultihopqa/official")
    assert scores["exact_match"] == 1.0 and scores["f1"] == 1.0


# ---------------------------------------------------------------------------------------------
# MuSiQue: SQuAD's F1


@pytest.mark.parametrize(
    ("pred", "gold", "f1_value"),
    [
        ("", "!!!", 1.0),  # both empty: int([] == [])
        ("", "", 1.0),
        ("", "Paris", 0.0),
        ("yes indeed", "yes", 2 / 3),  # no yes/no rule
        ("Eiffel", "Eiffel Tower", 2 / 3),
    ],
)
def test_musique_f1_is_squads(pred, gold, f1_value):
    assert f1(pred, gold, variant="squad") == pytest.approx(f1_value)
    assert qa_scores(pred, gold, answer_type="span", scorer="musique/official")["f1"] == (
        pytest.approx(f1_value)
    )


def test_an_unknown_variant_or_scorer_is_refused():
    with pytest.raises(ValueError, match="variant"):
        f1("a", "a", variant="bleu")
    with pytest.raises(ValueError, match="hotpotqa/official"):
        qa_scores("a", "a", scorer="hotpotqa/fuzzy")


def test_a_missing_prediction_scores_zero():
    assert exact_match(None, "!!!") == 0.0 and f1(None, "!!!") == 0.0


# ---------------------------------------------------------------------------------------------
# StrategyQA: yes/no accuracy, and where it departs from Lumos'


@pytest.mark.parametrize(
    ("pred", "verdict"),
    [("Yes, he did.", "yes"), ("TRUE", "yes"), ("no", "no"), ("False.", "no"),
     ("No answer", None), ("eyes", None), ("I don't know", None)],
)
def test_yes_no_reading(pred, verdict):
    assert yes_no(pred) == verdict


def test_strategyqa_accuracy_counts_no_verdict_as_wrong():
    # Lumos read "No answer" as false, right for a false gold: the record names the departure
    assert qa_scores("No answer", "false", answer_type="yes/no")["accuracy"] == 0.0
    assert qa_scores("Yes, it is", "true", answer_type="yes/no")["accuracy"] == 1.0
    record = all_scorers()["strategyqa/lumos"]
    assert any("No answer" in d for d in record.departures)


# ---------------------------------------------------------------------------------------------
# The records and the envs


def test_every_qa_dataset_rule_has_a_record():
    names = {s.name for s in SCORERS}
    assert set(DATASET_SCORERS.values()) <= names
    assert DEFAULT_QA_SCORER in names and "hotpotqa/lumos-judge" in names
    declared = all_scorers()
    assert declared["hotpotqa/official"].envs == ("lumos/HotpotQA-v0",)
    assert "hotpot_evaluate_v1.py" in declared["hotpotqa/official"].reproduces


@pytest.mark.parametrize(
    ("env_id", "scorer"),
    [
        ("lumos/HotpotQA-v0", "hotpotqa/official"),
        ("lumos/StrategyQA-v0", "strategyqa/lumos"),
        ("lumos/MuSiQue-v0", "musique/official"),
        ("lumos/2WikiMultihopQA-v0", "2wikimultihopqa/official"),
        ("lumos/Bamboogle-v0", "qa/em-f1"),
    ],
)
def test_registered_qa_envs_name_their_rule(env_id, scorer):
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        assert env.unwrapped.scorer == scorer
        assert scorer in all_scorers()
        assert env_id in all_scorers()[scorer].envs
    finally:
        env.close()


def test_a_qa_env_scores_with_its_datasets_f1():
    task = Task(id="musique/dev/1", question="Who?", answer="!!!", task_type="qa",
                meta={"answer_type": "span"})
    musique = QAEnv(tasks=[task], dataset="musique")
    hotpot = QAEnv(tasks=[task], dataset="hotpotqa")
    try:
        assert musique.score("", task)["f1"] == 1.0
        assert hotpot.score("", task)["f1"] == 0.0
        assert hotpot.score("", task)["exact_match"] == 1.0
    finally:
        musique.close()
        hotpot.close()
    generic = QAEnv(tasks=[task])
    assert generic.scorer == DEFAULT_QA_SCORER
    generic.close()
