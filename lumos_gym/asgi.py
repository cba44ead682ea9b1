"""Serve an ASGI app with uvicorn in a background thread, on a socket bound before it starts.

:class:`ThreadedServer` is the one way lumos-gym runs a web app inside its own process: the shop
site of the WebShop envs, and the env server of ``lumos-gym serve-env`` in tests and benchmarks.
The socket is bound first (port 0 picks a free port, so there is no race for it), ``start``
returns once the server accepts connections, and ``stop`` (also on leaving a ``with`` block, or
when a forgotten server is garbage collected; the thread is a daemon, so a server left running
never holds the interpreter at exit) shuts it down, joins the thread and closes the socket, so
the port no longer accepts connections afterwards.

uvicorn is imported when a server starts (it is an optional extra).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from lumos_gym.errors import LumosGymError

__all__ = ["ThreadedServer", "bind_socket"]

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
