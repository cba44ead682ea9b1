"""The relations of the equation tools, and how equations and inequalities are solved.

:func:`_relations` reads a tool's comma-separated equations, inequalities and unknowns;
:func:`_pending` holds the ones ``SetEquation`` recorded and no solve has taken yet;
:func:`_solve` solves equations (once :func:`_check_solvable` has refused what could take very
long), and :func:`_solve_inequalities` inequalities in one unknown, written by
:func:`_solution_text`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sympy as sp
from sympy.logic.boolalg import Boolean

from lumos_gym.errors import ToolError
from lumos_gym.tools.base import ToolContext
from lumos_gym.tools.math.evaluator import _Builder, _read
from lumos_gym.tools.math.limits import (
    _MAX_BEZOUT,
    _MAX_DEGREE,
    _MAX_ROOT,
    _MAX_SOLVE_OPS,
    _MAX_UNKNOWNS,
    _check_size,
)
from lumos_gym.tools.math.parser import _split_list
from lumos_gym.tools.math.values import (
    SIGNIFICANT_DIGITS,
    _numeric_parts,
    _shown,
    _text,
    _undefined,
    format_value,
)
from lumos_gym.tools.math.whitelist import _CONSTANTS, FUNCTIONS

_VARIABLE_RE = re.compile(r"R[0-9]+|Output")
_IDENTIFIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_RELATION_RE = re.compile(r"[=<>]")


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
