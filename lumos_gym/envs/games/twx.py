"""TextWorldExpress (Jansen and Côté, 2022): fast text-game simulators, played through its JVM.

The ``textworld-express`` package runs its eight games (:data:`GAMES`) in a Java VM that it
starts and talks to over py4j (``textworld_express.TextWorldExpressEnv``); java must be on the
PATH. One VM serves an env (started on first use, stopped on ``close()``, restarted at the next
reset when it died); each episode resets it to the task's game and seed.

Tasks are ``(game, seed)`` pairs of one of the package's folds: seeds are the first
``num_tasks`` of ``getValidSeeds{Train,Dev,Test}()`` (or ``seeds=[...]``), ``game_params``
the game's options (e.g. ``"numLocations=5,includeDoors=1"``). The question is the game's task
description; gold actions are ``getGoldActionSequence()`` (asked for with
``generateGoldPath=True``), cut at the action that completes the task. Scores are the
package's normalised score (clipped to [0, 1]); the episode ends on ``tasksuccess`` (won) or
``taskfailure`` (lost). The package's own step limit is set out of reach so that the env's
``max_episode_steps`` rules.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lumos_gym.envs.games.base import (
    GAME_ANSWER,
    EngineHost,
    GameEngineError,
    GameEnv,
    GameProcessError,
    GameState,
    first_observation,
    gold_steps,
    group_commands,
)
from lumos_gym.envs.sources import GeneratedSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError

__all__ = ["FOLDS", "GAMES", "TextWorldExpressEnv", "TwxHost", "twx_available"]

#: The package's games (``textworld_express.constants.GAME_NAMES``).
GAMES = ("coin", "mapreader", "sorting", "arithmetic", "twc", "cookingworld", "simonsays",
         "peckingorder")
#: Its seed folds, by our split names.
FOLDS = {"train": "train", "dev": "dev", "test": "test"}
_NO_LIMIT = 10**9


def twx_available() -> str | None:
    """Return None when TextWorldExpress can run here, else why not (for errors and skips)."""
    import importlib.util

    if importlib.util.find_spec("textworld_express") is None:
        return "the textworld-express package is not installed (pip install 'lumos-gym[games]')"
    if shutil.which("java") is None:
        return "java is not on the PATH (TextWorldExpress runs in a Java VM)"
    return None


def _params(game_params: str | Mapping[str, Any]) -> str:
    if isinstance(game_params, str):
        return game_params
    return ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in game_params.items())


class TwxHost(EngineHost):
    """A TextWorldExpress Java VM playing one game at a time.

    Args:
        admissible: report the game's valid actions.
    """

    def __init__(self, *, admissible: bool = False) -> None:
        self.admissible = admissible
        self._env: Any = None
        self._task = ""
        self._open = False

    @property
    def pid(self) -> int | None:
        """Return the Java VM's process id (None when it is not running)."""
        proc = self._process()
        return proc.pid if proc is not None else None

    def _process(self) -> subprocess.Popen[bytes] | None:
        gateway = getattr(self._env, "_gateway", None)
        return getattr(gateway, "java_process", None)

    @property
    def alive(self) -> bool:
        """Return True while the Java VM runs."""
        proc = self._process()
        return proc is not None and proc.poll() is None

    def _ensure(self) -> Any:
        if self._env is not None and self.alive:
            return self._env
        self.close()
        reason = twx_available()
        if reason is not None:
            raise LumosGymError(f"TextWorldExpress cannot run: {reason}")
        from textworld_express import TextWorldExpressEnv as _Express

        try:
            env = _Express(envStepLimit=_NO_LIMIT)
        except Exception as e:  # py4j and the JVM launcher raise many types
            raise GameProcessError(f"cannot start TextWorldExpress's Java VM: {e}") from e
        # The games never call back into Python: stop py4j's callback server, whose threads
        # would otherwise log tracebacks in the background when the VM dies.
        env._gateway.shutdown_callback_server()
        self._env = env
        return env

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.alive:
            proc = self._process()
            code = proc.poll() if proc is not None else None
            self.close()
            raise GameProcessError(
                f"the TextWorldExpress Java VM is not running (exit code {code})"
            )
        try:
            return fn(*args, **kwargs)
        except ValueError as e:  # the package's own refusal (e.g. bad game parameters)
            raise GameEngineError(str(e)) from e
        except Exception as e:  # py4j: a Java exception, or the VM died / the link broke
            from py4j.protocol import Py4JJavaError

            if isinstance(e, Py4JJavaError):
                raise GameEngineError(f"TextWorldExpress failed: {e}") from e
            proc = self._process()
            code = None
            if proc is not None:
                try:  # py4j's own thread reaps the VM; wait for its exit code
                    code = proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    code = None
            self.close()
            state = "died" if code is not None else "stopped answering and was stopped"
            raise GameProcessError(f"the TextWorldExpress Java VM {state} (exit code {code}): "
                                   f"{type(e).__name__}") from e

    def describe(self, game: str, seed: int, fold: str, params: str) -> dict[str, Any]:
        """Reset to a game with its gold path; return its task, opening text and gold path.

        The gold path is played once and cut at the action that completes the task (some
        games' paths go on after it).
        """
        env = self._ensure()
        obs, infos = self._call(env.reset, seed=seed, gameFold=fold, gameName=game,
                                gameParams=params, generateGoldPath=True)
        gold = [str(a) for a in self._call(env.getGoldActionSequence)]
        for n, action in enumerate(gold, 1):
            _, _, _, step_infos = self._call(env.step, action)
            if step_infos.get("tasksuccess"):
                gold = gold[:n]
                break
        return {"task": str(infos.get("taskDescription", "")), "opening": str(obs), "gold": gold}

    def open(self, engine: str, options: Mapping[str, Any]) -> GameState:
        """Reset the VM to the task's game (``options``: game, seed, fold, params).

        A VM found dead here (it died between episodes) is replaced once.
        """
        kwargs = {"seed": int(options["seed"]), "gameFold": str(options["fold"]),
                  "gameName": str(options["game"]), "gameParams": str(options.get("params", "")),
                  "generateGoldPath": False}
        try:
            obs, infos = self._call(self._ensure().reset, **kwargs)
        except GameProcessError:
            obs, infos = self._call(self._ensure().reset, **kwargs)
        self._task = str(infos.get("taskDescription", ""))
        self._open = True
        return self._state(first_observation(self._task, str(obs)), infos)

    def _state(self, text: str, infos: Mapping[str, Any]) -> GameState:
        actions = infos.get("validActions") if self.admissible else None
        return GameState(
            text=text,
            score=float(infos.get("score") or 0.0),
            max_score=1.0,
            won=bool(infos.get("tasksuccess")),
            lost=bool(infos.get("taskfailure")),
            admissible=None if actions is None else tuple(sorted(str(a) for a in actions)),
        )

    def step(self, command: str) -> GameState:
        """Send one command to the VM's game."""
        if not self._open:
            raise GameProcessError("no TextWorldExpress game is open")
        obs, _, _, infos = self._call(self._env.step, command)
        return self._state(str(obs), infos)

    def close_game(self) -> None:
        """Forget the open game (the VM keeps running)."""
        self._open = False

    def close(self) -> None:
        """Stop the Java VM and reap it. Idempotent."""
        env, self._env = self._env, None
        self._open = False
        if env is None:
            return
        gateway = getattr(env, "_gateway", None)
        proc = getattr(gateway, "java_process", None)
        running = proc is not None and _running(proc)
        if running:
            try:
                env.close()
            except Exception:  # noqa: S110 - the VM may die while shutting down
                pass
        env.close = lambda: None  # its __del__ closes again; once is enough
        client = getattr(gateway, "_gateway_client", None)
        if client is not None:
            # py4j's finalizers of Java proxies contact the VM unless told it is gone; on a
            # dead VM they would log connection tracebacks from inside garbage collection
            client.is_connected = False
        if proc is not None:  # py4j's own threads read its output to the end and reap it
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdin is not None:  # py4j opens the VM's stdin pipe and never closes it
                proc.stdin.close()


