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
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

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

#: ALFWorld's task types, numbered as its configs number them (1-6).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
OFFICIAL_SPLITS = ("train", "valid_seen", "valid_unseen")
GENERATED_SPLITS = ("train", "validation", "test")
_CONTENT_SPLITS = ("train", "test")  # what a level-1 problem's digest names (split_of)
VALIDATION_GUARD = 500
"""How many seeds of the train split (and, at level 2, of the test split) validation avoids."""
_GUARD_DRAWS = 2  # a guarded seed's first problems: the one it uses unless the planner fails it
#: The levels of generated problems: 1, a small room (at most three receptacles, nothing to
#: open); 2, a whole room (6-26 receptacles, objects in closed ones).
LEVELS = (1, 2)

_ENGINE = "lumos_gym.envs.games.alfworld:AlfredEngine"
_GENERATOR_VERSION = "v1"
_TASK_FILE = "lumos-task.json"
_ATTEMPTS = 40
_LAYOUT = (
    "<data>/json_2.1.1/{train,valid_seen,valid_unseen}/<task>/trial_*/game.tw-pddl "
    "(with traj_data.json)"
)

# ---------------------------------------------------------------------------------------------
# The catalogue: rooms, receptacles and objects (ALFRED's class names, our own selection)

#: Receptacle classes that open and close.
OPENABLE = frozenset({"Cabinet", "Drawer", "Fridge", "Microwave", "Safe"})

#: Each room's receptacles: class → (fewest, most).
ROOMS: dict[str, dict[str, tuple[int, int]]] = {
    "kitchen": {
        "Cabinet": (3, 6), "CounterTop": (1, 3), "Drawer": (2, 4), "Fridge": (1, 1),
        "Microwave": (1, 1), "SinkBasin": (1, 1), "StoveBurner": (2, 4), "DiningTable": (0, 1),
        "GarbageCan": (1, 1), "CoffeeMachine": (1, 1), "Toaster": (1, 1), "Shelf": (0, 2),
    },
    "bathroom": {
        "Cabinet": (2, 4), "CounterTop": (1, 1), "SinkBasin": (1, 2), "BathtubBasin": (0, 1),
        "Toilet": (1, 1), "TowelHolder": (1, 1), "HandTowelHolder": (0, 1),
        "ToiletPaperHanger": (1, 1), "GarbageCan": (1, 1), "Drawer": (0, 2), "Shelf": (0, 1),
    },
    "bedroom": {
        "Bed": (1, 1), "Desk": (1, 1), "Drawer": (2, 4), "Dresser": (0, 1), "Shelf": (1, 3),
        "SideTable": (1, 2), "GarbageCan": (1, 1), "LaundryHamper": (0, 1), "Safe": (0, 1),
    },
    "livingroom": {
        "Sofa": (1, 1), "ArmChair": (0, 2), "CoffeeTable": (1, 1), "SideTable": (1, 2),
        "TVStand": (0, 1), "Drawer": (1, 3), "Shelf": (1, 3), "Cabinet": (0, 2),
        "GarbageCan": (1, 1), "DiningTable": (0, 1), "Dresser": (0, 1),
    },
}

_FOOD = ("Fridge", "CounterTop", "DiningTable", "Microwave", "SinkBasin", "GarbageCan")
_DISH = ("Cabinet", "CounterTop", "DiningTable", "Fridge", "Microwave", "SinkBasin", "Shelf",
         "Desk", "SideTable", "CoffeeTable")
_COOKWARE = ("StoveBurner", "Cabinet", "CounterTop", "DiningTable", "Fridge", "SinkBasin")
_CUTLERY = ("Drawer", "CounterTop", "DiningTable", "SinkBasin")
_SHAKER = ("Cabinet", "CounterTop", "DiningTable", "Shelf", "Drawer")
_SMALL = ("Desk", "Drawer", "Dresser", "Shelf", "SideTable", "CoffeeTable", "Safe")
_SEAT = ("Bed", "Sofa", "ArmChair")
_WASH = ("CounterTop", "SinkBasin", "BathtubBasin", "Cabinet", "Shelf")
_BOTTLE = ("CounterTop", "Cabinet", "Shelf", "Toilet", "GarbageCan")
_DECOR = ("Shelf", "SideTable", "CoffeeTable", "Dresser", "Desk", "TVStand", "DiningTable")
_TABLES = ("Sofa", "ArmChair", "CoffeeTable", "SideTable", "DiningTable")
# rooms
_K, _B, _L = ("kitchen",), ("bathroom",), ("livingroom",)
_KL, _KB = ("kitchen", "livingroom"), ("kitchen", "bathroom")
_HOME = ("bedroom", "livingroom")
_BL, _BHOME = ("bathroom", "livingroom"), ("bathroom", "bedroom", "livingroom")


