"""The shop site: a FastAPI application serving real HTML pages over a catalogue.

Pages (all ``GET``; ``<sid>`` is a session id, created on first use when unknown, as WebShop's
``/<session_id>`` route does; ``princeton-nlp/WebShop``, ``web_agent_site/app.py``):

================================== ===============================================================
``/s/<sid>/``                      search page (home)
``/s/<sid>/search?query=&page=&sort=`` results, 10 a page out of the best 50 BM25 hits,
                                   sorted by ``relevance``, ``price-asc``, ``price-desc`` or
                                   ``rating``
``/s/<sid>/item/<asin>?...&opt=``  item page; each ``opt=name:value`` is a chosen option
``/s/<sid>/item/<asin>/<tab>?...`` ``description``, ``features``, ``reviews`` (and
                                   ``attributes`` when the app shows them)
``/s/<sid>/buy/<asin>?opt=``       buys the product with the chosen options: the done page
``/image/<asin>.svg``              a drawn product picture (generated products)
================================== ===============================================================

JSON API for the environment: ``POST /api/sessions`` (body ``{"goal": {...}}``) opens a session
with a goal and returns its id; ``GET /api/sessions/<sid>`` reports whether the session has
bought something, what, and its reward and metrics; ``DELETE /api/sessions/<sid>`` forgets it;
``GET /api/health`` answers ``{"ok": true}``.

HTML conventions (the Mind2Web tasks are recorded against them): every page but the done page
has ``<form id="search-form" action=".../search" method="get">`` with
``<input type="text" name="query" id="search-input">`` and ``<button type="submit"
id="search-button">``; the results page has ``<select name="sort" id="sort-select">`` in a GET
form, each product in an element with ``data-asin`` holding ``<a class="product-link">TITLE</a>``,
and ``<a class="page-link">`` for ``< Prev``/``Next >``; the item page has
``<div class="option-group" data-name="...">`` groups of ``<a class="option">`` (the chosen one
also ``selected``) and ``<a id="buy-now">``; every element an agent can act on has a stable id.

The session keeps the goal, the options chosen on the last item page and the purchase; the
first purchase of a session is final, and its reward is computed by
:func:`~lumos_gym.scoring.webshop.compute_reward` when the session has a goal.
"""

from __future__ import annotations

import html
import re
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from lumos_gym.envs.web.shop.catalog import SEARCH_RETURN_N, Catalog, Product
from lumos_gym.scoring.webshop import Goal, RewardBreakdown, compute_reward

__all__ = ["PRODUCTS_PER_PAGE", "SORTS", "TABS", "ShopState", "create_app"]

#: Products per results page (WebShop's ``PRODUCT_WINDOW``).
PRODUCTS_PER_PAGE = 10
#: Sort orders of the results page: value and label.
SORTS = (
    ("relevance", "Relevance"),
    ("price-asc", "Price: low to high"),
    ("price-desc", "Price: high to low"),
    ("rating", "Customer rating"),
)
#: Item sub-pages: name and the button label.
TABS = (("description", "Description"), ("features", "Features"), ("reviews", "Reviews"))
_Page = Annotated[int, Query(alias="page")]
_Options = Annotated[list[str] | None, Query()]
_SESSION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
_SLUG_RE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Purchase:
    """What a session bought."""

    asin: str
    title: str
    options: dict[str, str]
    price: float
    breakdown: RewardBreakdown | None

    @property
    def reward(self) -> float | None:
        """Return the reward, or None for a session without a goal."""
        return None if self.breakdown is None else self.breakdown.reward


@dataclass
class _Session:
    sid: str
    goal: Goal | None
    options: dict[str, str] = field(default_factory=dict)
    asin: str | None = None
    purchase: Purchase | None = None


