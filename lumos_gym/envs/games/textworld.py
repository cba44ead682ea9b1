"""TextWorld games (Côté et al., 2018) made with its own generator, or any Z-machine game file.

Generated games: ``TextWorldEnv(challenge=..., level=..., num_games=..., seed=...)`` makes each
game with TextWorld's challenge generators (what ``tw-make <challenge> --seed N`` runs:
``textworld.challenges.CHALLENGES[name]`` then ``textworld.generator.compile_game``, Inform7
compiling to ``.z8``; TextWorld 1.7 compiles to the Z-machine only). Four challenges, each at
five levels of our own choosing:

======================== =====================================================================
challenge                levels 1-5 (the challenge's own settings)
======================== =====================================================================
``tw-coin_collector``    ``level`` 1, 5, 10, 105, 210 (a chain of rooms to the coin; levels
                         over 100 add dead-end rooms)
``tw-treasure_hunter``   ``level`` 1, 5, 10, 15, 25 (find the named object in a maze; from 11,
                         closed doors and containers)
``tw-simple``            ``rewards``/``goal``: dense/detailed, balanced/detailed, dense/brief,
                         balanced/brief, sparse/brief
``tw-cooking``           recipe of 1-3 ingredients to find in 1-12 rooms, with opening,
                         cooking, cutting and a limited inventory added level by level
======================== =====================================================================

``challenge="mixed"`` (the default) cycles through the four: game ``i`` uses
``CHALLENGES[i % 4]`` (``tw-simple``, ``tw-coin_collector``, ``tw-treasure_hunter``,
``tw-cooking``). ``levels=[1, 2, ...]`` makes ``num_games`` games at each level (the same game
numbers, so the same challenges, at every level); each task's ``meta`` holds its ``level`` and
``challenge``. At level 1 the coin collector and the treasure hunter are won by one command
(``take coin``), the cooking game by a handful; ``tw-simple`` is a fixed house at every level
(about ten commands, with points along the way). ``settings={...}`` gives the challenge's
settings directly instead of a level. Each game's seed is drawn from
``(split, challenge, settings, seed + i)``, so the ``train`` and ``test`` splits share no game
(``tw-simple`` and ``tw-cooking`` also draw from their own train/test content distributions).
A ``validation`` split, for choices made before a test run (checkpoints, learning rates, round
limits), makes the same series with game seeds of its own: train and test seeds are below
:data:`VALIDATION_SEEDS` and validation seeds at or above it, so it shares no game seed, hence no
game, with either; ``tw-cooking`` draws from TextWorld's own ``valid`` content split (foods and
preparations of neither train nor test) and ``tw-simple`` from its train distribution.
When TextWorld cannot make a quest for a seed (``QuestGenerationError``, e.g.
``tw-treasure_hunter`` at some seeds of level 3), the next of a fixed series of seeds drawn from
the first is tried.

Games are made once and cached under ``cache_root()/textworld/tw-<version>/`` (or
``cache_dir``), one folder per game named by its parameters, holding ``game.z8``, TextWorld's
``game.json`` and ``game.ni``, and ``lumos-task.json`` (objective, walkthrough, opening text);
a game is made in a temporary folder and renamed into place, so that concurrent makes are safe
and a second make reuses the first.

Given games: ``TextWorldEnv(games=["path/to/game.z8", ...])`` plays any ``.z1``-``.z8`` file;
with TextWorld's ``.json`` beside it, the objective, walkthrough and score come from it. TextWorld
1.7 no longer plays Glulx (``.ulx``) games.

Tasks: the question is the game's objective; gold actions are its walkthrough (TextWorld's
``game.metadata["walkthrough"]``, or the ``policy_commands`` its planner gives at the start when
there is none), cut at the winning command and grouped into subgoals
(:func:`~lumos_gym.envs.games.base.group_commands`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from lumos_gym.envs.games.base import (
    GAME_ANSWER,
    GameEngine,
    GameEngineError,
    GameEnv,
    GameState,
    first_observation,
    gold_steps,
    group_commands,
)
from lumos_gym.envs.sources import GeneratedSource, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError
from lumos_gym.jsonl import cache_root, publish_folder

__all__ = [
    "CHALLENGES",
    "LEVELS",
    "SPLITS",
    "VALIDATION_SEEDS",
    "GameRecipe",
    "TextWorldEngine",
    "TextWorldEnv",
    "challenge_settings",
    "clean_intro",
    "describe_game",
    "make_game",
    "recipes",
]

CHALLENGES = ("tw-simple", "tw-coin_collector", "tw-treasure_hunter", "tw-cooking")
SPLITS = ("train", "validation", "test")
MIXED = "mixed"
VALIDATION_SEEDS = 65_536
"""The first game seed of the ``validation`` split (train and test seeds are all below it)."""

_COOKING = {"recipe_seed": 0, "open": False, "cook": False, "cut": False, "drop": False}

#: The settings of each challenge at levels 1-5 (the arguments of ``tw-make <challenge>``).
LEVELS: dict[str, tuple[dict[str, Any], ...]] = {
    "tw-coin_collector": tuple({"level": n} for n in (1, 5, 10, 105, 210)),
    "tw-treasure_hunter": tuple({"level": n} for n in (1, 5, 10, 15, 25)),
    "tw-simple": tuple(
        {"rewards": rewards, "goal": goal}
        for rewards, goal in (("dense", "detailed"), ("balanced", "detailed"), ("dense", "brief"),
                              ("balanced", "brief"), ("sparse", "brief"))
    ),
    "tw-cooking": (
        {**_COOKING, "recipe": 1, "take": 1, "go": 1, "open": True},
        {**_COOKING, "recipe": 1, "take": 1, "go": 6, "open": True},
        {**_COOKING, "recipe": 2, "take": 2, "go": 6, "open": True, "cook": True},
        {**_COOKING, "recipe": 3, "take": 3, "go": 9, "open": True, "cook": True, "cut": True},
        {**_COOKING, "recipe": 3, "take": 3, "go": 12, "open": True, "cook": True, "cut": True,
         "drop": True},
    ),
}

_ENGINE = "lumos_gym.envs.games.textworld:TextWorldEngine"
_TASK_FILE = "lumos-task.json"
_ATTEMPTS = 8  # seeds tried for one game when TextWorld finds no quest
_GAME_FILE = "tw-game.z8"  # Jericho fully supports TextWorld games named tw-*


def _textworld_version() -> str:
    try:
        return metadata.version("textworld")
    except metadata.PackageNotFoundError:
        return "unknown"


def challenge_settings(challenge: str, *, level: int = 1, split: str = "test",
                       settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return the complete settings a challenge's generator takes.

    Args:
        challenge: one of :data:`CHALLENGES`.
        level: 1-5 (see :data:`LEVELS`), used when ``settings`` is None.
        split: ``train``, ``validation`` or ``test``: ``tw-simple``'s ``test`` flag (off for
            validation) and ``tw-cooking``'s content split (``valid`` for validation).
        settings: the challenge's settings, overriding the level's.

    Raises:
        LumosGymError: an unknown challenge or level.
    """
    if challenge not in LEVELS:
        raise LumosGymError(f"unknown TextWorld challenge {challenge!r}; known: {CHALLENGES}")
    levels = LEVELS[challenge]
    if settings is None:
        if not 1 <= level <= len(levels):
            raise LumosGymError(f"level must be 1-{len(levels)}, got {level}")
        chosen = dict(levels[level - 1])
    else:
        chosen = dict(settings)
    if challenge == "tw-simple":
        chosen.setdefault("test", split == "test")
    elif challenge == "tw-cooking":
        content = "valid" if split == "validation" else split  # TextWorld's name of the split
        chosen = {**_COOKING, "recipe": 1, "take": 0, "go": 1, "split": content, **chosen}
    return chosen


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class GameRecipe:
    """The parameters of one generated game.

    Attributes:
        challenge: the TextWorld challenge.
        settings: its complete settings.
        index: the game's number in its series (the env's ``seed + i``).
        split: ``train``, ``validation`` or ``test``.
        tag: a short name of the settings (``l1``... or ``s<digest>``).
        level: the level 1-5 (None when ``settings`` were given).
    """

    challenge: str
    settings: Mapping[str, Any]
    index: int
    split: str
    tag: str
    level: int | None = None

    @property
    def seed(self) -> int:
        """Return the generator seed, drawn from every parameter (disjoint between splits)."""
        return self.seed_for(0)

    def seed_for(self, attempt: int) -> int:
        """Return the generator seed of a retry (``attempt`` 0 is :attr:`seed`).

        A retry follows a ``QuestGenerationError``: TextWorld found no quest for the seed.
        Train and test seeds are below :data:`VALIDATION_SEEDS`, validation seeds at or above.
        """
        parts: list[Any] = [self.split, self.challenge, dict(self.settings), self.index]
        key = json.dumps(parts + ([attempt] if attempt else []), sort_keys=True)
        seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % 65_536
        return seed + VALIDATION_SEEDS if self.split == "validation" else seed

    @property
    def key(self) -> str:
        """Return the cache folder name of the game."""
        digest = _digest(dict(self.settings))
        return f"{self.split}-{self.challenge}-{self.tag}-{digest}-{self.index}"

    @property
    def task_id(self) -> str:
        """Return the task id, ``textworld/<split>/<challenge>-<tag>/<index>``."""
        return f"textworld/{self.split}/{self.challenge}-{self.tag}/{self.index}"