@dataclass(frozen=True)
class ObjectKind:
    """An object class: where it is found, where it may be put, what can be done to it.

    Attributes:
        name: ALFRED's class name (``Apple``).
        places: receptacle classes that can hold it.
        rooms: the rooms where it is found.
        clean: it can be cleaned in a sink basin.
        heat: it can be heated in a microwave.
        cool: it can be cooled in a fridge.
    """

    name: str
    places: tuple[str, ...]
    rooms: tuple[str, ...] = _K
    clean: bool = False
    heat: bool = False
    cool: bool = False


def _kinds(rows: str, places: tuple[str, ...], rooms: tuple[str, ...], flags: str = ""
           ) -> list[ObjectKind]:
    """Object classes sharing places and rooms; ``flags`` holds c(lean), h(eat), c(o)ol."""
    return [ObjectKind(name, places, rooms, clean="c" in flags, heat="h" in flags,
                       cool="o" in flags) for name in rows.split()]


#: The object classes of the generator (a selection of ALFRED's, with our own placements).
OBJECTS: tuple[ObjectKind, ...] = (
    *_kinds("Apple Tomato Potato Egg", _FOOD, _K, "cho"),
    *_kinds("Lettuce", _FOOD, _K, "co"),
    *_kinds("Bread", _FOOD, _K, "ho"),
    *_kinds("Mug", (*_DISH, "CoffeeMachine"), _KL, "cho"),
    *_kinds("Cup", _DISH, _K, "cho"),
    *_kinds("Bowl Plate", _DISH, _KL, "cho"),
    *_kinds("Pan Pot", _COOKWARE, _K, "co"),
    *_kinds("Knife ButterKnife Fork Spoon", _CUTLERY, _K, "c"),
    *_kinds("Spatula Ladle", (*_CUTLERY, "Cabinet"), _K, "c"),
    *_kinds("SaltShaker PepperShaker", _SHAKER, _K),
    *_kinds("DishSponge", ("CounterTop", "SinkBasin", "Cabinet", "Drawer", "GarbageCan"), _K, "c"),
    *_kinds("WineBottle", ("Fridge", "CounterTop", "DiningTable", "Cabinet", "Shelf"), _K, "o"),
    *_kinds("SoapBar", (*_WASH, "Toilet", "GarbageCan"), _B, "c"),
    *_kinds("Cloth", (*_WASH, "Drawer", "GarbageCan"), _B, "c"),
    *_kinds("SoapBottle", _BOTTLE, _KB),
    *_kinds("SprayBottle", _BOTTLE, _B),
    *_kinds("ToiletPaper", ("ToiletPaperHanger", *_BOTTLE, "Drawer"), _B),
    *_kinds("Candle", ("CounterTop", "Cabinet", "Toilet", "Shelf", "Drawer", "SideTable"), _BL),
    *_kinds("Towel", ("TowelHolder",), _B),
    *_kinds("HandTowel", ("HandTowelHolder",), _B),
    *_kinds("TissueBox", ("Toilet", "CounterTop", "Shelf", "Cabinet", "SideTable", "Dresser"),
            _BHOME),
    *_kinds("Book CreditCard", (*_SMALL, *_SEAT, "DiningTable"), _HOME),
    *_kinds("CellPhone KeyChain", (*_SMALL, *_SEAT), _HOME),
    *_kinds("CD Pen Pencil", (*_SMALL, "GarbageCan"), _HOME),
    *_kinds("AlarmClock", ("Desk", "Dresser", "Shelf", "SideTable"), _HOME),
    *_kinds("Watch", _SMALL, _HOME),
    *_kinds("Pillow", _SEAT, _HOME),
    *_kinds("Laptop", ("Bed", "Desk", *_TABLES, "Dresser"), _HOME),
    *_kinds("RemoteControl", (*_TABLES, "TVStand", "Dresser", "Drawer"), _L),
    *_kinds("Statue Vase", _DECOR, _HOME),
    *_kinds("Box", (*_TABLES, "Dresser", "Desk", "Shelf"), _HOME),
    *_kinds("Newspaper", (*_TABLES, "GarbageCan"), _L),
)
_KINDS = {kind.name: kind for kind in OBJECTS}
#: The light that ``look_at_obj_in_light`` tasks switch on, and where it stands.
LAMP, LAMP_PLACES = "DeskLamp", ("Desk", "SideTable", "Dresser")
#: The objects that ``look_at_obj_in_light`` tasks look at.
_LIGHT_TARGETS = frozenset({"Book", "CellPhone", "CD", "Pen", "Pencil", "AlarmClock", "KeyChain",
                            "CreditCard", "Watch", "Bowl", "Mug", "Box", "Vase", "Statue",
                            "Laptop", "RemoteControl", "Pillow"})
