"""The error hierarchy of lumos-gym: one base class, one subclass per kind of failure.

Each error says what went wrong and, where there is one, how to fix it.
"""

from __future__ import annotations


class LumosGymError(Exception):
    """Base class of every error raised by lumos-gym."""


class RegistryError(LumosGymError, KeyError):
    """A name is missing from a registry, or registered twice."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ActionParseError(LumosGymError, ValueError):
    """A grounded action could not be parsed.

    Attributes:
        text: the whole text that was parsed.
        position: the 0-based character offset where parsing failed.
        expected: what the parser expected at that position.
    """

    def __init__(self, text: str, position: int, expected: str) -> None:
        self.text = text
        self.position = position
        self.expected = expected
        found = repr(text[position : position + 12]) if position < len(text) else "end of text"
        super().__init__(f"at position {position}: expected {expected}, found {found}")


class UndefinedVariableError(LumosGymError, KeyError):
    """An action refers to a variable (`R<n>`) that no earlier action defined."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ToolError(LumosGymError):
    """A tool could not execute an action: bad arguments, a timeout, a refused formula."""


class SandboxError(ToolError):
    """Code run in the sandbox was killed or could not be started."""


class DataError(LumosGymError):
    """A data file is missing or not in the expected format."""


class BackendError(LumosGymError):
    """A model backend failed (unreachable server, bad model name, generation error)."""


class InfraError(LumosGymError):
    """A failure of the machinery a run stands on, not of the agent, the env's logic or the task.

    An env server that cannot be reached or stops answering (``lumos/remote``), a server that
    is full: the rollout runner ends such an episode with the ``infra-error`` status, tries it
    again afresh (``Runner(max_infra_retries=...)``), and the results leave an episode that kept
    failing out of every mean instead of scoring it 0. A backend says the same of one request
    with ``Completion(infra=True)`` (:class:`lumos_gym.models.base.Completion`).
    """


class EvaluationError(LumosGymError):
    """The evaluation cannot start: a bad suite, env, model or results folder."""


class ModelSpecError(BackendError, EvaluationError):
    """Models asked for with settings their backend cannot take.

    No server URL, adapters on a served model, an adapter folder named twice: it stops an
    evaluation before it starts, so it is an :class:`EvaluationError` too.
    """


class AgentLoadError(EvaluationError):
    """An agent named by ``module:Class``, ``file.py:Class`` or a plugin cannot be loaded.

    A missing file or module, a class that is not an agent, or a module whose import failed
    (the message carries the failure).
    """
