"""Serve an ASGI app with uvicorn in a background thread, on a socket bound before it starts.

:class:`ThreadedServer` is the one way lumos-gym runs a web app inside its own process: the shop
site of the WebShop envs, and the env server of ``lumos-gym serve-env`` in tests and benchmarks.
The socket is bound first (port 0 picks a free port, so there is no race for it), ``start``
returns once the server accepts connections, and ``stop`` (also on leaving a ``with`` block, or
when a forgotten server is garbage collected; the thread is a daemon, so a server left running
never holds the interpreter at exit) shuts it down, joins the thread and closes the socket, so
the port no longer accepts connections afterwards.

uvicorn is imported when a server starts (it is an optional extra).

:class:`Guard` makes a server safe to expose: it wraps any ASGI app, asks every request for
the API key (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``) and refuses a request body
over a size limit before the app reads it. :func:`api_key_from` finds the key a command was
given, and :func:`check_exposure` refuses to serve a non-loopback address without one.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from lumos_gym.errors import LumosGymError

__all__ = ["API_KEY_ENV", "Guard", "ThreadedServer", "api_key_from", "bind_socket",
           "check_exposure", "is_loopback"]

logger = logging.getLogger(__name__)

#: The variable that holds the API key of a server (and of its clients) when no flag gives one.
API_KEY_ENV = "LUMOS_GYM_API_KEY"

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind a TCP socket to ``host:port`` (0: a free port) for uvicorn to serve on.

    Raises:
        LumosGymError: the address is taken or not this machine's.
    """
    # proto IPPROTO_TCP: asyncio then sets TCP_NODELAY on accepted connections; without it,
    # Nagle's algorithm and delayed ACKs add ~40 ms to every keep-alive response
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)  # clients that come before the server runs wait in the backlog
    except OSError as e:
        sock.close()
        raise LumosGymError(f"cannot bind to {host}:{port}: {e}") from e
    return sock


class ThreadedServer:
    """An ASGI app served by uvicorn in a daemon thread.

    Args:
        app: the ASGI app.
        host: the interface (loopback by default).
        port: the port; 0 picks a free one (read ``port`` after ``start``).
        name: names the thread and the errors.
        lifespan: uvicorn's lifespan mode: ``"off"``, or ``"on"`` for apps with startup and
            shutdown work (which ``stop`` then waits for).
        graceful_s: how long ``stop`` lets open connections finish.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *,
                 name: str = "server", lifespan: str = "off", graceful_s: float = 2.0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self.lifespan = lifespan
        self.graceful_s = graceful_s
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        """Return ``http://host:port`` of the running server."""
        if self._socket is None:
            raise LumosGymError(f"the {self.name} is not running; call start()")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        """Return True while the server thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ThreadedServer:
        """Bind the port, start the server thread and wait until it serves; idempotent."""
        if self.running:
            return self
        import uvicorn  # optional extra (web, serve, envserver)

        sock = bind_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False,
                                lifespan=self.lifespan,
                                timeout_graceful_shutdown=max(1, round(self.graceful_s)))
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                                  name=f"{self.name}-{self.port}", daemon=True)
        self._server, self._thread, self._socket = server, thread, sock
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise LumosGymError(f"the {self.name} did not start on port {self.port}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Shut the server down, join its thread and close its socket; idempotent."""
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(STOP_TIMEOUT_S)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(STOP_TIMEOUT_S)
        if sock is not None:
            sock.close()

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "_thread", None) is not None:
            self.stop()