#: Types the ALFRED domain names as constants (its clean, heat, cool and slice actions).
_DOMAIN_RTYPES = ("SinkBasin", "Microwave", "Fridge")
_DOMAIN_OTYPES = ("Knife", "ButterKnife")

#: Each task type: the rooms it may happen in, the appliance it needs, ALFWorld's task
#: sentences (alfworld/gen/goal_library.py ``templates``).
_TYPES: dict[str, tuple[tuple[str, ...], str | None, tuple[str, str]]] = {
    "pick_and_place_simple": (tuple(ROOMS), None,
                              ("put a {obj} in {recep}", "put some {obj} on {recep}")),
    "look_at_obj_in_light": (("bedroom", "livingroom"), None,
                             ("look at {obj} under the {toggle}",
                              "examine the {obj} with the {toggle}")),
    "pick_clean_then_place_in_recep": (("kitchen", "bathroom"), "SinkBasin",
                                       ("put a clean {obj} in {recep}",
                                        "clean some {obj} and put it in {recep}")),
    "pick_heat_then_place_in_recep": (("kitchen",), "Microwave",
                                      ("put a hot {obj} in {recep}",
                                       "heat some {obj} and put it in {recep}")),
    "pick_cool_then_place_in_recep": (("kitchen",), "Fridge",
                                      ("put a cool {obj} in {recep}",
                                       "cool some {obj} and put it in {recep}")),
    "pick_two_obj_and_place": (tuple(ROOMS), None,
                               ("put two {obj} in {recep}",
                                "find two {obj} and put them in {recep}")),
}
_STATE = {"SinkBasin": ("cleanable", "isClean"), "Microwave": ("heatable", "isHot"),
          "Fridge": ("coolable", "isCool")}


def _can(kind: ObjectKind, appliance: str | None) -> bool:
    return appliance is None or {"SinkBasin": kind.clean, "Microwave": kind.heat,
                                 "Fridge": kind.cool}[appliance]


# ---------------------------------------------------------------------------------------------
# Problems


def _receptacle_id(kind: str, n: int) -> str:
    """ALFRED's id forms; basins are ``Sink|...|SinkBasin`` so that they read ``sinkbasin 1``."""
    if kind == "SinkBasin":
        return f"Sink_bar_{n:02d}_bar_SinkBasin"
    if kind == "BathtubBasin":
        return f"Bathtub_bar_{n:02d}_bar_BathtubBasin"
    return f"{kind}_bar_{n:02d}"


@dataclass(frozen=True)
class AlfredProblem:
    """A generated ALFWorld problem.

    Attributes:
        task_type: one of :data:`TASK_TYPES`.
        description: the task sentence (``put a clean apple in fridge``).
        room: the room kind.
        pddl: the problem in the ALFRED domain.
        target: the object class to handle.
        receptacle: the receptacle class to put it in (the lamp for light tasks).
        level: 1 (a small room) or 2 (a whole room); see :data:`LEVELS`.
    """

    task_type: str
    description: str
    room: str
    pddl: str
    target: str
    receptacle: str
    level: int = 2


@dataclass
class _Scene:
    receptacles: dict[str, str]  # id -> class
    objects: dict[str, str]  # id -> class
    places: dict[str, str]  # object id -> receptacle id


