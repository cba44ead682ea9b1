"""Record Mind2Web-format tasks from the offline shop site (:mod:`lumos_gym.envs.web.shop`).

A shopping goal (search a query, maybe sort the results, page to the product, open it, choose
its options, buy it) is played on a real shop server on loopback by a small recording browser
that reads the pages' HTML, types into fields, submits forms and follows links over HTTP (no
JavaScript: the site needs none). Before each action the page is recorded as Mind2Web records
it (the layout of the ``osunlp/Mind2Web`` dataset card; see
:mod:`lumos_gym.envs.web.mind2web_data`):

* ``raw_html``: the page as served, every element numbered with a ``backend_node_id``
  attribute in document order, and the browser state written as Mind2Web writes it (typed text
  as ``input_value``, a chosen option as ``selected``);
* ``cleaned_html``: our cleaning of it: no head, scripts, styles, comments or hidden inputs;
  each element keeps only its ``backend_node_id`` and the attributes that say what it is
  (``type``, ``name``, ``value``, ``placeholder``, ``aria_label``, ``title``, ``alt``,
  ``role``, ``input_value``, ``option_selected``); empty non-interactive elements are dropped;
* ``pos_candidates``: the element acted on; ``neg_candidates``: every other interactive
  element of the page (links, buttons, inputs, selects, text areas), each with its ``tag``,
  its ``attributes`` as a JSON string, ``backend_node_id``, ``is_original_target`` and
  ``is_top_level_target``;
* ``operation``: ``op`` CLICK/TYPE/SELECT, ``original_op`` (ENTER for submitting the search by
  pressing Enter in the box) and ``value``; ``action_reprs``: ``[role]  name -> OP: value``,
  the element named by its accessibility role and name as Mind2Web's strings name it.

The recording is checked: the last action (``Buy Now``) must buy the goal's product with the
goal's options. :func:`record_tasks` records a seeded task set (train or test products of the
shop's split, so the two share no target product). The ``validation`` split (for choices made
before a test run) is recorded on the validation shop
(:func:`~lumos_gym.envs.web.shop.catalog.validation_catalog`: the same shop with products of
its own added) and targets only those added products, whose titles no other product of the shop
has, so it shares no target product, hence no task, with the train and test splits.
:func:`write_bundled` writes the set shipped in ``lumos_gym/envs/data/mind2web/``::

    python -m lumos_gym.envs.web.mind2web_record --out lumos_gym/envs/data/mind2web
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import random
import re
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from lumos_gym.envs import datasets as data
from lumos_gym.envs.tasks import Task
from lumos_gym.envs.web.mind2web_data import load_mind2web
from lumos_gym.envs.web.shop.catalog import asin_split, generate_catalog, validation_catalog
from lumos_gym.errors import LumosGymError

if TYPE_CHECKING:
    import httpx
    from bs4 import BeautifulSoup, Tag

    from lumos_gym.envs.web.shop.catalog import Catalog, Product

__all__ = [
    "BUNDLED_FILE",
    "VALIDATION_SPLIT",
    "WEBSITE",
    "RecordingBrowser",
    "ShopGoal",
    "action_repr",
    "clean_html",
    "interactive_elements",
    "make_goals",
    "record_goal",
    "record_records",
    "record_tasks",
    "write_bundled",
    "write_records",
]

#: The website name written in recorded tasks.
WEBSITE = "lumos-shop"
#: The file of the bundled set, under ``data/mind2web/<split>/``.
BUNDLED_FILE = "shop_recorded.json.gz"
#: Catalogue of the recordings: the shop's generator with these parameters.
CATALOG_SEED = 0
CATALOG_SIZE = 1000
#: The split recorded on the validation shop, from the products only that shop holds.
VALIDATION_SPLIT = "validation"
_MAX_RESULT_PAGES = 3
_ATTEMPTS_PER_TASK = 40
_DROPPED = ("head", "script", "style", "noscript", "template", "meta", "link", "title")
_KEPT = frozenset({"backend_node_id", "type", "name", "value", "placeholder", "aria_label",
                   "title", "alt", "role", "input_value", "option_selected"})
_ROLES = {"a": "link", "button": "button", "select": "combobox", "textarea": "textbox"}
_INPUT_ROLES = {"search": "searchbox", "submit": "button", "button": "button",
                "checkbox": "checkbox", "radio": "radio"}
_NAMING = ("aria-label", "aria_label", "placeholder", "title", "alt", "value", "name")


# ---------------------------------------------------------------------------------------------
# Pages: numbering, cleaning, candidates, names


def _soup(html: str) -> BeautifulSoup:
    from bs4 import BeautifulSoup

    return BeautifulSoup(html, "html.parser")


def number_elements(soup: BeautifulSoup) -> None:
    """Give every element a ``backend_node_id``, 1, 2, ... in document order."""
    for n, element in enumerate(soup.find_all(True), 1):
        element["backend_node_id"] = str(n)


def _is_hidden_input(element: Tag) -> bool:
    return element.name == "input" and str(element.get("type", "")).lower() == "hidden"


def _is_interactive(element: Tag) -> bool:
    if element.name == "a":
        return element.get("href") is not None
    if element.name == "input":
        return not _is_hidden_input(element)
    return element.name in ("button", "select", "textarea")


def interactive_elements(soup: BeautifulSoup) -> list[Tag]:
    """Return the elements a user can act on: links, buttons, visible inputs, selects."""
    return [
        el
        for el in soup.find_all(True)
        if _is_interactive(el) and el.find_parent(_DROPPED) is None and el.name not in _DROPPED
    ]


def _attribute_text(value: Any) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


def clean_html(soup: BeautifulSoup) -> str:
    """Return our cleaned HTML of a numbered page (see the module docstring)."""
    from bs4 import Comment, Doctype

    page = copy.copy(soup)
    for element in page.find_all(_DROPPED):
        element.decompose()
    for node in page.find_all(string=lambda s: isinstance(s, (Comment, Doctype))):
        node.extract()
    for element in page.find_all("input"):
        if _is_hidden_input(element):
            element.decompose()
    for element in page.find_all(True):
        kept = {}
        for key, value in element.attrs.items():
            name = key.replace("-", "_") if key.startswith("aria-") else key
            if name == "selected" and element.name == "option":
                kept["option_selected"] = "true"
            elif name in _KEPT:
                kept[name] = _attribute_text(value)
        element.attrs = kept
    for element in reversed(page.find_all(True)):
        if element.name in ("html", "body") or _is_interactive(element):
            continue
        if element.name == "option" or element.find(True) is not None:
            continue
        if not element.get_text(strip=True) and not element.get("alt"):
            element.decompose()
    text = str(page)
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", text)).strip()


def _label_for(element: Tag) -> str:
    ident = element.get("id")
    if not ident:
        return ""
    root = element
    while root.parent is not None:
        root = root.parent
    label = root.find("label", attrs={"for": ident})
    return " ".join(label.get_text(" ", strip=True).split()) if label is not None else ""


def element_role(element: Tag) -> str:
    """Return the element's accessibility role as Mind2Web's strings write it."""
    if element.get("role"):
        return str(element["role"])
    if element.name == "input":
        kind = str(element.get("type", "text")).lower()
        return _INPUT_ROLES.get(kind, "textbox")
    return _ROLES.get(element.name, element.name)


def element_name(element: Tag) -> str:
    """Return the element's accessible name: its label, its text or a naming attribute."""
    if element.name in ("input", "select", "textarea"):
        label = _label_for(element)
        if label:
            return label
    if element.name != "select":
        text = " ".join(element.get_text(" ", strip=True).split())
        if text:
            return text
    for key in _NAMING:
        value = element.get(key)
        if value:
            return " ".join(_attribute_text(value).split())
    return ""


