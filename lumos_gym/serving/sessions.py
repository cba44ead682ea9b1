"""The sessions of an env server: one env instance each, owners, a capacity, idle reaping, crashes.

A :class:`SessionPool` makes an env for each session it opens (never more than
``max_sessions`` at once), runs every call of a session's env in a worker thread (one call of a
session at a time; sessions run side by side), and closes a session's env when the session
ends: on a ``close``, when its client goes away, when it stays idle longer than
``idle_timeout_s`` (its engines, game workers, shop servers and sandboxes closed with it), when
its env raises, and at shutdown. A call that raises or outlives ``call_timeout_s`` is answered
with a :class:`SessionError` and ends the session; a later call of that session names the reason.

Every env the pool makes is its own from the moment it exists: one made for a request that
went away meanwhile (the opening was cancelled, the server began to shut down) is closed at
once, and a session ended while a call of its env still runs has that env closed when the call
returns, never under it. :attr:`SessionPool.envs_made` and :attr:`SessionPool.envs_closed`
count them (``live_envs`` is their difference), so that a test sees a leak as a number.

A session opened with an owner token (the HTTP routes of ``serve-env``) is found by its id only
together with that token (:meth:`SessionPool.get`); a wrong or missing token reads exactly as an
unknown id, so that no client learns which ids exist. A session without a token (a WebSocket
connection's) is reachable through its connection alone.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from lumos_gym.errors import LumosGymError

logger = logging.getLogger(__name__)

#: Error codes, as OpenEnv names them (``WSErrorCode``), and the HTTP status of each.
HTTP_STATUS = {
    "INVALID_JSON": 400,
    "UNKNOWN_TYPE": 400,
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


def _same_token(expected: str | None, given: str | None) -> bool:
    """Return True when ``given`` is the owner token ``expected`` (compared in constant time)."""
    if expected is None or not given:
        return False
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


@dataclass(eq=False)
class Session:
    """One client's env on the server."""

    id: str
    env: gym.Env | None = None
    #: What a client must present to reach the session by its id; None: only its connection.
    token: str | None = None
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    steps: int = 0
    episodes: int = 0
    task_id: str | None = None
    episode_id: str | None = None
    ended: str | None = None  # why the session ended, once it has
    busy: bool = False  # a call of its env runs in a worker thread
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def owned_by(self, token: str | None) -> bool:
        """Return True when ``token`` is the session's owner token."""
        return _same_token(self.token, token)

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
        #: recently ended session → why, and its owner token (the reason is told to it only)
        self.ended: dict[str, tuple[str, str | None]] = {}
        self.closed = 0  # sessions closed so far
        self.envs_made = 0  # envs made so far (worker threads count them)
        self.envs_closed = 0  # envs closed so far
        self._open_envs: set[gym.Env] = set()
        self._count_lock = threading.Lock()
        self._opening = 0
        self._shutting_down = False
        self._numbers = itertools.count(1)
        self._executor = ThreadPoolExecutor(max_workers=min(max_sessions, 64) + 2,
                                            thread_name_prefix="lumos-env")

    @property
    def active(self) -> int:
        """Return how many sessions are open (or opening)."""
        return len(self.sessions) + self._opening

    @property
    def live_envs(self) -> int:
        """Return how many envs the pool made and has not closed yet."""
        with self._count_lock:
            return len(self._open_envs)

    async def open(self, *, owned: bool = False) -> Session:
        """Open a session with a fresh env; raise ``CAPACITY_REACHED`` when the pool is full.

        Args:
            owned: give the session an owner token (``session.token``), without which
                :meth:`get` does not find it.
        """
        if self._shutting_down:
            raise SessionError("CAPACITY_REACHED", "the server is shutting down")
        if self.active >= self.max_sessions:
            raise SessionError("CAPACITY_REACHED", f"the server is at its capacity of "
                               f"{self.max_sessions} sessions; close one or try again later")
        self._opening += 1
        try:
            env = await self._new_env()
        finally:
            self._opening -= 1
        if self._shutting_down:  # close_all ran while the env was being made
            await self._close_env(env)
            raise SessionError("CAPACITY_REACHED", "the server is shutting down")
        session = Session(f"s{next(self._numbers)}-{secrets.token_hex(6)}", env=env,
                          token=secrets.token_urlsafe(24) if owned else None)
        self.sessions[session.id] = session
        return session

    def get(self, session_id: str, token: str | None) -> Session:
        """Return the open session ``session_id`` owned by ``token``.

        Raises:
            SessionError: ``SESSION_ERROR``: no such session, or ``token`` is not its owner's
                (the same answer); with the owner's token, a session that has ended is named
                with why it ended.
        """
        session = self.sessions.get(session_id)
        if session is not None and session.owned_by(token):
            return session
        ended = self.ended.get(session_id)
        if ended is not None and _same_token(ended[1], token):
            raise SessionError("SESSION_ERROR", f"session {session_id!r} is closed: {ended[0]}")
        raise SessionError("SESSION_ERROR", f"no open session {session_id[:100]!r} with this "
                           "session token (POST /reset opens one and answers its token)")

    def owned(self, tokens: Iterable[str]) -> list[Session]:
        """Return the open sessions one of ``tokens`` owns."""
        given = [t for t in tokens if t]
        return [s for s in list(self.sessions.values()) if any(s.owned_by(t) for t in given)]

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
            session.busy = True
            try:
                return await self._run(fn, self.call_timeout_s, session.env, *args)
            except SessionError as e:
                if e.code == "EXECUTION_ERROR":
                    self._end(session, f"its env failed ({e})")
                    if e.env_busy:  # still running: closed by the thread when it returns
                        session.env = None
                raise
            except asyncio.CancelledError:  # the env call runs on; closed when it returns
                self._end(session, "its call was cancelled")
                session.env = None
                raise
            finally:
                session.busy = False
                session.last_used = time.monotonic()
                if session.ended is not None and session.env is not None:
                    env, session.env = session.env, None  # ended during the call: close now
                    await self._close_env(env)

    async def close(self, session: Session, reason: str) -> None:
        """End ``session`` and close its env (in a worker thread); idempotent.

        A session with a call in flight is ended at once; its env is closed when the call
        returns.
        """
        if not self._end(session, reason) or session.busy:
            return
        env, session.env = session.env, None
        if env is not None:
            await self._close_env(env)

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
        """Close every session, then the worker threads (shutdown); no session opens after."""
        self._shutting_down = True
        await asyncio.gather(*(self.close(s, reason) for s in list(self.sessions.values())))
        # calls still running finish first (an env in use is closed when its call returns)
        self._executor.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------------- internals
    def _end(self, session: Session, reason: str) -> bool:
        """Mark ``session`` ended (its env is left to the caller); False when it already was."""
        if session.ended is not None:
            return False
        session.ended = reason
        self.closed += 1
        self.sessions.pop(session.id, None)
        self.ended[session.id] = (reason, session.token)
        while len(self.ended) > 4 * self.max_sessions:  # remember the recent ones only
            self.ended.pop(next(iter(self.ended)))
        return True

    def _make_counted(self) -> gym.Env:
        env = self.make_env()
        with self._count_lock:
            self.envs_made += 1
            self._open_envs.add(env)
        return env

    def _close_counted(self, env: gym.Env) -> None:
        with self._count_lock:
            if env not in self._open_envs:  # closed already
                return
            self._open_envs.discard(env)
            self.envs_closed += 1
        try:
            env.close()
        except Exception:  # a broken env must not stop the others from closing
            logger.exception("closing an env failed")

    async def _new_env(self) -> gym.Env:
        """Make an env in a worker thread; one made for a caller that went away is closed."""
        future = self._executor.submit(self._make_counted)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(self._discard_made)
            raise
        except Exception as e:
            logger.exception("making an env failed")
            raise SessionError("FACTORY_ERROR",
                               f"cannot make the env: {type(e).__name__}: {e}") from e

    def _discard_made(self, future: Future[gym.Env]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._close_counted(future.result())

    async def _close_env(self, env: gym.Env) -> None:
        """Close ``env`` in a worker thread (at once here once the threads are shut down)."""
        try:
            future = self._executor.submit(self._close_counted, env)
        except RuntimeError:  # the executor is shut down
            self._close_counted(env)
            return
        # a close the shutdown cancels before it ran is done by whoever cancelled it
        future.add_done_callback(lambda f: self._close_counted(env) if f.cancelled() else None)
        await asyncio.shield(asyncio.wrap_future(future))  # a cancelled caller: it closes on

    def _close_when_done(self, args: tuple[Any, ...]) -> Callable[[Future[Any]], None]:
        """Close the env among ``args`` once the call that was given up on has returned."""

        def done(_future: Future[Any]) -> None:
            for arg in args:
                if isinstance(arg, gym.Env):
                    self._close_counted(arg)

        return done

    async def _run(self, fn: Callable[..., Any], timeout_s: float | None, *args: Any) -> Any:
        future = self._executor.submit(fn, *args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except TimeoutError as e:
            future.add_done_callback(self._close_when_done(args))  # the thread cannot be stopped
            raise SessionError("EXECUTION_ERROR", f"no result in {timeout_s:g} s",
                               env_busy=True) from e
        except asyncio.CancelledError:
            future.add_done_callback(self._close_when_done(args))
            raise
        except (gym.error.ResetNeeded, LumosGymError) as e:
            raise SessionError("VALIDATION_ERROR", str(e)) from e
        except Exception as e:
            logger.exception("an env call failed")
            raise SessionError("EXECUTION_ERROR", f"{type(e).__name__}: {e}") from e
