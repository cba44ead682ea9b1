"""The ``openai`` backend: any OpenAI-compatible server (vLLM, llama.cpp, ``lumos-gym serve``).

Requests travel as plain HTTP through :mod:`httpx`; no vendor SDK is imported. Raw ``prompt``
requests go to ``/v1/completions`` and chat ``messages`` requests to ``/v1/chat/completions``
(see ``mode``). A batch is sent as concurrent requests from a small thread pool, so the server
can batch them on its side, and the completions come back in request order.

Failures follow one rule: transient ones (connection errors, timeouts, HTTP 429 and 5xx) are
retried with exponential backoff and jitter, honouring ``Retry-After``; anything else (HTTP 400,
401, 404, a malformed answer) is final at once. A request that still fails becomes a
``Completion(stop_reason="error")``, so one bad request never takes down a batch; one that
failed for a transient reason through every retry is marked ``infra=True`` (the server or the
connection failed, not the request: the runner records ``infra-error`` and plays the episode
again).
:meth:`OpenAIBackend.health_check` (run at construction unless ``check=False``) fails fast with
one :class:`~lumos_gym.errors.BackendError` when the server is down or does not serve the model.

Token capture (``GenerationRequest.logprobs``): the request asks for the chosen tokens'
log-probabilities and for vLLM's ``return_token_ids``; a server that answers with both (vLLM,
``lumos-gym serve``) gives the completion its :class:`~lumos_gym.models.base.TokenTrace`. A
server that refuses those fields with an HTTP 4xx is asked again without them, and from then
on never with them: its calls carry no trace (the runner leaves them out of ``tokens.jsonl``).
"""

from __future__ import annotations

import difflib
import email.utils
import logging
import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlsplit

try:
    import httpx
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the 'openai' backend needs httpx; install it with: pip install 'lumos-gym[serve]'"
    ) from e

from lumos_gym.errors import BackendError
from lumos_gym.models.base import (
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    StopReason,
    TokenTrace,
    cut_at_stop,
)

logger = logging.getLogger(__name__)

Mode = Literal["completions", "chat", "auto"]
MODES: tuple[str, ...] = ("completions", "chat", "auto")

_COMPLETIONS = "completions"
_CHAT = "chat/completions"
_HEALTH_TIMEOUT_S = 10.0
_CONNECT_TIMEOUT_S = 10.0

TIMEOUT_BASE_S = 60.0
"""The part of the default per-attempt timeout that does not depend on the budget."""
TIMEOUT_PER_TOKEN_S = 1.0
"""The default timeout grows by this many seconds per token of ``max_tokens``: a server on two
loaded CPU cores was measured at about 3 tokens a second for one request, slower in a batch."""

# Transport failures worth another attempt; other httpx errors (a bad URL scheme, a local
# protocol misuse) are final.
_TRANSIENT_TRANSPORT_ERRORS = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)


class _RequestFailed(Exception):
    """One HTTP attempt failed.

    Attributes:
        transient: whether another attempt may succeed.
        retry_after: the delay the server asked for, in seconds, if it asked.
        no_route: the server has no such endpoint (HTTP 404 or 405 not about the model).
    """

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None,
                 no_route: bool = False):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.no_route = no_route


def _key_from_environment(variable: str | None) -> str:
    """The bearer token: ``$variable`` (which must be set), or the first of the usual ones.

    Without ``variable``: ``$OPENAI_API_KEY``, else ``$LUMOS_GYM_API_KEY``, else ``"EMPTY"``.

    Raises:
        ValueError: ``variable`` is named and not set.
    """
    if variable is None:  # lumos-gym serve's own variable next, so one setting serves both
        return (os.environ.get("OPENAI_API_KEY") or os.environ.get("LUMOS_GYM_API_KEY")
                or "EMPTY")
    if not os.environ.get(variable):
        raise ValueError(f"api_key_env names ${variable}, which is not set")
    return os.environ[variable]


