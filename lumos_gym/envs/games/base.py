"""The shared base of the text-game envs (TextWorld, ALFWorld, TextWorldExpress).

A game episode is played through one action, ``Command(command)``: the command goes to the
game engine as typed and the game's answer comes back as the observation (a command the game's
parser rejects gets the game's own answer, e.g. ``That's not a verb I recognise.``). Lumos never
defined game actions (docs/lumos-format.md §2.6); these are ours::

    R1 = Command(go to countertop 1); R2 = Command(take apple 1 from countertop 1)

A bare command (``go north``) is accepted too and read as ``Command(go north)``.

Engines and hosts. A :class:`GameEngine` plays one game (TextWorld's Jericho interpreter,
ALFWorld's TextWorld-PDDL engine). It runs inside an :class:`EngineHost`: by default a
:class:`WorkerHost`, a Python worker process that the env starts on first use, keeps across
episodes and stops on ``close()``, so that a crashing or hanging engine never takes the agent's
process down (a command that takes longer than ``step_timeout`` seconds kills the worker);
``isolate=False`` runs the engine in-process (:class:`LocalHost`). TextWorldExpress brings its
own process, a Java VM (:mod:`lumos_gym.envs.games.twx`). Each episode loads a fresh game into the
host (:class:`GameSession`, closed on the next reset and on ``close()``). When the host process
dies during an episode, the command's observation says so (``Error: the game process ...``),
the episode ends with its metrics so far and ``info["env_error"]`` names the cause; the next
reset starts a new process.

Metrics: ``score`` (the game's score over its maximum, in [0, 1]; 1.0 for a won game), the
primary metric; ``success`` (1.0 when won) and ``moves`` (commands the game received).
The episode ends when the game is won or lost. ``admissible=True`` adds the commands the engine
knows to be valid to ``info["admissible_commands"]`` where the engine lists them; the
walkthrough appears only as ``info["gold_actions"]`` in a privileged env.

Gold trajectories: a game's winning command sequence (its walkthrough or planner solution) is
grouped into subgoals by :func:`group_commands` (moves, looks and openings join the next action
that changes the world) and phrased by :func:`phrase_commands` (``Go to the countertop 1 and
take the apple 1 from the countertop 1.``); each group is one ``step`` of ``Task.gold_actions``.

Hosts speak POSIX pipes (``select``); the worker protocol is one JSON object per line.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import select
import subprocess
import sys
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from lumos_gym.envs.base import EpisodeSession, LumosEnv
from lumos_gym.envs.sources import TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError
from lumos_gym.tools.games import MAX_COMMAND_CHARS

__all__ = [
    "GAME_ANSWER",
    "GAME_TOOLS",
    "MAX_COMMAND_CHARS",
    "MAX_REPLY_CHARS",
    "EngineHost",
    "GameEngine",
    "GameEngineError",
    "GameEnv",
    "GameProcessError",
    "GameSession",
    "GameState",
    "LocalHost",
    "WorkerHost",
    "command_action",
    "first_observation",
    "gold_steps",
    "group_commands",
    "phrase_command",
    "phrase_commands",
    "serve_worker",
]

#: The tools of every game env, in grounding-instruction order.
GAME_TOOLS: tuple[str, ...] = ("Command",)
#: Longest game answer kept in an observation (longer answers are cut with a marker).
MAX_REPLY_CHARS = 4_000
#: The gold "answer" of a game task: the episode ends won.
GAME_ANSWER = "won"
#: Most commands in one subgoal of a gold trajectory.
MAX_GROUP = 4

_OPEN_TIMEOUT = 180.0
_CALL_TIMEOUT = 900.0
_CUT_MARK = "\n[... truncated]"


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


_WORKER_CODE = "from lumos_gym.envs.games.base import serve_worker; serve_worker()"


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


# ---------------------------------------------------------------------------------------------
# Sessions


def _bounded(text: str, limit: int) -> str:
    text = text.strip("\n")
    if len(text) > limit:
        text = text[: limit - len(_CUT_MARK)] + _CUT_MARK
    return text


class GameSession(EpisodeSession):
    """One episode's game, loaded into a host.

    Args:
        host: where the game runs.
        engine: the engine (``"lumos_gym.module:Class"`` or a host-specific name).
        options: the engine's options.
    """

    def __init__(self, host: EngineHost, engine: str, options: Mapping[str, Any]) -> None:
        self.host = host
        self.state = host.open(engine, options)
        self.moves = 0
        self.failure: str | None = None
        self.closed = False

    @property
    def opening(self) -> str:
        """Return the game's opening text."""
        return self.state.text

    @property
    def pid(self) -> int | None:
        """Return the id of the process running the game (None when in-process)."""
        return self.host.pid

    @property
    def admissible(self) -> tuple[str, ...] | None:
        """Return the commands the engine lists as valid now, when it lists them."""
        return self.state.admissible

    @property
    def done(self) -> bool:
        """Return True once the game is won or lost, or its process failed."""
        return self.state.won or self.state.lost or self.failure is not None

    def send(self, command: str) -> str:
        """Send one command; return the game's answer (an ``Error:`` line if the host failed).

        Raises:
            LumosGymError: the session is closed or the game has ended.
        """
        if self.closed:
            raise LumosGymError("the game is closed")
        if self.done:
            raise LumosGymError("the game has ended")
        try:
            state = self.host.step(command)
        except (GameProcessError, GameEngineError) as e:
            self.failure = str(e)
            return f"Error: the game failed: {e}. The episode is over."
        self.moves += 1
        self.state = state
        return _bounded(state.text, MAX_REPLY_CHARS) or "(the game says nothing)"

    def metrics(self) -> dict[str, float]:
        """Return ``score`` (normalised), ``success`` and ``moves``."""
        return {
            "score": self.state.normalized_score(),
            "success": float(self.state.won),
            "moves": float(self.moves),
        }

    def close(self) -> None:
        """Close the game in its host (the host keeps running). Idempotent."""
        if not self.closed:
            self.closed = True
            self.host.close_game()


