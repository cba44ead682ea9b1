"""Gold trajectories of the game envs: a winning command sequence as subgoals and actions.

:func:`group_commands` groups the commands into subgoals (moves, looks and openings join the
next action that changes the world), :func:`phrase_commands` phrases a group as a sentence
(``Go to the countertop 1 and take the apple 1 from the countertop 1.``) and
:func:`gold_steps` writes each group as one ``step`` of ``Command`` actions
(:func:`command_action`), as ``Task.gold_actions`` and the converters hold them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lumos_gym.tools.games import MAX_COMMAND_CHARS

__all__ = [
    "MAX_GROUP",
    "command_action",
    "gold_steps",
    "group_commands",
    "phrase_command",
    "phrase_commands",
]

#: Most commands in one subgoal of a gold trajectory.
MAX_GROUP = 4

_DIRECTIONS = frozenset(
    "north south east west up down northeast northwest southeast southwest left right".split()
)
_SETUP_VERBS = frozenset("go look open examine read inventory i task help".split())
_ARTICLE_PREPS = frozenset({"from", "to", "in", "into", "on", "onto", "with", "under", "at"})
_NO_ARTICLE = frozenset({"the", "a", "an", "some", "up", "down", "and", "around", *_DIRECTIONS})
_PHRASES = {
    "inventory": "check the inventory",
    "i": "check the inventory",
    "look": "look around",
    "look around": "look around",
    "task": "review the task",
    "help": "ask for help",
}


def _is_setup(command: str) -> bool:
    """Moves, looks, examinations and openings: they prepare the next world-changing action."""
    words = command.lower().split()
    if not words:
        return False
    if words[0] == "move":  # TextWorldExpress moves; ALFWorld's 'move X to Y' places an object
        return len(words) == 2 and words[1] in _DIRECTIONS
    return words[0] in _SETUP_VERBS


def group_commands(commands: Sequence[str], *, max_group: int = MAX_GROUP) -> list[list[str]]:
    """Group a winning command sequence into subgoals.

    Setup commands (moves, looks, examinations, openings) join the next command that changes
    the world; a group holds at most ``max_group`` commands, and setup commands left at the end
    form a group of their own.

    Args:
        commands: the commands, in order.
        max_group: the most commands in one group.

    Returns:
        The groups, in order, together holding every command once.
    """
    groups: list[list[str]] = []
    current: list[str] = []
    for command in commands:
        current.append(command)
        if not _is_setup(command) or len(current) >= max_group:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def phrase_command(command: str) -> str:
    """Phrase one command as a clause: ``take apple 1 from countertop 1`` → ``take the apple 1
    from the countertop 1``; ``inventory`` → ``check the inventory``.
    """  # noqa: D205
    text = " ".join(command.split())
    low = text.lower()
    if low in _PHRASES:
        return _PHRASES[low]
    words = text.split(" ")
    out = [words[0].lower()]
    expect_noun = True  # right after the verb comes its object
    for word in words[1:]:
        lower = word.lower()
        if lower in _ARTICLE_PREPS:
            out.append(word)
            expect_noun = True
            continue
        if expect_noun and lower not in _NO_ARTICLE and not lower[:1].isdigit():
            out.append("the")
        out.append(word)
        expect_noun = False
    return " ".join(out)


def phrase_commands(commands: Sequence[str]) -> str:
    """Phrase a group of commands as one subgoal sentence (``Open the fridge 1 and take ...``)."""
    clauses = [phrase_command(c) for c in commands if c.strip()]
    if not clauses:
        return "Continue the game."
    text = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
    return text[:1].upper() + text[1:] + "."


_UNSAFE = re.compile(r"[()\[\]{};\n\r]")


def command_action(variable: str, command: str) -> str:
    """Write ``R<n> = Command(<command>)``.

    Raises:
        ValueError: a command that the action language cannot carry (brackets, ``;``, newlines,
            empty or longer than :data:`MAX_COMMAND_CHARS`).
    """
    text = " ".join(command.split())
    if not text or len(text) > MAX_COMMAND_CHARS or _UNSAFE.search(text):
        raise ValueError(f"the command {command!r} cannot be written as a Command action")
    return f"{variable} = Command({text})"


def gold_steps(groups: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """Write each group as one ``step`` text of ``"; "``-joined Command actions, R1 onwards."""
    steps = []
    number = 0
    for group in groups:
        actions = []
        for command in group:
            number += 1
            actions.append(command_action(f"R{number}", command))
        steps.append("; ".join(actions))
    return tuple(steps)