def _levels(level: int, levels: Sequence[int] | int | None) -> tuple[int, ...]:
    """The levels of a series: ``levels`` when given (one or several), else ``(level,)``."""
    chosen = (level,) if levels is None else (levels,) if isinstance(levels, int) else levels
    out = tuple(dict.fromkeys(chosen))
    for value in out:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            raise LumosGymError(f"TextWorld levels are 1-5, got {value!r}")
    if not out:
        raise LumosGymError("levels must name at least one level (1-5)")
    return out


def recipes(
    *,
    challenge: str = MIXED,
    level: int = 1,
    levels: Sequence[int] | int | None = None,
    settings: Mapping[str, Any] | None = None,
    num_games: int = 4,
    seed: int = 0,
    split: str = "test",
) -> list[GameRecipe]:
    """Return the recipes of a series of games (game ``i`` of ``mixed`` uses challenge ``i % 4``).

    Args:
        challenge: ``mixed`` or one of :data:`CHALLENGES`.
        level: the level (1-5) when ``levels`` is None.
        levels: several levels: ``num_games`` games at each, level by level.
        settings: the challenge's own settings instead of a level.
        num_games: games per level.
        seed: the number of the first game.
        split: ``train``, ``validation`` or ``test``.

    Raises:
        LumosGymError: an unknown challenge, level or split.
    """
    if split not in SPLITS:
        raise LumosGymError(f"split must be one of {SPLITS}, got {split!r}")
    if num_games < 0:
        raise LumosGymError(f"num_games must be >= 0, got {num_games}")
    if challenge != MIXED and challenge not in CHALLENGES:
        raise LumosGymError(f"unknown TextWorld challenge {challenge!r}; known: {CHALLENGES}")
    if settings is not None:
        if levels is not None:
            raise LumosGymError("give settings or levels, not both")
        series: tuple[int | None, ...] = (None,)
    else:
        series = _levels(level, levels)
    out = []
    for at in series:
        for i in range(seed, seed + num_games):
            name = CHALLENGES[i % len(CHALLENGES)] if challenge == MIXED else challenge
            chosen = challenge_settings(name, level=at or 1, split=split, settings=settings)
            tag = f"l{at}" if settings is None else f"s{_digest(dict(settings))}"
            out.append(GameRecipe(name, chosen, i, split, tag, at))
    return out