def _build_scene(rng: random.Random, room: str) -> _Scene:
    receptacles: dict[str, str] = {}
    for kind, (low, high) in ROOMS[room].items():
        for n in range(1, rng.randint(low, high) + 1):
            receptacles[_receptacle_id(kind, n)] = kind
    return _Scene(receptacles, {}, {})


def _place(rng: random.Random, scene: _Scene, kind: str, allowed: set[str]) -> bool:
    spots = sorted(r for r, k in scene.receptacles.items() if k in allowed)
    if not spots:
        return False
    count = sum(1 for k in scene.objects.values() if k == kind)
    oid = f"{kind}_bar_{count + 1:02d}"
    scene.objects[oid] = kind
    scene.places[oid] = rng.choice(spots)
    return True


def _goal(task_type: str, target: str, receptacle: str) -> str:
    if task_type == "look_at_obj_in_light":
        return (
            "(:goal (and\n"
            f"  (exists (?t - object ?r - receptacle ?a - agent ?l - location) (and\n"
            f"    (objectType ?t {receptacle}Type) (toggleable ?t) (isToggled ?t)\n"
            "    (receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?t ?r)))\n"
            f"  (exists (?o - object ?a - agent) (and (objectType ?o {target}Type)\n"
            "    (holds ?a ?o)))))"
        )
    if task_type == "pick_two_obj_and_place":
        return (
            "(:goal (exists (?r - receptacle ?o1 - object ?o2 - object) (and\n"
            f"  (receptacleType ?r {receptacle}Type) (not (= ?o1 ?o2))\n"
            f"  (objectType ?o1 {target}Type) (inReceptacle ?o1 ?r)\n"
            f"  (objectType ?o2 {target}Type) (inReceptacle ?o2 ?r))))"
        )
    appliance = _TYPES[task_type][1]
    state = ""
    if appliance is not None:
        able, done = _STATE[appliance]
        state = f"\n  ({able} ?o) ({done} ?o)"
    return (
        "(:goal (exists (?r - receptacle ?o - object) (and\n"
        f"  (objectType ?o {target}Type) (receptacleType ?r {receptacle}Type)"
        f"{state}\n  (inReceptacle ?o ?r))))"
    )


def _pddl(name: str, scene: _Scene, goal: str) -> str:
    rtypes = sorted({*scene.receptacles.values(), *_DOMAIN_RTYPES})
    otypes = sorted({*scene.objects.values(), *_DOMAIN_OTYPES})
    receptacles = sorted(scene.receptacles)
    locations = {r: f"loc_bar_{i + 1:02d}" for i, r in enumerate(receptacles)}
    objects = sorted(scene.objects)
    lines = [f"(define (problem {name})", "(:domain alfred)", "(:objects", "  agent1 - agent"]
    lines += [f"  {t}Type - rtype" for t in rtypes] + [f"  {t}Type - otype" for t in otypes]
    lines += [f"  {r} - receptacle" for r in receptacles] + [f"  {o} - object" for o in objects]
    lines += ["  loc_bar_start - location"] + [f"  {loc} - location" for loc in locations.values()]
    lines += [")", "(:init", "  (atLocation agent1 loc_bar_start)"]
    for r in receptacles:
        kind = scene.receptacles[r]
        lines.append(f"  (receptacleType {r} {kind}Type)")
        lines.append(f"  (receptacleAtLocation {r} {locations[r]})")
        if kind in OPENABLE:
            lines.append(f"  (openable {r})")
    present = set(scene.receptacles.values())
    for otype in sorted(set(scene.objects.values())):
        if otype in _KINDS:
            for rtype in sorted(present & set(_KINDS[otype].places)):
                lines.append(f"  (canContain {rtype}Type {otype}Type)")
    for o in objects:
        kind = scene.objects[o]
        r = scene.places[o]
        lines += [f"  (objectType {o} {kind}Type)", f"  (inReceptacle {o} {r})",
                  f"  (objectAtLocation {o} {locations[r]})"]
        if kind == LAMP:
            lines.append(f"  (toggleable {o})")
            continue
        lines.append(f"  (pickupable {o})")
        info = _KINDS[kind]
        for flag, predicate in ((info.clean, "cleanable"), (info.heat, "heatable"),
                                (info.cool, "coolable")):
            if flag:
                lines.append(f"  ({predicate} {o})")
    lines += [")", goal, ")"]
    return "\n".join(lines) + "\n"


