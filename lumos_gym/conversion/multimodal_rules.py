"""Rule-based converters of the multimodal tasks into unified annotations.

* ``scenes``: the generator's gold steps (``Task.gold_actions``, ``meta["subgoals"]`` and
  ``meta["tails"]``), one subgoal per step, each action with its result::

      Subgoal 1: Count the red objects in the image.
      Action 1-1: R1 = VQA(<img>, How many red objects are there?) = 2
      Subgoal 2: Read the number written on the card.
      Action 2-1: R2 = VQA(<img>, What number is written on the card?) = 4
      Subgoal 3: Multiply the count by the number on the card.
      Action 3-1: R3 = Calculator(R1 * R2) = 8

* ``aokvqa``: the record's rationales (:func:`~lumos_gym.envs.multimodal.data.aokvqa_plan`):
  ``VQA`` of the image for the evidence (the rationale that names the correct option), then
  ``QA`` choosing the option from it, as Lumos' A-OKVQA plans look at the image, then answer
  with knowledge (docs/lumos-format.md §2.5).
* ``scienceqa``: the lecture and solution (:func:`~lumos_gym.envs.multimodal.data.
  scienceqa_plan`): recall the background (the lecture), find the facts (``VQA`` of the image or
  ``QA`` over the hint, the solution), choose the option.

The answer is the last subgoal's result, which must be the gold answer. The ``VQA`` and ``QA``
results are the gold facts that the reference backends give back when the annotation is
replayed in its env (built with the env's ``replay_options``; ``lumos/Scenes-v0`` replays
``VQA`` with the ``scene`` backend, which reads the pixels).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lumos_gym.actions import format_action, parse_actions
from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs.multimodal.data import GoldPlan, aokvqa_plan, scienceqa_plan
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import ActionParseError
from lumos_gym.scoring.answers import answers_match

__all__ = ["aokvqa_annotation", "scenes_annotation", "scienceqa_annotation"]


def _strings(value: object, name: str) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConversionError(f"meta[{name!r}] must be a list of strings")
    return list(value)


def _with_tails(step: str, tails: Sequence[str], k: int) -> list[str]:
    try:
        actions = parse_actions(step)
    except ActionParseError as e:
        raise ConversionError(f"gold step {k} does not parse: {e}") from e
    if len(actions) != len(tails):
        raise ConversionError(f"gold step {k} has {len(actions)} actions and {len(tails)} tails")
    return [format_action(replace(a, result=t)) for a, t in zip(actions, tails, strict=True)]


def _annotation(
    task: Task,
    dataset: str,
    subgoals: Sequence[str],
    steps: Sequence[str],
    tails: Sequence[Sequence[str]],
    **meta: Any,
) -> Annotation:
    if not task.question.strip() or not task.answer.strip():
        raise ConversionError("the task has no question or no gold answer")
    if not steps or not len(subgoals) == len(steps) == len(tails):
        raise ConversionError(
            f"{len(subgoals)} subgoals, {len(steps)} steps and {len(tails)} tail lists do not "
            "line up (or there are none)"
        )
    plan = [
        (subgoal, _with_tails(step, _strings(list(step_tails), "tails"), k))
        for k, (subgoal, step, step_tails) in enumerate(zip(subgoals, steps, tails, strict=True), 1)
    ]
    result = tails[-1][-1]
    accepted = [task.answer, *(str(a) for a in task.meta.get("aliases") or ())]
    if not any(answers_match(result, a) for a in accepted):
        raise ConversionError(f"the last result {result!r} is not the answer {task.answer!r}")
    return Annotation(
        id=task.id,
        dataset=dataset,
        task_type="multimodal",
        task=task.question,
        subgoals=make_subgoals(plan),
        answer=task.answer,
        meta={"converter": f"rules/{dataset}", **meta},
    )


def _from_plan(
    task: Task, dataset: str, plan: GoldPlan | None, why: str, **meta: Any
) -> Annotation:
    if plan is None:
        raise ConversionError(why)
    steps = ["; ".join(step) for step in plan.steps]
    return _annotation(task, dataset, plan.subgoals, steps, plan.tails, **meta)


def scenes_annotation(task: Task) -> Annotation:
    """Convert a Scenes task from the generator's gold steps.

    Raises:
        ConversionError: no question or answer, subgoals, steps and tails that do not line up,
            a last step other than ``Answer`` of the last result, or a last result that is not
            the answer.
    """
    gold = list(task.gold_actions)
    if len(gold) < 2:
        raise ConversionError("the task has no gold steps (gold_actions)")
    steps, final = gold[:-1], gold[-1]
    try:
        (answer,) = parse_actions(final)
        last = parse_actions(steps[-1])[-1]
    except (ActionParseError, ValueError) as e:
        raise ConversionError(f"the last gold step is not one Answer action: {e}") from e
    if answer.name != "Answer" or last.outputs != (answer.args.strip(),):
        raise ConversionError(f"the last gold step must be Answer of the last result: {final!r}")
    tails = task.meta.get("tails")
    if not isinstance(tails, list | tuple):
        raise ConversionError("meta['tails'] must hold the result tails of every step")
    return _annotation(
        task, "scenes", _strings(task.meta.get("subgoals"), "subgoals"), steps,
        [_strings(t, "tails") for t in tails], kind=task.meta.get("kind"),
        level=task.meta.get("level"), aliases=list(task.meta.get("aliases") or ()),
    )


def aokvqa_annotation(task: Task) -> Annotation:
    """Convert an A-OKVQA task from its rationales (``VQA`` for evidence, ``QA`` to choose).

    Raises:
        ConversionError: a record without answer or rationales (the test split), or whose
            question or options break the action syntax.
    """
    plan = aokvqa_plan(task.meta) if task.meta.get("choices") else None
    return _from_plan(task, "aokvqa", plan, "the record has no rationales or no correct choice "
                      "(or its text breaks the action syntax)",
                      question_id=task.meta.get("question_id"),
                      difficult_direct_answer=task.meta.get("difficult_direct_answer"))


def scienceqa_annotation(task: Task) -> Annotation:
    """Convert a ScienceQA task from its lecture and solution.

    Raises:
        ConversionError: a problem without options or answer, or whose text breaks the action
            syntax.
    """
    meta = task.meta
    ok = isinstance(meta.get("choices"), list) and isinstance(meta.get("answer"), int)
    plan = scienceqa_plan(meta) if ok else None
    return _from_plan(task, "scienceqa", plan, "the problem has no options or answer (or its "
                      "text breaks the action syntax)", pid=meta.get("pid"),
                      subject=meta.get("subject"), has_image=bool(meta.get("image")))
