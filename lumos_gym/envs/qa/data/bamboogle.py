"""Bamboogle: the loader of its sheet's CSV export (or JSON records), and its hub rows.

See :mod:`lumos_gym.envs.qa.data` for the formats read.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lumos_gym.envs.qa.data.common import _read_source, _Record, _records, _Source, _split_name
from lumos_gym.envs.qa.data.plans import _make_task
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError

_BAMBOOGLE_EXPECTED = "Bamboogle CSV with Question and Answer columns (or JSON records)"


def _csv_records(src: _Source, expected: str) -> list[_Record]:
    try:
        reader = csv.DictReader(io.StringIO(src.text, newline=""))
        rows = []
        for row in reader:
            values = [v for v in row.values() if isinstance(v, str)]
            if not any(v.strip() for v in values):
                continue
            i = len(rows)
            rows.append(_Record(i, f"row {i} (line {reader.line_num})", row))
    except csv.Error as e:
        raise DataError(f"{src.name}: bad CSV ({e}); expected {expected}") from e
    if not rows:
        raise DataError(f"{src.name}: no rows under the CSV header; expected {expected}")
    return rows


def _field(data: Mapping[str, Any], *names: str) -> Any:
    keys = {str(k).strip().lower(): k for k in data if k is not None}
    for name in names:
        key = keys.get(name)
        if key is not None and data[key] is not None:
            return data[key]
    return None


def load_bamboogle(path: str | Path, split: str = "test", *, unlabeled: bool = False) -> list[Task]:
    """Load Bamboogle: the sheet's CSV export, or JSON (lines) records.

    Args:
        path: a ``.csv`` with ``Question`` and ``Answer`` columns (any case; other columns are
            kept), or JSON records with ``question`` and ``answer`` (or a ``golden_answers``
            list whose first item is the answer and the rest aliases).
        split: the split name used in task ids (``bamboogle/{split}/{position}``).
        unlabeled: accept rows without an answer.

    Returns:
        One task per non-blank row, in file order, without documents.

    Raises:
        DataError: missing or empty file, bad CSV or JSON, a row without question, or a row
            without answer (unless ``unlabeled``).
    """
    path, split = Path(path), _split_name(split)
    exp = _BAMBOOGLE_EXPECTED
    src = _read_source(path, split, {}, exp)
    if not src.text.strip():
        raise DataError(f"{src.name}: the file is empty; expected {exp}")
    is_json = src.text.lstrip()[:1] in ("[", "{")
    rows = _records(src, exp) if is_json else _csv_records(src, exp)
    tasks = []
    for rec in rows:
        question = _field(rec.data, "question")
        if not isinstance(question, str) or not question.strip():
            raise DataError(
                f"{src.name}: {rec.where}: no text in column 'Question'; expected {exp}"
            )
        golden = _field(rec.data, "golden_answers")
        answer = _field(rec.data, "answer")
        aliases: list[str] = []
        if answer is None and isinstance(golden, list) and golden:
            answer, aliases = golden[0], [str(a) for a in golden[1:]]
        if answer is not None and not isinstance(answer, str | int | float):
            raise DataError(f"{src.name}: {rec.where}: the answer is not text; expected {exp}")
        text = str(answer).strip() if answer is not None else ""
        if not text and not unlabeled:
            raise DataError(
                f"{src.name}: {rec.where}: no text in column 'Answer'; expected {exp} (pass "
                "unlabeled=True to load questions without answers)"
            )
        raw = {
            k: v
            for k, v in rec.data.items()
            if str(k).strip().lower() not in ("question", "answer")
        }
        tasks.append(
            _make_task("bamboogle", split, str(rec.index), question.strip(), text, raw=raw,
                       documents=[], aliases=aliases, labeled=bool(text))
        )
    return tasks


def write_bamboogle_hub_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Write hub rows of ``chiayewken/bamboogle`` (``Question``, ``Answer``) as JSON lines."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
