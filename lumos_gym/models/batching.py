"""The micro-batcher of ``lumos-gym serve``: concurrent HTTP requests into batched backend calls.

:class:`MicroBatcher` runs in the server's event loop; the backend runs in one worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress

from lumos_gym.errors import BackendError
from lumos_gym.models.base import CANCELLED, Backend, Completion, GenerationRequest

logger = logging.getLogger(__name__)

_QueueItem = tuple[Backend, GenerationRequest, "asyncio.Future[Completion]"]


class MicroBatcher:
    """Gathers the requests of concurrent HTTP calls into batched backend calls.

    A batch is sent when it holds ``max_batch_size`` requests or ``max_wait_s`` after its first
    request arrived, whichever comes first. One batch runs at a time, in a worker thread (one
    model, one device); the requests that arrive meanwhile form the next batch, which leaves at
    once if the queue already holds enough of them.

    Each request names the backend that answers it: ``backend`` itself or one of its adapter
    views (:meth:`~lumos_gym.models.hf.HFBackend.with_adapter`). A batch of several views is one
    :meth:`~lumos_gym.models.base.Backend.generate_mixed` call when the backend batches them
    together (``batch_group``: peft's mixed-adapter rows), else one ``generate`` call per view,
    in turn, as the in-process runner does.

    A request whose caller went away is dropped if its batch has not left; if it has, its
    ``cancelled`` check tells the backend to stop decoding it (the ``hf`` backend ends the
    row at the next step, and the batch once every row is done).

    Args:
        backend: the model; only this batcher's worker thread calls it and its views.
        max_batch_size: the most requests in one batch.
        max_wait_s: how long the first request of a batch waits for company.

    Attributes:
        batch_sizes: how many batches of each size were sent (size → count).
        dropped: requests dropped before their batch left, their caller gone.
        stopped: the latest completions (at most 100) that the backend cut short because
            their caller went away (error :data:`~lumos_gym.models.base.CANCELLED`).
        busy: whether a batch is running in the backend now.
    """

    def __init__(
        self, backend: Backend, *, max_batch_size: int = 8, max_wait_s: float = 0.01
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1; got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be 0 or more; got {max_wait_s}")
        self.backend = backend
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.batch_sizes: Counter[int] = Counter()
        self.dropped = 0
        self.stopped: deque[Completion] = deque(maxlen=100)
        self.busy = False
        self._queue: asyncio.Queue[_QueueItem] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lumos-serve")
        self._closed = False

    async def submit(
        self, requests: Sequence[GenerationRequest], view: Backend | None = None
    ) -> list[Completion]:
        """Queue ``requests`` for ``view`` (default: the backend) and wait for their completions.

        Cancelling the caller cancels the requests' futures: those still queued are dropped.

        Raises:
            BackendError: the backend raised (the same error for every request of that batch),
                or the batcher is closed.
        """
        queue = self._start()
        loop = asyncio.get_running_loop()
        target = view if view is not None else self.backend
        futures: list[asyncio.Future[Completion]] = [loop.create_future() for _ in requests]
        for request, future in zip(requests, futures, strict=True):
            queue.put_nowait((target, request, future))
        # return_exceptions: a failed batch fails every future; read them all, raise the first.
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Stop the worker, fail the requests still queued, and join the worker thread."""
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            with suppress(asyncio.CancelledError):
                await self._worker
        while self._queue is not None and not self._queue.empty():
            _, _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(BackendError("the server is shutting down"))
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _start(self) -> asyncio.Queue[_QueueItem]:
        if self._closed:
            raise BackendError("the server is shutting down")
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(self._run())
        return self._queue

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            if not batch:
                continue
            self.batch_sizes[len(batch)] += 1
            pairs = [(view, request) for view, request, _ in batch]
            self.busy = True
            try:
                outcomes = await loop.run_in_executor(self._executor, self._complete_batch, pairs)
            finally:
                self.busy = False
            for (_, _, future), outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, Completion) and outcome.error == CANCELLED:
                    self.stopped.append(outcome)
                if future.done():
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    def _complete_batch(
        self, pairs: Sequence[tuple[Backend, GenerationRequest]]
    ) -> list[Completion | BackendError]:
        """Complete a batch in the worker thread: each request's completion or its error."""
        views = {id(view): view for view, _ in pairs}
        if len(views) > 1 and self.backend.batch_group() is not None:
            groups = [list(range(len(pairs)))]
            calls = [lambda: self.backend.generate_mixed(pairs)]
        else:  # one generate call per view, in the order the views first asked
            order: dict[int, list[int]] = {}
            for i, (view, _) in enumerate(pairs):
                order.setdefault(id(view), []).append(i)
            groups = list(order.values())
            calls = [functools.partial(pairs[g[0]][0].generate, [pairs[i][1] for i in g])
                     for g in groups]
        outcomes: list[Completion | BackendError | None] = [None] * len(pairs)
        for group, call in zip(groups, calls, strict=True):
            try:
                completions = call()
                if len(completions) != len(group):
                    raise BackendError(f"generate returned {len(completions)} completions for "
                                       f"{len(group)} requests")
            except Exception as e:  # any failure is forwarded to every waiting caller, as a 500
                logger.exception("the backend failed on a batch of %d", len(group))
                error = e if isinstance(e, BackendError) else BackendError(
                    f"{type(e).__name__}: {e}")
                for i in group:
                    outcomes[i] = error
                continue
            for i, completion in zip(group, completions, strict=True):
                outcomes[i] = completion
        return outcomes  # type: ignore[return-value]  # every slot was filled above

    async def _next_batch(self) -> list[_QueueItem]:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        deadline = loop.time() + self.max_wait_s
        while len(batch) < self.max_batch_size:
            if not self._queue.empty():
                batch.append(self._queue.get_nowait())
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        kept = [item for item in batch if not item[2].done()]
        self.dropped += len(batch) - len(kept)
        return kept
