"""Answer normalisation and the math accuracy metric.

Everything here is pure string and :class:`fractions.Fraction` arithmetic: no text is ever
evaluated. The rules, in the order :func:`answers_match` applies them:

1. **Lists.** A gold answer holding ``;`` (ASDiv's several-valued answers, e.g. ``"3; 2"``) is a
   list: the prediction must have as many items (split on ``;``, else on ``", "`` or ``" and "``)
   and each must match the gold item at the same position.
2. **Ratios.** A gold ``a:b`` matches a prediction ``c:d`` with ``a*d == b*c`` (``6:8`` matches
   ``3:4``), or a single number equal to ``a/b``.
3. **Numbers.** When both sides hold exactly one number (see :func:`normalize_number`), they
   match when they are equal as exact fractions or within ``rel_tol``.
4. **Text.** Otherwise both are lower-cased, stripped of punctuation, of the articles
   ``a``/``an``/``the`` and of extra whitespace, and compared for equality.

This is more lenient than the original Lumos scripts, which compare the final string exactly
after removing commas (GSM8K) or against ``str(int(Answer))`` (SVAMP).
"""

from __future__ import annotations

import math
import re
import string
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction

__all__ = ["answers_match", "math_accuracy", "normalize_number", "normalize_text", "to_fraction"]

