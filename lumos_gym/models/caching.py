"""A backend wrapper that answers repeated requests from an on-disk cache, and counts usage.

:class:`CachingBackend` keeps the cache out of the backends themselves: it wraps any
:class:`~lumos_gym.models.base.Backend`, and

* answers a request seen before from a :class:`CompletionCache`, keyed by a SHA-256 of the
  request (prompt or messages, stop strings, budget, temperature, seed) and of the wrapped model
  (:func:`model_identity`: the backend's name, the model id, the adapter a view runs);
* caches greedy requests (``temperature == 0``) only, unless made with ``sampled=True``: then a
  sampled request is cached too, under its temperature and seed, and a repeat of it replays the
  first draw (an API given a seed is expected to answer the same; the rollout runner gives each
  sampled call a seed of its own, so two calls never share a draw);
* sends every other request on to the wrapped backend, as one batch in the callers' order;
* never caches a request for token log-probabilities (the cache keeps text only) nor an error
  completion (a transient failure must be retried, not replayed);
* counts what it answered from the cache and what it sent on (:class:`Usage`: requests, the
  tokens of the completions received, the tokens the cache saved).

A cache is a JSON-lines file, each record flushed and fsynced as it is written, so that a killed
run keeps every answer it had received; or a folder that several processes share (Ray workers,
shards): each process appends to a file of its own, ``cache-<host>-<pid>.jsonl``, and reads
every ``*.jsonl`` file of the folder when it opens. A half-written last line (a killed process,
or one still writing) is ignored.

Keys carry a version. Version 1 (records without ``"v"``, written before sampled requests were
cached) named the model by its id alone and left the temperature out; such records are still
read, and answer the greedy requests of a backend that runs no adapter. New records are
version 2. The server is no part of a key: the same backend and model name on another server
(the ``openai`` backend's ``base_url``) is taken to be the same model.

The same wrapper serves resumable runs (conversion, ``lumos-gym evaluate --cache``) and fast
tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from lumos_gym.errors import DataError
from lumos_gym.jsonl import append_jsonl, drop_partial_line
from lumos_gym.models.base import (
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    GenerationSession,
)

_COMPLETION_FIELDS = ("text", "stop_reason", "input_tokens", "output_tokens", "model_id")

KEY_VERSION = 2
"""The version of the keys new cache records are written with."""


def request_key(request: GenerationRequest, model: str, version: int = KEY_VERSION) -> str:
    """Return the cache key of ``request`` sent to ``model``: a hex SHA-256.

    Args:
        request: the request; ``cancelled`` and ``logprobs`` are no part of the key.
        model: the model, as :func:`model_identity` names it (version 1: the model id).
        version: 2 covers the prompt or the messages, the stop strings, the budget, the
            temperature, the seed and the model; 1 (the keys of old cache files) leaves the
            temperature out, since only greedy requests were cached then.

    Raises:
        ValueError: an unknown version.
    """
    if version not in (1, 2):
        raise ValueError(f"no cache key version {version}; known: 1, 2")
    payload = {
        "model_id": model,
        "prompt": request.prompt,
        "messages": [dict(m) for m in request.messages] if request.messages is not None else None,
        "stop": list(request.stop),
        "max_new_tokens": request.max_new_tokens,
        "seed": request.seed,
    }
    if version == 2:
        payload["v"] = 2
        payload["temperature"] = float(request.temperature)
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_identity(info: BackendInfo) -> str:
    """Return the model a version-2 key names: ``backend:model_id``, and ``@adapter`` for a view.

    A view that runs an adapter (``details["adapter"]``, as the ``hf``, ``openvino`` and ``vllm``
    backends report it) adds the adapter's folder, or its name when no folder is given, since
    the model id of those backends names the base model alone. The model's weights are not
    read: a model or adapter changed under the same name replays the old answers (use a new
    cache for it).
    """
    identity = f"{info.backend}:{info.model_id}"
    adapter = info.details.get("adapter")
    if adapter:
        folder = dict(info.details.get("adapters") or {}).get(adapter)
        identity += f"@{folder or adapter}"
    return identity


def process_file_name() -> str:
    """Return the cache file of this process in a shared folder: ``cache-<host>-<pid>.jsonl``."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"
    return f"cache-{host}-{os.getpid()}.jsonl"


