"""Gold rationales into unified annotations, by a language model prompted with few-shot examples.

The original Lumos asked GPT-4 to rewrite each dataset's reference solution as a
``subgoal_plan`` (docs/lumos-format.md §1.2). lumos-gym does the same with any backend and with
prompts and examples of its own:

* :class:`RationaleItem` is one task with its reference solution ("rationale");
* :class:`FewShotPrompt` is the instruction and worked examples for one task type:
  :data:`FEW_SHOTS` holds ``math`` and ``qa``, and :func:`generic_prompt` builds one for any
  other env from its tool specs;
* :class:`LLMConverter` sends the prompts in batches (concurrency is the backend's business),
  checks each output (:func:`validate_plan`) and yields an
  :class:`~lumos_gym.conversion.annotation.Annotation` or a :class:`RejectedConversion` that
  keeps the raw output and the reason, in input order;
* :meth:`LLMConverter.convert_file` writes both to append-only JSON-lines files and resumes
  where a killed run stopped.

Greedy decoding of the same input by the same model gives the same files; wrap the backend in
:class:`~lumos_gym.models.caching.CachingBackend` so that a rerun costs no request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.actions import references
from lumos_gym.conversion.annotation import (
    Annotation,
    AnnotationError,
    Subgoal,
    parse_subgoal_plan,
)
from lumos_gym.conversion.exports import Rejected
from lumos_gym.errors import ActionParseError, DataError
from lumos_gym.jsonl import append_jsonl, drop_partial_line
from lumos_gym.models.base import Backend, Completion, GenerationRequest
from lumos_gym.tools.base import ToolSpec

logger = logging.getLogger(__name__)

#: The line that ends a plan in the raw-prompt (non-chat) form; it is the stop string there.
END_OF_PLAN = "[END OF PLAN]"


# ------------------------------------------------------------------------------ records
@dataclass(frozen=True)
class RationaleItem:
    """A task and its gold reasoning, to be rewritten as a subgoal plan.

    Attributes:
        id: a stable id, kept as the annotation's id (e.g. ``"gsm8k/train/17"``).
        dataset: the source dataset.
        task_type: ``math``, ``qa``... (chooses the few-shot prompt).
        task: the task text.
        rationale: the gold reasoning the plan must follow (the "natural language plan").
        answer: the gold final answer, when the dataset has one.
    """

    id: str
    dataset: str
    task_type: str
    task: str
    rationale: str
    answer: str | None = None

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> RationaleItem:
        """Build an item from a JSON record with the same field names.

        Raises:
            DataError: a required field is missing.
        """
        try:
            answer = record.get("answer")
            return cls(
                id=str(record["id"]),
                dataset=str(record["dataset"]),
                task_type=str(record["task_type"]),
                task=str(record["task"]),
                rationale=str(record["rationale"]),
                answer=None if answer is None else str(answer),
            )
        except KeyError as e:
            raise DataError(f"rationale record without the field {e}") from None


@dataclass(frozen=True)
class RejectedConversion(Rejected):
    """A model output that is not a usable plan, kept with everything needed to inspect it.

    Attributes:
        output: the model's raw output.
        stop_reason: the completion's stop reason (``"error"`` outputs are retried, not kept).
        dataset: the item's dataset.
        task_type: the item's task type.
    """

    output: str = ""
    stop_reason: str = ""
    dataset: str = ""
    task_type: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready record of the rejected-outputs file."""
        return {
            "id": self.id,
            "reason": self.reason,
            "output": self.output,
            "stop_reason": self.stop_reason,
            "dataset": self.dataset,
            "task_type": self.task_type,
        }


@dataclass
class ConversionStats:
    """What one :meth:`LLMConverter.convert_file` run did.

    Attributes:
        converted: annotations written.
        rejected: rejected outputs written.
        skipped: input items already in one of the files (a resumed run).
        errors: backend errors; not written, so the next run retries them.
    """

    converted: int = 0
    rejected: int = 0
    skipped: int = 0
    errors: int = 0


# ------------------------------------------------------------------------------ prompts
@dataclass(frozen=True)
class FewShotExample:
    """One worked conversion: a task and rationale, and the plan the model should write."""

    task: str
    rationale: str
    answer: str | None
    plan: str


