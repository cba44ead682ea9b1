"""The shared helpers of the complex-QA loaders: reading files and validating records.

A data file (or a member of a zip archive) is read as text (:func:`_read_source`), parsed
as a JSON list, object or JSON lines (:func:`_records`), and each record's fields are read
through :class:`_Fields`, whose every problem is a :class:`~lumos_gym.errors.DataError`
naming the file and the record. :func:`answer_type` and :func:`_clean` normalise answers
and text for the task records and the gold plans.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.errors import DataError

# ---------------------------------------------------------------------------------------------
# Reading files


@dataclass(frozen=True)
class _Source:
    """The text of a data file (or of one member of a zip archive) and its name for errors."""

    name: str
    text: str


@dataclass(frozen=True)
class _Record:
    """One JSON object of a data file and where it was found."""

    index: int
    where: str
    data: Mapping[str, Any]


def _split_name(split: str) -> str:
    if not isinstance(split, str) or not split or "/" in split:
        raise ValueError(f"split must be a non-empty name without '/', got {split!r}")
    return split


def _decode(name: str, raw: bytes, expected: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not UTF-8 text (byte {e.start}); expected {expected}") from e


def _zip_member(path: Path, split: str, members: Mapping[str, str], expected: str) -> _Source:
    wanted = members.get(split)
    if wanted is None:
        known = ", ".join(sorted(members)) or "none"
        raise DataError(
            f"{path}: a zip archive, and split {split!r} names none of its files; "
            f"splits: {known}; expected {expected}"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            names = [
                n
                for n in archive.namelist()
                if not n.endswith("/")
                and "__MACOSX" not in n
                and not n.rsplit("/", 1)[-1].startswith("._")
            ]
            found = sorted(n for n in names if n.rsplit("/", 1)[-1] == wanted)
            if not found:
                listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                raise DataError(f"{path}: the archive has no {wanted} (it holds: {listed})")
            raw = archive.read(found[0])
    except zipfile.BadZipFile as e:
        raise DataError(f"{path}: a damaged zip archive ({e}); expected {expected}") from e
    name = f"{path}[{found[0]}]"
    return _Source(name, _decode(name, raw, expected))


def _read_source(
    path: Path, split: str, members: Mapping[str, str], expected: str
) -> _Source:
    """Read a data file, or the member of a zip archive that holds ``split``."""
    if not path.exists():
        raise DataError(f"{path}: file not found; expected {expected}")
    if not path.is_file():
        raise DataError(f"{path}: not a file; expected {expected}")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic == b"PK\x03\x04":
            return _zip_member(path, split, members, expected)
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror}); expected {expected}") from e
    if raw.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        raise DataError(
            f"{path}: an HTML page, not the data file (a download that met a confirmation or "
            f"sign-in page?); fetch the file in a browser; expected {expected}"
        )
    return _Source(str(path), _decode(str(path), raw, expected))


def _parse_json(src: _Source, expected: str) -> list[_Record] | dict[str, Any]:
    """Parse a whole-file JSON list (or object), or JSON lines (blank lines skipped)."""
    text = src.text
    if not text.strip():
        raise DataError(f"{src.name}: the file is empty; expected {expected}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg != "Extra data":
            raise DataError(
                f"{src.name}: bad JSON at line {e.lineno}, column {e.colno} ({e.msg}); "
                f"expected {expected}"
            ) from e
        return _json_lines(src, expected)
    if isinstance(value, dict):
        return value
    if not isinstance(value, list):
        raise DataError(
            f"{src.name}: the file holds a JSON {type(value).__name__}; expected {expected}"
        )
    records = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise DataError(
                f"{src.name}: record {i} is a {type(item).__name__}, not a JSON object; "
                f"expected {expected}"
            )
        records.append(_Record(i, f"record {i}", item))
    return records


def _json_lines(src: _Source, expected: str) -> list[_Record]:
    records: list[_Record] = []
    # split on newlines only: str.splitlines would also cut at U+2028 inside a JSON string
    for lineno, line in enumerate(src.text.split("\n"), start=1):
        if not line.strip():
            continue
        i = len(records)
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{src.name}: record {i} (line {lineno}): bad JSON ({e.msg}); expected "
                f"{expected}, one JSON object per line"
            ) from e
        if not isinstance(item, dict):
            raise DataError(
                f"{src.name}: record {i} (line {lineno}) is a {type(item).__name__}, not a "
                f"JSON object; expected {expected}"
            )
        records.append(_Record(i, f"record {i} (line {lineno})", item))
    return records


def _records(src: _Source, expected: str) -> list[_Record]:
    return _as_records(src, _parse_json(src, expected), expected)


def _as_records(
    src: _Source, parsed: list[_Record] | dict[str, Any], expected: str
) -> list[_Record]:
    """The records of a parsed file; one JSON object is a one-line JSON-lines file."""
    if isinstance(parsed, dict):
        return [_Record(0, "record 0", parsed)]
    if not parsed:
        raise DataError(f"{src.name}: no records found; expected {expected}")
    return parsed


class _Fields:
    """Typed access to one record's fields; every problem is a DataError naming the record."""

    def __init__(self, src: _Source, rec: _Record, expected: str) -> None:
        self.src = src
        self.rec = rec
        self.expected = expected

    def error(self, message: str) -> DataError:
        return DataError(f"{self.src.name}: {self.rec.where}: {message}; expected {self.expected}")

    def present(self, key: str) -> bool:
        return self.rec.data.get(key) is not None

    def text(self, key: str, *, required: bool = True, nonempty: bool = True) -> str | None:
        value = self.rec.data.get(key)
        if value is None:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(f"field {key!r} is a {type(value).__name__}, not text")
        text = str(value)
        if nonempty and required and not text.strip():
            raise self.error(f"field {key!r} is empty")
        return text

    def boolean(self, key: str, *, required: bool = True) -> bool | None:
        value = self.rec.data.get(key)
        if value is None:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        if not isinstance(value, bool):
            raise self.error(f"field {key!r} is a {type(value).__name__}, not true/false")
        return value

    def items(self, key: str, *, required: bool = False) -> list[Any] | None:
        value = self.rec.data.get(key)
        if value is None:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        if not isinstance(value, list):
            raise self.error(f"field {key!r} is a {type(value).__name__}, not a list")
        return value

    def texts(self, key: str, *, required: bool = False) -> list[str] | None:
        items = self.items(key, required=required)
        if items is None:
            return None
        for j, item in enumerate(items):
            if not isinstance(item, str):
                raise self.error(f"{key}[{j}] is a {type(item).__name__}, not text")
        return items