class CompletionCache:
    """Completions by request key, read from JSON-lines files and appended to one; thread-safe.

    Args:
        path: a JSON-lines file, read and then appended to (created on the first new
            completion); or, with ``folder``, a folder (made on the first new completion):
            every ``*.jsonl`` file in it is read, and this process appends to its own
            (:func:`process_file_name`).
        folder: ``path`` is a folder that several processes may share.

    Attributes:
        file: the file new completions are appended to.

    Raises:
        DataError: ``path`` is a file where a folder is wanted, or a cache file holds a complete
            line that is not a cache record.
    """

    def __init__(self, path: str | Path, *, folder: bool = False) -> None:
        self.path = Path(path)
        self.folder = folder
        if folder and self.path.exists() and not self.path.is_dir():
            raise DataError(f"the cache {self.path} is a file; give a folder")
        self.file = self.path / process_file_name() if folder else self.path
        self._lock = threading.Lock()
        self._entries: dict[str, Completion] = {}
        self._old: dict[str, Completion] = {}  # version-1 keys
        drop_partial_line(self.file)  # this process's own file: no one else writes it
        files = sorted(self.path.glob("*.jsonl")) if folder else [self.file]
        for file in files:
            self._read(file)

    def _read(self, file: Path) -> None:
        """Add the records of ``file``; a last line without its newline is left out."""
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            return
        lines = data.split(b"\n")[:-1]  # what follows the last newline is half written
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                completion = Completion(**{k: record["completion"][k] for k in _COMPLETION_FIELDS})
                version = record.get("v", 1)
                key = str(record["key"])
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise DataError(
                    f"{file}:{n}: not a cache record ({e}); delete the file to start over"
                ) from e
            (self._old if version == 1 else self._entries)[key] = completion

    def get(self, key: str, old_key: str | None = None) -> Completion | None:
        """Return the completion cached under ``key`` (or the version-1 ``old_key``), if any."""
        with self._lock:
            found = self._entries.get(key)
            if found is None and old_key is not None and self._old:
                found = self._old.get(old_key)
            return found

    def put(self, items: Sequence[tuple[str, Completion]]) -> None:
        """Cache each ``(key, completion)`` (version-2 keys) and append it to :attr:`file`."""
        if not items:
            return
        with self._lock:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.file, "a", encoding="utf-8") as f:
                for key, completion in items:
                    self._entries[key] = completion
                    fields_ = {k: v for k, v in asdict(completion).items()
                               if k in _COMPLETION_FIELDS}
                    append_jsonl(f, {"v": KEY_VERSION, "key": key, "completion": fields_})

    def __len__(self) -> int:
        """Return the number of cached completions (of either key version)."""
        with self._lock:
            return len(self._entries) + len(self._old)


