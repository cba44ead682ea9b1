"""The text space of lumos-gym observations and actions, and its shared memory for vector envs.

:class:`TextSpace` is a Gymnasium :class:`~gymnasium.spaces.Text` over one charset
(:func:`text_charset`), with a ``repr`` of one line: the plain ``Text`` repr lists its 63,000
characters.

It also carries its own shared-memory layout for :class:`gymnasium.vector.AsyncVectorEnv`.
Gymnasium 1.x reads a ``Text`` space's shared memory into strings once, when the vector env is
built, so with the default ``shared_memory=True`` every later observation came back as that
first read: the padding, decoded as ``max_length`` tab characters. The handlers registered here
write each observation's code points (``int32``, ``0`` after the end) and read the memory back
as a live :class:`SharedTexts` view, decoded when an item is read; the copy that
``AsyncVectorEnv`` returns by default is a plain tuple of strings, as from ``SyncVectorEnv``.
A Dict observation space (the multimodal envs) holding a ``TextSpace`` uses them for its text.
"""

from __future__ import annotations

import multiprocessing
import string
from collections.abc import Iterator, Sequence
from functools import lru_cache
from multiprocessing.sharedctypes import SynchronizedArray
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

#: The shared-memory cell of one character: its code point (every charset point fits).
_CELL = np.dtype(np.int32)


@lru_cache(maxsize=1)
def text_charset() -> frozenset[str]:
    """Return the characters of lumos-gym text spaces.

    They are printable ASCII, tab, newline and the rest of the Unicode basic plane except
    control and surrogate code points.
    """
    chars = set(string.printable) - set("\r\x0b\x0c")
    chars.update(chr(c) for c in range(0xA0, 0xD800))
    chars.update(chr(c) for c in range(0xE000, 0xFFFE))
    return frozenset(chars)


@lru_cache(maxsize=1)
def _charset_tables() -> dict[str, Any]:
    """The attributes gymnasium's ``Text`` derives from :func:`text_charset` (``_char_*``)."""
    prototype = spaces.Text(1, min_length=0, charset=text_charset())
    return {k: v for k, v in vars(prototype).items() if k.startswith("_char")}


class TextSpace(spaces.Text):
    """Texts of at most ``max_length`` characters of :func:`text_charset`, the empty one included.

    Args:
        max_length: the longest text in the space (characters).
        seed: seeds ``sample``.
    """

    def __init__(self, max_length: int, *, seed: int | np.random.Generator | None = None) -> None:
        # Gymnasium's Text builds its character tables (a sorted list, a set, a dict of 63,000
        # code points) on every construction: 40 ms a space, two to an env, and the runner builds
        # an env for every episode in flight. Its checks run on a one-character charset here,
        # then the tables built once for text_charset() are shared (no method changes them).
        super().__init__(max_length, min_length=0, charset="a", seed=seed)
        self.__dict__.update(_charset_tables())

    def __repr__(self) -> str:
        """Name the space and its bounds in one line, never the 63,000 characters."""
        return (
            f"TextSpace(max_length={self.max_length}, charset=<{len(self.character_set):,} "
            "characters: tab, newline, printable ASCII and the Unicode basic plane>)"
        )


class SharedTexts(Sequence[str]):
    """The texts of ``n`` envs in shared memory, decoded when an item is read.

    A live view, like the arrays that ``AsyncVectorEnv(copy=False)`` returns for a Box space;
    its deep copy is a plain tuple of strings.
    """

    def __init__(self, memory: SynchronizedArray, n: int, max_length: int) -> None:
        self._memory = memory
        self._n = n
        self._max_length = max_length

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._n)))
        if not -self._n <= index < self._n:
            raise IndexError(f"env index {index} out of range for {self._n} envs")
        row = _cells(self._memory).reshape(self._n, self._max_length)[index]
        end = np.flatnonzero(row == 0)
        used = row[: end[0]] if end.size else row
        return used.tobytes().decode("utf-32-le")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # a live view has no stable hash

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)


def _cells(memory: SynchronizedArray) -> np.ndarray:
    """Return the memory as an ``int32`` array (the same bytes, not a copy)."""
    return np.frombuffer(memory.get_obj(), dtype=_CELL)


@create_shared_memory.register(TextSpace)
def _create(space: TextSpace, n: int = 1, ctx: ModuleType = multiprocessing) -> SynchronizedArray:
    return ctx.Array(_CELL.char, n * space.max_length)


@read_from_shared_memory.register(TextSpace)
def _read(space: TextSpace, shared_memory: SynchronizedArray, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)


@write_to_shared_memory.register(TextSpace)
def _write(space: TextSpace, index: int, value: str, shared_memory: SynchronizedArray) -> None:
    if len(value) > space.max_length:
        raise ValueError(f"a text of {len(value)} characters is outside {space!r}")
    codes = np.frombuffer(value.encode("utf-32-le"), dtype=_CELL)
    row = _cells(shared_memory)[index * space.max_length : (index + 1) * space.max_length]
    row[: codes.size] = codes
    row[codes.size :] = 0


__all__ = ["SharedTexts", "TextSpace", "text_charset"]
