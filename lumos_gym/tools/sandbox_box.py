"""The sandbox's box: which namespaces work here, the read-only view, bwrap's arguments, rlimits.

The isolation setup of :mod:`lumos_gym.tools.sandbox` on the caller's side: the ``unshare``
flag sets, probed once (:func:`namespace_flags`); the host paths a program sees read-only; the
argument list of bubblewrap (namespaces, the read-only view, a minimal ``/dev``, its own
``/proc``, the tmpfs working directory); and the rlimits the boot program
(:mod:`lumos_gym.tools.sandbox_boot`) sets before the program runs.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from functools import lru_cache

from lumos_gym.tools.sandbox_records import BASE_ENV, PROGRAM_FILE

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
    (see :func:`~lumos_gym.tools.sandbox.isolation`).

    Args:
        network: whether the program may use the network. When False, only flag sets that
            include a network namespace (``-n``) qualify.

    Returns:
        The first candidate flag set with which ``unshare FLAGS true`` succeeds, or ``()`` when
        none does (no ``unshare``, or namespaces refused by the kernel or a seccomp policy).
    """
    return _first_working(_CANDIDATES[network])


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
