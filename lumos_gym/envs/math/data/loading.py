"""Loading a math dataset by name or by content, and the bundled sample files."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from lumos_gym.envs.math.data.asdiv import load_asdiv
from lumos_gym.envs.math.data.files import _key, _read_records, _read_text
from lumos_gym.envs.math.data.gsm8k import load_gsm8k
from lumos_gym.envs.math.data.svamp import load_svamp
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
"""The folder of the bundled sample files."""

SAMPLE_FILES: Mapping[str, str] = {
    "gsm8k": "gsm8k_sample.jsonl",
    "gsm8k_socratic": "gsm8k_socratic_sample.jsonl",
    "svamp": "svamp_sample.json",
    "asdiv": "asdiv_sample.xml",
}
"""Bundled sample file of each dataset name, relative to :data:`DATA_DIR`."""


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
