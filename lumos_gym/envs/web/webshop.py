"""``lumos/WebShop-v0``: shopping on a real offline shop site (WebShop, Yao et al., 2022).

Each env instance serves its catalogue with a :class:`~lumos_gym.envs.web.shop.server.ShopServer`
on loopback (started on the first episode, stopped by ``close()``); each episode opens a shop
session with the task's goal over HTTP and browses real HTML pages through a
:class:`ShopSession`. The episode ends when the agent clicks ``Buy Now`` (reward: WebShop's
purchase reward, :mod:`lumos_gym.scoring.webshop`) or gives up with ``Stop()`` (reward 0).

Actions: Lumos' ``Search``, ``Click``, ``FeatureRetrieve`` and ``Pick``
(:mod:`lumos_gym.tools.webshop`), and WebShop's own ``search[query]`` and ``click[element]``,
which :meth:`WebShopEnv.rewrite_action` maps onto ``Search(query)`` and ``Click(element)``
calls whose observation is the new page. The first observation is the instruction.

Metrics: ``reward`` (primary), ``success`` (reward 1), ``attribute_score``, ``option_score``,
``price_score`` and ``type_score``.

Sources: ``generated`` (default: :func:`~lumos_gym.envs.web.shop.catalog.generate_catalog` and
:func:`~lumos_gym.envs.web.shop.instructions.generate_tasks`), or WebShop's files (``source=
"official"`` with a ``path`` folder or the ``products=``, ``attributes=``, ``instructions=``,
``reviews=`` files; a folder given as ``source`` works too). Without a path, ``official`` reads
``$LUMOS_GYM_CACHE/data/webshop``.

Generated splits: ``train`` and ``test`` target disjoint products of one shop (one product in
five, by asin, is a test target). ``validation``, for choices made before a test run
(checkpoints, learning rates, round limits), plays in the validation shop: the same shop with
``num_products // 5`` products added that no other shop holds, which are its only targets
(:func:`~lumos_gym.envs.web.shop.catalog.validation_catalog`); it shares no target product,
and no instruction, with the train and test splits of its seed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlencode

from lumos_gym.envs.base import EpisodeSession, LumosEnv
from lumos_gym.envs.sources import GeneratedSource, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.envs.web.shop.catalog import Catalog, generate_catalog, validation_catalog
from lumos_gym.envs.web.shop.instructions import DEFAULT_SEARCH_TOP_K, SPLITS, generate_tasks
from lumos_gym.envs.web.shop.official import OFFICIAL_SPLITS, OfficialSource, find_official_files
from lumos_gym.envs.web.shop.pages import ParsedPage, simplify_html
from lumos_gym.envs.web.shop.server import ShopClient, ShopServer
from lumos_gym.errors import DataError, LumosGymError, ToolError
from lumos_gym.jsonl import cache_root
from lumos_gym.scoring.webshop import Goal, zero_metrics

__all__ = ["OBSERVATION_MODES", "WEBSHOP_TOOLS", "ShopSession", "WebShopEnv", "webshop_source"]

#: The WebShop tools, in the order of Lumos' grounding instruction.
WEBSHOP_TOOLS = ("Search", "FeatureRetrieve", "Pick", "Click")
#: Page observation modes: WebShop's ``[SEP]`` text, or simplified HTML.
OBSERVATION_MODES = ("text", "html")
_WEBSHOP_ACTION_RE = re.compile(r"\s*(search|click)\s*\[(.*)\]\s*\Z", re.IGNORECASE | re.DOTALL)


class ShopSession(EpisodeSession):
    """One episode's browser on the shop: the current page and the session's purchase.

    Args:
        client: the HTTP client of the shop.
        session_id: the shop session (holding the goal).
        observation_mode: ``"text"`` or ``"html"``.
    """

    def __init__(self, client: ShopClient, session_id: str, *,
                 observation_mode: str = "text") -> None:
        self.client = client
        self.session_id = session_id
        self.observation_mode = observation_mode
        self.visited: list[str] = []
        self.page: ParsedPage = self.open(client.home_url(session_id))
        self._metrics: dict[str, float] | None = None
        self._closed = False

    @property
    def done(self) -> bool:
        """Return True once the session has bought something (the done page is shown)."""
        return self.page.kind == "done"

    def metrics(self) -> dict[str, float]:
        """Return the purchase's metrics (zeros before a purchase)."""
        if not self.done:
            return zero_metrics()
        if self._metrics is None:
            record = self.client.session_state(self.session_id)
            self._metrics = dict(record.get("metrics") or zero_metrics())
        return dict(self._metrics)

    def observation(self) -> str:
        """Return the current page as the agent sees it (text or simplified HTML)."""
        if self.observation_mode == "html":
            return simplify_html(self.page.html)
        return self.page.text

    def open(self, url: str) -> ParsedPage:
        """Fetch a page of the shop and make it the current page."""
        self.page = self.client.page(url)
        self.visited.append(url)
        return self.page

    def search(self, query: str) -> ParsedPage:
        """Submit the page's search form with ``query``.

        Raises:
            ToolError: the page has no search box.
        """
        action = self.page.search_action
        if action is None:
            raise ToolError("there is no search box on this page; click 'Back to Search' first")
        return self.open(f"{action}?{urlencode({'query': query})}")

    def click(self, target: str) -> ParsedPage:
        """Follow the clickable called ``target``.

        Raises:
            ToolError: nothing on the page is called ``target``.
        """
        clickable = self.page.find(target)
        if clickable is None:
            names = ", ".join(self.page.names()) or "none"
            raise ToolError(f"nothing called {target!r} to click on this page; clickables: "
                            f"{names}")
        return self.open(clickable.href)

    def close(self) -> None:
        """Ask the shop to forget the session; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.client.close_session(self.session_id)
        except LumosGymError:
            pass  # the server is already gone: nothing left to forget


class WebShopEnv(LumosEnv):
    """WebShop on the offline shop site.

    Args:
        source: ``"generated"`` (default), ``"official"``, or a folder of WebShop's files.
        split: generated: ``train``, ``validation`` or ``test`` (disjoint target products; see
            the module docstring); official: ``test`` (first 500 goals), ``eval``/``dev``
            (next 1,000), ``train`` or ``all``.
        num_tasks: generated instructions.
        seed: the seed of the generated instructions (and of official price caps).
        num_products: products of the generated catalogue (the validation shop adds
            ``num_products // 5`` of its own).
        catalog_seed: the seed of the generated catalogue (the same shop for every split).
        path: the folder of WebShop's files (official).
        products: WebShop's product file (implies the official source).
        attributes: WebShop's attribute file.
        instructions: WebShop's human instruction file.
        reviews: WebShop's review file.
        human_goals: use the human instructions when present (official; default True).
        observation_mode: ``"text"`` (WebShop's ``[SEP]`` text) or ``"html"`` (simplified).
        ranker: ``FeatureRetrieve``/``Pick`` backend, ``"embed"`` (MiniLM) or ``"lexical"``.
        ranker_model: an embedding model folder for ``ranker="embed"``.
        search_top_k: results ``Search`` binds (2, as Lumos).
        show_attributes: add an ``Attributes`` tab to item pages.
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``limit``, ``render_mode``,
            ``privileged``, ``tools``).
    """

    task_type: ClassVar[str] = "web"
    default_tools: ClassVar[tuple[str, ...]] = WEBSHOP_TOOLS
    primary_metric: ClassVar[str] = "reward"
    default_scorer: ClassVar[str | None] = "webshop/official"
    replay_options: ClassVar[dict[str, Any]] = {"ranker": "lexical"}
    ends_by_answer: ClassVar[bool] = False
    dataset = "webshop"

    def __init__(
        self,
        *,
        source: str | Path = "generated",
        split: str = "test",
        num_tasks: int = 50,
        seed: int = 0,
        num_products: int = 1000,
        catalog_seed: int = 0,
        path: str | Path | None = None,
        products: str | Path | None = None,
        attributes: str | Path | None = None,
        instructions: str | Path | None = None,
        reviews: str | Path | None = None,
        human_goals: bool = True,
        observation_mode: str = "text",
        ranker: str = "embed",
        ranker_model: str | None = None,
        search_top_k: int = DEFAULT_SEARCH_TOP_K,
        show_attributes: bool = False,
        **options: Any,
    ) -> None:
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, "
                             f"got {observation_mode!r}")
        self.observation_mode = observation_mode
        self.show_attributes = show_attributes
        self.catalog, tasks = webshop_source(
            source, split=split, num_tasks=num_tasks, seed=seed, num_products=num_products,
            catalog_seed=catalog_seed, path=path, products=products, attributes=attributes,
            instructions=instructions, reviews=reviews, human_goals=human_goals,
            search_top_k=search_top_k,
        )
        options.setdefault("tools", {
            "Search": {"top_k": search_top_k},
            "FeatureRetrieve": {"backend": ranker, "model": ranker_model},
            "Pick": {"backend": ranker, "model": ranker_model},
            "Click": {},
        })
        self._server: ShopServer | None = None
        self._client: ShopClient | None = None
        super().__init__(tasks=tasks, **options)

    @property
    def server(self) -> ShopServer:
        """Return the env's shop server, starting it on first use."""
        if self._server is None or not self._server.running:
            self._server = ShopServer(self.catalog, show_attributes=self.show_attributes).start()
            self._client = None
        return self._server

    @property
    def client(self) -> ShopClient:
        """Return the env's HTTP client of its shop server."""
        server = self.server
        if self._client is None:
            self._client = ShopClient(server.base_url)
        return self._client

    def open_session(self, task: Task) -> ShopSession:
        """Open a shop session holding the task's goal and show its search page."""
        record = task.meta.get("goal")
        if not isinstance(record, Mapping):
            raise LumosGymError(f"WebShop task {task.id!r} has no goal (meta['goal'])")
        client = self.client
        session_id = client.open_session(Goal.from_dict(record))
        return ShopSession(client, session_id, observation_mode=self.observation_mode)

    def rewrite_action(self, text: str) -> str:
        """Map WebShop's ``search[query]``/``click[element]`` onto ``Search``/``Click`` calls."""
        match = _WEBSHOP_ACTION_RE.match(text)
        if match is None:
            return text
        name = "Search" if match.group(1).lower() == "search" else "Click"
        return f"{name}({match.group(2).strip()})"

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return the metrics of an episode that bought nothing."""
        return zero_metrics()

    def close(self) -> None:
        """Close the episode's session, the client and the shop server. Idempotent."""
        super().close()
        client, self._client = self._client, None
        if client is not None:
            client.close()
        server, self._server = self._server, None
        if server is not None:
            server.stop()


def webshop_source(
    source: str | Path = "generated",
    *,
    split: str = "test",
    num_tasks: int = 50,
    seed: int = 0,
    num_products: int = 1000,
    catalog_seed: int = 0,
    path: str | Path | None = None,
    products: str | Path | None = None,
    attributes: str | Path | None = None,
    instructions: str | Path | None = None,
    reviews: str | Path | None = None,
    human_goals: bool = True,
    search_top_k: int = DEFAULT_SEARCH_TOP_K,
) -> tuple[Catalog, TaskSource]:
    """Return the shop's catalogue and the task source of a :class:`WebShopEnv`.

    The arguments are the env's (see :class:`WebShopEnv`). Any of ``path``, ``products``,
    ``attributes`` or ``instructions``, or a ``source`` other than ``"generated"``, selects
    WebShop's files.

    Raises:
        ValueError: an unknown split.
        DataError: WebShop's files are missing (naming the expected files and the folder).
    """
    official = source != "generated" or any(
        f is not None for f in (path, products, attributes, instructions)
    )
    if not official:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        make_shop = validation_catalog if split == "validation" else generate_catalog
        catalog = make_shop(catalog_seed, num_products)

        def generate() -> list[Task]:
            return generate_tasks(catalog, split=split, num_tasks=num_tasks, seed=seed,
                                  search_top_k=search_top_k)

        params = {"generator": "webshop", "split": split, "seed": seed, "num_tasks": num_tasks,
                  "num_products": num_products, "catalog_seed": catalog_seed,
                  "search_top_k": search_top_k}
        return catalog, GeneratedSource(generate, params)
    if split not in OFFICIAL_SPLITS:
        raise ValueError(f"split must be one of {tuple(OFFICIAL_SPLITS)} for WebShop's files, "
                         f"got {split!r}")
    folder = path
    if folder is None and source not in ("official", "generated"):
        folder = source
    if folder is None and products is None:
        folder = cache_root() / "data" / "webshop"
    try:
        files = find_official_files(folder, products=products, attributes=attributes,
                                    instructions=instructions, reviews=reviews)
    except DataError as e:
        raise DataError(f"{e} (WebShop's data comes from setup.sh in princeton-nlp/WebShop; "
                        "pass its folder as path=...)") from e
    official_source = OfficialSource(files, split=split, seed=seed, search_top_k=search_top_k,
                                     human=human_goals)
    return official_source.catalog, official_source
