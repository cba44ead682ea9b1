"""Run untrusted Python in a separate, resource-limited process.

:func:`run_python` is the only entry point. Each call gets:

* **a separate interpreter**: ``sys.executable -s -P`` started with an argument list (never a
  shell string), in its own session and process group;
* **a fresh working directory**, which is also ``HOME`` and ``TMPDIR``, named
  ``lumos-sandbox-<pid>-<random>`` after the calling process and locked (``flock``) by it while
  the call runs; it is removed afterwards, and a folder whose caller was killed (``SIGKILL``
  leaves no chance to clean up) is removed by the first call of the next process that uses the
  same temporary folder (:func:`remove_stale_workdirs`);
* **a minimal environment** built from scratch: nothing of the parent's environment (API keys,
  tokens) is inherited;
* **rlimits**, set inside the child before the program runs, soft and hard alike, so that the
  program cannot raise them again: ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, ``RLIMIT_CORE = 0`` and, where it counts only the sandbox, ``RLIMIT_NPROC``;
* **a closed box**, with bubblewrap (``bwrap``, preferred) or else util-linux ``unshare``
  and a mount namespace, whichever works here (probed once per process, see
  :func:`isolation`): the program sees a read-only view of what Python needs (``/usr``, the
  ``/lib*`` and ``/bin`` links, Python's prefixes, a few files of ``/etc``), a minimal
  read-only ``/dev``, its own ``/proc`` (with ``/proc/keys`` and ``/proc/key-users`` hidden
  behind ``/dev/null``, so that no keyring of the host shows), and one writable folder, its
  working directory. No home, no checkout, no ``/etc/passwd``, no other folder to write to.
  With it come a network namespace with no interface up (``network=False``), a PID namespace
  whose every process the kernel kills when the sandbox's first process ends, and a user
  namespace, with every capability dropped, which takes away the host privileges of a root
  caller (it can no longer raise its rlimits or undo a read-only mount);
* **a bounded working directory** (see "Bounding what a program writes" below);
* **death with the caller**: when the calling process dies (even by ``SIGKILL``) the sandbox
  dies too; the PID namespace's first process watches the caller's end of a pipe, bwrap has
  ``--die-with-parent``, and a program outside a PID namespace gets ``PR_SET_PDEATHSIG``;
* **a wall-clock timeout** after which the whole process group, and with it the PID namespace,
  is killed with ``SIGKILL``;
* **bounded output**: each of stdout and stderr is kept up to ``max_output_bytes``; the rest is
  read and dropped, so a chatty program neither blocks nor fills our memory.

Why ``-s -P`` and not ``-I``: ``-I`` is ``-E -s -P``, and ``-E`` would make Python ignore
``PYTHONHASHSEED``, so that ``print({"a", "b"})`` could differ from run to run. The environment
is built from scratch here, so ``-E`` has nothing left to protect against.

Bounding the number of processes: ``RLIMIT_NPROC`` counts all processes of a user and the
kernel never applies it to uid 0. It is therefore set only for a non-root caller inside its own
user namespace, where the count is the sandbox's alone. In the PID namespace the sandbox's first
process also lowers the namespace's ``pid_max`` (Linux 6.14 and later, minimum 301), which caps
processes and threads for root as well. Without a PID namespace, the wall timeout is the only
bound, and children that leave the process group (``os.setsid``) can outlive it.

Bounding what a program writes, per isolation level (:attr:`Isolation.level`):

* ``bubblewrap`` and ``unshare`` (with a mount namespace): the working directory is a tmpfs of
  its own, in memory and never on the host's disk, of at most ``max_write_mb`` MiB
  (:data:`MAX_WRITE_MB`, 64, by default) and :data:`MAX_WORK_FILES` files and folders (an empty
  file costs the kernel about 1 KB that a size limit alone does not count). ``/dev/shm`` is a
  link to that folder, and nothing else is writable (``/dev`` included), so this bounds all the
  memory one call's files hold. A write past it fails inside the program (``OSError: [Errno
  28] No space left on device``), a normal failure of the program; the tmpfs is gone when the
  sandbox ends, even when its caller is killed. (bubblewrap mounts the tmpfs; the sandbox's
  first process sets its limits before the program starts, with ``CAP_SYS_ADMIN`` kept for that
  alone and then dropped with every other capability.)
* ``unshare`` without a mount namespace, and ``none``: the working directory is a folder of
  the host's temporary folder. ``RLIMIT_FSIZE`` bounds each file (``max_file_mb``), and the
  caller checks the folder every 50 ms while the program runs: past ``max_write_mb`` MiB or
  :data:`MAX_WORK_FILES` entries it kills the program (:attr:`SandboxResult.write_cap_exceeded`),
  so a fast writer may go some tens of MiB beyond the cap first. Files written elsewhere
  (``/dev/shm``, ``/tmp``) are not bounded beyond ``RLIMIT_FSIZE`` and not removed.

Each sandbox running at the same time holds up to its own cap: ``workers`` parallel sandboxes
hold up to ``workers * max_write_mb`` MiB.

What is **not** isolated: CPU time shared with other processes; and, where neither bwrap
nor unshare's mount namespace works, the filesystem (the program can then read, and write
with the caller's permissions, anything outside its directory, ``/dev/shm`` and the host's
``/proc/keys`` included), and, without namespaces at all, the network and other processes. A
one-line ``RuntimeWarning`` names what is missing, once per process.

Layout: this module holds :func:`run_python` (with the working of one call) and the choice of
isolation (:func:`isolation`, :func:`try_isolation`, :func:`isolation_record`); the records and
defaults are in :mod:`lumos_gym.tools.sandbox_records`, the box's setup (namespace flags, the
read-only view, bubblewrap's arguments, rlimits) in :mod:`lumos_gym.tools.sandbox_box`, the
child's boot program in :mod:`lumos_gym.tools.sandbox_boot`, the parent's handling of the
process (start, output, timeout, kill) in :mod:`lumos_gym.tools.sandbox_process` and the
working directories in :mod:`lumos_gym.tools.sandbox_workdir`. Every public name is
importable from here.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import threading
import warnings
from functools import lru_cache
from typing import Any

from lumos_gym.errors import SandboxError
from lumos_gym.tools.sandbox_boot import _BOOT
from lumos_gym.tools.sandbox_box import (
    _MOUNT_CANDIDATES,
    _PIVOT_ROOT,
    _bwrap_args,
    _bwrap_path,
    _first_working,
    _read_only_paths,
    _rlimits,
    _unshare_path,
    namespace_flags,
)
from lumos_gym.tools.sandbox_process import (
    _read_status,
    _signal_name,
    _start,
    _stdin_file,
    _watch,
    _WriteGuard,
)
from lumos_gym.tools.sandbox_records import BASE_ENV as BASE_ENV
from lumos_gym.tools.sandbox_records import (
    DEFAULT_MEMORY_MB,
    MAX_WORK_FILES,
    MAX_WRITE_MB,
    NO_ISOLATION,
    PROGRAM_FILE,
    Isolation,
    SandboxResult,
)
from lumos_gym.tools.sandbox_records import TEMP_PREFIX as TEMP_PREFIX
from lumos_gym.tools.sandbox_workdir import _new_workdir, remove_stale_workdirs

__all__ = [
    "DEFAULT_MEMORY_MB",
    "MAX_WORK_FILES",
    "MAX_WRITE_MB",
    "NO_ISOLATION",
    "Isolation",
    "SandboxResult",
    "isolation",
    "isolation_record",
    "namespace_flags",
    "remove_stale_workdirs",
    "run_python",
    "try_isolation",
]

# The kernel refuses a pid_max below 301 (RESERVED_PIDS + 1).
_MIN_PID_MAX = 301
_warn_lock = threading.Lock()
_warned: set[str] = set()


@lru_cache(maxsize=4)
def try_isolation(tool: str, network: bool) -> Isolation | None:
    """Return ``tool``'s isolation (``"bwrap"`` or ``"unshare"``) if it works here, else None.

    Probed once per process: a trivial program is run through it, so that a tool that is
    installed but refused (no user namespaces, a seccomp policy) does not count.
    """
    if tool == "bwrap":
        if _bwrap_path() is None:
            return None
        found = Isolation("bwrap", network=not network, processes=True, filesystem=True, user=True)
    elif tool == "unshare":
        flags = _first_working(_MOUNT_CANDIDATES[network])
        if not flags or platform.machine() not in _PIVOT_ROOT:
            return None
        found = Isolation(
            "unshare", flags, network="-n" in flags, processes=True, filesystem=True,
            user="-r" in flags,
        )
    else:
        raise ValueError(f"unknown isolation tool {tool!r}")
    try:
        probe = _run_in_workdir(
            "pass", None, box=found, network=network, rlimits=[], timeout=10.0,
            max_processes=_MIN_PID_MAX, max_output_bytes=4096, max_write_mb=MAX_WRITE_MB,
        )
    except SandboxError:
        return None
    return found if probe.ok else None


@lru_cache(maxsize=2)
def isolation(network: bool) -> Isolation:
    """Return the best isolation that works here for ``network`` (probed once, cached).

    Bubblewrap first, then ``unshare`` with a mount namespace (both close the filesystem),
    then ``unshare``'s namespaces alone (network and processes), then nothing.
    """
    for tool in ("bwrap", "unshare"):
        found = try_isolation(tool, network)
        if found is not None:
            return found
    flags = namespace_flags(network)
    if not flags:
        return NO_ISOLATION
    return Isolation(
        "unshare", flags, network="-n" in flags, processes="-p" in flags, user="-r" in flags
    )


def isolation_record(network: bool = False) -> dict[str, Any]:
    """Describe the sandbox that runs programs here, for a run's record (``run.json``).

    Cheap after the first call: :func:`isolation` probes once per process.

    Args:
        network: whether the programs may use the network (the Code tools' default is not).

    Returns:
        ``{"isolation": "bubblewrap" | "unshare" | "none", "filesystem": ..., "network": ...,
        "processes": ..., "max_write_mb": ..., "max_work_files": ...}``: the level, what it
        closes (see :class:`Isolation`) and the default bounds of a working directory.
    """
    box = isolation(network)
    return {
        "isolation": box.level,
        "filesystem": box.filesystem,
        "network": box.network,
        "processes": box.processes,
        "max_write_mb": MAX_WRITE_MB,
        "max_work_files": MAX_WORK_FILES,
    }


def _warn_unisolated(missing: list[str]) -> None:
    """Say once per process, in one line, what sandboxed code is not isolated from."""
    with _warn_lock:
        new = [name for name in missing if name not in _warned]
        if not new:
            return
        _warned.update(missing)
    warnings.warn(
        f"lumos_gym sandbox: sandboxed code is NOT isolated from {', '.join(missing)} here "
        "(neither bubblewrap nor unshare's namespaces work); install bubblewrap "
        "(apt-get install bubblewrap) or enable user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces)",
        RuntimeWarning,
        stacklevel=3,
    )


# Here, beside run_python, so that the tmpfs's nr_inodes and the caller's write guard
# read the same MAX_WORK_FILES (this module's).
def _tmpfs_options(max_write_mb: int) -> str:
    """The mount options of a working directory's tmpfs: its size and its number of inodes."""
    return f"size={max_write_mb << 20},nr_inodes={MAX_WORK_FILES + 1}"


def _fs_spec(network: bool, workdir: str, box: Isolation, max_write_mb: int) -> str:
    """The boot program's instructions for finishing the box (see ``_BOOT``)."""
    spec: dict[str, Any] = {"workdir": workdir, "tmpfs": _tmpfs_options(max_write_mb)}
    if box.tool == "unshare":
        spec["read_only"] = _read_only_paths(network)
        spec["pivot_root"] = _PIVOT_ROOT[platform.machine()]
    return json.dumps(spec)


def run_python(
    code: str,
    *,
    timeout: float = 5.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    cpu_seconds: int | None = None,
    max_file_mb: int = 16,
    max_open_files: int = 64,
    max_output_bytes: int = 65536,
    max_processes: int = 64,
    max_write_mb: int = MAX_WRITE_MB,
    network: bool = False,
    stdin: str | None = None,
) -> SandboxResult:
    """Run ``code`` as a Python program in a sandbox (see the module docstring) and wait.

    Args:
        code: the program text, run as ``__main__`` from ``main.py`` in a fresh directory.
        timeout: wall-clock seconds before the program, and everything it started, is killed.
        memory_mb: address-space limit (``RLIMIT_AS``) of each process, in MiB.
        cpu_seconds: CPU-time limit (``RLIMIT_CPU``); by default ``ceil(timeout) + 1``, a
            backstop behind the wall timeout. Exceeding it kills with ``SIGXCPU``.
        max_file_mb: largest file the program may write (``RLIMIT_FSIZE``), in MiB; Python
            ignores ``SIGXFSZ``, so a larger write raises ``OSError: File too large``.
        max_open_files: file descriptors per process (``RLIMIT_NOFILE``).
        max_output_bytes: bytes of stdout, and separately of stderr, kept.
        max_processes: processes and threads the program may run at once, where it can be
            enforced (see the module docstring; for root the kernel minimum of 300 applies).
        max_write_mb: the most the program's working directory (and ``/dev/shm``) may hold at
            once, in MiB: its tmpfs's size, or the caller's check without a tmpfs (see
            "Bounding what a program writes" in the module docstring).
        network: allow network access. When False the program runs in an empty network
            namespace if the OS allows one; otherwise it runs anyway, with a one-time warning.
        stdin: text fed to the program's standard input; by default it reads end-of-file.

    Returns:
        A :class:`SandboxResult`. A program that fails (non-zero exit, timeout, signal) is a
        result, not an exception.

    Raises:
        ValueError: for a non-positive limit.
        SandboxError: when the sandbox process cannot be started at all.
    """
    _check_limits(
        cpu_seconds,
        timeout=timeout,
        memory_mb=memory_mb,
        max_file_mb=max_file_mb,
        max_open_files=max_open_files,
        max_output_bytes=max_output_bytes,
        max_processes=max_processes,
        max_write_mb=max_write_mb,
    )
    box = isolation(network)
    missing = box.missing(network)
    if missing:
        _warn_unisolated(missing)
    # RLIMIT_NPROC counts per user; only a user namespace of our own makes that the sandbox.
    nproc = max_processes if box.user and os.geteuid() != 0 else None
    rlimits = _rlimits(
        timeout=timeout,
        memory_mb=memory_mb,
        cpu_seconds=cpu_seconds,
        max_file_mb=max_file_mb,
        max_open_files=max_open_files,
        nproc=nproc,
    )
    return _run_in_workdir(
        code,
        stdin,
        box=box,
        network=network,
        rlimits=rlimits,
        timeout=timeout,
        max_processes=max_processes,
        max_output_bytes=max_output_bytes,
        max_write_mb=max_write_mb,
    )


def _check_limits(cpu_seconds: int | None, **limits: float) -> None:
    """Refuse a limit that is not positive (``cpu_seconds`` may be None: the default)."""
    for name, value in limits.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    if cpu_seconds is not None and cpu_seconds <= 0:
        raise ValueError(f"cpu_seconds must be positive, got {cpu_seconds!r}")


def _run_in_workdir(
    code: str,
    stdin: str | None,
    *,
    box: Isolation,
    network: bool,
    rlimits: list[str],
    timeout: float,
    max_processes: int,
    max_output_bytes: int,
    max_write_mb: int,
) -> SandboxResult:
    """Run ``code`` from a fresh working directory, report how it ended, and clean up.

    With a PID namespace the program's wait status comes back on a pipe from the namespace's
    first process, which cannot die of the program's signal itself.
    """
    pidns = box.processes
    workdir, lock = _new_workdir()
    status_r = status_w = program_fd = -1
    stdin_file = None
    try:
        program = os.path.join(workdir, PROGRAM_FILE)
        with open(program, "w", encoding="utf-8") as f:
            f.write(code)
        if box.tool == "bwrap":
            program_fd = os.open(program, os.O_RDONLY)  # bwrap copies it into the tmpfs
        if pidns:
            status_r, status_w = os.pipe()
            os.set_blocking(status_r, False)
        stdin_file = _stdin_file(stdin)
        pid_max = max(max_processes + 1, _MIN_PID_MAX) if pidns else 0
        boot_args = [str(status_w), str(os.getpid()), str(pid_max)]
        command = _command(box, network, workdir, boot_args, program_fd, max_write_mb)
        guard = None if box.filesystem else _WriteGuard(
            workdir, max_write_mb << 20, MAX_WORK_FILES
        )
        proc, start = _start(
            [*command, *rlimits], stdin_file, workdir, [fd for fd in (status_w, program_fd)
                                                         if fd >= 0]
        )
        for fd in (status_w, program_fd):
            if fd >= 0:
                os.close(fd)
        status_w = program_fd = -1
        timed_out, duration, stdout, stderr = _watch(
            proc, start, timeout, max_output_bytes, pidns, guard
        )
        status = _read_status(status_r) if status_r >= 0 and not timed_out else None
        returncode = os.waitstatus_to_exitcode(status) if status is not None else proc.returncode
        return SandboxResult(
            stdout=stdout.text(),
            stderr=stderr.text(),
            returncode=returncode,
            timed_out=timed_out,
            signal=_signal_name(-returncode) if returncode < 0 else None,
            duration_s=duration,
            network_isolated=box.network,
            truncated=stdout.dropped or stderr.dropped,
            write_cap_exceeded=guard is not None and guard.tripped,
        )
    finally:
        for fd in (status_r, status_w, program_fd):
            if fd >= 0:
                os.close(fd)
        if stdin_file is not None:
            stdin_file.close()
        shutil.rmtree(workdir, ignore_errors=True)
        os.close(lock)  # after the removal: the folder is never unlocked while it is there


def _command(
    box: Isolation, network: bool, workdir: str, boot_args: list[str], program_fd: int,
    max_write_mb: int,
) -> list[str]:
    """The argument list up to the rlimits: the isolating tool's, then the boot program's.

    ``boot_args`` are the boot program's STATUS_FD, PARENT and PID_MAX; FS follows them.
    ``program_fd`` is open on the program file (bwrap copies it into the box).
    """
    fs = "-"
    if box.tool == "bwrap":
        prefix = _bwrap_args(network, workdir, program_fd)
        fs = _fs_spec(network, workdir, box, max_write_mb)
    elif box.tool == "unshare":
        prefix = [_unshare_path() or "unshare", *box.flags, "--"]
        if box.filesystem:
            fs = _fs_spec(network, workdir, box, max_write_mb)
    else:
        prefix = []
    return [*prefix, sys.executable, "-s", "-P", "-c", _BOOT, *boot_args, fs]
