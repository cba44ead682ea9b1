"""The sessions of an env server: one env instance each, a capacity, idle reaping, crashes.

A :class:`SessionPool` makes an env for each session it opens (never more than
``max_sessions`` at once), runs every call of a session's env in a worker thread (one call of a
session at a time; sessions run side by side), and closes a session's env when the session
ends: on a ``close``, when its client goes away, when it stays idle longer than
``idle_timeout_s`` (its engines, game workers, shop servers and sandboxes closed with it), when
its env raises, and at shutdown. A call that raises or outlives ``call_timeout_s`` is answered
with a :class:`SessionError` and ends the session; a later call of that session names the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from lumos_gym.errors import LumosGymError

logger = logging.getLogger(__name__)

#: Error codes, as OpenEnv names them (``WSErrorCode``), and the HTTP status of each.
HTTP_STATUS = {
    "CAPACITY_REACHED": 503,
    "SESSION_ERROR": 404,
    "VALIDATION_ERROR": 422,
    "EXECUTION_ERROR": 500,
    "FACTORY_ERROR": 500,
}


class SessionError(LumosGymError):
    """A session call that cannot be answered with a result, with its OpenEnv error code."""

    def __init__(self, code: str, message: str, *, env_busy: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.env_busy = env_busy  # the env is still running the call (it timed out)

    @property
    def status(self) -> int:
        """Return the HTTP status of the error."""
        return HTTP_STATUS.get(self.code, 500)


@dataclass(eq=False)
class Session:
    """One client's env on the server."""

    id: str
    env: gym.Env | None = None
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    steps: int = 0
    episodes: int = 0
    task_id: str | None = None
    episode_id: str | None = None
    ended: str | None = None  # why the session ended, once it has
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def info(self) -> dict[str, Any]:
        """Return what ``GET /sessions`` shows of the session (OpenEnv's ``SessionInfo``)."""
        idle = time.monotonic() - self.last_used
        return {"session_id": self.id, "created_at": self.created,
                "last_activity_at": time.time() - idle, "step_count": self.steps,
                "environment_type": type(self.env.unwrapped).__name__ if self.env else None}