@dataclass(frozen=True)
class FewShotPrompt:
    """The conversion prompt of one task type.

    Attributes:
        instruction: what to do and the output form, with the tool list.
        examples: worked conversions, shown as earlier turns before the item.
        tools: the action names a plan may call; None allows any.
    """

    instruction: str
    examples: tuple[FewShotExample, ...] = ()
    tools: frozenset[str] | None = None

    def sha256(self) -> str:
        """Return a hash of the prompt's text, recorded with each annotation (provenance)."""
        parts = [self.instruction]
        for ex in self.examples:
            parts += [ex.task, ex.rationale, ex.answer or "", ex.plan]
        return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


_FORM = (
    "Rewrite the reference solution of a task as a plan of subgoals, each carried out by tool "
    "calls. Write the plan in exactly this form and nothing else:\n"
    "- one block per subgoal, blocks separated by a single blank line;\n"
    "- a block starts with a line 'Subgoal k: ' followed by one sentence saying what the step "
    "works out;\n"
    "- then one line per tool call: 'Action k-j: R<n> = Tool(arguments) = result', where k is "
    "the subgoal's number and j counts the calls within the subgoal;\n"
    "- the variables R1, R2, ... are numbered through the whole plan, and an argument may use "
    "any variable defined by an earlier call;\n"
    "- every call ends with ' = ' and its result, taken from the reference solution; the result "
    "of the last call is the final answer.\n"
    "Follow the steps of the reference solution; do not add steps it does not take.\n"
)

_MATH_TOOLS = (
    "Tools:\n"
    "Calculator(formula): evaluate an arithmetic formula or a comparison;\n"
    "SetEquation(equation): state one or more equations in unknowns such as x;\n"
    "SolveEquation(equation): solve the equations set before (or given) for the unknowns;\n"
    "Count(list): count the elements of a list written as [a, b, c];\n"
    "SolveInequality(inequality): solve an inequality in one unknown;\n"
    "Code(pseudo_code): run a short Python function for steps a formula cannot express;\n"
    "Define(variable/number): name a number given in the task for later use.\n"
)

_QA_TOOLS = (
    "Tools:\n"
    "KnowledgeQuery(query): find the encyclopedia page about an entity; the result is "
    "WikipediaPage(title);\n"
    "ParagraphRetrieve(page, Query: question): pick the paragraph of a page that answers the "
    "question; the result is Paragraph(title-N), with the paragraph named in the solution where "
    "it names one;\n"
    "QA([paragraphs], Question: question): answer the question from the listed paragraphs;\n"
    "Calculator(formula): compare or combine earlier answers (dates, counts, True/False);\n"
    "Code(pseudo_code): run a short Python function for steps a formula cannot express.\n"
    "Each decomposed question of the solution becomes one subgoal: find the page, retrieve the "
    "paragraph, answer the question.\n"
)

MATH_PROMPT = FewShotPrompt(
    instruction=_FORM + _MATH_TOOLS,
    examples=(
        FewShotExample(
            task="A bakery bakes 4 trays of 12 muffins and sells 30 of them before noon. "
            "How many muffins are left?",
            rationale="The bakery bakes 4 * 12 = 48 muffins. After selling 30 there are "
            "48 - 30 = 18 muffins left.",
            answer="18",
            plan="Subgoal 1: Calculate how many muffins the bakery bakes.\n"
            "Action 1-1: R1 = Calculator(4 * 12) = 48\n"
            "\n"
            "Subgoal 2: Calculate how many muffins are left after the sales.\n"
            "Action 2-1: R2 = Calculator(R1 - 30) = 18",
        ),
        FewShotExample(
            task="Tom is twice as old as Ann. In 5 years the sum of their ages will be 40. "
            "How old is Ann now?",
            rationale="Let Ann's age be x, so Tom is 2x. In 5 years (x + 5) + (2x + 5) = 40, "
            "so 3x + 10 = 40 and x = 10. Ann is 10 now.",
            answer="10",
            plan="Subgoal 1: Set up an equation for Ann's present age x.\n"
            "Action 1-1: R1 = SetEquation((x + 5) + (2*x + 5) = 40) = 3*x + 10 = 40\n"
            "\n"
            "Subgoal 2: Solve the equation for Ann's age.\n"
            "Action 2-1: R2 = SolveEquation(R1) = 10",
        ),
        FewShotExample(
            task="Five students scored 72, 85, 90, 64 and 85 on a test. What percent of them "
            "scored above 80?",
            rationale="The scores above 80 are 85, 90 and 85, so 3 of the 5 students scored "
            "above 80, which is 3 / 5 * 100 = 60 percent.",
            answer="60",
            plan="Subgoal 1: Count the students who scored above 80.\n"
            "Action 1-1: R1 = Count([85, 90, 85]) = 3\n"
            "\n"
            "Subgoal 2: Count all the students.\n"
            "Action 2-1: R2 = Count([72, 85, 90, 64, 85]) = 5\n"
            "\n"
            "Subgoal 3: Calculate the percent of students who scored above 80.\n"
            "Action 3-1: R3 = Calculator(R1 / R2 * 100) = 60",
        ),
    ),
    tools=frozenset(
        ["Calculator", "SetEquation", "SolveEquation", "Count", "SolveInequality", "Code", "Define"]
    ),
)

