"""Math task sources: loaders for the official GSM8K, SVAMP and ASDiv files, and bundled samples.

Each loader reads one file and returns a list of :class:`~lumos_gym.envs.tasks.Task` with
``task_type="math"``. A file that is missing, empty or not in the expected format raises
:class:`~lumos_gym.errors.DataError` with a one-line message naming the file, the record and
what was expected.

Formats handled:

* **GSM8K** (``openai/grade-school-math``): JSON lines ``{"question", "answer"}``, the answer
  holding solution lines with ``<<expr=value>>`` calculator marks and a last line
  ``#### <number>``; also the *socratic* files, whose solution lines start with a sub-question
  and ``" ** "``. A JSON list of the same records (a hub export) is accepted too.
* **SVAMP** (``arkilpatel/SVAMP``, ``SVAMP.json``): a JSON list of ``{"ID", "Body", "Question",
  "Equation", "Answer", "Type"}``; also JSON lines, lower-case keys, the hub's extra
  ``question_concat``, and the variants with ``Numbers`` (``number0`` placeholders in the text
  and equation) and ``Group``/``group_nums`` fields, including the repository's ``.csv`` folds.
* **ASDiv** (``chaochun/nlu-asdiv-dataset``, ``ASDiv.xml``): ``<Problem ID Grade Source>``
  elements with ``<Body>``, ``<Question>``, ``<Solution-Type>``, ``<Answer>`` and ``<Formula>``;
  also the JSON (lines) variant on the hub with ``body``, ``question``, ``solution_type``,
  ``answer`` and ``formula``.

:func:`load_math_dataset` picks the loader from a dataset name, or from the file's content
when no name is given, and falls back to the bundled samples (``lumos_gym/envs/data``) when no
path is given; those samples are the offline test split of the default suite.
"""

from __future__ import annotations

import ast
import csv
import difflib
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.envs.records import read_json_records, read_text
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.scoring.answers import normalize_number, to_fraction

