"""Run the shop site on loopback in a background thread, and browse it over HTTP.

:class:`ShopServer` serves :func:`~lumos_gym.envs.web.shop.app.create_app` with uvicorn on
``127.0.0.1`` in a :class:`~lumos_gym.asgi.ThreadedServer`: the socket is bound before the
server thread starts (port 0 picks a free port), ``start`` returns once the server accepts
connections, and ``stop`` (also on leaving a ``with`` block, or when a forgotten server is
garbage collected) shuts it down, so the port no longer accepts connections afterwards.

:class:`ShopClient` fetches pages by URL with ``httpx`` (never through a proxy) and talks to
the session API.
"""

from __future__ import annotations

from typing import Any

import httpx

from lumos_gym.asgi import ThreadedServer
from lumos_gym.envs.web.shop.catalog import Catalog
from lumos_gym.envs.web.shop.pages import ParsedPage, parse_page
from lumos_gym.errors import LumosGymError
from lumos_gym.scoring.webshop import Goal

__all__ = ["ShopClient", "ShopServer"]


class ShopServer:
    """The shop site served by uvicorn in a thread (a :class:`~lumos_gym.asgi.ThreadedServer`).

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
        self._runner: ThreadedServer | None = None

    @property
    def base_url(self) -> str:
        """Return ``http://host:port`` of the running server."""
        if self._runner is None or not self._runner.running:
            raise LumosGymError("the shop server is not running; call start()")
        return self._runner.base_url

    @property
    def running(self) -> bool:
        """Return True while the server thread runs."""
        return self._runner is not None and self._runner.running

    def start(self) -> ShopServer:
        """Bind the port, start the server thread and wait until it serves; idempotent."""
        if self.running:
            return self
        from lumos_gym.envs.web.shop.app import create_app  # optional web extra: fastapi

        app = create_app(self.catalog, show_attributes=self.show_attributes)
        self._runner = ThreadedServer(app, self.host, self.port, name="shop server")
        try:
            self._runner.start()
        finally:
            self.port = self._runner.port
        return self

    def stop(self) -> None:
        """Shut the server down, join its thread and close its socket; idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop()

    def __enter__(self) -> ShopServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
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
