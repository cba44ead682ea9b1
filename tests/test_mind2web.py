"""Mind2Web: the official-format loader, teacher-forced step scoring, rankers, converter, recorder.

The sample tasks below are written here in the official layout (the fields of the
``osunlp/Mind2Web`` dataset card: ``action_reprs``, ``actions`` with ``raw_html``,
``cleaned_html``, ``operation`` {``op``, ``original_op``, ``value``} and candidates whose
``attributes`` are a JSON string, or a dict as in the files before the dataset's fix).
"""

from __future__ import annotations

import json
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym import prompts
from lumos_gym.agents.base import StepOutcome
from lumos_gym.agents.lumos import subgoal_feedback, tool_specs
from lumos_gym.conversion.exports import plan_iterative
from lumos_gym.conversion.mind2web_rules import mind2web_annotation
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.conversion.verify import verify_annotations
from lumos_gym.envs.checks import replay_gold
from lumos_gym.envs.web.mind2web import MIND2WEB_TOOLS, Mind2WebEnv, mind2web_source
from lumos_gym.envs.web.mind2web_data import (
    Operation,
    build_page,
    infer_split,
    load_mind2web,
    operation_f1,
    parse_action_repr,
    record_task,
    step_subgoal,
)
from lumos_gym.errors import DataError, ToolError
from lumos_gym.tools.mind2web import (
    BM25Ranker,
    CrossEncoderRanker,
    ElementClick,
    EmbedRanker,
    OracleRanker,
    make_ranker,
    mindact_query,
)

# ---------------------------------------------------------------------------------------------
# A sample in the official format


def candidate(tag, node_id, positive=False, *, as_dict=False, **attributes):
    attrs = {"backend_node_id": node_id, **attributes}
    return {
        "tag": tag,
        "attributes": attrs if as_dict else json.dumps(attrs),
        "backend_node_id": node_id,
        "is_original_target": positive,
        "is_top_level_target": positive,
    }


def page_html(*elements: str) -> str:
    body = "".join(elements)
    return (f'<html backend_node_id="1"><body backend_node_id="2"><div backend_node_id="3">'
            f"{body}</div></body></html>")


FLIGHTS_1 = page_html(
    '<input backend_node_id="10" type="text" aria_label="Departing from"/>',
    '<button backend_node_id="11">Search flights</button>',
    '<a backend_node_id="12">Deals and offers</a>',
)
FLIGHTS_2 = page_html(
    '<span backend_node_id="20">Atlanta, GA (ATL)</span>',
    '<span backend_node_id="21">Atlantic City (ACY)</span>',
    '<select backend_node_id="22"><option>Economy</option><option>Business</option></select>',
)


def flights_task():
    """Three steps: TYPE, a HOVER recorded as CLICK, SELECT."""
    return {
        "annotation_id": "flights-1",
        "website": "united",
        "domain": "Travel",
        "subdomain": "Airlines",
        "confirmed_task": "Find flights from Atlanta in business class",
        "action_reprs": [
            "[combobox]  Departing from -> TYPE: ATLANTA",
            "[span]  Atlanta, GA (ATL) -> HOVER",
            "[select]  Economy -> SELECT: Business",
        ],
        "actions": [
            {"action_uid": "a1", "raw_html": FLIGHTS_1, "cleaned_html": FLIGHTS_1,
             "operation": {"op": "TYPE", "original_op": "TYPE", "value": "ATLANTA"},
             "pos_candidates": [candidate("input", "10", True, type="text",
                                          aria_label="Departing from")],
             "neg_candidates": [candidate("button", "11"), candidate("a", "12")]},
            {"action_uid": "a2", "raw_html": FLIGHTS_2, "cleaned_html": FLIGHTS_2,
             "operation": {"op": "CLICK", "original_op": "HOVER", "value": ""},
             "pos_candidates": [candidate("span", "20", True)],
             "neg_candidates": [candidate("span", "21"), candidate("select", "22")]},
            {"action_uid": "a3", "raw_html": FLIGHTS_2, "cleaned_html": FLIGHTS_2,
             "operation": {"op": "SELECT", "original_op": "SELECT", "value": "Business"},
             "pos_candidates": [candidate("select", "22", True)],
             "neg_candidates": [candidate("span", "20"), candidate("span", "21")]},
        ],
    }