__all__ = [
    "DATA_DIR",
    "MATH_LOADERS",
    "SAMPLE_FILES",
    "AsdivAnswer",
    "CalcMark",
    "calculator_expression",
    "detect_math_format",
    "load_asdiv",
    "load_gsm8k",
    "load_math_dataset",
    "load_svamp",
    "parse_asdiv_answer",
    "parse_asdiv_formula",
    "parse_calc_marks",
    "sample_path",
    "strip_calc_marks",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
"""The folder of the bundled sample files."""

SAMPLE_FILES: Mapping[str, str] = {
    "gsm8k": "gsm8k_sample.jsonl",
    "gsm8k_socratic": "gsm8k_socratic_sample.jsonl",
    "svamp": "svamp_sample.json",
    "asdiv": "asdiv_sample.xml",
}
"""Bundled sample file of each dataset name, relative to :data:`DATA_DIR`."""

_GSM8K_EXPECTED = 'GSM8K JSON lines {"question": ..., "answer": "...\\n#### <number>"}'
_SVAMP_EXPECTED = "SVAMP JSON records with Body/Question/Equation/Answer"
_ASDIV_EXPECTED = "ASDiv XML <Problem> elements or JSON records with body/question/answer/formula"

# ---------------------------------------------------------------------------------------------
# Reading files


@dataclass(frozen=True)
class _Record:
    """One JSON object of a data file, with where it was found (for error messages)."""

    index: int
    where: str
    data: Mapping[str, Any]

    def get(self, *names: str) -> Any:
        """Return the first present field among ``names``, matching case- and ``-``/``_``-blind."""
        keys = {_key(k): k for k in self.data if k is not None}
        for name in names:
            key = keys.get(_key(name))
            value = None if key is None else self.data[key]
            if value is not None and not (isinstance(value, str) and not value.strip()):
                return value
        return None


def _key(name: str) -> str:
    return str(name).lower().replace("-", "_").replace(" ", "_")


_read_text = read_text


def _read_csv(path: Path, text: str, expected: str) -> list[_Record]:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        records = [
            _Record(i, f"row {i} (line {reader.line_num})", row) for i, row in enumerate(reader)
        ]
    except csv.Error as e:
        raise DataError(f"{path}: bad CSV ({e}); expected {expected}") from e
    if not records:
        raise DataError(f"{path}: no rows under the CSV header; expected {expected}")
    return records


def _read_records(path: Path, expected: str) -> list[_Record]:
    """Read a JSON list of objects, JSON lines (blank lines skipped), or a CSV with a header."""
    text = _read_text(path, expected)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected {expected}")
    if path.suffix.lower() == ".csv":
        return _read_csv(path, text, expected)
    return [
        _Record(i, where, item)
        for i, (where, item) in enumerate(read_json_records(path, expected, text))
    ]


def _text_field(path: Path, rec: _Record, names: tuple[str, ...], expected: str) -> str | None:
    value = rec.get(*names)
    if value is None:
        return None
    if isinstance(value, dict | list):
        raise DataError(
            f"{path}: {rec.where}: field {names[0]!r} is a {type(value).__name__}; "
            f"expected text in {expected}"
        )
    return str(value)


def _required(path: Path, rec: _Record, names: tuple[str, ...], expected: str) -> str:
    value = _text_field(path, rec, names, expected)
    if value is None:
        raise DataError(f"{path}: {rec.where}: missing field {names[0]!r}; expected {expected}")
    return value


def _check_unique(path: Path, ids: list[str]) -> None:
    seen: set[str] = set()
    for task_id in ids:
        if task_id in seen:
            raise DataError(f"{path}: duplicate problem ID {task_id!r}; expected unique IDs")
        seen.add(task_id)


def _join(*parts: str | None) -> str:
    """Join text fragments with single spaces, skipping empty ones."""
    return " ".join(p.strip() for p in parts if p and p.strip())


def _split_path(split: str) -> str:
    if not split or "/" in split:
        raise ValueError(f"split must be a non-empty name without '/', got {split!r}")
    return split


# ---------------------------------------------------------------------------------------------
# Calculator marks and arithmetic formulas

_CALC_MARK = re.compile(r"<<(.*?)>>")
_ARITHMETIC = re.compile(r"^[\d\s.,+\-*/()%^]*\d[\d\s.,+\-*/()%^]*$")
_PURE_NUMBER = re.compile(
    r"^(?=[^\d]*\d)\s*[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:/\d+)?\s*$"
)


@dataclass(frozen=True)
class CalcMark:
    """One GSM8K calculator annotation ``<<expr=value>>``.

    Attributes:
        expr: the expression, as written.
        value: the result, as written (``None`` when the mark has no ``=``).
        start: offset of ``<<`` in the text.
        end: offset just after ``>>``.
    """

    expr: str
    value: str | None
    start: int
    end: int


def parse_calc_marks(text: str) -> list[CalcMark]:
    """Return the ``<<expr=value>>`` marks of a GSM8K solution, in order.

    The value is the text after the last ``=``, so ``<<a=b=c>>`` gives ``expr="a=b"``.

    Args:
        text: a GSM8K solution text.

    Returns:
        The marks; empty marks (``<<>>``) are skipped.
    """
    marks = []
    for m in _CALC_MARK.finditer(text):
        body = m.group(1)
        expr, eq, value = body.rpartition("=")
        if not eq:
            expr, value = body, None
        if expr.strip():
            marks.append(
                CalcMark(expr.strip(), None if value is None else value.strip(), *m.span())
            )
    return marks


def strip_calc_marks(text: str) -> str:
    """Remove the ``<<...>>`` marks from a GSM8K solution, leaving the prose as people read it.

    Args:
        text: a GSM8K solution text.

    Returns:
        The text without marks.
    """
    return _CALC_MARK.sub("", text)


def calculator_expression(expr: str) -> str:
    """Rewrite a dataset's arithmetic expression into the lumos Calculator's syntax.

    Python's ``**`` becomes ``^``; ``×``, ``÷`` and the Unicode minus become ``*``, ``/`` and
    ``-``; everything else is kept (the Calculator reads ``$``, ``,`` and ``%`` itself).

    Args:
        expr: the expression.

    Returns:
        The rewritten, stripped expression.
    """
    out = expr.replace("**", "^").replace("×", "*").replace("÷", "/").replace("\u2212", "-")
    return out.strip()


def _is_infix_arithmetic(expr: str) -> bool:
    """Whether ``expr`` is numbers joined by infix ``+ - * / ^ %`` and parentheses (parsed only).

    Rejects prefix notation (``- 5 7``), tuples, names and anything else the Calculator would not
    read as one arithmetic formula. Nothing is evaluated.
    """
    if not _ARITHMETIC.match(expr):
        return False
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", expr).replace("^", "**")
    text = re.sub(r"(?<=[\d)])\s*%", "/100", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    return all(isinstance(node, allowed) for node in ast.walk(tree)) and all(
        isinstance(node.value, int | float)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
    )


def _same_number(a: object, b: object) -> bool:
    x, y = to_fraction(a), to_fraction(b)
    return x is not None and y is not None and x == y


def _calc_actions(exprs: list[str]) -> list[str]:
    return [f"R{k} = Calculator({calculator_expression(e)})" for k, e in enumerate(exprs, 1)]


def _final_answer(values: list[str | None], gold: str) -> str:
    """``Answer(R<k>)`` for the last calculation whose value is the gold answer, else the gold."""
    if values and _same_number(values[-1], gold):
        return f"Answer(R{len(values)})"
    return f"Answer({gold})"


# ---------------------------------------------------------------------------------------------
# GSM8K


def _mask_marks(line: str) -> str:
    return _CALC_MARK.sub(lambda m: "\0" * len(m.group(0)), line)


def _gsm8k_steps(rationale: str) -> list[dict[str, Any]]:
    """Split a solution into steps: ``{"subquestion", "text", "calcs"}`` per non-blank line."""
    steps = []
    for line in rationale.splitlines():
        if not line.strip():
            continue
        cut = _mask_marks(line).find(" ** ")
        sub, text = (line[:cut].strip(), line[cut + 4 :].strip()) if cut >= 0 else (None, line)
        calcs = [{"expr": c.expr, "value": c.value} for c in parse_calc_marks(text)]
        steps.append({"subquestion": sub, "text": text.strip(), "calcs": calcs})
    return steps


def load_gsm8k(path: str | Path, split: str = "test") -> list[Task]:
    """Load a GSM8K file (main or socratic format).

    Args:
        path: a ``.jsonl`` file of ``{"question", "answer"}`` records (or a JSON list of them).
        split: the split name used in task ids (``gsm8k/{split}/{index}``).

    Returns:
        One task per record, in file order; ``index`` counts records (blank lines skipped).
        ``answer`` is the text after ``####`` without commas; ``rationale`` is the solution
        before ``####``, verbatim (marks included, see :func:`strip_calc_marks`);
        ``gold_actions`` has one ``R<k> = Calculator(expr)`` per calculator mark, then
        ``Answer(R<k>)`` when the last mark's value equals the gold number, else
        ``Answer(<gold>)``. ``meta`` holds ``raw`` (the record), ``variant`` (``"main"`` or
        ``"socratic"``), ``steps`` (sub-question, text and marks of each line) and ``calcs``.

    Raises:
        DataError: missing or empty file, bad JSON, a missing field, or no ``####`` line.
    """
    path, split = Path(path), _split_path(split)
    tasks = []
    for rec in _read_records(path, _GSM8K_EXPECTED):
        question = _required(path, rec, ("question",), _GSM8K_EXPECTED).strip()
        solution = _required(path, rec, ("answer",), _GSM8K_EXPECTED)
        before, sep, after = solution.rpartition("####")
        gold = after.strip().replace(",", "")
        if not sep or not gold:
            raise DataError(
                f"{path}: {rec.where}: the answer has no final '#### <number>' line; "
                f"expected {_GSM8K_EXPECTED}"
            )
        rationale = before.strip()
        steps = _gsm8k_steps(rationale)
        marks = parse_calc_marks(rationale)
        actions = _calc_actions([m.expr for m in marks])
        actions.append(_final_answer([m.value for m in marks], gold))
        socratic = any(s["subquestion"] is not None for s in steps)
        tasks.append(
            Task(
                id=f"gsm8k/{split}/{rec.index}",
                question=question,
                answer=gold,
                task_type="math",
                rationale=rationale,
                gold_actions=tuple(actions),
                meta={
                    "dataset": "gsm8k",
                    "variant": "socratic" if socratic else "main",
                    "raw": dict(rec.data),
                    "steps": steps,
                    "calcs": [{"expr": m.expr, "value": m.value} for m in marks],
                },
            )
        )
    return tasks


# ---------------------------------------------------------------------------------------------
# SVAMP

_PLACEHOLDER = re.compile(r"\bnumber(\d+)\b")


def _format_answer(value: object) -> str:
    """A numeric answer without a trailing ``.0`` (``51.0`` gives ``"51"``); text as given."""
    text = repr(value) if isinstance(value, float) else str(value).strip()
    if _PURE_NUMBER.match(text) or isinstance(value, int | float):
        number = normalize_number(text)
        if number is not None and "/" not in number:
            return number
    return text


def _svamp_numbers(raw: object) -> list[str]:
    items = raw.split() if isinstance(raw, str) else list(raw) if isinstance(raw, list) else []
    return [normalize_number(x) or str(x) for x in items]


def _fill_placeholders(text: str | None, numbers: list[str]) -> str | None:
    if text is None or not numbers:
        return text

    def sub(m: re.Match[str]) -> str:
        i = int(m.group(1))
        return numbers[i] if i < len(numbers) else m.group(0)

    return _PLACEHOLDER.sub(sub, text)


def load_svamp(path: str | Path, split: str = "test") -> list[Task]:
    """Load SVAMP (``SVAMP.json`` and its variants).

    The question is ``Body + " " + Question`` (both stripped; either may be missing), the way
    SVAMP's text is usually rebuilt; the Body often ends without a full stop, and that is kept
    as written. A ``question_concat`` field (hub export) is used as the question when present.
    ``number<i>`` placeholders are filled from ``Numbers`` when the record has them.

    Args:
        path: a JSON list (the official file), JSON lines, or a ``.csv`` with the same columns.
        split: the split name used in task ids (``svamp/{split}/{ID}``; the record index when
            there is no ``ID``).

    Returns:
        One task per record. ``answer`` is ``Answer`` without a trailing ``.0``; the gold
        actions are ``R1 = Calculator(<Equation>)`` then ``Answer(R1)`` (only
        ``Answer(<answer>)`` when the record has no arithmetic equation). ``meta`` holds
        ``raw``, ``type``, ``equation``, ``body``, ``question_part``, ``numbers`` and ``group``.

    Raises:
        DataError: missing or empty file, bad JSON, no ``Answer`` or no question text,
            duplicate IDs.
    """
    path, split = Path(path), _split_path(split)
    exp = _SVAMP_EXPECTED
    tasks, ids = [], []
    for rec in _read_records(path, exp):
        numbers = _svamp_numbers(rec.get("Numbers"))
        body = _fill_placeholders(_text_field(path, rec, ("Body",), exp), numbers)
        part = _fill_placeholders(_text_field(path, rec, ("Question",), exp), numbers)
        concat = _text_field(path, rec, ("question_concat",), exp)
        if concat:
            question = concat.strip()
        elif body and part and part.strip().startswith(body.strip()):
            question = part.strip()  # a variant whose Question already holds the Body
        else:
            question = _join(body, part)
        if not question:
            raise DataError(f"{path}: {rec.where}: missing field 'Question'; expected {exp}")
        raw_answer = rec.get("Answer")
        if raw_answer is None or isinstance(raw_answer, dict | list | bool):
            raise DataError(f"{path}: {rec.where}: missing field 'Answer'; expected {exp}")
        answer = _format_answer(raw_answer)
        equation = _fill_placeholders(_text_field(path, rec, ("Equation",), exp), numbers)
        equation = equation.strip() if equation else None
        if equation and _is_infix_arithmetic(equation):
            actions: tuple[str, ...] = (
                f"R1 = Calculator({calculator_expression(equation)})",
                "Answer(R1)",
            )
        else:
            actions = (f"Answer({answer})",)
        raw_id = rec.get("ID")
        local_id = str(raw_id).strip() if raw_id is not None else str(rec.index)
        ids.append(local_id)
        tasks.append(
            Task(
                id=f"svamp/{split}/{local_id}",
                question=question,
                answer=answer,
                task_type="math",
                rationale=None,
                gold_actions=actions,
                meta={
                    "dataset": "svamp",
                    "raw": dict(rec.data),
                    "type": rec.get("Type"),
                    "equation": equation,
                    "body": body,
                    "question_part": part,
                    "numbers": numbers or None,
                    "group": rec.get("Group", "Group_nums", "group_nums"),
                },
            )
        )
    _check_unique(path, ids)
    return tasks


# ---------------------------------------------------------------------------------------------
# ASDiv

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


# ---------------------------------------------------------------------------------------------
# Dispatch by name or content

MATH_LOADERS: Mapping[str, Callable[..., list[Task]]] = {
    "gsm8k": load_gsm8k,
    "svamp": load_svamp,
    "asdiv": load_asdiv,
}
"""The loader of each dataset name."""

_ALIASES = {
    "gsm8k": "gsm8k",
    "gsm": "gsm8k",
    "gsm8ksocratic": "gsm8k_socratic",
    "svamp": "svamp",
    "asdiv": "asdiv",
    "asdiva": "asdiv",
}


def detect_math_format(path: str | Path) -> str:
    """Tell which dataset a file holds, from its content.

    Args:
        path: the data file.

    Returns:
        ``"gsm8k"``, ``"svamp"`` or ``"asdiv"``.

    Raises:
        DataError: the file cannot be read or matches none of them.
    """
    path = Path(path)
    expected = "a GSM8K, SVAMP or ASDiv file"
    text = _read_text(path, expected)
    if text.lstrip().startswith("<"):
        return "asdiv"
    first = _read_records(path, expected)[0]
    keys = {_key(k) for k in first.data}
    answer = first.get("answer")
    if "####" in str(answer) and "question" in keys:
        return "gsm8k"
    if keys & {"equation", "numbers", "question_concat"}:
        return "svamp"
    if keys & {"formula", "solution_type"}:
        return "asdiv"
    raise DataError(
        f"{path}: cannot tell the dataset from fields {sorted(first.data)}; expected GSM8K "
        "(question, answer with '####'), SVAMP (Body, Question, Equation, Answer) or ASDiv "
        "(XML, or body, question, answer, formula)"
    )


def _canonical_name(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    if key not in _ALIASES:
        close = difflib.get_close_matches(key, list(_ALIASES), n=1)
        hint = f"; did you mean {_ALIASES[close[0]]!r}?" if close else ""
        raise DataError(
            f"unknown math dataset {name!r}; expected one of {sorted(SAMPLE_FILES)}{hint}"
        )
    return _ALIASES[key]


def sample_path(name: str) -> Path:
    """Return the bundled sample file of a dataset (``gsm8k``, ``gsm8k_socratic``, ...).

    Args:
        name: the dataset name.

    Returns:
        The path under :data:`DATA_DIR`.

    Raises:
        DataError: unknown name.
    """
    return DATA_DIR / SAMPLE_FILES[_canonical_name(name)]


def load_math_dataset(
    name: str | None = None, path: str | Path | None = None, *, split: str = "test"
) -> list[Task]:
    """Load a math dataset in any format handled here, by name or by content.

    Args:
        name: ``gsm8k``, ``gsm8k_socratic``, ``svamp`` or ``asdiv`` (case, ``-`` and ``_`` are
            ignored); ``None`` or ``"auto"`` detects it from the file.
        path: the data file; ``None`` loads the bundled sample of ``name``.
        split: the split name used in task ids.

    Returns:
        The tasks.

    Raises:
        DataError: no name and no path, unknown name, a file that holds another dataset than
            the one named, or any loader error.
    """
    if name is not None and name.lower() == "auto":
        name = None
    if path is None:
        if name is None:
            raise DataError("load_math_dataset needs a dataset name, a path, or both")
        path = sample_path(name)
    path = Path(path)
    detected: str | None
    try:
        detected = detect_math_format(path)
    except DataError:
        if name is None:
            raise
        detected = None  # let the named loader report what is wrong
    canonical = _canonical_name(name) if name is not None else detected
    assert canonical is not None  # detected is set when name is None
    dataset = "gsm8k" if canonical == "gsm8k_socratic" else canonical
    if detected is not None and detected != dataset:
        raise DataError(f"{path}: looks like {detected} data, not {name}")
    return MATH_LOADERS[dataset](path, split)