QA_PROMPT = FewShotPrompt(
    instruction=_FORM + _QA_TOOLS,
    examples=(
        FewShotExample(
            task="Was the author of The Old Man and the Sea born before the Eiffel Tower was "
            "completed?",
            rationale="We find relevant facts: The Old Man and the Sea was written by Ernest "
            "Hemingway. Hemingway was born in 1899. The Eiffel Tower was completed in 1889. "
            "We need to answer these questions: 1. Who wrote The Old Man and the Sea? (Can be "
            "answered based on paragraph 'The Old Man and the Sea-1') 2. When was #1 born? "
            "(Can be answered based on paragraph 'Ernest Hemingway-1') 3. When was the Eiffel "
            "Tower completed? (Can be answered based on paragraph 'Eiffel Tower-3') 4. Is #2 "
            "before #3? Based on these evidences and decomposed questions, the answer is False.",
            answer="False",
            plan="Subgoal 1: Find out who wrote The Old Man and the Sea.\n"
            "Action 1-1: R1 = KnowledgeQuery(The Old Man and the Sea) = "
            "WikipediaPage(The Old Man and the Sea).\n"
            "Action 1-2: R2 = ParagraphRetrieve(R1, Query: Who wrote The Old Man and the Sea?) "
            "= Paragraph(The Old Man and the Sea-1).\n"
            "Action 1-3: R3 = QA([R2], Question: Who wrote The Old Man and the Sea?) = "
            "Ernest Hemingway.\n"
            "\n"
            "Subgoal 2: Find out the year Ernest Hemingway was born.\n"
            "Action 2-1: R4 = KnowledgeQuery(Ernest Hemingway) = "
            "WikipediaPage(Ernest Hemingway).\n"
            "Action 2-2: R5 = ParagraphRetrieve(R4, Query: When was Ernest Hemingway born?) = "
            "Paragraph(Ernest Hemingway-1).\n"
            "Action 2-3: R6 = QA([R5], Question: In which year was Ernest Hemingway born?) = "
            "1899.\n"
            "\n"
            "Subgoal 3: Find out the year the Eiffel Tower was completed.\n"
            "Action 3-1: R7 = KnowledgeQuery(Eiffel Tower) = WikipediaPage(Eiffel Tower).\n"
            "Action 3-2: R8 = ParagraphRetrieve(R7, Query: When was the Eiffel Tower "
            "completed?) = Paragraph(Eiffel Tower-3).\n"
            "Action 3-3: R9 = QA([R8], Question: In which year was the Eiffel Tower "
            "completed?) = 1889.\n"
            "\n"
            "Subgoal 4: Determine whether Hemingway was born before the tower was completed.\n"
            "Action 4-1: R10 = Calculator(R6 < R9) = False",
        ),
        FewShotExample(
            task="Who is the spouse of the director of the film Jaws?",
            rationale="Jaws (paragraph 'Jaws (film)-0'): Jaws is a 1975 thriller film directed "
            "by Steven Spielberg. Steven Spielberg (paragraph 'Steven Spielberg-9'): In 1991 "
            "Spielberg married the actress Kate Capshaw. We need to answer these questions: "
            "1. Who directed Jaws? (paragraph 'Jaws (film)-0') 2. Who is the spouse of #1? "
            "(paragraph 'Steven Spielberg-9')",
            answer="Kate Capshaw",
            plan="Subgoal 1: Find out who directed the film Jaws.\n"
            "Action 1-1: R1 = KnowledgeQuery(Jaws (film)) = WikipediaPage(Jaws (film)).\n"
            "Action 1-2: R2 = ParagraphRetrieve(R1, Query: Who directed Jaws?) = "
            "Paragraph(Jaws (film)-0).\n"
            "Action 1-3: R3 = QA([R2], Question: Who directed Jaws?) = Steven Spielberg.\n"
            "\n"
            "Subgoal 2: Find out who Steven Spielberg is married to.\n"
            "Action 2-1: R4 = KnowledgeQuery(Steven Spielberg) = "
            "WikipediaPage(Steven Spielberg).\n"
            "Action 2-2: R5 = ParagraphRetrieve(R4, Query: Who is Steven Spielberg's spouse?) = "
            "Paragraph(Steven Spielberg-9).\n"
            "Action 2-3: R6 = QA([R5], Question: Who is the spouse of Steven Spielberg?) = "
            "Kate Capshaw.",
        ),
    ),
    tools=frozenset(["KnowledgeQuery", "ParagraphRetrieve", "QA", "Calculator", "Code"]),
)

