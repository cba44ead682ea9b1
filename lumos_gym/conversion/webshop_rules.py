"""Rule-based converter of WebShop tasks into unified annotations.

A WebShop task (:mod:`lumos_gym.envs.web.webshop`) carries its expert trajectory: one grounded step
per subgoal (``Task.gold_actions``) and the subgoal texts (``meta["subgoals"]``), written as the
Lumos WebShop shots write them (docs/lumos-format.md §1.5)::

    Subgoal 1: Search two relevant items and the product names according to the instruction.
    Action 1-1: R1 = Search(<instruction>)

    Subgoal 2: Select the most relevant features of item b0abc12345.
    Action 2-1: R2 = Click(b0abc12345)
    Action 2-2: R3 = FeatureRetrieve(R2, Query: <instruction>)
    ...
    Subgoal 5: Buy this item by selecting its relevant features.
    Action 5-1: R8 = Click(< prev)
    Action 5-2: R9 = Click(R7)
    Action 5-3: R10 = Click(black)
    Action 5-4: R11 = Click(buy now)

Web actions have no ``= result`` tail (docs/lumos-format.md §1.2). The answer is the product the
expert buys; the replay verifier requires the last subgoal to end the episode with reward 1.

Replay verification (:func:`~lumos_gym.conversion.verify.verify_annotations`) also records
what each subgoal executed, in ``meta["subgoal_results"]``: the value of its last action as the
tools bind it, one line (:func:`~lumos_gym.agents.lumos.executed_result`), e.g. the search's
``b0abc12345 - <title> ** b0xyz67890 - <title>``, the retrieved features, the picked asin and
``1.0`` for the purchase. The ``plan-iterative`` export quotes them in the planner feedback
(``The executed result for Subgoal 1 is b0abc12345 - ...``), as Lumos' WebShop evaluation fed
its planner the search results (docs/lumos-format.md §1.5), so the planner sees the asins the next
subgoals name.
"""

from __future__ import annotations

from lumos_gym.actions import format_action, parse_actions
from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import ActionParseError

__all__ = ["webshop_annotation"]


def webshop_annotation(task: Task) -> Annotation:
    """Convert a WebShop task from its expert trajectory.

    Args:
        task: a task of ``lumos/WebShop-v0`` with gold actions and ``meta["subgoals"]``.

    Returns:
        The annotation (dataset ``webshop``, task type ``web``), one subgoal per gold step.

    Raises:
        ConversionError: no instruction, no expert trajectory, subgoals and steps that do not
            line up, an action that does not parse or carries a result tail, or a trajectory
            whose last action is not a click on ``buy now``.
    """
    if not task.question.strip():
        raise ConversionError("the task has no instruction")
    subgoals = task.meta.get("subgoals")
    if not task.gold_actions or not subgoals:
        raise ConversionError("the task has no expert trajectory (no gold actions or subgoals)")
    if not isinstance(subgoals, list | tuple) or not all(isinstance(s, str) for s in subgoals):
        raise ConversionError("meta['subgoals'] must be a list of strings")
    if len(subgoals) != len(task.gold_actions):
        raise ConversionError(f"{len(subgoals)} subgoals for {len(task.gold_actions)} gold steps")
    plan = []
    for k, (subgoal, step) in enumerate(zip(subgoals, task.gold_actions, strict=True), 1):
        try:
            actions = parse_actions(step)
        except ActionParseError as e:
            raise ConversionError(f"gold step {k} does not parse: {e}") from e
        if any(a.result is not None for a in actions):
            raise ConversionError(f"gold step {k} has a result tail; web actions have none")
        plan.append((subgoal.strip(), [format_action(a) for a in actions]))
    last = parse_actions(task.gold_actions[-1])[-1]
    if last.name != "Click" or last.args.strip().lower() != "buy now":
        raise ConversionError("the trajectory does not end by clicking 'buy now'")
    expert = task.meta.get("expert") or {}
    return Annotation(
        id=task.id,
        dataset="webshop",
        task_type="web",
        task=task.question,
        subgoals=make_subgoals(plan),
        answer=task.answer or None,
        meta={
            "converter": "rules/webshop",
            "options": dict(expert.get("options") or {}),
            "variant": expert.get("variant"),
        },
    )
