"""Rule-based converters: a dataset's gold rationale into a unified :class:`Annotation`.

The original Lumos asked GPT-4 to rewrite each rationale (docs/lumos-format.md §1.2); for math
datasets whose rationales already hold every calculation, the same annotation can be written by
rules, offline and deterministically:

* ``gsm8k``: each sentence of the solution holding ``<<expr=value>>`` marks becomes a subgoal
  (``Calculate how many passengers the full buses carry``, written from the sentence), each mark
  a ``Calculator`` action whose formula names earlier results as ``R<n>``, with the tail
  ``= value``; sentences without marks are dropped; the answer is the ``####`` number.
* ``svamp``: the record's ``Equation`` as one ``Calculator`` action.
* ``asdiv``: each part of the ``Formula`` as a ``Calculator`` action; the answer is ASDiv's own,
  units included (``7 (ducks)``).
* ``mathword``: the generator's gold steps (``meta["steps"]``), one subgoal each.

When the final answer is the value of an earlier calculation than the last, the plan ends with
the alias ``Output = R<k> = value`` (the Lumos convention for a final variable).

Each converter takes a :class:`~lumos_gym.envs.tasks.Task` and returns an annotation or raises
:class:`ConversionError`; :func:`convert_tasks` maps converters over tasks and yields a
:class:`~lumos_gym.conversion.exports.Rejected` for each task that cannot be converted, so bad
input never stops a run. Nothing here is random or depends on dict order: the same tasks give
the same annotations, byte for byte.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from lumos_gym.conversion.annotation import Annotation, AnnotationError, make_subgoals
from lumos_gym.conversion.exports import Rejected
from lumos_gym.envs.math.data import (
    _gsm8k_steps,
    _is_infix_arithmetic,
    calculator_expression,
    parse_asdiv_answer,
    parse_asdiv_formula,
    parse_calc_marks,
)
from lumos_gym.envs.math.official import MathEnv
from lumos_gym.envs.registration import families, fill_from_families
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError, RegistryError
from lumos_gym.registry import Registry, import_object
from lumos_gym.scoring.answers import answers_match, to_fraction

if TYPE_CHECKING:
    from lumos_gym.envs.base import LumosEnv

__all__ = [
    "CONVERTERS",
    "ConversionError",
    "Converter",
    "asdiv_annotation",
    "asdiv_calculations",
    "exact_value",
    "convert_task",
    "convert_tasks",
    "gsm8k_annotation",
    "math_env_factory",
    "mathword_annotation",
    "module_converters",
    "problem_numbers",
    "question_subgoal",
    "sentence_subgoal",
    "substitute_results",
    "svamp_annotation",
    "unmarked_formulas",
]


#: How far a computed value may be from the value a rationale or gold answer writes (relative):
#: the tolerance of :func:`~lumos_gym.scoring.answers.answers_match` before scoring became exact.
_REL_TOL = 1e-6


class ConversionError(AnnotationError):
    """A task cannot be converted to an annotation by rules; the message says why."""


Converter = Callable[[Task], Annotation]

#: The rule-based converter of each dataset name, from the env families' records
#: (``converters`` of :class:`lumos_gym.envs.families.Family`).
CONVERTERS: Registry[Converter] = Registry("converter")
#: Evaluation-only datasets (a family's converter ``None``): their files hold questions and
#: answers, nothing to convert.
_NO_RATIONALES: list[str] = []

Plan = list[tuple[str, list[str]]]

# ---------------------------------------------------------------------------------------------
# Shared helpers

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


def _value_text(value: str) -> str:
    """A mark's value as a tail: stripped, no ``$``, no trailing ``.``."""
    return value.replace("$", "").strip().rstrip(".").strip()


def _check_number(value: str | None, where: str) -> str:
    if value is None or not value.strip():
        raise ConversionError(f"{where} has no value (expected <<expr=value>>)")
    text = _value_text(value)
    if to_fraction(text) is None:
        raise ConversionError(f"{where} has the value {value!r}, which is not a number")
    return text