def action_repr(element: Tag, original_op: str, value: str = "") -> str:
    """Return the ``action_reprs`` string of an action: ``[role]  name -> OP: value``."""
    head = f"[{element_role(element)}]  {element_name(element)} -> {original_op}"
    return f"{head}: {value}" if original_op in ("TYPE", "SELECT") else head


def _candidate_record(element: Tag, positive: bool) -> dict[str, Any]:
    attributes = {key: _attribute_text(value) for key, value in element.attrs.items()}
    node_id = attributes["backend_node_id"]
    return {
        "tag": element.name,
        "attributes": json.dumps(attributes, ensure_ascii=False),
        "backend_node_id": node_id,
        "is_original_target": positive,
        "is_top_level_target": positive,
    }


# ---------------------------------------------------------------------------------------------
# The recording browser


@dataclass
class Screen:
    """A page in the browser: its URL, the served HTML and the state typed or chosen on it.

    Attributes:
        url: the page's URL.
        html: the HTML as served.
        soup: the numbered page, with the browser state written into it.
    """

    url: str
    html: str
    soup: BeautifulSoup = field(repr=False)

    def by_id(self, ident: str) -> Tag:
        """Return the element with HTML id ``ident``.

        Raises:
            LumosGymError: when the page has none.
        """
        element = self.soup.find(id=ident)
        if element is None:
            raise LumosGymError(f"{self.url}: no element with id {ident!r}")
        return element


