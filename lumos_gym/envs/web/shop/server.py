"""Run the shop site on loopback in a background thread, and browse it over HTTP.

:class:`ShopServer` serves :func:`~lumos_gym.envs.web.shop.app.create_app` with uvicorn on
``127.0.0.1``: the socket is bound before the server thread starts (port 0 picks a free port,
so there is no race for it), ``start`` returns once the server accepts connections, and
``stop`` (also on leaving a ``with`` block, or when a forgotten server is garbage collected; the
thread is a daemon, so a server left running never holds the interpreter at exit) shuts it
down, joins the thread and closes the socket, so the port no longer accepts connections
afterwards.

:class:`ShopClient` fetches pages by URL with ``httpx`` (never through a proxy) and talks to
the session API.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx

from lumos_gym.envs.web.shop.catalog import Catalog
from lumos_gym.envs.web.shop.pages import ParsedPage, parse_page
from lumos_gym.errors import LumosGymError
from lumos_gym.scoring.webshop import Goal

__all__ = ["ShopClient", "ShopServer"]

_START_TIMEOUT = 20.0
_STOP_TIMEOUT = 10.0


class ShopServer:
    """The shop site served by uvicorn in a thread.

    Args:
        catalog: the products.
        host: the interface (loopback by default; the shop is never meant to face a network).
        port: the port; 0 picks a free one.
        show_attributes: add an ``Attributes`` tab to item pages.

    Example:
        >>> with ShopServer(generate_catalog(num_products=50)) as server:  # doctest: +SKIP
        ...     ShopClient(server.base_url).page("/s/demo/").kind
        'search'
    """

    def __init__(self, catalog: Catalog, host: str = "127.0.0.1", port: int = 0, *,
                 show_attributes: bool = False) -> None:
        self.catalog = catalog
        self.host = host
        self.port = port
        self.show_attributes = show_attributes
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        """Return ``http://host:port`` of the running server."""
        if self._socket is None:
            raise LumosGymError("the shop server is not running; call start()")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Return True while the server thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ShopServer:
        """Bind the port, start the server thread and wait until it serves; idempotent."""
        if self.running:
            return self
        import uvicorn

        from lumos_gym.envs.web.shop.app import create_app  # optional web extra: fastapi

        app = create_app(self.catalog, show_attributes=self.show_attributes)
        # proto IPPROTO_TCP: asyncio then sets TCP_NODELAY on accepted connections; without it,
        # Nagle's algorithm and delayed ACKs add ~40 ms to every keep-alive response
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((self.host, self.port))
        except OSError as e:
            sock.close()
            where = f"{self.host}:{self.port}"
            raise LumosGymError(f"cannot bind the shop server to {where}: {e}") from e
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                                  name=f"shop-server-{self.port}", daemon=True)
        self._server, self._thread, self._socket = server, thread, sock
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise LumosGymError(f"the shop server did not start on port {self.port}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Shut the server down, join its thread and close its socket; idempotent."""
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(_STOP_TIMEOUT)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(_STOP_TIMEOUT)
        if sock is not None:
            sock.close()

    def __enter__(self) -> ShopServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "_thread", None) is not None:
            self.stop()


class ShopClient:
    """A small browser for the shop: fetches pages by URL and opens sessions.

    Args:
        base_url: the server's ``http://host:port``.
        timeout: seconds to wait for a response.
    """

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False,
                                  follow_redirects=True)

    def get(self, url: str) -> httpx.Response:
        """Return the raw response to ``GET url`` (absolute, or relative to the server)."""
        try:
            return self._http.get(url)
        except httpx.HTTPError as e:
            raise LumosGymError(f"cannot fetch {url}: {type(e).__name__}: {e}") from e

    def page(self, url: str) -> ParsedPage:
        """Fetch and parse a page (any status: error pages are pages too)."""
        response = self.get(url)
        return parse_page(response.text, str(response.url))

    def open_session(self, goal: Goal | None = None, session_id: str | None = None) -> str:
        """Open a session on the server (with the goal it is scored against) and return its id."""
        body: dict[str, Any] = {"goal": goal.to_dict() if goal is not None else None}
        if session_id is not None:
            body["session_id"] = session_id
        response = self._request("POST", "/api/sessions", json=body)
        return str(response.json()["session_id"])

    def session_state(self, session_id: str) -> dict[str, Any]:
        """Return the server's record of a session (``done``, ``purchase``, ``metrics``...)."""
        return dict(self._request("GET", f"/api/sessions/{session_id}").json())

    def close_session(self, session_id: str) -> None:
        """Ask the server to forget a session."""
        self._request("DELETE", f"/api/sessions/{session_id}")

    def home_url(self, session_id: str) -> str:
        """Return the URL of a session's search page."""
        return f"{self.base_url}/s/{session_id}/"

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.HTTPError as e:
            raise LumosGymError(f"{method} {url} failed: {type(e).__name__}: {e}") from e
        if response.status_code >= 400:
            raise LumosGymError(f"{method} {url}: HTTP {response.status_code} {response.text}")
        return response

    def close(self) -> None:
        """Close the connections; idempotent."""
        self._http.close()

    def __enter__(self) -> ShopClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
