"""Servers safe to expose: the API key, the body size limit and the loopback rule.

:class:`lumos_gym.asgi.Guard` is tried on a tiny ASGI app served by ``ThreadedServer`` (the app
records what reaches it, so a test sees whether a body was read), then on the real servers:
``serve-env`` (with ``lumos/remote`` and plain HTTP as clients) and ``serve-tools`` over
streamable HTTP (with the ``mcp`` package's client). The command lines are run as the user
runs them: a bad port, size or exposed host is one error line and status 2.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import gymnasium as gym
import httpx
import pytest

import lumos_gym  # noqa: F401  (registers the lumos/* ids)
from lumos_gym.asgi import Guard, ThreadedServer, api_key_from, check_exposure
from lumos_gym.cli import main
from lumos_gym.envs.remote import RemoteEnvError
from lumos_gym.errors import LumosGymError

KEY = "s3cret-key"
LIMIT = 2**20  # 1 MiB
BEARER = {"Authorization": f"Bearer {KEY}"}
BEARER_HEADERS = [(b"authorization", f"Bearer {KEY}".encode())]


class Recorder:
    """A tiny ASGI app: answers the number of body bytes it read; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.read: list[int] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        self.calls.append((scope["type"], scope["path"]))
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            message = await receive()
            await send({"type": "websocket.send", "text": f"echo {message.get('text')}"})
            await send({"type": "websocket.close", "code": 1000})
            return
        read = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            read += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        self.read.append(read)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": str(read).encode()})


@pytest.fixture
def guarded():
    """A Recorder behind a Guard with KEY and a 1 MiB limit, served on a free loopback port."""
    app = Recorder()
    with ThreadedServer(Guard(app, api_key=KEY, max_body_bytes=LIMIT), name="guarded app",
                        lifespan="on") as server:
        yield app, server.base_url


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["param"] is None
    return body["error"]


# ------------------------------------------------------------------------------ the API key
def test_every_route_but_health_needs_the_key(guarded):
    app, url = guarded
    missing = httpx.get(f"{url}/anything")
    assert missing.status_code == 401
    assert error_of(missing)["type"] == "authentication_error"
    assert error_of(missing)["code"] == "invalid_api_key"
    assert "Authorization: Bearer" in error_of(missing)["message"]
    wrong = httpx.post(f"{url}/anything", headers={"Authorization": "Bearer nope"}, content=b"x")
    assert wrong.status_code == 401 and error_of(wrong)["message"] == "wrong API key"
    assert httpx.get(f"{url}/anything", headers={"X-API-Key": "nope"}).status_code == 401
    assert app.calls == []  # nothing unauthenticated reached the app
    assert httpx.post(f"{url}/anything", headers=BEARER, content=b"abc").text == "3"
    assert httpx.get(f"{url}/anything", headers={"Authorization": f"bearer {KEY}"}).is_success
    assert httpx.get(f"{url}/anything", headers={"X-API-Key": KEY}).is_success
    assert httpx.get(f"{url}/health").is_success
    assert app.calls == [("http", "/anything")] * 3 + [("http", "/health")]


def test_a_websocket_handshake_without_the_key_is_refused(guarded):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    app, url = guarded
    ws_url = url.replace("http://", "ws://") + "/ws"
    for headers in ({}, {"Authorization": "Bearer nope"}):
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url, additional_headers=headers, proxy=None, open_timeout=10)
        assert refused.value.response.status_code == 403  # closed with 1008 before accept
    assert app.calls == []
    with connect(ws_url, additional_headers=BEARER, proxy=None, open_timeout=10) as ws:
        ws.send("hi")
        assert ws.recv(timeout=10) == "echo hi"
    assert app.calls == [("websocket", "/ws")]


def test_without_a_key_everything_passes():
    app = Recorder()
    with ThreadedServer(Guard(app, api_key=None, max_body_bytes=LIMIT)) as server:
        assert httpx.post(f"{server.base_url}/x", content=b"abcd").text == "4"
    assert app.calls == [("http", "/x")]


# ---------------------------------------------------------------------------- the body size
def test_a_50_mb_body_is_refused_with_413_before_the_app_reads_it(guarded):
    app, url = guarded
    response = httpx.post(f"{url}/upload", headers=BEARER, content=b"x" * (50 * 2**20),
                          timeout=60)
    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "request_too_large" and "1 MiB" in error["message"]
    assert response.headers["connection"] == "close"
    assert app.calls == [] and app.read == []  # refused from Content-Length: the app never ran
    assert httpx.post(f"{url}/upload", headers=BEARER, content=b"x" * LIMIT).text == str(LIMIT)