SHOP_1 = page_html(
    '<input backend_node_id="30" type="search" name="q" placeholder="Search the store"/>',
    '<a backend_node_id="31">Sign in</a>',
)
SHOP_2 = page_html(
    '<a backend_node_id="40">Ricky Kej - Shanti Samsara</a>', '<a backend_node_id="41">Next</a>'
)


def songs_task():
    """TYPE, an ENTER recorded as CLICK, then a step whose gold element did not survive."""
    return {
        "annotation_id": "songs-2",
        "website": "soundcloud",
        "domain": "Entertainment",
        "subdomain": "Music",
        "confirmed_task": "Search for songs by Ricky Kej",
        "action_reprs": [
            "[searchbox]  Search the store -> TYPE: Ricky Kej",
            "[searchbox]  Search the store -> ENTER",
            "[link]  Ricky Kej - Shanti Samsara -> CLICK",
        ],
        "actions": [
            {"action_uid": "b1", "raw_html": SHOP_1, "cleaned_html": SHOP_1,
             "operation": {"op": "TYPE", "original_op": "TYPE", "value": "Ricky Kej"},
             "pos_candidates": [candidate("input", "30", True, as_dict=True, name="q")],
             "neg_candidates": [candidate("a", "31", as_dict=True)]},
            {"action_uid": "b2", "raw_html": SHOP_1, "cleaned_html": SHOP_1,
             "operation": {"op": "CLICK", "original_op": "ENTER", "value": ""},
             "pos_candidates": [candidate("input", "30", True, as_dict=True, name="q")],
             "neg_candidates": [candidate("a", "31", as_dict=True)]},
            {"action_uid": "b3", "raw_html": SHOP_2, "cleaned_html": SHOP_2,
             "operation": {"op": "CLICK", "original_op": "CLICK", "value": ""},
             "pos_candidates": [],
             "neg_candidates": [candidate("a", "41")]},
        ],
    }


def empty_task():
    """One step whose page kept no candidate at all."""
    return {
        "annotation_id": "empty-3", "website": "nowhere", "domain": "Info", "subdomain": "None",
        "confirmed_task": "Open the help page",
        "action_reprs": ["[a]  Help -> CLICK"],
        "actions": [{"action_uid": "c1", "raw_html": "<html></html>",
                     "cleaned_html": "<html></html>",
                     "operation": {"op": "CLICK", "original_op": "CLICK", "value": ""},
                     "pos_candidates": [], "neg_candidates": []}],
    }


@pytest.fixture
def data_root(tmp_path):
    """A data root in the official layout: ``test_task/*.json`` and ``train/train_*.json``."""
    (tmp_path / "test_task").mkdir()
    (tmp_path / "train").mkdir()
    (tmp_path / "test_task" / "b.json").write_text(json.dumps([songs_task(), empty_task()]))
    (tmp_path / "test_task" / "a.json").write_text(json.dumps([flights_task()]))
    (tmp_path / "train" / "train_10.json").write_text(json.dumps([songs_task()]))
    (tmp_path / "train" / "train_2.json").write_text(json.dumps([flights_task()]))
    return tmp_path


def make_env(root, **kwargs):
    kwargs.setdefault("ranker", "bm25")
    return Mind2WebEnv(source=root / "test_task", **kwargs)


# ---------------------------------------------------------------------------------------------
# Loader


def test_loader_keeps_every_field_and_reads_files_folders_and_roots(data_root):
    tasks = load_mind2web(data_root / "test_task", "test_task")
    assert [t.id for t in tasks] == ["mind2web/test_task/flights-1", "mind2web/test_task/songs-2",
                                     "mind2web/test_task/empty-3"]
    flights = tasks[0]
    assert flights.task_type == "web" and flights.question.startswith("Find flights from Atlanta")
    assert flights.rationale == flights.answer == "; ".join(flights_task()["action_reprs"])
    for key in ("annotation_id", "website", "domain", "subdomain", "confirmed_task",
                "action_reprs", "actions"):
        assert flights.meta[key] == flights_task()[key]
    assert flights.meta["actions"][1]["operation"]["original_op"] == "HOVER"
    assert flights.meta["actions"][0]["raw_html"] == FLIGHTS_1
    assert tasks[1].meta["actions"][1]["operation"] == {"op": "CLICK", "original_op": "ENTER",
                                                        "value": ""}
    assert len(flights.gold_actions) == 3 and flights.gold_actions[2].startswith("R3 = SELECT(R2")
    # the data root with a split name, numbered train files in numeric order, a single file
    train = load_mind2web(data_root, "train")
    assert [t.id for t in train] == ["mind2web/train/flights-1", "mind2web/train/songs-2"]
    single = Mind2WebEnv(source=data_root / "train" / "train_10.json", ranker="bm25")
    assert single.task_ids() == ["mind2web/train/songs-2"]
    assert infer_split(data_root / "test_task") == "test_task"
    assert Mind2WebEnv(source=data_root / "test_task", ranker="bm25", limit=1).task_ids() == [
        "mind2web/test_task/flights-1"
    ]


