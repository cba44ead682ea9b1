"""The execution module's contract: tool specs, per-episode context, results and the registry."""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from lumos_gym.actions import Action, ToolSpec, references, substitute
from lumos_gym.errors import ToolError
from lumos_gym.registry import Registry

if TYPE_CHECKING:
    from lumos_gym.retrieval.documents import Document


@dataclass
class ToolContext:
    """Per-episode state a tool may read or keep.

    Attributes:
        variables: the values bound so far (``"R1" -> "24"``), read-only for tools.
        task_text: the task as shown to the agent.
        state: tool-private per-episode storage (e.g. the equations of ``SetEquation``),
            keyed by tool name by convention.
        documents: the task's own corpus when it has one (HotpotQA's context paragraphs), which
            retrieval tools may search.
        reference: gold facts for *reference* tool backends (e.g. known sub-answers for the
            ``QA`` tool when replaying a gold decomposition); empty unless the env is privileged
            or a verifier fills it.
        session: the env's live per-episode engine when it has one (a shop browser session,
            a game process, the task's image): the env opens it on ``reset`` and closes it;
            the env family's tools act on it. None for envs whose tools need no engine.
    """

    variables: Mapping[str, str] = field(default_factory=dict)
    task_text: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    documents: Sequence[Document] = ()
    reference: Mapping[str, Any] = field(default_factory=dict)
    session: Any = None


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one action: one value per output variable.

    Attributes:
        values: the values, bound in order to the action's outputs.
        observation: the text shown to the agent for a bare call (no output variable); by
            default the values joined by ``", "``.
        display: how the bound values are shown after ``R1 = `` when they are too long to show
            whole (e.g. ``WikipediaPage(Genghis Khan)`` for a retrieved page); by default the
            values themselves.
    """

    values: tuple[str, ...]
    observation: str | None = None
    display: str | None = None

    @property
    def text(self) -> str:
        """Return the observation text."""
        return self.observation if self.observation is not None else ", ".join(self.values)


class Tool(ABC):
    """A named executable action. Subclasses set ``spec`` and implement ``run``.

    Tools raise :class:`~lumos_gym.errors.ToolError` for anything the agent did wrong; the
    environment turns it into an ``Error: ...`` observation.
    """

    spec: ClassVar[ToolSpec]

    @abstractmethod
    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Execute ``action`` (arguments not yet substituted) in ``ctx``."""

    def close(self) -> None:
        """Release resources (processes, servers). Idempotent."""
        return None  # nothing to release by default


TOOLS: Registry[type[Tool]] = Registry("tool")


def register_tool(name: str, cls: type[Tool] | str, *, overwrite: bool = False) -> None:
    """Register a tool class (or a lazy ``"module:Class"`` path) under its action name."""
    TOOLS.register(name, cls, overwrite=overwrite)


def make_tool(name: str, **options: Any) -> Tool:
    """Instantiate the tool registered as ``name`` with backend ``options``."""
    cls = TOOLS.get(name)
    try:
        return cls(**options)
    except TypeError as e:
        raise ToolError(f"bad options for tool {name!r}: {e}") from e


class Toolset:
    """The tools of one environment, by action name.

    Args:
        tools: tool names, or a mapping of tool name to backend options.
    """

    def __init__(self, tools: Iterable[str] | Mapping[str, Mapping[str, Any]]) -> None:
        options = tools if isinstance(tools, Mapping) else {name: {} for name in tools}
        self._tools: dict[str, Tool] = {n: make_tool(n, **dict(o)) for n, o in options.items()}

    @property
    def names(self) -> list[str]:
        """Return the tool names in declaration order."""
        return list(self._tools)

    @property
    def specs(self) -> list[ToolSpec]:
        """Return the specs of the tools in declaration order."""
        return [t.spec for t in self._tools.values()]

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name`` or None."""
        return self._tools.get(name)

    def close(self) -> None:
        """Close every tool."""
        for tool in self._tools.values():
            tool.close()


# ---------------------------------------------------------------- argument text helpers
_BOUND_NAME_RE = re.compile(r"\b(?:R[0-9]+|Output)\b")


def one_line(text: str) -> str:
    """Return ``text`` with every run of whitespace made one space."""
    return " ".join(text.split())


def strip_quotes(text: str) -> str:
    """Return ``text`` stripped, without one pair of matching outer quotes."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].strip()
    return text


def substitute_bound(text: str, variables: Mapping[str, str]) -> str:
    """Substitute the bound variables of ``text``.

    A text that is only an unbound variable is an error; other unbound names (``R2-D2``) stay
    as written.
    """
    refs = references(text)
    if not refs:
        return text
    if all(ref in variables for ref in refs) or text.strip() in refs:
        return substitute(text, variables)
    return _BOUND_NAME_RE.sub(lambda m: variables.get(m.group(0), m.group(0)), text)


# ------------------------------------------------------------------ shared tool backends
K = TypeVar("K")
V = TypeVar("V")


class SharedResources(Generic[K, V]):
    """Resources (models, backends) built once per key and shared by every tool naming it.

    The many env instances of an evaluation then load a model once. Uses are counted under a
    lock; the last :meth:`release` drops the resource and calls ``close`` on it.

    Args:
        build: makes the resource of a key (called under the lock, once per key in use).
        close: releases a resource no tool uses any more (called outside the lock).
    """

    def __init__(
        self, build: Callable[[K], V], close: Callable[[V], None] | None = None
    ) -> None:
        self._build = build
        self._close = close
        self._lock = threading.Lock()
        self._items: dict[K, tuple[V, int]] = {}

    def acquire(self, key: K) -> V:
        """Return the resource of ``key``, building it on first use, and count one more user."""
        with self._lock:
            if key in self._items:
                item, users = self._items[key]
            else:
                item, users = self._build(key), 0
            self._items[key] = (item, users + 1)
            return item

    def release(self, key: K) -> None:
        """Count one user fewer; the last one closes the resource. Unknown keys are ignored."""
        with self._lock:
            if key not in self._items:
                return
            item, users = self._items[key]
            if users > 1:
                self._items[key] = (item, users - 1)
                return
            del self._items[key]
        if self._close is not None:
            self._close(item)
