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
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import platform
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any

from lumos_gym.errors import SandboxError

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

#: The default address-space limit (``RLIMIT_AS``) of a sandboxed process, in MiB. It counts
#: memory mapped, not memory used: a program that maps more, even without touching it (a
#: 600 MB ``mmap``), fails with ``MemoryError``. Callers take a ``memory_mb`` option to raise it.
DEFAULT_MEMORY_MB = 512

#: The most a sandboxed program may hold in its working directory (and ``/dev/shm``, a link to
#: it) at once, in MiB: the size of its tmpfs, or, without one, what the caller's check allows
#: (see "Bounding what a program writes" in the module docstring). Callers take a
#: ``max_write_mb`` option to change it.
MAX_WRITE_MB = 64

#: The most files and folders a sandboxed program's working directory may hold (its tmpfs's
#: ``nr_inodes``, less the folder itself; or what the caller's check allows, without one).
MAX_WORK_FILES = 4096

#: The whole environment of a sandboxed program.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

#: Name of the program file inside the sandbox's working directory.
PROGRAM_FILE = "main.py"

#: Prefix of the temporary working directories (tests look for leftovers by it). A directory is
#: named ``TEMP_PREFIX + "<pid>-<random>"``, after the process that made it.
TEMP_PREFIX = "lumos-sandbox-"

# The kernel refuses a pid_max below 301 (RESERVED_PIDS + 1).
_MIN_PID_MAX = 301
_READ_CHUNK = 65536
_POLL_S = 0.05
_GRACE_S = 0.2
# How often the caller checks the size of a working directory that no tmpfs bounds.
_CHECK_S = 0.05
# A working directory of this scheme: TEMP_PREFIX, the pid of the process that made it, "-".
_WORKDIR_RE = re.compile(re.escape(TEMP_PREFIX) + r"([0-9]+)-[^/]+")

