"""Shop pages as an agent sees them: WebShop's ``[SEP]`` text, simplified HTML, clickables.

:func:`parse_page` reads a page of the shop site in one pass and keeps:

* its text observation as WebShop's text mode writes it: every visible text node (not in
  ``head``, ``script``, ``style`` or ``title``, no comments), stripped, joined by ``" [SEP] "``
  (``princeton-nlp/WebShop``, ``web_agent_site/envs/web_agent_text_env.py``,
  ``convert_html_to_text(simple=True)``), leaving out whitespace-only nodes, which WebShop
  joins as empty strings;
* its clickables: the links that carry an ``id`` (the site gives every element an agent can act
  on a stable id), named as WebShop names them: a product by its asin in lower case, any other
  element by its text in lower case (``back to search``, ``< prev``, ``next >``, ``black``,
  ``description``, ``buy now``). The list puts buttons and product links first and option
  values last, as WebShop's ``get_available_actions`` does (which Lumos' ``FeatureRetrieve``
  relied on);
* the search form's action, when the page has one, the result list of a results page and the
  reward written on the done page.

:func:`simplify_html` gives the ``html`` observation mode: the body without scripts, styles and
comments, each element keeping only the attributes that say what it is or does (``id``,
``class``, ``href``, ``name``, ``value``, ``type``, ``data-*``...), whitespace collapsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from bs4 import BeautifulSoup, Comment, Tag

__all__ = [
    "SEP",
    "Clickable",
    "ParsedPage",
    "ResultItem",
    "normalize_name",
    "parse_page",
    "simplify_html",
]

SEP = " [SEP] "
_HIDDEN = frozenset({"head", "script", "style", "title", "template", "noscript"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})
_KEPT_ATTRIBUTES = frozenset({"id", "class", "href", "name", "value", "type", "action", "method",
                              "selected", "placeholder", "for", "alt", "src"})
_SPACE_RE = re.compile(r"\s+")
_BETWEEN_TAGS_RE = re.compile(r">\s+<")


def normalize_name(text: str) -> str:
    """Return ``text`` as clickables are named: lower case, one space between words."""
    return _SPACE_RE.sub(" ", text).strip().lower()


@dataclass(frozen=True)
class Clickable:
    """One element the agent can click.

    Attributes:
        name: what ``Click`` calls it (the asin for a product, else the lower-case text).
        text: the element's text as shown.
        href: the absolute URL it leads to.
        element_id: its ``id`` attribute.
        kind: ``product``, ``option``, ``page`` (result paging), ``tab`` (item sub-pages),
            ``buy`` or ``nav``.
        asin: the product of a product link.
        group: the option group of an option.
        selected: whether an option is the chosen one.
    """

    name: str
    text: str
    href: str
    element_id: str
    kind: str
    asin: str = ""
    group: str = ""
    selected: bool = False


@dataclass(frozen=True)
class ResultItem:
    """One product of a results page."""

    asin: str
    title: str
    price: str


@dataclass(frozen=True)
class ParsedPage:
    """A fetched page and what the agent can read and do on it.

    Attributes:
        url: the page's URL.
        kind: the page kind from ``<body data-page>``: ``search``, ``results``, ``item``,
            ``description``, ``features``, ``reviews``, ``attributes``, ``done`` or ``error``.
        html: the page's HTML.
        text: the ``[SEP]``-joined text observation.
        clickables: the clickable elements (buttons and products first, options last).
        search_action: the absolute URL the search form submits to, or None.
        results: the products listed on a results page.
        reward: the reward written on a done page, or None.
    """

    url: str
    kind: str
    html: str
    text: str
    clickables: tuple[Clickable, ...]
    search_action: str | None = None
    results: tuple[ResultItem, ...] = ()
    reward: float | None = None

    @property
    def has_search(self) -> bool:
        """Return True when the page has the search form."""
        return self.search_action is not None

    def names(self) -> list[str]:
        """Return the clickables' names, in order (what WebShop lists as clickables)."""
        return [c.name for c in self.clickables]

    def find(self, target: str) -> Clickable | None:
        """Return the clickable called ``target`` (case and spacing ignored), or None.

        A product is found by its asin or its title; anything else by its text.
        """
        wanted = normalize_name(target)
        for clickable in self.clickables:
            if wanted in (clickable.name, normalize_name(clickable.text)):
                return clickable
        return None


