"""``Command``: the one action of the text-game envs (TextWorld, ALFWorld, TextWorldExpress).

The command goes to the episode's game as typed (one pair of surrounding quotes removed) and
the game's answer is the result; the game's parser judges the command, so a command it does
not understand gets the game's own answer. An empty, multi-line or over-long command is an
error of the agent (``Error: Command: ...``) and never reaches the game, and so is one naming
an interpreter command that reads or writes files (:data:`FILE_COMMANDS`: ``save`` and
``script`` would write a saved game or a transcript into the working directory).
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from lumos_gym.actions import Action
from lumos_gym.errors import ToolError
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec

__all__ = ["FILE_COMMANDS", "MAX_COMMAND_CHARS", "Command", "GameChannel"]

#: Longest command sent to a game.
MAX_COMMAND_CHARS = 200
_QUOTES = ("'", '"', "`")
#: The interpreter commands that read or write files (saved games, transcripts, recordings of
#: commands), refused wherever they stand in a command (Inform reads ``look. save`` as two).
FILE_COMMANDS = frozenset(
    ["save", "restore", "script", "transcript", "unscript", "noscript", "recording", "replay"]
)


@runtime_checkable
class GameChannel(Protocol):
    """What ``Command`` needs of an episode's session: a running game that takes commands.

    The game envs' :class:`~lumos_gym.envs.games.base.GameSession` is one.
    """

    closed: bool

    @property
    def done(self) -> bool:
        """Whether the game has ended."""
        ...

    def send(self, command: str) -> str:
        """Play one command and return what the game says."""
        ...


def _command_text(raw: str, limit: int) -> str:
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    if not text:
        raise ToolError("empty command; write the game command inside, e.g. Command(look)")
    if "\n" in text or "\r" in text:
        raise ToolError("a command is one line; send one command per Command action")
    if len(text) > limit:
        raise ToolError(f"the command has {len(text)} characters; at most {limit}")
    files = FILE_COMMANDS.intersection(re.findall(r"[a-z]+", text.lower()))
    if files:
        raise ToolError(f"{min(files)!r} reads or writes files of the game interpreter; "
                        "play the game with its own commands")
    return " ".join(text.split())


class Command(Tool):
    """Send one command to the episode's game and return what the game says."""

    spec = ToolSpec(
        "Command",
        "Command(command)",
        "Send a command to the game (e.g. 'go north', 'take apple 1 from countertop 1') and "
        "return what the game says",
    )

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Play ``action.args`` in ``ctx.session`` (a :class:`GameChannel`).

        Raises:
            ToolError: no game in this env, the game has ended, or a bad command.
        """
        session = ctx.session
        if not isinstance(session, GameChannel):
            raise ToolError("Command plays a text game; this environment runs no game")
        command = _command_text(action.args, MAX_COMMAND_CHARS)
        if session.closed or session.done:
            raise ToolError("the game has ended")
        return ToolResult((session.send(command),))
