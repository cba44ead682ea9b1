"""One generic registry for named components: tools, agents, backends, metrics, datasets.

Entries are either objects or lazy ``"module:attr"`` strings that are imported on first lookup,
so that registering a component never imports its heavy dependencies.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator
from typing import Generic, TypeVar

from lumos_gym.errors import RegistryError

T = TypeVar("T")


def import_object(path: str) -> object:
    """Import ``"package.module:attr"`` and return the attribute."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise RegistryError(f"expected 'module:attr', got {path!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise RegistryError(f"module {module_name!r} has no attribute {attr!r}") from e


class Registry(Generic[T]):
    """A name → component table with lazy entries, collision errors and suggestions on a miss.

    Args:
        kind: what the registry holds, used in error messages ("tool", "agent", ...).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, obj: T | str, *, overwrite: bool = False) -> None:
        """Add ``obj`` (or a lazy ``"module:attr"`` string) under ``name``."""
        if name in self._entries and not overwrite:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = obj

    def unregister(self, name: str) -> None:
        """Remove the entry called ``name`` (an unknown name raises, with suggestions)."""
        if name not in self._entries:
            raise RegistryError(self._missing_message(name))
        del self._entries[name]

    def get(self, name: str) -> T:
        """Return the component registered under ``name``, importing it if lazy."""
        try:
            entry = self._entries[name]
        except KeyError:
            raise RegistryError(self._missing_message(name)) from None
        if isinstance(entry, str):
            entry = import_object(entry)  # type: ignore[assignment]
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def _missing_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._entries), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        known = ", ".join(sorted(self._entries)) or "none"
        return f"unknown {self.kind} {name!r}.{hint} Known: {known}."

    def names(self) -> list[str]:
        """Return the registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
