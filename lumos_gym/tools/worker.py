"""Run a function in a long-lived worker process, under a wall-clock limit.

The math tools stop their sympy work with ``SIGALRM``, which Python delivers to the main thread
only: called from any other thread, a tool would run unbounded (a single huge integer power
holds the interpreter for minutes). There a :class:`WorkerPool` runs the work instead, in the
main thread of a worker process, where the alarm holds; a worker that does not answer in time
is killed, so the caller's wait is bounded whatever the work does.

A worker is ``sys.executable`` started with an argument list and the caller's ``sys.path``
(never multiprocessing's spawn, which would import the caller's ``__main__`` again, nor a fork of
a threaded process). It talks over a socket pair, imports the modules it is told to preload
once, and serves one call at a time until the pipe closes. Idle workers are kept for the next
call and closed at exit; a forked child forgets its parent's workers. A call whose exception
has a true ``retire_worker`` attribute (work interrupted mid-way, its state unknown) ends its
worker once the exception is sent back, and a successor starts in the background at once, so
that the next call finds it ready.
"""

from __future__ import annotations

import atexit
import importlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["WorkerPool", "WorkerStartError"]

#: Seconds a new worker may take to start and import its preloaded modules.
START_TIMEOUT = 60.0

_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from lumos_gym.tools.worker import _serve; _serve(int(sys.argv[2]), sys.argv[3:])"
)


class WorkerStartError(OSError):
    """No worker process could be started (or it died before it was ready)."""


class _Worker:
    """One worker process and the parent's end of its socket pair."""

    def __init__(self, preload: Sequence[str]) -> None:
        parent, child = multiprocessing.Pipe()
        fd = child.fileno()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(fd), *preload],
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C of the caller is the caller's to handle
            )
        except OSError as e:
            parent.close()
            raise WorkerStartError(f"cannot start a worker process: {e}") from e
        finally:
            child.close()
        self.conn = parent
        try:
            ready = parent.poll(START_TIMEOUT) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise WorkerStartError("the worker process did not start")

    def call(self, module: str, function: str, args: tuple[Any, ...], timeout: float) -> Any:
        """Send one call and return the worker's answer, a ``(status, value)`` pair.

        Raises:
            TimeoutError: when no answer came within ``timeout`` seconds.
            EOFError: when the worker died.
        """
        self.conn.send((module, function, args))
        if not self.conn.poll(timeout):
            raise TimeoutError(f"no answer within {timeout:g} s")
        return self.conn.recv()

    def kill(self) -> None:
        """End the worker now and reap it."""
        self.conn.close()
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        """Let the worker end by itself (its pipe closes), killing it if it lingers."""
        self.conn.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class WorkerPool:
    """Worker processes that run ``module.function(*args)`` calls under a time limit.

    Each call takes an idle worker (or starts one), so concurrent callers each get their own.

    Args:
        preload: modules each worker imports before it is ready, so that their import time
            does not count against a call's limit.
    """

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self.preload = tuple(preload)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._starting: list[threading.Thread] = []  # successors of retired workers, starting
        atexit.register(self.close)
        if hasattr(os, "register_at_fork"):
            # the child must not share its parent's workers (nor a lock held mid-fork)
            os.register_at_fork(after_in_child=self._forget)

    def run(self, module: str, function: str, args: tuple[Any, ...], timeout: float) -> Any:
        """Return ``module.function(*args)`` computed in a worker.

        The arguments and the result travel by pickle. An exception raised by the function is
        raised here again (one that cannot be pickled as a ``RuntimeError`` naming it).

        Raises:
            TimeoutError: when the worker did not answer within ``timeout`` seconds (it is
                killed; the next call starts another).
            EOFError: when the worker died during the call.
            WorkerStartError: when no worker could be started.
        """
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self.preload)
        try:
            status, value = worker.call(module, function, args, timeout)
        except BaseException:  # timed out, died or interrupted: its state is unknown
            worker.kill()
            raise
        if status == "retire":  # done after this answer (no need to wait for its exit)
            worker.kill()
            self._replace()
        else:
            with self._lock:
                self._idle.append(worker)
        if status in ("error", "retire"):
            raise value
        return value

    def close(self) -> None:
        """Close the idle workers (a later call starts new ones)."""
        self.wait_started()  # a successor being started is closed with the others
        with self._lock:
            idle, self._idle, self._starting = self._idle, [], []
        for worker in idle:
            worker.close()

    def wait_started(self) -> None:
        """Wait until the successors of retired workers have started (or failed to)."""
        with self._lock:
            starting = list(self._starting)
        for thread in starting:
            thread.join()

    def _replace(self) -> None:
        """Start a worker in the background, for the next call, in place of a retired one."""

        def start() -> None:
            try:
                worker = _Worker(self.preload)
            except WorkerStartError:
                return  # the next call tries again, and raises
            with self._lock:
                self._idle.append(worker)

        thread = threading.Thread(target=start, name="worker-start", daemon=True)
        with self._lock:
            self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        thread.start()

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._idle = []
        self._starting = []


def _serve(fd: int, preload: Sequence[str]) -> None:
    """The worker's loop: answer each ``(module, function, args)`` until the pipe closes."""
    conn = Connection(fd)
    for name in preload:
        importlib.import_module(name)
    conn.send("ready")
    while True:
        try:
            module, function, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            value = getattr(importlib.import_module(module), function)(*args)
            answer: tuple[str, Any] = ("ok", value)
        except Exception as e:  # raised again in the caller
            answer = ("retire" if getattr(e, "retire_worker", False) else "error", e)
        try:
            conn.send(answer)
        except Exception as e:  # a value or an exception that cannot be pickled
            conn.send(("error", RuntimeError(f"{type(e).__name__}: {e}")))
        if answer[0] == "retire":
            return
