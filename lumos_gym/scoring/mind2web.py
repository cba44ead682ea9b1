"""Mind2Web's step metrics under two named rules: ``mind2web/official`` and ``mind2web/lumos``.

``mind2web/official`` (the default of ``lumos/Mind2Web-v0``) reproduces the action-prediction
metric of Mind2Web (Deng et al., 2023): ``OSU-NLP-Group/Mind2Web``,
``src/action_prediction/metric.py``, ``ActionEvaluatorMultiChoice.calculate_f1`` and
``evaluate_dataset``, with the gold string built by ``format_input_multichoice``
(``src/action_prediction/dataloader.py``) and read back by ``postprocess_action``:

* the action strings are ``f"{op} {value}"``, stripped; the gold string leaves the value out for
  CLICK (its target has no ``Value:`` line), the predicted one keeps whatever value it carries;
  a value is read up to its first line break (``Value: (.*)$``, multi-line);
* operation F1 (:func:`calculate_f1`): the sets of ``str.split`` tokens of the two strings,
  compared case-sensitively, punctuation kept (the file imports ``string`` but never drops a
  token); 1 when both are empty, 0 when one is, else ``2PR / (P + R)`` with ``P = tp / |pred|``
  and ``R = tp / |gold|`` over the sets;
* element accuracy: the predicted element is one of the step's positive candidates;
* step success: the element is right **and** the operation F1 is exactly 1 (the token sets are
  equal, so word order and repeated words do not matter, case does);
* a step without a gold element among its candidates, or without a predicted element, scores 0
  on all three;
* task success: every step of the task succeeded (``error_ratio[0]``: tasks with no failed
  step).

Departures of ``mind2web/official`` (each also in :data:`SCORERS`):

* an episode reports its task's means, so a run's mean over episodes is the original's macro
  average over tasks (``marco_element_acc``, ``marco_action_f1``, ``marco_step_acc``); the
  micro averages over all steps it also prints (``element_acc``, ``action_f1``, ``step_acc``)
  are not reported;
* an element picked on another step's page (an ``R<k>`` that names an earlier page) counts as
  wrong: the original predicts on the current step's candidates only, so the case never arises
  there.

``mind2web/lumos`` is the rule of Lumos' evaluation (``allenai/lumos``,
``eval/mind2web/run_eval.py``, ``extract_key_info``, which counts ``corr_em`` over ``tot_tags``;
Lumos reports only the step success rate): a step succeeds when the top-1 element is the gold
one, the operation names the gold one, and for TYPE and SELECT the value equals the gold value
case-insensitively (``text.lower() == op["value"].lower()``); a CLICK's value is never looked
at. Its departures:

* element: Lumos compares the top-1 candidate's formatted text with that of the referenced
  page's first candidate (``env[0]``, the first positive when the page has one); here the
  element must be a positive of the step's own page, so another positive with other text counts
  right, a negative with the same text wrong, and a page with no positive has no right element;
* value: whitespace runs are collapsed on both sides (the TYPE and SELECT tools collapse their
  ``TEXT`` before scoring); Lumos compares the stripped text with the raw gold value;
* Lumos reports neither element accuracy nor operation F1; here element accuracy is the rule's
  element test and operation F1 is :func:`calculate_f1` on lower-cased strings (a CLICK's value
  left out on both sides), so it agrees with the case-insensitive value rule;
* Lumos divides by the actions it executed (``tot_tags``: several per step, none for a step
  whose grounding gave no action, none past its 15 rounds) over all tasks at once; here every
  gold step counts once, unplayed steps as failures, and a run's number is the mean of the
  episodes' rates (a macro average).

Nothing here imports the envs: :func:`score_action` takes the element test's outcome, and
:mod:`lumos_gym.envs.web.mind2web_data` (``score_step``) computes it from a page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lumos_gym.scoring.scorers import Scorer

__all__ = [
    "LUMOS",
    "OFFICIAL",
    "SCORERS",
    "SCORER_NAMES",
    "StepScore",
    "action_string",
    "calculate_f1",
    "episode_metrics",
    "gold_action_string",
    "operation_f1",
    "resolve_scorer",
    "score_action",
]

#: The rule of Mind2Web's own evaluation (the default).
OFFICIAL = "mind2web/official"
#: The rule of Lumos' Mind2Web evaluation.
LUMOS = "mind2web/lumos"
#: Every Mind2Web scoring rule, the default first.
SCORER_NAMES = (OFFICIAL, LUMOS)
_SHORT_NAMES = {"official": OFFICIAL, "lumos": LUMOS}


def resolve_scorer(name: str) -> str:
    """Return the full name of a Mind2Web scoring rule (``"lumos"`` gives ``mind2web/lumos``).

    Raises:
        ValueError: when ``name`` is none of :data:`SCORER_NAMES` or their short forms.
    """
    if name in SCORER_NAMES:
        return name
    if name in _SHORT_NAMES:
        return _SHORT_NAMES[name]
    choices = ", ".join(f"{full!r} (or {full.split('/')[1]!r})" for full in SCORER_NAMES)
    raise ValueError(f"unknown Mind2Web scorer {name!r}; choose one of {choices}")


@dataclass(frozen=True)
class StepScore:
    """How one predicted step compares with the gold step.

    Attributes:
        element_correct: the chosen element is a positive of the step's own page.
        operation_correct: the operation part of a step success: under ``mind2web/official``
            the operation F1 is exactly 1; under ``mind2web/lumos`` the operation matches and,
            for TYPE and SELECT, the value too, case-insensitively.
        operation_f1: the token F1 of the ``"OP value"`` strings under the rule
            (:func:`operation_f1`).
    """

    element_correct: bool
    operation_correct: bool
    operation_f1: float

    @property
    def success(self) -> bool:
        """Return True when the element and the operation are both right (a step success)."""
        return self.element_correct and self.operation_correct


def _first_line(value: str) -> str:
    # Mind2Web reads the value back with re.search(r"Value: (.*)$", text, re.MULTILINE): up to
    # the first "\n" ("." matches "\r", so only "\n" ends it), then strips it.
    return value.split("\n", 1)[0].strip()


def action_string(op: str, value: str) -> str:
    """Return a predicted action as Mind2Web scores it: ``f"{op} {value}"``, both stripped."""
    return f"{op.strip()} {_first_line(value)}".strip()


def gold_action_string(op: str, value: str) -> str:
    """Return a gold action as Mind2Web scores it: the value is left out for CLICK."""
    return action_string(op, "" if op.strip() == "CLICK" else value)


def calculate_f1(predicted: str, gold: str) -> float:
    """Return Mind2Web's ``calculate_f1``: F1 of the whitespace-token sets, case-sensitive.

    No token is dropped (punctuation counts like a word); repeated tokens count once; both
    empty gives 1.0, one empty gives 0.0.
    """
    pred, label = set(predicted.split()), set(gold.split())
    if not pred and not label:
        return 1.0
    common = len(pred & label)
    if common == 0:  # covers one side empty
        return 0.0
    precision, recall = common / len(pred), common / len(label)
    return 2 * precision * recall / (precision + recall)


def operation_f1(predicted: str, gold: str, *, scorer: str = OFFICIAL) -> float:
    """Return the operation F1 of two ``"OP value"`` strings under a rule.

    ``mind2web/official``: :func:`calculate_f1` as is; ``mind2web/lumos``: on lower-cased
    strings. The strings are compared as given (build them with :func:`action_string` and
    :func:`gold_action_string`).
    """
    if resolve_scorer(scorer) == LUMOS:
        return calculate_f1(predicted.lower(), gold.lower())
    return calculate_f1(predicted, gold)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def score_action(
    op: str,
    value: str,
    gold_op: str,
    gold_value: str,
    *,
    element_correct: bool,
    has_gold_element: bool = True,
    predicted_element: bool = True,
    scorer: str = OFFICIAL,
) -> StepScore:
    """Score one predicted step against the gold step under a rule.

    Args:
        op: the predicted operation (CLICK, TYPE, SELECT).
        value: the predicted value (the typed text or option; "" for a plain CLICK).
        gold_op: the gold operation.
        gold_value: the gold value.
        element_correct: whether the predicted element is a gold one (the env's test).
        has_gold_element: whether the step's candidates hold a gold element; under
            ``mind2web/official`` a step without one scores 0 on everything.
        predicted_element: whether an element was predicted at all; under
            ``mind2web/official`` a step without one scores 0 on everything.
        scorer: ``mind2web/official`` (default) or ``mind2web/lumos`` (short forms accepted).

    Raises:
        ValueError: an unknown scorer.
    """
    rule = resolve_scorer(scorer)
    if rule == LUMOS:
        same_op = op == gold_op
        right_value = op == "CLICK" or _collapse(value).lower() == _collapse(gold_value).lower()
        predicted = action_string(op, "" if op == "CLICK" else value)
        f1 = operation_f1(predicted, gold_action_string(gold_op, gold_value), scorer=rule)
        return StepScore(element_correct, same_op and right_value, f1)
    if not has_gold_element or not predicted_element:
        return StepScore(False, False, 0.0)
    f1 = calculate_f1(action_string(op, value), gold_action_string(gold_op, gold_value))
    return StepScore(element_correct, f1 == 1.0, f1)


def episode_metrics(scores: Sequence[StepScore | None], steps: int) -> dict[str, float]:
    """Return the episode's metrics over all ``steps`` gold steps (unplayed steps score 0).

    ``step_success_rate`` (Lumos' reported metric, Mind2Web's step SR), ``element_accuracy``,
    ``operation_f1`` (means over the task's steps, so a run's mean over episodes is
    Mind2Web's macro average) and ``success`` (1.0 when every step succeeded: Mind2Web's task
    success). The same under both rules.
    """
    played = [s for s in scores if s is not None]
    total = max(steps, 1)
    successes = sum(s.success for s in played)
    return {
        "step_success_rate": successes / total,
        "element_accuracy": sum(s.element_correct for s in played) / total,
        "operation_f1": sum(s.operation_f1 for s in played) / total,
        "success": float(steps > 0 and successes == steps),
    }


SCORERS = (
    Scorer(
        name=OFFICIAL,
        benchmark="Mind2Web",
        reproduces="OSU-NLP-Group/Mind2Web, src/action_prediction/metric.py, "
        "ActionEvaluatorMultiChoice.calculate_f1 and evaluate_dataset (gold string from "
        "format_input_multichoice, src/action_prediction/dataloader.py)",
        rule="operation F1 = F1 of the case-sensitive whitespace-token sets of 'OP value' "
        "(the gold CLICK's value left out, punctuation kept); element right = a positive "
        "candidate; step success = element right and F1 exactly 1; a step with no gold "
        "candidate or no predicted element scores 0; task success = every step succeeded.",
        departures=(
            "episodes report per-task means, so a run's mean is the original's macro average "
            "(marco_*); its micro averages over all steps are not reported",
            "an element picked on another step's page (an R<k> naming an earlier page) counts "
            "as wrong; the original predicts on the current step's candidates only",
        ),
        envs=("lumos/Mind2Web-v0",),
        conformance="tests/test_scoring_mind2web_conformance.py",
    ),
    Scorer(
        name=LUMOS,
        benchmark="Mind2Web (Lumos' evaluation)",
        reproduces="allenai/lumos, eval/mind2web/run_eval.py, extract_key_info "
        "(corr_em / tot_tags)",
        rule="step success = the top-1 element is gold, the operation is the gold one and, for "
        "TYPE and SELECT, the value equals the gold value case-insensitively (a CLICK's value "
        "is ignored); operation F1 = Mind2Web's F1 on lower-cased strings.",
        departures=(
            "element: any positive of the step's own page is right; Lumos compares the top-1's "
            "formatted text with that of the referenced page's first candidate (env[0])",
            "values: whitespace runs collapsed on both sides; Lumos compares the stripped text "
            "with the raw gold value",
            "Lumos reports no element accuracy or operation F1; here they are the rule's "
            "element test and Mind2Web's F1 on lower-cased strings",
            "every gold step counts once (unplayed ones as failures) and a run's number is the "
            "mean of the episodes' rates; Lumos divides by the actions it executed, over all "
            "tasks at once",
        ),
        envs=(),
        conformance="tests/test_scoring_mind2web_conformance.py",
    ),
)
