"""A backend wrapper that answers repeated greedy requests from an on-disk cache.

:class:`CachingBackend` keeps the cache out of the backends themselves: it
wraps any :class:`~lumos_gym.models.base.Backend`, and

* answers a greedy request (``temperature == 0``) seen before from the cache, keyed by a SHA-256
  of the request (prompt or messages, stop strings, budget, seed) and the wrapped model's id;
* sends every other request on to the wrapped backend, as one batch in the callers' order;
* appends each new greedy completion to a JSON-lines file, flushed and fsynced line by line,
  so that a killed run keeps every answer it had received;
* never caches a sampled request (each call should draw anew), a request for token
  log-probabilities (the cache keeps text only) nor an error completion (a transient failure
  must be retried, not replayed).

The same wrapper serves resumable runs (conversion, evaluation) and fast tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from lumos_gym.errors import DataError
from lumos_gym.jsonl import append_jsonl, drop_partial_line
from lumos_gym.models.base import Backend, BackendInfo, Completion, GenerationRequest

_COMPLETION_FIELDS = ("text", "stop_reason", "input_tokens", "output_tokens", "model_id")


def request_key(request: GenerationRequest, model_id: str) -> str:
    """Return the cache key of ``request`` sent to ``model_id``: a hex SHA-256.

    The key covers everything that decides a greedy completion: the prompt or the messages,
    the stop strings, the budget, the seed and the model. The temperature is not part of it,
    since only greedy requests are cached.
    """
    payload = {
        "model_id": model_id,
        "prompt": request.prompt,
        "messages": [dict(m) for m in request.messages] if request.messages is not None else None,
        "stop": list(request.stop),
        "max_new_tokens": request.max_new_tokens,
        "seed": request.seed,
    }
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachingBackend(Backend):
    """Answer greedy requests from a JSON-lines cache; send the rest to ``backend``.

    Args:
        backend: the backend to wrap; its :meth:`info` gives the model id of the cache key.
        path: the cache file, created on the first new completion. A half-written last line
            (a killed run) is dropped on opening; any other unreadable line raises.

    Attributes:
        hits: requests answered from the cache so far.
        misses: greedy requests sent on so far (sampled ones are not counted).

    Raises:
        DataError: the cache file holds a line that is not a cache record.
    """

    name = "caching"

    def __init__(self, backend: Backend, path: str | Path) -> None:
        self.backend = backend
        self.path = Path(path)
        self.hits = 0
        self.misses = 0
        self._model_id: str | None = None
        self._cache: dict[str, Completion] = self._load()

    def _load(self) -> dict[str, Completion]:
        cache: dict[str, Completion] = {}
        drop_partial_line(self.path)
        if not self.path.exists():
            return cache
        with open(self.path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    fields = {k: record["completion"][k] for k in _COMPLETION_FIELDS}
                    cache[str(record["key"])] = Completion(**fields)
                except (ValueError, KeyError, TypeError) as e:
                    raise DataError(
                        f"{self.path}:{n}: not a cache record ({e}); delete the file to start over"
                    ) from e
        return cache

    @property
    def model_id(self) -> str:
        """Return the wrapped backend's model id (asked once, on first use)."""
        if self._model_id is None:
            self._model_id = self.backend.info().model_id
        return self._model_id

    def __len__(self) -> int:
        """Return the number of cached completions."""
        return len(self._cache)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request, in order; only uncached ones reach the wrapped backend.

        Identical greedy requests within one batch are sent on once.
        """
        results: list[Completion | None] = [None] * len(requests)
        keys: list[str | None] = []
        pending: list[GenerationRequest] = []
        slots: list[list[int]] = []  # the request positions each pending request answers
        first_pending: dict[str, int] = {}
        for i, request in enumerate(requests):
            if request.temperature != 0 or request.logprobs:
                keys.append(None)
                pending.append(request)
                slots.append([i])
                continue
            key = request_key(request, self.model_id)
            keys.append(key)
            if key in self._cache:
                results[i] = self._cache[key]
                self.hits += 1
            elif key in first_pending:
                slots[first_pending[key]].append(i)
                self.hits += 1
            else:
                first_pending[key] = len(pending)
                pending.append(request)
                slots.append([i])
                self.misses += 1
        if pending:
            completions = self.backend.generate(pending)
            if len(completions) != len(pending):
                raise ValueError(
                    f"the wrapped backend returned {len(completions)} completions "
                    f"for {len(pending)} requests"
                )
            self._store(completions, slots, keys)
            for completion, positions in zip(completions, slots, strict=True):
                for i in positions:
                    results[i] = completion
        return [r for r in results if r is not None]

    def _store(
        self,
        completions: Sequence[Completion],
        slots: Sequence[Sequence[int]],
        keys: Sequence[str | None],
    ) -> None:
        new = []
        for completion, positions in zip(completions, slots, strict=True):
            key = keys[positions[0]]
            if key is None or completion.stop_reason == "error":
                continue
            self._cache[key] = completion
            fields = {k: v for k, v in asdict(completion).items() if k in _COMPLETION_FIELDS}
            new.append({"key": key, "completion": fields})
        if not new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            for record in new:
                append_jsonl(f, record)

    def info(self) -> BackendInfo:
        """Return the wrapped backend's info (the cache is no part of the provenance)."""
        return self.backend.info()

    def close(self) -> None:
        """Close the wrapped backend."""
        self.backend.close()
