"""Subgoals phrased from math text: a question or a rationale sentence as ``Calculate ...``.

:func:`question_subgoal` turns a question into a subgoal (``How many marbles are left?`` gives
``Calculate how many marbles are left``); :func:`sentence_subgoal` phrases a GSM8K-style
sentence holding calculator marks from the words around each mark. Used by the rule-based
math converters (:mod:`lumos_gym.conversion.rules`); pure text rules, nothing random.
"""

from __future__ import annotations

import re

from lumos_gym.envs.math.data import parse_calc_marks

__all__ = ["question_subgoal", "sentence_subgoal"]

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