def test_loader_errors_name_the_problem(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError, match="no such Mind2Web file or folder.*osunlp/Mind2Web"):
        Mind2WebEnv(source="official", split="test_domain")
    with pytest.raises(DataError, match="split must be one of"):
        mind2web_source("official", split="dev")
    with pytest.raises(DataError, match="no such Mind2Web file"):
        Mind2WebEnv(source=tmp_path / "missing.json")
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(DataError, match="no Mind2Web task files"):
        load_mind2web(bad, "test_task")
    cases = {
        "not json": "{",
        "missing field": json.dumps([{k: v for k, v in flights_task().items() if k != "actions"}]),
        "wrong count": json.dumps([{**flights_task(), "action_reprs": ["x"]}]),
        "bad op": json.dumps([{**flights_task(), "action_reprs": ["x"], "actions": [
            {**flights_task()["actions"][0], "operation": {"op": "SCROLL"}}]}]),
        "repeated": json.dumps([flights_task(), flights_task()]),
    }
    messages = {"not json": "not readable as JSON", "missing field": "missing field.*actions",
                "wrong count": "one string per action", "bad op": "SCROLL",
                "repeated": "repeated"}
    for name, text in cases.items():
        (bad / "x.json").write_text(text)
        with pytest.raises(DataError, match=messages[name]):
            load_mind2web(bad / "x.json", "test_task")


def test_action_reprs_and_subgoals():
    parsed = parse_action_repr("[combobox]  Departing from -> TYPE: ATLANTA")
    assert (parsed.tag, parsed.text, parsed.op, parsed.value) == (
        "combobox", "Departing from", "TYPE", "ATLANTA")
    assert parse_action_repr("[button]   -> CLICK").text == ""
    assert parse_action_repr("no arrow here") is None
    hover = Operation("CLICK", "", "HOVER")
    assert (
        step_subgoal("[span]  Atlanta, GA (ATL) -> HOVER", hover)
        == "Hover over span Atlanta, GA ATL"
    )
    enter = Operation("CLICK", "", "ENTER")
    assert step_subgoal("[searchbox]  Search -> ENTER", enter) == "Press Enter in searchbox Search"
    select = Operation("SELECT", "Business", "SELECT")
    assert step_subgoal("[select]  Economy -> SELECT: Business", select) == (
        "Select Business in the select Economy")


# ---------------------------------------------------------------------------------------------
# Pages


def test_pages_keep_positives_shuffle_with_a_seed_and_read_cleaned_html(data_root, tmp_path):
    task = load_mind2web(data_root / "test_task", "test_task")[0]
    page = build_page(task, 0)
    assert {c.backend_node_id for c in page.candidates} == {"10", "11", "12"}
    by_id = {c.backend_node_id: c for c in page.candidates}
    assert by_id["11"].text == "Search flights" and by_id["10"].label == "[input] Departing from"
    assert "Departing from" in by_id["10"].ranking_text and by_id["10"].positive
    orders = {tuple(c.backend_node_id for c in build_page(task, 0, seed=s).candidates)
              for s in range(12)}
    assert len(orders) > 1  # the seed shuffles
    assert build_page(task, 0, seed=3) == build_page(task, 0, seed=3)
    small = build_page(task, 0, max_candidates=1)
    assert [c.backend_node_id for c in small.candidates] == ["10"]  # positives come first
    assert "Page 1 of 3 (3 elements):" in page.listing()
    # MindAct ranks (scores_all_data.pkl layout) choose which candidates a page keeps
    ranks = {"ranks": {"flights-1_a1": {"12": 0, "11": 1, "10": 2}}, "scores": {}}
    path = tmp_path / "scores_all_data.pkl"
    path.write_bytes(pickle.dumps(ranks))
    env = make_env(data_root, candidate_ranks=path, max_candidates=2)
    obs, _ = env.reset(options={"task_id": task.id})
    assert "[a] Deals and offers" in obs and "[button] Search flights" in obs
    assert "Departing from" not in obs.split("Page 1")[1]


