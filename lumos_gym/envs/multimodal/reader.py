"""Read the generated pictures of ``lumos/Scenes-v0`` back: the ``VQA`` tool's ``scene`` backend.

Classical image analysis of the pixels only, never the scene records (see the ``VQA`` tool's
documentation, :mod:`lumos_gym.tools.vqa`, for the method). The Scenes env hands
:data:`SCENE_READER` to the tool through its episode session (``TaskImage.reader``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from lumos_gym.envs.multimodal import pictures
from lumos_gym.errors import ToolError

# ---------------------------------------------------------------------------------------------
# The scene backend: reading generated pictures


@dataclass(frozen=True)
class SeenObject:
    """An object found in a picture.

    Attributes:
        colour: the name of its colour.
        shape: the shape its geometry gives.
        size: ``"small"`` or ``"large"``.
        row: the grid row of its centroid (0 is the top).
        col: the grid column of its centroid (0 is the left).
        area: its pixels.
        bbox: ``(left, top, right, bottom)``, inclusive.
    """

    colour: str
    shape: str
    size: str
    row: int
    col: int
    area: int
    bbox: tuple[int, int, int, int]


@dataclass(frozen=True)
class SceneReading:
    """What :func:`read_scene` found: the objects in reading order and the card's text."""

    objects: tuple[SeenObject, ...]
    card_text: str | None


@dataclass
class _Component:
    """A connected component being gathered run by run: area, bounds, centroid sums, widths."""

    area: int = 0
    left: int = 1 << 30
    top: int = 1 << 30
    right: int = -1
    bottom: int = -1
    sum_x: float = 0.0
    sum_y: float = 0.0
    widths: dict[int, int] = field(default_factory=dict)

    def add(self, y: int, x0: int, x1: int) -> None:
        n = x1 - x0
        self.area += n
        self.left, self.right = min(self.left, x0), max(self.right, x1 - 1)
        self.top, self.bottom = min(self.top, y), max(self.bottom, y)
        self.sum_x += (x0 + x1 - 1) * n / 2
        self.sum_y += y * n
        self.widths[y] = self.widths.get(y, 0) + n


def _components(mask: np.ndarray) -> list[_Component]:
    """Return the 8-connected components of a boolean mask, by row runs and union-find."""
    parent: list[int] = []

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    runs: list[tuple[int, int, int, int]] = []
    previous: list[tuple[int, int, int]] = []
    last_y = -2
    for y in np.flatnonzero(mask.any(axis=1)).tolist():
        row = np.concatenate(([False], mask[y], [False]))
        edges = np.flatnonzero(row[1:] != row[:-1])
        if y != last_y + 1:
            previous = []  # a blank row in between: nothing above touches this row
        last_y = y
        current = []
        for x0, x1 in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            label = len(parent)
            parent.append(label)
            for p0, p1, other in previous:
                if p0 <= x1 and x0 <= p1:  # touching, diagonals included (x1, p1 exclusive)
                    a, b = find(label), find(other)
                    if a != b:
                        parent[max(a, b)] = min(a, b)
            current.append((x0, x1, label))
            runs.append((y, x0, x1, label))
        previous = current
    groups: dict[int, _Component] = {}
    for y, x0, x1, label in runs:
        groups.setdefault(find(label), _Component()).add(y, x0, x1)
    return list(groups.values())


_COLOUR_TOLERANCE = 60  # per-pixel RGB distance to a prototype colour
_MIN_AREA = 30  # smaller components are specks, not objects
_LARGE_EXTENT = 44  # an object whose bounding box is this wide or tall is large


def _classify(component: _Component) -> str:
    width = component.right - component.left + 1
    height = component.bottom - component.top + 1
    fill = component.area / (width * height)
    if fill >= 0.9:
        return "square"
    if fill >= 0.65:
        return "circle"
    if fill < 0.42:
        return "star"
    widest = max(component.widths.values())
    rows = [y for y, w in component.widths.items() if w >= 0.95 * widest]
    where = (sum(rows) / len(rows) - component.top) / max(height - 1, 1)
    return "triangle" if where > 0.75 else "diamond"


