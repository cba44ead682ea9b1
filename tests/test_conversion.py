"""Unified annotations: the subgoal_plan text form and the four Lumos exports, byte for byte."""

from __future__ import annotations

import json

import pytest
from test_prompts import (
    ACTIONS,
    GROUND_ITERATIVE_QA,
    PLAN_ITERATIVE,
    PLAN_ONETIME,
    QA_INSTRUCTION,
    SHARED,
    SUBGOALS,
    TASK,
    _blocks,
)

from lumos_gym import prompts
from lumos_gym.conversion import (
    Annotation,
    AnnotationError,
    Rejected,
    export_records,
    format_subgoal_plan,
    make_subgoals,
    parse_subgoal_plan,
    read_annotations,
    write_annotations,
)
from lumos_gym.conversion.exports import ground_iterative, ground_onetime, plan_iterative

# The Genghis Khan annotation of docs/lumos-format.md §1.2; the reference elides subgoal 2 after its
# first action, so its last two actions here are written the same way as subgoal 1's.
PLAN = (
    "Subgoal 1: Obtain the number of the kids that Julius Caesar had.\n"
    "Action 1-1: R1 = KnowledgeQuery(Julius Caesar) = WikipediaPage(Julius Caesar). \n"
    "Action 1-2: R2 = ParagraphRetrieve(R1, Query: How many kids did Julius Caesar have?) = "
    "Paragraph(Julius Caesar-75). \n"
    "Action 1-3: R3 = QA([R2], Question: How many kids did Julius Caesar have?) = 3. \n"
    "\n"
    "Subgoal 2: Obtain the number of the kids that Genghis Khan had.\n"
    "Action 2-1: R4 = KnowledgeQuery(Genghis Khan) = WikipediaPage(Genghis Khan). \n"
    "Action 2-2: R5 = ParagraphRetrieve(R4, Query: How many kids did Genghis Khan have?) = "
    "Paragraph(Genghis Khan-12). \n"
    "Action 2-3: R6 = QA([R5], Question: How many kids did Genghis Khan have?) = 16. \n"
    "\n"
    "Subgoal 3: Determine if Genghis Khan had more kids.\n"
    "Action 3-1: R7 = Calculator(R6 > R3) = True "
)
ONETIME_ACTIONS = "; ".join(ACTIONS)


def genghis(task_type="qa"):
    return Annotation("strategyqa/train/0", "strategyqa", task_type, TASK, parse_subgoal_plan(PLAN))


def display(messages):
    return prompts.render_training(messages, eos="")


def test_subgoal_plan_round_trips_byte_for_byte():
    subgoals = parse_subgoal_plan(PLAN)
    assert [s.line for s in subgoals] == SUBGOALS
    assert format_subgoal_plan(subgoals) == PLAN
    assert subgoals[0].actions[2].action.result == "3."
    assert subgoals[2].actions[0].text == "R7 = Calculator(R6 > R3) = True "


def test_irregular_numbering_is_kept():
    text = "Subgoal 2: First.\nAction 7-1: R1 = Calculator(1+1) = 2"
    assert format_subgoal_plan(parse_subgoal_plan(text)) == text


@pytest.mark.parametrize(
    "bad", ["", "Plan: x", "Subgoal 1: a\nR1 = Calculator(1)", "Subgoal 1: a\n\nAction 1-1: x"]
)
def test_malformed_plans_raise_annotation_errors(bad):
    with pytest.raises(AnnotationError):
        parse_subgoal_plan(bad)


def test_plan_exports_equal_the_transcripts():
    assert display(plan_iterative(genghis())) == PLAN_ITERATIVE
    [record] = export_records([genghis()], "plan-onetime")
    assert record["dataset"] == "complex_qa" and record["id"] == "complex_qa_0"
    assert display(record["messages"]) == PLAN_ONETIME


