"""The subgoal limits a results folder was played under, for folders made before run.json had them.

Since lumos-gym records them, ``run.json`` holds ``round_limits``: the most plan/ground (or
think/act) rounds of each task type and dataset that the agent ran with when ``--max-rounds``
was not given. A folder made before then lacks them, and ``leaderboard --validate`` refuses
it: a board cannot tell under which limits its rows were played (the web limits changed from
10 to the original's 5 and 15).

Where every pass that played the folder's episodes ran from one clean commit (``git.dirty``
false, the same commit in each session of a resumed run), those limits are a fact of that
commit's code. :func:`recover_round_limits` reads them from it: it extracts the commit's
``lumos_gym`` package (``git archive``) into a temporary folder, imports it in a child process
and prints the tables its agents read (``LUMOS_ROUNDS`` and, where the commit has it,
``DATASET_ROUNDS``). Nothing is guessed: a folder played at several commits or from a changed
checkout is refused, and the record says how it was made (``round_limits_recovered``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lumos_gym.errors import EvaluationError
from lumos_gym.gitinfo import git_provenance
from lumos_gym.jsonl import write_json_atomic

#: run in the child process, with the old commit's package first on the path
_READ_TABLES = """
import json, os, sys
import lumos_gym
from lumos_gym.agents import lumos
if not hasattr(lumos, "LUMOS_ROUNDS"):
    sys.exit("this commit's agents have no LUMOS_ROUNDS table")
print(json.dumps({"package": os.path.realpath(lumos_gym.__file__),
                  "task_types": dict(sorted(lumos.LUMOS_ROUNDS.items())),
                  "datasets": dict(sorted(getattr(lumos, "DATASET_ROUNDS", {}).items()))}))
"""


def played_commit(run: Mapping[str, Any]) -> str:
    """Return the one clean commit that played a run's episodes (``git`` and every session).

    Raises:
        EvaluationError: a pass without a recorded commit, from a changed checkout, or passes
            at different commits (the limits could have differed between them).
    """
    passes = [("run", run.get("git"))]
    passes += [(f"session {n}", s.get("git"))
               for n, s in enumerate(run.get("sessions") or (), 1) if isinstance(s, Mapping)]
    commits = set()
    for name, git in passes:
        if not isinstance(git, Mapping) or not git.get("commit"):
            raise EvaluationError(f"its {name} recorded no commit: the code that played it "
                                  "is unknown")
        if git.get("dirty") is None:
            raise EvaluationError(f"its {name} did not record whether its checkout differed "
                                  f"from commit {str(git['commit'])[:12]}")
        if git.get("dirty") is not False:
            raise EvaluationError(f"its {name} ran from a checkout that differed from commit "
                                  f"{str(git['commit'])[:12]}: its limits are not that commit's")
        commits.add(str(git["commit"]))
    if len(commits) > 1:
        raise EvaluationError(f"its episodes were played at {len(commits)} commits "
                              f"({', '.join(sorted(c[:12] for c in commits))})")
    return commits.pop()


def limits_at_commit(commit: str, *, repo: Path | None = None,
                     python: str = sys.executable) -> dict[str, dict[str, int]]:
    """Return ``{"task_types": ..., "datasets": ...}`` as the code of ``commit`` defines them.

    Args:
        commit: a commit of the git checkout ``repo``.
        repo: the checkout (default: the one this lumos-gym is imported from).
        python: the interpreter that imports the commit's package (its dependencies must be
            installed there; the plugins installed there are loaded as the commit loads them).

    Raises:
        EvaluationError: no checkout, an unknown commit, or a commit whose code cannot say.
    """
    root = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        raise EvaluationError(f"{root} is not a git checkout: the played commit's code cannot "
                              "be read (recover round limits from a clone of lumos-gym)")
    try:
        archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit,
                                  "lumos_gym"], capture_output=True, timeout=120, check=True)
    except subprocess.CalledProcessError as e:
        raise EvaluationError(f"commit {commit[:12]} is not in {root} "
                              f"({e.stderr.decode(errors='replace').strip()})") from None
    with tempfile.TemporaryDirectory(prefix="lumos-gym-limits-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            # the data filter (Python 3.11.4+) refuses links and paths out of the folder
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:  # pragma: no cover - older 3.11: the archive is our own commit's files
                tar.extractall(tmp)
        env = {**os.environ, "PYTHONPATH": tmp}
        done = subprocess.run([python, "-c", _READ_TABLES], capture_output=True, text=True,
                              cwd=tmp, env=env, timeout=300)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise EvaluationError(f"the code of commit {commit[:12]} could not say its round "
                                  f"limits: {last}")
        tables = json.loads(done.stdout.strip().splitlines()[-1])
        package = str(tables.pop("package", ""))
        if not package.startswith(str(Path(tmp).resolve())):
            raise EvaluationError("the child process imported another lumos_gym than the "
                                  f"commit's: {package}")
    return {k: {str(name): int(n) for name, n in tables[k].items()}
            for k in ("task_types", "datasets")}


def recover_round_limits(folder: str | Path, *, write: bool = True,
                         repo: Path | None = None) -> dict[str, Any] | None:
    """Record in a results folder's ``run.json`` the round limits of the code that played it.

    Returns the record written (``round_limits_recovered``, with the limits), or None when
    ``run.json`` already holds ``round_limits`` (nothing to do).

    Raises:
        EvaluationError: no run.json, or limits that cannot be known (:func:`played_commit`,
            :func:`limits_at_commit`).
    """
    path = Path(folder) / "run.json"
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EvaluationError(f"{path}: {e}") from None
    if "round_limits" in run:
        return None
    try:
        commit = played_commit(run)
    except EvaluationError as e:
        raise EvaluationError(f"{folder}: cannot recover its round limits: {e}") from None
    limits = limits_at_commit(commit, repo=repo)
    record = {"from_commit": commit, "by": git_provenance(),
              "how": "imported from the lumos_gym package of the commit that played every "
                     "episode (lumos-gym rescore --recover-round-limits)",
              "round_limits": limits}
    if write:
        run["round_limits"] = limits
        run["round_limits_recovered"] = {k: v for k, v in record.items()
                                         if k != "round_limits"}
        write_json_atomic(path, run)
    return record
