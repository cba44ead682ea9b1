"""The ASDiv loader: the official XML and the hub's JSON, with its answer and formula parsers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.envs.math.data.calc import (
    _PURE_NUMBER,
    _calc_actions,
    _is_infix_arithmetic,
    _same_number,
    calculator_expression,
)
from lumos_gym.envs.math.data.files import (
    _check_unique,
    _join,
    _read_records,
    _read_text,
    _Record,
    _split_path,
    _text_field,
)
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.scoring.answers import to_fraction

_ASDIV_EXPECTED = "ASDiv XML <Problem> elements or JSON records with body/question/answer/formula"

_UNIT = re.compile(r"^(?P<value>.*?\S)\s*\((?P<unit>[^()]*)\)\s*$", re.DOTALL)
_RATIO = re.compile(r"^\s*\d+(?:\.\d+)?\s*:\s*\d+(?:\.\d+)?\s*$")
_TIMES_X = re.compile(r"(?<=\d)\s*[xX]\s*(?=\d)")


@dataclass(frozen=True)
class AsdivAnswer:
    """An ASDiv answer split into values and units.

    Attributes:
        values: the values without units, in order (``"2 (km); 3 (km)"`` gives ``("2", "3")``).
            Thousands commas are removed from numeric values.
        units: the unit of each value (``None`` where there is none).
        kind: ``"number"`` (one number, fractions included), ``"ratio"`` (``a:b``), ``"list"``
            (several values) or ``"text"`` (anything else: words, ``3 r 2``, times).
    """

    values: tuple[str, ...]
    units: tuple[str | None, ...]
    kind: str

    @property
    def text(self) -> str:
        """The gold answer as stored in :attr:`Task.answer`: the values joined by ``"; "``."""
        return "; ".join(self.values)


def parse_asdiv_answer(raw: str) -> AsdivAnswer:
    """Split an ASDiv ``<Answer>`` such as ``"9 (apples)"`` or ``"2 (km); 3 (km)"``.

    How each kind is scored by ASDiv's default rule, ``math/exact``
    (:func:`lumos_gym.scoring.answers.exact_answer_match`): ``number`` as an exact value (units
    and words around the prediction are ignored; a fraction gold such as ``7/9`` is matched by
    ``7/9`` or its 12-digit decimal); ``ratio`` as a ratio (``6:8`` and ``0.75`` both match
    ``3:4``); ``list`` item by item, in order (the prediction split on ``;``, ``", "`` or
    ``" and "``); ``text`` by normalised text equality.

    Args:
        raw: the answer text.

    Returns:
        The parsed answer.
    """
    values: list[str] = []
    units: list[str | None] = []
    for part in raw.split(";"):
        part = part.strip()
        if not part:
            continue
        m = _UNIT.match(part)
        value, unit = (m["value"].strip(), m["unit"].strip() or None) if m else (part, None)
        if _PURE_NUMBER.match(value) and to_fraction(value) is not None:
            value = value.replace(",", "").strip()
        values.append(value)
        units.append(unit)
    if not values:
        values, units = [raw.strip()], [None]
    if len(values) > 1:
        kind = "list"
    elif _RATIO.match(values[0]):
        kind = "ratio"
    elif _PURE_NUMBER.match(values[0]) and to_fraction(values[0]) is not None:
        kind = "number"
    else:
        kind = "text"
    return AsdivAnswer(tuple(values), tuple(units), kind)


def parse_asdiv_formula(formula: str) -> list[tuple[str, str]] | None:
    """Read an ASDiv ``<Formula>`` as a list of ``(expression, value)`` calculations.

    Parts are separated by ``;``; in each part the value is the text after the last ``=`` and
    the expression the first ``=``-separated segment made only of numbers, ``+ - * / ( ) % ^``
    (so ``x=(25+7)/2=16`` gives ``("(25+7)/2", "16")``). ``×``, ``÷`` and ``3 x 4`` read as
    multiplication and division.

    Args:
        formula: the formula text.

    Returns:
        The calculations, or ``None`` when any part is not plain arithmetic with a numeric
        value: remainders (``31/8=3 r 7``), ratios (``12:16=3:4``), algebra (``x+y=25``),
        function names (``LCM(4,6)=12``), comparisons.
    """
    text = _TIMES_X.sub("*", calculator_expression(formula))
    calcs = []
    for part in text.split(";"):
        if not part.strip():
            continue
        segments = [s.strip() for s in part.split("=")]
        value = segments[-1]
        expr = next((s for s in segments[:-1] if _is_infix_arithmetic(s)), None)
        if expr is None or not _PURE_NUMBER.match(value) or to_fraction(value) is None:
            return None
        calcs.append((expr, value))
    return calcs or None


def _asdiv_actions(answer: AsdivAnswer, formula: str | None) -> tuple[str, ...]:
    calcs = parse_asdiv_formula(formula) if formula else None
    actions = _calc_actions([e for e, _ in calcs]) if calcs else []
    if answer.kind == "list":
        actions.append(f"Answer({', '.join(answer.values)})")
    elif calcs and answer.kind == "number":
        last = max(
            (k for k, (_, v) in enumerate(calcs, 1) if _same_number(v, answer.text)), default=0
        )
        actions.append(f"Answer(R{last})" if last else f"Answer({answer.text})")
    else:
        actions.append(f"Answer({answer.text})")
    return tuple(actions)


def _xml_text(elem: ET.Element, tag: str) -> str | None:
    child = elem.find(tag)
    return None if child is None else "".join(child.itertext()).strip()


def _asdiv_xml_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    _read_text(path, _ASDIV_EXPECTED)  # existence and encoding checks with clear errors
    try:
        root = ET.fromstring(path.read_bytes())
    except ET.ParseError as e:
        line, col = e.position
        raise DataError(
            f"{path}: bad XML at line {line}, column {col}; expected {_ASDIV_EXPECTED}"
        ) from e
    problems = list(root.iter("Problem"))
    if not problems:
        raise DataError(f"{path}: no <Problem> elements; expected {_ASDIV_EXPECTED}")
    for i, elem in enumerate(problems):
        record: dict[str, Any] = dict(elem.attrib)
        for tag in ("Body", "Question", "Solution-Type", "Answer", "Formula"):
            text = _xml_text(elem, tag)
            if text is not None:
                record[tag] = text
        where = f"<Problem> {i}" + (f" (ID {elem.get('ID')!r})" if elem.get("ID") else "")
        yield where, record


def _asdiv_json_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for rec in _read_records(path, _ASDIV_EXPECTED):
        yield rec.where, dict(rec.data)


def load_asdiv(path: str | Path, split: str = "test") -> list[Task]:
    """Load ASDiv: the official ``ASDiv.xml`` or the JSON (lines) variant of the hub.

    The question is ``Body + " " + Question``. The answer is split by
    :func:`parse_asdiv_answer`: units in parentheses go to ``meta["units"]`` and
    :attr:`Task.answer` holds the values joined by ``"; "``; ``meta["answer_kind"]`` says how it
    is scored (see :func:`parse_asdiv_answer`). Gold actions come from the formula when
    :func:`parse_asdiv_formula` reads it as plain arithmetic (one ``Calculator`` step per part,
    then ``Answer(R<k>)`` for the last part whose value is the answer); otherwise the only
    step is ``Answer(<answer>)``, with a several-valued answer written ``Answer(2, 3)``. The
    rationale is the record's ``solution`` field when it has one, else the formula.

    Args:
        path: an ``.xml`` file (detected by content) or a JSON list / JSON lines file.
        split: the split name used in task ids (``asdiv/{split}/{ID}``; the record index when
            there is no ID, as in the hub variant).

    Returns:
        One task per problem, in file order. ``meta`` holds ``raw``, ``grade``, ``source``,
        ``solution_type``, ``formula``, ``units`` and ``answer_kind``.

    Raises:
        DataError: missing or empty file, bad XML or JSON, no question or answer, duplicate IDs.
    """
    path, split = Path(path), _split_path(split)
    text = _read_text(path, _ASDIV_EXPECTED)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected {_ASDIV_EXPECTED}")
    is_xml = text.lstrip().startswith("<")
    records = _asdiv_xml_records(path) if is_xml else _asdiv_json_records(path)
    tasks, ids = [], []
    for i, (where, data) in enumerate(records):
        rec = _Record(i, where, data)
        what = "element" if is_xml else "field"
        body = _text_field(path, rec, ("Body",), _ASDIV_EXPECTED)
        part = _text_field(path, rec, ("Question",), _ASDIV_EXPECTED)
        raw_answer = _text_field(path, rec, ("Answer",), _ASDIV_EXPECTED)
        for name, value in (("Question", part), ("Answer", raw_answer)):
            if value is None or not value.strip():
                tag = f"<{name}>" if is_xml else repr(name.lower())
                raise DataError(
                    f"{path}: {where}: missing {what} {tag}; expected {_ASDIV_EXPECTED}"
                )
        assert raw_answer is not None  # for type checkers: checked just above
        answer = parse_asdiv_answer(raw_answer)
        formula = _text_field(path, rec, ("Formula",), _ASDIV_EXPECTED)
        solution = _text_field(path, rec, ("solution", "rationale"), _ASDIV_EXPECTED)
        raw_id = rec.get("ID")
        local_id = str(raw_id).strip() if raw_id is not None else str(i)
        ids.append(local_id)
        tasks.append(
            Task(
                id=f"asdiv/{split}/{local_id}",
                question=_join(body, part),
                answer=answer.text,
                task_type="math",
                rationale=(solution or formula or None),
                gold_actions=_asdiv_actions(answer, formula),
                meta={
                    "dataset": "asdiv",
                    "format": "xml" if is_xml else "json",
                    "raw": data,
                    "grade": rec.get("Grade"),
                    "source": rec.get("Source"),
                    "solution_type": rec.get("Solution-Type", "solution_type"),
                    "formula": formula,
                    "units": answer.units,
                    "answer_kind": answer.kind,
                },
            )
        )
    _check_unique(path, ids)
    return tasks