# ---------------------------------------------------------------------------------------------
# Gold trajectories: grouping and phrasing

_DIRECTIONS = frozenset(
    "north south east west up down northeast northwest southeast southwest left right".split()
)
_SETUP_VERBS = frozenset("go look open examine read inventory i task help".split())
_ARTICLE_PREPS = frozenset({"from", "to", "in", "into", "on", "onto", "with", "under", "at"})
_NO_ARTICLE = frozenset({"the", "a", "an", "some", "up", "down", "and", "around", *_DIRECTIONS})
_PHRASES = {
    "inventory": "check the inventory",
    "i": "check the inventory",
    "look": "look around",
    "look around": "look around",
    "task": "review the task",
    "help": "ask for help",
}


def _is_setup(command: str) -> bool:
    """Moves, looks, examinations and openings: they prepare the next world-changing action."""
    words = command.lower().split()
    if not words:
        return False
    if words[0] == "move":  # TextWorldExpress moves; ALFWorld's 'move X to Y' places an object
        return len(words) == 2 and words[1] in _DIRECTIONS
    return words[0] in _SETUP_VERBS


def group_commands(commands: Sequence[str], *, max_group: int = MAX_GROUP) -> list[list[str]]:
    """Group a winning command sequence into subgoals.

    Setup commands (moves, looks, examinations, openings) join the next command that changes
    the world; a group holds at most ``max_group`` commands, and setup commands left at the end
    form a group of their own.

    Args:
        commands: the commands, in order.
        max_group: the most commands in one group.

    Returns:
        The groups, in order, together holding every command once.
    """
    groups: list[list[str]] = []
    current: list[str] = []
    for command in commands:
        current.append(command)
        if not _is_setup(command) or len(current) >= max_group:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def phrase_command(command: str) -> str:
    """Phrase one command as a clause: ``take apple 1 from countertop 1`` → ``take the apple 1
    from the countertop 1``; ``inventory`` → ``check the inventory``.
    """  # noqa: D205
    text = " ".join(command.split())
    low = text.lower()
    if low in _PHRASES:
        return _PHRASES[low]
    words = text.split(" ")
    out = [words[0].lower()]
    expect_noun = True  # right after the verb comes its object
    for word in words[1:]:
        lower = word.lower()
        if lower in _ARTICLE_PREPS:
            out.append(word)
            expect_noun = True
            continue
        if expect_noun and lower not in _NO_ARTICLE and not lower[:1].isdigit():
            out.append("the")
        out.append(word)
        expect_noun = False
    return " ".join(out)


def phrase_commands(commands: Sequence[str]) -> str:
    """Phrase a group of commands as one subgoal sentence (``Open the fridge 1 and take ...``)."""
    clauses = [phrase_command(c) for c in commands if c.strip()]
    if not clauses:
        return "Continue the game."
    text = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
    return text[:1].upper() + text[1:] + "."


_UNSAFE = re.compile(r"[()\[\]{};\n\r]")


def command_action(variable: str, command: str) -> str:
    """Write ``R<n> = Command(<command>)``.

    Raises:
        ValueError: a command that the action language cannot carry (brackets, ``;``, newlines,
            empty or longer than :data:`MAX_COMMAND_CHARS`).
    """
    text = " ".join(command.split())
    if not text or len(text) > MAX_COMMAND_CHARS or _UNSAFE.search(text):
        raise ValueError(f"the command {command!r} cannot be written as a Command action")
    return f"{variable} = Command({text})"


