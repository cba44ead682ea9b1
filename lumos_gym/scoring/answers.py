"""Answer normalisation and the named math scoring rules.

Everything here is pure string and :class:`fractions.Fraction` arithmetic: no text is ever
evaluated. Five named rules (:data:`SCORERS`, :data:`MATH_RULES`) score a math prediction:

* ``gsm8k/official`` (:func:`gsm8k_is_correct`): GSM8K's own ``is_correct``. The prediction is
  read as the completion ``"#### " + prediction``: the number right after the mark, commas
  removed, must equal the gold's number as a string (``1800.00``, ``$1800`` and ``eighteen``
  are wrong for ``1800``; ``1800 dollars`` is right).
* ``gsm8k/lumos`` and ``svamp/lumos`` (:func:`gsm8k_lumos_correct`,
  :func:`svamp_lumos_correct`): the original Lumos scripts, an exact string comparison with the
  gold number (GSM8K: commas between digits removed; SVAMP: ``str(int(Answer))``).
* ``math/exact`` (:func:`exact_answer_match`, the default of :func:`answers_match` and of the
  other math envs), in the order it applies its rules:

  1. **Lists.** A gold answer holding ``;`` (ASDiv's several-valued answers, e.g. ``"3; 2"``)
     is a list: the prediction must have as many items (split on ``;``, else on ``", "`` or
     ``" and "``) and each must match the gold item at the same position.
  2. **Ratios.** A gold ``a:b`` matches a prediction ``c:d`` with ``a*d == b*c`` (``6:8``
     matches ``3:4``), or a single number equal to ``a/b``.
  3. **Numbers.** When the prediction holds exactly one number and the gold is a number, they
     must be equal as exact values, with no tolerance: ``18.0``, ``$18``, ``1.8e1`` and
     ``"18 apples"`` match ``18``; ``18.000001`` does not. Number words (``eighteen``) are not
     numbers, and a fraction is a number only in lowest terms (``1/3``, ``1 1/2``), so that a
     gold ``1/3`` is matched by ``1/3`` while an unreduced expression such as ``3600/2`` or
     ``2/6`` is not read. A gold that no decimal writes exactly (``1/3``, the ratio ``5:6``)
     is also matched by its decimal correctly rounded to at least
     :data:`EXACT_DECIMAL_DIGITS` (12) significant digits, as lumos-gym's Calculator writes
     it (``0.333333333333``; not ``0.33``): for such a gold this is the exact value as far
     as a decimal can write it, and a gold with a finite expansion (every integer among
     them) is only ever matched by its own value.
  4. **Text.** Otherwise both are lower-cased, stripped of punctuation, of the articles
     ``a``/``an``/``the`` and of extra whitespace, and compared for equality.

* ``math/lenient`` (:func:`lenient_answer_match`): as ``math/exact``, but number words
  (zero to twenty, the tens, hundred, thousand) and any fraction (``3600/2``) are read as
  numbers, and a decimal prediction also matches a gold with no finite decimal expansion
  (``1/3``, ``20/6``) when it is the gold rounded (half away from zero) to the places the
  prediction writes, with any number of places: ``0.33`` and ``0.3`` match ``1/3``, ``0.34``
  does not. A gold with a finite expansion (every integer among them) is only ever matched
  exactly, so no wrong integer and no ``1800.00018`` for ``1800`` is accepted.

:func:`answers_match` with an explicit ``rel_tol`` is not a scoring rule: it is how the
conversion rules compare a computed value with the value a rationale writes (number words and
any fraction read, values within ``rel_tol`` of each other).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction
from types import MappingProxyType

from lumos_gym.scoring.scorers import Scorer

__all__ = [
    "DEFAULT_MATH_SCORER",
    "EXACT_DECIMAL_DIGITS",
    "GSM8K_INVALID",
    "MATH_RULES",
    "SCORERS",
    "answers_match",
    "exact_answer_match",
    "gsm8k_extract_answer",
    "gsm8k_is_correct",
    "gsm8k_lumos_correct",
    "lenient_answer_match",
    "math_accuracy",
    "normalize_number",
    "normalize_text",
    "svamp_lumos_correct",
    "to_fraction",
]

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


# ---------------------------------------------------------------------------------------------
# The original scripts' rules

#: What GSM8K's ``extract_answer`` returns when a completion has no ``#### <number>``.
GSM8K_INVALID = "[invalid]"
# GSM8K's ANS_RE: the mark, one space, then an optional minus and digits, dots and commas.
_GSM8K_ANSWER = re.compile(r"#### (-?[0-9.,]+)")
# Lumos' comma rule for gold numbers (eval/gsm/run_eval.py): a comma between two digits goes.
_LUMOS_COMMA = re.compile(r"(\d),(\d)")


def gsm8k_extract_answer(completion: str) -> str:
    """Return the number GSM8K's ``extract_answer`` reads out of ``completion``.

    The first ``"#### "`` followed by an optional ``-`` and a run of digits, dots and commas;
    the run is returned with its commas removed (``"#### 1,800.00"`` gives ``"1800.00"``).

    Args:
        completion: the text (a model completion or a gold solution).

    Returns:
        The number as written, or :data:`GSM8K_INVALID` when there is none.
    """
    match = _GSM8K_ANSWER.search(completion)
    return match.group(1).strip().replace(",", "") if match else GSM8K_INVALID


def gsm8k_is_correct(prediction: object, gold: object) -> bool:
    """Score ``prediction`` as GSM8K's ``is_correct`` scores ``"#### " + prediction``.

    Args:
        prediction: the submitted answer (``None``, no answer, is wrong).
        gold: the gold answer: the number after the solution's ``####`` (``Task.answer``), or
            a whole solution ending in ``#### <number>``.

    Returns:
        True when the extracted numbers are equal strings: ``"18"`` and ``"18 apples"`` are
        right for ``18``; ``"18.0"``, ``"$18"``, ``"1.8e1"``, ``"36/2"`` and ``"eighteen"`` are
        wrong.

    Raises:
        ValueError: the gold holds no GSM8K number (``is_correct`` asserts it does).

    Examples:
        >>> gsm8k_is_correct("1,800", "1800"), gsm8k_is_correct("1800.00", "1800")
        (True, False)
    """
    text = str(gold)
    gold_number = gsm8k_extract_answer(text if "#### " in text else "#### " + text)
    if gold_number == GSM8K_INVALID:
        raise ValueError(f"the gold answer {text!r} holds no GSM8K '#### <number>'")
    if prediction is None:
        return False
    return gsm8k_extract_answer("#### " + str(prediction)) == gold_number


def gsm8k_lumos_correct(prediction: object, gold: object) -> bool:
    """Lumos' GSM8K rule: the prediction equals the gold with commas between digits removed.

    An exact string comparison (``eval/gsm/run_eval.py``): ``"1800"`` is right for ``1,800``;
    ``"1,800"``, ``"1800.0"`` and ``" 1800"`` are wrong.

    Args:
        prediction: the submitted answer (``None`` is wrong).
        gold: the gold number as GSM8K writes it after ``####``.
    """
    if prediction is None or gold is None:
        return False
    return str(prediction) == _LUMOS_COMMA.sub(r"\1\2", str(gold).strip())


def svamp_lumos_correct(prediction: object, gold: object) -> bool:
    """Lumos' SVAMP rule: the prediction equals ``str(int(Answer))`` exactly.

    ``int`` truncates towards zero (a gold ``2.5`` would become ``"2"``; SVAMP's 1,000
    answers are all whole numbers).

    Args:
        prediction: the submitted answer (``None`` is wrong).
        gold: the gold number.

    Raises:
        ValueError: the gold is not a number.
    """
    value = to_fraction(gold)
    if value is None:
        raise ValueError(f"the SVAMP gold answer {gold!r} is not a number")
    return prediction is not None and str(prediction) == str(int(value))


# ---------------------------------------------------------------------------------------------
# math/exact and math/lenient


@dataclass(frozen=True)
class _Reading:
    """A number read out of a text, and the decimal places it was written with."""

    value: Fraction
    #: Places after the point of a plain decimal (``"3.30"`` gives 2); None for an integer,
    #: a fraction, a number word or scientific notation.
    places: int | None = None
    #: Significant digits of a plain decimal (``"0.0330"`` gives 3); 0 when ``places`` is None.
    digits: int = 0


#: Significant digits with which ``math/exact`` accepts a decimal for a gold that no decimal
#: writes exactly (``1/3``, ``5:6``): the digits lumos-gym's Calculator writes
#: (:data:`lumos_gym.tools.math.SIGNIFICANT_DIGITS`), so that an agent's computed answer
#: stays right.
EXACT_DECIMAL_DIGITS = 12


def _in_lowest_terms(match: re.Match[str]) -> bool:
    """Whether a ``p/q`` match is a fraction in lowest terms: integers, ``q > 1``, no factor."""
    num, den = match["num"].replace(",", ""), match["den"]
    if match["exp"] or not num.isdecimal() or not den.isdecimal():
        return False
    if max(len(num), len(den)) > MAX_NUMBER_CHARS:  # int() of it would be quadratic, or refused
        return False
    p, q = int(num), int(den)
    return q > 1 and math.gcd(p, q) == 1


def _read(text: object, *, words: bool, any_fraction: bool) -> _Reading | None:
    """Read the single number of ``text``, as :func:`to_fraction` does with two switches.

    Args:
        text: the text (or a number).
        words: read a text that is a number word (``"twelve"``).
        any_fraction: read any ``p/q`` (``3600/2``); otherwise only fractions in lowest terms.
    """
    if text is None or isinstance(text, bool):
        return None
    if not isinstance(text, str):
        value = to_fraction(text)
        return None if value is None else _Reading(value)
    s = text.translate(_MINUS).translate(_CURRENCY).strip()
    mixed = _MIXED.match(s) if len(s) <= MAX_NUMBER_CHARS else None
    if mixed:
        num, den = int(mixed["num"]), int(mixed["den"])
        if den == 0 or not any_fraction and (num >= den or math.gcd(num, den) != 1):
            return None
        value = int(mixed["whole"]) + Fraction(num, den)
        return _Reading(-value if mixed["sign"] == "-" else value)
    matches = list(_NUMBER.finditer(s))
    if len(matches) == 1:
        match = matches[0]
        if match["den"] and not any_fraction and not _in_lowest_terms(match):
            return None
        value = _match_to_fraction(match)
        if value is None:
            return None
        written = match["num"].replace(",", "")
        if "." not in written or match["exp"] or match["den"]:
            return _Reading(value)
        places = len(written.partition(".")[2])
        return _Reading(value, places, len(written.replace(".", "").lstrip("0")))
    if words and not matches:
        word = s.lower().strip(string.punctuation + " ")
        if word in _WORDS:
            return _Reading(Fraction(_WORDS[word]))
    return None


def _terminates(value: Fraction) -> bool:
    """Whether ``value`` has a finite decimal expansion (its denominator is ``2^a 5^b``)."""
    den = value.denominator
    for prime in (2, 5):
        while den % prime == 0:
            den //= prime
    return den == 1


def _rounded(value: Fraction, places: int) -> Fraction:
    """``value`` rounded half away from zero to ``places`` decimal places."""
    scale = 10**places
    magnitude = math.floor(abs(value) * scale + Fraction(1, 2))
    return Fraction(-magnitude if value < 0 else magnitude, scale)


def _rounds_to(pred: _Reading, gold: Fraction, min_digits: int) -> bool:
    """Whether ``pred`` is the decimal of a non-terminating ``gold``, correctly rounded.

    True when ``gold`` has no finite decimal expansion, ``pred`` is a plain decimal with at
    least one place and ``min_digits`` significant digits, and its value is ``gold`` rounded
    half away from zero to its places. A gold with a finite expansion never matches so.
    """
    places = pred.places
    return (
        bool(places)
        and pred.digits >= min_digits
        and not _terminates(gold)
        and pred.value == _rounded(gold, places or 0)
    )


def _exact_same(pred: _Reading, gold: Fraction) -> bool:
    return pred.value == gold or _rounds_to(pred, gold, EXACT_DECIMAL_DIGITS)


def _lenient_same(pred: _Reading, gold: Fraction) -> bool:
    return pred.value == gold or _rounds_to(pred, gold, 1)


def _close(a: Fraction, b: Fraction, rel_tol: float) -> bool:
    # math.isclose's rule (|a - b| <= rel_tol * max(|a|, |b|)) in exact arithmetic: a float
    # conversion overflows on the huge numbers a model may write (a 900-digit "answer")
    return a == b or abs(a - b) <= Fraction(rel_tol) * max(abs(a), abs(b))


@dataclass(frozen=True)
class _Rule:
    """How one comparison reads numbers and decides that two of them are the same."""

    read_pred: Callable[[object], _Reading | None]
    read_gold: Callable[[object], _Reading | None]
    same: Callable[[_Reading, Fraction], bool]


def _tolerance_rule(rel_tol: float) -> _Rule:
    def read(text: object) -> _Reading | None:
        value = to_fraction(text)
        return None if value is None else _Reading(value)

    return _Rule(read, read, lambda pred, gold: _close(pred.value, gold, rel_tol))


_EXACT = _Rule(
    read_pred=lambda text: _read(text, words=False, any_fraction=False),
    # a gold is data, not an answer: any fraction it writes is its value (but "one" is text)
    read_gold=lambda text: _read(text, words=False, any_fraction=True),
    same=_exact_same,
)
_LENIENT = _Rule(
    read_pred=lambda text: _read(text, words=True, any_fraction=True),
    read_gold=lambda text: _read(text, words=True, any_fraction=True),
    same=_lenient_same,
)


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


def _match_one(pred: str, gold: str, rule: _Rule) -> bool:
    gold_ratio = _ratio(gold)
    if gold_ratio is not None:
        pred_ratio = _ratio(pred)
        if pred_ratio is not None:
            return rule.same(_Reading(pred_ratio), gold_ratio)
        reading = rule.read_pred(pred)
        return reading is not None and rule.same(reading, gold_ratio)
    p, g = rule.read_pred(pred), rule.read_gold(gold)
    if p is not None and g is not None:
        return rule.same(p, g.value)
    gold_text = normalize_text(gold)
    return bool(gold_text) and normalize_text(pred) == gold_text


def _matches(pred: object, gold: object, rule: _Rule) -> bool:
    if pred is None or gold is None:
        return False
    p, g = str(pred).strip(), str(gold).strip()
    gold_parts = _split_list(g, gold=True)
    if len(gold_parts) > 1:
        pred_parts = _split_list(p, gold=False)
        return len(pred_parts) == len(gold_parts) and all(
            _match_one(a, b, rule) for a, b in zip(pred_parts, gold_parts, strict=True)
        )
    return _match_one(p, g, rule)


def exact_answer_match(pred: object, gold: object) -> bool:
    """The ``math/exact`` rule (see the module docstring).

    Args:
        pred: the prediction (``None`` never matches).
        gold: the gold answer.

    Examples:
        >>> exact_answer_match("$1,800.00", "1800"), exact_answer_match("1800.00018", "1800")
        (True, False)
        >>> exact_answer_match("3600/2", "1800"), exact_answer_match("1/3", "1/3")
        (False, True)
    """
    return _matches(pred, gold, _EXACT)


def lenient_answer_match(pred: object, gold: object) -> bool:
    """The ``math/lenient`` rule (see the module docstring).

    Args:
        pred: the prediction (``None`` never matches).
        gold: the gold answer.

    Examples:
        >>> lenient_answer_match("eighteen", "18"), lenient_answer_match("3600/2", "1800")
        (True, True)
        >>> lenient_answer_match("0.33", "1/3"), lenient_answer_match("1800.00018", "1800")
        (True, False)
    """
    return _matches(pred, gold, _LENIENT)


def answers_match(pred: object, gold: object, *, rel_tol: float | None = None) -> bool:
    """Say whether a predicted answer matches the gold answer.

    Args:
        pred: the prediction (any value; ``None`` never matches).
        gold: the gold answer.
        rel_tol: None (the default) scores with ``math/exact`` (:func:`exact_answer_match`).
            A number compares values as the conversion rules need to: number words and any
            ``p/q`` are read, and values within ``rel_tol`` (relative) of each other match.
            That mode is for checking a rationale's written values, not for scoring.

    Returns:
        ``True`` when they match.

    Examples:
        >>> answers_match("$1,000.00", "1000"), answers_match("0.5", "1/2")
        (True, True)
        >>> answers_match("6:8", "3:4"), answers_match("3, 2", "3; 2")
        (True, True)
        >>> answers_match("1450001", "1450000"), answers_match("12.0000001", "12", rel_tol=1e-6)
        (False, True)
    """
    return _matches(pred, gold, _EXACT if rel_tol is None else _tolerance_rule(rel_tol))


#: The name of the math rule used where none is named.
DEFAULT_MATH_SCORER = "math/exact"

#: Every named math rule: ``rule(prediction, gold) -> bool``.
MATH_RULES: Mapping[str, Callable[[object, object], bool]] = MappingProxyType(
    {
        "gsm8k/official": gsm8k_is_correct,
        "gsm8k/lumos": gsm8k_lumos_correct,
        "svamp/lumos": svamp_lumos_correct,
        "math/exact": exact_answer_match,
        "math/lenient": lenient_answer_match,
    }
)


def math_accuracy(pred: object, gold: object, *, scorer: str = DEFAULT_MATH_SCORER) -> float:
    """Return 1.0 when ``pred`` is right under the named math rule, else 0.0.

    Args:
        pred: the prediction; ``None`` (no answer) scores 0.0.
        gold: the gold answer.
        scorer: a name of :data:`MATH_RULES` (``math/exact`` by default).

    Returns:
        1.0 or 0.0.

    Raises:
        ValueError: an unknown ``scorer``.
    """
    rule = MATH_RULES.get(scorer)
    if rule is None:
        raise ValueError(f"unknown math scorer {scorer!r}; choose one of {sorted(MATH_RULES)}")
    return 1.0 if rule(pred, gold) else 0.0


_LUMOS_DEPARTURES = (
    "Lumos compares the value of the last variable its actions bound (R<k>); lumos-gym scores "
    "the argument of the episode's Answer(...), stripped of surrounding whitespace, which is "
    "that value when the agent answers Answer(R<k>)",
    "the values come from lumos-gym's Calculator (exact arithmetic; integers written without "
    "'.0', other numbers to 12 significant digits), not from WolframAlpha's plaintext, so the "
    "same plan can write a value differently",
)

SCORERS = (
    Scorer(
        name="gsm8k/official",
        benchmark="GSM8K",
        reproduces="openai/grade-school-math, grade_school_math/dataset.py, is_correct "
        "(extract_answer with ANS_RE = r'#### (\\-?[0-9\\.\\,]+)')",
        rule="the prediction is read as the completion '#### ' + prediction: the number right "
        "after the mark, commas removed, must equal as a string the number extracted from the "
        "gold solution ('18 apples' is right for 18; '18.0', '$18', '1.8e1', '36/2' and "
        "'eighteen' are wrong).",
        departures=(
            "the prediction is the argument of the episode's Answer(...), stripped of "
            "surrounding whitespace, not a free completion ending in '#### <answer>'",
        ),
        envs=("lumos/GSM8K-v0",),
        conformance="tests/test_scoring_math_conformance.py",
    ),
    Scorer(
        name="gsm8k/lumos",
        benchmark="GSM8K (Lumos' evaluation)",
        reproduces="allenai/lumos, eval/gsm/run_eval.py, lumos_iterative: "
        "results[final_variable] == answer (the gold: the text after '####', stripped, with "
        "re.sub(r'(\\d),(\\d)', r'\\1\\2'))",
        rule="exact string equality of the prediction with the gold number, commas between "
        "digits removed from the gold only ('1800.0' and '1,800' are wrong for 1800).",
        departures=_LUMOS_DEPARTURES,
        envs=(),
        conformance="tests/test_scoring_math_conformance.py",
    ),
    Scorer(
        name="svamp/lumos",
        benchmark="SVAMP (Lumos' evaluation)",
        reproduces="allenai/lumos, eval/svamp/run_eval.py, lumos_iterative: "
        "results[final_variable] == str(int(example['Answer']))",
        rule="exact string equality of the prediction with the gold truncated to an integer "
        "('38.0' is wrong for 38).",
        departures=_LUMOS_DEPARTURES,
        envs=(),
        conformance="tests/test_scoring_math_conformance.py",
    ),
    Scorer(
        name="math/exact",
        benchmark="SVAMP, ASDiv, MathWord (and the default of answers_match)",
        reproduces="no official scorer: SVAMP's repository (arkilpatel/SVAMP, "
        "code/*/src/utils/evaluate.py cal_score) scores its models' predicted equations, "
        "evaluated, within an absolute 0.01 or 0.1 that differs by model, not answers; ASDiv's "
        "(chaochun/nlu-asdiv-dataset) ships only the data; MathWord is lumos-gym's own. Lumos' "
        "SVAMP rule is svamp/lumos",
        rule="exactly one number in the prediction, equal to the gold as an exact value with no "
        "tolerance (18.0, $18 and '18 apples' match 18); no number words; a fraction is read "
        "only in lowest terms (1/3 yes, 3600/2 no); a gold no decimal writes exactly (1/3, "
        "5:6) also matches its decimal correctly rounded to 12 or more significant digits, as "
        "the Calculator writes it (0.333333333333, not 0.33); ASDiv's lists item by item in "
        "order, ratios by value (6:8 and 0.75 match 3:4); text answers by normalised equality.",
        departures=(),
        envs=("lumos/SVAMP-v0", "lumos/ASDiv-v0", "lumos/MathWord-v0"),
        conformance="tests/test_scoring_math_conformance.py",
    ),
    Scorer(
        name="math/lenient",
        benchmark="any math env (an option)",
        reproduces="no official scorer: lumos-gym's lenient option",
        rule="math/exact, plus number words (zero to twenty, the tens, hundred, thousand) and "
        "any fraction (3600/2) read as numbers, and a decimal prediction matching a gold with "
        "no finite decimal expansion (1/3, 20/6) when it is the gold rounded half away from "
        "zero to the prediction's written places, however few (0.33 for 1/3). A gold with a finite "
        "expansion, every integer included, is matched only exactly.",
        departures=(),
        envs=(),
        conformance="tests/test_scoring_math_conformance.py",
    ),
)
