"""The SVAMP loader (``SVAMP.json`` and its variants)."""

from __future__ import annotations

import re
from pathlib import Path

from lumos_gym.envs.math.data.calc import _PURE_NUMBER, _is_infix_arithmetic, calculator_expression
from lumos_gym.envs.math.data.files import (
    _check_unique,
    _join,
    _read_records,
    _split_path,
    _text_field,
)
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.scoring.answers import normalize_number

_SVAMP_EXPECTED = "SVAMP JSON records with Body/Question/Equation/Answer"

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