class ShopState:
    """The shop's catalogue and its live sessions (one per app; guarded by a lock).

    Args:
        catalog: the products.
        show_attributes: add an ``Attributes`` tab to item pages (WebShop's ``--attrs``).
    """

    def __init__(self, catalog: Catalog, *, show_attributes: bool = False) -> None:
        self.catalog = catalog
        self.show_attributes = show_attributes
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._opened = 0

    def open(self, goal: Goal | None, sid: str | None = None) -> str:
        """Open a session (with a fresh id unless ``sid`` is given) and return its id."""
        with self._lock:
            self._opened += 1
            sid = sid or f"s{self._opened}"
            self._sessions[sid] = _Session(sid, goal)
            return sid

    def session(self, sid: str) -> _Session:
        """Return the session ``sid``, opening a goal-less one when it is new."""
        with self._lock:
            session = self._sessions.get(sid)
            if session is None:
                session = self._sessions[sid] = _Session(sid, None)
            return session

    def find(self, sid: str) -> _Session | None:
        """Return the session ``sid`` or None."""
        with self._lock:
            return self._sessions.get(sid)

    def close(self, sid: str) -> bool:
        """Forget a session; return whether it existed."""
        with self._lock:
            return self._sessions.pop(sid, None) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def _slug(name: str) -> str:
    return _SLUG_RE.sub("-", name.lower()).strip("-") or "option"


def _parse_options(product: Product, pairs: list[str]) -> dict[str, str]:
    """Read ``name:value`` pairs, keeping the ones the product offers (last one wins)."""
    chosen: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if sep and value in product.options.get(name, ()):
            chosen[name] = value
    return {name: chosen[name] for name in product.options if name in chosen}


def _sort(products: list[Product], sort: str) -> list[Product]:
    if sort == "price-asc":
        return sorted(products, key=lambda p: p.price)
    if sort == "price-desc":
        return sorted(products, key=lambda p: -p.price)
    if sort == "rating":
        return sorted(products, key=lambda p: -(p.rating or 0.0))
    return products


def _svg(product: Product) -> str:
    hue = int(product.asin.encode().hex(), 16) % 360
    label = html.escape(product.query)
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="240" height="240">'
        f'<rect width="240" height="240" fill="hsl({hue},45%,75%)"/>'
        f'<text x="120" y="125" font-size="18" text-anchor="middle">{label}</text></svg>'
    )