class _PageReader(HTMLParser):
    """One pass over a page: visible text, links with their context, and marked elements.

    The standard library's event parser reads a page several times faster than building a
    BeautifulSoup tree, which matters because every step of an episode reads a page; the
    tests check that its text equals the text BeautifulSoup finds on every kind of page.
    """

    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        parts = urlsplit(base_url)
        self._origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
        self.texts: list[str] = []
        self.kind = ""
        self.search_action: str | None = None
        self.clickables: list[Clickable] = []
        self.results: list[ResultItem] = []
        self.reward_text: str | None = None
        self._stack: list[tuple[str, dict[str, str]]] = []
        self._hidden = 0
        self._captures: list[tuple[int, str, dict[str, str], list[str]]] = []
        self._row: dict[str, str] = {}  # the product row being read (asin, title, price)
        self._row_depth: int | None = None  # the stack depth of its element

    def _absolute(self, href: str) -> str:
        if href.startswith("/") and not href.startswith("//") and self._origin:
            return self._origin + href  # the site's links are absolute paths
        return urljoin(self.base_url, href)

    def _nearest(self, attribute: str) -> str:
        for _, attrs in reversed(self._stack):
            if attrs.get(attribute):
                return attrs[attribute]
        return ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.kind = values.get("data-page", "")
        elif tag == "form" and values.get("id") == "search-form":
            self.search_action = self._absolute(values.get("action", ""))
        if tag in _VOID:
            return
        if "data-asin" in values and self._row_depth is None:
            self._row, self._row_depth = {"asin": values["data-asin"]}, len(self._stack)
        self._stack.append((tag, values))
        if tag in _HIDDEN:
            self._hidden += 1
        classes = values.get("class", "").split()
        if (
            (tag == "a" and values.get("id") and "href" in values)
            or values.get("id") == "reward"
            or "product-price" in classes
        ):
            self._captures.append((len(self._stack), tag, values, []))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or not any(open_tag == tag for open_tag, _ in self._stack):
            return
        while self._stack:
            open_tag, values = self._stack[-1]
            depth = len(self._stack)
            while self._captures and self._captures[-1][0] == depth:
                self._finish(*self._captures.pop()[1:])
            self._stack.pop()
            if open_tag in _HIDDEN:
                self._hidden -= 1
            if self._row_depth == len(self._stack):
                self._end_row()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        text = data.strip()
        if not text:
            return
        self.texts.append(text)
        for capture in self._captures:
            capture[3].append(text)

    def _finish(self, tag: str, values: dict[str, str], parts: list[str]) -> None:
        text = " ".join(parts)
        if values.get("id") == "reward":
            self.reward_text = text
        if "product-price" in values.get("class", "").split() and self._row_depth is not None:
            self._row["price"] = text
        if tag == "a" and values.get("id") and "href" in values:
            clickable = self._clickable(values, text)
            self.clickables.append(clickable)
            if clickable.kind == "product" and self._row_depth is not None:
                self._row["title"] = text

    def _end_row(self) -> None:
        row, self._row, self._row_depth = self._row, {}, None
        if "title" in row:
            self.results.append(ResultItem(row["asin"], row["title"], row.get("price", "")))

    def _clickable(self, values: dict[str, str], text: str) -> Clickable:
        classes = values.get("class", "").split()
        element_id = values["id"]
        href = self._absolute(values.get("href", ""))
        if "product-link" in classes:
            asin = self._nearest("data-asin")
            return Clickable(asin.lower() or normalize_name(text), text, href, element_id,
                             "product", asin=asin)
        if "option" in classes:
            return Clickable(
                normalize_name(text),
                text,
                href,
                element_id,
                "option",
                group=self._nearest("data-name"),
                selected="selected" in classes,
            )
        if "page-link" in classes:
            kind = "page"
        elif element_id == "buy-now":
            kind = "buy"
        elif element_id.startswith("tab-"):
            kind = "tab"
        else:
            kind = "nav"
        return Clickable(normalize_name(text), text, href, element_id, kind)


def parse_page(html: str, url: str) -> ParsedPage:
    """Read a shop page (see the module docstring).

    Args:
        html: the page's HTML.
        url: its URL (relative links are resolved against it).
    """
    reader = _PageReader(url)
    reader.feed(html)
    reader.close()
    clicks = reader.clickables
    ordered = tuple([c for c in clicks if c.kind != "option"] +
                    [c for c in clicks if c.kind == "option"])
    reward = None
    if reader.reward_text is not None:
        try:
            reward = float(reader.reward_text)
        except ValueError:
            reward = None
    return ParsedPage(
        url=url,
        kind=reader.kind,
        html=html,
        text=SEP.join(reader.texts),
        clickables=ordered,
        search_action=reader.search_action,
        results=tuple(reader.results) if reader.kind == "results" else (),
        reward=reward,
    )


def simplify_html(html: str) -> str:
    """Return the page's body with only meaningful tags and attributes (the ``html`` mode)."""
    soup = BeautifulSoup(html, "html.parser")
    root = soup.body or soup
    for tag in root.find_all(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    for node in root.find_all(string=lambda s: isinstance(s, Comment)):
        node.extract()
    for tag in [root, *root.find_all(True)]:
        if not isinstance(tag, Tag):
            continue
        tag.attrs = {k: v for k, v in tag.attrs.items()
                     if k in _KEPT_ATTRIBUTES or k.startswith("data-")}
    text = _BETWEEN_TAGS_RE.sub("><", str(root))
    return _SPACE_RE.sub(" ", text).strip()