# ---------------------------------------------------------------------------------------------
# Helpers run in the engine host (they import textworld)


def make_game(*, challenge: str, settings: Mapping[str, Any], seed: int, folder: str) -> str:
    """Make one game with a TextWorld challenge generator into ``folder`` (as ``game.z8``).

    Returns:
        The path of the compiled game.
    """
    import textworld
    import textworld.challenges

    options = textworld.GameOptions()
    options.seeds = int(seed)
    options.path = str(Path(folder) / _GAME_FILE)
    options.file_ext = ".z8"
    options.force_recompile = True
    _, make, _ = textworld.challenges.CHALLENGES[challenge]
    game = make(settings=dict(settings), options=options)
    return str(textworld.generator.compile_game(game, options))


def clean_intro(text: str) -> str:
    """Drop TextWorld's ASCII-art banner (leading lines without a word) from an opening text."""
    lines = text.split("\n")
    start = 0
    while start < len(lines) and not re.search(r"[A-Za-z]{2}", lines[start]):
        start += 1
    return "\n".join(lines[start:]).strip("\n")


def _playable(path: Path) -> tuple[str, str | None]:
    """Return a path Jericho fully supports (score, end of game) for a game file.

    Jericho recognises a TextWorld game by a file name starting with ``tw-``; a TextWorld game
    (one with its ``.json``) named otherwise is linked under such a name in a temporary folder,
    returned second (None when no link was needed) for the caller to remove.
    """
    json_path = path.with_suffix(".json")
    if path.name.startswith("tw-") or not json_path.is_file():
        return str(path), None
    folder = tempfile.mkdtemp(prefix="lumos-tw-")
    for source in (path, json_path):
        target = Path(folder) / f"tw-{source.name}"
        try:
            os.symlink(source.resolve(), target)
        except OSError:
            shutil.copyfile(source, target)
    return str(Path(folder) / f"tw-{path.name}"), folder