def _gold_answer(f: _Fields, value: str | None, *, dataset: str, unlabeled: bool) -> str:
    if value is not None and value.strip():
        return value.strip()
    if unlabeled:
        return ""
    raise f.error(
        f"no gold 'answer' (an unlabeled {dataset} file, such as a test split?); pass "
        "unlabeled=True (qa_source(..., unlabeled=True)) to load its questions with empty "
        "answers"
    )


def _check_unique(src: _Source, ids: Iterable[str]) -> None:
    seen: set[str] = set()
    for task_id in ids:
        if task_id in seen:
            raise DataError(f"{src.name}: duplicate id {task_id!r}; expected unique ids")
        seen.add(task_id)


def _titled_paragraphs(f: _Fields, key: str) -> list[tuple[str, list[str]]]:
    """Validate a HotpotQA-style ``[[title, [sentences]]]`` field."""
    out = []
    for j, item in enumerate(f.items(key) or []):
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], list)
            and all(isinstance(s, str) for s in item[1])
        )
        if not ok:
            raise f.error(f"{key}[{j}] is not [title, [sentences]]")
        out.append((item[0], item[1]))
    return out


def _supporting_facts(f: _Fields) -> list[tuple[str, int]]:
    out = []
    for j, item in enumerate(f.items("supporting_facts") or []):
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        )
        if not ok:
            raise f.error(f"supporting_facts[{j}] is not [title, sentence index]")
        out.append((item[0], item[1]))
    return out


def _join_sentences(sentences: Sequence[str]) -> str:
    """Join sentences as written, adding one space only where neither side has one."""
    text = ""
    for sentence in sentences:
        if text and sentence and not text[-1].isspace() and not sentence[0].isspace():
            text += " "
        text += sentence
    return text


# ---------------------------------------------------------------------------------------------
# Normalising

_NUMBER = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")


def answer_type(answer: str) -> str:
    """Classify a gold answer as ``"yes/no"``, ``"number"`` or ``"span"``.

    Args:
        answer: the answer text.

    Returns:
        ``"yes/no"`` for yes or no (any case, a final ``.`` ignored), ``"number"`` for one
        number (thousands commas, a sign, ``$`` or ``%`` allowed), else ``"span"``.
    """
    text = answer.strip().rstrip(".").strip()
    if text.lower() in ("yes", "no"):
        return "yes/no"
    if _NUMBER.fullmatch(text):
        return "number"
    return "span"


def _clean(text: object) -> str:
    """One line of text: runs of whitespace (newlines included) become single spaces."""
    return " ".join(str(text).split())