class RecordingBrowser:
    """Browses the shop over HTTP and records each page before an action.

    Args:
        client: an ``httpx.Client`` (its base URL the server's).
    """

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def open(self, url: str) -> Screen:
        """Fetch ``url`` (relative to the server) and return its screen.

        Raises:
            LumosGymError: an HTTP error or an error status.
        """
        import httpx

        try:
            response = self.client.get(url)
        except httpx.HTTPError as e:
            raise LumosGymError(f"cannot fetch {url}: {type(e).__name__}: {e}") from e
        if response.status_code >= 400:
            raise LumosGymError(f"GET {url}: HTTP {response.status_code}")
        soup = _soup(response.text)
        number_elements(soup)
        return Screen(str(response.url), response.text, soup)

    def follow(self, screen: Screen, link: Tag) -> Screen:
        """Click a link: fetch its ``href``."""
        return self.open(urljoin(screen.url, str(link["href"])))

    def submit(self, screen: Screen, form: Tag) -> Screen:
        """Submit a GET form with its fields' current values (typed text, chosen options)."""
        if str(form.get("method", "get")).lower() != "get":
            raise LumosGymError("the recording browser submits GET forms only")
        fields: list[tuple[str, str]] = []
        for element in form.find_all(["input", "select", "textarea"]):
            name = element.get("name")
            if not name:
                continue
            if element.name == "select":
                chosen = element.find("option", selected=True) or element.find("option")
                value = str(chosen.get("value", chosen.get_text(strip=True))) if chosen else ""
            elif element.name == "input" and element.get("type") in ("submit", "button"):
                continue
            else:
                value = str(element.get("input_value", element.get("value", "")))
            fields.append((str(name), value))
        action = urljoin(screen.url, str(form.get("action") or screen.url))
        parts = urlsplit(action)
        query = urlencode(parse_qsl(parts.query) + fields)
        return self.open(urlunsplit((parts.scheme, parts.netloc, parts.path, query, "")))

    @staticmethod
    def type_into(element: Tag, text: str) -> None:
        """Type ``text`` into a field (recorded as Mind2Web's ``input_value``)."""
        element["input_value"] = text

    @staticmethod
    def choose(select: Tag, label: str) -> None:
        """Choose the option of ``select`` whose text is ``label``.

        Raises:
            LumosGymError: when there is no such option.
        """
        options = select.find_all("option")
        chosen = [o for o in options if " ".join(o.get_text().split()) == label]
        if not chosen:
            raise LumosGymError(f"no option {label!r} in the select")
        for option in options:
            if option is chosen[0]:
                option["selected"] = ""
            elif "selected" in option.attrs:
                del option["selected"]