def generate_problem(task_type: str, seed: int, *, split: str = "test", attempt: int = 0,
                     level: int = 2) -> AlfredProblem | None:
    """Generate one problem of a task type (deterministic for its arguments).

    Args:
        task_type: one of :data:`TASK_TYPES`.
        seed: the problem's seed.
        split: ``train``, ``validation`` or ``test`` (different problems for the same seed).
        attempt: a retry number, for when the planner finds the problem unsolvable.
        level: 1 (a small room, :func:`_small_problem`) or 2 (a whole room).

    Returns:
        The problem, or None when this draw has no valid target, or (level 1) belongs to the
        other split, or (validation) is a problem of a guarded train or test seed
        (:data:`VALIDATION_GUARD`); the caller retries.
    """
    if task_type not in _TYPES:
        raise LumosGymError(f"unknown ALFWorld task type {task_type!r}; known: {TASK_TYPES}")
    if split not in GENERATED_SPLITS:
        raise LumosGymError(f"generated ALFWorld splits are {GENERATED_SPLITS}, got {split!r}")
    if level not in LEVELS:
        raise LumosGymError(f"ALFWorld levels are {LEVELS}, got {level!r}")
    if level == 1:
        problem = _small_problem(task_type, seed, split, attempt)
        bucket = "train" if split == "validation" else split  # validation: train-digest problems
        problem = problem if problem is not None and split_of(problem) == bucket else None
    else:
        problem = _room_problem(task_type, seed, split, attempt)
    if problem is not None and split == "validation" and _digest(problem) in _guarded(
            task_type, level):
        return None
    return problem


def _room_problem(task_type: str, seed: int, split: str, attempt: int) -> AlfredProblem | None:
    """Draw a level-2 problem: a whole room, objects in closed receptacles too."""
    rooms, appliance, templates = _TYPES[task_type]
    rng = random.Random(f"alfworld/{_GENERATOR_VERSION}/{split}/{task_type}/{seed}/{attempt}")
    room = rng.choice(rooms)
    scene = _build_scene(rng, room)
    present = set(scene.receptacles.values())
    usable = [k for k in OBJECTS if room in k.rooms and set(k.places) & present]
    exclude = {appliance} if appliance else set()

    def targets_for(kind: ObjectKind) -> list[str]:
        return sorted(set(kind.places) & present - exclude)

    # a target needs a class to put it in and another class to start from
    candidates = [k for k in usable if _can(k, appliance) and targets_for(k)
                  and len(set(k.places) & present) >= 2]
    if task_type == "look_at_obj_in_light":
        candidates = [k for k in usable if k.name in _LIGHT_TARGETS]
    if not candidates:
        return None
    target = rng.choice(candidates)
    if task_type == "look_at_obj_in_light":
        receptacle = LAMP
        if not _place(rng, scene, LAMP, set(LAMP_PLACES)):
            return None
        sources = set(target.places)
    else:
        receptacle = rng.choice(targets_for(target))
        sources = set(target.places) & present - {receptacle}
        if not sources:
            return None
    copies = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for _ in range(copies):
        if not _place(rng, scene, target.name, sources):
            return None
    others = [k for k in usable if k.name != target.name]
    for _ in range(rng.randint(4, 9)):
        kind = rng.choice(others)
        _place(rng, scene, kind.name, set(kind.places))
    template = rng.choice(templates)
    description = template.format(obj=target.name.lower(), recep=receptacle.lower(),
                                  toggle=LAMP.lower())
    name = f"lumos_{task_type}_{split}_{seed}_{attempt}"
    goal = _goal(task_type, target.name, receptacle)
    return AlfredProblem(task_type, description, room, _pddl(name, scene, goal), target.name,
                         receptacle)


