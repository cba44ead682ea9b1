"""WebShop's own data files: loaders, a writer for samples, and the task source built on them.

The formats, as ``princeton-nlp/WebShop`` reads them (``web_agent_site/engine/engine.py``
``load_products``, ``web_agent_site/engine/goal.py`` ``get_human_goals`` and
``get_synthetic_goals``, ``web_agent_site/utils.py`` for the file names):

* products, ``items_shuffle_1000.json`` or ``items_shuffle.json``: a JSON list of products with
  ``asin`` (rows whose asin is ``nan`` or longer than 10 characters are skipped, repeated asins
  kept once), ``name`` (the title), ``full_description``, ``small_description`` (the bullet
  points: a list or one string), ``pricing`` (a string such as ``"$12.99"`` or ``"$12.99 -
  $15.99"``, split at ``$``; empty means $100.0), ``customization_options`` (``{option name:
  [{"value": ..., "image": ...}] or null}``; names and values lower-cased, ``/`` in a value
  written `` | ``), ``images`` (the first is the main image), ``category``, ``query`` (lower-cased
  and stripped) and ``product_category`` (parts joined by ``›``); a ``product_information``
  dict and other scraped keys are ignored;
* reviews, ``reviews.json``: a list of ``{"asin", "reviews": [{"title", "score" or "stars",
  "body" or "review"}], "average_rating"}``;
* attributes, ``items_ins_v2_1000.json`` or ``items_ins_v2.json``: asin to ``{"attributes":
  [...], "instruction": ..., "instruction_attributes": [...]}`` (the product's hidden
  attributes and its synthetic instruction);
* human instructions, ``items_human_ins.json``: asin to a list of ``{"asin", "instruction",
  "instruction_attributes", "instruction_options", "assignment_id", "worker_id"}`` (instructions
  with no attribute are skipped, as WebShop skips them).

Goals follow WebShop: a human instruction's text is the instruction without its final period,
then the price clause; a synthetic one's is the instruction, the chosen options (``with color:
black, and size: large``) and the price clause. WebShop draws a product's price within a price
range and the price cap at random on every start; here both are drawn from a generator seeded by
the asin, so a task is the same on every run. Where WebShop makes one synthetic goal per
combination of a product's options, one combination is drawn here (or the record's
``instruction_options`` are used when present). The goals are shuffled with seed 233 and split
as WebShop's baselines split them (``baseline_models/env.py``): ``test`` the first 500, ``eval``
(``dev``) the next 1,000, ``train`` the rest; ``all`` keeps every goal.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from lumos_gym.envs.sources import TaskSource, file_sha256
from lumos_gym.envs.tasks import Task
from lumos_gym.envs.web.shop.catalog import Catalog, Product, Review
from lumos_gym.envs.web.shop.instructions import (
    DEFAULT_SEARCH_TOP_K,
    expert_plan,
    price_cap,
    price_clause,
    task_from_goal,
)
from lumos_gym.errors import DataError
from lumos_gym.scoring.webshop import Goal

__all__ = [
    "ATTRIBUTE_FILES",
    "HUMAN_FILE",
    "OFFICIAL_SPLITS",
    "PRODUCT_FILES",
    "REVIEW_FILE",
    "OfficialFiles",
    "OfficialSource",
    "find_official_files",
    "load_attributes",
    "load_human_instructions",
    "load_products",
    "official_goals",
    "parse_pricing",
    "write_official",
]

#: Product file names, in the order they are looked for in a folder.
PRODUCT_FILES = ("items_shuffle_1000.json", "items_shuffle.json")
#: Attribute file names, in the order they are looked for.
ATTRIBUTE_FILES = ("items_ins_v2_1000.json", "items_ins_v2.json")
HUMAN_FILE = "items_human_ins.json"
REVIEW_FILE = "reviews.json"
#: Slices of the shuffled goal list per split (WebShop's baselines).
OFFICIAL_SPLITS: dict[str, tuple[int, int | None]] = {
    "test": (0, 500),
    "eval": (500, 1500),
    "dev": (500, 1500),
    "train": (1500, None),
    "all": (0, None),
}
_GOAL_SHUFFLE_SEED = 233
_DEFAULT_PRICE = 100.0
_NUMBER_RE = re.compile(r"[^\d.]")


@dataclass(frozen=True)
class OfficialFiles:
    """The files of one WebShop data set (products required; the others optional)."""

    products: Path
    attributes: Path | None = None
    instructions: Path | None = None
    reviews: Path | None = None

    def present(self) -> dict[str, Path]:
        """Return the files that are given, by role."""
        roles = {"products": self.products, "attributes": self.attributes,
                 "instructions": self.instructions, "reviews": self.reviews}
        return {role: path for role, path in roles.items() if path is not None}


def _expected() -> str:
    return (f"products ({' or '.join(PRODUCT_FILES)}), attributes ({' or '.join(ATTRIBUTE_FILES)})"
            f" and/or human instructions ({HUMAN_FILE}), optionally {REVIEW_FILE}")


def _pick(folder: Path | None, given: str | Path | None, names: Sequence[str]) -> Path | None:
    if given is not None:
        path = Path(given).expanduser()
        if not path.is_file():
            raise DataError(f"{path}: no such file")
        return path
    if folder is None:
        return None
    return next((folder / n for n in names if (folder / n).is_file()), None)


def find_official_files(
    folder: str | Path | None = None,
    *,
    products: str | Path | None = None,
    attributes: str | Path | None = None,
    instructions: str | Path | None = None,
    reviews: str | Path | None = None,
) -> OfficialFiles:
    """Locate WebShop's files: explicit paths win over the folder's files of WebShop's names.

    Raises:
        DataError: naming the expected files when the products, or both the attributes and the
            human instructions, are missing.
    """
    root = Path(folder).expanduser() if folder is not None else None
    if root is not None and not root.is_dir() and products is None:
        raise DataError(f"{root}: no such folder; WebShop's data folder holds {_expected()}")
    found = OfficialFiles(
        products=_pick(root, products, PRODUCT_FILES),  # type: ignore[arg-type]
        attributes=_pick(root, attributes, ATTRIBUTE_FILES),
        instructions=_pick(root, instructions, (HUMAN_FILE,)),
        reviews=_pick(root, reviews, (REVIEW_FILE,)),
    )
    where = f" in {root}" if root is not None else ""
    if found.products is None:
        raise DataError(f"no WebShop product file{where}; expected {_expected()}")
    if found.attributes is None and found.instructions is None:
        raise DataError(f"no WebShop instructions{where}: expected {ATTRIBUTE_FILES[0]} or "
                        f"{HUMAN_FILE} beside {found.products.name}")
    return found


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot read JSON ({e})") from e


def parse_pricing(value: Any) -> tuple[float, ...]:
    """Read WebShop's ``pricing``: ``"$12.99"``, ``"$12.99 - $15.99"``, or a list of numbers.

    Returns:
        One price or the two ends of a range; ``()`` when there is none.
    """
    if value is None or value == "" or value == []:
        return ()
    if isinstance(value, (int, float)):
        return (float(value),)
    if isinstance(value, (list, tuple)):
        return tuple(float(v) for v in value[:2])
    prices = []
    for part in str(value).split("$")[1:]:
        digits = _NUMBER_RE.sub("", part)
        try:
            prices.append(float(Decimal(digits)))
        except InvalidOperation:
            continue
    return tuple(prices[:2])


def _price_in(pricing: tuple[float, ...], asin: str) -> float:
    if not pricing:
        return _DEFAULT_PRICE
    if len(pricing) == 1:
        return pricing[0]
    low, high = sorted(pricing[:2])
    return round(random.Random(f"webshop/price/{asin}").uniform(low, high), 2)


def _options(raw: Any) -> dict[str, tuple[str, ...]]:
    options: dict[str, tuple[str, ...]] = {}
    if not isinstance(raw, Mapping):
        return options
    for name, contents in raw.items():
        if not contents:
            continue
        values = []
        for content in contents:
            value = content.get("value") if isinstance(content, Mapping) else content
            if value is None:
                continue
            value = str(value).strip().replace("/", " | ").lower()
            if value and value not in values:
                values.append(value)
        if values:
            options[str(name).lower()] = tuple(values)
    return options


def _reviews(raw: Any) -> tuple[Review, ...]:
    reviews = []
    for item in raw or ():
        if not isinstance(item, Mapping):
            continue
        score = item.get("score", item.get("stars", 0))
        try:
            score = int(float(str(score).split()[0]))
        except (ValueError, IndexError):
            score = 0
        body = item.get("body", item.get("review", ""))
        reviews.append(Review(score, str(item.get("title", "")), str(body or "")))
    return tuple(reviews)


def _rating(value: Any) -> float | None:
    try:
        return float(str(value).split()[0])
    except (ValueError, IndexError):
        return None


def _title(record: Mapping[str, Any]) -> str:
    info = record.get("product_information")
    fallback = info.get("title", "") if isinstance(info, Mapping) else ""
    return str(record.get("name") or record.get("Title") or fallback or "").strip()


def _features(record: Mapping[str, Any]) -> tuple[str, ...]:
    raw = record.get("small_description", record.get("BulletPoints", record.get("about item")))
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    return tuple(str(x).strip() for x in items if str(x).strip())


def _product(record: Mapping[str, Any], attributes: Mapping[str, Any],
             reviews: Mapping[str, Mapping[str, Any]]) -> Product:
    asin = str(record["asin"]).strip().upper()
    pricing = parse_pricing(record.get("pricing"))
    hidden = attributes.get(asin, attributes.get(asin.lower(), {}))
    own = record.get("Attributes", record.get("attributes"))
    attrs = hidden.get("attributes") if isinstance(hidden, Mapping) else None
    review_record = reviews.get(asin, {})
    raw_reviews = record.get("Reviews", record.get("reviews")) or review_record.get("reviews")
    rating = record.get("average_rating", record.get("Rating", review_record.get("average_rating")))
    images = record.get("images") or ([record["MainImage"]] if record.get("MainImage") else [])
    return Product(
        asin=asin,
        title=_title(record),
        category=str(record.get("category", "")),
        product_category=str(record.get("product_category", "")),
        query=str(record.get("query", "")).lower().strip(),
        pricing=pricing or (_DEFAULT_PRICE,),
        price=_price_in(pricing, asin),
        description=str(record.get("full_description") or record.get("Description") or ""),
        features=_features(record),
        attributes=tuple(str(a) for a in (attrs or own or ())),
        options=_options(record.get("customization_options")),
        reviews=_reviews(raw_reviews),
        rating=_rating(rating),
        images=tuple(str(i) for i in images if i),
        brand=str(record.get("brand") or ""),
    )


def load_attributes(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read ``items_ins_v2*.json``: asin (upper case) to its record.

    Raises:
        DataError: the file is not a JSON object of objects.
    """
    data = _read_json(Path(path))
    if not isinstance(data, Mapping):
        raise DataError(f"{path}: expected a JSON object of asin to attribute records")
    return {str(k).upper(): dict(v) for k, v in data.items() if isinstance(v, Mapping)}


