"""Counting the items of a list, or the terms of a progression written with ``...``.

See :func:`count_items`, which the ``Count`` tool calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction

import sympy as sp

from lumos_gym.actions import substitute
from lumos_gym.errors import ToolError
from lumos_gym.tools.math.evaluator import _closing_bracket, evaluate
from lumos_gym.tools.math.limits import _MAX_BITS, _as_tool_error, _check_number_text
from lumos_gym.tools.math.parser import _OPENERS, _clean, _split_list, _tokenize

_ELLIPSIS_RE = re.compile(r"\.{3,}|…")


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