def _small_problem(task_type: str, seed: int, split: str, attempt: int) -> AlfredProblem | None:
    """Draw a level-1 problem: one receptacle of each class the task needs, nothing closed.

    The object lies on an open receptacle (a countertop, a shelf...; never in a cabinet,
    drawer, fridge or other receptacle that opens) and goes to another open one; the
    appliance of the task type (sink basin, microwave, fridge) or the lamp's stand is the only
    other receptacle, and a task with fewer than three gets a spare one half of the time. At
    most two other objects lie about.
    """
    rooms, appliance, templates = _TYPES[task_type]
    rng = random.Random(f"alfworld/{_GENERATOR_VERSION}/l1/{split}/{task_type}/{seed}/{attempt}")
    room = rng.choice(rooms)
    classes = [k for k, (_, most) in ROOMS[room].items() if most > 0]
    plain = {k for k in classes if k not in OPENABLE and k != appliance}
    light = task_type == "look_at_obj_in_light"
    if light:
        stands = [k for k in LAMP_PLACES if k in classes]
        kinds = [k for k in OBJECTS if room in k.rooms and k.name in _LIGHT_TARGETS
                 and set(k.places) & plain]
    else:
        stands = []
        kinds = [k for k in OBJECTS if room in k.rooms and _can(k, appliance)
                 and len(set(k.places) & plain) >= 2]
    if not kinds or (light and not stands):
        return None
    target = rng.choice(kinds)
    spots = sorted(set(target.places) & plain)
    if light:
        receptacle = LAMP
        stand = rng.choice(stands)
        sources = [rng.choice(spots)]
        needed = [stand, *sources]
    else:
        receptacle = rng.choice(spots)
        others = [k for k in spots if k != receptacle]
        two = task_type == "pick_two_obj_and_place" and len(others) >= 2 and rng.random() < 0.5
        sources = sorted(rng.sample(others, 2 if two else 1))
        needed = [*sources, receptacle, *([appliance] if appliance else [])]
    needed = list(dict.fromkeys(needed))
    spare = [k for k in classes if k not in needed]
    if spare and (len(needed) < 2 or (len(needed) < 3 and rng.random() < 0.5)):
        needed.append(rng.choice(spare))
    scene = _Scene({_receptacle_id(k, 1): k for k in needed}, {}, {})
    if light:
        _place(rng, scene, LAMP, {stand})
    copies = 2 if task_type == "pick_two_obj_and_place" else 1
    for n in range(copies):
        _place(rng, scene, target.name, {sources[n % len(sources)]})
    present = set(needed)
    extras = [k for k in OBJECTS if k.name != target.name and room in k.rooms
              and set(k.places) & present]
    for _ in range(rng.randint(0, 2) if extras else 0):
        kind = rng.choice(extras)
        _place(rng, scene, kind.name, set(kind.places))
    description = rng.choice(templates).format(obj=target.name.lower(),
                                               recep=receptacle.lower(),
                                               toggle=LAMP.lower())
    name = f"lumos_l1_{task_type}_{split}_{seed}_{attempt}"
    goal = _goal(task_type, target.name, receptacle)
    return AlfredProblem(task_type, description, room, _pddl(name, scene, goal), target.name,
                         receptacle, level=1)


def split_of(problem: AlfredProblem) -> str:
    """Return the split (``train`` or ``test``) a level-1 problem belongs to.

    Small rooms leave fewer distinct problems, so that two seeds may draw the same one; each
    problem's split is fixed by a digest of its content (task sentence and PDDL, without the
    problem's name), which keeps the two splits disjoint. Validation problems are of the
    ``train`` digest (see :func:`generate_problem`).
    """
    return _CONTENT_SPLITS[_digest(problem)[0] % 2]


def _digest(problem: AlfredProblem) -> bytes:
    """The SHA-256 of a problem's task sentence and PDDL without its name (its identity)."""
    body = problem.pddl.split("\n", 1)[1]
    return hashlib.sha256(f"{problem.description}\n{body}".encode()).digest()


@functools.cache
def _guarded(task_type: str, level: int) -> frozenset[bytes]:
    """The problems (digests) validation avoids: the first problems of the guarded seeds.

    A seed's problem is its first draw unless the planner finds that one unsolvable, so the
    first :data:`_GUARD_DRAWS` draws of each of the first :data:`VALIDATION_GUARD` seeds of
    the train split are kept, and at level 2 of the test split too (level-1 test problems have
    the test digest, which validation problems never have).
    """
    digests = set()
    for split in ("train",) if level == 1 else ("train", "test"):
        for seed in range(VALIDATION_GUARD):
            found = 0
            for attempt in range(_ATTEMPTS):
                problem = generate_problem(task_type, seed, split=split, attempt=attempt,
                                           level=level)
                if problem is not None:
                    digests.add(_digest(problem))
                    found += 1
                    if found == _GUARD_DRAWS:
                        break
    return frozenset(digests)


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

