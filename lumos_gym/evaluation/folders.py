"""Where a run writes when no ``--out`` is given, and the ``results/latest`` pointer.

Each run without ``--out`` gets a folder of its own, :func:`default_out`:
``results/<agent>-<suite or envs>-<YYYYmmdd-HHMMSS>`` (``-2``, ``-3``... when two runs start
in the same second), so that runs never collide. ``results/latest`` then names the newest of
them (:func:`point_latest`): a relative symlink where the platform allows one, else a text
file holding the folder's name; :func:`follow_latest` reads either form, so that ``evaluate
--resume`` with no ``--out`` continues that run (a new one when there is no ``latest``) and
``leaderboard results/latest`` shows it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: The folder that runs without ``--out`` write into.
RESULTS_ROOT = Path("results")
#: The name of the pointer to the newest run in :data:`RESULTS_ROOT`.
LATEST = "latest"


def _slug(text: str) -> str:
    """``text`` as a piece of a folder name: letters, digits and ``.+-_``; others become ``-``."""
    return re.sub(r"[^A-Za-z0-9.+_-]+", "-", text).strip("-") or "run"


def run_label(suite: str | None, envs: Sequence[str]) -> str:
    """What a run covers, for its folder's name: the suite's name, else its envs' short ids.

    More than three envs are named by the first two and how many more (``GSM8K-v0+SVAMP-v0+3``).
    """
    if suite:
        return suite
    names = [env.rpartition(":")[2].removeprefix("lumos/") for env in envs]
    if len(names) > 3:
        names = [*names[:2], str(len(names) - 2)]
    return "+".join(names) or "envs"


def default_out(
    agent: str, label: str, *, root: Path = RESULTS_ROOT, now: time.struct_time | None = None
) -> Path:
    """A new folder ``root/<agent>-<label>-<YYYYmmdd-HHMMSS>``, numbered if that one is taken."""
    stamp = time.strftime("%Y%m%d-%H%M%S", now or time.localtime())
    base = f"{_slug(agent)}-{_slug(label)}-{stamp}"
    path, n = root / base, 2
    while path.exists() or path.is_symlink():
        path, n = root / f"{base}-{n}", n + 1
    return path


def point_latest(folder: Path) -> Path | None:
    """Make ``latest`` beside ``folder`` name it; return the pointer (None if it cannot be).

    The pointer is replaced in one step (a new link or file moved over the old one). A real
    folder called ``latest`` (a run's ``--out``) is left alone, with a warning.
    """
    root = folder.parent
    pointer = root / LATEST
    if pointer.is_dir() and not pointer.is_symlink():
        print(f"warning: {pointer} is a results folder; not pointing it at {folder}",
              file=sys.stderr)
        return None
    temporary = root / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    try:
        os.symlink(folder.name, temporary, target_is_directory=True)
    except (OSError, NotImplementedError):  # no symlinks here (Windows without the right)
        temporary.write_text(folder.name + "\n", encoding="utf-8")
    os.replace(temporary, pointer)
    return pointer


def follow_latest(path: Path) -> Path:
    """The folder a ``latest`` pointer (a symlink or a text file) names; other paths as they are."""
    if path.name != LATEST:
        return path
    if path.is_symlink():
        return path.parent / os.readlink(path)
    if path.is_file():
        named = path.read_text(encoding="utf-8").strip()
        if named and "/" not in named and "\\" not in named:
            return path.parent / named
    return path


def is_latest_link(path: Path) -> bool:
    """Whether ``path`` is a ``latest`` symlink (the same run as the folder it names)."""
    return path.name == LATEST and path.is_symlink()
