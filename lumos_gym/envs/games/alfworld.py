"""ALFWorld household tasks (Shridhar et al., 2021) played through ALFWorld's own text engine.

ALFWorld's text games are PDDL problems in its ALFRED domain (``alfworld/data/alfred.pddl`` of
the ``alfworld`` package), told in words by its grammar (``alfworld/data/alfred.twl2``) and
played by TextWorld's PDDL engine (``textworld.envs.PddlEnv``, planning with Fast Downward)
wrapped in ALFWorld's ``AlfredDemangler`` (object ids to names such as ``apple 1``) and
``AlfredInfos``; this is how ``alfworld.agents.environment.alfred_tw_env`` builds its envs.
A game file (``game.tw-pddl``) is JSON with ``pddl_domain``, ``grammar`` (the task sentence put
in place of ``UNKNOWN GOAL``, as ``alfworld.agents.utils.misc.add_task_to_grammar`` does),
``pddl_problem``, ``solvable`` and ``walkthrough`` (format of ``alfworld-generate``).

Two task sources:

* ``source="generated"`` (default, offline): rooms (kitchen, bathroom, bedroom, living room),
  receptacles, objects and their placements from our own seeded generator, one problem per
  ALFWorld task type (:data:`TASK_TYPES`) and seed, written in the ALFRED domain with the goal
  of that type and ALFWorld's task sentences (``alfworld/gen/goal_library.py``: ``put a clean
  apple in fridge``...). Gold actions are the ``policy_commands`` of the engine's planner, kept
  only when replaying them wins. Problems are cached under ``cache_root()/alfworld/``.
  Two levels (:data:`LEVELS`, ``levels=[1, 2]``; each task's ``meta["level"]``): level 2 (the
  default) is a whole room, 6-26 receptacles with objects in closed cabinets, drawers and
  fridges; level 1 is a small room of at most three receptacles, one of each class the task
  needs (where the object lies, where it goes, the sink basin, microwave, fridge or lamp stand)
  plus at times a spare one, with the object in plain sight on a receptacle that does not
  open. A level-1 problem belongs to the split its content's digest names (:func:`split_of`),
  so that the splits stay disjoint although small rooms repeat more often. A ``validation``
  split, for choices made before a test run (checkpoints, learning rates, round limits), draws
  from a random stream of its own at both levels; at level 1 it keeps only problems of the
  train digest (so never a test problem), and at both levels it skips every problem that the
  first :data:`VALIDATION_GUARD` seeds of the train split (and, at level 2, of the test split)
  may use, so it shares no game with them.
* ``source="official"`` (or ``data_path=...``): ALFWorld's data folder as ``alfworld-download``
  leaves it, ``<data>/json_2.1.1/{train,valid_seen,valid_unseen}/<task>/trial_*/`` holding
  ``game.tw-pddl`` and ``traj_data.json`` (whose ``task_type`` filters tasks). Like ALFWorld's
  ``AlfredTWEnv``, trials under ``movable`` or ``Sliced`` folders and games not marked solvable
  are skipped. Gold actions are the file's ``walkthrough`` when it has one, else (with
  ``plan_gold=True``) the planner's.

The generator (rooms, objects, problems, splits and levels) is
:mod:`~lumos_gym.envs.games.alfworld_problems`; its public names are importable from here too.
This module holds the engine, the two task sources and the env.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from lumos_gym.envs.games.alfworld_problems import (
    _ATTEMPTS,
    _GENERATOR_VERSION,
    GENERATED_SPLITS,
    LEVELS,
    OPENABLE,
    ROOMS,
    TASK_TYPES,
    VALIDATION_GUARD,
    AlfredProblem,
    generate_problem,
    split_of,
)
from lumos_gym.envs.games.base import (
    GAME_ANSWER,
    GameEngine,
    GameEnv,
    GameState,
    first_observation,
    gold_steps,
    group_commands,
)
from lumos_gym.envs.sources import GeneratedSource, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError
from lumos_gym.jsonl import cache_root, publish_folder, read_json_object

__all__ = [
    "LEVELS",
    "OFFICIAL_SPLITS",
    "OPENABLE",
    "ROOMS",
    "TASK_TYPES",
    "VALIDATION_GUARD",
    "AlfredEngine",
    "AlfredProblem",
    "ALFWorldEnv",
    "alfred_logic",
    "find_official_games",
    "generate_problem",
    "solve_game",
    "split_of",
]

OFFICIAL_SPLITS = ("train", "valid_seen", "valid_unseen")
_ENGINE = "lumos_gym.envs.games.alfworld:AlfredEngine"
_TASK_FILE = "lumos-task.json"
_LAYOUT = (
    "<data>/json_2.1.1/{train,valid_seen,valid_unseen}/<task>/trial_*/game.tw-pddl "
    "(with traj_data.json)"
)

# ---------------------------------------------------------------------------------------------
# The engine (runs in the engine host; imports textworld and alfworld)


def _package_file(name: str) -> Path:
    """A file of the installed ``alfworld`` package's ``data`` folder, found without importing it
    (importing ``alfworld`` creates ``$ALFWORLD_DATA``)."""  # noqa: D205, D209, D415
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise LumosGymError(
            "ALFWorld envs need the alfworld package: pip install 'lumos-gym[games]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data" / name


def alfred_logic() -> tuple[str, str]:
    """Return ALFWorld's ALFRED PDDL domain and its grammar (``alfred.pddl``, ``alfred.twl2``)."""
    return (_package_file("alfred.pddl").read_text(encoding="utf-8"),
            _package_file("alfred.twl2").read_text(encoding="utf-8"))


