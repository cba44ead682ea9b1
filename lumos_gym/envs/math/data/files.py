"""Reading math data files: JSON, JSON lines or CSV records, their fields, IDs and splits.

Shared by the loaders of :mod:`.gsm8k`, :mod:`.svamp` and :mod:`.asdiv`; every problem is a
:class:`~lumos_gym.errors.DataError` naming the file and the record.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.envs.records import read_json_records, read_text
from lumos_gym.errors import DataError


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
