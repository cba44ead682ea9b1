"""Arithmetic read from math rationales: numbers, formulas, exact values, ASDiv's formula parts.

The pure text helpers of the rule-based math converters (:mod:`lumos_gym.conversion.rules`):
:func:`substitute_results` writes earlier results into a formula as ``R<n>`` variables,
:func:`problem_numbers` lists a problem's numbers, :func:`exact_value` evaluates plain
arithmetic over fractions, :func:`unmarked_formulas` finds the formulas a GSM8K sentence writes
without ``<<...>>`` marks, and :func:`asdiv_calculations` reads an ASDiv ``<Formula>``. Nothing
here raises :class:`~lumos_gym.conversion.rules.ConversionError`; the converters do.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction

from lumos_gym.envs.math.data import (
    _is_infix_arithmetic,
    calculator_expression,
    parse_asdiv_formula,
)
from lumos_gym.scoring.answers import answers_match, to_fraction

__all__ = [
    "asdiv_calculations",
    "exact_value",
    "problem_numbers",
    "substitute_results",
    "unmarked_formulas",
]

#: How far a computed value may be from the value a rationale or gold answer writes (relative):
#: the tolerance of :func:`~lumos_gym.scoring.answers.answers_match` before scoring became exact.
_REL_TOL = 1e-6

# ---------------------------------------------------------------------------------------------
# Numbers and results

# An unsigned number token as a whole: not part of a longer number, a variable or a decimal.
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.]|,\d{3})|(?<![\w.])\.\d+(?![\w.])"
)


def substitute_results(
    expr: str,
    results: Sequence[tuple[str, str]],
    *,
    given: Iterable[str] = (),
    consumed: Iterable[str] = (),
) -> str:
    """Write each number of ``expr`` that equals an earlier result as that result's variable.

    Only whole number tokens are replaced (``52`` is never the ``5`` of ``52``, nor ``2`` the
    ``2`` of ``2.5`` or ``1,200``), and only when their value equals the result exactly
    (``7.50`` matches ``7.5``). When several results have the value, the latest one is used.
    Two rules settle a number that is both a result and a given number of the problem:

    * each result is used once per formula, for its first occurrence (``3 * 3`` after
      ``R1 = 3`` gives ``R1 * 3``);
    * a result already used by an earlier formula is not used again for a number the problem
      itself gives (``given``): the problem's number is then the likelier reading.

    On generated MathWord problems, whose true references are known, these rules pick the
    generator's own formulas for about 99% of the problems.

    Args:
        expr: a Calculator formula.
        results: ``(variable, value)`` of the earlier actions, in order.
        given: the numbers written in the problem text.
        consumed: the variables that earlier formulas already use.

    Returns:
        The formula with variables substituted.
    """
    latest: dict[Fraction, str] = {}
    for var, value in results:
        number = to_fraction(value)
        if number is not None and number >= 0:
            latest[number] = var
    problem_numbers = {to_fraction(x) for x in given} - {None}
    used = set(consumed)
    taken: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        number = to_fraction(match.group(0))
        var = latest.get(number) if number is not None else None
        if var is None or var in taken or (var in used and number in problem_numbers):
            return match.group(0)
        taken.add(var)
        return var

    return _NUMBER_TOKEN.sub(replace, expr) if latest else expr


def problem_numbers(text: str) -> list[str]:
    """Return the numbers written in a problem text (``$`` and thousands commas allowed)."""
    return _NUMBER_TOKEN.findall(text.replace("$", " "))


def _tidy_formula(expr: str) -> str:
    """``( 14.0 - 9.0 )`` becomes ``14 - 9``: no ``.0``, no spaces inside brackets."""
    text = re.sub(r"(?<![\d.])(\d+)\.0+(?![\d])", r"\1", calculator_expression(expr))
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))
    text = " ".join(text.split())
    if text.startswith("(") and _closing_paren(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    return text


def _closing_paren(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


# ---------------------------------------------------------------------------------------------
# Formulas written without marks (GSM8K)

# An unmarked formula written in the text, ``20/4 = $5`` or ``42 minutes + 10 minutes = 52``:
# numbers (``$``, thousands commas, ``k`` and ``%`` suffixes) or bracketed groups, each maybe
# followed by a few unit words, joined by operators, then ``=`` and a number.
_PLAIN_NUMBER = r"\$?(?:\d[\d,]*(?:\.\d+)?|\.\d+)[k%]?"
_PLAIN_TERM = rf"(?:{_PLAIN_NUMBER}|\([^()=<>]*\))"
_UNIT_WORDS = r"(?:\s+(?!and\b|x\b)[A-Za-z][A-Za-z'-]*(?:/[A-Za-z]+)?){0,5}"
_PLAIN_OPERATOR = r"\s*(?:[-+*/\u00d7\u00f7:\u2013\u2212]|\bx\b)\s*"
_PLAIN_FORMULA = re.compile(
    rf"(?<![\w.])({_PLAIN_TERM}{_UNIT_WORDS}(?:{_PLAIN_OPERATOR}{_PLAIN_TERM}{_UNIT_WORDS})+)"
    rf"\s*=\s*({_PLAIN_NUMBER})(?!\d)"
)
_MIXED_NUMBER = re.compile(r"\b(\d+) and (\d+)/(\d+)\b")
_PERCENT_PRODUCT = re.compile(r"(\d+(?:\.\d+)?)%\s*\*\s*(\d+(?:\.\d+)?)%")


def exact_value(expr: str) -> Fraction | None:
    """Return the exact value of infix arithmetic (numbers, ``+ - * /``, brackets), or None.

    The text is parsed with :mod:`ast` and evaluated over fractions node by node; nothing is
    executed, and anything but numbers and those operators gives None.
    """
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Div) and right != 0:
                return left / right
        raise ValueError("not plain arithmetic")

    try:
        return value(tree)
    except (ValueError, RecursionError):
        return None


def unmarked_formulas(sentence: str) -> list[tuple[str, str]]:
    """Return the formulas a sentence writes without ``<<...>>`` marks, as ``(expr, value)``.

    About 3% of GSM8K's training rationales leave a step unmarked, often the last one
    (``She bought 4 tops for a total of $20 so 20/4 = $5``). A formula is kept only when it is
    plain arithmetic once units, ``$``, ``k`` and thousands commas are dropped (``x`` and ``×``
    read as ``*``, ``÷`` and ``:`` as ``/``, ``2 and 1/4`` as ``(2+1/4)``) and its exact value
    is the number written after ``=``. Percentages: ``40% + 20% = 60%`` adds the percent
    numbers; ``60% * 50% = 30%`` becomes ``60 * 50 / 100``.
    """
    text = _MIXED_NUMBER.sub(r"(\1+\2/\3)", re.sub(r"<<.*?>>", " # ", sentence))
    found = []
    for match in _PLAIN_FORMULA.finditer(text):
        expr = re.sub(r"\bx\b|\u00d7", "*", match.group(1))
        for old, new in (("\u00f7", "/"), (":", "/"), ("\u2013", "-"), ("\u2212", "-"), ("$", "")):
            expr = expr.replace(old, new)
        expr = re.sub(r"[A-Za-z][A-Za-z'-]*(?:/[A-Za-z]+)?", " ", re.sub(r"(?<=\d)k\b", "", expr))
        expr = " ".join(re.sub(r"(?<=\d),(?=\d{3})", "", expr).split())
        written = match.group(2).replace("$", "").replace(",", "").rstrip("k%")
        target = to_fraction(written)
        candidates = [expr.replace("%", "")]
        if "%" in expr:
            candidates.append(_PERCENT_PRODUCT.sub(r"\1 * \2 / 100", expr))
        for candidate in candidates:
            if (
                target is not None
                and _is_infix_arithmetic(candidate)
                and exact_value(candidate) == target
            ):
                found.append((candidate, written))
                break
    return found


# ---------------------------------------------------------------------------------------------
# ASDiv's formula parts

_NUM = r"(\d+(?:\.\d+)?)"
_REMAINDER_PART = re.compile(rf"\s*{_NUM}\s*/\s*{_NUM}\s*=\s*(\d+)\s*r\s*(\d+)\s*\Z", re.I)
_GCD_LCM_PART = re.compile(r"\s*(GCD|GCF|HCF|LCM)\s*\(([\d\s,]+)\)\s*=\s*(\d+)\s*\Z", re.I)
_RATIO_PART = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*=\s*(\d+)\s*:\s*(\d+)\s*\Z")


def asdiv_calculations(formula: str, answer: str) -> list[tuple[str, str]] | None:
    """Read an ASDiv ``<Formula>`` as ``(Calculator formula, value)`` calculations.

    Plain arithmetic parts are read by :func:`~lumos_gym.envs.math.data.parse_asdiv_formula`;
    three more kinds of part become whitelisted Calculator functions:

    * a division with remainder ``35/8=4 r 3`` gives ``floor(35/8) = 4``, followed by
      ``Mod(35, 8) = 3`` when the remainder is the answer;
    * ``GCD(18,24)=6`` (also GCF, HCF) and ``LCM(4,6)=12`` give ``gcd(18, 24)`` and ``lcm(4, 6)``;
    * a ratio ``12:16=3:4`` gives ``12/16`` with the value ``3/4`` (a ratio answer ``3:4`` is
      scored as the number 0.75).

    Args:
        formula: the formula text.
        answer: the answer's value (``"4"``, ``"3:4"``).

    Returns:
        The calculations, or None when a part is none of these (algebra, comparisons).
    """
    calcs: list[tuple[str, str]] = []
    for part in formula.split(";"):
        if not part.strip():
            continue
        if m := _REMAINDER_PART.match(part):
            dividend, divisor, quotient, remainder = m.groups()
            calcs.append((f"floor({dividend}/{divisor})", quotient))
            if answers_match(remainder, answer, rel_tol=_REL_TOL) and not answers_match(
                quotient, answer, rel_tol=_REL_TOL
            ):
                calcs.append((f"Mod({dividend}, {divisor})", remainder))
        elif m := _GCD_LCM_PART.match(part):
            name = "lcm" if m.group(1).upper() == "LCM" else "gcd"
            numbers = [n.strip() for n in m.group(2).split(",") if n.strip()]
            if len(numbers) < 2:
                return None
            calcs.append((f"{name}({', '.join(numbers)})", m.group(3)))
        elif m := _RATIO_PART.match(part):
            a, b, c, d = m.groups()
            if int(b) == 0 or int(d) == 0:
                return None
            calcs.append((f"{a}/{b}", f"{c}/{d}"))
        else:
            parsed = parse_asdiv_formula(part)
            if parsed is None:
                return None
            calcs.extend(parsed)
    return calcs or None
