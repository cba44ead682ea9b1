"""The parent side of one sandboxed run: start the process, read its output, end it.

Used by :func:`lumos_gym.tools.sandbox.run_python`: the program's stdin file, the start of the
child in its own session with the minimal environment (:func:`_start`), the reading of its
stdout and stderr up to their limits until it ends or its wall-clock timeout
(:func:`_watch`, :func:`_collect`), the check of a working directory that no tmpfs bounds
(:class:`_WriteGuard`), the ``SIGKILL`` of its process group and the wait status that a PID
namespace's first process reports on a pipe (:func:`_read_status`).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from typing import IO

from lumos_gym.errors import SandboxError
from lumos_gym.tools.sandbox_records import BASE_ENV

_READ_CHUNK = 65536
_POLL_S = 0.05
_GRACE_S = 0.2
# How often the caller checks the size of a working directory that no tmpfs bounds.
_CHECK_S = 0.05


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