class _Pages:
    """Renders the pages of one app (the URLs and template variables of each page)."""

    def __init__(self, state: ShopState) -> None:
        self.state = state
        self.templates = Environment(
            loader=PackageLoader("lumos_gym.envs.web.shop", "templates"),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, name: str, **context: Any) -> str:
        return self.templates.get_template(name).render(**context)

    @staticmethod
    def base(sid: str) -> str:
        return f"/s/{quote(sid)}"

    def common(self, session: _Session, kind: str, title: str, query: str = "") -> dict[str, Any]:
        return {
            "base": self.base(session.sid),
            "page_kind": kind,
            "page_title": title,
            "instruction": session.goal.instruction if session.goal else "",
            "show_search": kind != "done",
            "query": query,
        }

    def results_url(self, sid: str, query: str, page: int, sort: str) -> str:
        params = urlencode({"query": query, "page": page, "sort": sort})
        return f"{self.base(sid)}/search?{params}"

    def item_url(self, sid: str, asin: str, context: dict[str, Any], options: dict[str, str],
                 tab: str = "") -> str:
        params = [("query", context["query"]), ("page", context["page"]), ("sort", context["sort"])]
        params += [("opt", f"{name}:{value}") for name, value in options.items()]
        suffix = f"/{tab}" if tab else ""
        return f"{self.base(sid)}/item/{quote(asin)}{suffix}?{urlencode(params)}"

    def buy_url(self, sid: str, asin: str, options: dict[str, str]) -> str:
        params = urlencode([("opt", f"{name}:{value}") for name, value in options.items()])
        return f"{self.base(sid)}/buy/{quote(asin)}" + (f"?{params}" if params else "")

    def search(self, session: _Session) -> str:
        return self.render("search.html", **self.common(session, "search", "Search"))

    def results(self, session: _Session, query: str, page: int, sort: str) -> str:
        hits = _sort(self.state.catalog.search(query, SEARCH_RETURN_N), sort)
        pages = max(1, -(-len(hits) // PRODUCTS_PER_PAGE))
        shown = hits[(page - 1) * PRODUCTS_PER_PAGE : page * PRODUCTS_PER_PAGE]
        context = {"query": query, "page": page, "sort": sort}
        rows = [{"product": p, "url": self.item_url(session.sid, p.asin, context, {})}
                for p in shown]
        sid = session.sid
        return self.render(
            "results.html",
            **self.common(session, "results", f"Results for {query}", query),
            page=page,
            total=len(hits),
            rows=rows,
            sort=sort,
            sorts=SORTS,
            prev_url=self.results_url(sid, query, page - 1, sort) if page > 1 else "",
            next_url=self.results_url(sid, query, page + 1, sort) if page < pages else "",
        )

    def tabs(self) -> tuple[tuple[str, str], ...]:
        if self.state.show_attributes:
            return (*TABS, ("attributes", "Attributes"))
        return TABS

    def item(self, session: _Session, product: Product, context: dict[str, Any],
             options: dict[str, str]) -> str:
        sid = session.sid
        groups = []
        for name, values in product.options.items():
            choices = []
            for value in values:
                picked = {**options, name: value}
                choices.append(
                    {
                        "value": value,
                        "selected": options.get(name) == value,
                        "url": self.item_url(sid, product.asin, context, picked),
                    }
                )
            groups.append({"name": name, "slug": _slug(name), "options": choices})
        tabs = [{"name": name, "label": label,
                 "url": self.item_url(sid, product.asin, context, options, name)}
                for name, label in self.tabs()]
        return self.render(
            "item.html",
            **self.common(session, "item", product.title, context["query"]),
            product=product,
            image=product.images[0] if product.images else "",
            groups=groups,
            tabs=tabs,
            results_url=self.results_url(sid, context["query"], context["page"], context["sort"]),
            buy_url=self.buy_url(sid, product.asin, options),
        )

    def subpage(self, session: _Session, product: Product, tab: str, context: dict[str, Any],
                options: dict[str, str]) -> str:
        label = dict(self.tabs())[tab]
        return self.render(
            "subpage.html",
            **self.common(session, tab, f"{label}: {product.title}", context["query"]),
            product=product,
            tab=tab,
            item_url=self.item_url(session.sid, product.asin, context, options),
        )

    def done(self, session: _Session, purchase: Purchase) -> str:
        return self.render("done.html", **self.common(session, "done", "Thank you"),
                           purchase=purchase)

    def error(self, session: _Session, message: str) -> str:
        return self.render("error.html", **self.common(session, "error", "Not found"),
                           message=message)


def _state_record(session: _Session) -> dict[str, Any]:
    purchase = session.purchase
    record: dict[str, Any] = {"session_id": session.sid, "done": purchase is not None,
                              "has_goal": session.goal is not None, "purchase": None,
                              "reward": None, "metrics": None}
    if purchase is not None:
        record["purchase"] = {"asin": purchase.asin, "options": purchase.options,
                              "price": purchase.price}
        if purchase.breakdown is not None:
            record["reward"] = purchase.breakdown.reward
            record["metrics"] = purchase.breakdown.metrics()
    return record


def create_app(catalog: Catalog, *, show_attributes: bool = False) -> FastAPI:
    """Return the shop application over ``catalog`` (its state lives in ``app.state.shop``).

    Args:
        catalog: the products.
        show_attributes: add an ``Attributes`` tab to item pages.
    """
    # The handlers are coroutines: they run on the event loop with no thread hop (each is a
    # short, CPU-bound render), which keeps a request on loopback around a millisecond.
    state = ShopState(catalog, show_attributes=show_attributes)
    site = _Site(state)
    app = FastAPI(title="Lumos Shop", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.shop = state
    _add_search_routes(app, site)
    _add_product_routes(app, site)
    _add_api_routes(app, state)
    return app


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


class _Site:
    """What the HTML routes share: the state, the page renderer and the bad-session answer."""

    def __init__(self, state: ShopState) -> None:
        self.state = state
        self.catalog = state.catalog
        self.pages = _Pages(state)
        self.bad_session = HTMLResponse("<!DOCTYPE html><html><body data-page=\"error\"><p>Bad "
                                        "session id</p></body></html>", status_code=400)

    def session_of(self, sid: str) -> _Session | None:
        """The session ``sid`` (opened on first use), or None for a malformed id."""
        return self.state.session(sid) if _SESSION_RE.match(sid) else None

    def product_page(self, sid: str, asin: str, query: str, page_number: int, sort: str,
                     opt: list[str] | None, tab: str = "") -> HTMLResponse:
        """An item page (and its chosen options), or one of its ``tab`` sub-pages."""
        session = self.session_of(sid)
        if session is None:
            return self.bad_session
        product = self.catalog.get(asin)
        if product is None:
            return _html(self.pages.error(session, f"No product {asin}"), 404)
        if tab and tab not in dict(self.pages.tabs()):
            return _html(self.pages.error(session, f"No page {tab} for {asin}"), 404)
        options = _parse_options(product, opt or [])
        context = {"query": query, "page": max(1, page_number), "sort": sort}
        if not tab:
            session.asin, session.options = product.asin, dict(options)
            return _html(self.pages.item(session, product, context, options))
        return _html(self.pages.subpage(session, product, tab, context, options))

    def buy(self, sid: str, asin: str, opt: list[str] | None) -> HTMLResponse:
        """Buy ``asin`` with the chosen options (the first purchase is final): the done page."""
        session = self.session_of(sid)
        if session is None:
            return self.bad_session
        product = self.catalog.get(asin)
        if product is None:
            return _html(self.pages.error(session, f"No product {asin}"), 404)
        if session.purchase is None:
            options = _parse_options(product, opt or [])
            breakdown = None
            if session.goal is not None:
                breakdown = compute_reward(product, session.goal, options=options)
            session.purchase = Purchase(product.asin, product.title, options, product.price,
                                        breakdown)
        return _html(self.pages.done(session, session.purchase))


def _add_search_routes(app: FastAPI, site: _Site) -> None:
    """The home redirect, the search page and the results pages."""

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/s/home/")

    @app.get("/s/{sid}/", response_class=HTMLResponse)
    async def search_page(sid: str) -> HTMLResponse:
        session = site.session_of(sid)
        return site.bad_session if session is None else _html(site.pages.search(session))

    @app.get("/s/{sid}/search", response_class=HTMLResponse)
    async def results_page(sid: str, query: str = "", page_number: _Page = 1,
                     sort: str = "relevance") -> HTMLResponse:
        session = site.session_of(sid)
        if session is None:
            return site.bad_session
        sort = sort if sort in dict(SORTS) else "relevance"
        return _html(site.pages.results(session, query, max(1, page_number), sort))


def _add_product_routes(app: FastAPI, site: _Site) -> None:
    """Item pages and their sub-pages, the purchase, and the product pictures."""

    @app.get("/s/{sid}/item/{asin}", response_class=HTMLResponse)
    async def item_page(
        sid: str,
        asin: str,
        query: str = "",
        page_number: _Page = 1,
        sort: str = "relevance",
        opt: _Options = None,
    ) -> HTMLResponse:
        return site.product_page(sid, asin, query, page_number, sort, opt)

    @app.get("/s/{sid}/item/{asin}/{tab}", response_class=HTMLResponse)
    async def item_sub_page(
        sid: str,
        asin: str,
        tab: str,
        query: str = "",
        page_number: _Page = 1,
        sort: str = "relevance",
        opt: _Options = None,
    ) -> HTMLResponse:
        return site.product_page(sid, asin, query, page_number, sort, opt, tab)

    @app.get("/s/{sid}/buy/{asin}", response_class=HTMLResponse)
    async def buy(sid: str, asin: str, opt: _Options = None) -> HTMLResponse:
        return site.buy(sid, asin, opt)

    @app.get("/image/{asin}.svg")
    async def image(asin: str) -> Response:
        product = site.catalog.get(asin)
        if product is None:
            return Response(status_code=404)
        return Response(_svg(product), media_type="image/svg+xml")


def _add_api_routes(app: FastAPI, state: ShopState) -> None:
    """The environment's JSON API: health, and opening, reading and closing sessions."""

    @app.get("/api/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "products": len(state.catalog), "sessions": len(state)}

    @app.post("/api/sessions")
    async def open_session(request: Request) -> JSONResponse:
        body = await request.json() if await request.body() else {}
        goal_record = body.get("goal") if isinstance(body, dict) else None
        try:
            goal = Goal.from_dict(goal_record) if goal_record else None
        except (KeyError, TypeError, ValueError) as e:
            return JSONResponse({"error": f"bad goal: {e}"}, status_code=422)
        sid = body.get("session_id") if isinstance(body, dict) else None
        if sid is not None and (not isinstance(sid, str) or not _SESSION_RE.match(sid)):
            return JSONResponse({"error": "bad session id"}, status_code=422)
        return JSONResponse({"session_id": state.open(goal, sid)})

    @app.get("/api/sessions/{sid}")
    async def session_state(sid: str) -> JSONResponse:
        session = state.find(sid)
        if session is None:
            return JSONResponse({"error": f"no session {sid}"}, status_code=404)
        return JSONResponse(_state_record(session))

    @app.delete("/api/sessions/{sid}")
    async def close_session(sid: str) -> JSONResponse:
        return JSONResponse({"closed": state.close(sid)})