def _calculator_plan(
    steps: Sequence[tuple[str, Sequence[tuple[str, str]]]], answer: str, question: str, where: str
) -> Plan:
    """Build the plan of ``(subgoal, [(expr, value), ...])`` steps ending at ``answer``.

    Formulas name earlier results (:func:`substitute_results`); when the answer is not the last
    value but an earlier one, the last subgoal ends with ``Output = R<k> = value``.
    """
    plan: Plan = []
    results: list[tuple[str, str]] = []
    given = problem_numbers(question)
    consumed: set[str] = set()
    for subgoal, calcs in steps:
        actions = []
        for expr, value in calcs:
            var = f"R{len(results) + 1}"
            formula = substitute_results(expr, results, given=given, consumed=consumed)
            consumed.update(re.findall(r"\bR\d+\b", formula))
            actions.append(f"{var} = Calculator({formula}) = {value}")
            results.append((var, value))
        plan.append((subgoal, actions))
    if not results:
        raise ConversionError(f"{where}: no calculation to convert")
    if not answers_match(results[-1][1], answer, rel_tol=_REL_TOL):
        earlier = [var for var, value in results if answers_match(value, answer, rel_tol=_REL_TOL)]
        if earlier:
            var = earlier[-1]
            plan[-1][1].append(f"Output = {var} = {dict(results)[var]}")
            return plan
        rounding = _rounding_step(results, answer)
        if rounding is None:
            values = ", ".join(value for _, value in results)
            raise ConversionError(
                f"{where}: the final answer {answer!r} is the value of no calculation ({values})"
            )
        plan.append(rounding)
    return plan


_ROUNDINGS = (("floor", math.floor, "down"), ("ceil", math.ceil, "up"), ("round", round, ""))


def _rounding_step(results: Sequence[tuple[str, str]], answer: str) -> tuple[str, list[str]] | None:
    """Return a last subgoal rounding a result to a whole-number answer, when one does.

    Word problems often answer with a whole number that the solution rounds silently (``20/6 =
    3.33``, so 3 full boxes); the latest result that rounds to the answer is used, with
    ``floor``, then ``ceil``, then ``round``.
    """
    target = to_fraction(answer)
    if target is None or target.denominator != 1:
        return None
    for var, value in reversed(results):
        number = to_fraction(value)
        if number is None or number.denominator == 1:
            continue
        for name, fn, how in _ROUNDINGS:
            if fn(number) == target:
                subgoal = f"Round the result {how} to a whole number.".replace("  ", " ")
                return subgoal, [f"R{len(results) + 1} = Calculator({name}({var})) = {answer}"]
    return None


def _annotation(task: Task, dataset: str, plan: Plan, answer: str, **meta: Any) -> Annotation:
    return Annotation(
        id=task.id,
        dataset=dataset,
        task_type="math",
        task=task.question,
        subgoals=make_subgoals(plan),
        answer=answer,
        meta={"converter": f"rules/{dataset}", **meta},
    )


def _require_text(task: Task) -> None:
    if not isinstance(task.question, str) or not task.question.strip():
        raise ConversionError("the task has no question text")
    if not isinstance(task.answer, str) or not task.answer.strip():
        raise ConversionError("the task has no gold answer")


# ---------------------------------------------------------------------------------------------
# Subgoal phrasing

