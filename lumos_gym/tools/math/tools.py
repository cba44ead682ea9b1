"""The math tools: Calculator, SetEquation, SolveEquation, SolveInequality, Define and Count.

Every tool but ``Define`` is a :class:`_SympyTool`, whose :meth:`~_SympyTool.compute` runs in a
worker process under the time limit (:mod:`lumos_gym.tools.math.limits`), with the variables
and the pending equations sent along; :func:`_compute` is what the worker calls. See
:mod:`lumos_gym.tools.math` for the syntax, the bounds and how values are written.
"""

from __future__ import annotations

import re
from abc import abstractmethod

import sympy as sp

from lumos_gym.actions import Action, substitute
from lumos_gym.errors import ToolError
from lumos_gym.scoring.answers import normalize_number
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from lumos_gym.tools.math.counting import count_items
from lumos_gym.tools.math.equations import (
    _mark_solved,
    _pending,
    _relations,
    _solve,
    _solve_inequalities,
    _take_pending,
)
from lumos_gym.tools.math.evaluator import _read
from lumos_gym.tools.math.limits import _WORKERS, _as_tool_error, _in_a_worker, _in_process
from lumos_gym.tools.math.parser import _split_list
from lumos_gym.tools.math.values import _shown, format_value

_PLAIN_NUMBER_RE = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\$?\.\d+")


class _SympyTool(Tool):
    """A tool whose sympy work stops after :data:`TIME_LIMIT` seconds, called from any thread.

    Subclasses implement :meth:`compute`, which runs in a worker process, with the variables and
    the pending equations sent along and the pending equations it leaves taken back (see the
    package docstring for why not in the caller's process).
    """

    @abstractmethod
    def compute(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run the action (what ``run`` does, in the calling process)."""

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run :meth:`compute` under the time limit (see the class docstring)."""
        if _in_process():
            return self.compute(action, ctx)
        before = list(ctx.state.get("SetEquation", []))
        # a copy: where no worker can start, the call runs here and appends to the list it got
        args = (type(self).__name__, action, dict(ctx.variables), list(before))
        result, pending = _in_a_worker(self.spec.name, _compute, args)
        if pending != before:
            _pending(ctx)[:] = pending
        return result

    def close(self) -> None:
        """Close the idle worker processes (the next call starts one)."""
        _WORKERS.close()


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

    See the package docstring for the syntax, the bounds and how values are written.
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