# Runs in the child as `python -s -P -c _BOOT STATUS_FD PARENT PID_MAX FS NAME:SOFT:HARD...`.
# As the first process (pid 1) of a fresh PID namespace it finishes the box when FS is a JSON
# spec: with "read_only" (the unshare path) it builds the whole view of the filesystem, with a
# tmpfs as the working directory; without (bwrap built the view) it sets the limits of the
# tmpfs bwrap mounted as the working directory. It then lowers pid_max, drops its capabilities,
# forks the program and reports the program's wait status on STATUS_FD, since pid 1 cannot
# die of its own signal. It also ends the namespace when the caller dies: the caller holds the
# only read end of STATUS_FD, so a POLLERR there means it is gone. Outside a PID namespace (FS
# is then "-") the program itself asks for SIGKILL on the death of its parent, PARENT.
# The program process closes STATUS_FD, sets the rlimits and runs main.py as __main__.
_BOOT = """\
import os, sys

def _supervise(child, status_fd):
    status = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            break
    try:
        os.write(status_fd, str(status).encode())
    except OSError:
        pass
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)

def _lifeline(status_fd):
    import select, threading
    def watch():
        poll = select.poll()
        poll.register(status_fd, 0)
        while not poll.poll():
            pass
        os._exit(137)
    threading.Thread(target=watch, daemon=True).start()

def _die_with_parent(parent):
    import ctypes, signal
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(137)

def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def call(name, *args):
        if getattr(libc, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, name + ": " + os.strerror(err))
    return ctypes, libc, call

def _mount(src, dst, fstype, flags, data=None):
    ctypes, libc, call = _libc()
    enc = [None if s is None else s.encode() for s in (src, dst, fstype, data)]
    call("mount", enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3])

def _close_fs(spec):
    import json
    spec = json.loads(spec)
    if "read_only" not in spec:
        _mount(None, spec["workdir"], None, 32 | 2 | 4, spec["tmpfs"])
        return
    ctypes, libc, call = _libc()
    root, kept_flags = spec["workdir"], 2 | 4 | 8 | 1024 | 2048
    def bind(src, dst, read_only):
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "a").close()
        _mount(src, dst, None, 4096 | (16384 if read_only else 0))
        if read_only:
            found = os.statvfs(src).f_flag
            extra = (found & kept_flags) | (2097152 if found & 4096 else 0)
            _mount(None, dst, None, 4096 | 32 | 1 | 2 | extra)
    with open("main.py", "rb") as f:
        program = f.read()
    _mount(None, "/", None, 16384 | 262144)
    _mount("tmpfs", root, "tmpfs", 2 | 4, "mode=0755")
    for path in spec["read_only"]:
        if os.path.islink(path):
            os.makedirs(os.path.dirname(root + path), exist_ok=True)
            os.symlink(os.readlink(path), root + path)
        elif os.path.exists(path):
            bind(path, root + path, True)
    for name in ("null", "zero", "full", "random", "urandom"):
        bind("/dev/" + name, root + "/dev/" + name, False)
    os.symlink(root, root + "/dev/shm")
    os.makedirs(root + root, exist_ok=True)
    _mount("tmpfs", root + root, "tmpfs", 2 | 4, spec["tmpfs"] + ",mode=0700")
    with open(root + root + "/main.py", "wb") as f:
        f.write(program)
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", 2 | 4 | 8)
    for name in ("keys", "key-users"):
        if os.path.exists(root + "/proc/" + name):
            _mount("/dev/null", root + "/proc/" + name, None, 4096)
    os.chdir(root)
    call("syscall", spec["pivot_root"], b".", b".")
    call("umount2", b".", 2)
    _mount(None, "/", None, 4096 | 32 | 1 | 2 | 4)
    os.chdir(root)

def _drop_capabilities():
    ctypes, libc, call = _libc()
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)
    call("capset", (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)())
    call("prctl", 38, 1, 0, 0, 0)

def _limit(spec):
    import resource
    name, soft, hard = spec.split(":")
    which = getattr(resource, "RLIMIT_" + name)
    soft, hard = int(soft), int(hard)
    current = resource.getrlimit(which)[1]
    if current != resource.RLIM_INFINITY:
        hard = min(hard, current)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))

def _main():
    status_fd, parent, pid_max = (int(arg) for arg in sys.argv[1:4])
    fs = sys.argv[4]
    if os.getpid() == 1:
        if fs != "-":
            _close_fs(fs)
        if pid_max:
            try:
                with open("/proc/sys/kernel/pid_max", "w") as f:
                    f.write(str(pid_max))
            except OSError:
                pass
        if fs != "-":
            _drop_capabilities()
        child = os.fork()
        if child:
            _lifeline(status_fd)
            _supervise(child, status_fd)
    else:
        _die_with_parent(parent)
    if status_fd >= 0:
        os.close(status_fd)
    for spec in sys.argv[5:]:
        _limit(spec)
    sys.argv = ["main.py"]
    with open("main.py", "rb") as f:
        source = f.read()
    scope = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
    try:
        exec(compile(source, "main.py", "exec"), scope)
    except SystemExit:
        raise
    except BaseException as e:
        import traceback
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        sys.exit(1)

_main()
"""


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one :func:`run_python` call.

    Attributes:
        stdout: the program's standard output, decoded as UTF-8 (undecodable bytes replaced),
            cut at ``max_output_bytes``.
        stderr: the same for standard error (tracebacks end up here).
        returncode: the program's exit status; ``-N`` when signal ``N`` killed it.
        timed_out: True when the wall-clock timeout killed the program.
        signal: the name of the signal that ended the program (``"SIGKILL"``, ``"SIGXCPU"``),
            or None when it exited by itself.
        duration_s: wall-clock seconds from start to end, including process start-up.
        network_isolated: True when the program ran in a network namespace with no interface
            up, i.e. it could reach no network at all, not even the host's loopback.
        truncated: True when stdout or stderr was longer than ``max_output_bytes``.
        write_cap_exceeded: True when the caller killed the program because its working
            directory held more than ``max_write_mb`` MiB or :data:`MAX_WORK_FILES` entries
            (only where no tmpfs bounds the directory; with one, the write past the cap fails
            inside the program instead).
    """

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool
    signal: str | None
    duration_s: float
    network_isolated: bool
    truncated: bool = False
    write_cap_exceeded: bool = False

    @property
    def ok(self) -> bool:
        """Return True when the program exited with status 0 in time."""
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class Isolation:
    """How a sandboxed program is isolated here: the tool that does it and what it closes.

    Attributes:
        tool: ``"bwrap"`` (bubblewrap), ``"unshare"`` (util-linux) or ``""`` (nothing).
        flags: ``unshare``'s flags (``"unshare"`` only).
        network: the network is cut (an empty network namespace).
        processes: the program has a PID namespace of its own: it sees no other process, and
            the kernel ends all of its processes with its first.
        filesystem: the program sees a read-only view of what Python needs and one writable
            folder, its working directory, a size-limited tmpfs of its own; no home, no
            checkout, no ``/etc/passwd``, no keyring in ``/proc/keys``.
        user: the program runs in a user namespace of its own.
    """

    tool: str = ""
    flags: tuple[str, ...] = ()
    network: bool = False
    processes: bool = False
    filesystem: bool = False
    user: bool = False

    @property
    def level(self) -> str:
        """Name the isolation: ``"bubblewrap"``, ``"unshare"`` or ``"none"``."""
        return {"bwrap": "bubblewrap", "unshare": "unshare"}.get(self.tool, "none")

    def missing(self, network: bool) -> list[str]:
        """Name what a program run with ``network`` is not isolated from."""
        names = [] if self.filesystem else ["the filesystem"]
        if not network and not self.network:
            names.append("the network")
        if not self.processes:
            names.append("other processes")
        return names


#: No isolation at all: what runs when neither bubblewrap nor namespaces work.
NO_ISOLATION = Isolation()

# Namespace flag sets, best first. -r (a user namespace) works for non-root callers and takes
# host capabilities away from root; -p -f --kill-child gives a PID namespace that dies with
# its first process, and kills it when unshare dies; -m a mount namespace in which the boot
# program closes the filesystem (with -p only: it does so as the namespace's first process).
_PID_FLAGS = ("-p", "-f", "--kill-child")
_CANDIDATES = {
    False: (("-r", "-n", *_PID_FLAGS), ("-n", *_PID_FLAGS), ("-r", "-n"), ("-n",)),
    True: (("-r", *_PID_FLAGS), _PID_FLAGS),
}
_MOUNT_CANDIDATES = {
    False: (("-r", "-n", "-m", *_PID_FLAGS), ("-n", "-m", *_PID_FLAGS)),
    True: (("-r", "-m", *_PID_FLAGS), ("-m", *_PID_FLAGS)),
}
# pivot_root(2) has no libc wrapper: its system call number, per architecture.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
# Outside Python's prefixes, what programs (Python, sh, coreutils) need, read-only. Symlinks
# (/bin -> usr/bin on a merged /usr) are recreated as symlinks.
_SYSTEM_PATHS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives",
)
# With network=True, name resolution and certificates as well.
_NETWORK_PATHS = (
    "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/ssl",
    "/etc/ca-certificates",
)
_warn_lock = threading.Lock()
_warned: set[str] = set()


@lru_cache(maxsize=1)
def _unshare_path() -> str | None:
    return shutil.which("unshare")


@lru_cache(maxsize=1)
def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _first_working(candidates: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """The first flag set with which ``unshare FLAGS true`` succeeds, or ``()``."""
    unshare = _unshare_path()
    if unshare is None or not sys.platform.startswith("linux"):
        return ()
    for flags in candidates:
        try:
            probe = subprocess.run(
                [unshare, *flags, "--", "true"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=BASE_ENV,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return flags
    return ()


@lru_cache(maxsize=2)
def namespace_flags(network: bool) -> tuple[str, ...]:
    """Return the ``unshare`` flags that work here for ``network`` (probed once, cached).

    These are the namespaces alone, without the mount namespace that closes the filesystem
    (see :func:`isolation`).

    Args:
        network: whether the program may use the network. When False, only flag sets that
            include a network namespace (``-n``) qualify.

    Returns:
        The first candidate flag set with which ``unshare FLAGS true`` succeeds, or ``()`` when
        none does (no ``unshare``, or namespaces refused by the kernel or a seccomp policy).
    """
    return _first_working(_CANDIDATES[network])


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


def _read_only_paths(network: bool) -> list[str]:
    """The host paths a sandboxed program sees, read-only, parents before children."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    paths = set(_SYSTEM_PATHS) | (set(_NETWORK_PATHS) if network else set())
    paths |= prefixes | {os.path.realpath(p) for p in prefixes}
    ordered = sorted(p for p in paths if os.path.lexists(p))
    # A path inside another that is bound already comes with it.
    return [
        p for p in ordered
        if not any(p.startswith(q.rstrip("/") + "/") and not os.path.islink(q) for q in ordered)
    ]


