"""The model-backend contract: a batch of typed requests in, completions out, in order.

Besides the one blocking call (:meth:`Backend.generate`), a backend opens a
:class:`GenerationSession` for callers that keep many requests in flight (the rollout runner):
requests are submitted one at a time and their completions collected as they finish. A backend
that decodes requests side by side in one running batch (``openvino``) lets a request join the
batch while others decode and hands each back as soon as it ends; every other backend gets
:class:`QueuedSession`, which answers everything queued with one ``generate`` call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lumos_gym.errors import BackendError
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
        logprobs: also return the token ids of the prompt and the completion and each
            completion token's log-probability (:class:`TokenTrace`), where the backend can;
            one that cannot leaves ``Completion.tokens`` at ``None``.
        cancelled: asked while the request waits and decodes (a cheap call); once it answers
            True the backend may stop working on the request and answer it with
            :data:`CANCELLED` as the error (``lumos-gym serve`` sets it when the HTTP client
            went away). Not part of the request's identity (equality, hashing, cache keys).
    """

    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    stop: tuple[str, ...] = ()
    max_new_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    logprobs: bool = False
    cancelled: Callable[[], bool] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("set exactly one of prompt and messages")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")


CANCELLED = "cancelled: the caller went away"
"""The error of a completion a backend stopped because its request was cancelled."""


def is_cancelled(request: GenerationRequest) -> bool:
    """Whether ``request`` was cancelled by its caller."""
    return request.cancelled is not None and bool(request.cancelled())


def check_adapter(name: str | None, loaded: Iterable[str]) -> None:
    """Refuse a view on adapter ``name`` (``None``: the base model) that is not in ``loaded``.

    Raises:
        BackendError: naming the adapters that are loaded.
    """
    loaded = list(loaded)
    if name is not None and name not in loaded:
        known = ", ".join(map(repr, loaded)) or "none"
        raise BackendError(f"no adapter named {name!r} is loaded; loaded adapters: {known}")


