"""Mind2Web's step metrics against the official rule, case by case.

Every expected value below is worked out by hand from Mind2Web's own evaluation
(``OSU-NLP-Group/Mind2Web``, ``src/action_prediction/metric.py``: ``calculate_f1`` over the
whitespace-token sets of ``"OP value"``, case-sensitive, punctuation kept; the gold string
leaves a CLICK's value out; step success = element right and F1 exactly 1; task success =
every step right). Where the ``mind2web/lumos`` rule (Lumos' ``eval/mind2web/run_eval.py``)
gives another value, the test shows both.
"""

from __future__ import annotations

import json

import pytest

from lumos_gym.envs.web import mind2web_data
from lumos_gym.envs.web.mind2web import Mind2WebEnv
from lumos_gym.envs.web.mind2web_data import Candidate, Operation, StepPage, score_step
from lumos_gym.scoring import mind2web as m2w
from lumos_gym.scoring.mind2web import (
    LUMOS,
    OFFICIAL,
    SCORERS,
    StepScore,
    calculate_f1,
    episode_metrics,
    gold_action_string,
    resolve_scorer,
    score_action,
)


def official(op, value, gold_op, gold_value, *, element=True, **kw):
    return score_action(op, value, gold_op, gold_value, element_correct=element, **kw)


def lumos(op, value, gold_op, gold_value, *, element=True, **kw):
    return score_action(op, value, gold_op, gold_value, element_correct=element, scorer=LUMOS,
                        **kw)


# ---------------------------------------------------------------------------------------------
# calculate_f1 itself


def test_f1_of_both_empty_is_one_and_of_one_empty_is_zero():
    assert calculate_f1("", "") == 1.0
    assert calculate_f1("   ", "") == 1.0
    assert calculate_f1("", "TYPE x") == 0.0
    assert calculate_f1("CLICK", "") == 0.0


def test_f1_is_over_token_sets():
    # {TYPE, new, york, city} vs {TYPE, new, york}: P = 3/4, R = 1
    assert calculate_f1("TYPE new york city", "TYPE new york") == pytest.approx(6 / 7)
    # order and repeats do not matter
    assert calculate_f1("TYPE York New New", "TYPE New York") == 1.0
    assert calculate_f1("CLICK", "TYPE x") == 0.0


def test_f1_keeps_case_and_punctuation():
    assert calculate_f1("TYPE atlanta", "TYPE ATLANTA") == 0.5
    # a lone punctuation token is a token: {TYPE, -} vs {TYPE}, P = 1/2, R = 1
    assert calculate_f1("TYPE -", "TYPE") == pytest.approx(2 / 3)
    assert calculate_f1("TYPE ,", "TYPE ,") == 1.0


# ---------------------------------------------------------------------------------------------
# One step


def test_click_without_a_value():
    score = official("CLICK", "", "CLICK", "")
    assert score == StepScore(True, True, 1.0) and score.success
    assert lumos("CLICK", "", "CLICK", "") == StepScore(True, True, 1.0)


def test_the_gold_clicks_value_is_left_out():
    # format_input_multichoice writes no "Value:" line for a CLICK target
    assert gold_action_string("CLICK", "Submit") == "CLICK"
    assert official("CLICK", "", "CLICK", "Submit") == StepScore(True, True, 1.0)
    assert lumos("CLICK", "", "CLICK", "Submit") == StepScore(True, True, 1.0)


def test_a_predicted_clicks_value_counts_officially_and_not_for_lumos():
    # "CLICK now" vs "CLICK": {CLICK, now} vs {CLICK}, P = 1/2, R = 1 -> 2/3, not a success
    score = official("CLICK", "now", "CLICK", "")
    assert score.operation_f1 == pytest.approx(2 / 3) and not score.success
    # Lumos never looks at a CLICK's value
    assert lumos("CLICK", "now", "CLICK", "") == StepScore(True, True, 1.0)


def test_type_with_another_case():
    # {TYPE, new, york} vs {TYPE, New, York}: tp = 1, P = R = 1/3
    score = official("TYPE", "new york", "TYPE", "New York")
    assert score.operation_f1 == pytest.approx(1 / 3) and not score.operation_correct
    assert not score.success
    # Lumos: text.lower() == value.lower()
    assert lumos("TYPE", "new york", "TYPE", "New York") == StepScore(True, True, 1.0)


def test_select_with_the_exact_value():
    assert official("SELECT", "Business", "SELECT", "Business") == StepScore(True, True, 1.0)
    # "SELECT Economy" vs "SELECT Business": P = R = 1/2
    assert official("SELECT", "Economy", "SELECT", "Business") == StepScore(True, False, 0.5)


