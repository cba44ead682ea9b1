"""What the Scenes pictures are made of: object colours, shapes, sizes, the grid, the card's font.

The generator (:mod:`lumos_gym.envs.multimodal.scenes`) draws with these; the picture reader
(:mod:`lumos_gym.envs.multimodal.reader`) reads pixels back with the same vocabulary.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

CANVAS = 360
"""Width and height of a picture, in pixels."""
GRID = 3
"""Cells per row and per column."""
CELL = CANVAS // GRID
SHAPES = ("circle", "square", "triangle", "diamond", "star")
PLURALS = {shape: shape + "s" for shape in SHAPES}
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 90, 220),
    "yellow": (235, 195, 20),
    "purple": (140, 60, 190),
    "orange": (245, 135, 25),
}
"""The object colours, by name (objects are drawn in exactly these RGB values)."""
SIZES = {"small": 15, "large": 32}
"""The circumradius of an object of each size, in pixels."""
ROWS = ("top", "middle", "bottom")
COLUMNS = ("left", "middle", "right")
BACKGROUND = (255, 255, 255)
CARD_BORDER = (110, 110, 110)
INK = (0, 0, 0)
LABEL_SCALE = 2
"""Labels are drawn with Pillow's bitmap font (6 by 11 pixel cells) magnified this many times."""
LABEL_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
"""The characters a card may hold."""


@lru_cache(maxsize=1)
def _bitmap_font() -> Any:
    from PIL import ImageFont

    # Pillow's own bitmap font: load_default_imagefont() since Pillow 10.1, load_default()
    # before (later versions return a scalable font there).
    loader = getattr(ImageFont, "load_default_imagefont", ImageFont.load_default)
    return loader()


@lru_cache(maxsize=64)
def glyph_mask(char: str) -> np.ndarray:
    """Return the ink of one character as drawn on a card: a read-only bool array.

    The glyph is Pillow's bitmap font cell (6 by 11 pixels) magnified :data:`LABEL_SCALE`
    times, so every array has the same shape, ``(22, 12)``.
    """
    from PIL import Image, ImageDraw

    font = _bitmap_font()
    width, height = font.getbbox("0")[2:]
    cell = Image.new("L", (width, height), 0)
    ImageDraw.Draw(cell).text((0, 0), char, font=font, fill=255)
    mask = np.asarray(cell) > 127
    mask = mask.repeat(LABEL_SCALE, axis=0).repeat(LABEL_SCALE, axis=1)
    mask.flags.writeable = False
    return mask


def label_mask(text: str) -> np.ndarray:
    """Return the ink of ``text`` as drawn on a card: its glyphs side by side."""
    bad = sorted(set(text) - set(LABEL_ALPHABET))
    if bad or not text:
        raise ValueError(f"a card holds 1-6 characters of {LABEL_ALPHABET!r}, got {text!r}")
    return np.hstack([glyph_mask(ch) for ch in text])
