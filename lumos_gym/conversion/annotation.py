"""The unified annotation: a task solved as subgoals, each with its grounded actions and results.

Two forms, converted losslessly into each other:

* :class:`Annotation`, a record with a JSON-lines form (:meth:`Annotation.to_dict`,
  :func:`read_annotations`, :func:`write_annotations`);
* the original ``subgoal_plan`` text (docs/lumos-format.md §1.2), blocks separated by a blank line,
  each a subgoal line and its action lines::

      Subgoal 1: Obtain the number of the kids that Julius Caesar had.
      Action 1-1: R1 = KnowledgeQuery(Julius Caesar) = WikipediaPage(Julius Caesar).
      Action 1-2: R2 = ParagraphRetrieve(R1, Query: ...) = Paragraph(Julius Caesar-75).

:func:`parse_subgoal_plan` keeps every character of each line (trailing spaces, final periods,
irregular numbering) so that :func:`format_subgoal_plan` gives the text back byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.actions import Action, parse_action
from lumos_gym.errors import ActionParseError, DataError

_SUBGOAL_RE = re.compile(r"(Subgoal \d+): (.*)\Z", re.DOTALL)
_ACTION_RE = re.compile(r"(Action \d+-\d+): (.*)\Z", re.DOTALL)


class AnnotationError(DataError):
    """A subgoal plan or annotation record is not in the expected form."""


@dataclass(frozen=True)
class AnnotatedAction:
    """One action line of a subgoal.

    Attributes:
        text: the action as written after ``Action k-j: ``, every character kept (e.g.
            ``"R3 = QA([R2], Question: How many kids?) = 3. "``).
        label: the line's label, e.g. ``"Action 1-3"``.
    """

    text: str
    label: str = ""

    @property
    def action(self) -> Action:
        """Return the parsed action (raises ActionParseError for a malformed one)."""
        return parse_action(self.text)


@dataclass(frozen=True)
class Subgoal:
    """One subgoal and its actions.

    Attributes:
        text: the subgoal after ``Subgoal k: ``, as written.
        actions: its action lines, in order.
        label: ``"Subgoal k"``.
    """

    text: str
    actions: tuple[AnnotatedAction, ...] = ()
    label: str = ""

    @property
    def line(self) -> str:
        """Return the subgoal line, ``"Subgoal k: text"``."""
        return f"{self.label}: {self.text}"


@dataclass(frozen=True)
class Annotation:
    """A task annotated in the unified format.

    Attributes:
        id: a stable id, e.g. ``"gsm8k/train/17"``.
        dataset: the source dataset (``gsm8k``, ``strategyqa``...).
        task_type: one of ``math``, ``qa``, ``code``, ``web``, ``multimodal``, ``game``.
        task: the task text the agent sees.
        subgoals: the plan.
        answer: the gold final answer, when the task has one.
        meta: anything else (the source record's id, the converter's name...).
    """

    id: str
    dataset: str
    task_type: str
    task: str
    subgoals: tuple[Subgoal, ...]
    answer: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def actions(self) -> list[AnnotatedAction]:
        """Return every action of every subgoal, in order."""
        return [a for s in self.subgoals for a in s.actions]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready record (the plan kept as ``subgoal_plan`` text)."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "task_type": self.task_type,
            "task": self.task,
            "subgoal_plan": format_subgoal_plan(self.subgoals),
            "answer": self.answer,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Annotation:
        """Read a record written by :meth:`to_dict`.

        Raises:
            AnnotationError: a field is missing or the plan does not parse.
        """
        try:
            return cls(
                id=str(record["id"]),
                dataset=str(record["dataset"]),
                task_type=str(record["task_type"]),
                task=str(record["task"]),
                subgoals=parse_subgoal_plan(str(record["subgoal_plan"])),
                answer=None if record.get("answer") is None else str(record["answer"]),
                meta=dict(record.get("meta") or {}),
            )
        except KeyError as e:
            raise AnnotationError(f"annotation record without the field {e}") from None


def _label_number(label: str) -> str:
    return label.split(" ", 1)[1]


def parse_subgoal_plan(text: str) -> tuple[Subgoal, ...]:
    """Read a ``subgoal_plan`` text into subgoals, keeping every character.

    Raises:
        AnnotationError: a block does not start with ``Subgoal k: ``, or a later line of it is
            not ``Action k-j: ...``.
    """
    subgoals = []
    for b, block in enumerate(text.split("\n\n")):
        lines = block.split("\n")
        head = _SUBGOAL_RE.match(lines[0])
        if head is None:
            raise AnnotationError(f"block {b + 1}: expected 'Subgoal k: ...', got {lines[0]!r}")
        actions = []
        for line in lines[1:]:
            match = _ACTION_RE.match(line)
            if match is None:
                raise AnnotationError(f"block {b + 1}: expected 'Action k-j: ...', got {line!r}")
            actions.append(AnnotatedAction(match.group(2), match.group(1)))
        subgoals.append(Subgoal(head.group(2), tuple(actions), head.group(1)))
    return tuple(subgoals)


def format_subgoal_plan(subgoals: Iterable[Subgoal]) -> str:
    """Write subgoals as ``subgoal_plan`` text; unlabelled parts are numbered in order."""
    blocks = []
    for k, subgoal in enumerate(subgoals, 1):
        label = subgoal.label or f"Subgoal {k}"
        number = _label_number(label)
        lines = [f"{label}: {subgoal.text}"]
        for j, action in enumerate(subgoal.actions, 1):
            lines.append(f"{action.label or f'Action {number}-{j}'}: {action.text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def make_subgoals(plan: Iterable[tuple[str, Iterable[str]]]) -> tuple[Subgoal, ...]:
    """Build labelled subgoals from ``(subgoal text, [action text, ...])`` pairs.

    Raises:
        AnnotationError: an action does not parse.
    """
    subgoals = []
    for k, (text, actions) in enumerate(plan, 1):
        items = []
        for j, action in enumerate(actions, 1):
            try:
                parse_action(action)
            except ActionParseError as e:
                raise AnnotationError(f"subgoal {k}, action {j}: {e}") from e
            items.append(AnnotatedAction(action, f"Action {k}-{j}"))
        subgoals.append(Subgoal(text, tuple(items), f"Subgoal {k}"))
    return tuple(subgoals)


def read_annotations(path: str | Path) -> Iterator[Annotation | AnnotationError]:
    """Yield the annotations of a JSONL file; a bad line yields its error instead (no crash).

    Lines are read as bytes and decoded one by one, so a line that is not UTF-8 (or a file that
    is not text) is a bad line, not an exception.
    """
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Annotation.from_dict(json.loads(line.decode("utf-8")))
            except (ValueError, TypeError, AttributeError, AnnotationError) as e:
                yield AnnotationError(f"{path}:{n}: {e}")


def write_annotations(annotations: Iterable[Annotation], path: str | Path) -> int:
    """Write annotations as JSON lines (sorted keys, so equal inputs give equal bytes)."""
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for annotation in annotations:
            f.write(json.dumps(annotation.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    return count
