"""``lumos-gym serve``: a model and its adapters behind an OpenAI-compatible HTTP API.

:func:`create_app` wraps any :class:`~lumos_gym.models.base.Backend` (and named adapter views
of it, as vLLM's ``--lora-modules``: one base model in memory, each adapter a model name) in a
FastAPI app with the endpoints OpenAI clients use (``GET /v1/models``, ``POST /v1/completions``,
``POST /v1/chat/completions``, the last two with ``stream: true`` as well) plus
``GET /health``. :func:`serve` builds the ``hf`` backend and runs the app with uvicorn.

Many clients share one model through a :class:`MicroBatcher`: the requests that arrive within a
few milliseconds of each other (or while the model is busy) become one batch, run in a worker
thread so that the event loop keeps answering. A client that goes away cancels its requests:
dropped if still queued, stopped at the next decoding step if running.

Errors are OpenAI-style JSON, ``{"error": {"message", "type", "param", "code"}}``: 400 for a
request the server cannot honour (a field out of range, a prompt too long for the context),
401 without the API key, 404 for an unknown model or route, 413 for a body over the size limit
(refused before it is read), 500 when the backend fails.

Token capture: ``logprobs: 0`` (completions) or ``logprobs: true`` (chat, with ``top_logprobs``
0 or unset) returns each generated token's log-probability, and vLLM's extension
``return_token_ids: true`` returns ``prompt_token_ids`` and ``token_ids`` on each choice;
tokens are named ``token_id:<id>``, as vLLM names them with ``return_tokens_as_token_ids``.
Alternatives (``top_logprobs`` above 0) are refused. Where the backend gives no token trace
(``Completion.tokens``), those fields are ``null``.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse
    from pydantic import BaseModel, ConfigDict, Field
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "`lumos-gym serve` needs fastapi and uvicorn; install them with:"
        " pip install 'lumos-gym[serve]'"
    ) from e

from lumos_gym.asgi import Guard, check_exposure
from lumos_gym.errors import BackendError
from lumos_gym.models.base import Backend, Completion, GenerationRequest
from lumos_gym.models.batching import MicroBatcher
from lumos_gym.models.reference import REFERENCE_AGENTS, reference_models, served_name
from lumos_gym.models.sources import split_model_name

logger = logging.getLogger(__name__)

# -- request bodies ----------------------------------------------------------------------------


MAX_SEED = 2**63 - 1
"""The largest ``seed`` a request may give (a signed 64-bit integer, as torch takes)."""
MAX_TOKENS = 2**31 - 1
"""The largest ``max_tokens`` a request may give (the context length bounds it further)."""


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool | None = False


class _Body(BaseModel):
    """Fields shared by both endpoints; unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    # Fields the server understands only at their default value: name → allowed values.
    unsupported: ClassVar[dict[str, tuple[object, ...]]] = {
        "n": (1, None),
    }

    model: str
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    n: int | None = 1
    stream: bool | None = False
    stream_options: _StreamOptions | None = None

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
    max_tokens: int | None = Field(16, ge=1, le=MAX_TOKENS)
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
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
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

DEFAULT_MAX_BODY_MB = 8.0
"""The largest request body ``serve`` reads, in MiB, unless ``--max-body-mb`` says otherwise."""
CHARS_PER_TOKEN_BOUND = 16
"""A prompt longer than this many characters per context token cannot fit, whatever it holds:
it is refused before it is tokenized."""


