"""Durable files: append-only JSON lines that survive a kill, and atomic whole-file writes.

Results, caches and conversion outputs all use these, so that a killed run loses at most the
line it was writing and a reader never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def drop_partial_line(path: Path) -> None:
    """Cut a JSON-lines file after its last newline (the half-written line of a killed run)."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        data = f.read()
        if not data or data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


def append_jsonl(f: IO[str], record: Mapping[str, Any]) -> None:
    """Write one JSON line to the open text file ``f``, then flush and fsync it."""
    f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    f.flush()
    os.fsync(f.fileno())


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[IO[str]]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically."""
    with atomic_writer(path) as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")


def read_json_object(path: str | Path) -> dict[str, Any] | None:
    """Return the JSON object in ``path``, or None when it is missing, unreadable or not one."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def publish_folder(dest: str | Path, fill: Callable[[Path], bool]) -> bool:
    """Make the folder ``dest`` in one rename: ``fill`` writes it in a temporary sibling first.

    Caches that several processes may fill at once (generated games, converted models) use
    this: the first rename wins and a later one drops its copy.

    Args:
        dest: the folder to make.
        fill: writes the folder's files into the staging folder it is given; returns False to
            give up (nothing is published).

    Returns:
        True when ``dest`` now exists (ours, or another process's published first); False when
        ``fill`` gave up. The staging folder never outlives the call.

    Raises:
        OSError: the rename failed and ``dest`` does not exist.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name[:32]}.", dir=dest.parent))
    try:
        if not fill(staging):
            return False
        try:
            os.rename(staging, dest)
        except OSError:
            if not dest.exists():
                raise
        return True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def folder_problem(folder: str | Path) -> str | None:
    """Say why files cannot be written in ``folder`` (made if missing), or None when they can.

    Checked before a long run starts, so that a bad output folder fails at once: a file at its
    place or on its way (``--out results.txt/run``), or a nearest existing folder that is not
    writable. Other failures (a full disk) still surface as OSError when writing.
    """
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def cache_root() -> Path:
    """Return the lumos-gym cache folder (``$LUMOS_GYM_CACHE`` or ``~/.cache/lumos-gym``)."""
    return Path(os.environ.get("LUMOS_GYM_CACHE", "~/.cache/lumos-gym")).expanduser()
