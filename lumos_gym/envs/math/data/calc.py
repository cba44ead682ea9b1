"""Calculator marks and arithmetic formulas of the math datasets, and gold calculator actions.

Shared by the loaders (GSM8K's ``<<expr=value>>`` marks, SVAMP's equations, ASDiv's formulas)
and by :mod:`lumos_gym.conversion.rules`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from lumos_gym.scoring.answers import to_fraction

_CALC_MARK = re.compile(r"<<(.*?)>>")
_ARITHMETIC = re.compile(r"^[\d\s.,+\-*/()%^]*\d[\d\s.,+\-*/()%^]*$")
_PURE_NUMBER = re.compile(
    r"^(?=[^\d]*\d)\s*[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:/\d+)?\s*$"
)


@dataclass(frozen=True)
class CalcMark:
    """One GSM8K calculator annotation ``<<expr=value>>``.

    Attributes:
        expr: the expression, as written.
        value: the result, as written (``None`` when the mark has no ``=``).
        start: offset of ``<<`` in the text.
        end: offset just after ``>>``.
    """

    expr: str
    value: str | None
    start: int
    end: int


def parse_calc_marks(text: str) -> list[CalcMark]:
    """Return the ``<<expr=value>>`` marks of a GSM8K solution, in order.

    The value is the text after the last ``=``, so ``<<a=b=c>>`` gives ``expr="a=b"``.

    Args:
        text: a GSM8K solution text.

    Returns:
        The marks; empty marks (``<<>>``) are skipped.
    """
    marks = []
    for m in _CALC_MARK.finditer(text):
        body = m.group(1)
        expr, eq, value = body.rpartition("=")
        if not eq:
            expr, value = body, None
        if expr.strip():
            marks.append(
                CalcMark(expr.strip(), None if value is None else value.strip(), *m.span())
            )
    return marks


def strip_calc_marks(text: str) -> str:
    """Remove the ``<<...>>`` marks from a GSM8K solution, leaving the prose as people read it.

    Args:
        text: a GSM8K solution text.

    Returns:
        The text without marks.
    """
    return _CALC_MARK.sub("", text)


def calculator_expression(expr: str) -> str:
    """Rewrite a dataset's arithmetic expression into the lumos Calculator's syntax.

    Python's ``**`` becomes ``^``; ``×``, ``÷`` and the Unicode minus become ``*``, ``/`` and
    ``-``; everything else is kept (the Calculator reads ``$``, ``,`` and ``%`` itself).

    Args:
        expr: the expression.

    Returns:
        The rewritten, stripped expression.
    """
    out = expr.replace("**", "^").replace("×", "*").replace("÷", "/").replace("\u2212", "-")
    return out.strip()


def _is_infix_arithmetic(expr: str) -> bool:
    """Whether ``expr`` is numbers joined by infix ``+ - * / ^ %`` and parentheses (parsed only).

    Rejects prefix notation (``- 5 7``), tuples, names and anything else the Calculator would not
    read as one arithmetic formula. Nothing is evaluated.
    """
    if not _ARITHMETIC.match(expr):
        return False
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", expr).replace("^", "**")
    text = re.sub(r"(?<=[\d)])\s*%", "/100", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    return all(isinstance(node, allowed) for node in ast.walk(tree)) and all(
        isinstance(node.value, int | float)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
    )


def _same_number(a: object, b: object) -> bool:
    x, y = to_fraction(a), to_fraction(b)
    return x is not None and y is not None and x == y


def _calc_actions(exprs: list[str]) -> list[str]:
    return [f"R{k} = Calculator({calculator_expression(e)})" for k, e in enumerate(exprs, 1)]


def _final_answer(values: list[str | None], gold: str) -> str:
    """``Answer(R<k>)`` for the last calculation whose value is the gold answer, else the gold."""
    if values and _same_number(values[-1], gold):
        return f"Answer(R{len(values)})"
    return f"Answer({gold})"