_WELCOME = re.compile(r"^-= Welcome to TextWorld, ALFRED! =-\s*")


class AlfredEngine(GameEngine):
    """Plays a ``game.tw-pddl`` file with TextWorld's PDDL engine and ALFWorld's wrappers.

    Args:
        path: the game file.
        admissible: report the admissible commands.
        policy: ask the planner for a winning plan at each state (``policy_commands``).
    """

    def __init__(self, path: str, admissible: bool = False, policy: bool = False) -> None:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs import PddlEnv

        self.admissible = admissible
        infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=policy)
        self._pddl = PddlEnv(infos)
        self._env = AlfredInfos(AlfredDemangler(self._pddl, shuffle=False))
        self._env.load(path)
        self.policy: list[str] = []

    def _state(self, state: Any, text: str) -> GameState:
        self.policy = list(state.get("policy_commands") or [])
        admissible = state.get("admissible_commands") if self.admissible else None
        won = bool(state.get("won"))
        return GameState(text=text, score=1.0 if won else 0.0, max_score=1.0, won=won,
                         admissible=None if admissible is None else tuple(admissible))

    def start(self) -> GameState:
        """Start the game; the opening text comes without ALFWorld's welcome line."""
        state = self._env.reset()
        return self._state(state, _WELCOME.sub("", str(state.feedback or "")).strip())

    def step(self, command: str) -> GameState:
        """Send one command (an unknown command gets the engine's ``Nothing happens.``)."""
        state, _, _ = self._env.step(command)
        return self._state(state, str(state.feedback or "").strip())

    def close(self) -> None:
        """Unload the engine's copy of the Fast Downward library."""
        lib, self._pddl.downward_lib = getattr(self._pddl, "downward_lib", None), None
        if lib is not None:
            import fast_downward

            fast_downward.close_lib(lib)


def solve_game(*, path: str) -> dict[str, Any]:
    """Plan a game and replay the plan; return the opening text and the plan if it wins.

    Returns:
        ``{"intro": ..., "walkthrough": [...] or None}`` (None: no plan, or it does not win).
    """
    engine = AlfredEngine(path, policy=True)
    try:
        intro = engine.start().text
        plan = list(engine.policy)
        won = False
        if plan:
            engine.policy = []
            engine._pddl.request_infos.policy_commands = False  # replay without replanning
            for command in plan:
                won = engine.step(command).won
        return {"intro": intro, "walkthrough": plan if won else None}
    finally:
        engine.close()


# ---------------------------------------------------------------------------------------------
# Task sources


def _task_question(description: str) -> str:
    return f"Your task is to: {description.strip().rstrip('.')}."


def _make_task(task_id: str, path: Path, question: str, commands: Sequence[str],
               meta: Mapping[str, Any]) -> Task:
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
        meta={**dict(meta), "engine": "alfworld", "path": str(path),
              "gold_commands": list(commands)},
    )