def create_app(
    backend: Backend,
    *,
    model_name: str,
    adapters: Mapping[str, Backend] | None = None,
    adapter_paths: Mapping[str, str] | None = None,
    completions: bool = True,
    api_key: str | None = None,
    max_body_bytes: int = int(DEFAULT_MAX_BODY_MB * 2**20),
    max_prompt_chars: int | None = None,
    max_batch_size: int = 8,
    max_wait_s: float = 0.01,
) -> FastAPI:
    """Serve ``backend`` (and its adapter views) with an OpenAI-compatible API.

    The app does not close ``backend``; whoever built it does. ``app.state.batcher`` is the
    :class:`MicroBatcher` (its ``batch_sizes`` show how well requests were batched).

    Args:
        backend: the model.
        model_name: the name clients put in ``model`` for ``backend`` itself.
        adapters: more served names, each answered by a view of ``backend`` (vLLM's
            ``--lora-modules``: one base model in memory, each adapter a model name).
        adapter_paths: the folder of each adapter, listed as its ``root`` by ``/v1/models``.
        completions: offer ``POST /v1/completions``; False serves chat only, as many hosted
            APIs do (the route is then a 404).
        api_key: the bearer token every request but ``GET /health`` must carry; ``None``: none.
        max_body_bytes: a larger request body is refused (413) before it is read.
        max_prompt_chars: a longer prompt (all messages together for chat) is refused (400)
            before it is tokenized; by default :data:`CHARS_PER_TOKEN_BOUND` times the
            backend's ``max_context`` when its info gives one.
        max_batch_size: the most requests in one backend call.
        max_wait_s: how long a request waits for others to batch with.

    Returns:
        The FastAPI app, ready for uvicorn.
    """
    served: dict[str, Backend] = {model_name: backend}
    for name, view in (adapters or {}).items():
        if name in served:
            raise ValueError(f"the served name {name!r} is given twice")
        served[name] = view
    if max_prompt_chars is None:
        context = backend.info().details.get("max_context")
        max_prompt_chars = CHARS_PER_TOKEN_BOUND * int(context) if context else None
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
    app.state.served = served
    _install_error_handlers(app)
    _add_info_routes(app, model_name, list(served), dict(adapter_paths or {}), created)
    _add_generation_routes(app, batcher, served, completions=completions,
                           max_prompt_chars=max_prompt_chars)
    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes)
    return app


def _pick(name: str, served: Mapping[str, Backend]) -> Backend:
    """The backend serving ``name``; an unknown name is a 404."""
    if name not in served:
        close = difflib.get_close_matches(name, list(served), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise APIError(
            404,
            f"The model {name!r} does not exist.{hint} This server serves: "
            + ", ".join(map(repr, served)) + ".",
            param="model",
            code="model_not_found",
        )
    return served[name]


def _add_info_routes(
    app: FastAPI, model_name: str, names: Sequence[str], roots: Mapping[str, str], created: int
) -> None:
    """``GET /health`` and ``GET /v1/models`` (adapters list their base as ``parent``)."""

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name, "models": list(names)}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = []
        for name in names:
            entry: dict[str, Any] = {"id": name, "object": "model", "created": created,
                                     "owned_by": "lumos-gym", "root": roots.get(name, name),
                                     "parent": None if name == model_name else model_name}
            data.append(entry)
        return {"object": "list", "data": data}


def _add_generation_routes(
    app: FastAPI,
    batcher: MicroBatcher,
    served: Mapping[str, Backend],
    *,
    completions: bool,
    max_prompt_chars: int | None,
) -> None:
    """``POST /v1/completions`` (unless ``completions`` is False) and ``/v1/chat/completions``."""

    async def completions_route(body: CompletionBody, request: Request) -> Any:
        view = _pick(body.model, served)
        body.check_supported()
        prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        _check_prompt_size(sum(len(p) for p in prompts), max_prompt_chars)
        results = await _generate(request, batcher, view, _completion_requests(body))
        choices = [
            {"index": i, "text": c.text, "finish_reason": c.stop_reason,
             "logprobs": _completion_logprobs(c) if body.logprobs is not None else None,
             **(_token_ids(c) if body.return_token_ids else {})}
            for i, c in enumerate(results)
        ]
        answer = _answer("cmpl", "text_completion", body.model, choices, results)
        return _stream(answer, body) if body.stream else answer

    if completions:
        app.post("/v1/completions")(completions_route)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatBody, request: Request) -> Any:
        view = _pick(body.model, served)
        body.check_supported()
        size = sum(len(m.as_dict()["content"]) for m in body.messages)
        _check_prompt_size(size, max_prompt_chars)
        results = await _generate(request, batcher, view, [_chat_request(body)])
        choices = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": results[0].text},
                "logprobs": _chat_logprobs(results[0]) if body.logprobs else None,
                "finish_reason": results[0].stop_reason,
                **(_token_ids(results[0]) if body.return_token_ids else {}),
            }
        ]
        answer = _answer("chatcmpl", "chat.completion", body.model, choices, results)
        return _stream(answer, body) if body.stream else answer


def _check_prompt_size(chars: int, limit: int | None) -> None:
    """Refuse (400) a prompt too long to fit, before the worker thread tokenizes it."""
    if limit is not None and chars > limit:
        raise APIError(400, f"the prompt holds {chars:,} characters, more than this server's "
                            f"context could take ({limit:,}); send a shorter prompt",
                       param="prompt", code="context_length_exceeded")


