"""The Lumos prompts, byte for byte against the transcripts of docs/lumos-format.md (§1.3-1.7).

The transcripts are copied here; the last tests also check that the copies match the ones that
docs/lumos-format.md quotes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos_gym import prompts
from lumos_gym.tools.base import ToolSpec

TASK = "Are more people today related to Genghis Khan than Julius Caesar?"
SUBGOALS = [
    "Subgoal 1: Obtain the number of the kids that Julius Caesar had.",
    "Subgoal 2: Obtain the number of the kids that Genghis Khan had.",
    "Subgoal 3: Determine if Genghis Khan had more kids.",
]
ACTIONS = [
    "R1 = KnowledgeQuery(Julius Caesar); R2 = ParagraphRetrieve(R1, Query: How many kids did "
    "Julius Caesar have?); R3 = QA([R2], Question: How many kids did Julius Caesar have?)",
    "R4 = KnowledgeQuery(Genghis Khan); R5 = ParagraphRetrieve(R4, Query: How many kids did "
    "Genghis Khan have?); R6 = QA([R5], Question: How many kids did Genghis Khan have?)",
    "R7 = Calculator(R6 > R3)",
]
RESULTS = ["3", "16", "True"]

PLAN_ITERATIVE = """\
<|user|>
Please provide a reasonable subgoal-based plan to solve the given task.
Task: Are more people today related to Genghis Khan than Julius Caesar?; Initial Environment Description: None.
<|assistant|>
Subgoal 1: Obtain the number of the kids that Julius Caesar had.
<|user|>
The executed result for Subgoal 1 is 3. Should we stop planning?
<|assistant|>
No, I will keep planning. Subgoal 2: Obtain the number of the kids that Genghis Khan had.
<|user|>
The executed result for Subgoal 2 is 16. Should we stop planning?
<|assistant|>
No, I will keep planning. Subgoal 3: Determine if Genghis Khan had more kids.
<|user|>
The executed result for Subgoal 3 is True. Should we stop planning?
<|assistant|>
Yes, I will stop planning."""  # noqa: E501

PLAN_ONETIME = """\
<|user|>
Please provide a reasonable subgoal-based plan to solve the given task.
Task: Are more people today related to Genghis Khan than Julius Caesar?; Initial Environment Description: None.
<|assistant|>
Subgoal 1: Obtain the number of the kids that Julius Caesar had.; Subgoal 2: Obtain the number of the kids that Genghis Khan had.; Subgoal 3: Determine if Genghis Khan had more kids."""  # noqa: E501

QA_INSTRUCTION = """\
Please ground the given subgoal to corresponding executable actions for solving the given task. The grounded actions must be the one in available action list.

The available action list is 'KnowledgeQuery', 'ParagraphRetrieve', 'QA', 'Calculator', and 'Code'.
Calculator(formula): Calculate the input formula; KnowledgeQuery(query): Capture the relevant webpages according to the query; ParagraphRetrieve(context, query): Given a query, retrieve the most relevant paragraphs from the given context; QA(context, query): Given context, answer the given query; Calculator(formula): Calculate the input formula; Code(pseudo_code): Generate a Python function that corresponds to the pseudo code.

"""  # noqa: E501

MATH_INSTRUCTION = """\
Please ground the given subgoal to corresponding executable actions for solving the given task. The grounded actions must be the one in available action list.

The available action list is 'Calculator', 'SetEquation', 'SolveEquation', 'Count', 'SolveInequality', 'Code', and 'Define'.
Calculator(formula): Calculate the input formula; SetEquation(equation): Set up an equation to be solved; SolveEquation(equation): Solve the previous set equation; Count(list): Count the number of elements in the given list; SolveInequality(inequality): Solve the previous set inequality; Code(pseudo_code): Generate a Python function that corresponds to the pseudo code; Define(variable/number): Define a variable or a number for latter usage.

"""  # noqa: E501

WEB_INSTRUCTION = """\
Please ground the given subgoal to corresponding executable actions for solving the given task. The grounded actions must be the one in available action list.

The available action list is 'CLICK', 'TYPE', 'SELECT'.
CLICK(Env, Query): Click the relevant html region in Env according to Query; TYPE(Env, Query, Text): Type Text into the relevant html region in Env according to Query; SELECT(Env, Query, Text): Select the value Text of the relevant selection box in Env according to Query.

