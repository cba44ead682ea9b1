"""Metrics of the complex-QA family: SQuAD-style exact match and F1, yes/no accuracy, LLM judge.

* :func:`normalize_answer`: lower-case, drop punctuation, drop the articles ``a``/``an``/``the``,
  collapse whitespace (the normalisation of the SQuAD and HotpotQA evaluation scripts).
* :func:`exact_match` and :func:`f1`: the best score over the gold answer and its aliases,
  as ``hotpot_evaluate_v1.py`` computes them (``exact_match_score``, ``f1_score``): F1 is
  token F1 on normalised text, ``yes``, ``no`` and ``noanswer`` only ever match themselves
  (a partial overlap with them scores 0), and an answer that normalises to nothing scores F1
  0 even against an empty prediction (while its exact match is 1). ``f1(..., variant="squad")``
  is MuSiQue's (SQuAD's) F1 instead: no yes/no rule, and two empty answers score 1.
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
from lumos_gym.scoring.scorers import Scorer

__all__ = [
    "ANSWER_TYPES",
    "DATASET_SCORERS",
    "DEFAULT_QA_SCORER",
    "F1_VARIANTS",
    "JUDGE_PROMPT",
    "NO_ANSWER",
    "SCORERS",
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
#: The token-F1 rules of :func:`f1`: HotpotQA's (also 2WikiMultihopQA's) and SQuAD's (MuSiQue's).
F1_VARIANTS = ("hotpotqa", "squad")

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


def _overlap_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _hotpotqa_f1(pred: str, gold: str) -> float:
    """``hotpot_evaluate_v1.f1_score`` of two normalised answers."""
    if (pred in _EXACT_ONLY or gold in _EXACT_ONLY) and pred != gold:
        return 0.0
    # no tokens in common, two empty answers included, scores 0
    return _overlap_f1(pred.split(), gold.split())


def _squad_f1(pred: str, gold: str) -> float:
    """MuSiQue's ``compute_f1`` (SQuAD's) of two normalised answers."""
    pred_tokens, gold_tokens = pred.split(), gold.split()
    if not pred_tokens or not gold_tokens:  # no answer: right only against no answer
        return float(pred_tokens == gold_tokens)
    return _overlap_f1(pred_tokens, gold_tokens)


def f1(prediction: object, golds: str | Iterable[str], *, variant: str = "hotpotqa") -> float:
    """Return the best token F1 of the prediction against the gold answers.

    Both sides are normalised (:func:`normalize_answer`) and split on whitespace; the score is
    the F1 of their common tokens. ``variant="hotpotqa"`` (``hotpot_evaluate_v1.f1_score``):
    when either side normalises to ``yes``, ``no`` or ``noanswer``, anything but equality
    scores 0, and two answers with no token in common score 0, even two empty ones (a gold
    ``"!!!"`` against an empty prediction). ``variant="squad"`` (MuSiQue's ``compute_f1``):
    no yes/no rule; an empty side scores 1.0 when the other is empty too, else 0.

    Args:
        prediction: the predicted answer (``None`` scores 0).
        golds: the gold answer, or several accepted answers.
        variant: one of :data:`F1_VARIANTS`.

    Raises:
        ValueError: an unknown ``variant``.
    """
    if variant not in F1_VARIANTS:
        raise ValueError(f"variant must be one of {F1_VARIANTS}, got {variant!r}")
    if prediction is None:
        return 0.0
    token_f1 = _hotpotqa_f1 if variant == "hotpotqa" else _squad_f1
    pred = normalize_answer(prediction)
    return max((token_f1(pred, normalize_answer(g)) for g in _golds(golds)), default=0.0)


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
    *,
    scorer: str | None = None,
) -> dict[str, float]:
    """Return every QA metric of one prediction.

    Args:
        prediction: the submitted answer (``None`` or ``""`` when nothing was submitted).
        gold: the canonical gold answer (``"yes"``/``"no"`` for boolean questions).
        aliases: other accepted answers.
        answer_type: ``"yes/no"``, ``"span"`` or ``"number"``; by default ``"yes/no"`` when
            the gold answer normalises to yes/no/true/false, else ``"span"``.
        scorer: the rule (:data:`SCORERS`): they differ only in F1, SQuAD's for
            ``musique/official``, HotpotQA's otherwise; :data:`DEFAULT_QA_SCORER` when None.

    Returns:
        ``{"exact_match", "f1", "accuracy"}``. Accuracy is yes/no agreement (:func:`yes_no`)
        for boolean questions; for numbers, exact match or equal values (``"1,206"`` and
        ``"1206.0"``); for spans, exact match.

    Raises:
        ValueError: for an unknown ``answer_type`` or ``scorer``.
    """
    scorer = DEFAULT_QA_SCORER if scorer is None else scorer
    if scorer not in _F1_VARIANT:
        raise ValueError(f"unknown QA scorer {scorer!r}; choose one of {sorted(_F1_VARIANT)}")
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
    return {
        "exact_match": em,
        "f1": f1(pred, golds, variant=_F1_VARIANT[scorer]),
        "accuracy": accuracy,
    }


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


# ---------------------------------------------------------------------------------------------
# The named rules

#: The rule of a QA env over any task list, and of the datasets without an official scorer.
DEFAULT_QA_SCORER = "qa/em-f1"
#: The rule each QA dataset scores with by default (``QAEnv`` reads it by ``dataset``).
DATASET_SCORERS = {
    "hotpotqa": "hotpotqa/official",
    "2wikimultihopqa": "2wikimultihopqa/official",
    "musique": "musique/official",
    "strategyqa": "strategyqa/lumos",
    "bamboogle": DEFAULT_QA_SCORER,
    "worldqa": DEFAULT_QA_SCORER,
}
_F1_VARIANT = {
    "hotpotqa/official": "hotpotqa",
    "2wikimultihopqa/official": "hotpotqa",
    "musique/official": "squad",
    "strategyqa/lumos": "hotpotqa",
    DEFAULT_QA_SCORER: "hotpotqa",
}

_NORMALISED = (
    "normalised: lower-cased, ASCII punctuation deleted, the words a/an/the removed, whitespace "
    "collapsed"
)
_ACCURACY = (
    "the terminal reward and primary metric is accuracy, not the official answer exact match: "
    "for a yes/no gold it reads a yes or no out of the prediction (yes_no: 'Yes, he was.' is "
    "right for yes), for a numeric gold it also accepts an equal value ('1,206.0' for 1206); "
    "exact_match and f1 are reported beside it with the official values"
)

SCORERS = (
    Scorer(
        name="hotpotqa/official",
        benchmark="HotpotQA",
        reproduces="hotpotqa/hotpot, hotpot_evaluate_v1.py, exact_match_score and f1_score "
        "(the answer part of update_answer)",
        rule=f"exact_match: the {_NORMALISED} prediction equals the normalised gold; f1: token "
        "F1 of the normalised answers, 0 when either is yes, no or noanswer and they differ, "
        "and 0 when they share no token, two empty answers included (a gold '!!!' against an "
        "empty prediction: exact match 1, F1 0).",
        departures=(
            _ACCURACY,
            "the supporting-fact and joint metrics (sp_*, joint_*) are not computed: an "
            "episode submits an answer only",
        ),
        envs=("lumos/HotpotQA-v0",),
        conformance="tests/test_scoring_qa_conformance.py",
    ),
    Scorer(
        name="2wikimultihopqa/official",
        benchmark="2WikiMultihopQA",
        reproduces="Alab-NII/2wikimultihop, 2wikimultihop_evaluate_v1.1.py, update_answer "
        "(HotpotQA's exact_match_score and f1_score, the best over the gold answers)",
        rule="exact_match and f1 as hotpotqa/official, the best over the gold answer and its "
        "aliases.",
        departures=(
            _ACCURACY,
            "the Wikidata aliases and demonyms of id_aliases.json are not read: the gold answer "
            "alone counts",
            "the evidence, supporting-fact and joint metrics are not computed",
        ),
        envs=("lumos/2WikiMultihopQA-v0",),
        conformance="tests/test_scoring_qa_conformance.py",
    ),
    Scorer(
        name="musique/official",
        benchmark="MuSiQue",
        reproduces="StonyBrookNLP/musique, metrics/answer.py, AnswerMetric (compute_exact and "
        "compute_f1 through metric_max_over_ground_truths over answer + answer_aliases), as "
        "evaluate_v1.0.py calls it",
        rule="exact_match as hotpotqa/official; f1 is SQuAD's token F1 (no yes/no rule; an "
        "empty answer scores 1 only against another empty one); both the best over the answer "
        "and its aliases.",
        departures=(
            _ACCURACY,
            "the support and answerability (sufficiency) metrics are not computed",
        ),
        envs=("lumos/MuSiQue-v0",),
        conformance="tests/test_scoring_qa_conformance.py",
    ),
    Scorer(
        name="strategyqa/lumos",
        benchmark="StrategyQA (Lumos' evaluation)",
        reproduces="allenai/lumos, eval/strategyqa/run_eval.py, lumos_iterative: a prediction "
        "containing 'yes' (case-insensitive) is true, any other false, compared with the "
        "gold's lower-cased boolean",
        rule="accuracy: the prediction's yes/no (yes_no: the word yes or true anywhere gives "
        "yes; otherwise no or false gives no) equals the gold's; exact_match and f1 as "
        "hotpotqa/official are reported beside it.",
        departures=(
            "yes is read from whole words of the normalised text (Lumos matched the substring, "
            "so 'eyes' was a yes), and true and false count as yes and no",
            "a prediction with neither a yes nor a no ('No answer', 'I don't know') is wrong; "
            "Lumos read it as false, which is right for 1,219 of the 2,290 questions",
        ),
        envs=("lumos/StrategyQA-v0",),
        conformance="tests/test_scoring_qa_conformance.py",
    ),
    Scorer(
        name=DEFAULT_QA_SCORER,
        benchmark="WorldQA, Bamboogle, a QAEnv over any task list",
        reproduces="no official scorer: WorldQA is lumos-gym's own benchmark, and Bamboogle "
        "(Press et al., 2022) comes as questions and answers with no scorer lumos-gym knows "
        "of; exact_match and f1 are hotpot_evaluate_v1.py's",
        rule="accuracy: exact match for span answers, yes/no agreement (yes_no) for yes/no "
        "answers, exact match or an equal value for numbers; exact_match and f1 as "
        "hotpotqa/official, the best over the answer and its aliases.",
        departures=(),
        envs=("lumos/Bamboogle-v0", "lumos/WorldQA-v0"),
        conformance="tests/test_scoring_qa_conformance.py",
    ),
    Scorer(
        name="hotpotqa/lumos-judge",
        benchmark="HotpotQA (Lumos' LLM accuracy), any QA env given a judge",
        reproduces="allenai/lumos, eval/hotpotqa/run_eval.py, llm_accuracy_score",
        rule="judge_accuracy: the judge model gets JUDGE_PROMPT (Lumos' bytes) as one user "
        "message, greedy, at most 100 new tokens; 1 only when its stripped output is exactly "
        "CORRECT. Reported beside the env's rule when the env is given judge=...",
        departures=(
            "the judge is the backend passed as judge=...; Lumos called its OpenAI chat model",
            "a failed judge call scores 0 and sets judge_error to 1",
        ),
        envs=(),
        conformance="tests/test_scoring_qa_conformance.py",
    ),
)