class OpenAIBackend(Backend):
    """A model served over an OpenAI-compatible HTTP API.

    Args:
        model: the model name the server knows (``GET /v1/models`` lists them).
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``; a URL without a path gets
            ``/v1`` appended.
        api_key: the bearer token; defaults to the variable ``api_key_env`` names, else
            ``"EMPTY"`` (what local servers expect).
        api_key_env: the environment variable that holds the bearer token (default
            ``OPENAI_API_KEY``); a variable named here must be set. Name it on the command
            line (``--model-args api_key_env=MY_KEY``), never the key itself: the command
            line is recorded with the results.
        mode: ``"auto"`` sends raw prompts to ``/v1/completions`` and chat messages to
            ``/v1/chat/completions``, and once the server answers that it has no completions
            endpoint (HTTP 404 or 405 that is not about the model: a chat-only API), says so
            once and sends every prompt to the chat endpoint; ``"chat"`` sends everything to
            the chat endpoint, a raw prompt as one user message (each Lumos prompt whole, as
            the original sent them to GPT models); ``"completions"`` sends only raw prompts.
        max_concurrency: how many HTTP requests are in flight at once.
        timeout: seconds allowed for each HTTP attempt; by default
            :data:`TIMEOUT_BASE_S` plus :data:`TIMEOUT_PER_TOKEN_S` per token of the request's
            ``max_tokens``. A client that gives up closes its connection, and ``lumos-gym
            serve`` then stops decoding the request.
        max_retries: extra attempts after a transient failure.
        backoff: the first retry delay in seconds; it doubles per attempt, with jitter.
        max_backoff: the longest delay between two attempts, ``Retry-After`` included.
        check: run :meth:`health_check` now, so that a wrong URL or model name fails here
            instead of turning every completion into an error.
        wait: seconds to wait for a server that does not answer yet (one starting: a model
            loading), asking again every half second; 0 (the default) fails at once.

    Raises:
        ValueError: an argument is out of range.
        BackendError: ``check`` is true and the server is unreachable or does not serve
            ``model``.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        api_key_env: str | None = None,
        mode: Mode = "auto",
        max_concurrency: int = 8,
        timeout: float | None = None,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        check: bool = True,
        wait: float = 0.0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1; got {max_concurrency}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive; got {timeout}")
        if wait < 0:
            raise ValueError(f"wait must be 0 or more; got {wait}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more; got {max_retries}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError("backoff and max_backoff must be 0 or more")
        self.model = model
        self.base_url = normalise_base_url(base_url)
        self.mode = mode
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        key = api_key if api_key is not None else _key_from_environment(api_key_env)
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(timeout or TIMEOUT_BASE_S, connect=_CONNECT_TIMEOUT_S),
            limits=httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            ),
        )
        self._rng = random.Random()  # jitter only; never seeds anything else
        self._ask_tokens = True  # False once the server refused the token-capture fields
        self._chat_only = mode == "chat"  # True once an auto-mode server showed it has no
        # completions endpoint
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        if check:
            try:
                self._wait_for_server(wait)
                self.health_check()
            except BackendError:
                self.close()
                raise

    # -- the Backend contract ------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request concurrently; the i-th completion answers the i-th request.

        Raises:
            BackendError: the backend is closed, or ``mode="completions"`` was given a chat
                request (a configuration error, reported before anything is sent).
        """
        if self._closed:
            raise BackendError("the openai backend is closed")
        if self.mode == "completions":
            for i, request in enumerate(requests):
                if request.messages is not None:
                    raise BackendError(
                        f"request {i} holds chat messages, which mode='completions' cannot send;"
                        " use mode='auto' or mode='chat'"
                    )
        if len(requests) <= 1:
            return [self._complete(request) for request in requests]
        return list(self._pool().map(self._complete, requests))

    def info(self) -> BackendInfo:
        """Describe the backend for provenance (the API key is never recorded)."""
        return BackendInfo(
            backend=self.name,
            model_id=self.model,
            details={
                "base_url": self.base_url,
                "mode": self.mode,
                "max_concurrency": self.max_concurrency,
                "timeout": self.timeout if self.timeout is not None else (
                    f"{TIMEOUT_BASE_S:g} s + {TIMEOUT_PER_TOKEN_S:g} s per max_tokens"),
                **({"chat_only_detected": True} if self._chat_only and self.mode == "auto"
                   else {}),
                "max_retries": self.max_retries,
            },
        )

    def close(self) -> None:
        """Stop the worker threads and close the HTTP connections. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- health check --------------------------------------------------------------------------

    def _wait_for_server(self, seconds: float) -> None:
        """Return once the server answers ``GET /models`` at all, or ``seconds`` have passed."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self._client.get(f"{self.base_url}/models", timeout=_HEALTH_TIMEOUT_S)
                return
            except httpx.TransportError:
                time.sleep(0.5)

    def health_check(self) -> list[str]:
        """Check once, without retrying, that the server answers and serves ``self.model``.

        Returns:
            The model names the server lists.

        Raises:
            BackendError: one line naming the problem and its fix: the server is unreachable,
                refuses the key, answers with an error, or does not serve the model.
        """
        url = f"{self.base_url}/models"
        try:
            response = self._client.get(url, timeout=min(self.timeout or _HEALTH_TIMEOUT_S,
                                                          _HEALTH_TIMEOUT_S))
        except httpx.TransportError as e:
            raise BackendError(
                f"cannot reach the OpenAI-compatible server at {self.base_url} "
                f"({type(e).__name__}: {e}); is it running, and is --base-url right?"
            ) from e
        if response.status_code in (401, 403):
            raise BackendError(
                f"the server at {self.base_url} refused the API key (HTTP {response.status_code}:"
                f" {_error_message(response)}); set OPENAI_API_KEY or pass api_key"
            )
        if response.status_code != 200:
            raise BackendError(
                f"GET {url} answered HTTP {response.status_code}: {_error_message(response)}"
                " (a server without /models needs check=False)"
            )
        try:
            served = [str(entry["id"]) for entry in response.json()["data"]]
        except (ValueError, KeyError, TypeError) as e:
            raise BackendError(f"GET {url} did not return an OpenAI model list") from e
        if self.model not in served:
            close = difflib.get_close_matches(self.model, served, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            listed = ", ".join(map(repr, served)) or "none"
            raise BackendError(
                f"model {self.model!r} is not served at {self.base_url}.{hint} Served: {listed}."
            )
        return served

    # -- one request ---------------------------------------------------------------------------

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.max_concurrency, thread_name_prefix="lumos-openai"
                )
            return self._executor

    def _complete(self, request: GenerationRequest) -> Completion:
        endpoint, payload = self._payload(request)
        try:
            try:
                body = self._post_with_retries(endpoint, payload)
            except _RequestFailed as e:
                if endpoint == _COMPLETIONS and e.no_route and self.mode == "auto":
                    self._switch_to_chat(e)
                    return self._complete(request)
                if e.transient or "return_token_ids" not in payload:
                    raise
                # a server that refuses the token fields (OpenAI's own, older ones): ask
                # without them from now on; these calls then carry no token trace
                logger.warning("%s; asking again without token capture", e)
                self._ask_tokens = False
                endpoint, payload = self._payload(request)
                body = self._post_with_retries(endpoint, payload)
        except _RequestFailed as e:  # transient: the server or the connection, not the request
            return Completion(text="", stop_reason="error", model_id=self.model, error=str(e),
                              infra=e.transient)
        completion = self._parse(endpoint, body, request.stop)
        if request.logprobs and completion.stop_reason != "error":
            completion = replace(completion, tokens=_token_trace(endpoint, body))
        return completion

    def _payload(self, request: GenerationRequest) -> tuple[str, dict[str, Any]]:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_new_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if request.stop:
            payload["stop"] = list(request.stop)
        chat = request.messages is not None or self._chat_only
        if request.logprobs and self._ask_tokens:
            # the chosen tokens' log-probabilities, and vLLM's prompt and completion token ids
            payload.update({"logprobs": True, "top_logprobs": 0} if chat else {"logprobs": 0})
            payload["return_token_ids"] = True
        if request.messages is not None:
            payload["messages"] = [dict(message) for message in request.messages]
            return _CHAT, payload
        if chat:
            payload["messages"] = [{"role": "user", "content": request.prompt}]
            return _CHAT, payload
        payload["prompt"] = request.prompt
        return _COMPLETIONS, payload

    def _post_with_retries(self, endpoint: str, payload: Mapping[str, Any]) -> Any:
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                return self._post_once(endpoint, payload)
            except _RequestFailed as e:
                if not e.transient:
                    raise
                if attempt + 1 == attempts:
                    raise _RequestFailed(
                        f"{e} (gave up after {attempts} attempts)", transient=True
                    ) from e
                delay = self._retry_delay(attempt, e.retry_after)
                logger.warning(
                    "%s; attempt %d of %d, retrying in %.2fs", e, attempt + 1, attempts, delay
                )
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _switch_to_chat(self, failure: _RequestFailed) -> None:
        """Send every prompt to the chat endpoint from now on; say so once."""
        with self._lock:
            if self._chat_only:
                return
            self._chat_only = True
        logger.warning(
            "%s: the server at %s offers no completions endpoint; sending every prompt as one "
            "user message to /chat/completions from now on (mode='auto')", failure,
            self.base_url)

    def request_timeout(self, max_tokens: int) -> float:
        """Seconds one HTTP attempt may take for a request of ``max_tokens``."""
        if self.timeout is not None:
            return self.timeout
        return TIMEOUT_BASE_S + TIMEOUT_PER_TOKEN_S * max_tokens

    def _post_once(self, endpoint: str, payload: Mapping[str, Any]) -> Any:
        url = f"{self.base_url}/{endpoint}"
        seconds = self.request_timeout(int(payload.get("max_tokens") or 0))
        try:
            response = self._client.post(
                url, json=payload, timeout=httpx.Timeout(seconds, connect=_CONNECT_TIMEOUT_S))
        except httpx.TimeoutException as e:
            raise _RequestFailed(
                f"POST {url} timed out after {seconds:g}s ({type(e).__name__})", transient=True
            ) from e
        except httpx.TransportError as e:
            raise _RequestFailed(
                f"POST {url} failed: {type(e).__name__}: {e}",
                transient=isinstance(e, _TRANSIENT_TRANSPORT_ERRORS),
            ) from e
        status = response.status_code
        if 200 <= status < 300:
            try:
                return response.json()
            except ValueError as e:
                raise _RequestFailed(
                    f"POST {url} answered HTTP {status} with invalid JSON", transient=False
                ) from e
        transient = status == 429 or status >= 500
        raise _RequestFailed(
            f"POST {url} answered HTTP {status}: {_error_message(response)}",
            transient=transient,
            retry_after=retry_after_seconds(response.headers) if transient else None,
            no_route=_no_completions_route(response),
        )

    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter in [delay/2, delay], at least ``Retry-After``."""
        delay = self.backoff * 2**attempt
        delay *= 0.5 + 0.5 * self._rng.random()
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_backoff)

    def _parse(self, endpoint: str, body: Any, stop: Sequence[str]) -> Completion:
        try:
            choice = body["choices"][0]
            if endpoint == _CHAT:
                text = choice["message"].get("content") or ""
            else:
                text = choice["text"]
            finish_reason = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            return Completion(
                text="",
                stop_reason="error",
                model_id=self.model,
                error=f"malformed answer from {self.base_url}/{endpoint}: no {e}",
            )
        text, was_cut = cut_at_stop(str(text), stop)
        stop_reason: StopReason = "stop" if was_cut else _stop_reason(finish_reason)
        usage = body.get("usage") or {}
        return Completion(
            text=text,
            stop_reason=stop_reason,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            model_id=str(body.get("model") or self.model),
        )


def _token_trace(endpoint: str, body: Any) -> TokenTrace | None:
    """The call's token trace from an answer with log-probabilities and token ids, if whole.

    The ids come from vLLM's ``return_token_ids`` fields (``token_ids`` on the choice,
    ``prompt_token_ids`` on the choice or the answer), the log-probabilities from the choice's
    ``logprobs`` (``token_logprobs`` of a completion, ``content[].logprob`` of a chat answer).
    ``None`` when any of them is missing or they do not line up.
    """
    try:
        choice = body["choices"][0]
        ids = choice.get("token_ids")
        prompt = choice.get("prompt_token_ids")
        if prompt is None:
            prompt = body.get("prompt_token_ids")
        found = choice.get("logprobs") or {}
        if endpoint == _CHAT:
            values = [entry.get("logprob") for entry in found.get("content") or []]
        else:
            values = list(found.get("token_logprobs") or [])
        if not ids or prompt is None or len(values) != len(ids) or None in values:
            return None
        return TokenTrace(tuple(int(t) for t in prompt), tuple(int(t) for t in ids),
                          tuple(float(v) for v in values))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def normalise_base_url(base_url: str) -> str:
    """Strip trailing slashes and append ``/v1`` to a URL that has no path.

    Raises:
        ValueError: the URL is not ``http://`` or ``https://``.
    """
    url = base_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base_url must look like http://host:port/v1; got {base_url!r}")
    return url if parts.path else f"{url}/v1"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Read the delay a server asked for, in seconds.

    ``retry-after-ms`` wins over ``Retry-After``, which is a number of seconds or an HTTP date.

    Returns:
        The delay, or ``None`` when the headers name none (or one that cannot be read).
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _stop_reason(finish_reason: object) -> StopReason:
    # "length" is the only way a budget runs out; "stop", "eos", "content_filter", "tool_calls"
    # and a missing value all mean the model (or the server) ended the text.
    return "length" if finish_reason == "length" else "stop"


_NO_ROUTE = re.compile(r"not found|not supported|chat model|no such|unknown (url|route|path)",
                       re.IGNORECASE)


def _no_completions_route(response: httpx.Response) -> bool:
    """Whether an error answer says the server has no completions endpoint.

    A 405, or a 404 whose message reads as a missing route (``Not Found``, OpenAI's "This is a
    chat model and not supported in the v1/completions endpoint") and whose code is not
    ``model_not_found`` (vLLM's and ``lumos-gym serve``'s answer for an unknown model).
    """
    if response.status_code == 405:
        return True
    if response.status_code != 404 or _error_code(response) == "model_not_found":
        return False
    return bool(_NO_ROUTE.search(_error_message(response)))


def _error_code(response: httpx.Response) -> str | None:
    """The ``code`` of an OpenAI-style error answer, if it has one."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return str(error.get("code")) if isinstance(error, dict) and error.get("code") else None


def _error_message(response: httpx.Response) -> str:
    """The message of an OpenAI-style error answer, or the start of its body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail"))
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if error:
            return str(error)
    return str(body)[:200]