# ---------------------------------------------------------------------------------------------
# The env: scoring, teacher forcing, metrics, bad input


def test_right_steps_score_one_and_observations_show_the_next_page(data_root):
    env = make_env(data_root)
    obs, info = env.reset(options={"task_id": "mind2web/test_task/flights-1"})
    assert obs.startswith("Find flights from Atlanta in business class\nWebsite: united\n\nPage 1")
    assert info["action_names"] == [*MIND2WEB_TOOLS, "Stop"]
    # the gold value's case: the official rule compares case-sensitive token sets
    obs, reward, done, _, info = env.step("R1 = TYPE(Env, QUERY: departing from, TEXT: ATLANTA)")
    assert obs.startswith("R1 = Typed 'ATLANTA' into [input] Departing from.\nPage 2 of 3")
    assert not done and info["variables"]["R1"] == "Page 2"
    assert info["gold_previous_actions"] == ["[combobox]  Departing from -> TYPE: ATLANTA"]
    assert info["metrics_so_far"]["step_success_rate"] == pytest.approx(1 / 3)
    env.step("R2 = CLICK(R1, QUERY: Atlanta GA)")
    obs, reward, done, _, info = env.step("R3 = SELECT(R2, QUERY: cabin class, TEXT: Business)")
    assert done and reward == 1.0 and "last step (3 of 3)" in obs
    assert info["metrics"] == {"step_success_rate": 1.0, "element_accuracy": 1.0,
                               "operation_f1": 1.0, "success": 1.0}
    assert info["gold_answer"].startswith("[combobox]  Departing from -> TYPE: ATLANTA")
    env.close()


def test_wrong_elements_ops_and_values_are_scored_and_the_gold_path_goes_on(data_root):
    env = make_env(data_root)
    env.reset(options={"task_id": "mind2web/test_task/flights-1"})
    # wrong element (the button), right op and value: element wrong, operation right
    obs, *_, info = env.step("R1 = TYPE(Env, QUERY: search flights button, TEXT: ATLANTA)")
    assert "[button] Search flights" in obs and "Page 2 of 3" in obs  # teacher forcing
    # right element, wrong operation (TYPE where the gold step is a CLICK)
    obs, *_, info = env.step("R2 = TYPE(R1, QUERY: Atlanta GA, TEXT: Atlanta)")
    assert "[span] Atlanta, GA (ATL)" in obs and "Page 3 of 3" in obs
    # right element and op, wrong value
    obs, reward, done, _, info = env.step("R3 = SELECT(R2, QUERY: cabin class, TEXT: Economy)")
    assert done and reward == 0.0
    metrics = info["metrics"]
    assert metrics["element_accuracy"] == pytest.approx(2 / 3)
    assert metrics["success"] == 0.0 and metrics["step_success_rate"] == 0.0
    # op F1 per step: TYPE ATLANTA vs TYPE ATLANTA = 1; "TYPE Atlanta" vs "CLICK" = 0;
    # "SELECT Economy" vs "SELECT Business" = 0.5
    assert metrics["operation_f1"] == pytest.approx((1 + 0 + 0.5) / 3)
    env.close()


def test_a_stale_page_reference_cannot_pick_the_right_element(data_root):
    env = make_env(data_root, ranker="oracle")
    env.reset(options={"task_id": "mind2web/test_task/flights-1"})
    env.step("R1 = TYPE(Env, QUERY: departing, TEXT: ATLANTA)")
    env.step("R2 = CLICK(R1, QUERY: Atlanta)")
    # R1 is page 2: the select is there too, but the step being scored is page 3
    obs, reward, done, _, info = env.step("R3 = SELECT(R1, QUERY: class, TEXT: Business)")
    assert done and info["metrics"]["element_accuracy"] == pytest.approx(2 / 3)
    assert info["metrics"]["step_success_rate"] == pytest.approx(2 / 3)
    env.close()