#: The built-in prompts by task type; other task types use :func:`generic_prompt`.
FEW_SHOTS: dict[str, FewShotPrompt] = {"math": MATH_PROMPT, "qa": QA_PROMPT}


def generic_prompt(specs: Sequence[ToolSpec]) -> FewShotPrompt:
    """Return a prompt for an env with the given tools: the form, the tool list, no example.

    The form is shown with placeholders, since a worked example would name tools the env may
    not have; plans may call only the listed tools.
    """
    if not specs:
        raise ValueError("a generic conversion prompt needs at least one tool spec")
    tools = "".join(f"{spec.describe()};\n" for spec in specs)
    schema = (
        "The form, with placeholders in angle brackets:\n"
        "Subgoal 1: <what the first step works out>\n"
        "Action 1-1: R1 = <Tool>(<arguments>) = <result>\n"
        "Action 1-2: R2 = <Tool>(<arguments that may use R1>) = <result>\n"
        "\n"
        "Subgoal 2: <what the next step works out>\n"
        "Action 2-1: R3 = <Tool>(<arguments>) = <result>\n"
    )
    return FewShotPrompt(
        instruction=_FORM + "Tools:\n" + tools + schema,
        tools=frozenset(spec.name for spec in specs),
    )


def render_query(task: str, rationale: str, answer: str | None) -> str:
    """Return the part of the prompt that presents one task (examples and items alike)."""
    text = f"Task: {task.strip()}\nReference solution: {rationale.strip()}"
    if answer is not None:
        text += f"\nFinal answer: {answer.strip()}"
    return text


def render_messages(prompt: FewShotPrompt, item: RationaleItem) -> tuple[dict[str, str], ...]:
    """Return the chat form: the examples as earlier turns, the instruction in the first one.

    The instruction opens the first user turn rather than a system turn, since some chat
    templates refuse a system role.
    """
    turns: list[dict[str, str]] = []
    for ex in prompt.examples:
        turns.append({"role": "user", "content": render_query(ex.task, ex.rationale, ex.answer)})
        turns.append({"role": "assistant", "content": ex.plan})
    turns.append({"role": "user", "content": render_query(item.task, item.rationale, item.answer)})
    turns[0] = {"role": "user", "content": prompt.instruction + "\n" + turns[0]["content"]}
    return tuple(turns)


def render_prompt(prompt: FewShotPrompt, item: RationaleItem) -> str:
    """Return the raw-text form: each example's plan ends with :data:`END_OF_PLAN`."""
    parts = [prompt.instruction + f"End each plan with the line {END_OF_PLAN}.\n"]
    for ex in prompt.examples:
        query = render_query(ex.task, ex.rationale, ex.answer)
        parts.append(f"{query}\nPlan:\n{ex.plan}\n{END_OF_PLAN}\n")
    parts.append(render_query(item.task, item.rationale, item.answer) + "\nPlan:\n")
    return "\n".join(parts)


# ------------------------------------------------------------------------------ checks
_FENCE_RE = re.compile(r"\A```[^\n]*\n(.*?)\n?```\Z", re.DOTALL)


_TRAILING_ANSWER_RE = re.compile(r"\n[ \t]*\n[ \t]*Final answer:[^\n]*\Z")


def clean_output(text: str) -> str:
    """Normalise the layout of a model's plan without touching any line's content.

    Unifies line ends, drops a surrounding code fence, anything from :data:`END_OF_PLAN` on, a
    last block that only repeats the input's ``Final answer: X`` line, and outer blank space,
    and makes every run of blank (or whitespace-only) lines one blank line.
    """
    text = text.replace("\r\n", "\n").strip()
    fenced = _FENCE_RE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    text = text.split(END_OF_PLAN, 1)[0].rstrip()  # for backends that ran past the stop
    # a model that echoes the input's "Final answer: X" line after its plan (SmolLM2 does)
    text = _TRAILING_ANSWER_RE.sub("", text).rstrip()
    return re.sub(r"\n(?:[ \t]*\n)+", "\n\n", text)