def load_human_instructions(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Read ``items_human_ins.json``: asin (upper case) to its instruction records.

    Raises:
        DataError: the file is not a JSON object of lists.
    """
    data = _read_json(Path(path))
    if not isinstance(data, Mapping):
        raise DataError(f"{path}: expected a JSON object of asin to instruction lists")
    return {str(k).upper(): [dict(r) for r in v if isinstance(r, Mapping)]
            for k, v in data.items() if isinstance(v, list)}


def load_products(
    path: str | Path,
    *,
    attributes: Mapping[str, Any] | None = None,
    reviews: str | Path | None = None,
) -> Catalog:
    """Read a WebShop product file into a catalogue.

    Args:
        path: ``items_shuffle*.json``.
        attributes: the records of :func:`load_attributes` (the products' hidden attributes).
        reviews: ``reviews.json``, for product files without their own reviews.

    Raises:
        DataError: the file is not a list of products, or holds no usable product.
    """
    data = _read_json(Path(path))
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of products")
    by_asin: dict[str, Mapping[str, Any]] = {}
    if reviews is not None:
        rows = _read_json(Path(reviews))
        if not isinstance(rows, list):
            raise DataError(f"{reviews}: expected a JSON list of review records")
        by_asin = {str(r.get("asin", "")).upper(): r for r in rows if isinstance(r, Mapping)}
    products: dict[str, Product] = {}
    for n, record in enumerate(data):
        if not isinstance(record, Mapping) or "asin" not in record:
            continue
        asin = str(record["asin"]).strip()
        if asin == "nan" or not asin or len(asin) > 10 or asin.upper() in products:
            continue
        try:
            products[asin.upper()] = _product(record, attributes or {}, by_asin)
        except (TypeError, ValueError, AttributeError) as e:
            raise DataError(f"{path}: product {n} ({asin}) is malformed: {e}") from e
    if not products:
        raise DataError(f"{path}: no product with a usable asin")
    return Catalog(list(products.values()), name=Path(path).name)


def _human_goal(product: Product, record: Mapping[str, Any], rng: random.Random) -> Goal | None:
    attributes = tuple(str(a) for a in record.get("instruction_attributes") or ())
    if not attributes:
        return None
    upper = (
        float(record["price_upper"]) if record.get("price_upper") else price_cap(product.price, rng)
    )
    text = str(record.get("instruction", "")).strip().strip(".") + price_clause(upper)
    return Goal(
        instruction=text,
        attributes=attributes,
        options=tuple(str(o) for o in record.get("instruction_options") or ()),
        price_upper=upper,
        query=product.query,
        category=product.category,
        product_category=product.product_category,
        name=product.title,
        asin=product.asin,
    )


def _synthetic_goal(product: Product, record: Mapping[str, Any],
                    rng: random.Random) -> Goal | None:
    instruction = record.get("instruction")
    attributes = tuple(str(a) for a in record.get("instruction_attributes") or ())
    if not instruction or not attributes:
        return None
    if record.get("instruction_options"):
        names: tuple[str, ...] = ()
        values = tuple(str(o) for o in record["instruction_options"])
        options_text = ""
    else:
        chosen = [(name, rng.choice(vals)) for name, vals in sorted(product.options.items())]
        names = tuple(n for n, _ in chosen)
        values = tuple(v for _, v in chosen)
        options_text = ", and ".join(f"{n}: {v}" for n, v in chosen)
    upper = price_cap(product.price, rng)
    with_options = f" with {options_text}" if options_text else ""
    return Goal(
        instruction=f"{str(instruction).strip()}{with_options}{price_clause(upper)}",
        attributes=attributes,
        options=values,
        price_upper=upper,
        query=product.query,
        category=product.category,
        product_category=product.product_category,
        name=product.title,
        asin=product.asin,
        option_names=names,
    )


def official_goals(
    catalog: Catalog,
    *,
    attributes: Mapping[str, Mapping[str, Any]] | None = None,
    human: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    seed: int = 0,
) -> list[Goal]:
    """Return WebShop's goals over ``catalog``, shuffled as WebShop shuffles them.

    Args:
        catalog: the products.
        attributes: the attribute records (synthetic instructions), used when ``human`` is None.
        human: the human instruction records.
        seed: the seed of the drawn prices caps and option choices.
    """
    goals: list[Goal] = []
    for product in catalog:
        if human is not None:
            for i, record in enumerate(human.get(product.asin, ())):
                rng = random.Random(f"webshop/official/{seed}/{product.asin}/{i}")
                goal = _human_goal(product, record, rng)
                if goal is not None:
                    goals.append(goal)
        elif attributes is not None and product.asin in attributes:
            rng = random.Random(f"webshop/official/{seed}/{product.asin}")
            goal = _synthetic_goal(product, attributes[product.asin], rng)
            if goal is not None:
                goals.append(goal)
    random.Random(_GOAL_SHUFFLE_SEED).shuffle(goals)
    return goals


def _split_slice(split: str) -> slice:
    if split not in OFFICIAL_SPLITS:
        raise ValueError(f"split must be one of {tuple(OFFICIAL_SPLITS)}, got {split!r}")
    start, stop = OFFICIAL_SPLITS[split]
    return slice(start, stop)


class OfficialSource(TaskSource):
    """WebShop's goals over its product file, each with an expert plan when one is found.

    Args:
        files: the data files.
        split: ``test``, ``eval``/``dev``, ``train`` or ``all``.
        seed: the seed of drawn price caps and options.
        search_top_k: how many results ``Search`` returns (for the expert plans).
        human: use the human instructions when present (WebShop's default); False uses the
            synthetic instructions of the attribute file.
    """

    kind = "official"

    def __init__(
        self,
        files: OfficialFiles,
        *,
        split: str = "test",
        seed: int = 0,
        search_top_k: int = DEFAULT_SEARCH_TOP_K,
        human: bool = True,
    ) -> None:
        self.files = files
        self.split = split
        self.seed = seed
        self.search_top_k = search_top_k
        self.human = human and files.instructions is not None
        self._slice = _split_slice(split)
        self._catalog: Catalog | None = None
        self._attributes: dict[str, dict[str, Any]] = {}
        self._tasks: list[Task] | None = None

    @property
    def catalog(self) -> Catalog:
        """Return the products (read once)."""
        if self._catalog is None:
            if self.files.attributes is not None:
                self._attributes = load_attributes(self.files.attributes)
            self._catalog = load_products(self.files.products, attributes=self._attributes,
                                          reviews=self.files.reviews)
        return self._catalog

    def load(self) -> list[Task]:
        """Build the split's tasks (once)."""
        if self._tasks is None:
            catalog = self.catalog
            if self.human:
                assert self.files.instructions is not None
                goals = official_goals(
                    catalog, seed=self.seed, human=load_human_instructions(self.files.instructions)
                )
            else:
                goals = official_goals(catalog, seed=self.seed, attributes=self._attributes)
            numbered = list(enumerate(goals))[self._slice]
            self._tasks = [
                task_from_goal(f"webshop/official/{self.split}/{n}", goal,
                               expert_plan(catalog, goal, search_top_k=self.search_top_k),
                               source="official")
                for n, goal in numbered
            ]
            if not self._tasks:
                raise DataError(f"WebShop split {self.split!r} has no goal in "
                                f"{self.files.products.parent}")
        return self._tasks

    def describe(self) -> dict[str, Any]:
        """Return the files with their SHA-256, the split and the seed."""
        files = {role: {"path": str(path), "sha256": file_sha256(path)}
                 for role, path in self.files.present().items()}
        return {"kind": self.kind, "split": self.split, "seed": self.seed, "human": self.human,
                "files": files}


def _product_record(product: Product) -> dict[str, Any]:
    if len(product.pricing) >= 2:
        pricing = f"${product.pricing[0]:.2f} - ${product.pricing[1]:.2f}"
    else:
        pricing = f"${product.price:.2f}"
    return {
        "asin": product.asin,
        "name": product.title,
        "full_description": product.description,
        "small_description": list(product.features),
        "pricing": pricing,
        "customization_options": {name: [{"value": v, "image": None} for v in values]
                                  for name, values in product.options.items()} or None,
        "images": list(product.images),
        "category": product.category,
        "query": product.query,
        "product_category": product.product_category,
        "brand": product.brand,
    }


def write_official(
    catalog: Catalog, folder: str | Path, *, goals: Sequence[Goal] = (), num_products: int = 1000
) -> OfficialFiles:
    """Write a catalogue (and goals) in WebShop's formats, under WebShop's file names.

    The products go to ``items_shuffle_1000.json`` (reviews to ``reviews.json``), their hidden
    attributes to ``items_ins_v2_1000.json`` and the goals to ``items_human_ins.json`` as human
    instructions (the instruction without its price clause, attributes and option values).

    Args:
        catalog: the products.
        folder: where the files go (created).
        goals: instructions to write.
        num_products: write only the first ``num_products`` products.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    products = list(catalog)[:num_products]
    files = OfficialFiles(root / PRODUCT_FILES[0], root / ATTRIBUTE_FILES[0], root / HUMAN_FILE,
                          root / REVIEW_FILE)
    reviews = [{"asin": p.asin, "average_rating": p.rating,
                "reviews": [{"title": r.title, "score": r.score, "body": r.body}
                            for r in p.reviews]} for p in products]
    attributes = {p.asin: {"attributes": list(p.attributes), "instruction": None,
                           "instruction_attributes": []} for p in products}
    human: dict[str, list[dict[str, Any]]] = {}
    for n, goal in enumerate(goals):
        text = goal.instruction.split(", and price lower than")[0]
        human.setdefault(goal.asin, []).append({
            "asin": goal.asin, "instruction": text, "instruction_attributes": list(goal.attributes),
            "instruction_options": list(goal.options), "price_upper": goal.price_upper,
            "assignment_id": f"lumos-gym-{n}", "worker_id": "lumos-gym",
        })
    for path, data in ((files.products, [_product_record(p) for p in products]),
                       (files.reviews, reviews), (files.attributes, attributes),
                       (files.instructions, human)):
        assert path is not None
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return files
