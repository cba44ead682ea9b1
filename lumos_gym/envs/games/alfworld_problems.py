"""ALFWorld problems of our own: the rooms and objects, and a seeded generator of ALFRED PDDL.

The catalogue names ALFRED's classes (a selection of them, with our own placements): the
receptacles of each room (:data:`ROOMS`, those that open in :data:`OPENABLE`) and the object
classes (:data:`OBJECTS`) with the receptacles that hold them and what can be done to them
(cleaned, heated, cooled). :func:`generate_problem` draws one problem of an ALFWorld task type
(:data:`TASK_TYPES`) for a seed, split and level, written in the ALFRED domain with the goal of
that type and ALFWorld's task sentences; :func:`split_of` says which split a level-1 problem
belongs to, and validation skips the problems of guarded seeds (:data:`VALIDATION_GUARD`).
Nothing here plans or plays a game: :mod:`lumos_gym.envs.games.alfworld` solves and caches the
problems with ALFWorld's engine and serves them as tasks.
"""

from __future__ import annotations

import functools
import hashlib
import random
from dataclasses import dataclass

from lumos_gym.errors import LumosGymError

__all__ = [
    "GENERATED_SPLITS",
    "LEVELS",
    "OBJECTS",
    "OPENABLE",
    "ROOMS",
    "TASK_TYPES",
    "VALIDATION_GUARD",
    "AlfredProblem",
    "ObjectKind",
    "generate_problem",
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
GENERATED_SPLITS = ("train", "validation", "test")
_CONTENT_SPLITS = ("train", "test")  # what a level-1 problem's digest names (split_of)
VALIDATION_GUARD = 500
"""How many seeds of the train split (and, at level 2, of the test split) validation avoids."""
_GUARD_DRAWS = 2  # a guarded seed's first problems: the one it uses unless the planner fails it
#: The levels of generated problems: 1, a small room (at most three receptacles, nothing to
#: open); 2, a whole room (6-26 receptacles, objects in closed ones).
LEVELS = (1, 2)

_GENERATOR_VERSION = "v1"
_ATTEMPTS = 40

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