class _Recorder:
    """Collects the steps of one task."""

    def __init__(self, annotation_id: str) -> None:
        self.annotation_id = annotation_id
        self.actions: list[dict[str, Any]] = []
        self.reprs: list[str] = []

    def record(self, screen: Screen, target: Tag, op: str, original_op: str, value: str) -> None:
        candidates = interactive_elements(screen.soup)
        if target not in candidates:
            raise LumosGymError(f"{screen.url}: the target is not an interactive element")
        step = len(self.actions)
        digest = hashlib.sha256(f"{self.annotation_id}/{step}".encode()).digest()
        self.actions.append({
            "action_uid": str(uuid.UUID(bytes=digest[:16], version=4)),
            "raw_html": str(screen.soup),
            "cleaned_html": clean_html(screen.soup),
            "operation": {"op": op, "original_op": original_op, "value": value},
            "pos_candidates": [_candidate_record(target, True)],
            "neg_candidates": [_candidate_record(c, False) for c in candidates if c is not target],
        })
        self.reprs.append(action_repr(target, original_op, value))


# ---------------------------------------------------------------------------------------------
# Goals


@dataclass(frozen=True)
class ShopGoal:
    """What one recorded task does on the shop.

    Attributes:
        asin: the product bought.
        title: its title.
        category: its department (the task's subdomain).
        query: the text searched.
        options: option name to the value chosen, in page order.
        sort: the label of the sort order chosen, or None to keep relevance.
        submit: ``"click"`` (the Search button) or ``"enter"`` (Enter in the search box).
        wording: which task sentence template to use.
    """

    asin: str
    title: str
    category: str
    query: str
    options: Mapping[str, str]
    sort: str | None
    submit: str
    wording: int

    def task_text(self) -> str:
        """Return the task as Mind2Web's ``confirmed_task`` states it."""
        chosen = " and ".join(f"{name} {value}" for name, value in self.options.items())
        with_options = f" with {chosen}" if chosen else ""
        sort = f", sort the results by {self.sort.lower()}" if self.sort else ""
        sorted_by = f" sorted by {self.sort.lower()}" if self.sort else ""
        texts = (
            f"Search for {self.query}{sort}, open {self.title} and buy it{with_options}.",
            f"Buy {self.title}{with_options}, found by searching for {self.query}{sorted_by}.",
            f"Look up {self.query}{sorted_by} and purchase {self.title}{with_options}.",
        )
        return texts[self.wording % len(texts)]


def _queries(product: Product) -> list[str]:
    title = product.title.split(",")[0]
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", title) if w.lower() != "and"]
    without_brand = " ".join(words[len(product.brand.split()) :]).lower()
    return [product.query, f"{product.brand} {product.query}".lower(), without_brand]


def make_goals(catalog: Catalog, split: str, num_tasks: int, seed: int) -> Iterator[ShopGoal]:
    """Yield candidate goals for a split's products (more than needed; some will not record).

    Test splits target the shop's test products and ``train`` its train products
    (:func:`~lumos_gym.envs.web.shop.catalog.asin_split`), so the two share no target;
    :data:`VALIDATION_SPLIT` targets the products only the validation shop holds. Products
    whose title another product shares are never targets.
    """
    from lumos_gym.envs.web.shop.app import SORTS  # optional web extra: fastapi

    side = "train" if split == "train" else "test"
    titles = Counter(p.title.lower() for p in catalog)
    # a title that two products share would make the task ambiguous
    if split == VALIDATION_SPLIT:
        side = "validation"
        pool = [p for p in catalog
                if p.asin.upper() in catalog.validation_asins and titles[p.title.lower()] == 1]
    else:
        pool = [p for p in catalog
                if asin_split(p.asin) == side and titles[p.title.lower()] == 1
                and p.asin.upper() not in catalog.validation_asins]
    if not pool:
        raise LumosGymError(f"the catalogue has no {side} products")
    rng = random.Random(f"mind2web/record/{split}/{seed}")
    sorts = [label for value, label in SORTS if value != "relevance"]
    for n in range(num_tasks * _ATTEMPTS_PER_TASK):
        product = rng.choice(pool)
        options = {name: rng.choice(values) for name, values in product.options.items() if values}
        yield ShopGoal(
            asin=product.asin,
            title=product.title,
            category=product.category,
            query=rng.choice(_queries(product)),
            options=options,
            sort=rng.choice(sorts) if rng.random() < 0.35 else None,
            submit="enter" if rng.random() < 0.5 else "click",
            wording=n,
        )