def _winning_prefix(path: str, commands: list[str]) -> list[str] | None:
    """Play ``commands`` from the start; return them up to the win, or None if they never win."""
    engine = TextWorldEngine(path)
    try:
        engine.start()
        for n, command in enumerate(commands, 1):
            state = engine.step(command)
            if state.won:
                return commands[:n]
            if state.lost:
                return None
        return None
    finally:
        engine.close()


def describe_game(*, path: str) -> dict[str, Any]:
    """Start a game once and return its objective, opening text, walkthrough and maximum score.

    The walkthrough is TextWorld's own (``game.json`` metadata), else the planner's
    ``policy_commands`` at the start (else Jericho's for games it knows), cut at the command
    that wins; the first of them that wins is kept (the first at all when none does).
    """
    import textworld

    infos = textworld.EnvInfos(objective=True, max_score=True, policy_commands=True,
                               extras=["walkthrough"])
    playable, tmp = _playable(Path(path))
    env = textworld.start(playable, request_infos=infos)
    try:
        state = env.reset()
        candidates = [[str(c) for c in state.get(key) or []]
                      for key in ("extra.walkthrough", "policy_commands")]
        max_score = state.get("max_score")
        description = {
            "objective": str(state.get("objective") or ""),
            "intro": clean_intro(str(state.feedback or "")),
            "max_score": float(max_score) if max_score else None,
        }
    finally:
        env.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    candidates = [c for c in candidates if c]
    winning = (_winning_prefix(path, c) for c in candidates)
    fallback = candidates[0] if candidates else []
    description["walkthrough"] = next((w for w in winning if w), fallback)
    return description