def _ensure_problem(
    task_type: str, seed: int, split: str, root: Path, host: Callable[[], Any], level: int = 2
) -> Path:
    """Return the folder of a cached, solved problem, generating and planning it when needed."""
    # level 2 keeps the folders of the generator before levels (the same problems)
    folder = (root / split if level == 2 else root / split / f"l{level}") / task_type / str(seed)
    if read_json_object(folder / _TASK_FILE) is not None:
        return folder
    domain, grammar = alfred_logic()
    for attempt in range(_ATTEMPTS):
        problem = generate_problem(task_type, seed, split=split, attempt=attempt, level=level)
        if problem is None:
            continue

        def solve(tmp: Path, problem: AlfredProblem = problem, attempt: int = attempt) -> bool:
            game = {"pddl_domain": domain,
                    "grammar": grammar.replace("UNKNOWN GOAL", problem.description),
                    "pddl_problem": problem.pddl, "solvable": None, "walkthrough": None}
            with open(tmp / "game.tw-pddl", "w", encoding="utf-8") as f:
                json.dump(game, f)
            solved = host().call("lumos_gym.envs.games.alfworld:solve_game",
                               path=str(tmp / "game.tw-pddl"))
            if not solved.get("walkthrough"):
                return False
            game["solvable"], game["walkthrough"] = True, list(solved["walkthrough"])
            with open(tmp / "game.tw-pddl", "w", encoding="utf-8") as f:
                json.dump(game, f)
            info = {"task_type": task_type, "description": problem.description,
                    "room": problem.room, "target": problem.target,
                    "receptacle": problem.receptacle, "seed": seed, "split": split,
                    "level": level, "attempt": attempt,
                    "intro": solved.get("intro", "")}
            with open(tmp / _TASK_FILE, "w", encoding="utf-8") as f:
                json.dump(info, f, indent=1, sort_keys=True)
            return True

        # another process may have cached the same problem first: theirs is used then
        if publish_folder(folder, solve) and read_json_object(folder / _TASK_FILE) is not None:
            return folder
    raise LumosGymError(f"no solvable level-{level} {task_type} problem for seed {seed} in "
                        f"{_ATTEMPTS} draws")


def _generated_task(
    task_type: str, seed: int, split: str, root: Path, host: Callable[[], Any], level: int = 2
) -> Task:
    folder = _ensure_problem(task_type, seed, split, root, host, level)
    info = read_json_object(folder / _TASK_FILE) or {}
    game = read_json_object(folder / "game.tw-pddl") or {}
    question = _task_question(str(info.get("description", "")))
    meta = {"task_type": task_type, "level": level, "split": split, "seed": seed,
            "room": info.get("room"),
            "observation": first_observation(question, str(info.get("intro", "")))}
    return _make_task(f"alfworld/{split}/gen-l{level}/{task_type}/{seed}",
                      folder / "game.tw-pddl", question,
                      [str(c) for c in game.get("walkthrough") or []], meta)


def find_official_games(
    data_path: str | os.PathLike[str], split: str, task_types: Sequence[str] = TASK_TYPES
) -> list[tuple[Path, str]]:
    """Return ``(game file, task type)`` of every playable trial of an official split.

    Args:
        data_path: ALFWorld's data folder (holding ``json_2.1.1``) or ``json_2.1.1`` itself.
        split: ``train``, ``valid_seen`` or ``valid_unseen``.
        task_types: the task types to keep.

    Raises:
        DataError: the split folder is missing (the message gives the layout and the fix).
    """
    if split not in OFFICIAL_SPLITS:
        raise DataError(f"ALFWorld split must be one of {OFFICIAL_SPLITS}, got {split!r}")
    base = Path(data_path).expanduser()
    if base.name != "json_2.1.1":
        base = base / "json_2.1.1"
    folder = base / split
    if not folder.is_dir():
        raise DataError(
            f"no ALFWorld data at {folder}: expected {_LAYOUT}; run `alfworld-download` "
            "(needs the network), then pass data_path= or set $ALFWORLD_DATA"
        )
    games = []
    for traj in sorted(folder.glob("*/trial_*/traj_data.json")):
        trial = traj.parent
        if "movable" in str(trial) or "Sliced" in str(trial):
            continue  # ALFWorld's text envs skip these too
        game = trial / "game.tw-pddl"
        record = read_json_object(traj) or {}
        task_type = str(record.get("task_type", ""))
        if task_type not in task_types or not game.is_file():
            continue
        games.append((game, task_type))
    return games


_TASK_RULE = re.compile(r"Your task is to: ([^\"\\]*)")


def _official_task(
    game: Path, task_type: str, split: str, plan_gold: bool, host: Callable[[], Any]
) -> Task | None:
    data = read_json_object(game)
    if data is None or not data.get("solvable"):
        return None
    match = _TASK_RULE.search(str(data.get("grammar", "")))
    question = _task_question(match.group(1)) if match else "Complete the household task."
    commands = [str(c) for c in data.get("walkthrough") or []]
    if not commands and plan_gold:
        commands = list(host().call("lumos_gym.envs.games.alfworld:solve_game",
                                  path=str(game)).get("walkthrough") or [])
    trial = game.parent
    meta = {"task_type": task_type, "split": split, "trial": trial.name}
    return _make_task(f"alfworld/{split}/{trial.parent.name}/{trial.name}", game, question,
                      commands, meta)


def _types(task_types: Sequence[str | int] | str | int) -> tuple[str, ...]:
    items = [task_types] if isinstance(task_types, str | int) else list(task_types)
    out = []
    for item in items:
        name = TASK_TYPES[item - 1] if isinstance(item, int) and 1 <= item <= 6 else item
        if name not in TASK_TYPES:
            raise LumosGymError(f"unknown ALFWorld task type {item!r}; known: 1-6 or {TASK_TYPES}")
        out.append(str(name))
    return tuple(dict.fromkeys(out))


