"""The ``openai`` backend and ``lumos-gym serve``, over real HTTP on 127.0.0.1.

Every server here runs in uvicorn on a background thread, on a socket the test binds itself
(port 0, so no port is ever guessed), and is shut down and joined before its test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from lumos_gym.errors import BackendError
from lumos_gym.models.base import Backend, BackendInfo, Completion, GenerationRequest
from lumos_gym.models.openai_backend import (
    OpenAIBackend,
    cut_at_stop,
    normalise_base_url,
    retry_after_seconds,
)
from lumos_gym.models.serve import create_app

MODEL = "echo-model"


# -- helpers ---------------------------------------------------------------------------------------
class EchoBackend(Backend):
    """A deterministic stand-in model, for testing the HTTP layer only.

    It answers ``" <PROMPT IN CAPITALS> END tail"`` (the last message for chat), cut before
    the first stop string, and sleeps a little per call so that concurrent requests pile up.
    """

    name = "echo"

    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s
        self.calls: list[int] = []
        self.fail_with: Exception | None = None

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.calls.append(len(requests))
        time.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        return [self._one(request) for request in requests]

    def _one(self, request: GenerationRequest) -> Completion:
        source = request.prompt if request.prompt is not None else request.messages[-1]["content"]
        text, cut = cut_at_stop(f" {source.upper()} END tail", request.stop)
        words = len(text.split())
        length = words > request.max_new_tokens
        return Completion(
            text=" ".join(text.split()[: request.max_new_tokens]) if length else text,
            stop_reason="length" if length else "stop",
            input_tokens=len(source.split()),
            output_tokens=min(words, request.max_new_tokens),
            model_id=MODEL,
        )

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id=MODEL)


@contextlib.contextmanager
def running(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` on a fresh 127.0.0.1 port in a thread; yield its URL; stop and join."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(200):  # at most ~5 s
            if server.started or not thread.is_alive():
                break
            time.sleep(0.025)
        if not server.started:
            raise RuntimeError("the test server did not start within 5 s")
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "the test server did not stop"


def scripted_app(script: Sequence[tuple[int, dict[str, Any], dict[str, str]]]) -> FastAPI:
    """An app whose i-th POST answers ``script[i]`` (status, JSON body, headers).

    ``app.state.calls`` counts the POSTs; the last entry repeats once the script runs out.
    """
    app = FastAPI()
    app.state.calls = 0
    app.state.bodies = []

    async def answer(request: Request) -> JSONResponse:
        app.state.bodies.append(await request.json())
        status, body, headers = script[min(app.state.calls, len(script) - 1)]
        app.state.calls += 1
        return JSONResponse(body, status_code=status, headers=headers)

    app.add_api_route("/v1/completions", answer, methods=["POST"])
    app.add_api_route("/v1/chat/completions", answer, methods=["POST"])
    return app


def completion_body(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "text": text, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def client(url: str, **kwargs: Any) -> OpenAIBackend:
    options: dict[str, Any] = {"timeout": 10.0, "backoff": 0.01, "check": False}
    return OpenAIBackend(MODEL, base_url=f"{url}/v1", **(options | kwargs))


def prompt(text: str, **kwargs: Any) -> GenerationRequest:
    return GenerationRequest(prompt=text, **kwargs)


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[str, FastAPI, EchoBackend]]:
    backend = EchoBackend()
    app = create_app(backend, model_name=MODEL, max_batch_size=8, max_wait_s=0.01)
    with running(app) as url:
        yield url, app, backend


# -- our backend against our server ----------------------------------------------------------------
def test_completion_round_trip(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    with client(url, check=True) as backend:
        [completion] = backend.generate([prompt("hello world", max_new_tokens=10)])
    assert completion == Completion(
        text=" HELLO WORLD END tail",
        stop_reason="stop",
        input_tokens=2,
        output_tokens=4,
        model_id=MODEL,
    )


def test_chat_round_trip(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"})
    with client(url) as backend:
        [completion] = backend.generate([GenerationRequest(messages=messages, stop=("tail",))])
    assert completion.text == " HI THERE END "
    assert completion.stop_reason == "stop"
    assert completion.error is None


def test_stop_strings_and_length(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    with client(url) as backend:
        stopped, short = backend.generate(
            [prompt("a b", stop=("nothing", "END")), prompt("one two three", max_new_tokens=2)]
        )
    assert (stopped.text, stopped.stop_reason) == (" A B ", "stop")
    assert (short.text, short.stop_reason, short.output_tokens) == ("ONE TWO", "length", 2)


def test_concurrent_batch_keeps_order_and_is_batched_by_the_server(
    echo: tuple[str, FastAPI, EchoBackend],
) -> None:
    url, app, backend_model = echo
    app.state.batcher.batch_sizes.clear()
    calls_before = len(backend_model.calls)
    requests = [prompt(f"item {i}") for i in range(20)]
    with client(url, max_concurrency=8) as backend:
        completions = backend.generate(requests)
    assert [c.text for c in completions] == [f" ITEM {i} END tail" for i in range(20)]
    sizes = app.state.batcher.batch_sizes
    assert sum(size * count for size, count in sizes.items()) == 20
    assert max(sizes) > 1, sizes
    assert len(backend_model.calls) - calls_before < 20


def test_chat_mode_sends_a_prompt_as_one_user_message(
    echo: tuple[str, FastAPI, EchoBackend],
) -> None:
    url, _, _ = echo
    with client(url, mode="chat") as backend:
        [completion] = backend.generate([prompt("as chat", stop=("END",))])
    assert completion.text == " AS CHAT "


def test_completions_mode_refuses_chat_requests(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    chat = GenerationRequest(messages=({"role": "user", "content": "x"},))
    with client(url, mode="completions") as backend, pytest.raises(BackendError, match="mode="):
        backend.generate([prompt("fine"), chat])


def test_unknown_model_fails_fast_and_clearly(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    with pytest.raises(
        BackendError, match=r"'echo-modle' is not served.*Did you mean 'echo-model'"
    ):
        OpenAIBackend("echo-modle", base_url=url)  # no /v1: appended
    # Without the check, a 404 is final at once: an error completion, no retry.
    with OpenAIBackend("echo-modle", base_url=url, check=False, backoff=5) as backend:
        [completion] = backend.generate([prompt("x")])
    assert completion.stop_reason == "error"
    assert "HTTP 404" in completion.error and "does not exist" in completion.error
    assert "attempts" not in completion.error  # a retried failure says "gave up after N attempts"


def test_backend_failure_is_a_500_and_an_error_completion(
    echo: tuple[str, FastAPI, EchoBackend],
) -> None:
    url, _, backend_model = echo
    backend_model.fail_with = RuntimeError("CUDA out of memory")
    try:
        response = httpx.post(
            f"{url}/v1/completions", json={"model": MODEL, "prompt": "x"}, timeout=5
        )
        with client(url, max_retries=1) as backend:
            [completion] = backend.generate([prompt("x")])
    finally:
        backend_model.fail_with = None
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"
    assert "RuntimeError: CUDA out of memory" in response.json()["error"]["message"]
    assert completion.stop_reason == "error"
    assert "CUDA out of memory" in completion.error and "2 attempts" in completion.error


# -- the server's validation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "body", "status", "param"),
    [
        ("/v1/completions", {"model": MODEL, "prompt": "x", "n": 2}, 400, "n"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "seed": 2**70}, 400, "seed"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "logprobs": 3}, 400, "logprobs"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ("/v1/completions", {"model": MODEL, "prompt": []}, 400, "prompt"),
        ("/v1/completions", {"model": MODEL}, 400, "prompt"),
        ("/v1/completions", {"model": "gpt-4", "prompt": "x"}, 404, "model"),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
        ("/v1/chat/completions", {"model": MODEL, "prompt": "x"}, 400, "messages"),
        (
            "/v1/chat/completions",
            {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]},
            400,
            "messages",
        ),
        ("/v1/chat/completions", {"model": "other", "messages": [{"role": "user"}]}, 400, None),
        ("/v1/nowhere", {}, 404, None),
    ],
)
def test_bad_requests_get_openai_style_errors(
    echo: tuple[str, FastAPI, EchoBackend],
    path: str,
    body: dict[str, Any],
    status: int,
    param: str | None,
) -> None:
    url, _, _ = echo
    response = httpx.post(f"{url}{path}", json=body, timeout=5)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "code"}
    assert error["message"]
    if param is not None:
        assert error["param"] == param


def test_health_models_and_prompt_lists(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    assert httpx.get(f"{url}/health", timeout=5).json()["status"] == "ok"
    models = httpx.get(f"{url}/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    answer = httpx.post(
        f"{url}/v1/completions",
        json={"model": MODEL, "prompt": ["a", "b c"], "stop": "END", "temperature": 0},
        timeout=5,
    ).json()
    assert answer["object"] == "text_completion"
    assert [c["text"] for c in answer["choices"]] == [" A ", " B C "]
    assert [c["index"] for c in answer["choices"]] == [0, 1]
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


# -- the official openai client against our server -------------------------------------------------
def test_official_openai_client(echo: tuple[str, FastAPI, EchoBackend]) -> None:
    url, _, _ = echo
    with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=10) as sdk:
        assert [m.id for m in sdk.models.list()] == [MODEL]
        completion = sdk.completions.create(
            model=MODEL, prompt="open ai", max_tokens=8, temperature=0, stop=["END"], seed=1
        )
        assert completion.choices[0].text == " OPEN AI "
        assert completion.choices[0].finish_reason == "stop"
        assert completion.usage is not None and completion.usage.prompt_tokens == 2
        chat = sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "chat here"}],
            max_tokens=8,
            temperature=0,
        )
        assert chat.choices[0].message.role == "assistant"
        assert chat.choices[0].message.content == " CHAT HERE END tail"
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            sdk.completions.create(model="nope", prompt="x")
        with pytest.raises(openai.BadRequestError, match="n=2 is not supported"):
            sdk.completions.create(model=MODEL, prompt="x", n=2)


# -- retries and failures --------------------------------------------------------------------------
def test_503_is_retried_until_it_succeeds() -> None:
    unavailable = (503, error_body("warming up"), {"Retry-After": "0"})
    ok = (200, completion_body("42 Observation: more", finish_reason="length"), {})
    app = scripted_app([unavailable, unavailable, ok])
    with running(app) as url, client(url, max_retries=4) as backend:
        [completion] = backend.generate([prompt("x", stop=("Observation:",), seed=7)])
    assert app.state.calls == 3
    # The server ignored the stop string: it is cut client-side, and that is a stop.
    assert completion == Completion(
        text="42 ", stop_reason="stop", input_tokens=3, output_tokens=4, model_id=MODEL
    )
    sent = app.state.bodies[0]
    assert sent == {
        "model": MODEL,
        "prompt": "x",
        "max_tokens": 256,
        "temperature": 0.0,
        "seed": 7,
        "stop": ["Observation:"],
    }


def test_429_and_500_are_retried_until_the_budget_runs_out() -> None:
    app = scripted_app([(429, error_body("slow down"), {}), (500, {"detail": "boom"}, {})])
    with running(app) as url, client(url, max_retries=2) as backend:
        [completion] = backend.generate([prompt("x")])
    assert app.state.calls == 3
    assert completion.stop_reason == "error"
    assert "HTTP 500: boom" in completion.error and "3 attempts" in completion.error


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    app = scripted_app([(status, error_body("your request is wrong"), {})])
    with running(app) as url, client(url, max_retries=4, backoff=5) as backend:
        good, bad = backend.generate([prompt("a"), prompt("b")])
    assert app.state.calls == 2  # one per request, never a second attempt
    for completion in (good, bad):
        assert completion.stop_reason == "error"
        assert f"HTTP {status}: your request is wrong" in completion.error


def test_one_bad_request_does_not_take_down_the_batch() -> None:
    app = FastAPI()

    @app.post("/v1/completions")
    async def answer(request: Request) -> JSONResponse:
        body = await request.json()
        if body["prompt"] == "bad":
            return JSONResponse(error_body("prompt too long"), status_code=400)
        return JSONResponse(completion_body(body["prompt"] + "!"))

    with running(app) as url, client(url) as backend:
        completions = backend.generate([prompt("a"), prompt("bad"), prompt("c")])
    assert [c.stop_reason for c in completions] == ["stop", "error", "stop"]
    assert [c.text for c in completions] == ["a!", "", "c!"]
    assert "prompt too long" in completions[1].error


def test_malformed_answer_is_an_error_not_a_crash() -> None:
    app = scripted_app([(200, {"choices": []}, {})])
    with running(app) as url, client(url) as backend:
        [completion] = backend.generate([prompt("x")])
    assert app.state.calls == 1
    assert completion.stop_reason == "error" and "malformed" in completion.error


def test_timeouts_are_retried_then_reported() -> None:
    app = FastAPI()
    app.state.calls = 0

    @app.post("/v1/completions")
    async def slow() -> dict[str, str]:
        app.state.calls += 1
        await asyncio.sleep(0.6)
        return {}

    with running(app) as url, client(url, timeout=0.1, max_retries=1) as backend:
        [completion] = backend.generate([prompt("x")])
    assert app.state.calls == 2
    assert completion.stop_reason == "error" and "timed out" in completion.error


def test_unreachable_server_fails_fast() -> None:
    # A bound socket that never listens: connections to it are refused, and no other process
    # can take the port while the test runs.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(BackendError, match="cannot reach the OpenAI-compatible server"):
            OpenAIBackend(MODEL, base_url=f"{url}/v1", timeout=2)
        with client(url, max_retries=2) as backend:
            [completion] = backend.generate([prompt("x")])
    assert completion.stop_reason == "error"
    assert "ConnectError" in completion.error and "3 attempts" in completion.error


def test_health_check_reports_a_refused_key() -> None:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse(error_body("Incorrect API key provided"), status_code=401)

    with running(app) as url, pytest.raises(BackendError, match="refused the API key"):
        OpenAIBackend(MODEL, base_url=f"{url}/v1", api_key="wrong")


# -- small pieces ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
        ("https://host/openai/v1", "https://host/openai/v1"),
    ],
)
def test_normalise_base_url(given: str, expected: str) -> None:
    assert normalise_base_url(given) == expected


@pytest.mark.parametrize("bad", ["127.0.0.1:8000", "ftp://host/v1", "http://"])
def test_bad_base_url_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIBackend(MODEL, base_url=bad, check=False)


def test_cut_at_stop_takes_the_earliest() -> None:
    assert cut_at_stop("a STOP b END", ["END", "STOP"]) == ("a ", True)
    assert cut_at_stop("no stop here", ["END", ""]) == ("no stop here", False)


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_retry_delay_honours_retry_after_and_the_cap() -> None:
    backend = OpenAIBackend(MODEL, base_url="http://127.0.0.1:1", check=False, backoff=1)
    try:
        delays = [backend._retry_delay(attempt, None) for attempt in range(4)]
        for attempt, delay in enumerate(delays):
            assert 2**attempt / 2 <= delay <= 2**attempt
        assert backend._retry_delay(0, 7.0) == 7.0
        assert backend._retry_delay(0, 600.0) == backend.max_backoff
    finally:
        backend.close()


def test_info_records_no_secret() -> None:
    backend = OpenAIBackend(
        MODEL, base_url="http://127.0.0.1:1/v1", api_key="sk-secret", check=False
    )
    backend.close()
    backend.close()  # idempotent
    info = backend.info()
    assert (info.backend, info.model_id) == ("openai", MODEL)
    assert "sk-secret" not in repr(info)
    with pytest.raises(BackendError, match="closed"):
        backend.generate([prompt("x")])


def test_no_server_thread_is_left_behind() -> None:
    before = {t.ident for t in threading.enumerate()}
    with running(create_app(EchoBackend(), model_name=MODEL)) as url, client(url) as backend:
        assert backend.generate([prompt("x")])[0].stop_reason == "stop"
    leftover = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert leftover == []


def test_serve_on_a_busy_port_fails_before_loading_the_model(loopback_server, monkeypatch):
    from lumos_gym.models import hf
    from lumos_gym.models.serve import serve

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the port was checked")

    monkeypatch.setattr(hf, "HFBackend", no_model)
    port, _ = loopback_server
    with pytest.raises(BackendError, match=f"cannot serve on 127.0.0.1:{port} .*another --port"):
        serve("smollm2-135m", host="127.0.0.1", port=port)


# -- token capture ---------------------------------------------------------------------------------
def test_token_traces_through_the_server_equal_the_backends_own(tmp_path) -> None:
    pytest.importorskip("torch", reason="the hf backend needs torch")
    from conftest import save_tiny_model

    from lumos_gym.models.hf import HFBackend

    folder = save_tiny_model(tmp_path / "tiny")
    requests = [
        prompt("the planner", max_new_tokens=8, logprobs=True),
        prompt("Subgoal 1:", max_new_tokens=6, temperature=0.8, seed=2, logprobs=True),
        GenerationRequest(messages=({"role": "user", "content": "hi"},), max_new_tokens=5,
                          logprobs=True),
    ]
    with HFBackend(str(folder), device="cpu") as hf:
        expected = hf.generate(requests)
        app = create_app(hf, model_name=MODEL, max_batch_size=4, max_wait_s=0.01)
        with running(app) as url, client(url) as backend:
            got = backend.generate(requests)
            plain = backend.generate([prompt("the planner", max_new_tokens=8)])[0]
    for a, b in zip(got, expected, strict=True):
        assert a.text == b.text and a.tokens is not None and b.tokens is not None
        assert a.tokens.prompt_ids == b.tokens.prompt_ids
        assert a.tokens.completion_ids == b.tokens.completion_ids
        pairs = zip(a.tokens.logprobs, b.tokens.logprobs, strict=True)
        assert max(abs(x - y) for x, y in pairs) < 1e-4
    assert plain.tokens is None and plain.text == got[0].text
    bodies = []
    with running(app := scripted_app([(200, completion_body(" ok"), {})])) as url:
        with client(url) as backend:
            [completion] = backend.generate([prompt("x", logprobs=True)])
        bodies = app.state.bodies
    assert bodies[0]["logprobs"] == 0 and bodies[0]["return_token_ids"] is True
    assert completion.text == " ok" and completion.tokens is None  # the server gave no ids


def test_a_server_that_refuses_the_token_fields_is_asked_again_without_them() -> None:
    refusal = error_body("Unrecognized request argument supplied: return_token_ids")
    app = scripted_app([(400, refusal, {}), (200, completion_body(" fine"), {})])
    with running(app) as url, client(url) as backend:
        [first] = backend.generate([prompt("x", logprobs=True)])
        [second] = backend.generate([prompt("y", logprobs=True)])
    assert first.text == " fine" and first.tokens is None and second.text == " fine"
    assert "return_token_ids" in app.state.bodies[0]
    assert all("return_token_ids" not in body and "logprobs" not in body
               for body in app.state.bodies[1:])
    assert app.state.calls == 3