class TextWorldEngine(GameEngine):
    """Plays a Z-machine game through TextWorld (Jericho; with ``game.json``, its game logic).

    Args:
        path: the game file.
        admissible: report the admissible commands (TextWorld games with their ``game.json``).
    """

    def __init__(self, path: str, admissible: bool = False) -> None:
        import textworld

        self.admissible = admissible
        infos = textworld.EnvInfos(score=True, max_score=True, won=True, lost=True,
                                   admissible_commands=admissible)
        playable, self._tmp = _playable(Path(path))
        self._env = textworld.start(playable, request_infos=infos)
        self._max_score: float | None = None

    def _state(self, state: Any, text: str) -> GameState:
        max_score = state.get("max_score") or self._max_score or 1
        self._max_score = max_score
        admissible = state.get("admissible_commands") if self.admissible else None
        return GameState(
            text=text,
            score=float(state.get("score") or 0),
            max_score=float(max_score),
            won=bool(state.get("won")),
            lost=bool(state.get("lost")),
            admissible=None if admissible is None else tuple(admissible),
        )

    def start(self) -> GameState:
        """Start the game; the opening text comes without TextWorld's banner."""
        state = self._env.reset()
        return self._state(state, clean_intro(str(state.feedback or "")))

    def step(self, command: str) -> GameState:
        """Send one command."""
        state, _, _ = self._env.step(command)
        return self._state(state, str(state.feedback or "").strip("\n"))

    def close(self) -> None:
        """Close the interpreter (and remove the linked copy, if any)."""
        self._env.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


# ---------------------------------------------------------------------------------------------
# The cache


@dataclass(frozen=True)
class _Described:
    path: Path
    description: dict[str, Any]


def _read_description(folder: Path) -> dict[str, Any] | None:
    try:
        with open(folder / _TASK_FILE, encoding="utf-8") as f:
            return dict(json.load(f))
    except (OSError, ValueError):
        return None


def _ensure_game(recipe: GameRecipe, root: Path, host: Callable[[], Any]) -> _Described:
    """Return the cached game of ``recipe``, making it first (in ``host()``) when not cached."""
    folder = root / recipe.key
    description = _read_description(folder)
    if description is None:

        def make(tmp: Path) -> bool:
            for attempt in range(_ATTEMPTS):
                seed = recipe.seed_for(attempt)
                try:
                    path = host().call("lumos_gym.envs.games.textworld:make_game",
                                       challenge=recipe.challenge,
                                       settings=dict(recipe.settings), seed=seed,
                                       folder=str(tmp))
                    break
                except GameEngineError as e:
                    if "QuestGenerationError" not in str(e) or attempt == _ATTEMPTS - 1:
                        raise
            made = host().call("lumos_gym.envs.games.textworld:describe_game", path=path)
            made["tw_seed"] = seed
            with open(tmp / _TASK_FILE, "w", encoding="utf-8") as f:
                json.dump(made, f, indent=1, sort_keys=True)
            return True

        publish_folder(folder, make)  # another process may have made the same game first
        description = _read_description(folder)
    if description is None:
        raise DataError(f"{folder}: the cached TextWorld game has no {_TASK_FILE}")
    return _Described(folder / _GAME_FILE, description)


def _make_task(task_id: str, described: _Described, meta: Mapping[str, Any]) -> Task:
    info = described.description
    objective = str(info.get("objective") or "").strip()
    intro = str(info.get("intro") or "")
    question = objective or intro or "Play the game and win it."
    commands = [str(c) for c in info.get("walkthrough") or []]
    try:
        gold = gold_steps(group_commands(commands)) if commands else ()
    except ValueError:
        gold = ()
    return Task(
        id=task_id,
        question=question,
        answer=GAME_ANSWER,
        task_type="game",
        gold_actions=gold,
        meta={
            **dict(meta),
            "engine": "textworld",
            "path": str(described.path),
            "gold_commands": commands,
            "observation": first_observation(question, intro),
            "max_score": info.get("max_score"),
        },
    )


# ---------------------------------------------------------------------------------------------
# The env


