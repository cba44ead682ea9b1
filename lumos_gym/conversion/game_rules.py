"""Rule-based converters of text-game tasks (TextWorld, ALFWorld, TextWorldExpress).

A game task carries its winning command sequence in ``meta["gold_commands"]``: TextWorld's
walkthrough, ALFWorld's planner solution (or the official file's walkthrough), or
TextWorldExpress's gold action sequence. The annotation groups the commands into subgoals
(:func:`~lumos_gym.envs.games.base.group_commands`: moves, looks and openings join the next action
that changes the world) phrased from the commands themselves, each command a ``Command``
action numbered across the plan, with no result tail (the game's answer is an observation, as
web actions have none in Lumos)::

    Subgoal 1: Go to the countertop 1 and take the apple 1 from the countertop 1.
    Action 1-1: R1 = Command(go to countertop 1)
    Action 1-2: R2 = Command(take apple 1 from countertop 1)

The annotation's task is the episode's first observation when the task records it (the game's
opening text, which names the receptacles and exits a plan refers to), else the task's goal.
Replay verification plays each subgoal as one step and requires the game won exactly at the
last one. It also records, in ``meta["subgoal_results"]``, the game's reply to each subgoal's
last command, one line (:func:`~lumos_gym.agents.lumos.executed_result`): the
``plan-iterative`` export quotes it in the planner feedback (``The executed result for Subgoal
1 is You take the apple 1 from the countertop 1. Should we stop planning?``), as the Lumos-I
agent quotes the game's reply at evaluation. (Lumos had no games; the feedback follows its
math and QA form rather than Mind2Web's restatement, so that the planner sees what happened.)
"""

from __future__ import annotations

from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.envs.games.base import command_action, group_commands, phrase_commands
from lumos_gym.envs.tasks import Task

__all__ = ["alfworld_annotation", "game_annotation", "textworld_annotation", "twx_annotation"]

#: Task meta fields kept in the annotation's meta.
_KEPT = ("engine", "challenge", "task_type", "game", "seed", "split", "room")


def game_annotation(task: Task, dataset: str) -> Annotation:
    """Convert a game task of ``dataset`` from its gold command sequence.

    Args:
        task: a task of a game env (``task_type`` ``game``).
        dataset: the converter's dataset name (``textworld``, ``alfworld``,
            ``textworld-express``).

    Returns:
        The annotation: one subgoal per command group, each command a ``Command`` action.

    Raises:
        ConversionError: not a game task, no gold commands, or a command that an action
            cannot carry (brackets, ``;``, newlines, over-long).
    """
    if task.task_type != "game":
        raise ConversionError(f"not a game task (task type {task.task_type!r})")
    commands = task.meta.get("gold_commands")
    if not isinstance(commands, list | tuple) or not all(isinstance(c, str) for c in commands):
        raise ConversionError("meta['gold_commands'] must be the list of winning commands")
    commands = [c.strip() for c in commands if c.strip()]
    if not commands:
        raise ConversionError("the task has no winning command sequence")
    plan = []
    number = 0
    for group in group_commands(commands):
        actions = []
        for command in group:
            number += 1
            try:
                actions.append(command_action(f"R{number}", command))
            except ValueError as e:
                raise ConversionError(str(e)) from e
        plan.append((phrase_commands(group), actions))
    observation = task.meta.get("observation")
    text = observation if isinstance(observation, str) and observation.strip() else task.question
    return Annotation(
        id=task.id,
        dataset=dataset,
        task_type="game",
        task=text,
        subgoals=make_subgoals(plan),
        answer=task.answer,
        meta={"converter": f"rules/{dataset}", "commands": len(commands),
              **{k: task.meta[k] for k in _KEPT if k in task.meta}},
    )


def textworld_annotation(task: Task) -> Annotation:
    """Convert a TextWorld task (walkthrough or planner commands)."""
    return game_annotation(task, "textworld")


def alfworld_annotation(task: Task) -> Annotation:
    """Convert an ALFWorld task (planner solution or the game file's walkthrough)."""
    return game_annotation(task, "alfworld")


def twx_annotation(task: Task) -> Annotation:
    """Convert a TextWorldExpress task (its gold action sequence)."""
    return game_annotation(task, "textworld-express")