# ------------------------------------------------------------------------ exposing a server
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: A ``Content-Length`` longer than this many digits is over any limit (and Python's int
#: conversion of a very long digit string fails).
_LONGEST_LENGTH = 18


def api_key_from(value: str | None, env_var: str = API_KEY_ENV) -> str | None:
    """Return the API key a server or client was given: ``value`` (a flag), else ``$env_var``.

    Surrounding whitespace is dropped; an empty value is no key, so an empty flag falls back
    to the variable and an empty variable means none (None).

    Raises:
        LumosGymError: the key holds a character other than printable ASCII (it travels in an
            HTTP header).
    """
    for candidate in (value, os.environ.get(env_var)):
        key = (candidate or "").strip()
        if key:
            if not all(" " <= char <= "~" for char in key):
                raise LumosGymError("the API key may hold printable ASCII characters only")
            return key
    return None


def is_loopback(host: str) -> bool:
    """Return True when ``host`` is this machine only: ``localhost``, 127.0.0.0/8 or ``::1``."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:  # a host name other than localhost, or no address at all
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return (mapped or address).is_loopback


def check_exposure(host: str, api_key: str | None, insecure: bool, what: str) -> None:
    """Refuse to serve a non-loopback ``host`` without an API key, unless ``insecure``.

    With ``insecure``, a non-loopback host and no key, a warning is logged instead.

    Args:
        host: the interface the server is to listen on.
        api_key: the key its clients must send; None: none.
        insecure: serve a non-loopback host without a key all the same.
        what: names the server in the error and the warning, e.g. ``"lumos-gym serve-env"``.

    Raises:
        LumosGymError: ``host`` is not a loopback address, there is no key and not ``insecure``.
    """
    if api_key or is_loopback(host):
        return
    if not insecure:
        raise LumosGymError(
            f"{what} on {host} would be open to anyone who can reach it: pass --api-key KEY "
            f"(or set ${API_KEY_ENV}), or --insecure to serve it without a key all the same")
    logger.warning("%s listens on %s without an API key (--insecure): anyone who can reach the "
                   "port can run code through it", what, host)


class Guard:
    """ASGI middleware that makes a server safe to expose: an API key and a body size limit.

    With ``api_key``, every HTTP request and WebSocket handshake but those to ``open_paths``
    must carry ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (compared in constant
    time). An HTTP request without it is answered 401; a WebSocket is closed with code 1008
    (policy violation) before it is accepted, which the ASGI server answers with HTTP 403.

    A request body over ``max_body_bytes`` is answered 413 before the app reads it: at once
    when its ``Content-Length`` says so (the app is not called), and for a body without one
    (chunked) as soon as the bytes received pass the limit, never buffering it; the app then
    sees the client gone, and what it sends afterwards is dropped. A malformed
    ``Content-Length`` is answered 400. WebSocket messages are not counted here (uvicorn's
    ``ws_max_size`` limits them).

    The errors are OpenAI-style JSON, ``{"error": {"message", "type", "param", "code"}}``, and
    close the connection, so that an unread body is not read after the answer. Everything else,
    lifespan events included, passes through unchanged.

    Args:
        app: the ASGI app to guard.
        api_key: the key clients must send; None (or empty): none is asked for.
        max_body_bytes: the largest request body in bytes, at least 1.
        open_paths: paths served without the key (a health check).

    Raises:
        LumosGymError: ``max_body_bytes`` is below 1.
    """

    def __init__(self, app: Any, *, api_key: str | None, max_body_bytes: int,
                 open_paths: Iterable[str] = ("/health",)) -> None:
        if max_body_bytes < 1:
            raise LumosGymError(f"max_body_bytes must be at least 1; got {max_body_bytes}")
        self.app = app
        self.api_key = api_key or None
        self.max_body_bytes = int(max_body_bytes)
        self.open_paths = frozenset(open_paths)
        self._key = self.api_key.encode() if self.api_key is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI connection: refuse it, or pass it on to the app."""
        kind = scope["type"]
        if kind not in ("http", "websocket"):  # lifespan: not a client's
            await self.app(scope, receive, send)
            return
        if self._key is not None and scope.get("path") not in self.open_paths:
            refusal = self._refusal(scope.get("headers") or ())
            if refusal is not None:
                if kind == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": refusal})
                else:
                    await _answer_error(send, 401, refusal, "authentication_error",
                                        "invalid_api_key",
                                        [(b"www-authenticate", b'Bearer realm="lumos-gym"')])
                return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        await self._limited(scope, receive, send)

    def _refusal(self, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
        """Return why ``headers`` do not carry the key, or None when they do."""
        assert self._key is not None
        given = []
        for name, value in headers:
            if name == b"authorization":
                scheme, _, token = value.strip().partition(b" ")
                if scheme.lower() == b"bearer":
                    given.append(token.strip())
            elif name == b"x-api-key":
                given.append(value.strip())
        if not given:
            return "no API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
        if any(hmac.compare_digest(token, self._key) for token in given):
            return None
        return "wrong API key"

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request whose body may not pass ``max_body_bytes``."""
        limit = self.max_body_bytes
        declared = [value for name, value in scope.get("headers") or ()
                    if name == b"content-length"]
        if declared:
            length = _content_length(declared)
            if length is None:
                await _answer_error(send, 400, "malformed Content-Length header",
                                    "invalid_request_error", "invalid_content_length")
                return
            if length > limit:
                await _answer_error(send, 413, f"the request body ({length} bytes) is over "
                                    f"this server's limit of {_size(limit)}",
                                    "invalid_request_error", "request_too_large")
                return
        received = 0
        started = cut = refused = False

        async def receive_counted() -> Message:
            nonlocal received, cut, refused
            if cut:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    cut = True
                    if not started:  # set before the await: the app's answer is dropped
                        refused = True
                        await _answer_error(send, 413, "the request body is over this "
                                            f"server's limit of {_size(limit)}",
                                            "invalid_request_error", "request_too_large")
                    return {"type": "http.disconnect"}
            return message

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if refused:  # the 413 is the answer
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive_counted, send_tracked)
        except Exception:
            if not refused:
                raise
            # the app failed on the disconnect it was handed: the 413 has answered already
            logger.debug("the app failed after its request body was refused", exc_info=True)


def _content_length(values: Iterable[bytes]) -> int | None:
    """Return the length the ``Content-Length`` headers ``values`` agree on; None: malformed."""
    lengths = set()
    for value in values:
        for part in value.split(b","):  # a repeated header may arrive folded: "5, 5"
            digits = part.strip()
            if not digits.isdigit():
                return None
            digits = digits.lstrip(b"0") or b"0"
            lengths.add(int(digits) if len(digits) <= _LONGEST_LENGTH else 10**_LONGEST_LENGTH)
    return lengths.pop() if len(lengths) == 1 else None


def _size(n: int) -> str:
    """Return ``n`` bytes for a message: ``16 MiB`` or ``1000 bytes``."""
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


async def _answer_error(send: Send, status: int, message: str, kind: str, code: str,
                        headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Send an OpenAI-style JSON error with ``status`` and close the connection after it."""
    body = json.dumps({"error": {"message": message, "type": kind, "param": None,
                                 "code": code}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})