def test_ground_exports_equal_the_transcripts():
    assert display(ground_iterative(genghis())) == GROUND_ITERATIVE_QA
    user, assistant = ground_onetime(genghis())
    assert user["content"] == (
        QA_INSTRUCTION + f"Task: {TASK} \nSubgoals to be grounded: " + "; ".join(SUBGOALS) + "\n"
    )
    assert assistant["content"] == ONETIME_ACTIONS


@pytest.mark.skipif(not SHARED.exists(), reason="docs/lumos-format.md is not in this checkout")
def test_reference_copies():
    blocks = _blocks(SHARED.read_text(encoding="utf-8"))
    assert ONETIME_ACTIONS + "\n" in blocks
    reference = next(b for b in blocks if b.startswith("Subgoal 1: Obtain the number"))
    head = reference.split("...\n", 1)[0]
    assert PLAN.startswith(head)
    assert reference.endswith(PLAN.split("\n\n")[-1] + "\n")


def test_math_exports_rename_output_in_iterative_records_and_skip_results():
    subgoals = make_subgoals([
        ("Find the price of one pen.", ["R1 = Calculator(12 / 4) = 3"]),
        ("Find the price of five pens.", ["Output = Calculator(R1 * 5) = 15."]),
    ])
    annotation = Annotation("m/0", "gsm8k", "math", "Four pens cost $12...", subgoals, "15")
    plan = plan_iterative(annotation)
    assert plan[2]["content"] == "The executed result for Subgoal 1 is 3. Should we stop planning?"
    assert plan[4]["content"] == "The executed result for Subgoal 2 is 15. Should we stop planning?"
    ground = ground_iterative(annotation)
    assert ground[2]["content"] == (
        "Subgoal to be grounded: Subgoal 2: Find the price of five pens.\n"
    )
    assert ground[3]["content"] == "R2 = Calculator(R1 * 5)"
    assert ground[0]["content"].startswith(prompts.GROUND_INSTRUCTIONS["maths"][:60])
    # ground-onetime keeps `Output`: the original code renames it in the iterative records only
    [_, onetime] = ground_onetime(annotation)
    assert onetime["content"] == "R1 = Calculator(12 / 4); Output = Calculator(R1 * 5)"


def test_web_feedback_restates_the_subgoal():
    subgoals = make_subgoals([
        ("Type Ricky Kej to search his songs.",
         ["R1 = TYPE(Env, QUERY: Type Ricky Kej to search his songs, TEXT: Ricky Kej)"]),
        ("Click on the option to search for Ricky Rej.",
         ["R2 = CLICK(R1, QUERY: Click on the option to search for Ricky Rej)"]),
    ])
    annotation = Annotation("w/0", "mind2web", "web", "Find songs by Ricky Kej", subgoals)
    plan = plan_iterative(annotation)
    assert plan[2]["content"] == (
        "We have already type Ricky Kej to search his songs. Should we stop planning?"
    )
    [record] = export_records([annotation], "ground-iterative")
    assert record["dataset"] == "web_agent"
    assert record["messages"][1]["content"] == (
        "R1 = TYPE(Env, QUERY: Type Ricky Kej to search his songs, TEXT: Ricky Kej)"
    )


def test_unusable_annotations_are_rejected_with_a_reason():
    empty = Annotation("e/0", "gsm8k", "math", "t", parse_subgoal_plan("Subgoal 1: Think."))
    records = list(export_records([empty, genghis()], "ground-onetime"))
    assert isinstance(records[0], Rejected) and "no action" in records[0].reason
    assert records[1]["id"] == "complex_qa_0"
    other = Annotation("s/0", "sql", "database", "t", make_subgoals([("Go.", ["R1 = q(x)"])]))
    [rejected] = export_records([other], "ground-iterative")
    assert isinstance(rejected, Rejected) and "no tool list" in rejected.reason
    with pytest.raises(ValueError, match="unknown export format"):
        list(export_records([genghis()], "plan-sideways"))


