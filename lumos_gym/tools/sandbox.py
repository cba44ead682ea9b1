"""Run untrusted Python in a separate, resource-limited process.

:func:`run_python` is the only entry point. Each call gets:

* **a separate interpreter**: ``sys.executable -s -P`` started with an argument list (never a
  shell string), in its own session and process group;
* **a fresh working directory** from :func:`tempfile.mkdtemp`, removed afterwards, which is also
  ``HOME`` and ``TMPDIR``;
* **a minimal environment** built from scratch: nothing of the parent's environment (API keys,
  tokens) is inherited;
* **rlimits**, set inside the child before the program runs, soft and hard alike, so that the
  program cannot raise them again: ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, ``RLIMIT_CORE = 0`` and, where it counts only the sandbox, ``RLIMIT_NPROC``;
* **a closed box**, with bubblewrap (``bwrap``, preferred) or else util-linux ``unshare``
  and a mount namespace, whichever works here (probed once per process, see
  :func:`isolation`): the program sees a read-only view of what Python needs (``/usr``, the
  ``/lib*`` and ``/bin`` links, Python's prefixes, a few files of ``/etc``), a minimal
  ``/dev``, its own ``/proc``, and one writable folder, its working directory. No home, no
  checkout, no ``/etc/passwd``, no other folder to write to. With it come a network namespace
  with no interface up (``network=False``), a PID namespace whose every process the kernel
  kills when the sandbox's first process ends, and a user namespace, with every capability
  dropped, which takes away the host privileges of a root caller (it can no longer raise its
  rlimits or undo a read-only mount);
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

What is **not** isolated: CPU time shared with other processes; and, where neither bwrap
nor unshare's mount namespace works, the filesystem (the program can then read, and write
with the caller's permissions, anything outside its directory), and, without namespaces at
all, the network and other processes. A one-line ``RuntimeWarning`` names what is missing,
once per process.
"""

from __future__ import annotations

import json
import math
import os
import platform
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
from typing import IO

from lumos_gym.errors import SandboxError

__all__ = [
    "DEFAULT_MEMORY_MB",
    "NO_ISOLATION",
    "Isolation",
    "SandboxResult",
    "isolation",
    "namespace_flags",
    "run_python",
    "try_isolation",
]

#: The default address-space limit (``RLIMIT_AS``) of a sandboxed process, in MiB. It counts
#: memory mapped, not memory used: a program that maps more, even without touching it (a
#: 600 MB ``mmap``), fails with ``MemoryError``. Callers take a ``memory_mb`` option to raise it.
DEFAULT_MEMORY_MB = 512

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

#: Prefix of the temporary working directories (tests look for leftovers by it).
TEMP_PREFIX = "lumos-sandbox-"

# The kernel refuses a pid_max below 301 (RESERVED_PIDS + 1).
_MIN_PID_MAX = 301
_READ_CHUNK = 65536
_POLL_S = 0.05
_GRACE_S = 0.2

# Runs in the child as `python -s -P -c _BOOT STATUS_FD PARENT PID_MAX FS NAME:SOFT:HARD...`.
# As the first process (pid 1) of a fresh PID namespace it closes the filesystem when FS is a
# JSON spec (the unshare path; bwrap did it already when FS is "-"), lowers pid_max, drops its
# capabilities, forks the program and reports the program's wait status on STATUS_FD, since
# pid 1 cannot die of its own signal. It also ends the namespace when the caller dies: the
# caller holds the only read end of STATUS_FD, so a POLLERR there means it is gone. Outside a
# PID namespace the program itself asks for SIGKILL on the death of its parent, PARENT.
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

def _close_fs(spec):
    import json
    ctypes, libc, call = _libc()
    spec = json.loads(spec)
    root, kept_flags = spec["workdir"], 2 | 4 | 8 | 1024 | 2048
    def mount(src, dst, fstype, flags, data=None):
        enc = [None if s is None else s.encode() for s in (src, dst, fstype, data)]
        call("mount", enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3])
    def bind(src, dst, read_only):
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "a").close()
        mount(src, dst, None, 4096 | (16384 if read_only else 0))
        if read_only:
            found = os.statvfs(src).f_flag
            extra = (found & kept_flags) | (2097152 if found & 4096 else 0)
            mount(None, dst, None, 4096 | 32 | 1 | 2 | extra)
    workdir = os.open(root, os.O_PATH)
    mount(None, "/", None, 16384 | 262144)
    mount("tmpfs", root, "tmpfs", 2 | 4, "mode=0755")
    for path in spec["read_only"]:
        if os.path.islink(path):
            os.makedirs(os.path.dirname(root + path), exist_ok=True)
            os.symlink(os.readlink(path), root + path)
        elif os.path.exists(path):
            bind(path, root + path, True)
    for name in ("null", "zero", "full", "random", "urandom"):
        bind("/dev/" + name, root + "/dev/" + name, False)
    bind("/proc/self/fd/%d" % workdir, root + root, False)
    os.makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", 2 | 4 | 8)
    os.chdir(root)
    call("syscall", spec["pivot_root"], b".", b".")
    call("umount2", b".", 2)
    mount(None, "/", None, 4096 | 32 | 1 | 2 | 4)
    os.chdir(root)
    os.close(workdir)

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
    """

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool
    signal: str | None
    duration_s: float
    network_isolated: bool
    truncated: bool = False

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
            folder, its working directory; no home, no checkout, no ``/etc/passwd``.
        user: the program runs in a user namespace of its own.
    """

    tool: str = ""
    flags: tuple[str, ...] = ()
    network: bool = False
    processes: bool = False
    filesystem: bool = False
    user: bool = False

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
            max_processes=_MIN_PID_MAX, max_output_bytes=4096,
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


