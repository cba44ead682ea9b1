"""The offline shop behind ``lumos/WebShop-v0`` (and the pages Mind2Web tasks are recorded on).

* :mod:`~lumos_gym.envs.web.shop.catalog`: products, the catalogue with its BM25 search, and a
  seeded generator of invented products;
* :mod:`~lumos_gym.envs.web.shop.app`: the FastAPI site (jinja2 templates in ``templates/``);
* :mod:`~lumos_gym.envs.web.shop.server`: the site on loopback in a thread, and an HTTP client;
* :mod:`~lumos_gym.envs.web.shop.pages`: pages as text observations, simplified HTML and clickables;
* :mod:`~lumos_gym.scoring.webshop`: WebShop's purchase reward;
* :mod:`~lumos_gym.envs.web.shop.instructions`: instructions and expert trajectories;
* :mod:`~lumos_gym.envs.web.shop.official`: WebShop's own data files.

Importing this package imports neither FastAPI nor uvicorn; the server modules do.
"""

from lumos_gym.envs.web.shop.catalog import Catalog, Product, Review, generate_catalog
from lumos_gym.scoring.webshop import Goal, RewardBreakdown, compute_reward

__all__ = [
    "Catalog",
    "Goal",
    "Product",
    "Review",
    "RewardBreakdown",
    "ShopClient",
    "ShopServer",
    "compute_reward",
    "create_app",
    "generate_catalog",
]


def __getattr__(name: str) -> object:
    """Import the server side (FastAPI, uvicorn, httpx) only when it is asked for."""
    if name in ("ShopServer", "ShopClient"):
        from lumos_gym.envs.web.shop import server  # optional web extra: httpx

        return getattr(server, name)
    if name == "create_app":
        from lumos_gym.envs.web.shop.app import create_app  # optional web extra: fastapi

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