def test_bad_input_is_an_error_observation(data_root):
    env = make_env(data_root)
    env.reset(options={"task_id": "mind2web/test_task/flights-1"})
    cases = {
        "R1 = CLICK(R9, QUERY: Search)": "Error: CLICK: undefined variable R9",
        "R1 = HOVER(Env, QUERY: Search)": "Error: unknown action 'HOVER'",
        "R1 = CLICK(Env)": "Error: CLICK: CLICK needs a QUERY",
        "R1 = TYPE(Env, QUERY: departing)": "Error: TYPE: TYPE needs a TEXT",
        "R1 = CLICK(Page 1, QUERY: x)": "Error: CLICK: the first argument must be Env",
        "click the search button": "Error: cannot parse the action",
    }
    for action, expected in cases.items():
        obs, _, done, _, info = env.step(action)
        assert obs.startswith(expected), (action, obs)
        assert not done and info["metrics_so_far"]["step_success_rate"] == 0.0
    # none of those used up the step: a right action still scores the first page
    obs, *_ = env.step("R1 = TYPE(Env, QUERY: departing from, TEXT: ATLANTA)")
    assert "Page 2 of 3" in obs
    obs, reward, done, _, info = env.step("Stop()")
    assert done and reward == pytest.approx(1 / 3) and info["metrics"]["success"] == 0.0
    # a task whose only page has no candidate: nothing to act on, Stop() scores it 0
    obs, _ = env.reset(options={"task_id": "mind2web/test_task/empty-3"})
    assert "Page 1 had no candidate elements" in obs and "Stop() ends it" in obs
    obs, reward, done, _, info = env.step("R1 = CLICK(Env, QUERY: Help)")
    # the session was already over: the refused action ends the episode with its score
    assert obs.startswith("Error: CLICK: the task's steps are over") and done
    assert reward == 0.0 and info["metrics"]["step_success_rate"] == 0.0
    env.close()


def test_pages_without_candidates_count_as_failed_and_are_passed(data_root):
    record = flights_task()
    record["actions"][1]["pos_candidates"] = record["actions"][1]["neg_candidates"] = []
    path = data_root / "test_task" / "c.json"
    path.write_text(json.dumps([{**record, "annotation_id": "gap-4"}]))
    env = make_env(data_root, ranker="oracle")
    env.reset(options={"task_id": "mind2web/test_task/gap-4"})
    obs, _, done, _, info = env.step("R1 = TYPE(Env, QUERY: departing, TEXT: ATLANTA)")
    assert "Page 2 had no candidate elements and counts as failed.\nPage 3 of 3" in obs
    assert info["variables"]["R1"] == "Page 3" and not done
    obs, reward, done, _, info = env.step("R2 = SELECT(R1, QUERY: class, TEXT: Business)")
    assert done and reward == pytest.approx(2 / 3) and info["metrics"]["success"] == 0.0
    env.close()


def test_env_passes_the_checker_and_gold_replays_reach_full_reward(data_root):
    env = make_env(data_root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)
    env.close()
    made = gym.make("lumos/Mind2Web-v0", source=str(data_root / "test_task"), ranker="oracle")
    base = made.unwrapped
    assert base.dataset == "mind2web" and base.replay_options == {"ranker": "oracle"}
    flights = base.tasks[0]
    result = replay_gold(base, flights)
    assert result.ok, result
    # a step without its gold element on the page cannot be replayed right
    songs = replay_gold(base, base.tasks[1])
    assert songs.terminated and songs.reward == pytest.approx(2 / 3)
    made.close()


# ---------------------------------------------------------------------------------------------
# Metrics and rankers


def test_operation_f1_follows_mind2web():
    # Mind2Web's calculate_f1: case-sensitive token sets, punctuation kept (the official rule);
    # the Lumos rule lower-cases (more in tests/test_scoring_mind2web_conformance.py)
    assert operation_f1("CLICK", "CLICK") == 1.0
    assert operation_f1("TYPE atlanta", "TYPE ATLANTA") == 0.5
    assert operation_f1("TYPE atlanta", "TYPE ATLANTA", scorer="mind2web/lumos") == 1.0
    assert operation_f1("SELECT Economy", "SELECT Business") == 0.5
    assert operation_f1("TYPE new york city", "TYPE new york") == pytest.approx(2 * 1 * 0.75 / 1.75)
    assert operation_f1("CLICK", "TYPE x") == 0.0
    assert operation_f1("", "") == 1.0 and operation_f1("TYPE -", "TYPE") == pytest.approx(2 / 3)


