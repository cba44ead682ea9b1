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
checked tree by this package. Work is bounded: formulas of at most
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

**Modules.** :mod:`~lumos_gym.tools.math.parser` reads the text (tokens, the syntax-tree check)
against :mod:`~lumos_gym.tools.math.whitelist` (the functions and constants);
:mod:`~lumos_gym.tools.math.evaluator` builds the sympy value (:func:`evaluate`);
:mod:`~lumos_gym.tools.math.limits` holds the bounds, the time limit and the worker processes;
:mod:`~lumos_gym.tools.math.values` writes values (:func:`format_value`);
:mod:`~lumos_gym.tools.math.equations` reads and solves relations,
:mod:`~lumos_gym.tools.math.counting` counts (:func:`count_items`), and
:mod:`~lumos_gym.tools.math.tools` holds the tools. The names below are re-exported here;
:data:`TIME_LIMIT` is read here, but changed in :mod:`~lumos_gym.tools.math.limits`.
"""

from lumos_gym.tools.math.counting import count_items
from lumos_gym.tools.math.evaluator import evaluate
from lumos_gym.tools.math.limits import _WORKERS as _WORKERS
from lumos_gym.tools.math.limits import MAX_DIGITS as MAX_DIGITS
from lumos_gym.tools.math.limits import MAX_FORMULA_CHARS as MAX_FORMULA_CHARS
from lumos_gym.tools.math.limits import MAX_NESTING as MAX_NESTING
from lumos_gym.tools.math.limits import TIME_LIMIT as TIME_LIMIT
from lumos_gym.tools.math.tools import (
    Calculator,
    Count,
    Define,
    SetEquation,
    SolveEquation,
    SolveInequality,
)
from lumos_gym.tools.math.values import MAX_EXPAND_TERMS as MAX_EXPAND_TERMS
from lumos_gym.tools.math.values import SIGNIFICANT_DIGITS as SIGNIFICANT_DIGITS
from lumos_gym.tools.math.values import format_value
from lumos_gym.tools.math.whitelist import FUNCTIONS

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