def test_jsonl_round_trip_is_deterministic(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    annotations = [genghis(), genghis("math")]
    assert write_annotations(annotations, first) == 2
    read = list(read_annotations(first))
    assert read == annotations
    write_annotations(read, second)
    assert first.read_bytes() == second.read_bytes()
    with open(first, "a", encoding="utf-8") as f:
        f.write("not json\n" + json.dumps({"id": "x"}) + "\n")
    *good, bad_json, missing = read_annotations(first)
    assert len(good) == 2
    assert isinstance(bad_json, AnnotationError) and isinstance(missing, AnnotationError)
    assert "a.jsonl:4" in str(missing)


# ------------------------------------------- exports are what the agents send at inference
LENA = (
    "Lena bakes 36 muffins for a school fair. She sells 3/4 of them in the morning and 5 more in "
    "the afternoon. How many muffins does she have left at the end of the day?"
)


def lena():
    subgoals = make_subgoals([
        ("Calculate how many muffins Lena sells in the morning.", ["R1 = Calculator(36*3/4) = 27"]),
        ("Calculate how many muffins she sells in total.", ["R2 = Calculator(R1+5) = 32"]),
        ("Calculate how many muffins are left.", ["R3 = Calculator(36-R2) = 4"]),
    ])
    rationale = "She sells 36*3/4 = <<36*3/4=27>>27 in the morning.\nThen 4 are left.\n#### 4"
    return Annotation("gsm8k/sample/0", "gsm8k", "math", LENA, subgoals, "4",
                      {"rationale": rationale})


def _replay(agent_name, backends_for, messages_by_role):
    """Run an agent whose models answer with the export's assistant turns; return its prompts."""
    from conftest import ScriptedBackend

    from lumos_gym.agents import make_agent
    from lumos_gym.agents.runner import EpisodeSpec, Runner

    backends = {}
    for role, messages in messages_by_role.items():
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        backends[role] = ScriptedBackend(
            lambda r, a=answers: a[r.prompt.count("<|assistant|>") - 1]
        )
    agent = make_agent(agent_name)
    [record] = Runner(agent, backends_for(backends)).run(
        [EpisodeSpec("lumos/GSM8K-v0", "gsm8k/sample/0")]
    )
    assert record.status == "completed" and record.reward == 1.0, record
    return {role: b.batches[-1][0].prompt for role, b in backends.items()}


@pytest.mark.parametrize(
    ("agent", "formats"),
    [
        ("lumos-i", {"planner": "plan-iterative", "grounder": "ground-iterative"}),
        ("lumos-o", {"planner": "plan-onetime", "grounder": "ground-onetime"}),
        ("integrated", {"policy": "integrated"}),
        ("react", {"policy": "react"}),
        ("cot", {"policy": "cot"}),
        ("direct", {"policy": "direct"}),
    ],
)
def test_exports_equal_what_the_agents_send(agent, formats):
    exported = {}
    for role, fmt in formats.items():
        [record] = export_records([lena()], fmt)
        exported[role] = record["messages"]
    prompts_sent = _replay(agent, lambda b: b, exported)
    for role, messages in exported.items():
        # The last prompt an agent sends is the export without its last answer.
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        assert prompts_sent[role] == prompts.render_inference(messages[: last_user + 1])


def test_cot_and_direct_records():
    [cot] = export_records([lena()], "cot")
    assert cot["messages"][1]["content"] == (
        "She sells 36*3/4 = 27 in the morning. Then 4 are left. Answer is 4."
    )
    [direct] = export_records([lena()], "direct")
    assert direct["messages"] == [{"role": "user", "content": LENA},
                                  {"role": "assistant", "content": "4"}]
    no_answer = Annotation("x", "gsm8k", "math", "t", lena().subgoals)
    assert isinstance(next(export_records([no_answer], "direct")), Rejected)