class TextWorldEnv(GameEnv):
    """TextWorld text adventures: generated by challenge and level, or given as game files.

    Args:
        games: game files (``.z1``-``.z8``) to play instead of generated games.
        challenge: ``mixed`` (default: the four in turn) or one of :data:`CHALLENGES`.
        level: difficulty 1-5 (see :data:`LEVELS`).
        levels: several levels instead of ``level`` (``[1, 2]``): ``num_games`` games at each;
            each task's ``meta["level"]`` says which.
        settings: the challenge's own settings instead of a level.
        num_games: how many games to generate (at each level).
        seed: the number of the first game (games ``seed`` .. ``seed + num_games - 1``).
        split: ``train``, ``validation`` (for choices made before a test run) or ``test``:
            disjoint game seeds, hence disjoint games (see the module docstring).
        cache_dir: where generated games are kept (default ``cache_root()/textworld``).
        **options: :class:`~lumos_gym.envs.games.base.GameEnv` options (``admissible``,
            ``isolate``, ``step_timeout``) and :class:`~lumos_gym.envs.base.LumosEnv` options.
    """

    dataset: ClassVar[str] = "textworld"

    def __init__(
        self,
        *,
        games: Sequence[str | os.PathLike[str]] | None = None,
        challenge: str = MIXED,
        level: int = 1,
        levels: Sequence[int] | int | None = None,
        settings: Mapping[str, Any] | None = None,
        num_games: int = 4,
        seed: int = 0,
        split: str = "test",
        cache_dir: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        root = Path(cache_dir) if cache_dir is not None else cache_root() / "textworld"
        self.cache_dir = root / f"tw-{_textworld_version()}"
        if games is not None:
            paths = [Path(g).expanduser() for g in games]
            source: TaskSource = GeneratedSource(
                lambda: self._given_tasks(paths),
                {"generator": "textworld-files", "games": [str(p) for p in paths]},
            )
        else:
            series = recipes(challenge=challenge, level=level, levels=levels, settings=settings,
                             num_games=num_games, seed=seed, split=split)
            params = {"generator": "textworld", "challenge": challenge, "level": level,
                      **({} if levels is None else {"levels": list(_levels(level, levels))}),
                      "settings": dict(settings or {}), "num_games": num_games, "seed": seed,
                      "split": split, "textworld": _textworld_version()}
            source = GeneratedSource(lambda: self._generated_tasks(series), params)
        super().__init__(tasks=source, **options)

    def engine_for(self, task: Task) -> tuple[str, dict[str, Any]]:
        """Return the TextWorld engine and the task's game file."""
        return _ENGINE, {"path": str(task.meta["path"])}

    def _generated_tasks(self, series: Sequence[GameRecipe]) -> list[Task]:
        tasks = []
        for recipe in series:
            described = _ensure_game(recipe, self.cache_dir, lambda: self.host)
            meta: dict[str, Any] = {
                "challenge": recipe.challenge, "settings": dict(recipe.settings),
                "split": recipe.split,
                "tw_seed": described.description.get("tw_seed", recipe.seed),
            }
            if recipe.level is not None:
                meta["level"] = recipe.level
            tasks.append(_make_task(recipe.task_id, described, meta))
        return tasks

    def _given_tasks(self, paths: Sequence[Path]) -> list[Task]:
        tasks = []
        seen: dict[str, int] = {}
        for path in paths:
            if path.suffix == ".ulx":
                raise DataError(f"{path}: Glulx (.ulx) games need TextWorld < 1.7; this "
                                "TextWorld plays Z-machine games (.z1-.z8) only")
            if not re.fullmatch(r"\.z[1-8]", path.suffix):
                raise DataError(f"{path}: not a Z-machine game file (.z1-.z8)")
            if not path.is_file():
                raise DataError(f"{path}: no such game file")
            described = _Described(path.resolve(), self.host.call(
                "lumos_gym.envs.games.textworld:describe_game", path=str(path.resolve())))
            stem = path.stem
            seen[stem] = seen.get(stem, 0) + 1
            task_id = f"textworld/file/{stem}" + (f"-{seen[stem]}" if seen[stem] > 1 else "")
            tasks.append(_make_task(task_id, described, {"file": path.name}))
        return tasks