def validate_plan(subgoals: Sequence[Subgoal], tools: frozenset[str] | None = None) -> None:
    """Check that a parsed plan can be used as an annotation.

    Every subgoal has an action, every action parses and calls an allowed tool, each ``R<n>``
    an action reads was defined by an earlier action, and the last action has a result.

    Raises:
        AnnotationError: naming the first problem found.
    """
    if not subgoals:
        raise AnnotationError("the plan has no subgoal")
    defined: set[str] = set()
    last = None
    for k, subgoal in enumerate(subgoals, 1):
        if not subgoal.actions:
            raise AnnotationError(f"{subgoal.label or f'subgoal {k}'} has no action")
        for item in subgoal.actions:
            try:
                action = item.action
            except ActionParseError as e:
                raise AnnotationError(f"{item.label}: {e}") from e
            if tools is not None and action.name is not None and action.name not in tools:
                allowed = ", ".join(sorted(tools))
                raise AnnotationError(
                    f"{item.label}: unknown tool {action.name!r} (allowed: {allowed})"
                )
            for var in references(action.args):
                if var.startswith("R") and var not in defined:
                    raise AnnotationError(f"{item.label}: {var} is used before it is defined")
            defined.update(action.outputs)
            last = action
    if last is None or not (last.result or "").strip(" ."):
        raise AnnotationError("the plan does not end in a value (its last action has no result)")