def _levels(levels: Sequence[int] | int) -> tuple[int, ...]:
    items = (levels,) if isinstance(levels, int) else tuple(levels)
    out = tuple(dict.fromkeys(items))
    if not out or any(isinstance(x, bool) or x not in LEVELS for x in out):
        raise LumosGymError(f"ALFWorld levels are {LEVELS}, got {levels!r}")
    return out


# ---------------------------------------------------------------------------------------------
# The env


class ALFWorldEnv(GameEnv):
    """ALFWorld household tasks in text: generated problems, or ALFWorld's official splits.

    Args:
        source: ``generated`` (default) or ``official`` (default when ``data_path`` is given).
        split: generated: ``train``, ``validation`` (for choices made before a test run; no
            game shared with the others, see the module docstring) or ``test`` (default);
            official: ``train``, ``valid_seen`` or ``valid_unseen`` (default).
        task_types: task type names or numbers 1-6 (default all six).
        levels: generated: the levels (:data:`LEVELS`; default ``(2,)``): 1, a small room
            with nothing to open; 2, a whole room. ``num_tasks`` problems of each type are
            made at each level; ``meta["level"]`` says which.
        num_tasks: generated problems per task type (and level).
        seed: the seed of the first problem of each type.
        data_path: ALFWorld's data folder (default ``$ALFWORLD_DATA``).
        plan_gold: plan gold actions for official games that carry no walkthrough (slow).
        cache_dir: where generated problems are kept (default ``cache_root()/alfworld``).
        **options: :class:`~lumos_gym.envs.games.base.GameEnv` options (``admissible``,
            ``isolate``, ``step_timeout``) and :class:`~lumos_gym.envs.base.LumosEnv` options.
    """

    dataset: ClassVar[str] = "alfworld"

    def __init__(
        self,
        *,
        source: str | None = None,
        split: str | None = None,
        task_types: Sequence[str | int] | str | int = TASK_TYPES,
        levels: Sequence[int] | int = (2,),
        num_tasks: int = 1,
        seed: int = 0,
        data_path: str | os.PathLike[str] | None = None,
        plan_gold: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        source = source or ("official" if data_path is not None else "generated")
        types = _types(task_types)
        root = Path(cache_dir) if cache_dir is not None else cache_root() / "alfworld"
        self.cache_dir = root / f"generated-{_GENERATOR_VERSION}"
        if source == "generated":
            split = split or "test"
            if split not in GENERATED_SPLITS:
                raise LumosGymError(
                    f"generated ALFWorld splits are {GENERATED_SPLITS}, got {split!r}"
                )
            chosen = _levels(levels)
            params = {"generator": "alfworld", "version": _GENERATOR_VERSION, "split": split,
                      "task_types": list(types), "num_tasks": num_tasks, "seed": seed,
                      "levels": list(chosen)}

            def generate() -> list[Task]:
                return [_generated_task(t, s, split, self.cache_dir, lambda: self.host, level)
                        for level in chosen for s in range(seed, seed + num_tasks)
                        for t in types]

            tasks: TaskSource = GeneratedSource(generate, params)
        elif source == "official":
            split = split or "valid_unseen"
            path = data_path if data_path is not None else os.environ.get("ALFWORLD_DATA")
            if path is None:
                raise DataError(f"no ALFWorld data folder: pass data_path= or set $ALFWORLD_DATA "
                                f"(layout {_LAYOUT}; `alfworld-download` fetches it)")
            params = {"kind": "official", "data_path": str(path), "split": split,
                      "task_types": list(types)}

            def load() -> list[Task]:
                found = find_official_games(path, split, types)
                loaded = [_official_task(g, t, split, plan_gold, lambda: self.host)
                          for g, t in found]
                return [task for task in loaded if task is not None]

            tasks = GeneratedSource(load, params)
        else:
            raise LumosGymError(f"source must be 'generated' or 'official', got {source!r}")
        self.source_kind = source
        super().__init__(tasks=tasks, **options)

    def engine_for(self, task: Task) -> tuple[str, dict[str, Any]]:
        """Return ALFWorld's engine and the task's game file."""
        return _ENGINE, {"path": str(task.meta["path"])}

    def worker_env(self) -> dict[str, str]:
        """Point ``$ALFWORLD_DATA`` into the cache unless set (importing alfworld creates it)."""
        if os.environ.get("ALFWORLD_DATA"):
            return {}
        return {"ALFWORLD_DATA": str(self.cache_dir.parent / "alfworld-data")}