def _label_pixels(image: Any) -> tuple[np.ndarray, list[str]]:
    """Name every pixel by its nearest prototype colour (-1 when none is near)."""
    names = [*pictures.COLOURS, "ink", "border"]
    palette = np.array([*pictures.COLOURS.values(), pictures.INK, pictures.CARD_BORDER], np.int32)
    rgb = np.asarray(image.convert("RGB"), dtype=np.int32)
    distance = ((rgb[:, :, None, :] - palette[None, None, :, :]) ** 2).sum(axis=-1)
    nearest = distance.argmin(axis=-1)
    near = distance.min(axis=-1) <= _COLOUR_TOLERANCE**2
    return np.where(near, nearest, -1), names


def read_scene(image: Any) -> SceneReading:
    """Find the objects and read the card of a Scenes picture, from its pixels alone.

    Args:
        image: a ``PIL.Image`` (any mode; converted to RGB).

    Returns:
        The objects (reading order: by row, then column) and the card's text (None without a
        card; ``""`` for a card whose ink cannot be read).
    """
    labels, names = _label_pixels(image)
    height, width = labels.shape
    grid = pictures.GRID
    objects = []
    for index, name in enumerate(names[:-2]):
        for comp in _components(labels == index):
            if comp.area < _MIN_AREA:
                continue
            extent = max(comp.right - comp.left, comp.bottom - comp.top) + 1
            cx, cy = comp.sum_x / comp.area, comp.sum_y / comp.area
            objects.append(SeenObject(
                colour=name,
                shape=_classify(comp),
                size="large" if extent >= _LARGE_EXTENT else "small",
                row=min(grid - 1, int(cy * grid / height)),
                col=min(grid - 1, int(cx * grid / width)),
                area=comp.area,
                bbox=(comp.left, comp.top, comp.right, comp.bottom),
            ))
    objects.sort(key=lambda o: (o.row, o.col, o.bbox))
    frames = [c for c in _components(labels == names.index("border")) if c.area >= _MIN_AREA]
    card_text = None
    if frames:
        frame = max(frames, key=lambda c: c.area)
        inside = labels[frame.top : frame.bottom + 1, frame.left : frame.right + 1]
        card_text = read_label(inside == names.index("ink")) or ""
    return SceneReading(tuple(objects), card_text)


@lru_cache(maxsize=1)
def _glyph_table() -> tuple[dict[bytes, str], tuple[int, int]]:
    table: dict[bytes, str] = {}
    for char in pictures.LABEL_ALPHABET:
        mask = pictures.glyph_mask(char)
        table.setdefault(mask.tobytes(), char)
    shape = pictures.glyph_mask(pictures.LABEL_ALPHABET[0]).shape
    return table, shape


def read_label(ink: np.ndarray) -> str | None:
    """Read the text of a card's ink by matching glyph cells against the renderer's font.

    Every placement of the glyph grid (the line's top and the first cell's left edge, within
    one cell of the ink's corner) is tried; the first placement under which every cell is
    exactly one glyph gives the text.

    Args:
        ink: a boolean array, True where the card is black.

    Returns:
        The text, or None when no placement reads (no ink, or ink that is not the font's).
    """
    table, (gh, gw) = _glyph_table()
    ys, xs = np.nonzero(ink)
    if ys.size == 0:
        return None
    top, bottom, left, right = ys.min(), ys.max(), xs.min(), xs.max()
    if bottom - top >= gh:
        return None  # more than one line
    padded = np.zeros((ink.shape[0] + 2 * gh, ink.shape[1] + 2 * gw), bool)
    padded[gh : gh + ink.shape[0], gw : gw + ink.shape[1]] = ink
    for dy in range(gh):
        oy = top - dy
        if bottom >= oy + gh:
            continue
        for dx in range(gw):
            ox = left - dx
            cells = (right - ox) // gw + 1
            chars = []
            for i in range(cells):
                cell = padded[oy + gh : oy + 2 * gh, ox + gw + i * gw : ox + 2 * gw + i * gw]
                char = table.get(np.ascontiguousarray(cell).tobytes())
                if char is None:
                    break
                chars.append(char)
            else:
                return "".join(chars)
    return None


# ---------------------------------------------------------------------------------------------
# The scene backend: answering the generator's question forms