def test_a_lone_punctuation_token_counts():
    # {TYPE, Paris, ","} vs {TYPE, Paris}: P = 2/3, R = 1 -> 0.8
    score = official("TYPE", "Paris ,", "TYPE", "Paris")
    assert score.operation_f1 == pytest.approx(0.8) and not score.success
    # {TYPE, Smith, Sons} vs {TYPE, Smith, &, Sons}: P = 1, R = 3/4 -> 6/7
    score = official("TYPE", "Smith Sons", "TYPE", "Smith & Sons")
    assert score.operation_f1 == pytest.approx(6 / 7) and not score.success
    # the lumos rule's F1 is the same F1 lower-cased: punctuation counts there too
    score = lumos("TYPE", "Paris ,", "TYPE", "Paris")
    assert score.operation_f1 == pytest.approx(0.8) and not score.success


def test_duplicated_and_reordered_tokens_are_a_set():
    # {TYPE, New, York} both sides: F1 = 1, a step success under the official rule
    assert official("TYPE", "New New York", "TYPE", "New York") == StepScore(True, True, 1.0)
    assert official("TYPE", "York New", "TYPE", "New York") == StepScore(True, True, 1.0)
    # Lumos compares the strings: not the gold value, though the F1 is 1
    assert lumos("TYPE", "New New York", "TYPE", "New York") == StepScore(True, False, 1.0)
    assert lumos("TYPE", "York New", "TYPE", "New York") == StepScore(True, False, 1.0)


def test_the_op_name_is_a_token_too():
    # a TYPE whose value repeats the op: {TYPE, x} both sides
    assert official("TYPE", "TYPE x", "TYPE", "x").success
    # a wrong op with the right value: {SELECT, Business} vs {TYPE, Business} -> 1/2
    score = official("SELECT", "Business", "TYPE", "Business")
    assert score == StepScore(True, False, 0.5)
    assert lumos("SELECT", "Business", "TYPE", "Business") == StepScore(True, False, 0.5)


def test_the_value_is_read_up_to_its_first_line_break():
    # postprocess_action reads "Value: (.*)$" (multi-line): the first line only
    assert official("TYPE", "Line one", "TYPE", "Line one\nLine two").success


def test_element_wrong_and_operation_right():
    score = official("TYPE", "ATLANTA", "TYPE", "ATLANTA", element=False)
    assert score == StepScore(False, True, 1.0) and not score.success
    assert lumos("TYPE", "ATLANTA", "TYPE", "ATLANTA", element=False) == score


def test_a_step_without_a_gold_element_or_a_prediction_scores_zero():
    # evaluate_dataset: no positive candidate (or no final prediction) -> 0, 0, 0
    assert official("TYPE", "x", "TYPE", "x", element=False, has_gold_element=False) == (
        StepScore(False, False, 0.0))
    assert official("TYPE", "x", "TYPE", "x", element=False, predicted_element=False) == (
        StepScore(False, False, 0.0))
    # the lumos rule still scores the operation
    assert lumos("TYPE", "x", "TYPE", "x", element=False, has_gold_element=False) == (
        StepScore(False, True, 1.0))


# ---------------------------------------------------------------------------------------------
# A page (mind2web_data.score_step) and an episode


def flights_page(operation: Operation) -> StepPage:
    gold = Candidate("10", "input", {"aria_label": "Departing from"}, "", positive=True)
    other = Candidate("11", "button", {}, "Search flights")
    return StepPage(0, 2, (other, gold), operation, "[combobox]  Departing from -> TYPE", "k")


def test_score_step_reads_the_element_off_the_page():
    page = flights_page(Operation("TYPE", "ATLANTA", "TYPE"))
    gold, other = page.candidates[1], page.candidates[0]
    assert score_step(page, gold, "TYPE", "ATLANTA") == StepScore(True, True, 1.0)
    assert score_step(page, other, "TYPE", "ATLANTA") == StepScore(False, True, 1.0)
    # picked on another step's page
    assert score_step(page, gold, "TYPE", "ATLANTA", on_page=False) == StepScore(False, True, 1.0)
    assert score_step(page, None, "TYPE", "ATLANTA") == StepScore(False, False, 0.0)
    assert score_step(page, gold, "TYPE", "atlanta") == StepScore(True, False, 0.5)
    assert score_step(page, gold, "TYPE", "atlanta", scorer="lumos") == StepScore(True, True, 1.0)


def test_score_step_on_a_page_without_a_gold_element():
    page = flights_page(Operation("TYPE", "ATLANTA", "TYPE"))
    negatives = StepPage(0, 2, page.candidates[:1], page.operation, page.action_repr, "k")
    chosen = negatives.candidates[0]
    assert score_step(negatives, chosen, "TYPE", "ATLANTA") == StepScore(False, False, 0.0)
    assert score_step(negatives, chosen, "TYPE", "ATLANTA", scorer=LUMOS) == (
        StepScore(False, True, 1.0))


