"""The sandbox's records and defaults: what a call returns and how a box isolates.

:class:`SandboxResult` (the outcome of one call), :class:`Isolation` (the tool and namespaces
that isolate a program here) and :data:`NO_ISOLATION`; the default bounds
(:data:`DEFAULT_MEMORY_MB`, :data:`MAX_WRITE_MB`, :data:`MAX_WORK_FILES`), the whole environment
of a sandboxed program (:data:`BASE_ENV`) and the names of its files. The public path of all of
them is :mod:`lumos_gym.tools.sandbox`, which re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The default address-space limit (``RLIMIT_AS``) of a sandboxed process, in MiB. It counts
#: memory mapped, not memory used: a program that maps more, even without touching it (a
#: 600 MB ``mmap``), fails with ``MemoryError``. Callers take a ``memory_mb`` option to raise it.
DEFAULT_MEMORY_MB = 512

#: The most a sandboxed program may hold in its working directory (and ``/dev/shm``, a link to
#: it) at once, in MiB: the size of its tmpfs, or, without one, what the caller's check allows
#: (see "Bounding what a program writes" in :mod:`lumos_gym.tools.sandbox`). Callers take a
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


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one :func:`~lumos_gym.tools.sandbox.run_python` call.

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
