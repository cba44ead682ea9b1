"""The commit of the lumos-gym checkout that runs, for the provenance of results and cards."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any


def git_provenance() -> dict[str, Any] | None:
    """Return the commit of this checkout and whether it differs from it (None outside git)."""
    return _git()


@functools.cache
def _git() -> dict[str, Any] | None:
    """Return the commit (and whether the code differs from it) of a git checkout, else None.

    Read once per process: a long run (``improve``, a queue of evaluations, a training run)
    records the code it imported, not a commit made in the checkout while it ran. ``dirty``
    says whether a tracked file outside ``leaderboards/`` differs from the commit: the
    published results are data a run writes (``evaluate --out leaderboards/...``, ``rescore``),
    not the code that ran, and a rewrite of one of them made every later run of a board count
    as dirty.
    """
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
            timeout=10, check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
             ".", ":(exclude)leaderboards"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit or None, "dirty": bool(status.strip())}