def _running(proc: subprocess.Popen[bytes]) -> bool:
    """Return True while a process runs (``poll`` alone can say None while py4j's thread reaps
    it, so wait a moment for an exit code)."""  # noqa: D205, D209, D415
    try:
        proc.wait(timeout=0.05)
    except subprocess.TimeoutExpired:
        return True
    return False


class TextWorldExpressEnv(GameEnv):
    """TextWorldExpress games by seed (needs java and the ``textworld-express`` package).

    Args:
        games: game names (default all of :data:`GAMES`), or one name.
        split: the package's seed fold: ``train``, ``dev`` or ``test`` (default).
        num_tasks: seeds per game.
        seeds: the seeds to use instead of the fold's first ``num_tasks``.
        game_params: the game's options, as the package's string or a mapping.
        **options: :class:`~lumos_gym.envs.games.base.GameEnv` options (``admissible``,
            ``step_timeout``) and :class:`~lumos_gym.envs.base.LumosEnv` options.

    Raises:
        LumosGymError: java or the package is missing, or an unknown game or split.
    """

    dataset: ClassVar[str] = "textworld-express"

    def __init__(
        self,
        *,
        games: Sequence[str] | str = GAMES,
        split: str = "test",
        num_tasks: int = 2,
        seeds: Sequence[int] | None = None,
        game_params: str | Mapping[str, Any] = "",
        **options: Any,
    ) -> None:
        reason = twx_available()
        if reason is not None:
            raise LumosGymError(f"lumos/TextWorldExpress-v0 cannot run: {reason}")
        names = (games,) if isinstance(games, str) else tuple(games)
        unknown = [g for g in names if g not in GAMES]
        if unknown:
            raise LumosGymError(f"unknown TextWorldExpress games {unknown}; known: {GAMES}")
        if split not in FOLDS:
            raise LumosGymError(f"split must be one of {tuple(FOLDS)}, got {split!r}")
        self.fold = FOLDS[split]
        self.params = _params(game_params)
        chosen = None if seeds is None else [int(s) for s in seeds]
        params = {"generator": "textworld-express", "games": list(names), "split": split,
                  "num_tasks": num_tasks, "seeds": chosen, "game_params": self.params}
        options.pop("isolate", None)  # the game already runs in its own process, the JVM
        super().__init__(
            tasks=GeneratedSource(lambda: self._tasks(names, num_tasks, chosen), params),
            **options,
        )

    def make_host(self) -> TwxHost:
        """Return a TextWorldExpress VM host."""
        return TwxHost(admissible=self.admissible)

    def engine_for(self, task: Task) -> tuple[str, dict[str, Any]]:
        """Return the task's game, seed, fold and parameters."""
        meta = task.meta
        return "textworld-express", {"game": meta["game"], "seed": meta["seed"],
                                     "fold": meta["fold"], "params": meta["params"]}

    def _seeds(self, host: TwxHost, num_tasks: int) -> list[int]:
        env = host._ensure()
        getter = {"train": env.getValidSeedsTrain, "dev": env.getValidSeedsDev,
                  "test": env.getValidSeedsTest}[self.fold]
        return [int(s) for s in host._call(getter)[:num_tasks]]

    def _tasks(self, names: Sequence[str], num_tasks: int, seeds: list[int] | None) -> list[Task]:
        host = self.host
        assert isinstance(host, TwxHost)
        chosen = seeds if seeds is not None else self._seeds(host, num_tasks)
        tasks = []
        for game in names:
            for seed in chosen:
                info = host.describe(game, seed, self.fold, self.params)
                question = info["task"].strip()
                commands = info["gold"]
                try:
                    gold = gold_steps(group_commands(commands))
                except ValueError:
                    gold = ()
                suffix = f"/{self.params}" if self.params else ""
                tasks.append(Task(
                    id=f"twx/{self.fold}/{game}/{seed}{suffix}",
                    question=question,
                    answer=GAME_ANSWER,
                    task_type="game",
                    gold_actions=gold,
                    meta={"engine": "textworld-express", "game": game, "seed": seed,
                          "fold": self.fold, "params": self.params, "gold_commands": commands,
                          "observation": first_observation(question, info["opening"])},
                ))
        return tasks
