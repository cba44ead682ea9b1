"""Reading a math formula: tokens, Python expression text, and the check of its syntax tree.

:func:`_clean` drops currency signs, maps Unicode operators and removes thousands commas;
:func:`_tokenize` refuses any character outside numbers, names and the listed operators;
:class:`_Emitter` writes the tokens as Python expression text (percent, factorial, implicit
products), bounding the nesting; :func:`_check_tree` refuses every node of the parsed tree
outside the whitelist before anything is built from it (by
:mod:`lumos_gym.tools.math.evaluator`). :func:`_split_list` splits comma-separated arguments.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from lumos_gym.errors import ToolError
from lumos_gym.tools.math.limits import MAX_NESTING, _check_number_text, _check_size
from lumos_gym.tools.math.whitelist import _CONSTANTS, _OPERATOR_WORDS, FUNCTIONS

_THOUSANDS_RE = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])")
_TOKEN_RE = re.compile(
    r"(?P<space>\s+)"
    r"|(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*|//|==|!=|<=|>=|[-+*/%^()\[\]{},<>=!])"
)
_CLEAN = str.maketrans(
    {
        "$": " ", "€": " ", "£": " ", "\u00a0": " ", "×": "*", "·": "*", "÷": "/",
        "\u2212": "-", "\u2013": "-", "≤": "<=", "≥": ">=", "≠": "!=", "π": "(pi)",
    }
)
_OPENERS = "([{"
_CLOSERS = ")]}"


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "name" or "op"
    text: str
    spaced: bool  # whitespace right before it


def _clean(text: str) -> str:
    """Drop currency signs, map Unicode operators, and remove thousands commas."""
    text = text.translate(_CLEAN)
    return _THOUSANDS_RE.sub(lambda m: m.group(0).replace(",", ""), text)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, spaced = 0, False
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            char = text[pos]
            hint = (
                "a '.' belongs in a number; attribute access is not allowed" if char == "." else
                "text in quotes is not a formula" if char in "'\"" else
                "a formula holds numbers, names, + - * / ^ % ( ) , comparisons and functions"
            )
            raise ToolError(f"unexpected {char!r} at position {pos}: {hint}")
        kind = match.lastgroup or ""
        if kind == "space":
            spaced = True
        else:
            tokens.append(_Token(kind, match.group(0), spaced))
            spaced = False
        pos = match.end()
    return tokens


def _split_sides(tokens: list[_Token]) -> list[list[_Token]]:
    """Split at ``=`` outside brackets: one side is an expression, two an equation."""
    sides: list[list[_Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.text in _OPENERS:
            depth += 1
        elif tok.text in _CLOSERS:
            depth -= 1
        if tok.text == "=":
            if depth > 0:
                raise ToolError("'=' inside brackets; compare with == or write one equation")
            sides.append([])
        else:
            sides[-1].append(tok)
    if len(sides) > 2:
        raise ToolError("more than one '=': write one equation at a time, or separate by ', '")
    if any(not side for side in sides):
        raise ToolError("an empty side of '=': write e.g. 2*x + 3 = 7")
    return sides


class _Emitter:
    """Turn tokens into Python expression text (percent, factorial, implicit products).

    The output is a list of segments; a closed bracket group (with its function name) is
    collapsed into one segment, so that a postfix ``%`` or ``!`` can wrap the operand before it.
    """

    def __init__(self, bindings: dict[str, sp.Basic]) -> None:
        self.bindings = bindings
        self.out: list[str] = []
        self.kinds: list[str] = []  # "number", "operand", "symbol", "func", "open", "op"
        self.opens: list[int] = []

    def emit(self, tokens: list[_Token]) -> str:
        for i, tok in enumerate(tokens):
            following = tokens[i + 1] if i + 1 < len(tokens) else None
            if tok.kind == "num":
                self._operand(tok, self._number(tok.text), "number")
            elif tok.kind == "name":
                self._name(tok, following)
            else:
                self._operator(tok, following)
        if self.opens:
            raise ToolError("a '(' is never closed")
        return " ".join(self.out)

    # -- pieces
    def _push(self, text: str, kind: str) -> None:
        self.out.append(text)
        self.kinds.append(kind)

    def _ends_operand(self) -> bool:
        return bool(self.kinds) and self.kinds[-1] in ("number", "operand", "symbol")

    def _operand(self, tok: _Token, text: str, kind: str) -> None:
        if self._ends_operand():
            previous = self.kinds[-1]
            if previous == "number" and tok.kind == "num":
                raise ToolError(f"two numbers in a row: {self.out[-1]!r} then {tok.text!r}")
            if tok.spaced or previous == "symbol":
                raise ToolError(
                    f"missing operator between {self.out[-1]!r} and {tok.text!r} (e.g. *)"
                )
            self._push("*", "op")  # 2x, 2pi, 2sqrt(3), (a + b)x, (a + b)2
        self._push(text, kind)

    def _number(self, text: str) -> str:
        _check_number_text(text)
        if text.isdigit():
            return str(int(text))
        return self._bind(_check_size(sp.Rational(Fraction(text))))

    def _bind(self, value: sp.Basic) -> str:
        name = f"_v{len(self.bindings)}"
        self.bindings[name] = value
        return name

    def _name(self, tok: _Token, following: _Token | None) -> None:
        name = tok.text
        calls = following is not None and following.text in _OPENERS
        if name.startswith("_") and name not in self.bindings:
            raise ToolError(f"the name {name!r} is not allowed: names start with a letter")
        if name in _OPERATOR_WORDS:
            self._push(name, "op")
        elif calls and name in FUNCTIONS:
            self._operand(tok, name, "func")
        elif calls and not following.spaced and name not in _CONSTANTS:
            known = ", ".join(sorted({n for n in FUNCTIONS if n.islower()}))
            raise ToolError(
                f"unknown function {name!r}; write {name}*(...) for a product, or use one of: "
                f"{known}"
            )
        else:
            self._operand(tok, name, "symbol" if name not in _CONSTANTS else "operand")

    def _operator(self, tok: _Token, following: _Token | None) -> None:
        text = tok.text
        if text in _OPENERS:
            if self._ends_operand():
                self._push("*", "op")  # 2(3 + 4), (a)(b), x (y + 1)
            if len(self.opens) >= MAX_NESTING:
                raise ToolError(f"brackets nested more than {MAX_NESTING} deep")
            self.opens.append(len(self.out))
            self._push("(", "open")
        elif text in _CLOSERS:
            if not self.opens:
                raise ToolError(f"a {text!r} closes nothing")
            start = self.opens.pop()
            if start > 0 and self.kinds[start - 1] == "func":
                start -= 1
            self._collapse(start, " ".join(self.out[start:]) + " )")
        elif text == "%" and self._ends_operand() and not _starts_operand(following):
            self._collapse(len(self.out) - 1, f"( {self.out[-1]} / 100 )")  # percent
        elif text == "!":
            if not self._ends_operand():
                raise ToolError("'!' must follow a number or a bracket: 5! is factorial(5)")
            self._collapse(len(self.out) - 1, f"factorial( {self.out[-1]} )")
        else:
            self._push("**" if text == "^" else text, "op")

    def _collapse(self, start: int, text: str) -> None:
        del self.out[start:], self.kinds[start:]
        self._push(text, "operand")


def _starts_operand(tok: _Token | None) -> bool:
    if tok is None:
        return False
    if tok.kind == "name":
        return tok.text not in _OPERATOR_WORDS
    return tok.kind == "num" or tok.text in _OPENERS


_NODE_NAMES = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Lambda: "lambda",
    ast.GeneratorExp: "a comprehension",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.IfExp: "if-else",
    ast.Starred: "*-unpacking",
    ast.NamedExpr: ":=",
    ast.Tuple: "a list of several values (use one formula)",
}
_ALLOWED_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.Name,
    ast.Constant, ast.Load, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
    ast.Pow, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt,
    ast.LtE, ast.Gt, ast.GtE,
)


def _check_tree(tree: ast.AST, bindings: Mapping[str, sp.Basic]) -> None:
    """Refuse any node outside the whitelist before anything is built from the tree."""
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            what = _NODE_NAMES.get(type(node), type(node).__name__)
            raise ToolError(f"{what} is not allowed in a formula")
        if isinstance(node, ast.Name):
            name = node.id
            if name.startswith("_") and name not in bindings:
                raise ToolError(f"the name {name!r} is not allowed (names start with a letter)")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise ToolError("only the listed functions may be called")
            if node.keywords:
                raise ToolError(f"{node.func.id}() takes no name=value arguments")
        elif isinstance(node, ast.Constant) and type(node.value) not in (int, bool):
            raise ToolError(f"{node.value!r} is not a number")


def _split_list(text: str, *, thousands: bool) -> list[str]:
    """Split at top-level commas: at ``", "`` when there is one, else at every comma.

    With ``thousands``, a comma inside a number written in groups of three (``1,200``) does not
    split when there is no ``", "`` to split at.
    """
    commas: list[tuple[int, bool]] = []
    depth = 0
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            commas.append((i, text[i + 1 : i + 2].isspace()))
    cuts = [i for i, spaced in commas if spaced]
    if not cuts:
        protected: set[int] = set()
        if thousands:
            for m in _THOUSANDS_RE.finditer(text):
                protected.update(range(m.start(), m.end()))
        cuts = [i for i, _ in commas if i not in protected]
    pieces, start = [], 0
    for i in cuts:
        pieces.append(text[start:i])
        start = i + 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]
