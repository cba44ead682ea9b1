"""Durable files: append-only JSON lines that survive a kill, and atomic whole-file writes.

Results, caches and conversion outputs all use these, so that a killed run loses at most the
line it was writing and a reader never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
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
