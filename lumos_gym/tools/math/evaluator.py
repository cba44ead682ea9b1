"""Computing a math formula: the sympy value built from a checked tree, and :func:`evaluate`.

:class:`_Builder` builds the value from a tree that
:func:`~lumos_gym.tools.math.parser._check_tree` accepted, bounding every intermediate result;
:func:`_read` reads a formula or an equation (variables substituted, ``R1(args)`` applied) and
:func:`evaluate` computes one formula under the time limit, in a worker process unless this is
one (:mod:`lumos_gym.tools.math.limits`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping

import sympy as sp
from sympy.logic.boolalg import Boolean

from lumos_gym.actions import substitute
from lumos_gym.errors import ToolError
from lumos_gym.tools.math.limits import (
    MAX_FORMULA_CHARS,
    MAX_NESTING,
    _as_tool_error,
    _check_magnitude,
    _check_power,
    _check_size,
    _in_a_worker,
    _in_process,
)
from lumos_gym.tools.math.parser import (
    _CLOSERS,
    _OPENERS,
    _check_tree,
    _clean,
    _Emitter,
    _split_list,
    _split_sides,
    _Token,
    _tokenize,
)
from lumos_gym.tools.math.values import _shown
from lumos_gym.tools.math.whitelist import _CONSTANTS, FUNCTIONS, _mod

_STRAY_VARIABLE_RE = re.compile(r"(?<=[0-9.])R[0-9]+\b")
_APPLY_RE = re.compile(r"\b(R[0-9]+|Output)\s*\(")
_BARE_OPERAND_RE = re.compile(r"[A-Za-z0-9_.]+")


_BIN_OPS: dict[type, Callable[[sp.Expr, sp.Expr], sp.Expr]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Mod: _mod,
    ast.FloorDiv: lambda a, b: sp.floor(a / b),
}
_COMPARE: dict[type, Callable[[sp.Expr, sp.Expr], Boolean]] = {
    ast.Eq: sp.Eq,
    ast.NotEq: sp.Ne,
    ast.Lt: sp.Lt,
    ast.LtE: sp.Le,
    ast.Gt: sp.Gt,
    ast.GtE: sp.Ge,
}


class _Builder:
    """Build a sympy value from a checked tree, bounding each intermediate result."""

    def __init__(self, bindings: Mapping[str, sp.Basic]) -> None:
        self.bindings = bindings

    def build(self, node: ast.AST, depth: int = 0) -> sp.Basic:
        if depth > 4 * MAX_NESTING:
            raise ToolError("the formula is nested too deeply")
        depth += 1
        if isinstance(node, ast.Expression):
            return self.build(node.body, depth)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return sp.true if node.value else sp.false
            return _check_size(sp.Integer(node.value))
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp):
            operand = self.build(node.operand, depth)
            if isinstance(node.op, ast.Not):
                return sp.Not(self._boolean(operand, "not"))
            value = self._expr(operand, "-" if isinstance(node.op, ast.USub) else "+")
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return self._binary(
                node.op, self.build(node.left, depth), self.build(node.right, depth)
            )
        if isinstance(node, ast.BinOp):
            # a + b + c parses as (a + b) + c: walk that left spine without recursing, so a
            # long sum or product is not "nested too deeply"
            spine: list[ast.BinOp] = []
            while isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Pow):
                spine.append(node)
                node = node.left
            value = self.build(node, depth)
            for binop in reversed(spine):
                value = self._binary(binop.op, value, self.build(binop.right, depth))
            return value
        if isinstance(node, ast.Compare):
            values = [self.build(node.left, depth)]
            values += [self.build(c, depth) for c in node.comparators]
            exprs = [self._expr(v, "a comparison") for v in values]
            parts = [
                _COMPARE[type(op)](a, b)
                for op, a, b in zip(node.ops, exprs, exprs[1:], strict=False)
            ]
            return parts[0] if len(parts) == 1 else sp.And(*parts)
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            args = [self._boolean(self.build(v, depth), word) for v in node.values]
            return sp.And(*args) if word == "and" else sp.Or(*args)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)  # guaranteed by _check_tree
            return self._call(node.func.id, [self.build(a, depth) for a in node.args])
        raise ToolError(f"{type(node).__name__} is not allowed in a formula")  # pragma: no cover

    def _binary(self, op: ast.operator, left: sp.Basic, right: sp.Basic) -> sp.Expr:
        a = self._expr(left, "arithmetic")
        b = self._expr(right, "arithmetic")
        if isinstance(op, ast.Pow):
            _check_power(a, b)
            return _check_magnitude(_check_size(a**b))
        return _check_size(_BIN_OPS[type(op)](a, b))

    def _name(self, name: str) -> sp.Basic:
        if name in self.bindings:
            return self.bindings[name]
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name in FUNCTIONS:
            raise ToolError(f"{name} is a function: write {name}(...)")
        if re.fullmatch(r"R[0-9]+", name):
            raise ToolError(f"{name} was not substituted: write an operator next to it")
        if name == "None":
            raise ToolError("None is not a number")
        return sp.Symbol(name)

    def _call(self, name: str, args: list[sp.Basic]) -> sp.Basic:
        fn = FUNCTIONS[name]
        if not fn.low <= len(args) <= fn.high:
            count = str(fn.low) if fn.low == fn.high else f"{fn.low} to {fn.high}"
            raise ToolError(f"{name}() takes {count} argument(s), got {len(args)}")
        exprs = [self._expr(a, f"{name}()") for a in args]
        return _check_magnitude(_check_size(fn.build(*exprs)))

    @staticmethod
    def _expr(value: sp.Basic, where: str) -> sp.Expr:
        if not isinstance(value, sp.Expr):
            raise ToolError(f"a comparison (True/False) cannot be used in {where}")
        return value

    @staticmethod
    def _boolean(value: sp.Basic, word: str) -> Boolean:
        if not isinstance(value, Boolean):
            raise ToolError(f"'{word}' combines comparisons, not {_shown(value)}")
        return value


def _build_side(tokens: list[_Token], bindings: dict[str, sp.Basic]) -> sp.Basic:
    source = _Emitter(bindings).emit(tokens)
    if not source:
        raise ToolError("an empty formula")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        raise ToolError(f"cannot read the formula: {e.msg}") from None
    _check_tree(tree, bindings)
    return _Builder(bindings).build(tree)


def _read(text: str, variables: Mapping[str, str], bindings: dict[str, sp.Basic]) -> list[sp.Basic]:
    """Read a formula or an equation: substitute, tokenise, check and build each side."""
    text = _apply_functions(text, variables, bindings)
    text = substitute(text, variables, render=_operand)
    if len(text) > MAX_FORMULA_CHARS:
        raise ToolError(f"the formula is {len(text)} characters long; at most {MAX_FORMULA_CHARS}")
    stray = _STRAY_VARIABLE_RE.search(text)
    if stray:
        raise ToolError(f"write an operator next to {stray.group(0)} (e.g. 2*{stray.group(0)})")
    tokens = _tokenize(_clean(text))
    if not tokens:
        raise ToolError("an empty formula: write it inside the brackets, e.g. Calculator(48/2)")
    return [_build_side(side, bindings) for side in _split_sides(tokens)]


def _operand(value: str) -> str:
    """A variable's value as an operand: in brackets unless it is an unsigned number or a name.

    This is ``substitute(..., parenthesize=True)`` except that a negative number is bracketed
    too, so that ``R1^2`` with ``R1 = -3`` is 9, not ``-3^2 = -9``.
    """
    value = value.strip()
    return value if _BARE_OPERAND_RE.fullmatch(value) else f"({value})"


def _apply_functions(text: str, variables: Mapping[str, str], bindings: dict[str, sp.Basic]) -> str:
    """Replace each ``R1(args)`` whose ``R1`` holds an expression by a bound placeholder."""
    out: list[str] = []
    pos = 0
    for match in _APPLY_RE.finditer(text):
        if match.start() < pos or match.group(1) not in variables:
            continue
        close = _closing_bracket(text, match.end() - 1)
        name = f"_v{len(bindings)}"
        bindings[name] = _apply(variables[match.group(1)], text[match.end() : close], variables)
        out += [text[pos : match.start()], name]
        pos = close + 1
    return "".join(out) + text[pos:]


def _closing_bracket(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPENERS:
            depth += 1
        elif text[i] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return i
    raise ToolError("a '(' is never closed")


def _apply(value: str, args: str, variables: Mapping[str, str]) -> sp.Basic:
    """The value of ``R1(args)``: substitute ``args`` into the expression held by ``R1``."""
    bindings: dict[str, sp.Basic] = {}
    sides = _read(value, {}, bindings)
    if len(sides) == 2 and isinstance(sides[0], sp.Symbol):
        function = sides[1]
    elif len(sides) == 1:
        function = sides[0]
    else:
        raise ToolError(f"cannot call {_shown(value)!r}: it is an equation, not an expression")
    if not isinstance(function, sp.Expr):
        raise ToolError(f"cannot call {_shown(value)!r}: it is a comparison, not an expression")
    pieces = [_read(piece, variables, bindings) for piece in _split_list(args, thousands=True)]
    params = sorted(function.free_symbols, key=str)
    if not params:
        if len(pieces) != 1 or len(pieces[0]) != 1:
            raise ToolError("a variable holding a number times (...) takes one value in brackets")
        return _check_size(function * _Builder._expr(pieces[0][0], "a product"))
    named = {p[0]: p[1] for p in pieces if len(p) == 2}
    for name in named:
        if not isinstance(name, sp.Symbol) or name not in params:
            raise ToolError(f"{_shown(name)} is not a variable of {_shown(function)}")
    free = [p for p in params if p not in named]
    positional = [p[0] for p in pieces if len(p) == 1]
    if len(positional) > len(free):
        raise ToolError(
            f"{_shown(function)} has {len(params)} variable(s) ({', '.join(map(str, params))}); "
            f"got {len(positional) + len(named)} argument(s)"
        )
    mapping = {**named, **dict(zip(free, positional, strict=False))}
    return _check_magnitude(_check_size(function.subs(mapping, simultaneous=True)))


def evaluate(formula: str, variables: Mapping[str, str] | None = None) -> sp.Basic:
    """Read and compute one formula (see the package docstring), without formatting it.

    Args:
        formula: e.g. ``"40% * p"`` or ``"R1 / 0.25"``.
        variables: the bound ``R<n>`` values.

    Returns:
        The sympy value: a number, an expression in free variables, or a boolean.

    Raises:
        ToolError: for a formula that cannot be read, is refused, or is too large.
        UndefinedVariableError: for an unbound ``R<n>``.
    """
    if not _in_process():
        return _in_a_worker("evaluate", evaluate, (formula, dict(variables or {})))
    with _as_tool_error("evaluate"):
        sides = _read(formula, variables or {}, {})
        if len(sides) != 1:
            raise ToolError("an equation, not a formula: remove the '='")
        return sides[0]