def test_rankers_pick_the_fitting_element(data_root):
    task = load_mind2web(data_root / "test_task", "test_task")[0]
    page = build_page(task, 1)
    labels = [c.label for c in page.candidates]
    for ranker in (BM25Ranker(), EmbedRanker()):
        scores = ranker.scores("Atlantic City", [], page.candidates)
        assert labels[int(np.argmax(scores))] == "[span] Atlantic City (ACY)"
        scores = ranker.scores("the cabin class box: Economy or Business", [], page.candidates)
        assert labels[int(np.argmax(scores))] == "[select] Economy Business", type(ranker)
    oracle = OracleRanker().scores("anything", [], page.candidates)
    assert page.candidates[int(np.argmax(oracle))].positive
    assert mindact_query("Click Atlanta", ["a", "b", "c", "d"]) == (
        "task is: Click Atlanta\nPrevious actions: b; c; d")
    with pytest.raises(ToolError, match="unknown element ranker"):
        make_ranker("random")
    with pytest.raises(ToolError, match="needs a model"):
        make_ranker("cross-encoder")


def test_cross_encoder_loads_only_when_asked_and_scores_each_candidate(data_root, tmp_path):
    import torch
    from conftest import build_tokenizer
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, num_labels=1,
                        pad_token_id=tokenizer.pad_token_id)
    folder = tmp_path / "tiny-cross-encoder"
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    tool = ElementClick(backend="cross-encoder", model=str(tmp_path / "not-there"))
    assert isinstance(tool.ranker, CrossEncoderRanker)  # built, nothing loaded yet
    env = make_env(data_root, ranker="cross-encoder", ranker_model=str(folder))
    env.reset(options={"task_id": "mind2web/test_task/flights-1"})
    obs, *_ = env.step("R1 = TYPE(Env, QUERY: departing from, TEXT: ATLANTA)")
    assert obs.startswith("R1 = Typed 'ATLANTA' into [") and "Page 2 of 3" in obs
    page = env.page(env.tasks[0], 1)
    scores = env.toolset.get("CLICK").ranker.scores("Atlanta", [], page.candidates)
    assert scores.shape == (3,) and np.isfinite(scores).all()
    env.close()


# ---------------------------------------------------------------------------------------------
# Converter


def test_converter_writes_one_subgoal_per_step_and_verifies(data_root):
    tasks = load_mind2web(data_root / "test_task", "test_task")
    annotation = mind2web_annotation(tasks[0])
    plan = annotation.to_dict()["subgoal_plan"]
    assert plan.splitlines()[:2] == [
        "Subgoal 1: Type ATLANTA in the combobox Departing from",
        "Action 1-1: R1 = TYPE(Env, QUERY: Type ATLANTA in the combobox Departing from, "
        "TEXT: ATLANTA)",
    ]
    assert "Action 2-1: R2 = CLICK(R1, QUERY: Hover over span Atlanta, GA ATL)" in plan
    assert (
        "Action 3-1: R3 = SELECT(R2, QUERY: Select Business in the select Economy, "
        "TEXT: Business)" in plan
    )
    assert annotation.dataset == "mind2web" and annotation.task_type == "web"
    assert all(" = " not in a.text.split(")", 1)[1] for a in annotation.actions)  # no tails
    with pytest.raises(ConversionError, match="step 3 has no gold element"):
        mind2web_annotation(tasks[1])
    odd = flights_task()
    odd["actions"][0]["operation"]["value"] = "ATLANTA (GA"
    with pytest.raises(ConversionError, match="cannot be written"):
        mind2web_annotation(record_task(odd, "test_task"))

    def factory(_tasks, _dataset):
        return make_env(data_root, ranker="oracle")

    report = verify_annotations([annotation], env_factory=factory)
    assert report.yield_rate == 1.0, report.format_report()
    # Mind2Web keeps Lumos' web_agent feedback: the subgoal restated, no result recorded
    assert report.kept == [annotation]
    plan = plan_iterative(annotation)
    restated = (
        "We have already type ATLANTA in the combobox Departing from. Should we stop planning?"
    )
    assert plan[2]["content"] == restated
    env = factory(None, None)
    _, info = env.reset(options={"task_id": annotation.id})
    action = annotation.subgoals[0].actions[0].text
    outcome = StepOutcome(*env.step(action))
    domain = prompts.lumos_domain(s.name for s in tool_specs(info))
    assert subgoal_feedback(1, annotation.subgoals[0].line, action, outcome,
                            task_type=info["task_type"], domain=domain) == restated
    env.close()
    broken = mind2web_annotation(tasks[0])
    wrong = broken.to_dict()
    wrong["subgoal_plan"] = wrong["subgoal_plan"].replace("TEXT: Business", "TEXT: Economy")
    from lumos_gym.conversion.annotation import Annotation

    report = verify_annotations([Annotation.from_dict(wrong)], env_factory=factory)
    assert not report.kept and "wrong-answer" in report.rejected[0].reason