def _stream(answer: dict[str, Any], body: _Body) -> StreamingResponse:
    """``answer`` as server-sent events, as OpenAI's ``stream: true`` sends them.

    The text of each choice arrives in one chunk, once decoding has ended (the backends here
    complete whole batches), then a chunk with its ``finish_reason``; ``stream_options`` with
    ``include_usage`` adds a last chunk with the usage and no choices; ``data: [DONE]`` ends it.
    """
    chat = answer["object"] == "chat.completion"
    kind = "chat.completion.chunk" if chat else "text_completion"
    head = {"id": answer["id"], "object": kind, "created": answer["created"],
            "model": answer["model"]}
    events: list[dict[str, Any]] = []
    for choice in answer["choices"]:
        if chat:
            delta = {"role": "assistant", "content": choice["message"]["content"]}
            first = {"index": choice["index"], "delta": delta, "logprobs": choice["logprobs"],
                     "finish_reason": None}
            last = {"index": choice["index"], "delta": {}, "logprobs": None,
                    "finish_reason": choice["finish_reason"]}
        else:
            first = {"index": choice["index"], "text": choice["text"],
                     "logprobs": choice["logprobs"], "finish_reason": None}
            last = {"index": choice["index"], "text": "", "logprobs": None,
                    "finish_reason": choice["finish_reason"]}
        events += [{**head, "choices": [first]}, {**head, "choices": [last]}]
    if body.stream_options is not None and body.stream_options.include_usage:
        events.append({**head, "choices": [], "usage": answer["usage"]})
    lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return StreamingResponse(iter(lines), media_type="text/event-stream")


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


