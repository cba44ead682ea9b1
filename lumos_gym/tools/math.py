r"""Lumos' math actions (Calculator, equations, inequalities, Define, Count) on sympy, no eval.

The tools are ``Calculator``, ``SetEquation``, ``SolveEquation``, ``SolveInequality``,
``Define`` and ``Count``. Lumos ran them through WolframAlpha; here they run locally on sympy,
and model text is never handed to ``eval`` (nor to ``sympify``/``parse_expr``, which call it).

**Reading a formula.** Variables are substituted first, in brackets unless the value is an
unsigned number or a name (``R1 * 2`` with ``R1 = 3 + 4`` reads ``(3 + 4) * 2``; ``R1^2`` with
``R1 = -3`` reads ``(-3)^2``). Then:

* ``$``, ``€``, ``£`` are dropped; ``1,200`` (digits in groups of three) is ``1200``, so an
  argument list needs a space or fewer digits: ``max(1, 200)``.
* ``^`` and ``**`` are powers; ``×``, ``÷``, ``−`` and ``π`` are read as ``*``, ``/``, ``-``,
  ``pi``; ``[ ]`` and ``{ }`` group like ``( )``.
* ``%`` right after a number, a name or a closing bracket is **percent** (``40% * 50`` is 20,
  ``(1 + 5)%`` is 0.06) unless a number, a name or an opening bracket follows it, in which case
  it is the **remainder** (``10 % 3`` is 1, ``x % 2``). ``n!`` is ``factorial(n)``.
* A product may be implicit: ``2x``, ``2(3 + 4)``, ``(a + b)(a - b)``, ``3pi``; a name followed
  by ``(`` must be a known function (``x(y + 1)`` is refused; write ``x*(y + 1)``).
* Decimals are exact (``0.1 + 0.2`` is ``0.3``); ``1e3`` is 1000.
* ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=`` compare (``R6 > R3`` gives ``True``/``False``), and
  ``and``, ``or``, ``not`` combine comparisons.
* Functions (a fixed list, :data:`FUNCTIONS`): ``sqrt``, ``abs``, ``round(x[, digits])`` (halves
  away from zero), ``floor``, ``ceil``, ``min``, ``max``, ``log(x[, base])`` (natural by default),
  ``ln``, ``log10``, ``log2``, ``exp``, ``sin`` ``cos`` ``tan`` and their inverses and hyperbolic
  forms (radians), ``factorial``, ``binomial`` (``comb``, ``choose``), ``gcd``, ``lcm``, ``mod``
  and sympy's own spellings (``Abs``, ``ceiling``, ``Min``, ``Max``, ``Mod``), so that a result
  reads back. Constants: ``pi``, ``e`` (also ``E``) and ``I`` (the imaginary unit).
* Any other name is a free variable: ``40% * p`` gives ``2*p/5``.
* ``R1(R9)``: when ``R1`` holds an expression in free variables, the arguments are substituted
  for them, positionally in the order of the variables sorted by name, or by name
  (``R1(x = 2, y = 3)``); a value ``y = <expression>`` counts as its right side. When ``R1``
  holds a number, ``R1(...)`` is a product, as ``2(3 + 4)`` is.
* In ``Calculator`` one top-level ``=`` makes an equation whose two sides are computed
  (``Calculator(2*x + 2*x = 12)`` gives ``4*x = 12``).

**Safety.** The text is tokenised here (quotes, ``.`` outside numbers, ``:``, ``;``, ``@`` and
the like are refused outright), parsed with :func:`ast.parse`, and every node is checked
against a whitelist (numbers, names that are not dunder, arithmetic, comparison and boolean
operators, calls of the functions above by name) before the sympy expression is built from the
checked tree by this module. Work is bounded: formulas of at most
:data:`MAX_FORMULA_CHARS` characters, brackets nested at most :data:`MAX_NESTING` deep, exact
numbers of at most :data:`MAX_DIGITS` digits (``9^9^9^9`` is refused before it is computed),
bounded arguments of ``exp``, ``factorial`` and ``binomial``, and symbolic expansion only when
it yields at most :data:`MAX_EXPAND_TERMS` terms. As a last resort, sympy work is stopped after
:data:`TIME_LIMIT` seconds, in a worker process (:mod:`lumos_gym.tools.worker`) whose main
thread has ``SIGALRM``, and which is killed if it still does not answer. The alarm never
interrupts sympy in the caller's process: an exception raised at an arbitrary point of sympy's
code can leave its caches inconsistent, and in a long-lived process that later crashed the
interpreter (a segfault in attribute lookup, seen in the test suite). A worker that timed out is
retired. Only where no worker process can be started is the alarm used in the caller's main
thread.

**Values.** A result is written as follows (:func:`format_value`):

* integers as ``24``, never ``24.0``; ``True``/``False`` for comparisons;
* other numbers as decimals rounded to :data:`SIGNIFICANT_DIGITS` significant digits (never
  dropping a digit before the point), trailing zeros stripped: ``20/6`` gives
  ``3.33333333333``, ``sqrt(2)`` gives ``1.41421356237``; complex numbers as ``1 + 2*I``;
* expressions with free variables exactly, expanded when that is cheap, in sympy's text with
  ``^`` for powers: ``(p + 2)^2`` gives ``p^2 + 4*p + 4``, ``40% * p`` gives ``2*p/5``.

**Equations.** ``SetEquation``, ``SolveEquation`` and ``SolveInequality`` take one or several
relations separated by commas (``x + y = 10, x - y = 2``); an argument that is just a variable
holding equations (the value of an earlier ``SetEquation``) stands for those equations, and a
bare name (``x``) names an unknown to solve for. See each tool for the rules.

Bad input raises :class:`~lumos_gym.errors.ToolError` with a message that says what to change;
an unbound ``R<n>`` raises :class:`~lumos_gym.errors.UndefinedVariableError`, which the env
counts as an invalid action like everywhere else.
"""

from __future__ import annotations

import ast
import keyword
import math
import os
import re
import signal
import threading
import warnings
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import Any

import sympy as sp
from sympy.logic.boolalg import Boolean, BooleanAtom

