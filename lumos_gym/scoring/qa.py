"""Metrics of the complex-QA family: SQuAD-style exact match and F1, yes/no accuracy, LLM judge.

* :func:`normalize_answer`: lower-case, drop punctuation, drop the articles ``a``/``an``/``the``,
  collapse whitespace (the normalisation of the SQuAD and HotpotQA evaluation scripts).
* :func:`exact_match` and :func:`f1`: the best score over the gold answer and its aliases; F1 is
  token F1 on normalised text, with HotpotQA's rule that ``yes``, ``no`` and ``noanswer`` only
  ever match themselves exactly (a partial overlap with them scores 0).
* :func:`yes_no`: reads a boolean answer out of free text, as Lumos' StrategyQA evaluation did
  (``"yes"`` anywhere means yes), extended to ``true``/``false``.
* :func:`qa_scores`: every metric of one prediction, as :class:`~lumos_gym.envs.qa.base.QAEnv`
  reports it.
* :func:`judge_correct`: the optional LLM judge of Lumos' HotpotQA evaluation, with its prompt
  byte for byte (:data:`JUDGE_PROMPT`).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from lumos_gym.errors import BackendError
from lumos_gym.models.base import Backend, GenerationRequest
from lumos_gym.prompts import render_inference
from lumos_gym.scoring.answers import to_fraction

__all__ = [
    "ANSWER_TYPES",
    "JUDGE_PROMPT",
    "NO_ANSWER",
    "exact_match",
    "f1",
    "judge_correct",
    "judge_prompt",
    "normalize_answer",
    "qa_scores",
    "yes_no",
]

#: The values of ``Task.meta["answer_type"]`` in the QA family.
ANSWER_TYPES = ("yes/no", "span", "number")

#: What the QA tool answers when it cannot answer (Lumos' wording).
NO_ANSWER = "No answer"

#: Lumos' LLM-accuracy judge prompt (``eval/hotpotqa/run_eval.py``, ``llm_accuracy_score``),
#: byte for byte, including the final newline; filled with ``str.format``.
JUDGE_PROMPT = (
    "Please judge whether the model prediction can be regarded as correct according to the "
    "given question and its ground-truth answer. Please answer 'CORRECT' or 'INCORRECT'. No more "
    "details and explanations.\n\n"
    "Question: {question}\nModel prediction: {prediction}\nGround-truth answer: {ground_truth}\n"
)
#: The judge's generation budget (Lumos asked for at most 100 tokens).
JUDGE_MAX_NEW_TOKENS = 100

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
# HotpotQA's evaluation: these normalised answers never match anything but themselves.
_EXACT_ONLY = frozenset({"yes", "no", "noanswer"})
_YES = frozenset({"yes", "true"})
_NO = frozenset({"no", "false"})


def normalize_answer(text: object) -> str:
    """Return ``text`` lower-cased, without punctuation, articles and extra whitespace.

    Punctuation characters are deleted, not replaced by spaces (``"O'Neil"`` gives
    ``"oneil"``), as in the SQuAD evaluation.

    Args:
        text: the answer; ``None`` gives ``""``.

    Examples:
        >>> normalize_answer("The  Eiffel Tower!")
        'eiffel tower'
    """
    if text is None:
        return ""
    s = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _golds(golds: str | Iterable[str]) -> list[str]:
    items = [golds] if isinstance(golds, str) else [str(g) for g in golds]
    return [g for g in items if g is not None]


def exact_match(prediction: object, golds: str | Iterable[str]) -> float:
    """Return 1.0 when the normalised prediction equals a normalised gold answer, else 0.0.

    Args:
        prediction: the predicted answer (``None`` never matches).
        golds: the gold answer, or several accepted answers (the answer and its aliases).
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in _golds(golds)) else 0.0