class SessionPool:
    """The sessions of one served env.

    Args:
        make_env: makes one env (called in a worker thread).
        max_sessions: the most sessions open at once; one more is refused (``CAPACITY_REACHED``).
        idle_timeout_s: a session idle this long is closed by :meth:`reap`; None: never.
        call_timeout_s: the longest one ``reset`` or ``step`` may run; None: no limit.
    """

    def __init__(self, make_env: Callable[[], gym.Env], *, max_sessions: int = 64,
                 idle_timeout_s: float | None = 600.0,
                 call_timeout_s: float | None = 300.0) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1; got {max_sessions}")
        self.make_env = make_env
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.call_timeout_s = call_timeout_s
        self.sessions: dict[str, Session] = {}
        self.ended: dict[str, str] = {}  # recently ended session → why (for a clear error)
        self.closed = 0  # sessions closed so far
        self._opening = 0
        self._numbers = itertools.count(1)
        self._executor = ThreadPoolExecutor(max_workers=min(max_sessions, 64) + 2,
                                            thread_name_prefix="lumos-env")

    @property
    def active(self) -> int:
        """Return how many sessions are open (or opening)."""
        return len(self.sessions) + self._opening

    async def open(self, session_id: str | None = None) -> Session:
        """Open a session with a fresh env; raise ``CAPACITY_REACHED`` when the pool is full."""
        if self.active >= self.max_sessions:
            raise SessionError("CAPACITY_REACHED", f"the server is at its capacity of "
                               f"{self.max_sessions} sessions; close one or try again later")
        self._opening += 1
        try:
            session = Session(session_id or f"s{next(self._numbers)}-{secrets.token_hex(6)}")
            try:
                session.env = await self._run(self.make_env, None)
            except SessionError as e:
                raise SessionError("FACTORY_ERROR", f"cannot make the env: {e}") from e
            self.sessions[session.id] = session
            return session
        finally:
            self._opening -= 1

    def get(self, session_id: str) -> Session:
        """Return the open session ``session_id``; raise ``SESSION_ERROR`` naming why not."""
        session = self.sessions.get(session_id)
        if session is None:
            why = self.ended.get(session_id, "no such session on this server")
            raise SessionError("SESSION_ERROR", f"session {session_id!r} is closed: {why}")
        return session

    async def call(self, session: Session, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(env, *args)`` for ``session``, one call of a session at a time.

        An exception of the env (other than a Gymnasium ``ResetNeeded`` or a ``LumosGymError``
        of its arguments, which leave it usable) ends the session: the env is closed and the
        caller gets ``EXECUTION_ERROR``.
        """
        async with session.lock:
            if session.ended is not None or session.env is None:
                raise SessionError("SESSION_ERROR",
                                   f"session {session.id!r} is closed: {session.ended}")
            session.last_used = time.monotonic()
            try:
                return await self._run(fn, self.call_timeout_s, session.env, *args)
            except SessionError as e:
                if e.code == "EXECUTION_ERROR":
                    await self.close(session, f"its env failed ({e})", close_env=not e.env_busy)
                raise
            finally:
                session.last_used = time.monotonic()

    async def close(self, session: Session, reason: str, *, close_env: bool = True) -> None:
        """End ``session`` and close its env (in a worker thread); idempotent.

        ``close_env=False`` leaves the env to whoever still runs it (a call that timed out
        closes it when it returns).
        """
        if session.ended is not None:
            return
        session.ended = reason
        self.closed += 1
        self.sessions.pop(session.id, None)
        self.ended[session.id] = reason
        while len(self.ended) > 4 * self.max_sessions:  # remember the recent ones only
            self.ended.pop(next(iter(self.ended)))
        env, session.env = session.env, None
        if env is not None and close_env:
            await asyncio.wrap_future(self._executor.submit(_close_env, env))

    async def reap(self) -> list[str]:
        """Close the sessions idle longer than ``idle_timeout_s``; return their ids."""
        if self.idle_timeout_s is None:
            return []
        now = time.monotonic()
        idle = [s for s in list(self.sessions.values())
                if not s.lock.locked() and now - s.last_used > self.idle_timeout_s]
        for session in idle:
            await self.close(session, f"idle for more than {self.idle_timeout_s:g} s")
        return [s.id for s in idle]

    async def reap_forever(self) -> None:
        """Run :meth:`reap` every few seconds (a quarter of the idle timeout, 0.05 to 5 s)."""
        if self.idle_timeout_s is None:
            return
        interval = min(5.0, max(0.05, self.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(interval)
            reaped = await self.reap()
            if reaped:
                logger.info("closed idle sessions: %s", ", ".join(reaped))

    async def close_all(self, reason: str = "the server shut down") -> None:
        """Close every session, then the worker threads (shutdown)."""
        await asyncio.gather(*(self.close(s, reason) for s in list(self.sessions.values())))
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def _run(self, fn: Callable[..., Any], timeout_s: float | None, *args: Any) -> Any:
        future = self._executor.submit(fn, *args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except TimeoutError as e:
            future.add_done_callback(_close_when_done(args))  # the thread cannot be stopped
            raise SessionError("EXECUTION_ERROR", f"no result in {timeout_s:g} s",
                               env_busy=True) from e
        except (gym.error.ResetNeeded, LumosGymError) as e:
            raise SessionError("VALIDATION_ERROR", str(e)) from e
        except Exception as e:
            logger.exception("an env call failed")
            raise SessionError("EXECUTION_ERROR", f"{type(e).__name__}: {e}") from e


def _close_env(env: gym.Env) -> None:
    try:
        env.close()
    except Exception:  # a broken env must not stop the others from closing
        logger.exception("closing an env failed")


def _close_when_done(args: tuple[Any, ...]) -> Callable[[Future[Any]], None]:
    """Close the env among ``args`` once the call that timed out has returned."""

    def done(_future: Future[Any]) -> None:
        for arg in args:
            if isinstance(arg, gym.Env):
                with contextlib.suppress(Exception):
                    arg.close()

    return done