# ---------------------------------------------------------------------------------------------
# Recorder and the bundled recorded set


def test_recorder_writes_loadable_official_records_from_a_live_shop(tmp_path):
    from lumos_gym.envs.web import mind2web_record as rec
    from lumos_gym.envs.web.shop.catalog import generate_catalog
    from lumos_gym.envs.web.shop.server import ShopServer

    catalog = generate_catalog(seed=0, num_products=200)
    with ShopServer(catalog) as server:
        records = rec.record_records(server.base_url, catalog, split="test_website", num_tasks=3)
        again = rec.record_records(server.base_url, catalog, split="test_website", num_tasks=3)
        train = rec.record_records(server.base_url, catalog, split="train", num_tasks=3, seed=1)
    assert not server.running
    assert json.dumps(records) == json.dumps(again)  # seeded: the same records, byte for byte
    targets = {r["actions"][-1]["pos_candidates"][0]["backend_node_id"] for r in records}
    assert targets  # every task ends with Buy Now
    for record in records:
        assert set(record) == {"annotation_id", "website", "domain", "subdomain",
                               "confirmed_task", "action_reprs", "actions"}
        assert record["action_reprs"][0].startswith("[textbox]  Search products -> TYPE: ")
        assert record["action_reprs"][-1] == "[link]  Buy Now -> CLICK"
        for action in record["actions"]:
            assert set(action) == {"action_uid", "raw_html", "cleaned_html", "operation",
                                   "pos_candidates", "neg_candidates"}
            assert set(action["operation"]) == {"op", "original_op", "value"}
            [positive] = action["pos_candidates"]
            attributes = json.loads(positive["attributes"])
            assert attributes["backend_node_id"] == positive["backend_node_id"]
            cleaned = action["cleaned_html"]
            assert f'backend_node_id="{positive["backend_node_id"]}"' in cleaned
            assert "<style" not in cleaned and "<head " not in cleaned and "<head>" not in cleaned
            assert 'type="hidden"' not in cleaned and "<script" not in cleaned
            assert "<style" in action["raw_html"]
    first = records[0]["actions"]
    assert 'input_value="' not in first[0]["cleaned_html"]  # the page before typing
    assert 'input_value="' in first[1]["cleaned_html"]  # typed, before Enter or Search
    path = tmp_path / "test_website" / "shop.json"
    rec.write_records(records, path)
    tasks = load_mind2web(path.parent, "test_website")
    assert len(tasks) == 3 and all(t.meta["website"] == rec.WEBSITE for t in tasks)
    test_targets = {r["confirmed_task"] for r in records}
    assert not test_targets & {r["confirmed_task"] for r in train}
    env = Mind2WebEnv(source=path.parent, ranker="oracle")
    assert all(replay_gold(env, task).ok for task in env.tasks)


