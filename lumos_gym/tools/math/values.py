"""How the math tools write a computed value: numbers, expressions and comparisons as text.

:func:`format_value` writes a tool's result (see "Values" in :mod:`lumos_gym.tools.math`);
:func:`_text` and :func:`_shown` write any sympy value in the syntax a formula reads back, for
results and error messages. A symbolic result is expanded only when :func:`_term_count` says
that the expansion has at most :data:`MAX_EXPAND_TERMS` terms.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import sympy as sp
from sympy.logic.boolalg import Boolean, BooleanAtom

from lumos_gym.errors import ToolError

#: Significant digits of a non-integer number in a result.
SIGNIFICANT_DIGITS = 12
#: Most terms a symbolic result is expanded to; a bigger expansion is left unexpanded.
MAX_EXPAND_TERMS = 200


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
    """Write a computed value as a tool result (see "Values" in the package docstring).

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