"""  # noqa: E501

GROUND_ITERATIVE_QA = (
    "<|user|>\n" + QA_INSTRUCTION + f"Task: {TASK} \n"
    "Subgoal to be grounded: Subgoal 1: Obtain the number of the kids that Julius Caesar had.\n"
    "<|assistant|>\n" + ACTIONS[0] + "\n"
    "<|user|>\n"
    "Subgoal to be grounded: Subgoal 2: Obtain the number of the kids that Genghis Khan had. "
    "The grounding could be based on the following results: The execution result for Subgoal 1 "
    "is 3.\n"
    "<|assistant|>\n" + ACTIONS[1] + "\n"
    "<|user|>\n"
    "Subgoal to be grounded: Subgoal 3: Determine if Genghis Khan had more kids. The grounding "
    "could be based on the following results: The execution result for Subgoal 1 is 3. The "
    "execution result for Subgoal 2 is 16.\n"
    "<|assistant|>\n" + ACTIONS[2]
)

QA_SPECS = [
    ToolSpec("KnowledgeQuery", "KnowledgeQuery(query)", "Capture the relevant webpages"),
    ToolSpec("ParagraphRetrieve", "ParagraphRetrieve(context, query)", "..."),
    ToolSpec("QA", "QA(context, query)", "..."),
    ToolSpec("Calculator", "Calculator(formula)", "Calculate the input formula"),
    ToolSpec("Code", "Code(pseudo_code)", "..."),
]


def display(messages):
    """The transcripts' layout: the training serialization without the end-of-text token."""
    return prompts.render_training(messages, eos="")


def plan_iterative_messages():
    messages = [{"role": "user", "content": prompts.plan_first_turn(TASK)}]
    for index, (subgoal, result) in enumerate(zip(SUBGOALS, RESULTS, strict=True), 1):
        messages.append({"role": "assistant", "content": prompts.plan_turn(index, subgoal)})
        messages.append({"role": "user", "content": prompts.plan_feedback(index, result)})
    messages.append({"role": "assistant", "content": prompts.STOP_PLANNING})
    return messages


def ground_iterative_messages():
    messages = []
    for index, (subgoal, actions) in enumerate(zip(SUBGOALS, ACTIONS, strict=True), 1):
        earlier = [prompts.result_as_written(r) for r in RESULTS[: index - 1]]
        content = prompts.ground_turn(
            subgoal, first=index == 1, task=TASK, specs=QA_SPECS,
            earlier_results=earlier, with_results=True,
        )
        messages.append({"role": "user", "content": content})
        messages.append({"role": "assistant", "content": actions})
    return messages


def test_plan_iterative_matches_the_transcript():
    assert display(plan_iterative_messages()) == PLAN_ITERATIVE


def test_plan_onetime_matches_the_transcript():
    messages = [
        {"role": "user", "content": prompts.plan_first_turn(TASK)},
        {"role": "assistant", "content": "; ".join(SUBGOALS)},
    ]
    assert display(messages) == PLAN_ONETIME


def test_ground_iterative_complex_qa_matches_the_transcript():
    assert display(ground_iterative_messages()) == GROUND_ITERATIVE_QA


def test_ground_records_keep_the_original_bytes():
    """Record contents (before serialization strips them) follow §1.7 exactly."""
    messages = ground_iterative_messages()
    assert messages[0]["content"] == (
        QA_INSTRUCTION + f"Task: {TASK} \nSubgoal to be grounded: {SUBGOALS[0]}\n"
    )
    assert messages[2]["content"].endswith("The execution result for Subgoal 1 is 3.\n")


def test_math_and_web_later_turns_carry_no_results():
    math_specs = [ToolSpec(n, f"{n}(x)", "") for n in prompts.DOMAIN_ACTIONS["maths"]]
    subgoal = (
        "Subgoal 2: Calculate the amount that Mrs. Snyder used to spend for rent and utilities "
        "in terms of p."
    )
    turn = prompts.ground_turn(subgoal, first=False, task="t", specs=math_specs,
                               earlier_results=["0.4p."], with_results=False)
    assert turn == f"Subgoal to be grounded: {subgoal}\n"


def test_ground_onetime():
    content = prompts.ground_onetime(TASK, "; ".join(SUBGOALS), QA_SPECS)
    assert content == QA_INSTRUCTION + f"Task: {TASK} \nSubgoals to be grounded: " + (
        "; ".join(SUBGOALS) + "\n"
    )


def test_instruction_literals():
    specs = {
        "maths": [ToolSpec(n, f"{n}(x)", "") for n in prompts.DOMAIN_ACTIONS["maths"]],
        "web_agent": [ToolSpec(n, f"{n}(x)", "") for n in ("CLICK", "TYPE", "SELECT")],
    }
    assert prompts.grounding_instruction("T", specs["maths"]) == MATH_INSTRUCTION + "Task: T \n"
    assert prompts.grounding_instruction("T", specs["web_agent"]) == WEB_INSTRUCTION + "Task: T \n"


def test_math_env_specs_build_the_lumos_instruction_from_the_template():
    """The generic template, fed the math env's own tool specs, gives Lumos' text exactly."""
    import gymnasium as gym

    import lumos_gym  # noqa: F401

    env = gym.make("lumos/GSM8K-v0")
    _, info = env.reset(seed=0)
    from lumos_gym.agents.lumos import tool_specs

    specs = tool_specs(info)
    assert [s.name for s in specs] == [
        "Calculator", "SetEquation", "SolveEquation", "Count", "SolveInequality", "Code", "Define",
    ]
    # Bypass the literal table: build from the specs' own signatures and docs.
    names = ", ".join(f"'{s.name}'" for s in specs[:-1]) + f", and '{specs[-1].name}'"
    built = (
        "Please ground the given subgoal to corresponding executable actions for solving the "
        "given task. The grounded actions must be the one in available action list.\n\n"
        f"The available action list is {names}.\n"
        + "; ".join(s.describe() for s in specs)
        + ".\n\n"
    )
    assert built == MATH_INSTRUCTION
    env.close()


