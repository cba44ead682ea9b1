r"""Prompt texts of the agents: Lumos' byte-exact module prompts and the baselines' formats.

The Lumos strings below are an interface, not prose: the released ``ai2lumos/*`` checkpoints
were trained on exactly these bytes (typos, missing spaces and the duplicated ``Calculator``
of the complex-QA instruction included), so they are reproduced verbatim from the original
data-processing and evaluation code (see ``docs/lumos-format.md`` §1.3-1.7). Do not "fix" them.

A conversation is a list of ``{"role": "user" | "assistant", "content": ...}`` messages, as in
the original training records. Two renderings turn it into text:

* :func:`render_inference` — how the original evaluation scripts prompt a module:
  ``"<|user|>\n" + content + "\n<|assistant|>\n"``, each earlier answer followed by
  ``"\n\n"`` before the next ``<|user|>``;
* :func:`render_training` — the open-instruct serialization the modules were trained on:
  ``"<|user|>\n{content}\n<|assistant|>\n{content}</s>\n"``, the whole string stripped.

Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from lumos_gym.actions import ToolSpec

Message = dict[str, str]

# ------------------------------------------------------------------------- Lumos: planning
PLAN_FIRST_TURN = (
    "Please provide a reasonable subgoal-based plan to solve the given task.\n"
    "Task: {task}; Initial Environment Description: None."
)
KEEP_PLANNING = "No, I will keep planning. "
STOP_PLANNING = "Yes, I will stop planning."
PLAN_FEEDBACK = "The executed result for Subgoal {index} is {result}. Should we stop planning?"
WEB_PLAN_FEEDBACK = "We have already {subgoal}. Should we stop planning?"
#: The most characters of an executed result that a WebShop or game planner feedback quotes
#: (lumos-gym's choice: room for WebShop's two ``asin - title`` search results, a game's reply
#: of a few sentences). A longer result is cut and ends with :data:`RESULT_CUT_MARK`.
MAX_FEEDBACK_RESULT_CHARS = 400
RESULT_CUT_MARK = " [...]"

# ------------------------------------------------------------------------ Lumos: grounding
_GROUND_HEAD = (
    "Please ground the given subgoal to corresponding executable actions for solving the given "
    "task. The grounded actions must be the one in available action list.\n\n"
)
_TASK_TAIL = "\n\nTask: {task} \n"

#: The grounding instructions of Lumos' domains, verbatim; ``{task}`` is filled in.
GROUND_INSTRUCTIONS: dict[str, str] = {
    "maths": _GROUND_HEAD
    + "The available action list is 'Calculator', 'SetEquation', 'SolveEquation', 'Count', "
    "'SolveInequality', 'Code', and 'Define'.\n"
    "Calculator(formula): Calculate the input formula; SetEquation(equation): Set up an equation "
    "to be solved; SolveEquation(equation): Solve the previous set equation; Count(list): Count "
    "the number of elements in the given list; SolveInequality(inequality): Solve the previous "
    "set inequality; Code(pseudo_code): Generate a Python function that corresponds to the "
    "pseudo code; Define(variable/number): Define a variable or a number for latter usage."
    + _TASK_TAIL,
    "complex_qa": _GROUND_HEAD
    + "The available action list is 'KnowledgeQuery', 'ParagraphRetrieve', 'QA', 'Calculator', "
    "and 'Code'.\n"
    "Calculator(formula): Calculate the input formula; KnowledgeQuery(query): Capture the "
    "relevant webpages according to the query; ParagraphRetrieve(context, query): Given a query, "
    "retrieve the most relevant paragraphs from the given context; QA(context, query): Given "
    "context, answer the given query; Calculator(formula): Calculate the input formula; "
    "Code(pseudo_code): Generate a Python function that corresponds to the pseudo code."
    + _TASK_TAIL,
    "web_agent": _GROUND_HEAD
    + "The available action list is 'CLICK', 'TYPE', 'SELECT'.\n"
    "CLICK(Env, Query): Click the relevant html region in Env according to Query; "
    "TYPE(Env, Query, Text): Type Text into the relevant html region in Env according to Query; "
    "SELECT(Env, Query, Text): Select the value Text of the relevant selection box in Env "
    "according to Query."
    + _TASK_TAIL,
    # The WebShop instruction (eval/webshop); its quoted form ends at the action list, and the
    # task tail is assumed to be the same as in the other domains.
    "webshop": _GROUND_HEAD
    + "The available action list is 'Search', 'FeatureRetrieve', 'Pick' and 'Click'.\n"
    "Search(Query): Search related items according to the Query; FeatureRetrieve(Feature_list, "
    "Query): Select the most relevant features from Feature_list according to Query; "
    "Pick(Item_names, Item_features, Query): Pick the most relevant item from Item_names "
    "according to Query, Item_names and Item_features; Click(Item): Click the Item to check "
    "more information."
    + _TASK_TAIL,
}

#: The action names of each Lumos domain, used to recognise an env that speaks one of them.
#: Filled from the env families' records (``domain_actions`` of
#: :class:`lumos_gym.envs.families.Family`) when :mod:`lumos_gym.envs` registers them.
DOMAIN_ACTIONS: dict[str, frozenset[str]] = {}

GROUND_SUBGOAL = "Subgoal to be grounded: {subgoal}\n"
GROUND_SUBGOALS = "Subgoals to be grounded: {subgoals}\n"
QA_RESULTS_INTRO = " The grounding could be based on the following results:"
QA_RESULT = " The execution result for Subgoal {index} is {result}"

#: The stop strings of a Lumos module call: the first newline ends an answer (``</s>`` too,
#: which small models such as SmolLM2 write as plain text).
MODULE_STOP = ("\n", "</s>")


def lumos_domain(action_names: Iterable[str]) -> str | None:
    """Return the Lumos domain whose action list is exactly ``action_names``, or None."""
    names = frozenset(action_names)
    for domain, actions in DOMAIN_ACTIONS.items():
        if names == actions:
            return domain
    return None


def _quoted_list(names: Sequence[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def grounding_instruction(task: str, specs: Sequence[ToolSpec]) -> str:
    r"""Return the grounding instruction for an env's tools, ending in ``"Task: {task} \n"``.

    Envs whose tools are exactly one Lumos domain's get that domain's verbatim text; any other
    env gets the same template built from its tool specs (for the math domain the template
    gives Lumos' text byte for byte).
    """
    domain = lumos_domain(spec.name for spec in specs)
    if domain in GROUND_INSTRUCTIONS:
        return GROUND_INSTRUCTIONS[domain].replace("{task}", task)
    names = [spec.name for spec in specs]
    described = "; ".join(spec.describe() for spec in specs)
    body = f"The available action list is {_quoted_list(names)}.\n{described}."
    return _GROUND_HEAD + body + _TASK_TAIL.replace("{task}", task)


# --------------------------------------------------------------------- message builders
def plan_first_turn(task: str) -> str:
    """Return the planner's first user turn (both formulations, every domain)."""
    return PLAN_FIRST_TURN.format(task=task)


def clean_result(result: str) -> str:
    """Return an execution result as the planner feedback quotes it: no outer spaces or ``.``."""
    return result.strip().strip(".").strip()


def plan_feedback(index: int, result: str, *, subgoal: str | None = None, web: bool = False) -> str:
    """Return the user turn after subgoal ``index`` (1-based) was executed.

    Args:
        index: the subgoal's number.
        result: the value of the subgoal's last action (ignored for web); WebShop and game
            results come one line, through :func:`feedback_result`.
        subgoal: the subgoal line (``"Subgoal k: ..."``), needed for web.
        web: Mind2Web (``web_agent``) restates the subgoal instead of quoting a result, as
            Lumos did (its HTML is too long); WebShop and games quote the result.
    """
    if web:
        text = (subgoal or "").split(": ", 1)[-1].strip().strip(".")
        return WEB_PLAN_FEEDBACK.format(subgoal=text[:1].lower() + text[1:])
    return PLAN_FEEDBACK.format(index=index, result=clean_result(result))


def feedback_result(value: str, max_chars: int = MAX_FEEDBACK_RESULT_CHARS) -> str:
    """Return an executed result as a WebShop or game planner feedback quotes it: one line.

    Every run of whitespace (a game's line breaks included) becomes one space, and a result
    longer than ``max_chars`` is cut to ``max_chars`` characters ending with
    :data:`RESULT_CUT_MARK` (a WebShop page's clickables, a long room description). Replay
    verification records each WebShop and game subgoal's result with this function and the
    Lumos-I agent quotes results with it, so training records and evaluation match byte for
    byte.
    """
    text = " ".join(value.split())
    if len(text) <= max_chars:
        return text
    return text[: max_chars - len(RESULT_CUT_MARK)].rstrip() + RESULT_CUT_MARK


def plan_turn(index: int, subgoal: str) -> str:
    """Return the planner's answer for subgoal ``index``: bare first, then ``No, I will...``."""
    return subgoal if index == 1 else KEEP_PLANNING + subgoal


def subgoal_of(planner_output: str) -> str:
    """Return the subgoal a planner answer names (``No, I will keep planning.`` removed)."""
    return planner_output.split("No, I will keep planning.")[-1].strip()


def is_stop(planner_output: str) -> bool:
    """Return True when the planner says it is done."""
    return "Yes, I will stop planning" in planner_output


def ground_turn(
    subgoal: str,
    *,
    first: bool,
    task: str,
    specs: Sequence[ToolSpec],
    earlier_results: Sequence[str] = (),
    with_results: bool = False,
) -> str:
    """Return one Lumos-I grounder user turn.

    Args:
        subgoal: the subgoal line to ground (``"Subgoal k: ..."``).
        first: the first turn carries the instruction.
        task: the task text.
        specs: the env's tool specs (selects the instruction).
        earlier_results: the results of the earlier subgoals, in order, as written after
            ``" = "`` (complex QA only).
        with_results: append the earlier results (Lumos does this for complex QA only).
    """
    head = grounding_instruction(task, specs) if first else ""
    if not (with_results and earlier_results):
        return head + GROUND_SUBGOAL.format(subgoal=subgoal)
    results = "".join(
        QA_RESULT.format(index=k, result=r) for k, r in enumerate(earlier_results, 1)
    )
    return head + f"Subgoal to be grounded: {subgoal}{QA_RESULTS_INTRO}{results}\n"


def ground_onetime(task: str, subgoals: str, specs: Sequence[ToolSpec]) -> str:
    """Return the Lumos-O grounder's one user turn (``subgoals`` already ``"; "``-joined)."""
    return grounding_instruction(task, specs) + GROUND_SUBGOALS.format(subgoals=subgoals)


def result_as_written(result: str) -> str:
    """Return a result as an annotation tail writes it after ``" = "``: ending with ``.``."""
    text = result.strip()
    return text if text.endswith(".") else text + "."


# ----------------------------------------------------------------------------- rendering
def _check(messages: Sequence[Mapping[str, str]]) -> None:
    for i, message in enumerate(messages):
        expected = "user" if i % 2 == 0 else "assistant"
        if message.get("role") != expected:
            raise ValueError(f"message {i} must have role {expected!r}, got {message!r}")


def render_inference(messages: Sequence[Mapping[str, str]]) -> str:
    r"""Render a conversation that ends with a user turn as the original evaluation did.

    ``"<|user|>\n{u1}\n<|assistant|>\n{a1}\n\n<|user|>\n{u2}\n<|assistant|>\n"``: each user
    content is stripped of outer whitespace (as the training serialization does), answers are
    kept as the model wrote them.
    """
    _check(messages)
    if not messages or messages[-1]["role"] != "user":
        raise ValueError("a prompt must end with a user turn")
    parts: list[str] = []
    for message in messages:
        if message["role"] == "user":
            parts.append(f"<|user|>\n{message['content'].strip()}\n<|assistant|>\n")
        else:
            parts.append(f"{message['content']}\n\n")
    return "".join(parts)


def training_segments(
    messages: Sequence[Mapping[str, str]], eos: str = "</s>"
) -> list[tuple[str, bool]]:
    r"""Split a conversation's open-instruct serialization into (text, trained) pieces.

    open-instruct's ``encode_with_messages_format`` (docs/lumos-format.md §1.1) writes
    ``<|system|>\n{c}\n``, ``<|user|>\n{c}\n`` and ``<|assistant|>\n{c}{eos}\n`` with each
    content stripped, strips the whole string, and computes the loss on the assistant text,
    its ``eos`` and the newline after it only (the ``<|assistant|>\n`` header is masked with
    the turn before it). The pieces joined give :func:`render_training`'s text exactly.
    A system message may come first; user and assistant turns then alternate.
    """
    body = list(messages)
    pieces: list[tuple[str, bool]] = []
    if body and body[0].get("role") == "system":
        pieces.append((f"<|system|>\n{body[0]['content'].strip()}\n", False))
        body = body[1:]
    _check(body)
    for message in body:
        content = message["content"].strip()
        if message["role"] == "user":
            pieces.append((f"<|user|>\n{content}\n", False))
        else:
            pieces.append(("<|assistant|>\n", False))
            pieces.append((f"{content}{eos}\n", True))
    # the whole string is stripped: only the first piece can start, and the last end, with space
    while pieces and not pieces[-1][0].rstrip():
        pieces.pop()
    if pieces:
        pieces[0] = (pieces[0][0].lstrip(), pieces[0][1])
        pieces[-1] = (pieces[-1][0].rstrip(), pieces[-1][1])
    return pieces


def render_training(messages: Sequence[Mapping[str, str]], eos: str = "</s>") -> str:
    """Render a conversation in the open-instruct format the Lumos modules were trained on."""
    return "".join(text for text, _ in training_segments(messages, eos))


# --------------------------------------------------------------------------- baselines
# lumos-gym's own formats for the baselines the original left without code (integrated,
# ReAct) or defined only as training data (CoT, direct; docs/lumos-format.md §1.6).

INTEGRATED_FIRST_TURN = (
    "Please provide a reasonable subgoal-based plan to solve the given task, and ground each "
    "subgoal to executable actions on the line after it.\n"
    "{actions}\n"
    "Write each turn as 'Subgoal k: <subgoal>' then a line 'Actions: <actions joined by \"; \">'.\n"
    "Task: {task}; Initial Environment Description: None."
)
INTEGRATED_ACTIONS = "Actions: "
INTEGRATED_STOP = ("\n\n", "\n<|user|>", "</s>")

REACT_INSTRUCTION = (
    "Solve the task by interleaving Thought, Action and Observation steps. Each answer holds a "
    "Thought line, reasoning about the current situation, and an Action line, one or more "
    "grounded actions joined by \"; \", e.g. R1 = Calculator(48/2); the Observation that follows "
    "is the result of the actions. {finish}\n"
    "{actions}\n"
    "Task: {task}\n"
)
REACT_FINISH = "Finish with Action: Answer(<the answer or a variable>)."
#: Web and game envs end episodes themselves (a purchase, a win); ``Stop()`` gives up.
REACT_FINISH_BY_ENV = "The environment ends the episode when the task is done."
REACT_STOP = ("\nObservation:", "\n<|user|>", "</s>")
REACT_OBSERVATION = "Observation: "

COT_ANSWER = "Answer is "
COT_STOP = ("<|user|>", "</s>")


def action_list(specs: Sequence[ToolSpec]) -> str:
    """Return ``"Available actions: A(x): doc; B(y): doc."`` for the baseline prompts."""
    return "Available actions: " + "; ".join(spec.describe() for spec in specs) + "."


def integrated_first_turn(task: str, specs: Sequence[ToolSpec]) -> str:
    """Return the integrated agent's first user turn."""
    return INTEGRATED_FIRST_TURN.format(task=task, actions=action_list(specs))


def split_integrated(output: str) -> tuple[str, str]:
    """Split an integrated answer into its subgoal line and its action text."""
    subgoal, _, rest = output.strip().partition("\n")
    actions = rest.strip()
    if actions.startswith(INTEGRATED_ACTIONS):
        actions = actions[len(INTEGRATED_ACTIONS) :]
    return subgoal_of(subgoal), actions.split("\n", 1)[0].strip()


def integrated_turn(output: str) -> str:
    """The one turn an integrated answer holds: its subgoal line and its ``Actions:`` line.

    A trained model sometimes writes on into the next subgoals (which it has not seen the
    results of) instead of ending its turn. Only the first subgoal is executed
    (:func:`split_integrated`), so only it is kept in the conversation: the next turn then
    starts from what was executed, as in the training data, one subgoal a turn.
    """
    return "\n".join(output.strip().split("\n")[:2])


def react_first_turn(task: str, specs: Sequence[ToolSpec]) -> str:
    """Return the ReAct user turn: the instruction, the actions (with ``Answer``) and the task."""
    by_env = any(spec.name == "Stop" for spec in specs)
    finish = REACT_FINISH_BY_ENV if by_env else REACT_FINISH
    return REACT_INSTRUCTION.format(task=task, actions=action_list(specs), finish=finish)


def react_observation(observation: str) -> str:
    """Return the user turn that carries an env observation back to a ReAct model."""
    return f"{REACT_OBSERVATION}{observation}"


_REACT_ACTION = re.compile(r"^\s*Action:\s*(.*)$", re.MULTILINE)


def react_action(output: str) -> str | None:
    """Return the action text of a ReAct step (the first ``Action:`` line), or None."""
    match = _REACT_ACTION.search(output)
    return match.group(1).strip() if match else None


_COT_ANSWER = re.compile(r"Answer is\s*:?\s*(.+?)\s*\.?\s*$", re.DOTALL)


def cot_answer(output: str) -> str:
    """Return the answer after the last ``Answer is`` of a CoT output (the whole text if none)."""
    text = output.replace("</s>", "").strip()
    index = text.rfind(COT_ANSWER)
    if index < 0:
        return text.splitlines()[-1].strip() if text else ""
    match = _COT_ANSWER.match(text, index)
    tail = match.group(1) if match else text[index + len(COT_ANSWER) :]
    return tail.splitlines()[0].strip().rstrip(".").strip() if tail else ""
