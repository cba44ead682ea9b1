"""Game engines and the hosts they run in: in this process, or in a worker process.

A :class:`GameEngine` plays one game (TextWorld's Jericho interpreter, ALFWorld's
TextWorld-PDDL engine) and reports a :class:`GameState` at each move. It runs inside an
:class:`EngineHost`: :class:`LocalHost` runs it in this process, :class:`WorkerHost` in a worker
process (``python -c``, :func:`serve_worker`) that is started on first use, reused across
episodes and stopped on ``close()``, so that a crashing or hanging engine never takes the
agent's process down (a command that takes longer than ``step_timeout`` seconds kills the
worker). Hosts load engines and helpers only by ``"lumos_gym.module:attr"`` paths
(:func:`resolve`). The env side (sessions, :class:`~lumos_gym.envs.games.base.GameEnv`) is in
:mod:`lumos_gym.envs.games.base`.

Hosts speak POSIX pipes (``select``); the worker protocol is one JSON object per line.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import select
import subprocess
import sys
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lumos_gym.errors import LumosGymError

__all__ = [
    "EngineHost",
    "GameEngine",
    "GameEngineError",
    "GameProcessError",
    "GameState",
    "LocalHost",
    "WorkerHost",
    "resolve",
    "serve_worker",
]

_OPEN_TIMEOUT = 180.0
_CALL_TIMEOUT = 900.0


class GameEngineError(LumosGymError):
    """A game engine refused to load a game or failed on a command (the engine's own error)."""


class GameProcessError(LumosGymError):
    """The process running a game died, hung past its timeout or broke the protocol."""


# ---------------------------------------------------------------------------------------------
# Engines


@dataclass(frozen=True)
class GameState:
    """What a game engine reports after starting or after a command.

    Attributes:
        text: the game's answer (at the start, its opening text).
        score: the game's score so far.
        max_score: the highest score the game gives (1 when it keeps no score).
        won: the game is won.
        lost: the game is lost.
        admissible: the commands the engine knows to be valid now, or None when not asked
            for or not known.
    """

    text: str
    score: float = 0.0
    max_score: float = 1.0
    won: bool = False
    lost: bool = False
    admissible: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (for the worker protocol)."""
        return {
            "text": self.text,
            "score": self.score,
            "max_score": self.max_score,
            "won": self.won,
            "lost": self.lost,
            "admissible": None if self.admissible is None else list(self.admissible),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GameState:
        """Read the JSON form."""
        admissible = data.get("admissible")
        return cls(
            text=str(data.get("text", "")),
            score=float(data.get("score") or 0.0),
            max_score=float(data.get("max_score") or 1.0),
            won=bool(data.get("won")),
            lost=bool(data.get("lost")),
            admissible=None if admissible is None else tuple(str(c) for c in admissible),
        )

    def normalized_score(self) -> float:
        """Return the score over the maximum, clipped to [0, 1]; 1.0 for a won game."""
        if self.won:
            return 1.0
        if not self.max_score or not math.isfinite(self.score):
            return 0.0
        return min(1.0, max(0.0, self.score / self.max_score))


class GameEngine(ABC):
    """One game being played: built from its options, started once, then stepped."""

    @abstractmethod
    def start(self) -> GameState:
        """Start the game and return its opening state."""

    @abstractmethod
    def step(self, command: str) -> GameState:
        """Send one command and return the new state."""

    def close(self) -> None:
        """Release the game. Idempotent."""
        return None  # nothing to release by default


def resolve(path: str) -> Any:
    """Import ``"lumos_gym.module:attr"`` (hosts only run lumos-gym's own engines and helpers).

    Raises:
        GameEngineError: a path outside ``lumos_gym`` or one that does not import.
    """
    module, sep, attr = path.partition(":")
    if not sep or not (module == "lumos_gym" or module.startswith("lumos_gym.")):
        raise GameEngineError(f"{path!r} is not a lumos_gym 'module:attr' path")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise GameEngineError(f"cannot import {path}: {e}") from e


class _Runner:
    """Runs the requests of one host: at most one game at a time, plus helper calls."""

    def __init__(self) -> None:
        self.engine: GameEngine | None = None

    def open(self, engine: str, options: Mapping[str, Any]) -> GameState:
        self.close_game()
        factory = resolve(engine)
        self.engine = factory(**dict(options))
        return self.engine.start()

    def step(self, command: str) -> GameState:
        if self.engine is None:
            raise GameEngineError("no game is open")
        return self.engine.step(command)

    def close_game(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()

    @staticmethod
    def call(fn: str, kwargs: Mapping[str, Any]) -> Any:
        return resolve(fn)(**dict(kwargs))


# ---------------------------------------------------------------------------------------------
# Hosts


class EngineHost(ABC):
    """Where a game engine runs; one game at a time."""

    @abstractmethod
    def open(self, engine: str, options: Mapping[str, Any]) -> GameState:
        """Load and start a game, closing the previous one.

        Args:
            engine: the engine, ``"lumos_gym.module:Class"`` (or a host-specific name).
            options: the engine's constructor arguments (JSON values).

        Raises:
            GameEngineError: the engine cannot load the game.
            GameProcessError: the host process failed.
        """

    @abstractmethod
    def step(self, command: str) -> GameState:
        """Send a command to the open game.

        Raises:
            GameEngineError: the engine failed on the command.
            GameProcessError: the host process died or did not answer in time.
        """

    @abstractmethod
    def close_game(self) -> None:
        """Close the open game, if any (never raises)."""

    @abstractmethod
    def close(self) -> None:
        """Stop the host and its process. Idempotent."""

    @property
    def pid(self) -> int | None:
        """Return the id of the process running the game, or None when it runs in-process."""
        return None


class LocalHost(EngineHost):
    """Runs engines in this process (fastest; an engine crash takes the process down)."""

    def __init__(self) -> None:
        self._runner = _Runner()

    def open(self, engine: str, options: Mapping[str, Any]) -> GameState:
        """Load and start a game in this process."""
        try:
            return self._runner.open(engine, options)
        except GameEngineError:
            raise
        except Exception as e:  # any engine failure is reported as the engine's error
            raise GameEngineError(f"{type(e).__name__}: {e}") from e

    def step(self, command: str) -> GameState:
        """Send a command to the open game."""
        try:
            return self._runner.step(command)
        except GameEngineError:
            raise
        except Exception as e:  # the engine's own failure on a command
            raise GameEngineError(f"{type(e).__name__}: {e}") from e

    def call(self, fn: str, /, **kwargs: Any) -> Any:
        """Call a lumos-gym helper (``"module:function"``) with keyword arguments."""
        try:
            return self._runner.call(fn, kwargs)
        except GameEngineError:
            raise
        except Exception as e:  # report helper failures in one line
            raise GameEngineError(f"{fn}: {type(e).__name__}: {e}") from e

    def close_game(self) -> None:
        """Close the open game."""
        try:
            self._runner.close_game()
        except Exception:  # noqa: S110 - closing a broken engine must not fail the episode
            pass

    def close(self) -> None:
        """Close the open game."""
        self.close_game()


_WORKER_CODE = "from lumos_gym.envs.games.hosts import serve_worker; serve_worker()"


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop a worker (politely, then by force) and reap it, so that no zombie is left."""
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.write(b'{"op": "exit"}\n')
                proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10.0)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


class WorkerHost(EngineHost):
    """Runs engines in a worker process (``python -c ...``), started on first use.

    Args:
        step_timeout: seconds a command may take before the worker is killed.
        env: environment variables to set for the worker (on top of this process's).
    """

    def __init__(self, *, step_timeout: float = 60.0, env: Mapping[str, str] | None = None) -> None:
        self.step_timeout = float(step_timeout)
        self._env = dict(env or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None
        self._buffer = bytearray()
        self._game_open = False

    @property
    def pid(self) -> int | None:
        """Return the worker's process id (None before it starts or after it stops)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        """Return True while the worker runs."""
        return self._proc is not None and self._proc.poll() is None

    def open(self, engine: str, options: Mapping[str, Any]) -> GameState:
        """Load and start a game in the worker (starting the worker when needed)."""
        self._ensure()
        reply = self._request({"op": "open", "engine": engine, "options": dict(options)},
                              _OPEN_TIMEOUT)
        self._game_open = True
        return GameState.from_dict(reply["state"])

    def step(self, command: str) -> GameState:
        """Send a command to the worker's game."""
        if not self.alive or not self._game_open:
            code = self._proc.poll() if self._proc is not None else None
            self._reap()
            raise GameProcessError(f"the game process is not running (exit code {code})")
        reply = self._request({"op": "step", "command": command}, self.step_timeout)
        return GameState.from_dict(reply["state"])

    def call(self, fn: str, /, **kwargs: Any) -> Any:
        """Call a lumos-gym helper in the worker; its arguments and result are JSON values."""
        self._ensure()
        return self._request({"op": "call", "fn": fn, "kwargs": kwargs}, _CALL_TIMEOUT)["result"]

    def close_game(self) -> None:
        """Close the worker's game (the worker keeps running for the next one)."""
        if not self._game_open:
            return
        self._game_open = False
        if self.alive:
            try:
                self._request({"op": "close_game"}, max(self.step_timeout, 10.0))
            except LumosGymError:
                pass  # a worker that fails here is reaped; the next open starts a new one

    def close(self) -> None:
        """Stop the worker and reap it."""
        self._game_open = False
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._proc = None
        self._buffer.clear()

    # ---------------------------------------------------------------------------- internals
    def _ensure(self) -> None:
        if self.alive:
            return
        self._reap()
        env = {**os.environ, **self._env}
        paths = [p for p in sys.path if p]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a Ctrl-C meant for the agent does not kill the game
            )
        except OSError as e:
            raise GameProcessError(f"cannot start the game process: {e}") from e
        self._proc = proc
        self._buffer.clear()
        self._finalizer = weakref.finalize(self, _stop_process, proc)

    def _reap(self) -> None:
        """Forget a dead worker (reaping it)."""
        if self._proc is not None and self._proc.poll() is not None:
            self.close()

    def _fail(self, reason: str) -> GameProcessError:
        proc = self._proc
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            try:
                code = proc.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                code = None
        pid = proc.pid if proc is not None else None
        self.close()
        return GameProcessError(f"the game process (pid {pid}) {reason} (exit code {code})")

    def _request(self, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise GameProcessError("the game process is not running")
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise self._fail(f"closed its input ({type(e).__name__})") from e
        line = self._read_line(proc, timeout)
        try:
            reply = json.loads(line)
        except ValueError as e:
            raise self._fail(f"sent a line that is not JSON: {line[:80]!r}") from e
        if not reply.get("ok"):
            raise GameEngineError(str(reply.get("error", "unknown engine error")))
        return reply

    def _read_line(self, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(f"did not answer within {timeout:g} s and was killed")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._fail("exited")
            self._buffer += chunk
        index = self._buffer.index(b"\n")
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        return line


def serve_worker() -> None:
    """Serve engine requests on stdin/stdout until told to exit or stdin closes.

    The protocol is one JSON object per line each way. Anything the engines print goes to
    stderr, so that stdout carries only replies.
    """
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    runner = _Runner()
    requests = sys.stdin.buffer
    while True:
        line = requests.readline()
        if not line:
            break
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "exit":
                break
            if op == "open":
                state = runner.open(str(request["engine"]), request.get("options") or {})
                reply: dict[str, Any] = {"ok": True, "state": state.to_dict()}
            elif op == "step":
                reply = {"ok": True, "state": runner.step(str(request["command"])).to_dict()}
            elif op == "close_game":
                runner.close_game()
                reply = {"ok": True}
            elif op == "call":
                result = runner.call(str(request["fn"]), request.get("kwargs") or {})
                reply = {"ok": True, "result": result}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as e:  # every failure goes back to the env as a reply
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        channel.write(json.dumps(reply) + "\n")
        channel.flush()
    runner.close_game()
