"""Scenes: offline visual questions over generated pictures of shapes.

A seeded generator draws pictures (Pillow, no anti-aliasing) on a 3 by 3 grid: each cell holds
at most one object (a circle, square, triangle, diamond or star, in one of six colours, small or
large, jittered a little inside its cell) or the card, a grey-framed white label with a short
word or a number written in black with Pillow's bundled bitmap font, magnified twice. Questions
ask about what the picture shows, in two levels:

========= ======================================================================================
level     kinds (an example question)
========= ======================================================================================
1         ``count_colour`` (How many red objects are there?), ``count_shape``,
          ``count_colour_shape``, ``count_all``, ``colour_of`` (What colour is the star?),
          ``shape_of``, ``size_of``, ``colour_at`` (What colour is the object in the top row and
          left column?), ``shape_at``, ``right_of``, ``read_card``
2         ``count_sum`` (How many red or blue objects are there in total?),
          ``count_difference``, ``count_times_card`` (``VQA`` twice, then ``Calculator``),
          ``team_of`` (``VQA`` of a colour, then ``QA`` over the colour legend of the task)
========= ======================================================================================

Each task has a gold Lumos decomposition: one subgoal per ``step``, grounded as
``R1 = VQA(<img>, How many red objects are there?)``, ``R3 = Calculator(R1 * R2)`` or
``R2 = QA([R1, red is the Foxes. blue is the Owls], Question: Which team has the colour R1?)``,
then ``Answer(R<n>)``. The sub-questions are the forms that the ``scene`` backend of the
``VQA`` tool (:mod:`lumos_gym.tools.vqa`) reads off the pixels; it never sees the records below.

Determinism and splits: task ``n`` of kind ``k`` is drawn from ``random.Random`` seeded with
``"scenes/<split>/<seed>/<k>/<n>"``, so a task never depends on which other tasks or kinds are
made, and ``train`` and ``test`` draw from different seeds. A ``validation`` split (for choices
made before a test run: checkpoints, learning rates, round limits) draws from seeds of its own
too (``"scenes/validation/..."``), so its pictures are neither train nor test pictures (a
picture holds three to seven objects, each of 60 kinds jittered over 625 offsets, so two
streams of draws meet with no practical chance; the tests check it); question templates
("How many circles are there?") and short answers are shared by design, as between train and
test. Every picture is rendered again from its record (``Task.meta["scene"]``) whenever an
episode starts.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from lumos_gym.envs.multimodal.base import MultimodalEnv
from lumos_gym.envs.multimodal.pictures import (  # noqa: F401  (re-exported)
    BACKGROUND,
    CANVAS,
    CARD_BORDER,
    CELL,
    COLOURS,
    COLUMNS,
    GRID,
    INK,
    LABEL_ALPHABET,
    LABEL_SCALE,
    PLURALS,
    ROWS,
    SHAPES,
    SIZES,
    glyph_mask,
    label_mask,
)
from lumos_gym.envs.multimodal.reader import SCENE_READER
from lumos_gym.envs.sources import GeneratedSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError

__all__ = [
    "CANVAS",
    "CARD_WORDS",
    "COLOURS",
    "GRID",
    "KINDS",
    "LABEL_ALPHABET",
    "LABEL_SCALE",
    "KINDS_BY_LEVEL",
    "PLURALS",
    "SHAPES",
    "SIZES",
    "Card",
    "Scene",
    "SceneObject",
    "ScenesEnv",
    "generate_tasks",
    "glyph_mask",
    "label_mask",
    "make_task",
    "random_scene",
    "render_scene",
    "scene_png",
]

# ---------------------------------------------------------------------------------------------
# What a picture is made of

CARD_WORDS = (
    "apple", "river", "stone", "cloud", "lamp", "moon", "tree", "bird", "fish", "rain", "sun",
    "king", "boat", "star", "door", "milk", "frog", "kite", "wolf", "gold",
)
TEAMS = ("Foxes", "Owls", "Bears", "Wolves", "Hawks", "Otters", "Lynxes", "Ravens")
_JITTER = 12
_BORDER = 3
_MAX_ATTEMPTS = 400

KINDS_BY_LEVEL: dict[int, tuple[str, ...]] = {
    1: (
        "count_colour", "count_shape", "count_colour_shape", "count_all", "colour_of",
        "shape_of", "size_of", "colour_at", "shape_at", "right_of", "read_card",
    ),
    2: ("count_sum", "count_difference", "count_times_card", "team_of"),
}
KINDS = tuple(kind for kinds in KINDS_BY_LEVEL.values() for kind in kinds)
"""Every question kind, level 1 first."""
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class SceneObject:
    """One object of a picture.

    Attributes:
        shape: one of :data:`SHAPES`.
        colour: one of :data:`COLOURS`.
        size: ``"small"`` or ``"large"``.
        row: the grid row, 0 (top) to 2 (bottom).
        col: the grid column, 0 (left) to 2 (right).
        dx: horizontal offset of its centre from the cell's centre, in pixels.
        dy: vertical offset, in pixels.
    """

    shape: str
    colour: str
    size: str
    row: int
    col: int
    dx: int = 0
    dy: int = 0

    @property
    def centre(self) -> tuple[int, int]:
        """Return the centre ``(x, y)`` in pixels."""
        return self.col * CELL + CELL // 2 + self.dx, self.row * CELL + CELL // 2 + self.dy


@dataclass(frozen=True)
class Card:
    """The card of a picture: a word or a number in a grey frame, centred in its cell.

    Attributes:
        text: lower-case letters or digits (:data:`LABEL_ALPHABET`), at most 6.
        row: the grid row.
        col: the grid column.
    """

    text: str
    row: int
    col: int


@dataclass(frozen=True)
class Scene:
    """A picture: its objects (in reading order) and an optional card."""

    objects: tuple[SceneObject, ...]
    card: Card | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form kept in ``Task.meta["scene"]``."""
        return {
            "objects": [asdict(o) for o in self.objects],
            "card": None if self.card is None else asdict(self.card),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scene:
        """Rebuild a scene from :meth:`to_dict`'s form."""
        card = data.get("card")
        return cls(
            tuple(SceneObject(**dict(o)) for o in data.get("objects") or ()),
            None if card is None else Card(**dict(card)),
        )

    def count(self, *, colour: str | None = None, shape: str | None = None) -> int:
        """Return how many objects have ``colour`` and ``shape`` (None matches any)."""
        return sum(
            1
            for o in self.objects
            if (colour is None or o.colour == colour) and (shape is None or o.shape == shape)
        )

    def matching(self, **attributes: Any) -> list[SceneObject]:
        """Return the objects whose attributes equal the given ones (e.g. ``colour="red"``)."""
        return [o for o in self.objects if all(getattr(o, k) == v for k, v in attributes.items())]


# ---------------------------------------------------------------------------------------------
# Drawing


def _star_points(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    points = []
    for i in range(10):
        radius = r if i % 2 == 0 else 0.42 * r
        angle = -math.pi / 2 + i * math.pi / 5
        points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    return points


def _draw_object(draw: Any, obj: SceneObject) -> None:
    cx, cy = obj.centre
    r = SIZES[obj.size]
    fill = COLOURS[obj.colour]
    if obj.shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif obj.shape == "square":
        half = round(0.85 * r)
        draw.rectangle((cx - half, cy - half, cx + half, cy + half), fill=fill)
    elif obj.shape == "triangle":
        draw.polygon([(cx, cy - r), (cx + 0.95 * r, cy + 0.75 * r), (cx - 0.95 * r, cy + 0.75 * r)],
                     fill=fill)
    elif obj.shape == "diamond":
        draw.polygon([(cx, cy - r), (cx + 0.72 * r, cy), (cx, cy + r), (cx - 0.72 * r, cy)],
                     fill=fill)
    elif obj.shape == "star":
        draw.polygon(_star_points(cx, cy, r), fill=fill)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")


def _draw_card(image: Any, card: Card) -> None:
    from PIL import Image, ImageDraw

    ink = label_mask(card.text)
    height, width = ink.shape
    cx, cy = card.col * CELL + CELL // 2, card.row * CELL + CELL // 2
    box_w, box_h = width + 20, height + 16
    left, top = cx - box_w // 2, cy - box_h // 2
    draw = ImageDraw.Draw(image)
    draw.rectangle((left, top, left + box_w - 1, top + box_h - 1), fill=CARD_BORDER)
    draw.rectangle((left + _BORDER, top + _BORDER, left + box_w - 1 - _BORDER,
                    top + box_h - 1 - _BORDER), fill=BACKGROUND)
    pixels = np.asarray(image).copy()
    x0, y0 = cx - width // 2, cy - height // 2
    pixels[y0 : y0 + height, x0 : x0 + width][ink] = INK
    image.paste(Image.fromarray(pixels, "RGB"))


def render_scene(scene: Scene) -> Any:
    """Draw a scene: a :data:`CANVAS`-pixel square RGB ``PIL.Image``, no anti-aliasing."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (CANVAS, CANVAS), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for obj in scene.objects:
        _draw_object(draw, obj)
    if scene.card is not None:
        _draw_card(image, scene.card)
    return image


def scene_png(scene: Scene) -> bytes:
    """Return the scene's picture as PNG bytes."""
    buffer = io.BytesIO()
    render_scene(scene).save(buffer, format="PNG")
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# The sub-questions (the forms the scene backend of VQA reads)


def count_question(*, colour: str | None = None, shape: str | None = None) -> str:
    """Return ``How many [colour] (objects|<shape>s) are there?``."""
    noun = PLURALS[shape] if shape else "objects"
    return f"How many {colour + ' ' if colour else ''}{noun} are there?"


def colour_question(desc: str) -> str:
    """Return ``What colour is the <desc>?`` (``desc``: a shape, maybe with its size)."""
    return f"What colour is the {desc}?"


def shape_question(colour: str) -> str:
    """Return ``What is the shape of the <colour> object?``."""
    return f"What is the shape of the {colour} object?"


def size_question(colour: str, shape: str) -> str:
    """Return ``Is the <colour> <shape> large or small?``."""
    return f"Is the {colour} {shape} large or small?"


def position_question(attribute: str, row: int, col: int) -> str:
    """Return ``What (colour|shape) is the object in the <row> row and <col> column?``."""
    return f"What {attribute} is the object in the {ROWS[row]} row and {COLUMNS[col]} column?"


def right_of_question(colour: str, shape: str) -> str:
    """Return ``What colour is the object to the right of the <colour> <shape>?``."""
    return f"What colour is the object to the right of the {colour} {shape}?"


CARD_TEXT_QUESTION = "What is written on the card?"
CARD_NUMBER_QUESTION = "What number is written on the card?"


# ---------------------------------------------------------------------------------------------
# Generation


@dataclass
class _Plan:
    """A gold decomposition being built: subgoals, their actions, tails and gold facts."""

    subgoals: list[str] = field(default_factory=list)
    steps: list[list[str]] = field(default_factory=list)
    tails: list[list[str]] = field(default_factory=list)
    vqa_answers: dict[str, str] = field(default_factory=dict)
    sub_answers: dict[str, str] = field(default_factory=dict)

    @property
    def last(self) -> str:
        return f"R{sum(len(s) for s in self.steps)}"

    def _next(self) -> str:
        return f"R{sum(len(s) for s in self.steps) + 1}"

    def vqa(self, subgoal: str, question: str, answer: object) -> str:
        var = self._next()
        self._add(subgoal, f"{var} = VQA(<img>, {question})", str(answer))
        self.vqa_answers[question] = str(answer)
        return var

    def calculator(self, subgoal: str, formula: str, value: object) -> str:
        var = self._next()
        self._add(subgoal, f"{var} = Calculator({formula})", str(value))
        return var

    def qa(self, subgoal: str, context: Sequence[str], question: str, answer: str) -> str:
        var = self._next()
        self._add(subgoal, f"{var} = QA([{', '.join(context)}], Question: {question})", answer)
        self.sub_answers[question] = answer
        return var

    def _add(self, subgoal: str, action: str, tail: str) -> None:
        self.subgoals.append(subgoal)
        self.steps.append([action])
        self.tails.append([tail])


@dataclass
class _Draft:
    question: str
    answer: str
    plan: _Plan
    aliases: tuple[str, ...] = ()


def random_scene(
    rng: random.Random, *, card: str | None = None, min_objects: int = 3, max_objects: int = 7
) -> Scene:
    """Draw a scene: ``min_objects``-``max_objects`` objects in distinct cells.

    Args:
        rng: the random generator.
        card: ``"word"`` or ``"number"`` for a card of that kind, ``"any"`` for either,
            ``None`` for a card one time in four.
        min_objects: the fewest objects.
        max_objects: the most objects (at most the free cells).
    """
    cells = [(r, c) for r in range(GRID) for c in range(GRID)]
    rng.shuffle(cells)
    if card is None and rng.random() < 0.25:
        card = "any"
    card_record = None
    if card is not None:
        row, col = cells.pop()
        kind = rng.choice(("word", "number")) if card == "any" else card
        text = rng.choice(CARD_WORDS) if kind == "word" else str(rng.randint(2, 9))
        card_record = Card(text, row, col)
    count = rng.randint(min_objects, min(max_objects, len(cells)))
    objects = [
        SceneObject(rng.choice(SHAPES), rng.choice(list(COLOURS)), rng.choice(list(SIZES)), row,
                    col, rng.randint(-_JITTER, _JITTER), rng.randint(-_JITTER, _JITTER))
        for row, col in cells[:count]
    ]
    objects.sort(key=lambda o: (o.row, o.col))
    return Scene(tuple(objects), card_record)


def _unique(scene: Scene, obj: SceneObject, *attributes: str) -> bool:
    return len(scene.matching(**{a: getattr(obj, a) for a in attributes})) == 1


def _description(scene: Scene, obj: SceneObject) -> str | None:
    """``star`` when the shape names one object, ``large star`` when shape and size do."""
    if _unique(scene, obj, "shape"):
        return obj.shape
    if _unique(scene, obj, "shape", "size"):
        return f"{obj.size} {obj.shape}"
    return None


def _one_hop(question: str, subgoal: str, answer: object) -> _Draft:
    plan = _Plan()
    plan.vqa(subgoal, question, answer)
    return _Draft(question, str(answer), plan)


def _count_colour(scene: Scene, rng: random.Random) -> _Draft | None:
    present = sorted({o.colour for o in scene.objects})
    colour = rng.choice(list(COLOURS)) if rng.random() < 0.15 else rng.choice(present)
    return _one_hop(count_question(colour=colour), f"Count the {colour} objects in the image.",
                    scene.count(colour=colour))


def _count_shape(scene: Scene, rng: random.Random) -> _Draft | None:
    shape = rng.choice(sorted({o.shape for o in scene.objects}))
    return _one_hop(count_question(shape=shape), f"Count the {PLURALS[shape]} in the image.",
                    scene.count(shape=shape))


def _count_colour_shape(scene: Scene, rng: random.Random) -> _Draft | None:
    obj = rng.choice(scene.objects)
    return _one_hop(
        count_question(colour=obj.colour, shape=obj.shape),
        f"Count the {obj.colour} {PLURALS[obj.shape]} in the image.",
        scene.count(colour=obj.colour, shape=obj.shape),
    )


def _count_all(scene: Scene, rng: random.Random) -> _Draft | None:
    return _one_hop(count_question(), "Count all the objects in the image.", len(scene.objects))


def _colour_of(scene: Scene, rng: random.Random) -> _Draft | None:
    candidates = [(o, d) for o in scene.objects if (d := _description(scene, o))]
    if not candidates:
        return None
    obj, desc = rng.choice(candidates)
    return _one_hop(colour_question(desc), f"Identify the colour of the {desc}.", obj.colour)


def _shape_of(scene: Scene, rng: random.Random) -> _Draft | None:
    candidates = [o for o in scene.objects if _unique(scene, o, "colour")]
    if not candidates:
        return None
    obj = rng.choice(candidates)
    return _one_hop(shape_question(obj.colour),
                    f"Identify the shape of the {obj.colour} object.", obj.shape)


def _size_of(scene: Scene, rng: random.Random) -> _Draft | None:
    candidates = [o for o in scene.objects if _unique(scene, o, "colour", "shape")]
    if not candidates:
        return None
    obj = rng.choice(candidates)
    return _one_hop(size_question(obj.colour, obj.shape),
                    f"Determine whether the {obj.colour} {obj.shape} is large or small.",
                    obj.size)


def _at(attribute: str) -> Callable[[Scene, random.Random], _Draft | None]:
    def make(scene: Scene, rng: random.Random) -> _Draft | None:
        obj = rng.choice(scene.objects)
        where = f"the {ROWS[obj.row]} row and {COLUMNS[obj.col]} column"
        return _one_hop(position_question(attribute, obj.row, obj.col),
                        f"Identify the {attribute} of the object in {where}.",
                        getattr(obj, attribute))

    return make


def _right_neighbour(scene: Scene, obj: SceneObject) -> SceneObject | None:
    right = [o for o in scene.objects if o.row == obj.row and o.col > obj.col]
    return min(right, key=lambda o: o.col) if right else None


def _right_of(scene: Scene, rng: random.Random) -> _Draft | None:
    candidates = [
        (o, n) for o in scene.objects
        if _unique(scene, o, "colour", "shape") and (n := _right_neighbour(scene, o))
    ]
    if not candidates:
        return None
    obj, neighbour = rng.choice(candidates)
    return _one_hop(right_of_question(obj.colour, obj.shape),
                    f"Find the colour of the object to the right of the {obj.colour} {obj.shape}.",
                    neighbour.colour)


def _read_card(scene: Scene, rng: random.Random) -> _Draft | None:
    if scene.card is None:
        return None
    return _one_hop(CARD_TEXT_QUESTION, "Read what is written on the card.", scene.card.text)


def _count_sum(scene: Scene, rng: random.Random) -> _Draft | None:
    present = sorted({o.colour for o in scene.objects})
    if len(present) < 2:
        return None
    first, second = rng.sample(present, 2)
    plan = _Plan()
    a, b = scene.count(colour=first), scene.count(colour=second)
    r1 = plan.vqa(f"Count the {first} objects in the image.", count_question(colour=first), a)
    r2 = plan.vqa(f"Count the {second} objects in the image.", count_question(colour=second), b)
    plan.calculator("Add up the two counts.", f"{r1} + {r2}", a + b)
    return _Draft(f"How many {first} or {second} objects are there in total?", str(a + b), plan)


def _count_difference(scene: Scene, rng: random.Random) -> _Draft | None:
    first, second = rng.sample(SHAPES, 2)
    a, b = scene.count(shape=first), scene.count(shape=second)
    if a <= b:
        return None
    plan = _Plan()
    r1 = plan.vqa(f"Count the {PLURALS[first]} in the image.", count_question(shape=first), a)
    r2 = plan.vqa(f"Count the {PLURALS[second]} in the image.", count_question(shape=second), b)
    plan.calculator(f"Subtract the number of {PLURALS[second]} from the number of "
                    f"{PLURALS[first]}.", f"{r1} - {r2}", a - b)
    question = f"How many more {PLURALS[first]} than {PLURALS[second]} are there?"
    return _Draft(question, str(a - b), plan)


def _count_times_card(scene: Scene, rng: random.Random) -> _Draft | None:
    if scene.card is None or not scene.card.text.isdigit():
        return None
    colour = rng.choice(sorted({o.colour for o in scene.objects}))
    count, number = scene.count(colour=colour), int(scene.card.text)
    plan = _Plan()
    r1 = plan.vqa(f"Count the {colour} objects in the image.", count_question(colour=colour),
                  count)
    r2 = plan.vqa("Read the number written on the card.", CARD_NUMBER_QUESTION, number)
    plan.calculator("Multiply the count by the number on the card.", f"{r1} * {r2}",
                    count * number)
    question = (f"What is the number of {colour} objects multiplied by the number written on "
                "the card?")
    return _Draft(question, str(count * number), plan)


def _team_of(scene: Scene, rng: random.Random) -> _Draft | None:
    candidates = [(o, d) for o in scene.objects if (d := _description(scene, o))]
    if not candidates:
        return None
    obj, desc = rng.choice(candidates)
    others = [c for c in COLOURS if c != obj.colour]
    colours = [obj.colour, *rng.sample(others, rng.randint(2, 3))]
    rng.shuffle(colours)
    teams = dict(zip(colours, rng.sample(TEAMS, len(colours)), strict=True))
    legend = [f"{colour} is the {team}" for colour, team in teams.items()]
    plan = _Plan()
    r1 = plan.vqa(f"Identify the colour of the {desc}.", colour_question(desc), obj.colour)
    plan.qa("Find the team of that colour in the legend.", [r1, ". ".join(legend)],
            f"Which team has the colour {r1}?", teams[obj.colour])
    question = (f"Every colour stands for a team: {', '.join(legend)}. Which team does the "
                f"{desc} belong to?")
    return _Draft(question, teams[obj.colour], plan, (f"the {teams[obj.colour]}",))


_MAKERS: dict[str, Callable[[Scene, random.Random], _Draft | None]] = {
    "count_colour": _count_colour,
    "count_shape": _count_shape,
    "count_colour_shape": _count_colour_shape,
    "count_all": _count_all,
    "colour_of": _colour_of,
    "shape_of": _shape_of,
    "size_of": _size_of,
    "colour_at": _at("colour"),
    "shape_at": _at("shape"),
    "right_of": _right_of,
    "read_card": _read_card,
    "count_sum": _count_sum,
    "count_difference": _count_difference,
    "count_times_card": _count_times_card,
    "team_of": _team_of,
}
_CARDS = {"read_card": "any", "count_times_card": "number"}


def _level(kind: str) -> int:
    return next(level for level, kinds in KINDS_BY_LEVEL.items() if kind in kinds)


def make_task(kind: str, *, split: str, seed: int, number: int) -> Task:
    """Generate task ``number`` of ``kind`` (see the module docstring for determinism).

    Raises:
        ValueError: an unknown kind or split.
        LumosGymError: no scene fit the kind after many draws (never seen in practice).
    """
    if kind not in _MAKERS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    name = f"scenes/{split}/{seed}/{kind}/{number}"
    rng = random.Random(name)
    for _ in range(_MAX_ATTEMPTS):
        scene = random_scene(rng, card=_CARDS.get(kind))
        draft = _MAKERS[kind](scene, rng)
        if draft is not None:
            break
    else:  # pragma: no cover - every kind fits a few draws
        raise LumosGymError(f"no scene fits the kind {kind!r} after {_MAX_ATTEMPTS} draws")
    plan = draft.plan
    gold = (*("; ".join(step) for step in plan.steps), f"Answer({plan.last})")
    return Task(
        id=name,
        question=draft.question,
        answer=draft.answer,
        task_type="multimodal",
        gold_actions=gold,
        meta={
            "dataset": "scenes",
            "kind": kind,
            "level": _level(kind),
            "scene": scene.to_dict(),
            "subgoals": list(plan.subgoals),
            "tails": [list(t) for t in plan.tails],
            "vqa_answers": dict(plan.vqa_answers),
            "sub_answers": dict(plan.sub_answers),
            "aliases": list(draft.aliases),
        },
    )


def generate_tasks(
    *,
    split: str = "test",
    seed: int = 0,
    num_tasks: int = 2,
    levels: Iterable[int] = (1, 2),
    kinds: Iterable[str] | None = None,
) -> list[Task]:
    """Generate ``num_tasks`` tasks of every kind, kinds interleaved.

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"`` (each drawn from its own seeds).
        seed: the seed.
        num_tasks: tasks per kind.
        levels: keep the kinds of these levels (1: one ``VQA``; 2: two hops).
        kinds: keep only these kinds (default: every kind of ``levels``).

    Returns:
        Task ``n`` of every kind, then task ``n + 1``..., ids ``scenes/<split>/<seed>/<kind>/<n>``.

    Raises:
        ValueError: an unknown level or kind, or a negative ``num_tasks``.
    """
    if num_tasks < 0:
        raise ValueError(f"num_tasks must be >= 0, got {num_tasks}")
    levels = tuple(levels)
    unknown = [level for level in levels if level not in KINDS_BY_LEVEL]
    if unknown:
        raise ValueError(f"unknown levels {unknown}; choose from {sorted(KINDS_BY_LEVEL)}")
    chosen = [k for level in sorted(set(levels)) for k in KINDS_BY_LEVEL[level]]
    if kinds is not None:
        wanted = list(dict.fromkeys(kinds))
        bad = [k for k in wanted if k not in KINDS]
        if bad:
            raise ValueError(f"unknown kinds {bad}; choose from {KINDS}")
        chosen = [k for k in chosen if k in wanted]
    return [
        make_task(kind, split=split, seed=seed, number=n)
        for n in range(num_tasks)
        for kind in chosen
    ]


# ---------------------------------------------------------------------------------------------
# The environment


class ScenesEnv(MultimodalEnv):
    """Visual questions over generated pictures (``lumos/Scenes-v0``).

    The ``VQA`` tool reads the pictures with its ``scene`` backend (image analysis, offline and
    exact on these pictures) unless another backend is chosen; ``QA`` answers the legend
    questions of ``team_of`` tasks with its model (or, in replays, the gold sub-answers).

    Args:
        split: ``"train"``, ``"validation"`` (for choices made before a test run) or ``"test"``;
            each draws its pictures from its own seeds.
        num_tasks: tasks per kind.
        levels: the levels to draw kinds from (1, 2 or both).
        kinds: only these kinds (see :data:`KINDS`).
        seed: the generator seed.
        vqa_backend: the ``VQA`` backend (``"scene"`` by default; ``"hf"`` with ``vqa_model``
            to test a vision-language model on these pictures).
        **options: :class:`~lumos_gym.envs.multimodal.base.MultimodalEnv` options (``vqa_model``,
            ``qa_backend``, ``qa_model``, ``observation_size``) and
            :class:`~lumos_gym.envs.base.LumosEnv` options (``limit``, ``privileged``...).
    """

    picture_reader: ClassVar[Any] = SCENE_READER
    default_scorer: ClassVar[str | None] = "scenes/exact"
    replay_options: ClassVar[dict[str, Any]] = {
        "privileged": True,
        "vqa_backend": "scene",
        "qa_backend": "reference",
    }

    def __init__(
        self,
        *,
        split: str = "test",
        num_tasks: int = 2,
        levels: Sequence[int] | int = (1, 2),
        kinds: Sequence[str] | str | None = None,
        seed: int = 0,
        vqa_backend: str = "scene",
        **options: Any,
    ) -> None:
        levels = (levels,) if isinstance(levels, int) else tuple(levels)
        kinds = (kinds,) if isinstance(kinds, str) else (None if kinds is None else tuple(kinds))

        def generate() -> list[Task]:
            return generate_tasks(split=split, seed=seed, num_tasks=num_tasks, levels=levels,
                                  kinds=kinds)

        params = {
            "generator": "scenes", "split": split, "seed": seed, "num_tasks": num_tasks,
            "levels": list(levels), "kinds": None if kinds is None else list(kinds),
        }
        options.setdefault("observation_size", (CANVAS, CANVAS))
        super().__init__(tasks=GeneratedSource(generate, params), dataset="scenes",
                         vqa_backend=vqa_backend, **options)

    def load_image(self, task: Task) -> Any:
        """Render the task's picture from its record."""
        return render_scene(Scene.from_dict(task.meta["scene"]))
