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

This module holds the sessions and :class:`GameEnv`; the engines and hosts are in
:mod:`lumos_gym.envs.games.hosts`, the gold trajectories' grouping and phrasing in
:mod:`lumos_gym.envs.games.gold`. Their public names are importable from here too.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lumos_gym.envs.base import EpisodeSession, LumosEnv
from lumos_gym.envs.games.gold import (
    MAX_GROUP,
    command_action,
    gold_steps,
    group_commands,
    phrase_command,
    phrase_commands,
)
from lumos_gym.envs.games.hosts import (
    EngineHost,
    GameEngine,
    GameEngineError,
    GameProcessError,
    GameState,
    LocalHost,
    WorkerHost,
    resolve,
    serve_worker,
)
from lumos_gym.envs.sources import TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError
from lumos_gym.tools.games import MAX_COMMAND_CHARS

__all__ = [
    "GAME_ANSWER",
    "GAME_TOOLS",
    "MAX_COMMAND_CHARS",
    "MAX_GROUP",
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
    "resolve",
    "serve_worker",
]

#: The tools of every game env, in grounding-instruction order.
GAME_TOOLS: tuple[str, ...] = ("Command",)
#: Longest game answer kept in an observation (longer answers are cut with a marker).
MAX_REPLY_CHARS = 4_000
#: The gold "answer" of a game task: the episode ends won.
GAME_ANSWER = "won"

_CUT_MARK = "\n[... truncated]"


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
# The first observation


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
