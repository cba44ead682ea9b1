"""The grounded-action language of Lumos: parse, format, reference and substitute.

One action is ``OUTPUTS = Name(ARGS)`` with an optional annotation tail ``= RESULT``:

* ``R1 = Calculator(48/2)``
* ``R5, R6 = SolveEquation(R3, R4) = -9/8, -3/5`` (several outputs, one value each)
* ``R2 = ParagraphRetrieve(R1, Query: How many kids did Julius Caesar have?)``
* ``R3 = QA([R2, R5], Question: Who is older?)`` (a bracketed context list)
* ``R3 = TYPE(R2, QUERY: Type the city, TEXT: Atlanta).`` (a web action: no tail, a final ``.``)
* ``Output = R9 = 40`` (an alias: ``Output`` takes the value of ``R9``)
* ``Answer(R7)`` (a call with no output variable, as the terminal action)

A list of actions is joined with ``"; "``; the split happens only outside parentheses and
brackets, so formulas and code keep their own ``;``. Arguments are kept verbatim as text; each
tool decides how to read them (:func:`split_arguments` gives positional and named parts).
Nothing here executes anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lumos_gym.errors import ActionParseError, UndefinedVariableError

VARIABLE_PATTERN = r"R[0-9]+|Output"
_VARIABLE_RE = re.compile(rf"\b(?:{VARIABLE_PATTERN})\b")
_FULL_VARIABLE_RE = re.compile(rf"(?:{VARIABLE_PATTERN})\Z")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OUTPUTS_RE = re.compile(rf"\s*((?:{VARIABLE_PATTERN})(?:\s*,\s*(?:{VARIABLE_PATTERN}))*)\s*=(?!=)")
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}

#: Named sub-arguments used by Lumos annotations (``Query: ...``, ``TEXT: ...``). A key is
#: recognised only at the start of the arguments or right after a top-level comma.
NAMED_ARGUMENTS = (
    "Query",
    "QUERY",
    "Question",
    "TEXT",
    "Text",
    "Item_names",
    "Item_features",
    "Feature_list",
    "Context",
    "Input",
    "Test",
)
_NAMED_RE = re.compile(r"(?:(?<=^)|(?<=,))\s*(" + "|".join(NAMED_ARGUMENTS) + r"):\s?")


@dataclass(frozen=True)
class Action:
    """One grounded action.

    Attributes:
        outputs: the variables bound by the action, e.g. ``("R1",)`` or ``("R5", "R6")``; empty
            for a bare call such as ``Answer(R3)``.
        name: the tool name, or None for an alias ``Output = R9``.
        args: the raw argument text between the outer parentheses (for an alias, the
            referenced variable), verbatim and unsubstituted.
        result: the annotation tail after ``" = "`` as written (e.g. ``"3."``), or None.
    """

    outputs: tuple[str, ...]
    name: str | None
    args: str
    result: str | None = None

    def __post_init__(self) -> None:
        for var in self.outputs:
            if not _FULL_VARIABLE_RE.match(var):
                raise ValueError(f"output {var!r} is not a variable (R<n> or Output)")
        if self.name is None and not _FULL_VARIABLE_RE.match(self.args):
            raise ValueError("an alias action must reference a variable")
        if self.name is not None and not _NAME_RE.fullmatch(self.name):
            raise ValueError(f"{self.name!r} is not an action name")

    @property
    def is_alias(self) -> bool:
        """Return True for ``Output = R9``-style aliases, which call no tool."""
        return self.name is None

    def format(self, *, with_result: bool = True) -> str:
        """Return the canonical text of the action (see :func:`format_action`)."""
        return format_action(self, with_result=with_result)

    def arguments(self) -> Arguments:
        """Split the raw arguments into positional and named parts."""
        return split_arguments(self.args)

    def without_result(self) -> Action:
        """Return the same action with no annotation tail."""
        return Action(self.outputs, self.name, self.args, None)


@dataclass(frozen=True)
class Arguments:
    """Arguments split at top-level commas.

    Attributes:
        positional: the arguments before the first named one, split at top-level ``", "``
            (a comma followed by a space, so ``1,000`` stays one argument).
        named: ``(key, value)`` pairs in order, e.g. ``(("Query", "How many kids?"),)``; a named
            value runs to the next recognised key, commas included.
    """

    positional: tuple[str, ...]
    named: tuple[tuple[str, str], ...]

    def get(self, key: str, default: str | None = None) -> str | None:
        """Return the value of a named argument, matching the key case-insensitively."""
        for name, value in self.named:
            if name.lower() == key.lower():
                return value
        return default


def format_action(action: Action, *, with_result: bool = True) -> str:
    """Return ``"R1, R2 = Name(args) = result"``, the canonical form of an action.

    Args:
        action: the action.
        with_result: include the annotation tail when the action has one.
    """
    head = f"{', '.join(action.outputs)} = " if action.outputs else ""
    body = action.args if action.name is None else f"{action.name}({action.args})"
    tail = f" = {action.result}" if with_result and action.result is not None else ""
    return head + body + tail


def format_actions(actions: Iterable[Action], *, with_result: bool = False) -> str:
    """Join actions with ``"; "``, as grounders write them (no tails by default)."""
    return "; ".join(format_action(a, with_result=with_result) for a in actions)


def _matching_close(text: str, start: int) -> int:
    """Return the index of the bracket closing the one at ``start``.

    Raises:
        ActionParseError: when brackets are unbalanced or mismatched.
    """
    stack: list[tuple[str, int]] = []
    for i in range(start, len(text)):
        ch = text[i]
        if ch in _OPENERS:
            stack.append((ch, i))
        elif ch in _CLOSERS:
            if not stack:
                raise ActionParseError(text, i, "no closing bracket before this one")
            opener, _ = stack.pop()
            if _OPENERS[opener] != ch:
                raise ActionParseError(text, i, f"{_OPENERS[opener]!r} to close {opener!r}")
            if not stack:
                return i
    opener, pos = stack[-1]
    raise ActionParseError(text, len(text), f"{_OPENERS[opener]!r} to close {opener!r} at {pos}")


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _parse_tail(text: str, i: int) -> tuple[str | None, int]:
    """Parse what may follow a call or alias: ``= result``, a final ``.``, or nothing."""
    i = _skip_space(text, i)
    if i == len(text):
        return None, i
    if text[i] == "=":
        result = text[i + 1 :].strip()
        return result, len(text)
    if text[i] == "." and not text[i + 1 :].strip():
        return None, len(text)
    raise ActionParseError(text, i, "'= result' or the end of the action")


def parse_action(text: str) -> Action:
    """Parse one grounded action.

    Args:
        text: e.g. ``"R2 = Calculator(R1 * 3) = 72"``. Leading and trailing whitespace and a
            final ``.`` after the closing parenthesis are ignored.

    Raises:
        ActionParseError: naming the position and what was expected.
    """
    outputs: tuple[str, ...] = ()
    i = 0
    match = _OUTPUTS_RE.match(text)
    if match:
        outputs = tuple(v.strip() for v in match.group(1).split(","))
        if len(set(outputs)) != len(outputs):
            raise ActionParseError(text, match.start(1), "distinct output variables")
        i = match.end()
    i = _skip_space(text, i)
    name_match = _NAME_RE.match(text, i)
    if not name_match:
        expected = "an action name" if outputs else "an action such as 'R1 = Calculator(2+3)'"
        raise ActionParseError(text, i, expected)
    name = name_match.group(0)
    j = name_match.end()
    if j < len(text) and text[j] == "(":
        close = _matching_close(text, j)
        result, _ = _parse_tail(text, close + 1)
        return Action(outputs, name, text[j + 1 : close], result)
    if outputs and _FULL_VARIABLE_RE.match(name):
        result, _ = _parse_tail(text, j)
        return Action(outputs, None, name, result)
    k = _skip_space(text, j)
    if k < len(text) and text[k] == "(":
        raise ActionParseError(text, j, f"'(' right after {name!r} (no space)")
    raise ActionParseError(text, j, f"'(' after the action name {name!r}")


def split_top_level(text: str, separator: str = ";") -> list[tuple[int, str]]:
    """Split ``text`` at ``separator`` characters outside brackets.

    Returns:
        ``(offset, piece)`` pairs; stray closing brackets are tolerated here and reported by
        the parser of each piece.
    """
    pieces: list[tuple[int, str]] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth = max(0, depth - 1)
        elif ch == separator and depth == 0:
            pieces.append((start, text[start:i]))
            start = i + 1
    pieces.append((start, text[start:]))
    return pieces


def parse_actions(text: str) -> list[Action]:
    """Parse a ``"; "``-joined list of actions (empty pieces are skipped).

    Raises:
        ActionParseError: for the first piece that does not parse, with the position counted
            in the whole ``text``.
    """
    actions: list[Action] = []
    for offset, piece in split_top_level(text):
        if not piece.strip():
            continue
        try:
            actions.append(parse_action(piece))
        except ActionParseError as e:
            raise ActionParseError(text, offset + e.position, e.expected) from None
    if not actions:
        raise ActionParseError(text, 0, "at least one action")
    return actions


def split_arguments(args: str) -> Arguments:
    """Split raw arguments into positional and named parts (see :class:`Arguments`)."""
    keys = [m for m in _NAMED_RE.finditer(args) if _depth_at(args, m.start()) == 0]
    head = args[: keys[0].start()] if keys else args
    head = head.rstrip()
    if head.endswith(","):
        head = head[:-1]
    positional = _rejoin_thousands(head)
    named: list[tuple[str, str]] = []
    for n, m in enumerate(keys):
        end = keys[n + 1].start() if n + 1 < len(keys) else len(args)
        value = args[m.end() : end].rstrip()
        if n + 1 < len(keys) and value.endswith(","):
            value = value[:-1].rstrip()
        named.append((m.group(1), value))
    return Arguments(positional, tuple(named))


def _depth_at(text: str, pos: int) -> int:
    depth = 0
    for ch in text[:pos]:
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth = max(0, depth - 1)
    return depth


def _rejoin_thousands(head: str) -> tuple[str, ...]:
    """Split at top-level commas followed by whitespace, keeping ``1,000`` together."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(head):
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0 and (i + 1 == len(head) or head[i + 1].isspace()):
            parts.append(head[start:i])
            start = i + 1
    parts.append(head[start:])
    return tuple(p.strip() for p in parts if p.strip())