async def _generate(
    request: Request, batcher: MicroBatcher, view: Backend, requests: list[GenerationRequest]
) -> list[Completion]:
    """Complete ``requests`` on ``view``; stop their work if the HTTP client goes away.

    While the batcher works, the client's connection is watched: a disconnect cancels the
    requests (dropped if still queued, stopped at the next decoding step if running), and the
    call ends with a 499 that no one reads.
    """
    gone = threading.Event()
    watched = [replace(r, cancelled=gone.is_set) for r in requests]
    job = asyncio.ensure_future(batcher.submit(watched, view))
    watch = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({job, watch}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server is shutting down, or the handler was cancelled
        gone.set()
        job.cancel()
        watch.cancel()
        raise
    if not job.done():
        gone.set()
        job.cancel()
        logger.info("the client went away; its %d request(s) were cancelled", len(requests))
        raise APIError(499, "the client closed the request", code="client_closed_request")
    watch.cancel()
    try:
        results = job.result()
    except BackendError as e:
        raise APIError(500, f"the backend failed: {e}") from e
    for result in results:
        if result.stop_reason == "error":
            # the request's own problem (too long, no chat template) is the client's: a 400;
            # the engine's (a request it did not finish) is the server's: a 500
            status = 500 if result.infra else 400
            raise APIError(status, f"the request could not be completed: {result.error}")
    return results


async def _disconnect(request: Request) -> None:
    """Return once the client has disconnected (the body has been read already)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


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


def served_adapters(
    model: str | None,
    *,
    adapter: str | None = None,
    lora_modules: Mapping[str, str] | None = None,
    agent: str | None = None,
) -> tuple[str, str | None, dict[str, str]]:
    """The base model to load, the adapter of the model's own name, and the named adapters.

    Returns:
        ``(base, own, modules)``: ``own`` is the adapter the model's own served name answers
        with (``adapter``, or ``model`` when it is a LoRA folder; ``None``: the plain base),
        ``modules`` the other adapters, served name → folder.

    ``agent`` serves that agent's shipped reference adapters, each under the name
    ``AGENT-ROLE`` (``lumos-i-planner``, ``lumos-i-grounder``), the names the ``openai``
    backend asks for when no model is named. ``lora_modules`` adds adapters by name, as vLLM's
    ``--lora-modules``. ``model`` may be a LoRA output folder (its base is loaded and the model's
    name answers with the folder); left out, it is the base the adapters name.

    Raises:
        BackendError: an agent without shipped adapters, ``adapter`` together with a LoRA
            folder as ``model``, or no base model to be found.
    """
    modules: dict[str, str] = {}
    base: str | None = None
    own = adapter
    if agent is not None:
        found = reference_models(agent)
        if not found:
            shipped = ", ".join(sorted(REFERENCE_AGENTS)) or "none"
            raise BackendError(f"no adapters are shipped for the agent {agent!r} (shipped: "
                               f"{shipped}); serve your own with --lora-modules NAME=FOLDER")
        base = REFERENCE_AGENTS[agent].base_model
        modules.update({served_name(agent, role): path for role, path in found.items()})
    for name, path in (lora_modules or {}).items():
        if name in modules:
            raise BackendError(f"the served name {name!r} is given twice")
        modules[name] = path
    if model is not None:
        named_base, folder = split_model_name(model)
        if folder is not None:
            if adapter is not None:
                raise BackendError(
                    f"{model!r} is an adapter folder; pass its base as --model instead")
            own = folder
            model = named_base
        base = model
    if base is None:
        for path in modules.values():
            recorded, folder = split_model_name(path)
            if folder is not None:
                base = recorded
                break
    if base is None:
        base = "smollm2-135m"
    for name, path in [*modules.items(), *([("(own)", own)] if own else [])]:
        recorded, folder = split_model_name(path)
        if folder is not None and recorded != base:
            logger.warning("the adapter %r (%s) was trained on %r, not on the served base %r",
                           name, path, recorded, base)
    return base, own, modules


def serve(
    model: str | None = None,
    *,
    adapter: str | None = None,
    lora_modules: Mapping[str, str] | None = None,
    agent: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    batch_size: int = 8,
    max_context: int | None = None,
    max_wait_ms: float = 10.0,
    mixed_batches: bool = False,
    chat_only: bool = False,
    api_key: str | None = None,
    insecure: bool = False,
    max_body_mb: float = DEFAULT_MAX_BODY_MB,
    log_level: str = "info",
) -> None:
    """Load a model (and its adapters) with the ``hf`` backend and serve it until interrupted.

    Args:
        model: a Hugging Face model id, a local folder, an alias, or a LoRA folder from
            ``lumos-gym train``; by default the base the adapters name (else SmolLM2-135M).
        adapter: a peft adapter applied to ``model`` under its own name.
        lora_modules: more adapters, served name → folder, all on one copy of the base.
        agent: serve this agent's shipped adapters as ``AGENT-ROLE`` (:func:`served_name`).
        host: the interface to listen on; the default accepts local clients only. Another
            needs ``api_key`` or ``insecure``.
        port: the TCP port.
        served_model_name: the name of the base model (or of ``model``'s adapter) for clients.
        device: the torch device (``"cpu"``, ``"cuda"``, ...); the backend chooses by default.
        dtype: the torch dtype name; the backend chooses by default.
        batch_size: the most requests the model completes at once.
        max_context: the longest prompt plus completion, in tokens.
        max_wait_ms: how long a request waits for others to batch with.
        mixed_batches: batch the requests of different adapters together (peft's mixed-adapter
            rows, as vLLM does); off, each batch call holds one adapter's requests.
        chat_only: offer no ``/v1/completions`` (as chat-only hosted APIs).
        api_key: the bearer token clients must send.
        insecure: serve a non-loopback ``host`` without a key.
        max_body_mb: the largest request body, in MiB.
        log_level: uvicorn's log level.

    Raises:
        BackendError: the port is busy, the address is exposed without a key, or the model
            or an adapter cannot be loaded.
    """
    import socket

    import uvicorn

    from lumos_gym.models.hf import HFBackend  # heavy: torch and transformers

    check_exposure(host, api_key, insecure, "lumos-gym serve")
    base, own, modules = served_adapters(model, adapter=adapter, lora_modules=lora_modules,
                                         agent=agent)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:  # before the model loads: a busy port fails at once
        try:
            probe.bind((host, port))
        except OSError as e:
            message = f"cannot serve on {host}:{port} ({e}); pass another --port"
            raise BackendError(message) from None
    base_name = served_model_name or (model if model is not None else base)
    if base_name in modules:
        raise BackendError(f"{base_name!r} names the base model and an adapter; rename one")
    backend = HFBackend(base, adapter=own, adapters=modules or None, device=device, dtype=dtype,
                        batch_size=batch_size, max_context=max_context,
                        mixed_batches=mixed_batches)
    try:
        app = create_app(
            backend,
            model_name=base_name,
            adapters={name: backend.with_adapter(name) for name in modules},
            adapter_paths={name: str(path) for name, path in modules.items()},
            completions=not chat_only,
            api_key=api_key,
            max_body_bytes=int(max_body_mb * 2**20),
            max_batch_size=batch_size,
            max_wait_s=max_wait_ms / 1000,
        )
        names = ", ".join([base_name, *modules])
        logger.warning("serving %s on http://%s:%d/v1", names, host, port)
        uvicorn.run(app, host=host, port=port, log_level=log_level)
    finally:
        backend.close()