def _bwrap_args(network: bool, workdir: str) -> list[str]:
    """Bubblewrap's arguments: new namespaces, the read-only view, the working directory."""
    args = [_bwrap_path() or "bwrap", "--unshare-all", "--die-with-parent", "--as-pid-1"]
    if network:
        args.append("--share-net")
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    for path in _read_only_paths(network):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path]
    args += ["--dev", "/dev", "--proc", "/proc", "--bind", workdir, workdir]
    return [*args, "--remount-ro", "/", "--chdir", workdir, "--"]


def _fs_spec(network: bool, workdir: str) -> str:
    """The boot program's instructions for closing the filesystem (the unshare path)."""
    return json.dumps(
        {
            "workdir": workdir,
            "read_only": _read_only_paths(network),
            "pivot_root": _PIVOT_ROOT[platform.machine()],
        }
    )


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


def _collect(
    proc: subprocess.Popen[bytes], deadline: float, outputs: dict[int, _Output], pidns: bool
) -> bool:
    """Read the child's pipes until both close or ``deadline``; return True on timeout."""
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
) -> SandboxResult:
    """Run ``code`` from a fresh working directory, report how it ended, and clean up.

    With a PID namespace the program's wait status comes back on a pipe from the namespace's
    first process, which cannot die of the program's signal itself.
    """
    pidns = box.processes
    workdir = tempfile.mkdtemp(prefix=TEMP_PREFIX)
    status_r = status_w = -1
    stdin_file = None
    try:
        with open(os.path.join(workdir, PROGRAM_FILE), "w", encoding="utf-8") as f:
            f.write(code)
        if pidns:
            status_r, status_w = os.pipe()
            os.set_blocking(status_r, False)
        stdin_file = _stdin_file(stdin)
        pid_max = max(max_processes + 1, _MIN_PID_MAX) if pidns else 0
        command = _command(box, network, workdir, [str(status_w), str(os.getpid()), str(pid_max)])
        proc, start = _start([*command, *rlimits], stdin_file, workdir, status_w)
        if status_w >= 0:
            os.close(status_w)
            status_w = -1
        timed_out, duration, stdout, stderr = _watch(proc, start, timeout, max_output_bytes, pidns)
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
        )
    finally:
        for fd in (status_r, status_w):
            if fd >= 0:
                os.close(fd)
        if stdin_file is not None:
            stdin_file.close()
        shutil.rmtree(workdir, ignore_errors=True)


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


def _command(box: Isolation, network: bool, workdir: str, boot_args: list[str]) -> list[str]:
    """The argument list up to the rlimits: the isolating tool's, then the boot program's.

    ``boot_args`` are the boot program's STATUS_FD, PARENT and PID_MAX; FS follows them.
    """
    fs = "-"
    if box.tool == "bwrap":
        prefix = _bwrap_args(network, workdir)
    elif box.tool == "unshare":
        prefix = [_unshare_path() or "unshare", *box.flags, "--"]
        if box.filesystem:
            fs = _fs_spec(network, workdir)
    else:
        prefix = []
    return [*prefix, sys.executable, "-s", "-P", "-c", _BOOT, *boot_args, fs]


def _start(
    command: list[str], stdin_file: IO[bytes] | None, workdir: str, status_w: int
) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``command`` in its own session with the minimal environment; return it and when.

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
            pass_fds=(status_w,) if status_w >= 0 else (),
        )
    except OSError as e:
        raise SandboxError(f"could not start the sandbox: {e}") from e
    return proc, start


def _watch(
    proc: subprocess.Popen[bytes], start: float, timeout: float, max_output_bytes: int,
    pidns: bool,
) -> tuple[bool, float, _Output, _Output]:
    """Read the program's output until it ends or times out, then kill what is left and wait.

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
            timed_out = _collect(proc, start + timeout, outputs, pidns)
        finally:
            # Kills the group on timeout or error; without a PID namespace it also ends
            # whatever the program left running in its group.
            if proc.poll() is None or not pidns:
                _kill_group(proc.pid)
            proc.wait()
        duration = time.monotonic() - start
        return timed_out, duration, outputs[proc.stdout.fileno()], outputs[proc.stderr.fileno()]