@dataclass(frozen=True)
class TokenTrace:
    """The tokens of one model call, for training on what the model sampled (RL, filtering).

    Attributes:
        prompt_ids: the prompt's token ids, as the model read them.
        completion_ids: every token the model generated for the answer, in order, the one that
            ended it included (an end-of-sequence token, or the last token of a stop string),
            though ``Completion.text`` shows neither.
        logprobs: the log-probability of each completion token under the model (its logits at
            temperature 1, before any sampling setting), one per ``completion_ids``.
        loss_mask: 1 for a completion token the model chose (trained on), 0 for one it did
            not (a served backend's forced token); ``None`` when every token is the model's.
    """

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    loss_mask: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError("one log-probability per completion token")
        if self.loss_mask is not None and len(self.loss_mask) != len(self.completion_ids):
            raise ValueError("one loss-mask entry per completion token")

    def mask(self) -> tuple[int, ...]:
        """The loss mask of the completion tokens (all ones when ``loss_mask`` is ``None``)."""
        return self.loss_mask if self.loss_mask is not None else (1,) * len(self.completion_ids)


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
        tokens: the call's token ids and log-probabilities, when the request asked for them
            (``logprobs``) and the backend provides them.
        infra: with ``stop_reason == "error"``, whether the machinery failed rather than the
            request: the engine did not finish it (OpenVINO's ``IGNORED``), or the server or
            the connection kept failing through the backend's retries (a timeout, a refused
            connection, HTTP 429 or 5xx). Another try may succeed; the runner ends the episode
            with ``infra-error`` and plays it again. False (the default) for a request's own
            problem (too long for the context, no chat template, HTTP 400): ``agent-error``
            or ``context-limit``, never retried.
    """

    text: str
    stop_reason: StopReason
    input_tokens: int = 0
    output_tokens: int = 0
    model_id: str = ""
    error: str | None = None
    tokens: TokenTrace | None = None
    infra: bool = False


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

    def open_session(self) -> GenerationSession:
        """A session that takes requests one at a time and returns each completion when done.

        The default queues requests and answers them with one :meth:`generate` call
        (:class:`QueuedSession`); backends with a running batch override it.
        """
        return QueuedSession(self)

    def batch_group(self) -> Hashable | None:
        """A key that the views of one model share when one batch can hold all their requests.

        ``None`` (the default): this backend batches alone. A backend that returns a key
        answers :meth:`generate_mixed` for the requests of every view with that key (the ``hf``
        backend's adapters, through peft's mixed-adapter batches), and the runner sends the
        turns of all those views as one batch (:class:`MixedQueuedSession`).
        """
        return None

    def generate_mixed(
        self, pairs: Sequence[tuple[Backend, GenerationRequest]]
    ) -> list[Completion]:
        """Complete each ``(view, request)`` as ``view.generate`` would, in order.

        The views share :meth:`batch_group`'s key. The default calls each view once with its
        requests; a backend with a group answers them in shared batches.
        """
        results: list[Completion | None] = [None] * len(pairs)
        views: dict[int, tuple[Backend, list[int]]] = {}
        for i, (view, _) in enumerate(pairs):
            views.setdefault(id(view), (view, []))[1].append(i)
        for view, indices in views.values():
            for i, completion in zip(
                indices, view.generate([pairs[i][1] for i in indices]), strict=True
            ):
                results[i] = completion
        return results  # type: ignore[return-value]  # every index was filled above

    def close(self) -> None:
        """Release resources. Idempotent."""
        return None  # nothing to release by default


class GenerationSession(ABC):
    """Requests in flight on one backend: submitted one at a time, collected as they finish.

    Each request gets a key (an int unique in the session); :meth:`collect` returns
    ``(key, completion)`` pairs, each key once. A completion is the one :meth:`Backend.generate`
    would give for the request alone.
    """

    @abstractmethod
    def submit(self, request: GenerationRequest) -> int:
        """Hand ``request`` to the backend (it may start at once) and return its key."""

    @abstractmethod
    def collect(self, wait: bool = True) -> list[tuple[int, Completion]]:
        """Advance the work in flight and return the requests that finished since last time.

        Args:
            wait: return only once at least one request has finished (or none is in flight);
                False does at most one unit of work (one decoding step, or the one
                ``generate`` call of :class:`QueuedSession`) and may return nothing.

        Raises:
            Exception: whatever the backend raised; every request then in flight is dropped
                (the caller answers them itself) and the session stays usable.
        """

    @property
    @abstractmethod
    def in_flight(self) -> int:
        """Requests submitted and not collected yet."""

    def close(self) -> None:
        """Drop the requests in flight. Idempotent."""
        return None  # nothing held by default

    def __enter__(self) -> GenerationSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class QueuedSession(GenerationSession):
    """The default session: requests wait in a queue; a collect sends them all as one batch.

    This is the one-batch-a-call behaviour of :meth:`Backend.generate`: nothing joins a batch
    once its call has started, and every completion of a call comes back together.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._queue: list[tuple[int, GenerationRequest]] = []
        self._next_key = 0

    def submit(self, request: GenerationRequest) -> int:
        """Queue ``request`` for the next collect; return its key."""
        key = self._next_key
        self._next_key += 1
        self._queue.append((key, request))
        return key

    def collect(self, wait: bool = True) -> list[tuple[int, Completion]]:
        """Send every queued request as one ``generate`` call; return all their completions."""
        queued, self._queue = self._queue, []
        if not queued:
            return []
        completions = self._complete(queued)
        if len(completions) != len(queued):
            raise RuntimeError(
                f"backend {self.backend.name!r} returned {len(completions)} completions for "
                f"{len(queued)} requests"
            )
        return [(key, completion) for (key, _), completion in zip(queued, completions, strict=True)]

    def _complete(self, queued: Sequence[tuple[int, GenerationRequest]]) -> list[Completion]:
        """The one backend call that answers a collect's requests."""
        return self.backend.generate([request for _, request in queued])

    @property
    def in_flight(self) -> int:
        """Requests queued for the next collect."""
        return len(self._queue)

    def close(self) -> None:
        """Forget the queued requests."""
        self._queue.clear()


class MixedQueuedSession(QueuedSession):
    """A queued session for the views of one model: a collect sends all their requests at once.

    Requests come with the view that asks (:meth:`submit_for`); a collect answers them with one
    :meth:`Backend.generate_mixed` call, so a planner's and a grounder's turns on adapters of one
    model share a batch.
    """

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self._views: dict[int, Backend] = {}

    def submit_for(self, view: Backend, request: GenerationRequest) -> int:
        """Queue ``request`` of ``view`` (a backend of the same batch group); return its key."""
        key = self.submit(request)
        self._views[key] = view
        return key

    def _complete(self, queued: Sequence[tuple[int, GenerationRequest]]) -> list[Completion]:
        """One ``generate_mixed`` call, each request with the view that asked."""
        return self.backend.generate_mixed(
            [(self._views.pop(key, self.backend), request) for key, request in queued]
        )

    def close(self) -> None:
        """Forget the queued requests."""
        super().close()
        self._views.clear()


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