from lumos_gym.actions import Action, substitute
from lumos_gym.errors import ToolError, UndefinedVariableError
from lumos_gym.scoring.answers import normalize_number
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from lumos_gym.tools.worker import WorkerPool, WorkerStartError

__all__ = [
    "FUNCTIONS",
    "Calculator",
    "Count",
    "Define",
    "SetEquation",
    "SolveEquation",
    "SolveInequality",
    "count_items",
    "evaluate",
    "format_value",
]

#: Significant digits of a non-integer number in a result.
SIGNIFICANT_DIGITS = 12
#: Longest formula accepted, after variables are substituted.
MAX_FORMULA_CHARS = 2000
#: Deepest bracket nesting accepted.
MAX_NESTING = 50
#: Most digits of an exact number, in a literal or in any intermediate result.
MAX_DIGITS = 1000
#: Most terms a symbolic result is expanded to; a bigger expansion is left unexpanded.
MAX_EXPAND_TERMS = 200
#: Seconds of sympy work allowed per action, in any thread (see the module docstring).
TIME_LIMIT = 3.0
#: Seconds a worker process may take beyond TIME_LIMIT before it is killed.
_WORKER_GRACE_S = 2.0

_MAX_BITS = math.ceil(MAX_DIGITS * math.log2(10))
_MAX_EXP_ARGUMENT = math.floor(MAX_DIGITS * math.log(10))  # exp(x) < 10**MAX_DIGITS
_MAX_FACTORIAL = 450  # 450! has 1001 digits
_MAX_BINOMIAL = 10_000
_MAX_UNKNOWNS = 8
_MAX_SOLVE_OPS = 400
_MAX_DEGREE = 24  # of a polynomial to solve
_MAX_ROOT = 6  # largest n of an n-th root of an unknown in an equation
_MAX_BEZOUT = 32  # product of the degrees of a polynomial system

_VARIABLE_RE = re.compile(r"R[0-9]+|Output")
_STRAY_VARIABLE_RE = re.compile(r"(?<=[0-9.])R[0-9]+\b")
_APPLY_RE = re.compile(r"\b(R[0-9]+|Output)\s*\(")
_BARE_OPERAND_RE = re.compile(r"[A-Za-z0-9_.]+")
_IDENTIFIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_THOUSANDS_RE = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])")
_RELATION_RE = re.compile(r"[=<>]")
_ELLIPSIS_RE = re.compile(r"\.{3,}|…")
_PLAIN_NUMBER_RE = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\$?\.\d+")
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


# ---------------------------------------------------------------------------------------------
# The whitelist: functions and constants


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


# ---------------------------------------------------------------------------------------------
# Bounds


#: How often the time limit's alarm repeats once the limit has passed, in seconds.
_REPEAT_S = 0.05


class _Timeout(BaseException):
    """Raised by the alarm of :func:`_time_limit`; a BaseException so sympy cannot swallow it."""


class _GaveUp(ToolError):
    """The time limit stopped a tool; the worker process it ran in is retired, not reused."""

    retire_worker = True


