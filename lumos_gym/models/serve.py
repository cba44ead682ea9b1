"""``lumos-gym serve``: one local model behind an OpenAI-compatible HTTP API.

:func:`create_app` wraps any :class:`~lumos_gym.models.base.Backend` in a FastAPI app
with the endpoints OpenAI clients use (``GET /v1/models``, ``POST /v1/completions``,
``POST /v1/chat/completions``) plus ``GET /health``. :func:`serve` builds the ``hf`` backend and
runs the app with uvicorn.

Many clients share one model through a :class:`MicroBatcher`: the requests that arrive within a
few milliseconds of each other (or while the model is busy) become one ``backend.generate`` call,
run in a worker thread so that the event loop keeps answering. Errors are OpenAI-style JSON,
``{"error": {"message", "type", "param", "code"}}``: 400 for a request the server cannot honour,
404 for an unknown model or route, 500 when the backend fails.

Token capture: ``logprobs: 0`` (completions) or ``logprobs: true`` (chat, with ``top_logprobs``
0 or unset) returns each generated token's log-probability, and vLLM's extension
``return_token_ids: true`` returns ``prompt_token_ids`` and ``token_ids`` on each choice;
tokens are named ``token_id:<id>``, as vLLM names them with ``return_tokens_as_token_ids``.
Alternatives (``top_logprobs`` above 0) are refused. Where the backend gives no token trace
(``Completion.tokens``), those fields are ``null``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any, ClassVar, Literal

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, Field
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "`lumos-gym serve` needs fastapi and uvicorn; install them with:"
        " pip install 'lumos-gym[serve]'"
    ) from e

from lumos_gym.errors import BackendError
from lumos_gym.models.base import Backend, Completion, GenerationRequest
from lumos_gym.models.sources import split_model_name

logger = logging.getLogger(__name__)

_QueueItem = tuple[GenerationRequest, "asyncio.Future[Completion]"]


class MicroBatcher:
    """Gathers the requests of concurrent HTTP calls into batched ``backend.generate`` calls.

    A batch is sent when it holds ``max_batch_size`` requests or ``max_wait_s`` after its first
    request arrived, whichever comes first. One batch runs at a time, in a worker thread (one
    model, one device); the requests that arrive meanwhile form the next batch, which leaves at
    once if the queue already holds enough of them. A request whose HTTP caller went away
    before its batch left is dropped.

    Args:
        backend: the model; only this batcher's worker thread calls its ``generate``.
        max_batch_size: the most requests in one ``generate`` call.
        max_wait_s: how long the first request of a batch waits for company.

    Attributes:
        batch_sizes: how many batches of each size were sent (size → count).
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
        self._queue: asyncio.Queue[_QueueItem] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lumos-serve")
        self._closed = False

    async def submit(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Queue ``requests`` and wait for their completions, in order.

        Raises:
            BackendError: the backend raised (the same error for every request of that batch),
                or the batcher is closed.
        """
        queue = self._start()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Completion]] = [loop.create_future() for _ in requests]
        for request, future in zip(requests, futures, strict=True):
            queue.put_nowait((request, future))
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
            _, future = self._queue.get_nowait()
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
            requests = [request for request, _ in batch]
            try:
                completions = await loop.run_in_executor(
                    self._executor, self.backend.generate, requests
                )
                if len(completions) != len(batch):
                    raise BackendError(
                        f"generate returned {len(completions)} completions for {len(batch)}"
                        " requests"
                    )
            except Exception as e:  # any failure is forwarded to every waiting caller, as a 500
                logger.exception("backend.generate failed on a batch of %d", len(batch))
                error = (
                    e if isinstance(e, BackendError) else BackendError(f"{type(e).__name__}: {e}")
                )
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), completion in zip(batch, completions, strict=True):
                if not future.done():
                    future.set_result(completion)

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
        return [(request, future) for request, future in batch if not future.done()]


# -- request bodies ----------------------------------------------------------------------------


class _Body(BaseModel):
    """Fields shared by both endpoints; unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    # Fields the server understands only at their default value: name → allowed values.
    unsupported: ClassVar[dict[str, tuple[object, ...]]] = {
        "n": (1, None),
        "stream": (False, None),
    }

    model: str
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = 1
    stream: bool | None = False

    def stop_strings(self) -> tuple[str, ...]:
        """The stop strings as a tuple, empty strings left out."""
        stop = [self.stop] if isinstance(self.stop, str) else self.stop or []
        return tuple(s for s in stop if s)

    def check_supported(self) -> None:
        """Refuse a field the server cannot honour, rather than ignore it.

        Raises:
            APIError: 400, naming the field.
        """
        for name, allowed in self.unsupported.items():
            value = getattr(self, name)
            if value not in allowed:
                raise APIError(
                    400,
                    f"{name}={value!r} is not supported by lumos-gym serve (use {allowed[0]!r})",
                    param=name,
                )


class CompletionBody(_Body):
    """The body of ``POST /v1/completions``."""

    unsupported: ClassVar[dict[str, tuple[object, ...]]] = {
        **_Body.unsupported,
        "echo": (False, None),
        "best_of": (1, None),
        "logprobs": (None, 0),
        "suffix": (None, ""),
    }

    prompt: str | Annotated[list[str], Field(min_length=1)]
    max_tokens: int | None = Field(16, ge=1)
    echo: bool | None = False
    best_of: int | None = None
    logprobs: int | None = None  # 0: each chosen token's log-probability (no alternatives)
    suffix: str | None = None
    return_token_ids: bool | None = False  # vLLM's extension: prompt and completion token ids

    def wants_tokens(self) -> bool:
        """Whether the answer needs the call's token trace."""
        return self.logprobs is not None or bool(self.return_token_ids)


class _ContentPart(BaseModel):
    type: Literal["text"]
    text: str


class _Message(BaseModel):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[_ContentPart]

    def as_dict(self) -> dict[str, str]:
        # "developer" is OpenAI's new name for "system", which chat templates know.
        role = "system" if self.role == "developer" else self.role
        if isinstance(self.content, str):
            return {"role": role, "content": self.content}
        return {"role": role, "content": "\n".join(part.text for part in self.content)}


class ChatBody(_Body):
    """The body of ``POST /v1/chat/completions``."""

    unsupported: ClassVar[dict[str, tuple[object, ...]]] = {
        **_Body.unsupported,
        "top_logprobs": (None, 0),
        "tools": (None,),
    }

    messages: list[_Message] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = False
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    return_token_ids: bool | None = False

    def wants_tokens(self) -> bool:
        """Whether the answer needs the call's token trace."""
        return bool(self.logprobs) or bool(self.return_token_ids)


DEFAULT_COMPLETION_MAX_TOKENS = 16
"""``max_tokens`` of ``/v1/completions`` when a request names none (OpenAI's default)."""
DEFAULT_CHAT_MAX_TOKENS = 256
"""``max_tokens`` of ``/v1/chat/completions`` when a request names none."""


# -- errors ------------------------------------------------------------------------------------


class APIError(Exception):
    """An error answer in the OpenAI schema.

    Args:
        status: the HTTP status.
        message: what went wrong, for the client.
        type: the OpenAI error type; derived from ``status`` when left out.
        param: the request field at fault, if one is.
        code: a machine-readable code such as ``"model_not_found"``.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or ("server_error" if status >= 500 else "invalid_request_error")
        self.param = param
        self.code = code

    def response(self) -> JSONResponse:
        """The JSON answer."""
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return JSONResponse({"error": error}, status_code=self.status)


def _install_error_handlers(app: FastAPI) -> None:
    async def api_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, APIError)
        return exc.response()

    async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "body"
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        first = exc.errors()[0].get("loc", ()) if exc.errors() else ()
        param = str(first[1]) if len(first) > 1 else None
        return APIError(400, "invalid request: " + "; ".join(problems), param=param).response()

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        message = f"{exc.detail}: {request.method} {request.url.path}"
        return APIError(exc.status_code, message).response()

    app.add_exception_handler(APIError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)


# -- the app -----------------------------------------------------------------------------------


def create_app(
    backend: Backend,
    *,
    model_name: str,
    max_batch_size: int = 8,
    max_wait_s: float = 0.01,
) -> FastAPI:
    """Serve ``backend`` under ``model_name`` with an OpenAI-compatible API.

    The app does not close ``backend``; whoever built it does. ``app.state.batcher`` is the
    :class:`MicroBatcher` (its ``batch_sizes`` show how well requests were batched).

    Args:
        backend: the model.
        model_name: the name clients put in ``model``; any other name is a 404.
        max_batch_size: the most requests in one ``backend.generate`` call.
        max_wait_s: how long a request waits for others to batch with.

    Returns:
        The FastAPI app, ready for uvicorn.
    """
    batcher = MicroBatcher(backend, max_batch_size=max_batch_size, max_wait_s=max_wait_s)
    created = int(time.time())

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await batcher.aclose()

    app = FastAPI(title="lumos-gym", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.model_name = model_name
    _install_error_handlers(app)
    _add_info_routes(app, model_name, created)
    _add_generation_routes(app, batcher, model_name)
    return app


def _check_model(name: str, model_name: str) -> None:
    """Refuse (404) a request for a model other than the served one."""
    if name != model_name:
        raise APIError(
            404,
            f"The model {name!r} does not exist; this server serves {model_name!r}.",
            param="model",
            code="model_not_found",
        )


def _add_info_routes(app: FastAPI, model_name: str, created: int) -> None:
    """``GET /health`` and ``GET /v1/models``."""

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        model = {"id": model_name, "object": "model", "created": created, "owned_by": "lumos-gym"}
        return {"object": "list", "data": [model]}


def _add_generation_routes(app: FastAPI, batcher: MicroBatcher, model_name: str) -> None:
    """``POST /v1/completions`` and ``POST /v1/chat/completions``, both through ``batcher``."""

    @app.post("/v1/completions")
    async def completions(body: CompletionBody) -> dict[str, Any]:
        _check_model(body.model, model_name)
        body.check_supported()
        results = await _generate(batcher, _completion_requests(body))
        choices = [
            {"index": i, "text": c.text, "finish_reason": c.stop_reason,
             "logprobs": _completion_logprobs(c) if body.logprobs is not None else None,
             **(_token_ids(c) if body.return_token_ids else {})}
            for i, c in enumerate(results)
        ]
        return _answer("cmpl", "text_completion", model_name, choices, results)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatBody) -> dict[str, Any]:
        _check_model(body.model, model_name)
        body.check_supported()
        results = await _generate(batcher, [_chat_request(body)])
        choices = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": results[0].text},
                "logprobs": _chat_logprobs(results[0]) if body.logprobs else None,
                "finish_reason": results[0].stop_reason,
                **(_token_ids(results[0]) if body.return_token_ids else {}),
            }
        ]
        return _answer("chatcmpl", "chat.completion", model_name, choices, results)


def _token_name(token_id: int) -> str:
    """A token as vLLM names it with ``return_tokens_as_token_ids``: ``token_id:<id>``."""
    return f"token_id:{token_id}"


def _completion_logprobs(completion: Completion) -> dict[str, Any] | None:
    """The legacy ``logprobs`` object: each generated token and its log-probability."""
    trace = completion.tokens
    if trace is None:
        return None
    return {"tokens": [_token_name(t) for t in trace.completion_ids],
            "token_logprobs": list(trace.logprobs), "top_logprobs": None, "text_offset": None}


def _chat_logprobs(completion: Completion) -> dict[str, Any] | None:
    """The chat ``logprobs`` object: one ``content`` entry per generated token."""
    trace = completion.tokens
    if trace is None:
        return None
    return {"content": [
        {"token": _token_name(t), "logprob": lp, "bytes": None, "top_logprobs": []}
        for t, lp in zip(trace.completion_ids, trace.logprobs, strict=True)
    ]}


def _token_ids(completion: Completion) -> dict[str, Any]:
    """The ``return_token_ids`` fields (vLLM's) of a choice: the prompt's and the answer's ids."""
    trace = completion.tokens
    if trace is None:
        return {"prompt_token_ids": None, "token_ids": None}
    return {"prompt_token_ids": list(trace.prompt_ids), "token_ids": list(trace.completion_ids)}


def _completion_requests(body: CompletionBody) -> list[GenerationRequest]:
    """One request per prompt of a completions call."""
    prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    return [
        GenerationRequest(
            prompt=prompt,
            stop=body.stop_strings(),
            max_new_tokens=body.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS,
            temperature=body.temperature,
            seed=body.seed or 0,
            logprobs=body.wants_tokens(),
        )
        for prompt in prompts
    ]


def _chat_request(body: ChatBody) -> GenerationRequest:
    """The request of a chat call."""
    return GenerationRequest(
        messages=tuple(message.as_dict() for message in body.messages),
        stop=body.stop_strings(),
        max_new_tokens=body.max_completion_tokens or body.max_tokens or DEFAULT_CHAT_MAX_TOKENS,
        temperature=body.temperature,
        seed=body.seed or 0,
        logprobs=body.wants_tokens(),
    )


async def _generate(batcher: MicroBatcher, requests: list[GenerationRequest]) -> list[Completion]:
    try:
        results = await batcher.submit(requests)
    except BackendError as e:
        raise APIError(500, f"the backend failed: {e}") from e
    for result in results:
        if result.stop_reason == "error":
            raise APIError(500, f"the backend failed: {result.error}")
    return results


def _answer(
    prefix: str,
    obj: str,
    model_name: str,
    choices: list[dict[str, Any]],
    results: Sequence[Completion],
) -> dict[str, Any]:
    prompt_tokens = sum(c.input_tokens for c in results)
    completion_tokens = sum(c.output_tokens for c in results)
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": obj,
        "created": int(time.time()),
        "model": model_name,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def serve(
    model: str,
    *,
    adapter: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    batch_size: int = 8,
    max_context: int | None = None,
    max_wait_ms: float = 10.0,
    log_level: str = "info",
) -> None:
    """Load ``model`` with the ``hf`` backend and serve it until interrupted.

    Args:
        model: a Hugging Face model id, a local folder, or a LoRA folder from
            ``lumos-gym train`` (its base model is loaded with it).
        adapter: a peft adapter to apply on top of ``model``.
        host: the interface to listen on; the default accepts local clients only.
        port: the TCP port.
        served_model_name: the name clients use in ``model``; defaults to ``model``.
        device: the torch device (``"cpu"``, ``"cuda"``, ...); the backend chooses by default.
        dtype: the torch dtype name; the backend chooses by default.
        batch_size: the most requests the model completes at once.
        max_context: the longest prompt plus completion, in tokens.
        max_wait_ms: how long a request waits for others to batch with.
        log_level: uvicorn's log level.
    """
    import uvicorn

    from lumos_gym.models.hf import HFBackend  # heavy: torch and transformers

    base, folder = split_model_name(model)
    if folder is not None and adapter is not None:
        raise BackendError(f"{model!r} is an adapter folder; pass its base as --model instead")
    import socket

    with socket.socket() as probe:  # before the model loads: a busy port fails at once
        try:
            probe.bind((host, port))
        except OSError as e:
            message = f"cannot serve on {host}:{port} ({e}); pass another --port"
            raise BackendError(message) from None
    backend = HFBackend(
        base,
        adapter=adapter or folder,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        max_context=max_context,
    )
    try:
        app = create_app(
            backend,
            model_name=served_model_name or model,
            max_batch_size=batch_size,
            max_wait_s=max_wait_ms / 1000,
        )
        uvicorn.run(app, host=host, port=port, log_level=log_level)
    finally:
        backend.close()