@dataclass
class Usage:
    """What a :class:`CachingBackend` answered from its cache and what it sent on.

    Attributes:
        requests: completions received from the wrapped backend (one per request it answered,
            errors included; its own retries are not seen; a call that raised counts none).
        prompt_tokens: the prompt tokens of those completions (``input_tokens``).
        completion_tokens: their generated tokens (``output_tokens``).
        hits: requests answered from the cache, or by an identical request of the same batch.
        misses: requests that could have been cached and were sent on.
        saved_prompt_tokens: the prompt tokens of the answers given from the cache.
        saved_completion_tokens: their generated tokens.
    """

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    hits: int = 0
    misses: int = 0
    saved_prompt_tokens: int = 0
    saved_completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Add ``other``'s counts to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class CachingBackend(Backend):
    """Answer repeated requests from a cache; send the rest to ``backend``; count both.

    Several wrappers may share one :class:`CompletionCache` (the roles of a run). Wrappers of
    one backend object, or of views that batch together (:meth:`Backend.batch_group`), batch
    together too, each counting its own requests; a backend with a running batch of its own
    (:meth:`Backend.open_session`: ``openvino``) keeps it.

    Args:
        backend: the backend to wrap; its :meth:`info` names the model of the cache keys.
        cache: a :class:`CompletionCache`, or the path of a cache file (a half-written last
            line, a killed run's, is dropped on opening); ``None`` caches nothing and only
            counts.
        sampled: also cache sampled requests (``temperature > 0``), keyed by temperature and
            seed; a repeat then replays the first draw.

    Attributes:
        usage: the counts so far.

    Raises:
        DataError: the cache file holds a line that is not a cache record.
    """

    name = "caching"

    def __init__(
        self, backend: Backend, cache: CompletionCache | str | Path | None, *,
        sampled: bool = False,
    ) -> None:
        self.backend = backend
        self.cache = CompletionCache(cache) if isinstance(cache, (str, Path)) else cache
        self.sampled = sampled
        self.usage = Usage()
        self._lock = threading.Lock()
        self._models: tuple[str, str | None] | None = None

    @property
    def hits(self) -> int:
        """Requests answered from the cache so far."""
        return self.usage.hits

    @property
    def misses(self) -> int:
        """Requests that could have been cached and were sent on so far."""
        return self.usage.misses

    @property
    def model_id(self) -> str:
        """Return the wrapped backend's model id."""
        return self.backend.info().model_id

    def __len__(self) -> int:
        """Return the number of cached completions."""
        return len(self.cache) if self.cache is not None else 0

    def _keys(self, request: GenerationRequest) -> tuple[str, str | None] | None:
        """The version-2 key of ``request`` and its version-1 key, or None when not cached."""
        if self.cache is None or request.logprobs:
            return None
        if request.temperature != 0 and not self.sampled:
            return None
        if self._models is None:
            info = self.backend.info()
            # version-1 keys named the model id alone: right only for a model without adapter
            old = None if info.details.get("adapter") else info.model_id
            self._models = (model_identity(info), old)
        model, old = self._models
        old_key = request_key(request, old, 1) if old and request.temperature == 0 else None
        return request_key(request, model), old_key

    def _count(
        self, completion: Completion, *, hit: bool = False, cacheable: bool = False
    ) -> None:
        """Count ``completion``: answered from the cache (``hit``), else received."""
        with self._lock:
            usage = self.usage
            if hit:
                usage.hits += 1
                usage.saved_prompt_tokens += completion.input_tokens
                usage.saved_completion_tokens += completion.output_tokens
                return
            usage.requests += 1
            usage.prompt_tokens += completion.input_tokens
            usage.completion_tokens += completion.output_tokens
            usage.misses += cacheable

    def _store(self, completion: Completion, key: str | None) -> None:
        """Cache ``completion`` under ``key`` unless it is an error or not to be cached."""
        if key is not None and self.cache is not None and completion.stop_reason != "error":
            self.cache.put([(key, completion)])

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request, in order; only uncached ones reach the wrapped backend.

        Identical cacheable requests within one batch are sent on once.
        """
        return self.generate_mixed([(self, request) for request in requests])

    def generate_mixed(
        self, pairs: Sequence[tuple[Backend, GenerationRequest]]
    ) -> list[Completion]:
        """Complete each ``(wrapper, request)`` of wrappers that batch together, in order.

        Each wrapper answers from its cache and counts its own requests; the rest go to the
        wrapped backends as one call (one ``generate``, or ``generate_mixed`` for views of
        one model).

        Raises:
            ValueError: a wrapped backend returned a wrong number of completions.
        """
        views = [view if isinstance(view, CachingBackend) else self for view, _ in pairs]
        results: list[Completion | None] = [None] * len(pairs)
        sent: list[tuple[CachingBackend, GenerationRequest, str | None]] = []
        slots: list[list[int]] = []  # the positions each sent request answers
        first_sent: dict[str, int] = {}
        for i, (view, (_, request)) in enumerate(zip(views, pairs, strict=True)):
            keys = view._keys(request)
            if keys is not None:
                cached = view.cache.get(*keys) if view.cache is not None else None
                if cached is not None:
                    results[i] = cached
                    view._count(cached, hit=True)
                    continue
                if keys[0] in first_sent:
                    slots[first_sent[keys[0]]].append(i)
                    continue
                first_sent[keys[0]] = len(sent)
            sent.append((view, request, keys[0] if keys is not None else None))
            slots.append([i])
        if sent:
            completions = _send([(view.backend, request) for view, request, _ in sent])
            for (view, _, key), positions, completion in zip(sent, slots, completions,
                                                              strict=True):
                view._count(completion, cacheable=key is not None)
                view._store(completion, key)
                for n, i in enumerate(positions):
                    results[i] = completion
                    if n:
                        views[i]._count(completion, hit=True)
        return [r for r in results if r is not None]

    def batch_group(self) -> Hashable | None:
        """Batch with the wrappers of the same backend, or of its batch group.

        ``None`` for a backend with a running batch of its own, whose session
        :meth:`open_session` wraps.
        """
        group = self.backend.batch_group()
        if group is not None:
            return ("cached", group)
        if _own_session(self.backend):
            return None
        return ("cached", id(self.backend))

    def open_session(self) -> GenerationSession:
        """The wrapped backend's own session, answering cached requests at once; else queued."""
        if _own_session(self.backend):
            return _CachingSession(self, self.backend.open_session())
        return super().open_session()

    def info(self) -> BackendInfo:
        """Return the wrapped backend's info (the cache is no part of the provenance)."""
        return self.backend.info()

    def close(self) -> None:
        """Close the wrapped backend."""
        self.backend.close()


