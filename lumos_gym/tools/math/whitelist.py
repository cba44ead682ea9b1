"""The whitelist of a math formula: the functions it may call and the constants it may name.

:data:`FUNCTIONS` maps each name a formula may call to its number of arguments and to how it
builds the sympy value; the builders of ``round``, ``exp``, ``factorial``, ``binomial``,
``gcd``, ``lcm`` and ``mod`` check their arguments (within the bounds of
:mod:`lumos_gym.tools.math.limits`) before anything is computed. :data:`_CONSTANTS` are the
names with a value, and :data:`_OPERATOR_WORDS` the keywords read as operators.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from lumos_gym.errors import ToolError
from lumos_gym.tools.math.limits import (
    _MAX_BINOMIAL,
    _MAX_EXP_ARGUMENT,
    _MAX_FACTORIAL,
    MAX_DIGITS,
)
from lumos_gym.tools.math.values import _shown


def _number_argument(name: str, value: sp.Expr) -> sp.Expr:
    """Return ``value`` when it is a real number, else refuse it for function ``name``."""
    if not (value.is_number and value.is_extended_real):
        raise ToolError(f"{name}() needs a real number, got {_shown(value)}")
    return value


def _integer_argument(name: str, value: sp.Expr, *, low: int, high: int) -> int:
    """Return ``value`` as an int in ``[low, high]``, or refuse it for function ``name``."""
    if not value.is_Integer or not low <= int(value) <= high:
        raise ToolError(f"{name}() needs a whole number from {low} to {high}, got {_shown(value)}")
    return int(value)


def _exact(value: sp.Expr) -> Fraction:
    """Return a real number as an exact fraction (irrational ones to 60 significant digits)."""
    if value.is_Rational:
        return Fraction(int(value.p), int(value.q))
    return Fraction(str(sp.Float(value.evalf(60), 60)))


def _round(x: sp.Expr, digits: sp.Expr | None = None) -> sp.Expr:
    """``round(x, digits)``: round half away from zero (``round(2.5)`` is 3)."""
    n = 0 if digits is None else _integer_argument("round", digits, low=-30, high=MAX_DIGITS)
    value = _exact(_number_argument("round", x))
    scale = Fraction(10) ** n
    rounded = math.floor(abs(value) * scale + Fraction(1, 2)) / scale
    return sp.Rational(-rounded if value < 0 else rounded)


def _log(x: sp.Expr, base: sp.Expr | None = None) -> sp.Expr:
    return sp.log(x) if base is None else sp.log(x, base)


def _exp(x: sp.Expr) -> sp.Expr:
    if x.is_number and x.is_extended_real and x > _MAX_EXP_ARGUMENT:
        raise ToolError(f"exp() of a number above {_MAX_EXP_ARGUMENT} is too large")
    return sp.exp(x)


def _factorial(n: sp.Expr) -> sp.Expr:
    if n.is_number:
        _integer_argument("factorial", n, low=0, high=_MAX_FACTORIAL)
    return sp.factorial(n)


def _binomial(n: sp.Expr, k: sp.Expr) -> sp.Expr:
    if n.is_number:
        _integer_argument("binomial", n, low=-_MAX_BINOMIAL, high=_MAX_BINOMIAL)
    if k.is_number:
        _integer_argument("binomial", k, low=-_MAX_BINOMIAL, high=_MAX_BINOMIAL)
    return sp.binomial(n, k)


def _gcd_lcm(name: str, combine: Callable[[int, int], int]) -> Callable[..., sp.Expr]:
    def apply(*args: sp.Expr) -> sp.Expr:
        result = 0 if name == "gcd" else 1
        for arg in args:
            if not arg.is_Integer:
                raise ToolError(f"{name}() needs whole numbers, got {_shown(arg)}")
            result = combine(result, int(arg))
        return sp.Integer(result)

    return apply


def _mod(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    if b.is_zero:
        raise ToolError("remainder (%) by zero")
    return sp.Mod(a, b)


@dataclass(frozen=True)
class _Function:
    """A whitelisted function: its arity and how it builds a sympy value."""

    low: int
    high: int
    build: Callable[..., sp.Expr]


def _fn(low: int, high: int, build: Callable[..., sp.Expr]) -> _Function:
    return _Function(low, high, build)


FUNCTIONS: dict[str, _Function] = {
    "sqrt": _fn(1, 1, sp.sqrt),
    "abs": _fn(1, 1, sp.Abs),
    "Abs": _fn(1, 1, sp.Abs),
    "round": _fn(1, 2, _round),
    "floor": _fn(1, 1, sp.floor),
    "ceil": _fn(1, 1, sp.ceiling),
    "ceiling": _fn(1, 1, sp.ceiling),
    "min": _fn(1, 100, sp.Min),
    "Min": _fn(1, 100, sp.Min),
    "max": _fn(1, 100, sp.Max),
    "Max": _fn(1, 100, sp.Max),
    "log": _fn(1, 2, _log),
    "ln": _fn(1, 1, sp.log),
    "log10": _fn(1, 1, lambda x: sp.log(x, 10)),
    "log2": _fn(1, 1, lambda x: sp.log(x, 2)),
    "exp": _fn(1, 1, _exp),
    "sin": _fn(1, 1, sp.sin),
    "cos": _fn(1, 1, sp.cos),
    "tan": _fn(1, 1, sp.tan),
    "asin": _fn(1, 1, sp.asin),
    "acos": _fn(1, 1, sp.acos),
    "atan": _fn(1, 1, sp.atan),
    "arcsin": _fn(1, 1, sp.asin),
    "arccos": _fn(1, 1, sp.acos),
    "arctan": _fn(1, 1, sp.atan),
    "sinh": _fn(1, 1, sp.sinh),
    "cosh": _fn(1, 1, sp.cosh),
    "tanh": _fn(1, 1, sp.tanh),
    "factorial": _fn(1, 1, _factorial),
    "binomial": _fn(2, 2, _binomial),
    "comb": _fn(2, 2, _binomial),
    "choose": _fn(2, 2, _binomial),
    "gcd": _fn(1, 100, _gcd_lcm("gcd", math.gcd)),
    "lcm": _fn(1, 100, _gcd_lcm("lcm", math.lcm)),
    "mod": _fn(2, 2, _mod),
    "Mod": _fn(2, 2, _mod),
}
"""The functions a formula may call, by name."""

_CONSTANTS: dict[str, sp.Expr] = {"pi": sp.pi, "e": sp.E, "E": sp.E, "I": sp.I}
_OPERATOR_WORDS = frozenset(w for w in keyword.kwlist if w not in ("True", "False", "None"))