def gold_steps(groups: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """Write each group as one ``step`` text of ``"; "``-joined Command actions, R1 onwards."""
    steps = []
    number = 0
    for group in groups:
        actions = []
        for command in group:
            number += 1
            actions.append(command_action(f"R{number}", command))
        steps.append("; ".join(actions))
    return tuple(steps)


def first_observation(question: str, opening: str) -> str:
    """Return an episode's first observation: the game's opening text, led by the goal.

    The goal (``question``) is put first unless the opening text already states it.
    """
    opening = opening.strip("\n")
    goal = question.strip()
    if not goal or goal in opening:
        return opening
    return f"{goal}\n\n{opening}" if opening else goal


# ---------------------------------------------------------------------------------------------
# The env

_BARE_COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9 '\-,.:!?/]*")


class GameEnv(LumosEnv):
    """Base of the game envs: one ``Command`` tool, episodes ended by the game.

    Subclasses set ``dataset``, build their tasks and implement :meth:`engine_for` (and
    :meth:`make_host` when their engine needs its own kind of host).

    Args:
        tasks: the tasks or their source (``task.meta`` says which game to load).
        admissible: put the engine's valid commands in ``info["admissible_commands"]``.
        isolate: run the engine in a worker process (default) rather than in this process.
        step_timeout: seconds a command may take before the worker is killed.
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``limit``,
            ``render_mode``, ``privileged``, ``tools``).
    """

    task_type: ClassVar[str] = "game"
    default_tools: ClassVar[tuple[str, ...]] = GAME_TOOLS
    primary_metric: ClassVar[str] = "score"
    default_scorer: ClassVar[str | None] = "games/score"
    ends_by_answer: ClassVar[bool] = False
    #: The converter name of the family (``env.unwrapped.dataset``).
    dataset: ClassVar[str] = "game"

    def __init__(
        self,
        *,
        tasks: Sequence[Task] | TaskSource,
        admissible: bool = False,
        isolate: bool = True,
        step_timeout: float = 60.0,
        **options: Any,
    ) -> None:
        self.admissible = bool(admissible)
        self.isolate = bool(isolate)
        self.step_timeout = float(step_timeout)
        self._host: EngineHost | None = None
        self._session: GameSession | None = None
        super().__init__(tasks=tasks, **options)

    # ------------------------------------------------------------------------ for subclasses
    @abstractmethod
    def engine_for(self, task: Task) -> tuple[str, dict[str, Any]]:
        """Return the engine and its options that play ``task``."""

    def make_host(self) -> EngineHost:
        """Return a new host for this env's engine (a worker process unless ``isolate=False``)."""
        if self.isolate:
            return WorkerHost(step_timeout=self.step_timeout, env=self.worker_env())
        return LocalHost()

    def worker_env(self) -> dict[str, str]:
        """Return environment variables for the worker process (none by default)."""
        return {}

    # ---------------------------------------------------------------------------- contract
    @property
    def host(self) -> EngineHost:
        """Return the env's engine host, started on first use."""
        if self._host is None:
            self._host = self.make_host()
        return self._host

    @property
    def session(self) -> GameSession | None:
        """Return the current episode's game session (None before the first reset)."""
        return self._session

    def open_session(self, task: Task) -> GameSession:
        """Load the task's game into the host."""
        engine, options = self.engine_for(task)
        options = {**options, "admissible": self.admissible}
        self._session = GameSession(self.host, engine, options)
        return self._session

    def task_observation(self, task: Task) -> str:
        """Return the game's opening text, led by the task's goal when it does not state it."""
        opening = self._session.opening if self._session is not None else ""
        return first_observation(task.question, _bounded(opening, 2 * MAX_REPLY_CHARS))

    def rewrite_action(self, text: str) -> str:
        """Read a bare game command (``go north``) as ``Command(go north)``."""
        stripped = text.strip()
        if (
            stripped
            and "\n" not in stripped
            and len(stripped) <= MAX_COMMAND_CHARS
            and _BARE_COMMAND.fullmatch(stripped)
        ):
            return f"Command({stripped})"
        return text

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return the metrics of an episode that never played (a lost game)."""
        return {"score": 0.0, "success": 0.0, "moves": 0.0}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode: load the task's game (see :meth:`LumosEnv.reset`)."""
        observation, info = super().reset(seed=seed, options=options)
        self._add_game_info(info)
        return observation, info

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Run the step's commands (see :meth:`LumosEnv.step`)."""
        observation, reward, terminated, truncated, info = super().step(action)
        self._add_game_info(info, ended=terminated)
        return observation, reward, terminated, truncated, info

    def close(self) -> None:
        """Close the episode's game, the tools and the host process. Idempotent."""
        super().close()
        self._session = None
        host, self._host = self._host, None
        if host is not None:
            host.close()

    def _add_game_info(self, info: dict[str, Any], *, ended: bool = False) -> None:
        session = self._session
        if session is None:
            return
        if self.admissible and session.admissible is not None and not ended:
            info["admissible_commands"] = list(session.admissible)
        if session.failure is not None:
            info["env_error"] = session.failure