_QUESTION_START = re.compile(r"^(how|what|which|who|when|where|why|find|determine)\b", re.I)
_DISCOURSE = re.compile(
    r"^(?:so|then|thus|therefore|hence|and|now|this means|that means)\b,?\s*", re.I
)
_COPULA_END = re.compile(r"\s+(?:is|are|was|were|will be|would be)$", re.I)
_NOUN_STOP = frozenset(
    "that which who whom whose left in on at for to from of per each every over than so with "
    "and or but by as after before during into since until is are was were will would can "
    "could do does did has have had more".split()
)
_MORE_WORDS = ("more", "fewer", "less", "extra")
_SHOWN_FORMULA = re.compile(r"[-+*/x×÷().,%$\d\s]*\d[-+*/x×÷().,%$\d\s]*=\s*\$?\s*$")
_PRINTED_NUMBER = re.compile(r"\s*\$?\s*-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?![\d,])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


_COMMON_STARTS = frozenset(
    "the a an he she it they we you i there this that these those each every in on at after "
    "before his her their its my our your all both one some together over with for if when "
    "during altogether overall since now then so".split()
)


def _lower_first(text: str) -> str:
    """Lower-case the first letter when the first word is a common word (not a name)."""
    word = text.split(" ", 1)[0]
    if word.lower() in _COMMON_STARTS and word != "I":
        return text[:1].lower() + text[1:]
    return text


def question_subgoal(question: str) -> str:
    """Phrase a question as a subgoal: ``How many marbles are left?`` → ``Calculate how many...``.

    Args:
        question: a question sentence (SVAMP's ``Question``, a socratic sub-question...).

    Returns:
        ``"Calculate " + question`` without its final ``?`` (the first letter lower-cased when
        the question starts with a question word), or ``"Calculate the answer"`` for no text.
    """
    text = " ".join(question.split()).rstrip("?.! ")
    if not text:
        return "Calculate the answer"
    if _QUESTION_START.match(text):
        return f"Calculate {text[:1].lower()}{text[1:]}"
    return f"Calculate the answer to: {text}"


def _split_noun(after: str) -> tuple[str, str]:
    """Split the text after a result into its noun phrase and the rest."""
    words = after.split()
    noun: list[str] = []
    for i, word in enumerate(words):
        bare = word.strip(",;:").lower()
        joins = (i == 0 and bare in _MORE_WORDS) or (  # "more apples", "cups of flour"
            bare == "of" and noun and i + 1 < len(words) and _WORD.fullmatch(words[i + 1])
        )
        if not _WORD.fullmatch(word.strip(",;:")) or (bare in _NOUN_STOP and not joins):
            break
        noun.append(word.strip(",;:"))
        if word.endswith((",", ";", ":")):
            break
    rest = " ".join(words[len(noun) :]).strip(" ,;:")
    return " ".join(noun), rest


_OPENERS = frozenset("in on at after before over during with for by from each every".split())
_SUBJECTS = frozenset("he she it they we i you the a an his her their its".split())


def _opening_phrase(before: str) -> tuple[str, str]:
    """Split an opening phrase off a clause: ``In the morning Lena sells`` → ``in the morning``.

    The phrase is a preposition and the words up to the subject, the first pronoun, article or
    capitalised word from its third word on; without one, nothing is split.
    """
    words = before.split()
    if len(words) < 3 or words[0].lower() not in _OPENERS:
        return "", before
    for i in range(2, len(words)):
        word = words[i]
        if word.lower() in _SUBJECTS or word[:1].isupper():
            return _lower_first(" ".join(words[:i])).rstrip(","), " ".join(words[i:])
    return "", before


def _phrase(before: str, after: str, money: bool) -> str:
    """Phrase one cut result: ``He has`` + ``apples left`` gives ``how many apples he has left``."""
    before = _DISCOURSE.sub("", before.strip(" ,;:")).strip(" ,;:")
    after = after.strip(" ,;:.!")
    copula = _COPULA_END.search(before)
    if copula and not after:
        subject = before[: copula.start()].strip()
        return _lower_first(subject) if subject else "the value"
    noun, rest = ("", after) if money else _split_noun(after)
    opening, before = _opening_phrase(before)
    clause = " ".join(p for p in (_lower_first(before) if before else "", rest, opening) if p)
    head = f"how many {noun}" if noun else "how much"
    return f"{head} {clause}".strip()


def _mark_spans(text: str) -> list[tuple[int, int, bool]]:
    """Span of each mark with its shown formula and printed value, and whether it is money."""
    spans = []
    for mark in parse_calc_marks(text):
        start, end = mark.start, mark.end
        shown = _SHOWN_FORMULA.search(text[:start])
        prefix = text[shown.start() : start] if shown else text[max(0, start - 1) : start]
        money = "$" in prefix
        if shown:
            start = shown.start()
        value = (mark.value or "").strip()
        rest = text[end:]
        printed = _PRINTED_NUMBER.match(rest)
        if printed:
            end += printed.end()
        elif value and rest.lstrip().startswith(value):
            end += len(rest) - len(rest.lstrip()) + len(value)
        spans.append((start, end, money))
    return spans


def sentence_subgoal(sentence: str) -> str:
    """Phrase a rationale sentence holding calculator marks as a subgoal, by rules.

    The shown formulas, marks and printed results are cut out; each cut becomes a ``how many
    <noun>`` (or ``how much`` for money) clause built from the words around it, and several
    clauses of one sentence are joined with ``and``. For example ``The full buses carry 9*52 =
    <<9*52=468>>468 passengers.`` gives ``Calculate how many passengers the full buses carry``,
    and ``The discount is 80*25/100 = $<<80*25/100=20>>20.`` gives ``Calculate the discount``.

    Args:
        sentence: one sentence of a GSM8K-style rationale, marks included.

    Returns:
        The subgoal text, starting with ``Calculate``.
    """
    spans = _mark_spans(sentence)
    if not spans:
        return question_subgoal(sentence)
    phrases = []
    for i, (start, end, money) in enumerate(spans):
        lo = spans[i - 1][1] if i else 0
        hi = spans[i + 1][0] if i + 1 < len(spans) else len(sentence)
        before = sentence[lo:start]
        after = sentence[end:hi]
        after = re.split(r",|\band\b|;" if i + 1 < len(spans) else r"[,;]", after, maxsplit=1)[0]
        if i:
            before = re.split(r",|\band\b|;", before)[-1]
        phrase = _phrase(before, after, money)
        if phrase not in phrases:
            phrases.append(phrase)
    return "Calculate " + " and ".join(phrases)


# ---------------------------------------------------------------------------------------------
# GSM8K

# A sentence ends at . ! ? followed by a space and a capital letter or a quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def _sentences(line: str) -> list[str]:
    """Split a line into sentences, never inside a ``<<...>>`` mark."""
    masked = re.sub(r"<<.*?>>", lambda m: "\0" * len(m.group(0)), line)
    out, start = [], 0
    for m in _SENTENCE_END.finditer(masked):
        out.append(line[start : m.start()])
        start = m.end()
    out.append(line[start:])
    return [s.strip() for s in out if s.strip()]


def _gsm8k_marks(text: str, where: str) -> list[tuple[str, str]]:
    calcs = []
    for n, mark in enumerate(parse_calc_marks(text), 1):
        label = f"{where}, mark {n} <<{mark.expr}={mark.value or ''}>>"
        value = _check_number(mark.value, label)
        expr = calculator_expression(mark.expr)
        if not _is_infix_arithmetic(expr):
            raise ConversionError(f"{label}: the formula is not plain arithmetic")
        calcs.append((" ".join(expr.split()), value))
    return calcs


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


def gsm8k_annotation(task: Task) -> Annotation:
    """Convert a GSM8K task (main or socratic rationale) by rules.

    Args:
        task: a task of :func:`~lumos_gym.envs.math.data.load_gsm8k` (its ``rationale`` is the
            solution before ``####``, its ``answer`` the ``####`` number).

    Returns:
        The annotation: one subgoal per sentence with marks (per line for the socratic format,
        phrased from its sub-question), one ``Calculator`` action per mark; a sentence without
        marks contributes its :func:`unmarked_formulas`.

    Raises:
        ConversionError: no rationale, no marks, a mark without a numeric value or with a
            formula that is not arithmetic, or a final answer that no mark computes.
    """
    _require_text(task)
    if not isinstance(task.rationale, str) or not task.rationale.strip():
        raise ConversionError("the task has no rationale to convert")
    rationale = task.rationale.split("####", 1)[0]
    steps: list[tuple[str, list[tuple[str, str]]]] = []
    for n, step in enumerate(_gsm8k_steps(rationale), 1):
        if step["subquestion"] is not None:
            calcs = _gsm8k_marks(step["text"], f"line {n}") or unmarked_formulas(step["text"])
            if calcs:
                steps.append((question_subgoal(step["subquestion"]), calcs))
            continue
        for m, sentence in enumerate(_sentences(step["text"]), 1):
            calcs = _gsm8k_marks(sentence, f"line {n}, sentence {m}") or unmarked_formulas(
                sentence
            )
            if calcs:
                steps.append((sentence_subgoal(sentence), calcs))
    if not steps:
        raise ConversionError("the rationale has no <<expr=value>> calculator marks")
    answer = task.answer.strip().replace(",", "")
    return _annotation(
        task, "gsm8k", _calculator_plan(steps, answer, task.question, "gsm8k"), answer
    )


# ---------------------------------------------------------------------------------------------
# SVAMP


def svamp_annotation(task: Task) -> Annotation:
    """Convert a SVAMP task: its ``Equation`` becomes one ``Calculator`` action.

    Args:
        task: a task of :func:`~lumos_gym.envs.math.data.load_svamp` (``meta["equation"]``).

    Returns:
        One subgoal phrased from the question part, with ``R1 = Calculator(<equation>) =
        <answer>``.

    Raises:
        ConversionError: no equation, or one that is not plain arithmetic.
    """
    _require_text(task)
    equation = task.meta.get("equation")
    if not isinstance(equation, str) or not equation.strip():
        raise ConversionError("the SVAMP record has no Equation")
    formula = _tidy_formula(equation)
    if not _is_infix_arithmetic(formula):
        raise ConversionError(f"the Equation {equation!r} is not plain arithmetic")
    part = task.meta.get("question_part")
    question = part if isinstance(part, str) and part.strip() else task.question
    answer = _check_number(task.answer, "the SVAMP answer")
    plan = _calculator_plan(
        [(question_subgoal(question), [(formula, answer)])], answer, "", "svamp"
    )
    return _annotation(task, "svamp", plan, answer, type=task.meta.get("type"))


# ---------------------------------------------------------------------------------------------
# ASDiv


def _asdiv_question_part(task: Task) -> str:
    raw = task.meta.get("raw")
    if isinstance(raw, dict):
        for key in ("Question", "question"):
            value = raw.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return task.question


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


def asdiv_annotation(task: Task) -> Annotation:
    """Convert an ASDiv task: each part of its ``Formula`` becomes a ``Calculator`` action.

    The annotation's answer is ASDiv's answer as written, units included (``7 (ducks)``); the
    units are also kept in ``meta["units"]``.

    Args:
        task: a task of :func:`~lumos_gym.envs.math.data.load_asdiv` (``meta["formula"]``).

    Returns:
        One subgoal phrased from the question part, one action per formula part.

    Raises:
        ConversionError: no formula, a formula part that :func:`asdiv_calculations` cannot
            read (algebra, comparisons), an answer that is not one number or ratio (lists,
            text), or a final answer that no part computes.
    """
    _require_text(task)
    formula = task.meta.get("formula")
    if not isinstance(formula, str) or not formula.strip():
        raise ConversionError("the ASDiv record has no Formula")
    raw = task.meta.get("raw")
    raw_answer = raw.get("Answer", raw.get("answer")) if isinstance(raw, dict) else None
    written = str(raw_answer).strip() if raw_answer is not None else task.answer
    parsed = parse_asdiv_answer(written)
    if parsed.kind not in ("number", "ratio"):
        raise ConversionError(f"the ASDiv answer {written!r} is a {parsed.kind}, not one number")
    calcs = asdiv_calculations(formula, parsed.text)
    if calcs is None:
        raise ConversionError(f"the Formula {formula!r} is not plain arithmetic")
    steps = [
        (question_subgoal(_asdiv_question_part(task)), [(_tidy_formula(e), v) for e, v in calcs])
    ]
    plan = _calculator_plan(steps, parsed.text, task.question, "asdiv")
    return _annotation(
        task,
        "asdiv",
        plan,
        written,
        units=list(parsed.units),
        solution_type=task.meta.get("solution_type"),
    )


# ---------------------------------------------------------------------------------------------
# MathWord


def mathword_annotation(task: Task) -> Annotation:
    """Convert a MathWord task from its generator's gold steps (``meta["steps"]``).

    Args:
        task: a task of :class:`~lumos_gym.envs.math.mathword.MathWordGenerator`.

    Returns:
        One subgoal per step (the generator's subgoal text), its action with the tail
        ``= value``.

    Raises:
        ConversionError: no steps, or a step without its subgoal, action or value.
    """
    _require_text(task)
    steps = task.meta.get("steps")
    if not isinstance(steps, list | tuple) or not steps:
        raise ConversionError("the MathWord task has no gold steps in meta['steps']")
    plan: Plan = []
    for n, step in enumerate(steps, 1):
        if not isinstance(step, dict) or not all(
            isinstance(step.get(k), str) and step[k].strip() for k in ("subgoal", "action", "value")
        ):
            raise ConversionError(f"step {n} lacks its subgoal, action or value")
        plan.append((step["subgoal"], [f"{step['action']} = {step['value']}"]))
    last = str(steps[-1]["value"])
    if not answers_match(last, task.answer, rel_tol=_REL_TOL):
        raise ConversionError(f"the last step's value {last!r} is not the answer {task.answer!r}")
    return _annotation(
        task, "mathword", plan, task.answer, level=task.meta.get("level"),
        templates=list(task.meta.get("templates") or []),
    )


def math_env_factory(tasks: Sequence[Task], dataset: str) -> LumosEnv:
    """Build the math env that replays annotations of ``dataset`` (for ``verify``)."""
    return MathEnv(dataset=dataset, tasks=tasks)


fill_from_families(
    CONVERTERS, lambda family: [(k, v) for k, v in family.converters.items() if v is not None]
)
fill_from_families(
    _NO_RATIONALES, lambda family: [k for k, v in family.converters.items() if v is None]
)


def module_converters(module: str) -> dict[str, Converter]:
    """Return the converters that the families' records name in ``module``, by dataset.

    A converter module calls this at its end for its own table (``QA_CONVERTERS`` of
    :mod:`lumos_gym.conversion.qa_rules`), so the records stay the one list of converters.
    """
    return {
        dataset: import_object(path)  # type: ignore[misc]
        for family in families()
        for dataset, path in family.converters.items()
        if path is not None and path.partition(":")[0] == module
    }


# ---------------------------------------------------------------------------------------------
# Running converters


def convert_task(task: Task, dataset: str) -> Annotation:
    """Convert one task with the converter registered for ``dataset``.

    Raises:
        RegistryError: no converter for ``dataset``.
        ConversionError: the task cannot be converted.
    """
    return CONVERTERS.get(dataset)(task)


_BAD_INPUT = (LumosGymError, ValueError, TypeError, KeyError, AttributeError, IndexError)


def _convert_one(converter: Converter, task: object, index: int) -> Annotation | Rejected:
    task_id = getattr(task, "id", None)
    task_id = str(task_id) if task_id is not None else f"#{index}"
    if not isinstance(task, Task):
        return Rejected(task_id, f"conversion: expected a Task, got {type(task).__name__}")
    try:
        return converter(task)
    except ConversionError as e:
        return Rejected(task_id, f"conversion: {e}")
    except _BAD_INPUT as e:  # malformed records must not stop the run
        return Rejected(task_id, f"malformed: {type(e).__name__}: {e}")


def convert_tasks(tasks: Iterable[Task], dataset: str) -> Iterator[Annotation | Rejected]:
    """Convert tasks by the rules of ``dataset``, yielding a :class:`Rejected` for each failure.

    Args:
        tasks: the tasks, in order.
        dataset: a name registered in :data:`CONVERTERS` (``gsm8k``, ``svamp``, ``asdiv``,
            ``mathword``).

    Returns:
        An iterator of annotations and rejections (``reason`` starts with ``conversion:`` or
        ``malformed:``), one per task, in order.

    Raises:
        RegistryError: an unknown dataset (raised at once, before any task is read).
    """
    if dataset in _NO_RATIONALES and dataset not in CONVERTERS:
        raise RegistryError(
            f"{dataset} has no rationales or gold decompositions to convert: it is an "
            "evaluation-only set (lumos-gym evaluate --env ...)"
        )
    converter = CONVERTERS.get(dataset)
    return (_convert_one(converter, task, i) for i, task in enumerate(tasks))