def test_a_chunked_body_is_cut_once_it_passes_the_limit(guarded):
    app, url = guarded
    sent, chunk, total = 0, b"y" * 65536, 1024

    def chunks():  # no Content-Length: the body comes chunked, 64 MiB if all of it is sent
        nonlocal sent
        for _ in range(total):
            sent += 1
            yield chunk

    response = httpx.post(f"{url}/upload", headers=BEARER, content=chunks(), timeout=60)
    assert response.status_code == 413 and error_of(response)["code"] == "request_too_large"
    assert app.calls == [("http", "/upload")]
    assert app.read[0] <= LIMIT  # what reached the app: never past the limit
    assert sent < total  # the server answered and closed: the client stopped sending


def run_guard(guard: Guard, scope: dict, messages: list[dict]) -> list[dict]:
    """Call ``guard`` directly with ``scope`` and ``messages``; return what it sent."""
    sent: list[dict] = []
    incoming = iter(messages)

    async def receive():
        return next(incoming, {"type": "http.disconnect"})

    async def send(message):
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    return sent


@pytest.mark.parametrize("length", [b"ten", b"-5", b"5, 6", b"1e3", b""])
def test_a_malformed_content_length_is_400(length):
    app = Recorder()
    guard = Guard(app, api_key=None, max_body_bytes=LIMIT)
    scope = {"type": "http", "path": "/x", "headers": [(b"content-length", length)]}
    sent = run_guard(guard, scope, [{"type": "http.request", "body": b"abc"}])
    assert sent[0]["status"] == 400 and b"invalid_content_length" in sent[1]["body"]
    assert app.calls == []


def test_lifespan_events_pass_through_and_sizes_are_checked():
    app = Recorder()
    guard = Guard(app, api_key=KEY, max_body_bytes=LIMIT)
    sent = run_guard(guard, {"type": "lifespan"},
                     [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    assert [m["type"] for m in sent] == ["lifespan.startup.complete",
                                         "lifespan.shutdown.complete"]
    repeated = {"type": "http", "path": "/x", "headers": [
        *BEARER_HEADERS, (b"content-length", b"3, 3")]}
    sent = run_guard(guard, repeated, [{"type": "http.request", "body": b"abc"}])
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"3"
    with pytest.raises(LumosGymError, match="at least 1"):
        Guard(app, api_key=None, max_body_bytes=0)



# -------------------------------------------------------------------------- the loopback rule
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.com", ""])
def test_an_exposed_host_needs_a_key_or_insecure(host, caplog):
    with pytest.raises(LumosGymError) as refused:
        check_exposure(host, None, False, "lumos-gym serve-env")
    message = str(refused.value)
    assert "\n" not in message
    assert all(word in message for word in ("--api-key", "$LUMOS_GYM_API_KEY", "--insecure"))
    check_exposure(host, KEY, False, "lumos-gym serve-env")
    with caplog.at_level(logging.WARNING, logger="lumos_gym.asgi"):
        check_exposure(host, None, True, "lumos-gym serve-env")
    assert "anyone who can reach the port can run code" in caplog.text


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost",
                                  "LOCALHOST", "::ffff:127.0.0.1"])
def test_a_loopback_host_needs_no_key(host, caplog):
    with caplog.at_level(logging.WARNING, logger="lumos_gym.asgi"):
        check_exposure(host, None, False, "x")
        check_exposure(host, None, True, "x")
    assert caplog.text == ""


def test_the_key_comes_from_the_flag_else_the_variable(monkeypatch):
    monkeypatch.delenv("LUMOS_GYM_API_KEY", raising=False)
    assert api_key_from(None) is None and api_key_from("") is None
    assert api_key_from(" flag ") == "flag"
    monkeypatch.setenv("LUMOS_GYM_API_KEY", "from-env")
    assert api_key_from(None) == "from-env" and api_key_from("") == "from-env"
    assert api_key_from("flag") == "flag"
    monkeypatch.setenv("LUMOS_GYM_API_KEY", "  ")
    assert api_key_from(None) is None
    monkeypatch.setenv("MY_KEY", "mine")
    assert api_key_from(None, env_var="MY_KEY") == "mine"
    with pytest.raises(LumosGymError, match="printable ASCII"):
        api_key_from("kéy")


# ---------------------------------------------------------------------------- the commands
def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lumos_gym.cli", *args], capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "LUMOS_GYM_API_KEY": ""})


