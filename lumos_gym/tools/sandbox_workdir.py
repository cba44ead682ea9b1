"""The sandbox's working directories: one per call, named after its maker, locked, swept.

A call of :func:`lumos_gym.tools.sandbox.run_python` makes its directory with
:func:`_new_workdir` (named ``TEMP_PREFIX + "<pid>-<random>"`` and locked with ``flock`` while
the call runs); :func:`remove_stale_workdirs` removes those whose maker died before it could,
once per process and temporary folder (:func:`_sweep_once`).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
import threading

from lumos_gym.errors import SandboxError
from lumos_gym.tools.sandbox_records import TEMP_PREFIX

# A working directory of this scheme: TEMP_PREFIX, the pid of the process that made it, "-".
_WORKDIR_RE = re.compile(re.escape(TEMP_PREFIX) + r"([0-9]+)-[^/]+")


def _new_workdir() -> tuple[str, int]:
    """Make this call's working directory and lock it; return it and the lock's descriptor.

    The name holds this process's pid, and the lock (``flock`` on the directory) lasts until
    the call closes the descriptor or the process dies: :func:`remove_stale_workdirs` takes a
    directory only when both say its maker is gone. A directory that such a sweep (by a
    process that sees other pids, in another PID namespace) took before it was locked is
    noticed, and a new one is made.

    Raises:
        SandboxError: when no working directory can be made.
    """
    parent = tempfile.gettempdir()
    _sweep_once(parent)
    for _ in range(3):
        try:
            workdir = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=parent)
        except OSError as e:
            raise SandboxError(f"could not make the sandbox's working directory: {e}") from e
        try:
            lock = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # removed already
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(workdir).st_ino == os.fstat(lock).st_ino:
                return workdir, lock
        except OSError:
            pass  # being removed
        os.close(lock)
    raise SandboxError(f"could not make the sandbox's working directory in {parent}")


_sweep_lock = threading.Lock()
_swept: set[tuple[int, str]] = set()


def _sweep_once(parent: str) -> None:
    """Run :func:`remove_stale_workdirs` on ``parent`` once per process (the first call)."""
    key = (os.getpid(), parent)
    with _sweep_lock:
        if key in _swept:
            return
        _swept.add(key)
    remove_stale_workdirs(parent)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def remove_stale_workdirs(parent: str | None = None) -> list[str]:
    """Remove the working directories whose caller died before it could (e.g. by ``SIGKILL``).

    A directory is taken when its name says it was made by a process that no longer runs,
    the directory belongs to this user and nobody holds its lock (see
    :func:`~lumos_gym.tools.sandbox.run_python`'s
    working directory). Each process calls this once per temporary folder, before its first
    sandbox there; calling it again is harmless.

    Args:
        parent: the folder to clean; by default :func:`tempfile.gettempdir`.

    Returns:
        The directories removed.
    """
    parent = parent or tempfile.gettempdir()
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _WORKDIR_RE.fullmatch(name)
        if match is None or _pid_alive(int(match[1])):
            continue
        path = os.path.join(parent, name)
        try:
            lock = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            ours = os.fstat(lock).st_uid == os.geteuid()
            if ours:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            ours = False  # its maker still holds it (it runs in another PID namespace)
        if not ours:
            os.close(lock)
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(lock)
        if not os.path.lexists(path):
            removed.append(path)
    return removed