def test_generic_instruction_for_other_envs():
    specs = [ToolSpec("Look", "Look(place)", "Look around"), ToolSpec("Go", "Go(dir)", "Move")]
    text = prompts.grounding_instruction("Find the key", specs)
    assert "The available action list is 'Look' and 'Go'.\n" in text
    assert text.endswith("Look(place): Look around; Go(dir): Move.\n\nTask: Find the key \n")


def test_web_feedback_restates_the_subgoal():
    feedback = prompts.plan_feedback(
        1, "", subgoal="Subgoal 1: Type Ricky Kej to search his songs.", web=True
    )
    assert feedback == (
        "We have already type Ricky Kej to search his songs. Should we stop planning?"
    )


def test_feedback_strips_spaces_and_dots():
    assert prompts.plan_feedback(2, " 16. ") == (
        "The executed result for Subgoal 2 is 16. Should we stop planning?"
    )


def test_render_inference_framing():
    messages = [
        {"role": "user", "content": "first\n"},
        {"role": "assistant", "content": "Subgoal 1: a"},
        {"role": "user", "content": "second"},
    ]
    assert prompts.render_inference(messages) == (
        "<|user|>\nfirst\n<|assistant|>\nSubgoal 1: a\n\n<|user|>\nsecond\n<|assistant|>\n"
    )
    with pytest.raises(ValueError):
        prompts.render_inference(messages[:2])
    with pytest.raises(ValueError):
        prompts.render_inference([{"role": "assistant", "content": "x"}])


def test_render_training_matches_open_instruct():
    messages = [{"role": "user", "content": " q \n"}, {"role": "assistant", "content": "a\n"}]
    assert prompts.render_training(messages) == "<|user|>\nq\n<|assistant|>\na</s>"


def test_planner_output_helpers():
    assert prompts.subgoal_of("No, I will keep planning. Subgoal 2: x") == "Subgoal 2: x"
    assert prompts.subgoal_of("Subgoal 1: y") == "Subgoal 1: y"
    assert prompts.is_stop("Yes, I will stop planning.")
    assert not prompts.is_stop("No, I will keep planning. Subgoal 2: x")


@pytest.mark.parametrize(
    ("output", "answer"),
    [
        ("He has 3 + 4 = 7 apples. Answer is 7.", "7"),
        ("First 2*3=6.\nThen 6+1=7. Answer is 7.</s>", "7"),
        ("Answer is $1,200.", "$1,200"),
        ("Answer is 12.5.", "12.5"),
        ("no marker here\n42", "42"),
        ("", ""),
    ],
)
def test_cot_answer(output, answer):
    assert prompts.cot_answer(output) == answer


def test_integrated_split_and_react_action():
    subgoal, actions = prompts.split_integrated(
        "No, I will keep planning. Subgoal 2: Add.\nActions: R2 = Calculator(R1 + 1)"
    )
    assert (subgoal, actions) == ("Subgoal 2: Add.", "R2 = Calculator(R1 + 1)")
    assert prompts.react_action("Thought: add\nAction: R1 = Calculator(1+1)") == (
        "R1 = Calculator(1+1)"
    )
    assert prompts.react_action("Thought: nothing") is None


# ------------------------------------------------------- the reference doc, docs/lumos-format.md
SHARED = Path(__file__).resolve().parents[1] / "docs" / "lumos-format.md"


def _blocks(text):
    """Return the fenced code blocks of a Markdown text, each ending with a newline."""
    blocks, current = [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


@pytest.mark.skipif(not SHARED.exists(), reason="docs/lumos-format.md is not in this checkout")
def test_transcripts_are_the_reference_copies():
    blocks = _blocks(SHARED.read_text(encoding="utf-8"))
    assert PLAN_ITERATIVE + "\n" in blocks
    assert PLAN_ONETIME + "\n" in blocks
    expected_ground = GROUND_ITERATIVE_QA.replace(QA_INSTRUCTION, "<QA instruction>") + "\n"
    assert expected_ground in blocks


@pytest.mark.skipif(not SHARED.exists(), reason="docs/lumos-format.md is not in this checkout")
def test_instructions_are_the_reference_copies():
    blocks = _blocks(SHARED.read_text(encoding="utf-8"))
    for domain in ("maths", "complex_qa", "web_agent"):
        text = prompts.GROUND_INSTRUCTIONS[domain].replace("\n\nTask: {task} \n", "")
        assert any(block.startswith(text + "\n\nTask: {task} \n") for block in blocks), domain
    webshop = prompts.GROUND_INSTRUCTIONS["webshop"].replace("\n\nTask: {task} \n", "\n")
    assert webshop in blocks