def _find_product(screen: Screen, asin: str) -> Tag | None:
    for link in screen.soup.find_all("a", class_="product-link"):
        row = link.find_parent(attrs={"data-asin": True})
        if row is not None and str(row["data-asin"]).upper() == asin.upper():
            return link
    return None


def record_goal(browser: RecordingBrowser, goal: ShopGoal, session: str, annotation_id: str,
                ) -> dict[str, Any] | None:
    """Play a goal on the shop and return its official-format task record.

    Returns:
        The record, or None when the product is not on the first result pages.

    Raises:
        LumosGymError: the site does not follow the conventions, or the purchase is wrong.
    """
    rec = _Recorder(annotation_id)
    screen = browser.open(f"/s/{session}/")
    box = screen.by_id("search-input")
    rec.record(screen, box, "TYPE", "TYPE", goal.query)
    browser.type_into(box, goal.query)
    if goal.submit == "enter":
        rec.record(screen, box, "CLICK", "ENTER", "")
    else:
        rec.record(screen, screen.by_id("search-button"), "CLICK", "CLICK", "")
    screen = browser.submit(screen, screen.by_id("search-form"))
    if goal.sort:
        select = screen.by_id("sort-select")
        rec.record(screen, select, "SELECT", "SELECT", goal.sort)
        browser.choose(select, goal.sort)
        rec.record(screen, screen.by_id("sort-button"), "CLICK", "CLICK", "")
        screen = browser.submit(screen, screen.by_id("sort-form"))
    link = _find_product(screen, goal.asin)
    for _ in range(_MAX_RESULT_PAGES - 1):
        if link is not None:
            break
        following = screen.soup.find(id="next-page")
        if following is None:
            return None
        rec.record(screen, following, "CLICK", "CLICK", "")
        screen = browser.follow(screen, following)
        link = _find_product(screen, goal.asin)
    if link is None:
        return None
    rec.record(screen, link, "CLICK", "CLICK", "")
    screen = browser.follow(screen, link)
    for name, value in goal.options.items():
        group = screen.soup.find("div", class_="option-group", attrs={"data-name": name})
        options = group.find_all("a", class_="option") if group is not None else []
        option = next((o for o in options if o.get_text(strip=True) == value), None)
        if option is None:
            raise LumosGymError(f"{screen.url}: no option {name}={value!r}")
        rec.record(screen, option, "CLICK", "CLICK", "")
        screen = browser.follow(screen, option)
    buy = screen.by_id("buy-now")
    rec.record(screen, buy, "CLICK", "CLICK", "")
    _check_purchase(browser.follow(screen, buy), goal)
    return {
        "annotation_id": annotation_id,
        "website": WEBSITE,
        "domain": "Shopping",
        "subdomain": goal.category.title(),
        "confirmed_task": goal.task_text(),
        "action_reprs": rec.reprs,
        "actions": rec.actions,
    }


def _check_purchase(done: Screen, goal: ShopGoal) -> None:
    asin = done.soup.find(id="purchased-asin")
    bought = asin.get_text(strip=True).upper() if asin is not None else ""
    items = done.soup.find(id="purchased-options")
    chosen = {}
    for item in items.find_all("li") if items is not None else ():
        name, _, value = item.get_text(strip=True).partition(": ")
        chosen[name] = value
    if bought != goal.asin.upper() or chosen != dict(goal.options):
        raise LumosGymError(
            f"the recording bought {bought} {chosen}, the goal is {goal.asin} {dict(goal.options)}"
        )


# ---------------------------------------------------------------------------------------------
# Task sets