def _own_session(backend: Backend) -> bool:
    """Whether ``backend`` has a session of its own (a running batch), not the queued one."""
    return type(backend).open_session is not Backend.open_session


def _send(pairs: Sequence[tuple[Backend, GenerationRequest]]) -> list[Completion]:
    """One call of the wrapped backends for ``pairs``: ``generate`` when they are one object."""
    first = pairs[0][0]
    if all(backend is first for backend, _ in pairs):
        completions = first.generate([request for _, request in pairs])
    else:  # views that share a batch group
        completions = first.generate_mixed(pairs)
    if len(completions) != len(pairs):
        raise ValueError(f"the wrapped backend returned {len(completions)} completions for "
                         f"{len(pairs)} requests")
    return completions


class _CachingSession(GenerationSession):
    """A wrapped backend's own session: a cached request is answered at the next collect."""

    def __init__(self, wrapper: CachingBackend, session: GenerationSession) -> None:
        self._wrapper = wrapper
        self._session = session
        self._next_key = 0
        self._ready: list[tuple[int, Completion]] = []
        self._sent: dict[int, tuple[int, str | None]] = {}  # session key → (key, cache key)

    def submit(self, request: GenerationRequest) -> int:
        """Answer ``request`` from the cache, else submit it to the wrapped session."""
        wrapper = self._wrapper
        key = self._next_key
        self._next_key += 1
        keys = wrapper._keys(request)
        if keys is not None and wrapper.cache is not None:
            cached = wrapper.cache.get(*keys)
            if cached is not None:
                wrapper._count(cached, hit=True)
                self._ready.append((key, cached))
                return key
        inner = self._session.submit(request)
        self._sent[inner] = (key, keys[0] if keys is not None else None)
        return key

    def collect(self, wait: bool = True) -> list[tuple[int, Completion]]:
        """Return the cached answers and what the wrapped session finished.

        The wrapped session waits (with ``wait``) only when no cached answer is ready.
        """
        ready, self._ready = self._ready, []
        if not self._session.in_flight:
            return ready
        try:
            finished = self._session.collect(wait=wait and not ready)
        except Exception:
            self._sent.clear()  # the wrapped session dropped them; the caller answers them
            raise
        for inner, completion in finished:
            key, cache_key = self._sent.pop(inner)
            self._wrapper._count(completion, cacheable=cache_key is not None)
            self._wrapper._store(completion, cache_key)
            ready.append((key, completion))
        return ready

    @property
    def in_flight(self) -> int:
        """Requests submitted and not collected yet."""
        return len(self._ready) + self._session.in_flight

    def close(self) -> None:
        """Drop the requests in flight. Idempotent."""
        self._ready.clear()
        self._sent.clear()
        self._session.close()