def split_list(text: str) -> list[str]:
    """Return the items of a bracketed list ``"[R2, R5]"``; a bare item gives a 1-item list."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        return list(_rejoin_thousands(stripped[1:-1]))
    return [stripped] if stripped else []


def references(text: str) -> list[str]:
    """Return the variables (``R<n>``, ``Output``) referenced in ``text``, first use first."""
    seen: dict[str, None] = {}
    for match in _VARIABLE_RE.finditer(text):
        seen.setdefault(match.group(0), None)
    return list(seen)


_SIMPLE_VALUE_RE = re.compile(r"[-+]?[\w.]+\Z")


def _is_simple(value: str) -> bool:
    """Return True for a single number or word, or text wrapped whole in one bracket pair."""
    if _SIMPLE_VALUE_RE.match(value):
        return True
    if value[:1] in _OPENERS:
        try:
            return _matching_close(value, 0) == len(value) - 1
        except ActionParseError:
            return False
    return False


def substitute(
    text: str,
    variables: Mapping[str, str],
    *,
    parenthesize: bool = False,
    render: Callable[[str], str] | None = None,
) -> str:
    """Replace each variable reference in ``text`` with its value.

    Args:
        text: text that may reference ``R<n>`` or ``Output``.
        variables: the bound values.
        parenthesize: wrap a value in parentheses unless it is a single number, word or
            already bracketed (so ``R1 * 2`` with ``R1 = 3 + 4`` gives ``(3 + 4) * 2``).
        render: applied to each value before insertion (e.g. ``repr`` for code).

    Raises:
        UndefinedVariableError: for an ``R<n>`` that is not bound. An unbound ``Output`` is
            left as it is, since the word may be plain text.
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(0)
        if name not in variables:
            if name == "Output":
                return name
            bound = ", ".join(sorted(variables, key=variable_order)) or "none"
            raise UndefinedVariableError(f"undefined variable {name} (defined: {bound})")
        value = variables[name]
        if render is not None:
            return render(value)
        if parenthesize and not _is_simple(value.strip()):
            return f"({value})"
        return value

    return _VARIABLE_RE.sub(replace, text)


def variable_order(name: str) -> tuple[int, int, str]:
    """Sort ``R<n>`` by number, then ``Output``, without ``int()``: ``n`` may be 5,000 digits."""
    if not name.startswith("R"):
        return (1, 0, "")
    digits = name[1:].lstrip("0") or "0"
    return (0, len(digits), digits)


def last_variable(names: Iterable[str]) -> str | None:
    """Return ``Output`` if present, else the highest-numbered ``R<n>`` (Lumos' final answer)."""
    names = list(names)
    if "Output" in names:
        return "Output"
    numbered = [n for n in names if n.startswith("R")]
    return max(numbered, key=variable_order) if numbered else None


@dataclass(frozen=True)
class ToolSpec:
    """What a grounding prompt says about a tool.

    Attributes:
        name: the action name, e.g. ``"Calculator"``.
        signature: the Lumos signature, e.g. ``"Calculator(formula)"``.
        doc: the one-line description, e.g. ``"Calculate the input formula"``.
    """

    name: str
    signature: str
    doc: str

    def describe(self) -> str:
        """Return ``"Signature: doc"`` as the Lumos grounding instructions list tools."""
        return f"{self.signature}: {self.doc}"