def one_line(done: subprocess.CompletedProcess[str], verb: str) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"lumos-gym {verb}: error: "), done.stderr
    return done.stderr


@pytest.mark.parametrize("verb", ["serve-env", "serve-tools"])
def test_an_exposed_server_without_a_key_is_refused_in_one_line(verb):
    args = ["lumos/GSM8K-v0"] if verb == "serve-env" else ["--transport", "http"]
    err = one_line(run_cli(verb, *args, "--host", "0.0.0.0", "--port", "0"), verb)
    assert "--api-key" in err and "--insecure" in err and "$LUMOS_GYM_API_KEY" in err


def test_a_port_out_of_range_is_one_line():
    err = one_line(run_cli("serve-env", "lumos/GSM8K-v0", "--port", "99999"), "serve-env")
    assert "--port" in err and "0 to 65535" in err


@pytest.mark.parametrize("verb, args", [
    ("serve-env", ["lumos/GSM8K-v0", "--port", "-1"]),
    ("serve-env", ["lumos/GSM8K-v0", "--port", "http"]),
    ("serve-env", ["lumos/GSM8K-v0", "--max-body-mb", "0"]),
    ("serve-env", ["lumos/GSM8K-v0", "--max-body-mb", "nan"]),
    ("serve-env", ["lumos/GSM8K-v0", "--max-body-mb", "1e9"]),
    ("serve-tools", ["--port", "65536"]),
    ("serve-tools", ["--max-body-mb", "-3"]),
    ("serve-tools", ["--max-body-mb", "inf"]),
])
def test_bad_ports_and_sizes_are_one_line_and_status_2(verb, args, capsys):
    with pytest.raises(SystemExit) as exited:
        main([verb, *args])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"lumos-gym {verb}: error: argument "), err


# ------------------------------------------------------------------------- the real servers
def test_serve_env_with_a_key_plays_for_clients_that_send_it(monkeypatch):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from lumos_gym.serving.envserver import start_env_server

    monkeypatch.delenv("LUMOS_GYM_API_KEY", raising=False)
    server = start_env_server("lumos/GSM8K-v0", {"privileged": True}, api_key=KEY,
                              max_body_bytes=64 * 1024)
    try:
        url = server.base_url
        env = gym.make("lumos/remote", url=url, api_key=KEY, privileged=True)
        observation, info = env.reset(seed=0, options={"index": 0})
        assert info["gold_actions"] and observation
        assert env.step(info["gold_actions"][0])[0]
        env.close()
        with pytest.raises(RemoteEnvError, match="refused the API key"):
            gym.make("lumos/remote", url=url)
        monkeypatch.setenv("LUMOS_GYM_API_KEY", KEY)  # the variable serves as well
        env = gym.make("lumos/remote", url=url)
        assert env.reset(seed=0)[0]
        env.close()
        with httpx.Client(base_url=url, timeout=30) as http:
            refused = http.post("/reset", json={"seed": 0})
            assert refused.status_code == 401 and error_of(refused)["code"] == "invalid_api_key"
            assert http.get("/health").json() == {"status": "healthy"}
            reply = http.post("/reset", json={"seed": 0}, headers=BEARER)
            assert reply.status_code == 200 and reply.json()["session_id"]
            big = http.post("/reset", content=b"{" + b" " * 100_000 + b"}", headers=BEARER)
            assert big.status_code == 413 and error_of(big)["code"] == "request_too_large"
        with pytest.raises(InvalidStatus):
            connect(url.replace("http://", "ws://") + "/ws", proxy=None, open_timeout=10)
    finally:
        server.stop()


def test_serve_tools_over_http_with_a_key():
    import httpx2  # the HTTP client the mcp package's transport takes
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from lumos_gym.serving.tools import ToolService, streamable_http_app

    async def calculate(url, headers):
        transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
        async with Client(transport) as client:
            result = await client.call_tool("Calculator", {"args": "6*7"})
            return result.content[0].text

    service = ToolService(["Calculator"])
    try:
        with ThreadedServer(streamable_http_app(service, api_key=KEY), name="tool server",
                            lifespan="on") as server:
            url = f"{server.base_url}/mcp"
            assert asyncio.run(calculate(url, BEARER)) == "42"
            refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert refused.status_code == 401
            assert error_of(refused)["code"] == "invalid_api_key"
            with pytest.raises(Exception):  # noqa: B017  (the mcp client's own error group)
                asyncio.run(calculate(url, {}))
    finally:
        service.close()