def test_task_success_needs_every_step():
    right, wrong = StepScore(True, True, 1.0), StepScore(True, False, 0.5)
    assert episode_metrics([right, right, right], 3) == {
        "step_success_rate": 1.0, "element_accuracy": 1.0, "operation_f1": 1.0, "success": 1.0}
    metrics = episode_metrics([right, wrong, right], 3)
    assert metrics["success"] == 0.0
    assert metrics["step_success_rate"] == pytest.approx(2 / 3)
    assert metrics["operation_f1"] == pytest.approx(2.5 / 3)
    # a step not played counts as failed (every step of the task is in the denominator)
    metrics = episode_metrics([right, right, None], 3)
    assert metrics["success"] == 0.0 and metrics["step_success_rate"] == pytest.approx(2 / 3)
    assert episode_metrics([], 0)["success"] == 0.0


# ---------------------------------------------------------------------------------------------
# Names, records and the env option


def test_scorer_names_and_short_forms():
    assert resolve_scorer("official") == OFFICIAL == "mind2web/official"
    assert resolve_scorer("lumos") == LUMOS == "mind2web/lumos"
    assert resolve_scorer(LUMOS) == LUMOS
    with pytest.raises(ValueError, match="mind2web/official.*mind2web/lumos"):
        resolve_scorer("exact")


def test_the_scorer_records():
    records = {s.name: s for s in SCORERS}
    assert list(records) == [OFFICIAL, LUMOS]
    assert "calculate_f1" in records[OFFICIAL].reproduces
    assert "run_eval.py" in records[LUMOS].reproduces
    assert records[OFFICIAL].envs == ("lumos/Mind2Web-v0",)
    assert all(s.departures and s.rule for s in SCORERS)
    # every departure is named in the module docstring too
    assert "marco" in m2w.__doc__ and "env[0]" in m2w.__doc__


def test_mind2web_data_keeps_the_old_names():
    assert mind2web_data.StepScore is StepScore
    assert mind2web_data.episode_metrics is episode_metrics
    assert mind2web_data.operation_f1 is m2w.operation_f1


def one_task_file(tmp_path):
    html = ('<html backend_node_id="1"><body backend_node_id="2">'
            '<input backend_node_id="10" type="text" aria_label="City"/>'
            '<button backend_node_id="11">Search</button></body></html>')

    def cand(tag, node_id, positive):
        return {"tag": tag, "attributes": json.dumps({"backend_node_id": node_id}),
                "backend_node_id": node_id, "is_original_target": positive,
                "is_top_level_target": positive}

    task = {
        "annotation_id": "city-1", "website": "example", "domain": "Travel",
        "subdomain": "Hotels", "confirmed_task": "Find hotels in New York",
        "action_reprs": ["[textbox]  City -> TYPE: New York", "[button]  Search -> CLICK"],
        "actions": [
            {"action_uid": "a1", "raw_html": html, "cleaned_html": html,
             "operation": {"op": "TYPE", "original_op": "TYPE", "value": "New York"},
             "pos_candidates": [cand("input", "10", True)],
             "neg_candidates": [cand("button", "11", False)]},
            {"action_uid": "a2", "raw_html": html, "cleaned_html": html,
             "operation": {"op": "CLICK", "original_op": "CLICK", "value": ""},
             "pos_candidates": [cand("button", "11", True)],
             "neg_candidates": [cand("input", "10", False)]},
        ],
    }
    path = tmp_path / "test_task"
    path.mkdir()
    (path / "tasks.json").write_text(json.dumps([task]))
    return path


@pytest.mark.parametrize(("scorer", "name", "reward"), [
    (None, OFFICIAL, 0.5), ("official", OFFICIAL, 0.5), ("lumos", LUMOS, 1.0),
    ("mind2web/lumos", LUMOS, 1.0),
])
def test_the_env_scores_with_its_scorer(tmp_path, scorer, name, reward):
    kwargs = {} if scorer is None else {"scorer": scorer}
    env = Mind2WebEnv(source=one_task_file(tmp_path), ranker="oracle", **kwargs)
    assert env.scorer == name and Mind2WebEnv.default_scorer == OFFICIAL
    env.reset(seed=0)
    env.step("R1 = TYPE(Env, QUERY: the city box, TEXT: new york)")  # lower case
    *_, done, _, info = env.step("R2 = CLICK(R1, QUERY: the search button)")
    assert done and info["metrics"]["step_success_rate"] == reward
    assert info["metrics"]["success"] == float(reward == 1.0)
    env.close()


def test_the_env_rejects_an_unknown_scorer(tmp_path):
    with pytest.raises(ValueError, match="unknown Mind2Web scorer 'exact'.*official.*lumos"):
        Mind2WebEnv(source=one_task_file(tmp_path), ranker="oracle", scorer="exact")