# A number, with an optional sign, thousands groups, decimals, exponent and "/denominator".
# It may not touch letters, digits or dots on its left (so "R3" and "v1.5.2" hold no number),
# and may not be followed by a further digit group (so "1.5.3" holds none either).
_NUMBER = re.compile(
    r"(?<![\w.])(?<!\d,)"
    r"(?P<sign>[-+]?)\s*"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)"
    r"(?:[eE](?P<exp>[-+]?\d{1,4}))?"
    r"(?:\s*/\s*(?P<den>(?:\d+(?:\.\d+)?)))?"
    r"(?!\.?\d)(?!,\d)"
)
_MIXED = re.compile(r"^\s*(?P<sign>[-+]?)\s*(?P<whole>\d+)\s+(?P<num>\d+)\s*/\s*(?P<den>\d+)\s*$")
_RATIO = re.compile(r"^\s*(?P<a>\d+(?:\.\d+)?)\s*:\s*(?P<b>\d+(?:\.\d+)?)\s*$")
_CURRENCY = str.maketrans({"$": " ", "€": " ", "£": " ", "¥": " ", "\u00a0": " "})
_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2014": "-"})
_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70})
_WORDS.update({"eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000})
_PUNCT = str.maketrans({c: " " for c in string.punctuation if c not in ":/"})
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_MAX_EXPONENT = 400
#: Longest number read exactly, in characters: converting a decimal text to an integer takes
#: time quadratic in its length (a model's million-digit "answer" took minutes), and no gold
#: answer comes near it. A longer number is read as text.
MAX_NUMBER_CHARS = 1000


def _canonical(value: Fraction) -> str:
    """Render a fraction as an integer, a finite decimal, or ``p/q`` when neither exists."""
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    for prime in (2, 5):
        while den % prime == 0:
            den //= prime
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    with localcontext() as ctx:
        ctx.prec = len(str(value.numerator)) + len(str(value.denominator)) + 5
        text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _match_to_fraction(match: re.Match[str]) -> Fraction | None:
    """Convert one :data:`_NUMBER` match to a fraction (``None`` on a zero denominator)."""
    digits = match["num"].replace(",", "")
    exp = int(match["exp"]) if match["exp"] else 0
    if abs(exp) > _MAX_EXPONENT or max(len(digits), len(match["den"] or "")) > MAX_NUMBER_CHARS:
        return None
    try:
        value = Fraction(Decimal(digits)) * Fraction(10) ** exp
    except (InvalidOperation, ValueError):  # pragma: no cover - the regex admits only decimals
        return None
    if match["den"]:
        den = Fraction(Decimal(match["den"]))
        if den == 0:
            return None
        value /= den
    return -value if match["sign"] == "-" else value


def to_fraction(text: object) -> Fraction | None:
    """Return the single number written in ``text`` as an exact fraction, or ``None``.

    Args:
        text: any value; it is converted with ``str``. ``None`` gives ``None``.

    Returns:
        The number, or ``None`` when ``text`` holds no number or more than one (a list, a
        ratio, an expression, a version string).
    """
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, int | Fraction):
        return Fraction(text)
    if isinstance(text, Decimal):
        return Fraction(text) if text.is_finite() else None
    if isinstance(text, float):
        return Fraction(text).limit_denominator(10**12) if math.isfinite(text) else None
    s = str(text).translate(_MINUS).translate(_CURRENCY).strip()
    mixed = _MIXED.match(s) if len(s) <= MAX_NUMBER_CHARS else None
    if mixed:
        value = int(mixed["whole"]) + Fraction(int(mixed["num"]), int(mixed["den"]) or 1)
        return -value if mixed["sign"] == "-" else value
    matches = list(_NUMBER.finditer(s))
    if len(matches) == 1:
        return _match_to_fraction(matches[0])
    if not matches:
        word = s.lower().strip(string.punctuation + " ")
        if word in _WORDS:
            return Fraction(_WORDS[word])
    return None


def normalize_number(text: object) -> str | None:
    """Return the canonical form of the one number in ``text``, or ``None``.

    Handles currency signs, thousands commas, ``%`` (``"50%"`` gives ``"50"``), units or words
    around the number (``"9 apples"``, ``"The answer is 42."``), ``7.0`` vs ``7``, fractions
    (``1/2`` gives ``"0.5"``; a fraction with no finite decimal stays ``"1/3"``), mixed numbers
    (``"1 1/2"``), signs and the Unicode minus, scientific notation, a trailing ``.``, and the
    number words zero to twenty, the tens, hundred and thousand when they are the whole text.

    Args:
        text: the text (or a number) to normalise.

    Returns:
        An integer, a finite decimal without trailing zeros, or a reduced ``p/q``; ``None`` when
        the text holds no number or several (``"3:4"``, ``"2; 3"``, ``"5 - 3"``).

    Examples:
        >>> normalize_number("$1,234.50")
        '1234.5'
        >>> normalize_number("7.0 apples")
        '7'
        >>> normalize_number("2 and 3") is None
        True
    """
    value = to_fraction(text)
    return None if value is None else _canonical(value)


def normalize_text(text: object) -> str:
    """Lower-case ``text`` and drop punctuation (except ``:`` and ``/``), articles and extra spaces.

    Args:
        text: the text to normalise; ``None`` gives ``""``.

    Returns:
        The normalised text.
    """
    if text is None:
        return ""
    s = str(text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _close(a: Fraction, b: Fraction, rel_tol: float) -> bool:
    # math.isclose's rule (|a - b| <= rel_tol * max(|a|, |b|)) in exact arithmetic: a float
    # conversion overflows on the huge numbers a model may write (a 900-digit "answer")
    return a == b or abs(a - b) <= Fraction(rel_tol) * max(abs(a), abs(b))


def _ratio(text: str) -> Fraction | None:
    match = _RATIO.match(text.translate(_CURRENCY))
    if not match or max(len(match["a"]), len(match["b"])) > MAX_NUMBER_CHARS:
        return None
    b = Fraction(Decimal(match["b"]))
    return None if b == 0 else Fraction(Decimal(match["a"])) / b


def _split_list(text: str, *, gold: bool) -> list[str]:
    parts = [p.strip() for p in text.split(";")]
    if len(parts) == 1 and not gold:
        parts = [p.strip() for p in re.split(r",\s+|\s+and\s+", text)]
    return [p for p in parts if p]


def _match_one(pred: str, gold: str, rel_tol: float) -> bool:
    gold_ratio = _ratio(gold)
    if gold_ratio is not None:
        pred_value = _ratio(pred)
        if pred_value is None:
            pred_value = to_fraction(pred)
        return pred_value is not None and _close(pred_value, gold_ratio, rel_tol)
    p, g = to_fraction(pred), to_fraction(gold)
    if p is not None and g is not None:
        return _close(p, g, rel_tol)
    gold_text = normalize_text(gold)
    return bool(gold_text) and normalize_text(pred) == gold_text


def answers_match(pred: object, gold: object, *, rel_tol: float = 1e-6) -> bool:
    """Say whether a predicted answer matches the gold answer.

    Args:
        pred: the prediction (any value; ``None`` never matches).
        gold: the gold answer.
        rel_tol: relative tolerance for numeric comparison; exact fractions always match.

    Returns:
        ``True`` when they match under the rules in this module's docstring.

    Examples:
        >>> answers_match("$1,000.00", "1000")
        True
        >>> answers_match("0.5", "1/2")
        True
        >>> answers_match("6:8", "3:4")
        True
        >>> answers_match("3, 2", "3; 2")
        True
    """
    if pred is None or gold is None:
        return False
    p, g = str(pred).strip(), str(gold).strip()
    gold_parts = _split_list(g, gold=True)
    if len(gold_parts) > 1:
        pred_parts = _split_list(p, gold=False)
        return len(pred_parts) == len(gold_parts) and all(
            _match_one(a, b, rel_tol) for a, b in zip(pred_parts, gold_parts, strict=True)
        )
    return _match_one(p, g, rel_tol)


def math_accuracy(pred: object, gold: object) -> float:
    """Return 1.0 when ``pred`` matches ``gold`` (see :func:`answers_match`), else 0.0.

    Args:
        pred: the prediction; ``None`` (no answer) scores 0.0.
        gold: the gold answer.

    Returns:
        1.0 or 0.0.
    """
    return 1.0 if answers_match(pred, gold) else 0.0