# ------------------------------------------------------------------------------ converter
class LLMConverter:
    """Rewrite rationales as subgoal plans with a language model.

    Args:
        backend: any backend; greedy requests by default, so that a
            :class:`~lumos_gym.models.caching.CachingBackend` can answer reruns.
        batch_size: the items sent to the backend in one ``generate`` call.
        max_new_tokens: the budget of one plan; a plan that hits it is rejected as truncated.
        few_shots: prompts by task type, replacing or adding to :data:`FEW_SHOTS`.
        tools: tool specs by task type, for task types without a few-shot prompt
            (:func:`generic_prompt`).
        chat: send chat messages (default) or one raw prompt ending in ``Plan:``.
        temperature: 0 for greedy decoding.
        seed: the requests' seed.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        batch_size: int = 8,
        max_new_tokens: int = 768,
        few_shots: Mapping[str, FewShotPrompt] | None = None,
        tools: Mapping[str, Sequence[ToolSpec]] | None = None,
        chat: bool = True,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.backend = backend
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.few_shots = {**FEW_SHOTS, **(few_shots or {})}
        self.tools = dict(tools or {})
        self.chat = chat
        self.temperature = temperature
        self.seed = seed
        self._model_id: str | None = None

    @property
    def model_id(self) -> str:
        """Return the backend's model id (asked once)."""
        if self._model_id is None:
            self._model_id = self.backend.info().model_id
        return self._model_id

    def prompt_for(self, task_type: str) -> FewShotPrompt:
        """Return the prompt of a task type: its few-shot prompt, else a generic one.

        Raises:
            ValueError: the task type has neither a few-shot prompt nor tool specs.
        """
        if task_type in self.few_shots:
            return self.few_shots[task_type]
        if task_type in self.tools:
            return generic_prompt(self.tools[task_type])
        known = ", ".join(sorted(self.few_shots)) or "none"
        raise ValueError(
            f"no conversion prompt for task type {task_type!r} (few-shot prompts: {known}); "
            "pass few_shots= or tools= for it"
        )

    def request(self, item: RationaleItem) -> GenerationRequest:
        """Return the generation request of one item."""
        prompt = self.prompt_for(item.task_type)
        common = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if self.chat:
            return GenerationRequest(messages=render_messages(prompt, item), **common)
        return GenerationRequest(prompt=render_prompt(prompt, item), stop=(END_OF_PLAN,), **common)

    def check(self, item: RationaleItem, completion: Completion) -> Annotation | RejectedConversion:
        """Turn one completion into an annotation, or a rejection that says why."""

        def reject(reason: str) -> RejectedConversion:
            return RejectedConversion(
                item.id,
                reason,
                output=completion.text,
                stop_reason=completion.stop_reason,
                dataset=item.dataset,
                task_type=item.task_type,
            )

        if completion.stop_reason == "error":
            return reject(f"backend error: {completion.error or 'unknown'}")
        if completion.stop_reason == "length":
            return reject(f"truncated: the output reached max_new_tokens={self.max_new_tokens}")
        prompt = self.prompt_for(item.task_type)
        try:
            subgoals = parse_subgoal_plan(clean_output(completion.text))
            validate_plan(subgoals, prompt.tools)
        except AnnotationError as e:
            return reject(str(e))
        meta = {"converter": "llm", "model_id": self.model_id, "prompt_sha256": prompt.sha256()}
        return Annotation(
            item.id, item.dataset, item.task_type, item.task, subgoals, item.answer, meta
        )

    def convert(self, items: Iterable[RationaleItem]) -> Iterator[Annotation | RejectedConversion]:
        """Yield one annotation or rejection per item, in input order.

        Items are read lazily and sent ``batch_size`` at a time.
        """
        batch: list[RationaleItem] = []
        for item in items:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield from self._convert_batch(batch)
                batch = []
        if batch:
            yield from self._convert_batch(batch)

    def _convert_batch(
        self, batch: Sequence[RationaleItem]
    ) -> Iterator[Annotation | RejectedConversion]:
        requests = [self.request(item) for item in batch]
        completions = self.backend.generate(requests)
        if len(completions) != len(batch):
            raise ValueError(
                f"the backend returned {len(completions)} completions for {len(batch)} requests"
            )
        for item, completion in zip(batch, completions, strict=True):
            yield self.check(item, completion)

    def convert_file(
        self,
        items: Iterable[RationaleItem],
        out_path: str | Path,
        rejected_path: str | Path,
    ) -> ConversionStats:
        """Convert items into two append-only JSON-lines files, resuming a killed run.

        Items whose id is in either file already are skipped; a half-written last line is
        dropped first. Each record is flushed and fsynced as it is written, in input order.
        Backend errors are counted and logged but not written, so the next run retries them.

        Args:
            items: the items, in a stable order.
            out_path: the annotations (:meth:`Annotation.to_dict` records).
            rejected_path: the rejected outputs (:meth:`RejectedConversion.to_dict` records).

        Raises:
            DataError: a file holds an unreadable line, or the input repeats an id.
        """
        out_path, rejected_path = Path(out_path), Path(rejected_path)
        done = read_ids(out_path) | read_ids(rejected_path)
        stats = ConversionStats()

        def pending() -> Iterator[RationaleItem]:
            seen: set[str] = set()
            for item in items:
                if item.id in done:
                    stats.skipped += 1
                    continue
                if item.id in seen:
                    raise DataError(f"the input repeats the id {item.id!r}")
                seen.add(item.id)
                yield item

        for path in (out_path, rejected_path):
            path.parent.mkdir(parents=True, exist_ok=True)
        with (
            open(out_path, "a", encoding="utf-8") as out,
            open(rejected_path, "a", encoding="utf-8") as rejected,
        ):
            for result in self.convert(pending()):
                if isinstance(result, Annotation):
                    append_jsonl(out, result.to_dict())
                    stats.converted += 1
                elif result.stop_reason == "error":
                    logger.warning("%s: %s (not written; a rerun retries it)", result.id,
                                   result.reason)
                    stats.errors += 1
                else:
                    append_jsonl(rejected, result.to_dict())
                    stats.rejected += 1
        return stats


def read_ids(path: str | Path) -> set[str]:
    """Return the ids recorded in a JSON-lines output file (none if it does not exist).

    A half-written last line (a killed run) is cut off the file first.

    Raises:
        DataError: a complete line is not a JSON record with an ``id``.
    """
    path = Path(path)
    drop_partial_line(path)
    if not path.exists():
        return set()
    ids: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                ids.add(str(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError) as e:
                raise DataError(f"{path}:{n}: not an output record ({e})") from e
    return ids


__all__ = [
    "END_OF_PLAN",
    "FEW_SHOTS",
    "MATH_PROMPT",
    "QA_PROMPT",
    "ConversionStats",
    "FewShotExample",
    "FewShotPrompt",
    "LLMConverter",
    "RationaleItem",
    "RejectedConversion",
    "clean_output",
    "generic_prompt",
    "read_ids",
    "render_messages",
    "render_prompt",
    "render_query",
    "validate_plan",
]