def _alarm_usable() -> bool:
    """Say whether :func:`_time_limit` can use the alarm.

    In the main thread with the timer free, and only in a worker process or where no worker
    can be started (see the module docstring).
    """
    return (
        (_in_worker or _worker_failed or not _POSIX)
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` with :class:`_Timeout`.

    Only where :func:`_alarm_usable`; elsewhere it is a no-op, and :class:`_SympyTool` runs the
    tools in a worker process where it is usable.
    """
    if not _alarm_usable():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, interrupt)
    # The alarm repeats: an interrupt that lands in a garbage-collector callback or a __del__
    # is swallowed by Python (an "unraisable" exception), and the work would then run unbounded.
    signal.setitimer(signal.ITIMER_REAL, seconds, _REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _as_tool_error(tool: str) -> Iterator[None]:
    """Run a tool's work under :data:`TIME_LIMIT`, turning every failure into a ToolError."""
    try:
        with _time_limit(TIME_LIMIT):
            yield
    except (ToolError, UndefinedVariableError):
        raise
    except _Timeout:
        raise _GaveUp(f"{tool} gave up after {TIME_LIMIT:g} s; simplify the input") from None
    except RecursionError:
        raise ToolError("the input is nested too deeply") from None
    except MemoryError:
        raise ToolError("the input needs too much memory") from None
    except Exception as e:  # sympy raises many exception types on odd input: all are bad input
        raise ToolError(f"cannot compute this: {type(e).__name__}: {e}") from e


def _check_size(value: sp.Basic) -> sp.Basic:
    """Refuse an exact number with more than :data:`MAX_DIGITS` digits, or a float as large."""
    if isinstance(value, sp.Rational):
        if max(int(value.p).bit_length(), int(value.q).bit_length()) > _MAX_BITS:
            raise ToolError(f"a number in this formula has more than {MAX_DIGITS} digits")
    elif isinstance(value, sp.Float) and value:
        _, mantissa, exponent, _ = value._mpf_
        if abs(exponent + int(mantissa).bit_length()) > _MAX_BITS:
            raise ToolError(f"a number in this formula has more than {MAX_DIGITS} digits")
    return value


def _check_magnitude(value: sp.Expr) -> sp.Expr:
    """Refuse a non-rational number too large or too small to write with MAX_DIGITS digits."""
    if value.is_number and not value.is_Rational:
        for part in value.evalf(15).as_real_imag():
            _check_size(part)
    return value


def _check_power(base: sp.Expr, exponent: sp.Expr) -> None:
    """Refuse ``base ** exponent`` before computing it when the result would be too large.

    sympy computes a power of numbers exactly as soon as it is built (``sqrt(2)^(10^9)`` is
    ``2^(5*10^8)``), so the size is estimated first: ``|exponent| * log2|base|`` bits.
    """
    if not (base.is_number and exponent.is_number) or base.is_zero:
        return
    if base.is_Rational and exponent.is_Rational:
        if base in (1, -1):
            return
        size = max(int(base.p).bit_length(), int(base.q).bit_length()) - 1
        bits: sp.Expr = abs(exponent) * max(size, 1)
    else:
        bits = (abs(exponent) * abs(sp.log(abs(base), 2))).evalf(15)
    if bits.is_number and bits.is_extended_real and bits > _MAX_BITS:
        raise ToolError(
            f"{_shown(sp.Pow(base, exponent, evaluate=False))} has more than {MAX_DIGITS} "
            "digits; use smaller numbers"
        )


def _term_count(expr: sp.Basic, limit: int = MAX_EXPAND_TERMS) -> int:
    """Return (an upper bound of) the number of terms of ``expand(expr)``, capped at limit+1."""
    if expr.is_Add:
        total = 0
        for arg in expr.args:
            total += _term_count(arg, limit)
            if total > limit:
                return limit + 1
        return total
    if expr.is_Mul:
        product = 1
        for arg in expr.args:
            product *= _term_count(arg, limit)
            if product > limit:
                return limit + 1
        return product
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
        terms = _term_count(expr.base, limit)
        if terms <= 1:
            return 1
        n = int(expr.exp)
        if n > limit:
            return limit + 1
        return min(math.comb(n + terms - 1, terms - 1), limit + 1)
    return 1


# ---------------------------------------------------------------------------------------------
# Text -> tokens -> checked Python syntax tree -> sympy


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
    """Read and compute one formula (see the module docstring), without formatting it.

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
        return _in_a_worker("evaluate", "evaluate", (formula, dict(variables or {})))
    with _as_tool_error("evaluate"):
        sides = _read(formula, variables or {}, {})
        if len(sides) != 1:
            raise ToolError("an equation, not a formula: remove the '='")
        return sides[0]


# ---------------------------------------------------------------------------------------------
# Values -> text


def _decimal(value: Decimal | Fraction) -> str:
    """Write a number with SIGNIFICANT_DIGITS significant digits, keeping every integer digit."""
    integer_digits = len(str(abs(int(value)))) if abs(value) >= 1 else 0
    with localcontext() as ctx:
        ctx.prec = max(SIGNIFICANT_DIGITS, integer_digits)
        ctx.rounding = ROUND_HALF_UP
        if isinstance(value, Fraction):
            number = Decimal(value.numerator) / Decimal(value.denominator)
        else:
            number = +value
        text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _real_text(value: sp.Expr) -> str:
    if value.is_Integer:
        return str(int(value))
    if value.is_Rational:
        return _decimal(Fraction(int(value.p), int(value.q)))
    return _decimal(Decimal(str(value)))


def _text(value: sp.Basic) -> str:
    """The exact text of a sympy value, in the syntax a formula reads back (``^`` for powers)."""
    if isinstance(value, BooleanAtom):
        return "True" if value else "False"
    if isinstance(value, sp.Eq):
        return f"{_text(value.lhs)} == {_text(value.rhs)}"
    if isinstance(value, sp.Rel):
        return f"{_text(value.lhs)} {value.rel_op} {_text(value.rhs)}"
    if isinstance(value, sp.And | sp.Or):
        word = " and " if isinstance(value, sp.And) else " or "
        return word.join(
            f"({_text(a)})" if isinstance(a, sp.And | sp.Or) else _text(a) for a in value.args
        )
    if isinstance(value, sp.Not):
        return f"not ({_text(value.args[0])})"
    return sp.sstr(value).replace("**", "^")


def _shown(value: sp.Basic | str, limit: int = 60) -> str:
    """The text of a value for an error message, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else _text(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _undefined(value: sp.Basic) -> str | None:
    if value.has(sp.zoo):
        return "division by zero"
    if value.has(sp.nan):
        return "the result is undefined (e.g. 0/0)"
    if value.has(sp.oo, -sp.oo):
        return "the result is infinite"
    return None


def format_value(value: sp.Basic) -> str:
    """Write a computed value as a tool result (see "Values" in the module docstring).

    Args:
        value: a sympy number, expression or boolean.

    Returns:
        The text: ``24``, ``3.33333333333``, ``True``, ``1 + 2*I``, ``2*p/5``...

    Raises:
        ToolError: for a division by zero, an undefined or infinite value.

    Examples:
        >>> format_value(sp.Rational(20, 6)), format_value(sp.Integer(24))
        ('3.33333333333', '24')
    """
    if isinstance(value, sp.Integer):
        return str(int(value))
    problem = _undefined(value)
    if problem:
        raise ToolError(problem)
    if isinstance(value, Boolean):
        if value.free_symbols or isinstance(value, BooleanAtom):
            return _text(value)
        return _decide(value)
    if value.free_symbols:
        return _expanded_text(value)
    if value.is_Rational:
        return _real_text(value)
    real, imag = _numeric_parts(value)
    if imag.is_zero:
        return _real_text(real)
    imag_text = _real_text(abs(imag))
    imag_part = "I" if imag_text == "1" else f"{imag_text}*I"
    if real.is_zero:
        return f"-{imag_part}" if imag < 0 else imag_part
    return f"{_real_text(real)} {'-' if imag < 0 else '+'} {imag_part}"


def _numeric_parts(value: sp.Expr) -> tuple[sp.Float, sp.Float]:
    """Return the real and imaginary parts of a number, evaluated to a few extra digits.

    An imaginary part below the precision of the real one (the rounding noise of, e.g., a
    cubic's roots written with ``I``) is dropped.
    """
    number = value.evalf(SIGNIFICANT_DIGITS + 8)
    real, imag = number.as_real_imag()
    if not (real.is_number and imag.is_number and real.is_finite and imag.is_finite):
        raise ToolError(f"cannot write {_shown(value)} as a number")
    if value.is_extended_real or abs(imag) <= abs(real) * sp.Float(10) ** -(SIGNIFICANT_DIGITS + 4):
        imag = sp.Float(0)
    return real, imag


def _expanded_text(value: sp.Expr) -> str:
    """The text of ``expand(value)`` when that is cheap and not much longer, else of ``value``."""
    text = _text(value)
    if _term_count(value) <= MAX_EXPAND_TERMS:
        expanded = _text(sp.expand(value))
        if len(expanded) <= max(200, 3 * len(text)):
            return expanded
    return text


def _decide(relation: Boolean) -> str:
    """Decide a comparison of numbers that sympy left open, numerically to 50 digits."""
    if isinstance(relation, sp.Not):
        return "False" if _decide(relation.args[0]) == "True" else "True"
    if isinstance(relation, sp.And | sp.Or):
        results = [_decide(a) == "True" for a in relation.args]
        ok = all(results) if isinstance(relation, sp.And) else any(results)
        return "True" if ok else "False"
    if isinstance(relation, BooleanAtom):
        return _text(relation)
    assert isinstance(relation, sp.Rel)
    difference = (relation.lhs - relation.rhs).evalf(50)
    scale = max(abs(relation.lhs.evalf(50)), abs(relation.rhs.evalf(50)), 1)
    if isinstance(relation, sp.Eq | sp.Ne):
        equal = bool(abs(difference) <= scale * sp.Float("1e-40"))
        return "True" if equal == isinstance(relation, sp.Eq) else "False"
    holds = type(relation)(difference, 0)
    if not isinstance(holds, BooleanAtom):
        raise ToolError(f"cannot decide {_shown(relation)}")
    return _text(holds)


# ---------------------------------------------------------------------------------------------
# Lists and relations


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


@dataclass(frozen=True)
class _Relation:
    """One argument of the equation tools.

    Attributes:
        kind: ``"equation"`` (``lhs = rhs``; an expression alone means ``= 0``), ``"inequality"``
            (``value`` holds the comparison) or ``"unknown"`` (a bare name to solve for).
        lhs: the left side (equations) or the unknown.
        rhs: the right side (equations).
        value: the comparison (inequalities).
    """

    kind: str
    lhs: sp.Expr = sp.Integer(0)
    rhs: sp.Expr = sp.Integer(0)
    value: Boolean = sp.true

    def text(self) -> str:
        """Return the relation as text a formula reads back."""
        if self.kind == "equation":
            return f"{_text(self.lhs)} = {_text(self.rhs)}"
        if self.kind == "inequality":
            return _text(self.value)
        return _text(self.lhs)


def _is_unknown_name(text: str) -> bool:
    """Whether ``text`` is a bare name that can be an unknown: ``x``, not ``R1``, ``pi``, ``or``."""
    return (
        _IDENTIFIER_RE.fullmatch(text) is not None
        and _VARIABLE_RE.fullmatch(text) is None
        and text not in _CONSTANTS
        and text not in FUNCTIONS
        and not keyword.iskeyword(text)
    )


def _relation(text: str, variables: Mapping[str, str]) -> _Relation:
    stripped = text.strip()
    if _is_unknown_name(stripped):
        return _Relation("unknown", lhs=sp.Symbol(stripped))
    sides = _read(text, variables, {})
    if len(sides) == 2:
        lhs, rhs = (_Builder._expr(s, "an equation") for s in sides)
        return _Relation("equation", lhs=lhs, rhs=rhs)
    (value,) = sides
    if isinstance(value, sp.Eq):
        return _Relation("equation", lhs=value.lhs, rhs=value.rhs)
    if isinstance(value, Boolean):
        return _Relation("inequality", value=value)
    return _Relation("equation", lhs=value)


def _relations(args: str, variables: Mapping[str, str]) -> list[_Relation]:
    """Read the comma-separated relations of an equation tool's argument.

    An argument that is just a variable holding relations (``R2`` with ``R2 = x + y = 10, x -
    y = 2``) stands for those relations; one holding a bare name (``R1 = Define(x)``) names an
    unknown.
    """
    relations = []
    for piece in _split_list(args, thousands=True):
        held = variables.get(piece) if _VARIABLE_RE.fullmatch(piece) else None
        if held is not None and _is_unknown_name(held.strip()):
            relations.append(_Relation("unknown", lhs=sp.Symbol(held.strip())))
        elif held is not None and _RELATION_RE.search(held):
            relations += [_relation(p, {}) for p in _split_list(held, thousands=True)]
        else:
            relations.append(_relation(piece, variables))
    return relations


def _pending(ctx: ToolContext) -> list[tuple[str, str]]:
    """The relations set by ``SetEquation`` and not yet solved: ``(kind, text)`` pairs."""
    return ctx.state.setdefault("SetEquation", [])


def _take_pending(ctx: ToolContext, kind: str) -> list[_Relation]:
    """Return the pending relations of ``kind`` (``"equation"`` or ``"inequality"``)."""
    return [_relation(text, {}) for k, text in _pending(ctx) if k == kind]


def _mark_solved(ctx: ToolContext, relations: Sequence[_Relation]) -> None:
    """Drop solved relations from the pending ones, so a later solve does not see them again."""
    solved = {rel.text() for rel in relations}
    _pending(ctx)[:] = [(k, text) for k, text in _pending(ctx) if text not in solved]


def _sort_key(value: sp.Expr) -> tuple[int, float, float, str]:
    if value.is_number:
        real, imag = value.evalf(20).as_real_imag()
        if real.is_number and imag.is_number:
            return (0, float(real), float(imag), "")
    return (1, 0.0, 0.0, str(value))


def _is_real(value: sp.Expr) -> bool:
    """Whether a solution value is real (symbolic values count as real)."""
    known = value.is_extended_real
    if known is not None:
        return known
    return not value.is_number or bool(_numeric_parts(value)[1].is_zero)


def _check_solvable(exprs: list[sp.Expr], unknowns: list[sp.Symbol]) -> None:
    """Refuse equations whose solving could take very long (see :class:`SolveEquation`)."""
    if len(unknowns) > _MAX_UNKNOWNS:
        raise ToolError(f"{len(unknowns)} unknowns; at most {_MAX_UNKNOWNS}")
    if sum(sp.count_ops(e) for e in exprs) > _MAX_SOLVE_OPS:
        raise ToolError("the equations are too large to solve here")
    bezout = 1
    for expr in exprs:
        for power in expr.atoms(sp.Pow):
            exponent = power.exp
            if power.base.free_symbols & set(unknowns) and exponent.is_Rational:
                if exponent.q > _MAX_ROOT or abs(exponent.p) > _MAX_DEGREE:
                    raise ToolError(
                        f"the power {_shown(power)} is too complex to solve here (exponents up to "
                        f"{_MAX_DEGREE}, roots up to the {_MAX_ROOT}th)"
                    )
        if expr.is_polynomial(*unknowns):
            degree = sp.Poly(expr, *unknowns).total_degree()
            if degree > _MAX_DEGREE:
                raise ToolError(f"degree {degree}; at most {_MAX_DEGREE} can be solved here")
            bezout *= max(degree, 1)
    if len(exprs) > 1 and bezout > _MAX_BEZOUT:
        raise ToolError("the system has too many solutions to compute here; simplify it")


def _solve_system(exprs: list[sp.Expr], unknowns: list[sp.Symbol]) -> list[dict]:
    """Solve with sympy; a polynomial of degree above 4 in one unknown is solved numerically."""
    if len(exprs) == 1 and len(unknowns) == 1:
        (expr,), (x,) = exprs, unknowns
        if expr.is_polynomial(x):
            poly = sp.Poly(expr, x)
            if poly.degree() > 4 and poly.free_symbols == {x}:
                roots = poly.sqf_part().nroots(n=SIGNIFICANT_DIGITS + 8, maxsteps=200)
                return [{x: root} for root in roots]
        return sp.solve(expr, x, dict=True)
    return sp.solve(exprs, unknowns, dict=True)


def _no_solution_message(exprs: list[sp.Expr], unknowns: list[sp.Symbol]) -> str:
    """Say why ``solve`` found nothing: no solution, or none that sympy can write exactly.

    For a nonlinear polynomial system sympy also answers "nothing" when the solutions are roots
    of a polynomial of degree above 4; a Groebner basis other than ``[1]`` tells that case apart.
    """
    polynomial = len(exprs) > 1 and all(e.is_polynomial(*unknowns) for e in exprs)
    if polynomial and any(sp.Poly(e, *unknowns).total_degree() > 1 for e in exprs):
        if list(sp.groebner(exprs, *unknowns, order="lex").exprs) != [1]:
            return (
                "sympy finds no exact solution: the system reduces to a polynomial of degree "
                "above 4; eliminate unknowns and solve the one-unknown equation instead"
            )
    return "the equations have no solution"


def _solve(equations: list[_Relation], named: list[sp.Symbol]) -> tuple[list, list[dict]]:
    """Solve equations for the named unknowns (or all free variables, sorted by name).

    Returns:
        The unknowns reported, and the solutions kept (see :class:`SolveEquation`).
    """
    exprs: list[sp.Expr] = []
    for eq in equations:
        expr = _check_size(eq.lhs - eq.rhs)
        if _undefined(expr):
            raise ToolError(f"{_shown(eq.text())}: {_undefined(expr)}")
        if expr.free_symbols:
            exprs.append(expr)
        elif abs(expr.evalf(30)) > sp.Float("1e-25"):
            raise ToolError(f"{_shown(eq.text())} is false: the equations have no solution")
    symbols = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    for name in named:
        if name not in symbols:
            raise ToolError(f"{name} does not appear in the equations")
    if not exprs:
        raise ToolError("nothing to solve: the equations hold whatever the unknowns are")
    unknowns = list(named) or list(symbols)
    extra = [s for s in symbols if s not in unknowns]
    while named and len(unknowns) < len(exprs) and extra:
        unknowns.append(extra.pop(0))
    _check_solvable(exprs, unknowns)
    try:
        solutions = _solve_system(exprs, unknowns)
    except NotImplementedError:
        raise ToolError("sympy cannot solve these equations in closed form") from None
    reported = list(named) or unknowns
    if not solutions:
        raise ToolError(_no_solution_message(exprs, unknowns))
    for solution in solutions:
        missing = [u for u in reported if u not in solution]
        loose = [u for u in reported if u in solution and solution[u].free_symbols & set(unknowns)]
        if missing or loose:
            shown = _shown(", ".join(f"{u} = {_text(v)}" for u, v in solution.items()), 120)
            raise ToolError(
                f"infinitely many solutions ({shown}); add an equation, or name the unknown to "
                "solve for after the equations, e.g. SolveEquation(R1, x)"
            )
    real = [s for s in solutions if all(_is_real(s[u]) for u in reported)]
    solutions = real or solutions
    positive = [s for s in solutions if all(s[u].is_positive for u in reported)]
    if len(solutions) > 1 and len(positive) == 1:
        solutions = positive
    solutions.sort(key=lambda s: [_sort_key(s[u]) for u in reported])
    return reported, solutions


# ---------------------------------------------------------------------------------------------
# Counting


def _progression_values(items: Sequence[str], variables: Mapping[str, str]) -> list[Fraction]:
    """Return the numbers that make the progression of the terms of a ``...`` list.

    They are the one number in which the written terms differ (``2^0, 2^1, ..., 2^10`` gives
    0, 1, 10; ``1/2, 1/3, ..., 1/9`` gives 2, 3, 9), else the values of the terms.
    """
    written = [_tokenize(_clean(item)) for item in items]
    shapes = {tuple(t.text if t.kind != "num" else "#" for t in tokens) for tokens in written}
    if len(shapes) == 1:
        varying = [
            i
            for i in range(len(written[0]))
            if written[0][i].kind == "num" and len({w[i].text for w in written}) > 1
        ]
        if len(varying) == 1:
            return [Fraction(_check_number_text(w[varying[0]].text)) for w in written]
    values = []
    for item in items:
        value = evaluate(item, variables)
        if not isinstance(value, sp.Expr) or not value.is_Rational:
            raise ToolError(f"cannot count past {item!r}: the terms must be exact numbers")
        values.append(Fraction(int(value.p), int(value.q)))
    return values


def _check_number_text(text: str) -> str:
    mantissa, _, exponent = text.lower().partition("e")
    if len(mantissa.replace(".", "").lstrip("0")) > MAX_DIGITS or (
        exponent and abs(int(exponent)) > MAX_DIGITS
    ):
        raise ToolError(f"the number {text[:20]}... has more than {MAX_DIGITS} digits")
    return text


def _count_progression(head: list[Fraction], tail: list[Fraction]) -> int:
    """The number of terms from ``head[0]`` to ``tail[-1]`` of the progression ``head`` starts."""
    first, last = head[0], tail[-1]
    steps = [b - a for a, b in zip(head, head[1:], strict=False)]
    if len(set(steps)) == 1 and steps[0] != 0:
        step = steps[0]
        positions = [(t - first) / step for t in tail]
        if all(p.denominator == 1 and p >= len(head) - 1 for p in positions):
            return int(positions[-1]) + 1
    if 0 not in head:
        ratios = [b / a for a, b in zip(head, head[1:], strict=False)]
        ratio = ratios[0]
        if len(set(ratios)) == 1 and abs(ratio) != 1 and last != 0:
            n = round(math.log(abs(float(last / first))) / math.log(abs(float(ratio))))
            for k in (n - 1, n, n + 1):
                if len(head) - 1 <= k <= _MAX_BITS and first * ratio**k == last:
                    return k + 1
    raise ToolError(
        "the terms around '...' form no arithmetic or geometric progression that reaches "
        f"{last}; write three terms before '...' and the last one after it"
    )


def count_items(text: str, variables: Mapping[str, str] | None = None) -> int:
    """Count the items of a list, or the terms of a progression written with ``...``.

    Items are separated by commas (at ``", "`` when the text has one, else at every comma);
    one pair of brackets around the whole list is ignored; variables are substituted first, so
    ``R3`` holding ``a, b, c`` counts 3.

    With ``...`` (or ``…``) as an item, at least two terms come before it and at least one
    after it. When the written terms differ in exactly one number, that number makes the
    progression (``2^0, 2^1, ..., 2^10`` has 11 terms, ``1^2, 2^2, ..., 10^2`` has 10, ``1/2,
    1/3, ..., 1/9`` has 8); otherwise their values do. An arithmetic progression is tried first
    (``3, 6, 9, ..., 99`` has 33 terms; ``2, 4, ..., 64`` has 32), then a geometric one
    (``2, 4, 8, ..., 64`` has 6; ``1, 0.5, 0.25, ..., 1/64`` has 7).

    Args:
        text: the list.
        variables: the bound ``R<n>`` values.

    Raises:
        ToolError: for a progression that cannot be counted.
    """
    variables = variables or {}
    listed = substitute(text, variables).strip()
    if listed and listed[0] in _OPENERS and _closing_bracket(listed, 0) == len(listed) - 1:
        listed = listed[1:-1]
    items = _split_list(listed, thousands=False)
    gaps = [i for i, item in enumerate(items) if _ELLIPSIS_RE.fullmatch(item)]
    if not gaps:
        return len(items)
    if len(gaps) > 1:
        raise ToolError("more than one '...' in the list")
    head, tail = items[: gaps[0]], items[gaps[0] + 1 :]
    if len(head) < 2:
        raise ToolError("write at least two terms before '...', e.g. Count(3, 6, ..., 99)")
    if not tail:
        raise ToolError("the list never ends: write the last term after '...'")
    with _as_tool_error("Count"):
        values = _progression_values(head + tail, variables)
        return _count_progression(values[: len(head)], values[len(head) :])


# ---------------------------------------------------------------------------------------------
# The tools

_WORKERS = WorkerPool(preload=(__name__,))
_POSIX = os.name == "posix"
#: Set when no worker process could be started: from then on the tools run in the caller.
_worker_failed = False
#: Set in a worker process of :data:`_WORKERS` (by its first call).
_in_worker = False


def _in_process() -> bool:
    """Say whether sympy work runs here rather than in a worker (see the module docstring)."""
    return _in_worker or _worker_failed or not _POSIX


def _in_a_worker(name: str, function: str, args: tuple[Any, ...]) -> Any:
    """Return ``function(*args)`` of this module computed in a worker, under the time limit.

    Falls back to calling it here (with a warning, once) when no worker can be started.

    Raises:
        ToolError: when the worker did not answer in time or died.
    """
    global _worker_failed
    call = (function, TIME_LIMIT, *args)
    try:
        return _WORKERS.run(__name__, "_in_worker_call", call, TIME_LIMIT + _WORKER_GRACE_S)
    except TimeoutError:
        raise ToolError(f"{name} gave up after {TIME_LIMIT:g} s; simplify the input") from None
    except EOFError:  # killed by the system (out of memory) or crashed
        raise ToolError(f"{name} failed: its worker process died; simplify the input") from None
    except WorkerStartError as e:  # no subprocess here: the alarm, in the main thread only
        _worker_failed = True
        warnings.warn(f"{e}; math tools run in this process, with a time limit in the main "
                      "thread only", RuntimeWarning, stacklevel=3)
        return globals()[function](*args)


class _SympyTool(Tool):
    """A tool whose sympy work stops after :data:`TIME_LIMIT` seconds, called from any thread.

    Subclasses implement :meth:`compute`, which runs in a worker process, with the variables and
    the pending equations sent along and the pending equations it leaves taken back (see the
    module docstring for why not in the caller's process).
    """

    @abstractmethod
    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run the action (what ``run`` does, in the calling process)."""

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run :meth:`compute` under the time limit (see the class docstring)."""
        if _in_process():
            return self.compute(action, ctx)
        before = list(ctx.state.get("SetEquation", []))
        args = (type(self).__name__, action, dict(ctx.variables), before)
        result, pending = _in_a_worker(self.spec.name, "_compute", args)
        if pending != before:
            _pending(ctx)[:] = pending
        return result

    def close(self) -> None:
        """Close the idle worker processes (the next call starts one)."""
        _WORKERS.close()


def _in_worker_call(function: str, time_limit: float, *args: Any) -> Any:
    """Call ``function(*args)`` of this module in a worker process, under the caller's limit."""
    global TIME_LIMIT, _in_worker
    TIME_LIMIT, _in_worker = time_limit, True
    return globals()[function](*args)


def _compute(
    tool: str,
    action: Action,
    variables: dict[str, str],
    pending: list[tuple[str, str]],
) -> tuple[ToolResult, list[tuple[str, str]]]:
    """Run a math tool and return what it left pending (see :class:`_SympyTool`)."""
    ctx = ToolContext(variables=variables, state={"SetEquation": pending})
    cls = globals()[tool]
    assert isinstance(cls, type) and issubclass(cls, _SympyTool)
    return cls().compute(action, ctx), _pending(ctx)


class Calculator(_SympyTool):
    """Compute a formula: a number, a comparison, or an expression in free variables.

    See the module docstring for the syntax, the bounds and how values are written.
    """

    spec = ToolSpec("Calculator", "Calculator(formula)", "Calculate the input formula")

    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Return the value of the formula in ``action.args``.

        Raises:
            ToolError: for a formula that is refused, cannot be read or has no finite value.
            UndefinedVariableError: for an unbound ``R<n>``.
        """
        with _as_tool_error("Calculator"):
            sides = _read(action.args, ctx.variables, {})
            value = " = ".join(format_value(side) for side in sides)
        return ToolResult((value,))


class SetEquation(_SympyTool):
    """Record equations (or inequalities) for a later ``SolveEquation``/``SolveInequality``.

    ``SetEquation(x + y = 10, x - y = 2)`` records two equations and returns them as exact
    text (``x + y = 10, x - y = 2``); an expression alone means ``= 0``. The value can be passed
    on (``SolveEquation(R1)``), or the solver can be called with no equation, when it takes
    every equation set since the last solve. With as many outputs as relations, each output
    gets one relation.
    """

    spec = ToolSpec("SetEquation", "SetEquation(equation)", "Set up an equation to be solved")

    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Record and return the relations of ``action.args``.

        Raises:
            ToolError: for a relation that cannot be read, or a bare name.
        """
        with _as_tool_error("SetEquation"):
            relations = _relations(action.args, ctx.variables)
            if not relations:
                raise ToolError("no equation: write e.g. SetEquation(2*x + 3 = 7)")
            for rel in relations:
                if rel.kind == "unknown":
                    raise ToolError(f"{rel.text()} is not an equation; write e.g. {rel.text()} = 3")
            texts = [rel.text() for rel in relations]
        n_outputs = len(action.outputs)
        if n_outputs > 1 and n_outputs != len(texts):
            raise ToolError(
                f"{len(texts)} relation(s) for {n_outputs} outputs; use one output, or one "
                "output per relation"
            )
        _pending(ctx).extend((rel.kind, text) for rel, text in zip(relations, texts, strict=True))
        return ToolResult(tuple(texts) if n_outputs > 1 else (", ".join(texts),))


class SolveEquation(_SympyTool):
    """Solve one equation or a system, given as the argument or set before.

    * **Equations.** The argument holds comma-separated equations (``2*x + 3 = 7``; ``R2 =
      R4``; an expression alone means ``= 0``), variables holding equations set by
      ``SetEquation`` (``SolveEquation(R1, R2)``), or none, to solve every equation set since the
      last solve.
    * **Unknowns.** Every free variable, sorted by name, unless the argument names the unknowns
      as bare names (``SolveEquation(R1, x)``): then those, in the order given, are reported, and
      other variables may stay in their values (``x + y = 10`` for ``x`` gives ``10 - y``).
    * **Outputs.** One output per reported unknown (``R5, R6 = SolveEquation(...)`` for ``x``
      and ``y``); a call with no output shows ``x = 6, y = 4``.
    * **Several solutions.** Real solutions are kept when there are any. If exactly one solution
      has every unknown positive, it is the value (``x^2 = 4`` gives ``2``); otherwise each output
      gets its unknown's values in every solution, ascending, joined by ``", "``
      (``x^2 - 5*x + 6 = 0`` gives ``2, 3``).
    * **Errors.** No solution, infinitely many, a contradiction, a wrong number of outputs.
    * **Limits.** At most 8 unknowns; polynomials up to degree 24 (above degree 4 in one unknown
      the roots are found numerically); roots of an unknown up to the 6th; a polynomial system
      whose degrees multiply to at most 32. Other equations go to sympy's ``solve``, which finds
      principal solutions only (``sin(x) = 1/2`` gives pi/6 and 5*pi/6, written as decimals).
    """

    spec = ToolSpec("SolveEquation", "SolveEquation(equation)", "Solve the previous set equation")

    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Solve and return one value per output.

        Raises:
            ToolError: see the class docstring.
        """
        with _as_tool_error("SolveEquation"):
            relations = _relations(action.args, ctx.variables)
            for rel in relations:
                if rel.kind == "inequality":
                    raise ToolError(f"{_shown(rel.text())} is an inequality: use SolveInequality")
            named = [rel.lhs for rel in relations if rel.kind == "unknown"]
            equations = [rel for rel in relations if rel.kind == "equation"]
            if not equations:
                equations = _take_pending(ctx, "equation")
            if not equations:
                raise ToolError(
                    "no equation to solve: pass one, e.g. SolveEquation(2*x + 3 = 7), or set it "
                    "first with SetEquation"
                )
            unknowns, solutions = _solve(equations, named)
            n_outputs = len(action.outputs)
            if n_outputs and n_outputs != len(unknowns):
                names = ", ".join(map(str, unknowns))
                raise ToolError(
                    f"{len(unknowns)} unknown(s) ({names}) but {n_outputs} output variable(s): "
                    "write one output per unknown, or name the unknown to solve for, e.g. "
                    f"SolveEquation(..., {unknowns[0]})"
                )
            columns = [
                ", ".join(format_value(solution[u]) for solution in solutions) for u in unknowns
            ]
            shown = " or ".join(
                ", ".join(f"{u} = {format_value(s[u])}" for u in unknowns) for s in solutions
            )
            _mark_solved(ctx, equations)
        return ToolResult(tuple(columns), observation=shown)


class SolveInequality(_SympyTool):
    """Solve inequalities in one unknown, given as the argument or set before.

    The argument holds comma-separated inequalities (all must hold), variables holding
    inequalities set by ``SetEquation``, or none, to solve every inequality set since the last
    solve. The unknown is the one free variable (or a bare name in the argument); it is taken
    to be real. The value reads ``x > 3``, ``-2 < x < 2``, ``x < -2 or x > 2``, ``x = 2``, or
    ``all real numbers``; bounds are written as numbers (``-1.41421356237 < x <
    1.41421356237``). No solution is an error.
    """

    spec = ToolSpec(
        "SolveInequality", "SolveInequality(inequality)", "Solve the previous set inequality"
    )

    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Solve and return the solution set as text.

        Raises:
            ToolError: for no solution, several unknowns, or what sympy cannot solve.
        """
        with _as_tool_error("SolveInequality"):
            relations = _relations(action.args, ctx.variables)
            named = [rel.lhs for rel in relations if rel.kind == "unknown"]
            given = [rel for rel in relations if rel.kind != "unknown"]
            if not given:
                given = _take_pending(ctx, "inequality")
            if not given:
                raise ToolError(
                    "no inequality to solve: pass one, e.g. SolveInequality(2*x + 3 > 7)"
                )
            conditions = [
                sp.Eq(rel.lhs, rel.rhs) if rel.kind == "equation" else rel.value for rel in given
            ]
            text = _solve_inequalities(conditions, named)
            _mark_solved(ctx, given)
        return ToolResult((text,))


def _solve_inequalities(conditions: list[Boolean], named: list[sp.Symbol]) -> str:
    symbols = sorted(set().union(*(c.free_symbols for c in conditions)), key=str)
    if len(named) > 1 or len(symbols) > 1:
        shown = ", ".join(map(str, named if len(named) > 1 else symbols))
        raise ToolError(f"SolveInequality solves for one unknown; found {shown}")
    if not symbols:
        raise ToolError("no unknown in the inequality")
    (x,) = symbols
    if named and named[0] != x:
        raise ToolError(f"{named[0]} does not appear in the inequality")
    exprs = [r.lhs - r.rhs for c in conditions for r in c.atoms(sp.Rel) if isinstance(r, sp.Rel)]
    _check_solvable(exprs, [x])
    branches: list[list[Boolean]] = [[]]
    for condition in conditions:
        for part in condition.args if isinstance(condition, sp.And) else (condition,):
            if isinstance(part, sp.Or):
                branches = [b + [option] for b in branches for option in part.args]
            else:
                branches = [b + [part] for b in branches]
        if len(branches) > 16:
            raise ToolError("too many alternatives ('or') to solve here")
    try:
        solution = sp.Or(*(sp.reduce_inequalities(b, [x]) for b in branches))
    except NotImplementedError:
        raise ToolError("sympy cannot solve this inequality") from None
    if solution == sp.false:
        raise ToolError("no real value satisfies the inequality")
    if solution == sp.true:
        return "all real numbers"
    return _solution_text(solution, x)


_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _solution_text(solution: Boolean, x: sp.Symbol) -> str:
    """Write a solution set of ``x`` readably: ``-2 < x < 2``, ``x > 3``, ``x < 0 or x > 1``."""
    if isinstance(solution, sp.Or):
        return " or ".join(_solution_text(a, x) for a in solution.args)
    parts = solution.args if isinstance(solution, sp.And) else (solution,)
    lower: list[tuple[str, str]] = []  # x > a as (">", "a")
    upper: list[tuple[str, str]] = []  # x < b as ("<", "b")
    others: list[str] = []
    for part in parts:
        if not isinstance(part, sp.Rel):
            others.append(_text(part))
            continue
        op, lhs, rhs = part.rel_op, part.lhs, part.rhs
        if rhs == x and lhs != x:
            op, lhs, rhs = _FLIP.get(op, op), rhs, lhs
        if lhs != x or rhs.free_symbols:
            others.append(_text(part))
        elif rhs in (sp.oo, -sp.oo):
            continue
        elif op in (">", ">="):
            lower.append((op, format_value(rhs)))
        elif op in ("<", "<="):
            upper.append((op, format_value(rhs)))
        else:
            others.append(f"{x} {'=' if op == '==' else op} {format_value(rhs)}")
    if lower and upper:
        chain = f"{lower[0][1]} {_FLIP[lower[0][0]]} {x} {upper[0][0]} {upper[0][1]}"
    elif lower or upper:
        op, bound = (lower or upper)[0]
        chain = f"{x} {op} {bound}"
    else:
        chain = ""
    return " and ".join(t for t in [chain, *others] if t) or "all real numbers"


class Define(Tool):
    """Define a variable or a number for later use: the value is the argument itself.

    Variables are substituted, a plain number is normalised (``$1,200.50`` gives ``1200.5``,
    ``5.0`` gives ``5``), anything else is kept as written (``Define(p)`` gives ``p``). With
    several outputs, the comma-separated items go one to each output.
    """

    spec = ToolSpec(
        "Define", "Define(variable/number)", "Define a variable or a number for latter usage"
    )

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Return the substituted argument (one item per output).

        Raises:
            ToolError: for an empty argument or a wrong number of items.
        """
        text = substitute(action.args, ctx.variables).strip()
        if not text:
            raise ToolError("nothing to define: write e.g. R1 = Define(p)")
        n_outputs = len(action.outputs)
        items = _split_list(text, thousands=True) if n_outputs > 1 else [text]
        if n_outputs > 1 and len(items) != n_outputs:
            raise ToolError(f"{len(items)} item(s) for {n_outputs} outputs")
        return ToolResult(tuple(_defined(item) for item in items))


def _defined(item: str) -> str:
    if _PLAIN_NUMBER_RE.fullmatch(item):
        return normalize_number(item) or item
    return item


class Count(_SympyTool):
    """Count the elements of a list, or the terms of a progression with ``...``.

    See :func:`count_items` for the rules: ``Count(2, 4, 6)`` and ``Count([a, b, c])`` give 3,
    ``Count(3, 6, 9, ..., 99)`` gives 33, ``Count(2^0, 2^1, ..., 2^10)`` gives 11.
    """

    spec = ToolSpec("Count", "Count(list)", "Count the number of elements in the given list")

    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Return the number of elements.

        Raises:
            ToolError: for a progression that cannot be counted.
        """
        return ToolResult((str(count_items(action.args, ctx.variables)),))