def _token_f1(pred: str, gold: str) -> float:
    """Token F1 of two normalised answers, with HotpotQA's exact-only answers."""
    if (pred in _EXACT_ONLY or gold in _EXACT_ONLY) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: object, golds: str | Iterable[str]) -> float:
    """Return the best token F1 of the prediction against the gold answers.

    Both sides are normalised (:func:`normalize_answer`) and split on whitespace. When either
    side normalises to ``yes``, ``no`` or ``noanswer``, the score is 1.0 for equality and 0.0
    otherwise (HotpotQA's official rule). Two empty answers score 1.0; one empty side scores 0.

    Args:
        prediction: the predicted answer (``None`` scores 0).
        golds: the gold answer, or several accepted answers.
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return max((_token_f1(pred, normalize_answer(g)) for g in _golds(golds)), default=0.0)


def yes_no(text: object) -> str | None:
    """Read a boolean answer out of free text.

    Lumos' StrategyQA evaluation counted a prediction as *yes* when ``"yes"`` occurs anywhere
    in it. Here the check is on words of the normalised text (so ``"eyes"`` is not a yes):
    ``yes`` or ``true`` anywhere gives ``"yes"``; otherwise ``no`` or ``false`` anywhere gives
    ``"no"``; ``"No answer"`` and text with neither give ``None``. Lumos read every
    prediction without a yes as *false*; a ``None`` here never counts as correct.

    Args:
        text: the prediction or gold answer (``True``/``False`` are accepted).

    Returns:
        ``"yes"``, ``"no"`` or ``None``.

    Examples:
        >>> yes_no("Yes, he did."), yes_no("False"), yes_no("No answer")
        ('yes', 'no', None)
    """
    if isinstance(text, bool):
        return "yes" if text else "no"
    normalized = normalize_answer(text)
    if normalized in ("no answer", "noanswer"):
        return None
    words = set(normalized.split())
    if words & _YES:
        return "yes"
    if words & _NO:
        return "no"
    return None


def _numbers_equal(prediction: str, golds: Sequence[str]) -> bool:
    value = to_fraction(prediction)
    return value is not None and any(to_fraction(g) == value for g in golds)


def qa_scores(
    prediction: object,
    gold: str,
    aliases: Iterable[str] = (),
    answer_type: str | None = None,
) -> dict[str, float]:
    """Return every QA metric of one prediction.

    Args:
        prediction: the submitted answer (``None`` or ``""`` when nothing was submitted).
        gold: the canonical gold answer (``"yes"``/``"no"`` for boolean questions).
        aliases: other accepted answers.
        answer_type: ``"yes/no"``, ``"span"`` or ``"number"``; by default ``"yes/no"`` when
            the gold answer normalises to yes/no/true/false, else ``"span"``.

    Returns:
        ``{"exact_match", "f1", "accuracy"}``. Accuracy is yes/no agreement (:func:`yes_no`)
        for boolean questions; for numbers, exact match or equal values (``"1,206"`` and
        ``"1206.0"``); for spans, exact match.

    Raises:
        ValueError: for an unknown ``answer_type``.
    """
    if answer_type is None:
        answer_type = "yes/no" if normalize_answer(gold) in _YES | _NO else "span"
    if answer_type not in ANSWER_TYPES:
        raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, got {answer_type!r}")
    golds = [gold, *(str(a) for a in aliases)]
    pred = "" if prediction is None else str(prediction)
    em = exact_match(pred, golds)
    if answer_type == "yes/no":
        verdict = yes_no(pred)
        accuracy = float(verdict is not None and verdict == yes_no(gold))
    elif answer_type == "number":
        accuracy = 1.0 if em or _numbers_equal(pred, golds) else 0.0
    else:
        accuracy = em
    return {"exact_match": em, "f1": f1(pred, golds), "accuracy": accuracy}


def judge_prompt(question: str, prediction: str, gold: str) -> str:
    """Return :data:`JUDGE_PROMPT` filled in."""
    return JUDGE_PROMPT.format(question=question, prediction=prediction, ground_truth=gold)


def judge_correct(
    backend: Backend,
    question: str,
    prediction: str,
    gold: str,
    *,
    chat: bool = True,
    seed: int = 0,
) -> float:
    """Ask an LLM judge whether ``prediction`` answers ``question`` (Lumos' LLM accuracy).

    The judge gets :data:`JUDGE_PROMPT` as one user message (Lumos used a chat model), greedy,
    with at most 100 new tokens; only an output that is exactly ``CORRECT`` once stripped
    counts as correct.

    Args:
        backend: any lumos-gym backend.
        question: the task question.
        prediction: the submitted answer.
        gold: the gold answer.
        chat: send a chat message (default) or, for a completion model, the prompt in Lumos'
            ``<|user|>``/``<|assistant|>`` framing.
        seed: recorded with the request.

    Returns:
        1.0 or 0.0.

    Raises:
        BackendError: the backend failed (an error completion or an exception).
    """
    text = judge_prompt(question, prediction, gold)
    settings = {"max_new_tokens": JUDGE_MAX_NEW_TOKENS, "temperature": 0.0, "seed": seed}
    if chat:
        request = GenerationRequest(messages=({"role": "user", "content": text},), **settings)
    else:
        request = GenerationRequest(
            prompt=render_inference([{"role": "user", "content": text}]), **settings
        )
    try:
        (completion,) = backend.generate([request])
    except BackendError:
        raise
    except Exception as e:  # any backend failure becomes one error type for the caller
        raise BackendError(f"the judge failed: {type(e).__name__}: {e}") from e
    if completion.stop_reason == "error":
        raise BackendError(f"the judge failed: {completion.error or 'unknown error'}")
    return 1.0 if completion.text.strip() == "CORRECT" else 0.0