def test_cleaning_numbers_and_names_elements():
    from lumos_gym.envs.web import mind2web_record as rec

    html = (
        "<!DOCTYPE html><html><head><title>t</title><style>p{}</style></head><body>"
        "<!-- note --><div><p></p><form><input type='hidden' name='q' value='x'>"
        "<label for='s'>Sort by</label><select id='s' name='sort'><option>A</option>"
        "<option>B</option></select><input aria-label='Find' type='search'></form>"
        "<a href='/x'>Go <b>now</b></a><script>alert(1)</script></div></body></html>"
    )
    soup = rec._soup(html)
    rec.number_elements(soup)
    elements = rec.interactive_elements(soup)
    assert [e.name for e in elements] == ["select", "input", "a"]
    select = elements[0]
    rec.RecordingBrowser.choose(select, "B")
    assert rec.action_repr(select, "SELECT", "B") == "[combobox]  Sort by -> SELECT: B"
    assert rec.action_repr(elements[1], "ENTER") == "[searchbox]  Find -> ENTER"
    assert rec.action_repr(elements[2], "CLICK") == "[link]  Go now -> CLICK"
    cleaned = rec.clean_html(soup)
    assert "DOCTYPE" not in cleaned and "note" not in cleaned and "alert" not in cleaned
    assert "<p" not in cleaned and "hidden" not in cleaned and "<title" not in cleaned
    assert 'aria_label="Find"' in cleaned and 'option_selected="true"' in cleaned
    assert f'<a backend_node_id="{elements[2]["backend_node_id"]}">Go' in cleaned
    with pytest.raises(Exception, match="no option"):
        rec.RecordingBrowser.choose(select, "C")


def test_bundled_set_is_the_default_and_replays_and_verifies():
    from lumos_gym.envs.checks import check_env_id
    from lumos_gym.envs.web import mind2web_record as rec

    env = Mind2WebEnv(ranker="oracle")
    assert len(env.tasks) == 24 and env.source.describe()["kind"] == "bundled"
    assert env.source.describe()["path"] == "lumos_gym/envs/data/mind2web/test_website"
    assert all(t.id.startswith("mind2web/test_website/") for t in env.tasks)
    ops = {a["operation"]["original_op"] for t in env.tasks for a in t.meta["actions"]}
    assert ops == {"TYPE", "CLICK", "ENTER", "SELECT"}
    assert all(replay_gold(env, task).ok for task in env.tasks)
    annotations = [mind2web_annotation(task) for task in env.tasks]
    report = verify_annotations(annotations, env_factory=lambda _t, _d: Mind2WebEnv(
        ranker="oracle"))
    assert report.yield_rate == 1.0, report.format_report()
    report = check_env_id("lumos/Mind2Web-v0", replay_limit=4)
    assert report.ok, report
    assert rec.BUNDLED_FILE == "shop_recorded.json.gz"


def test_record_source_records_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    env = Mind2WebEnv(source="record", split="train", num_tasks=2, record_seed=3, ranker="bm25")
    assert len(env.tasks) == 2 and env.tasks[0].id.startswith("mind2web/train/")
    assert env.source.describe()["generator"] == "mind2web-record"
    cached = list((tmp_path / "data" / "mind2web-shop" / "train").glob("*.json"))
    assert len(cached) == 1
    again = Mind2WebEnv(source="record", split="train", num_tasks=2, record_seed=3)
    assert again.task_ids() == env.task_ids()


def test_ranker_options_reach_the_tools(data_root):
    env = make_env(data_root, ranker="embed", ranker_options={"query_format": "mindact"})
    assert env.toolset.get("TYPE").ranker.query_format == "mindact"
    assert make_ranker("embed").query_format == "query"
    with pytest.raises(ToolError, match="query_format"):
        make_ranker("embed", query_format="html")
    with pytest.raises(ToolError, match="bad options"):
        make_ranker("bm25", temperature=1)


@pytest.mark.full
def test_the_bundled_set_is_what_the_recorder_writes(tmp_path):
    """The shipped file is reproducible; if the shop's pages change, regenerate it with
    ``python -m lumos_gym.envs.web.mind2web_record --out lumos_gym/envs/data/mind2web``."""
    from importlib import resources

    from lumos_gym.envs.web import mind2web_record as rec

    path = rec.write_bundled(tmp_path)
    shipped = resources.files("lumos_gym.envs").joinpath(
        "data", "mind2web", "test_website", rec.BUNDLED_FILE
    )
    assert path.read_bytes() == shipped.read_bytes()


def test_a_recorded_split_with_a_typo_is_refused_not_recorded_as_test():
    import gymnasium as gym

    from lumos_gym.errors import DataError

    with pytest.raises(DataError, match="recorded Mind2Web split must be one of .*'validaton'"):
        gym.make("lumos/Mind2Web-v0", source="record", split="validaton")