def _annotation_id(split: str, seed: int, number: int) -> str:
    digest = hashlib.sha256(f"lumos-gym/mind2web/shop/{split}/{seed}/{number}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def record_records(
    base_url: str,
    catalog: Catalog,
    *,
    split: str = "test_website",
    num_tasks: int = 24,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Record ``num_tasks`` tasks on a running shop server; return the official records.

    Args:
        base_url: the server's ``http://127.0.0.1:<port>``.
        catalog: the server's catalogue (goals are drawn from it).
        split: ``train`` draws the shop's train products, :data:`VALIDATION_SPLIT` the products
            only the validation shop holds (``catalog`` must be that shop), any other split its
            test products.
        num_tasks: how many tasks.
        seed: the goal seed; the same seed, split and catalogue give the same records.

    Raises:
        LumosGymError: when too few goals can be recorded, or the site breaks a convention.
    """
    import httpx

    records: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    with httpx.Client(base_url=base_url, timeout=30.0, trust_env=False,
                      follow_redirects=True) as client:
        browser = RecordingBrowser(client)
        for goal in make_goals(catalog, split, num_tasks, seed):
            if len(records) >= num_tasks:
                break
            if (goal.asin, goal.query) in seen:
                continue
            number = len(records)
            session = f"m2w-{split}-{seed}-{goal.wording}"
            record = record_goal(browser, goal, session, _annotation_id(split, seed, number))
            if record is not None:
                seen.add((goal.asin, goal.query))
                records.append(record)
    if len(records) < num_tasks:
        raise LumosGymError(f"recorded only {len(records)} of {num_tasks} tasks")
    return records


def _record_with_server(split: str, num_tasks: int, seed: int, num_products: int
                        ) -> list[dict[str, Any]]:
    from lumos_gym.envs.web.shop.server import ShopServer  # optional web extra: httpx

    make_shop = validation_catalog if split == VALIDATION_SPLIT else generate_catalog
    catalog = make_shop(seed=CATALOG_SEED, num_products=num_products)
    with ShopServer(catalog) as server:
        return record_records(server.base_url, catalog, split=split, num_tasks=num_tasks,
                              seed=seed)


def write_records(records: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write task records as an official JSON file (gzipped, reproducibly, for ``.gz``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(list(records), ensure_ascii=False, separators=(",", ":")) + "\n"
    data = text.encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=9, mtime=0)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def record_tasks(
    *,
    split: str = "test_website",
    num_tasks: int = 24,
    seed: int = 0,
    num_products: int = CATALOG_SIZE,
    cache: bool = True,
) -> list[Task]:
    """Record a task set on a shop server started for it, and load it as Mind2Web tasks.

    The records are written in the official format under ``<cache>/data/mind2web-shop/`` (and
    read back from there, so recorded and official data go through one loader); with ``cache``
    a set recorded before with the same parameters is read instead of recorded again.

    Args:
        split: the split (``train`` draws train products, :data:`VALIDATION_SPLIT` the products
            the validation shop adds, any other its test products).
        num_tasks: how many tasks.
        seed: the goal seed.
        num_products: the size of the shop's generated catalogue (the validation shop adds
            ``num_products // 5`` products to it).
        cache: reuse an earlier recording of the same parameters.
    """
    name = f"{split}-seed{seed}-n{num_tasks}-p{num_products}.json"
    path = data.cache_root() / "data" / "mind2web-shop" / split / name
    if not (cache and path.is_file()):
        write_records(_record_with_server(split, num_tasks, seed, num_products), path)
    return load_mind2web(path, split)


def write_bundled(out: str | Path, *, split: str = "test_website", num_tasks: int = 24,
                  seed: int = 0) -> Path:
    """Record the bundled set and write it as ``<out>/<split>/shop_recorded.json.gz``."""
    path = Path(out) / split / BUNDLED_FILE
    write_records(_record_with_server(split, num_tasks, seed, CATALOG_SIZE), path)
    return path


def main(argv: Sequence[str] | None = None) -> None:
    """Record a task set from the shop site into a folder (the bundled set by default)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default="lumos_gym/envs/data/mind2web")
    parser.add_argument("--split", default="test_website")
    parser.add_argument("--num-tasks", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_bundled(args.out, split=args.split, num_tasks=args.num_tasks, seed=args.seed)
    print(f"{path}: {len(load_mind2web(path, args.split))} tasks")


if __name__ == "__main__":
    main()
