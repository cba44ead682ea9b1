"""The model-backend contract: a batch of typed requests in, completions out, in order."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lumos_gym.registry import Registry

StopReason = Literal["stop", "length", "error"]


@dataclass(frozen=True)
class GenerationRequest:
    """One completion request.

    Exactly one of ``prompt`` (raw text, completed as is: the Lumos modules are not chat
    models) and ``messages`` (chat turns, rendered by the model's chat template or sent to a chat
    endpoint) is set.

    Attributes:
        prompt: raw prompt text.
        messages: chat messages as ``{"role": ..., "content": ...}`` dicts.
        stop: strings that end the completion; the completion never includes them.
        max_new_tokens: the generation budget.
        temperature: 0 means greedy decoding.
        seed: the sampling seed (recorded even when decoding is greedy).
    """

    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    stop: tuple[str, ...] = ()
    max_new_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("set exactly one of prompt and messages")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")


@dataclass(frozen=True)
class Completion:
    """The answer to one request.

    Attributes:
        text: the generated text, cut before the first stop string.
        stop_reason: ``"stop"`` (a stop string or end-of-sequence), ``"length"`` (the budget
            ran out) or ``"error"`` (see ``error``).
        input_tokens: prompt length in tokens.
        output_tokens: generated tokens.
        model_id: the model that answered.
        error: the error message when ``stop_reason == "error"``.
    """

    text: str
    stop_reason: StopReason
    input_tokens: int = 0
    output_tokens: int = 0
    model_id: str = ""
    error: str | None = None


@dataclass
class BackendInfo:
    """What a results file records about a backend (provenance)."""

    backend: str
    model_id: str
    details: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """A language model behind one call: ``generate(requests) -> completions`` in order.

    Batching, sorting by length and concurrency live inside the backend; callers send every
    pending request at once.
    """

    name: str = "backend"

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request; the i-th completion answers the i-th request."""

    @abstractmethod
    def info(self) -> BackendInfo:
        """Describe the backend and model for provenance."""

    def close(self) -> None:
        """Release resources. Idempotent."""
        return None  # nothing to release by default


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string (servers and decoders may run past one).

    Returns:
        The text, and whether a stop string was found.
    """
    positions = [i for s in stop if s and (i := text.find(s)) >= 0]
    if not positions:
        return text, False
    return text[: min(positions)], True


BACKENDS: Registry[type[Backend]] = Registry("backend")