# The devices of the box's /dev, as bwrap's own --dev makes it.
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _bwrap_args(network: bool, workdir: str, program_fd: int) -> list[str]:
    """Bubblewrap's arguments: new namespaces, the read-only view, the working directory.

    The working directory is a tmpfs holding a copy of the program (from ``program_fd``),
    whose limits the boot program sets with the ``CAP_SYS_ADMIN`` kept for it (and
    ``CAP_SETPCAP``, to empty the bounding set), before it drops both. ``/dev`` is built here
    rather than with ``--dev``, whose tmpfs would be writable and as large as half the RAM:
    the devices, the ``/proc/self/fd`` links, ``/dev/shm`` as a link to the working
    directory, then read-only.
    """
    args = [_bwrap_path() or "bwrap", "--unshare-all", "--die-with-parent", "--as-pid-1"]
    if network:
        args.append("--share-net")
    args += ["--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    for path in _read_only_paths(network):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path]
    args += ["--tmpfs", "/dev"]
    for name in _DEVICES:
        args += ["--dev-bind-try", f"/dev/{name}", f"/dev/{name}"]
    for name, target in (("fd", ""), ("stdin", "/0"), ("stdout", "/1"), ("stderr", "/2")):
        args += ["--symlink", f"/proc/self/fd{target}", f"/dev/{name}"]
    args += ["--symlink", workdir, "/dev/shm", "--remount-ro", "/dev"]
    args += ["--proc", "/proc"]
    for name in ("keys", "key-users"):
        args += ["--ro-bind-try", "/dev/null", f"/proc/{name}"]
    args += ["--tmpfs", workdir, "--file", str(program_fd), os.path.join(workdir, PROGRAM_FILE)]
    return [*args, "--remount-ro", "/", "--chdir", workdir, "--"]


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


def _rlimits(
    *,
    timeout: float,
    memory_mb: int,
    cpu_seconds: int | None,
    max_file_mb: int,
    max_open_files: int,
    nproc: int | None,
) -> list[str]:
    cpu = cpu_seconds if cpu_seconds is not None else math.ceil(timeout) + 1
    specs = [
        f"CPU:{cpu}:{cpu + 1}",
        f"AS:{memory_mb << 20}:{memory_mb << 20}",
        f"FSIZE:{max_file_mb << 20}:{max_file_mb << 20}",
        f"NOFILE:{max_open_files}:{max_open_files}",
        "CORE:0:0",
    ]
    if nproc is not None:
        specs.append(f"NPROC:{nproc}:{nproc}")
    return specs


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Output:
    """Collects one stream up to a byte limit, dropping (but still reading) the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = False

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.dropped = True
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class _WriteGuard:
    """Kills a program whose working directory, on the host's disk, grows past its cap.

    Used where no tmpfs bounds the directory: :meth:`check` walks it at most every
    ``_CHECK_S`` seconds, counting allocated bytes and entries, and stops at the cap, so that
    one walk costs at most ``max_entries`` ``lstat`` calls.
    """

    def __init__(self, folder: str, max_bytes: int, max_entries: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.tripped = False
        self._next = 0.0

    def check(self, now: float) -> bool:
        """Return True (once) when the folder is found over its cap; ``now`` is monotonic."""
        if self.tripped or now < self._next:
            return False
        self._next = now + _CHECK_S
        self.tripped = self._over()
        return self.tripped

    def _over(self) -> bool:
        total = entries = 0
        pending = [self.folder]
        while pending:
            try:
                with os.scandir(pending.pop()) as found:
                    for entry in found:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue  # removed while we looked
                        total += st.st_blocks * 512
                        entries += 1
                        if total > self.max_bytes or entries > self.max_entries:
                            return True
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
            except OSError:
                continue  # a folder removed, or made unreadable, by the program
        return False


def _collect(
    proc: subprocess.Popen[bytes], deadline: float, outputs: dict[int, _Output], pidns: bool,
    guard: _WriteGuard | None = None,
) -> bool:
    """Read the child's pipes until both close or ``deadline``; return True on timeout.

    With a ``guard``, the whole process group is killed when the guard finds the working
    directory over its cap.
    """
    assert proc.stdout is not None and proc.stderr is not None
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for stream in (proc.stdout, proc.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return True
            if exited_at is not None and now - exited_at > _GRACE_S:
                break  # whatever still holds the pipes has left the process group
            events = selector.select(min(deadline - now, _POLL_S))
            for key, _ in events:
                chunk = os.read(key.fd, _READ_CHUNK)
                if chunk:
                    outputs[key.fd].feed(chunk)
                else:
                    selector.unregister(key.fileobj)
            if not events and exited_at is None and proc.poll() is not None:
                # The program is gone but something it started still holds the pipes.
                exited_at = time.monotonic()
                if not pidns:
                    _kill_group(proc.pid)
            if guard is not None and exited_at is None and guard.check(time.monotonic()):
                _kill_group(proc.pid)
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        return True  # it closed its output but kept running
    return False


def _read_status(fd: int) -> int | None:
    try:
        raw = os.read(fd, 64)
    except BlockingIOError:
        return None
    try:
        return int(raw.decode()) if raw else None
    except ValueError:
        return None


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
    the directory belongs to this user and nobody holds its lock (see :func:`run_python`'s
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


def _stdin_file(text: str | None) -> IO[bytes] | None:
    """A temporary file holding ``text``, rewound, for the program's stdin; None for none."""
    if text is None:
        return None
    stdin_file = tempfile.TemporaryFile()
    try:
        stdin_file.write(text.encode("utf-8"))
        stdin_file.seek(0)
    except BaseException:
        stdin_file.close()
        raise
    return stdin_file


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


def _start(
    command: list[str], stdin_file: IO[bytes] | None, workdir: str, pass_fds: list[int]
) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``command`` in its own session with the minimal environment; return it and when.

    ``pass_fds`` stay open in the child (the status pipe, bwrap's copy of the program).

    Raises:
        SandboxError: when the process cannot be started.
    """
    env = {**BASE_ENV, "HOME": workdir, "TMPDIR": workdir}
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            command,
            stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=env,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as e:
        raise SandboxError(f"could not start the sandbox: {e}") from e
    return proc, start


def _watch(
    proc: subprocess.Popen[bytes], start: float, timeout: float, max_output_bytes: int,
    pidns: bool, guard: _WriteGuard | None,
) -> tuple[bool, float, _Output, _Output]:
    """Read the program's output until it ends or times out, then kill what is left and wait.

    ``guard`` checks the working directory's size meanwhile, where no tmpfs bounds it.

    Returns:
        Whether it timed out, the seconds since ``start``, and its stdout and stderr.
    """
    with proc:
        assert proc.stdout is not None and proc.stderr is not None
        outputs = {
            proc.stdout.fileno(): _Output(max_output_bytes),
            proc.stderr.fileno(): _Output(max_output_bytes),
        }
        try:
            timed_out = _collect(proc, start + timeout, outputs, pidns, guard)
        finally:
            # Kills the group on timeout or error; without a PID namespace it also ends
            # whatever the program left running in its group.
            if proc.poll() is None or not pidns:
                _kill_group(proc.pid)
            proc.wait()
        duration = time.monotonic() - start
        return timed_out, duration, outputs[proc.stdout.fileno()], outputs[proc.stderr.fileno()]