def _patterns() -> list[tuple[re.Pattern[str], str]]:
    colour = "|".join(pictures.COLOURS)
    shape = "|".join(pictures.SHAPES)
    plural = "|".join(pictures.PLURALS.values())
    rows, cols = "|".join(pictures.ROWS), "|".join(pictures.COLUMNS)
    forms = [
        (rf"how many (?:(?P<colour>{colour}) )?(?:(?P<plural>{plural})|objects|shapes)"
         r"(?: are there)?(?: in the (?:image|picture))?", "count"),
        (rf"what colou?r is the (?:(?P<size>small|large) )?(?P<shape>{shape})", "colour_of"),
        (rf"(?:what is the shape of|what shape is) the (?P<colour>{colour}) (?:object|shape)",
         "shape_of"),
        (rf"is the (?P<colour>{colour}) (?P<shape>{shape}) (?:large or small|small or large)",
         "size_of"),
        (rf"what (?P<attribute>colou?r|shape) is the object in the (?P<row>{rows}) row and "
         rf"(?:the )?(?P<col>{cols}) column", "at"),
        (rf"what colou?r is the object (?:to the right of|right of) the (?P<colour>{colour}) "
         rf"(?P<shape>{shape})", "right_of"),
        (r"what (?:number |word |text )?is written on the card", "card"),
    ]
    return [(re.compile(pattern), kind) for pattern, kind in forms]


_FORMS_HELP = (
    "How many [colour] objects|<shape>s are there?; What colour is the [size] <shape>?; "
    "What is the shape of the <colour> object?; Is the <colour> <shape> large or small?; "
    "What colour|shape is the object in the <top|middle|bottom> row and <left|middle|right> "
    "column?; What colour is the object to the right of the <colour> <shape>?; What is written "
    "on the card?"
)


def _one(objects: Sequence[SeenObject], what: str) -> SeenObject:
    if not objects:
        raise ToolError(f"the image shows no {what}")
    if len(objects) > 1:
        raise ToolError(f"the image shows {len(objects)} objects that are {what}; name one")
    return objects[0]


def answer_scene_question(reading: SceneReading, question: str) -> str:
    """Answer one of the Scenes question forms from a :class:`SceneReading`.

    Raises:
        ToolError: a question in no known form, or about an object the picture lacks (or
            holds several of).
    """
    text = " ".join(question.lower().replace("color", "colour").split()).rstrip(" ?.")
    for pattern, kind in _patterns():
        match = pattern.fullmatch(text)
        if match is not None:
            return _answer(reading, kind, match.groupdict())
    raise ToolError(f"the scene backend cannot read {question!r}; it answers: {_FORMS_HELP}")


def _answer(reading: SceneReading, kind: str, slots: Mapping[str, str | None]) -> str:
    objects = reading.objects
    if kind == "count":
        plural = slots.get("plural")
        shape = next((s for s, p in pictures.PLURALS.items() if p == plural), None)
        found = [o for o in objects if slots.get("colour") in (None, o.colour)
                 and shape in (None, o.shape)]
        return str(len(found))
    if kind == "colour_of":
        what = " ".join(x for x in (slots.get("size"), slots.get("shape")) if x)
        found = [o for o in objects
                 if o.shape == slots["shape"] and slots.get("size") in (None, o.size)]
        return _one(found, what).colour
    if kind == "shape_of":
        return _one([o for o in objects if o.colour == slots["colour"]],
                    f"{slots['colour']}").shape
    if kind in ("size_of", "right_of"):
        what = f"{slots['colour']} {slots['shape']}"
        obj = _one([o for o in objects if o.colour == slots["colour"]
                    and o.shape == slots["shape"]], what)
        if kind == "size_of":
            return obj.size
        right = [o for o in objects if o.row == obj.row and o.col > obj.col]
        if not right:
            raise ToolError(f"no object is to the right of the {what}")
        return min(right, key=lambda o: o.col).colour
    if kind == "at":
        row, col = pictures.ROWS.index(slots["row"]), pictures.COLUMNS.index(slots["col"])
        where = f"object in the {slots['row']} row and {slots['col']} column"
        obj = _one([o for o in objects if (o.row, o.col) == (row, col)], where)
        return obj.shape if slots["attribute"] == "shape" else obj.colour
    if reading.card_text is None:
        raise ToolError("the image shows no card")
    if not reading.card_text:
        raise ToolError("the card's writing cannot be read")
    return reading.card_text


class SceneReader:
    """The picture reader of the Scenes env (the ``VQA`` tool's ``scene`` backend)."""

    def read(self, image: Any) -> SceneReading:
        """Read ``image`` once; the tool keeps the reading for the episode's later questions."""
        return read_scene(image)

    def answer(self, reading: SceneReading, question: str) -> str:
        """Answer one of the generator's question forms from ``reading``."""
        return answer_scene_question(reading, question)


SCENE_READER = SceneReader()
"""The reader the Scenes env hands to the ``VQA`` tool."""
