"""Lumos' WebShop actions on the shop site: ``Search``, ``Click``, ``FeatureRetrieve``, ``Pick``.

They act on the episode's shop session (``ToolContext.session``, a
:class:`~lumos_gym.envs.web.webshop.ShopSession`), as Lumos' ``eval/webshop/shop_tool.py`` acts on
WebShop's text env (docs/lumos-format.md §2.4):

* ``R1 = Search(<query>)`` submits the search form and binds the top results as
  ``asin - title ** asin - title`` (asins in lower case; ``top_k`` results, 2 by default as in
  Lumos, which took the two product clickables after ``back to search`` and ``next >``);
* ``R2 = Click(<item>)`` follows a clickable of the current page (an asin, an option value,
  ``< prev``, ``back to search``, ``next >``, ``description``, ``buy now``..., or an ``R<k>``
  holding one) and binds the new page's clickables, comma-separated (WebShop's list: buttons and
  products first, options last); clicking ``buy now`` binds the purchase's reward instead and
  ends the episode;
* ``R3 = FeatureRetrieve(R2, Query: ...)`` ranks the features in a clickables list (the option
  values: the navigation buttons are left out, as Lumos dropped the first six entries) against
  the query and binds the best ``top_k`` (3), comma-separated;
* ``R7 = Pick(Item_names: R1, Item_features: [R3, R6], Query: ...)`` ranks each item of a
  ``Search`` result, with its features (``asin - title. Available features: ...``), against the
  query and binds the best item's asin.

A call with no output variable (``Search(...)``, ``Click(...)``, as WebShop's
``search[...]``/``click[...]`` are rewritten) shows the new page instead: its ``[SEP]`` text, or
its simplified HTML in the ``html`` observation mode.

Rankers: ``embed`` (all-MiniLM-L6-v2 sentence embeddings, cosine similarity; Lumos used the
``cross-encoder/stsb-roberta-large`` cross-encoder, which does not ship offline) and
``lexical`` (BM25 over the candidates, no model: the reference ranker of replays and tests).
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from lumos_gym.actions import Action, split_list, variable_order
from lumos_gym.errors import DataError, ToolError
from lumos_gym.retrieval.bm25 import tokenize
from lumos_gym.retrieval.embed import load_embedder
from lumos_gym.tools.base import (
    Tool,
    ToolContext,
    ToolResult,
    ToolSpec,
    one_line,
    strip_quotes,
    substitute_bound,
)

__all__ = [
    "NAVIGATION",
    "RANKERS",
    "Click",
    "FeatureRetrieve",
    "Pick",
    "Search",
    "feature_candidates",
    "lexical_scores",
    "rank_lexical",
]

#: Clickables that navigate rather than describe the item (left out by ``FeatureRetrieve``).
NAVIGATION = frozenset({"back to search", "< prev", "next >", "description", "features",
                        "reviews", "attributes", "buy now"})
#: The ranking backends of ``FeatureRetrieve`` and ``Pick``.
RANKERS = ("embed", "lexical")
_STATE = "webshop"
_VARIABLE_RE = re.compile(r"R[0-9]+\Z")
_K1, _B = 1.5, 0.75


def lexical_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """Return the BM25 score of each text for ``query`` over the texts as a corpus.

    Texts are tokenised as the shop's search index tokenises them (lower case, English
    stopwords dropped, Porter 2 stems), and scored with BM25's Lucene form (k1 1.5, b 0.75).
    """
    if not texts:
        return np.zeros(0)
    tokens = tokenize([query, *texts])
    # the query's terms in their own order: a set's order changes with PYTHONHASHSEED, and with
    # it the float sums, so near-tied candidates (Pick) ranked differently from run to run
    wanted, docs = list(dict.fromkeys(tokens[0])), [Counter(t) for t in tokens[1:]]
    lengths = [sum(d.values()) for d in docs]
    average = (sum(lengths) / len(lengths)) or 1.0
    scores = np.zeros(len(docs))
    for term in wanted:
        having = sum(1 for d in docs if term in d)
        if not having:
            continue
        idf = math.log(1 + (len(docs) - having + 0.5) / (having + 0.5))
        for i, doc in enumerate(docs):
            tf = doc.get(term, 0)
            if tf:
                norm = _K1 * (1 - _B + _B * lengths[i] / average)
                scores[i] += idf * tf * (_K1 + 1) / (tf + norm)
    return scores


def rank_lexical(query: str, texts: Sequence[str]) -> list[int]:
    """Return the indices of ``texts``, best BM25 match first (ties keep their order)."""
    scores = lexical_scores(query, texts)
    return sorted(range(len(texts)), key=lambda i: (-scores[i], i))


def feature_candidates(names: Sequence[str], features: Sequence[str]) -> list[str]:
    """Return Lumos' ``Pick`` candidates: the ``i``-th item with the ``i``-th feature list.

    Items beyond the feature lists are kept without features.
    """
    return [f"{name}. Available features: {features[i]}" if i < len(features) else name
            for i, name in enumerate(names)]


class _Ranker:
    """Ranks candidate texts against a query with the ``embed`` or ``lexical`` backend."""

    def __init__(self, tool: str, backend: str, model: str | os.PathLike[str] | None) -> None:
        if backend not in RANKERS:
            raise ToolError(f"{tool}: backend must be one of {RANKERS}, got {backend!r}")
        self.tool = tool
        self.backend = backend
        self.model = model
        self._embedder: Any = None

    def _load(self) -> Any:
        if self._embedder is None and self.backend == "embed":
            try:
                self._embedder = load_embedder(self.model)
            except (DataError, OSError, ImportError) as e:
                warnings.warn(f"{self.tool}: cannot load the embedding model ({e}); ranking "
                              "with BM25 instead", RuntimeWarning, stacklevel=4)
                self.backend = "lexical"
        return self._embedder

    def order(self, query: str, texts: Sequence[str]) -> list[int]:
        """Return the indices of ``texts``, best first."""
        embedder = self._load()
        if embedder is None:
            return rank_lexical(query, texts)
        vectors = embedder.encode([query, *texts])
        scores = vectors[1:] @ vectors[0]
        return sorted(range(len(texts)), key=lambda i: (-float(scores[i]), i))


def _session(ctx: ToolContext, tool: str) -> Any:
    session = ctx.session
    if session is None or not hasattr(session, "click"):
        raise ToolError(f"{tool} needs a shop session: use it in lumos/WebShop-v0")
    return session


def _lists(ctx: ToolContext) -> dict[str, list[str]]:
    return ctx.state.setdefault(_STATE, {}).setdefault("lists", {})


class Search(Tool):
    """Search the shop.

    Args:
        top_k: how many results the bound value lists.
    """

    spec = ToolSpec("Search", "Search(Query)", "Search related items according to the Query")

    def __init__(self, top_k: int = 2) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ToolError(f"Search: top_k must be a positive integer, got {top_k!r}")
        self.top_k = top_k

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Submit the search form; bind ``asin - title ** ...`` and show the results page."""
        arguments = action.arguments()
        named = arguments.get("Query")
        query = named if named is not None and not arguments.positional else action.args
        query = one_line(strip_quotes(substitute_bound(query, ctx.variables)))
        if not query:
            raise ToolError("empty query; write e.g. Search(wireless earbuds with a charging case)")
        session = _session(ctx, "Search")
        page = session.search(query)
        shown = page.results[: self.top_k]
        value = " ** ".join(f"{r.asin.lower()} - {r.title}" for r in shown) or "no results"
        return ToolResult((value,), observation=session.observation())


class Click(Tool):
    """Click an element of the current page."""

    spec = ToolSpec("Click", "Click(Item)", "Click the Item to check more information")

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Follow the clickable; bind the new page's clickables (or the reward after buying)."""
        target = one_line(strip_quotes(substitute_bound(action.args, ctx.variables)))
        if target.startswith("[") and target.endswith("]"):
            target = target[1:-1].strip()
        if not target:
            raise ToolError("nothing to click; write e.g. Click(b0abc12345) or Click(< prev)")
        session = _session(ctx, "Click")
        page = session.click(target)
        if session.done:
            reward = session.metrics().get("reward", page.reward or 0.0)
            return ToolResult((str(float(reward)),), observation=session.observation())
        names = page.names()
        value = ", ".join(names)
        _lists(ctx)[value] = names
        return ToolResult((value,), observation=session.observation())


class FeatureRetrieve(Tool):
    """Pick the most relevant features of an item page's clickables.

    Args:
        backend: ``"embed"`` or ``"lexical"``.
        top_k: how many features to keep (Lumos kept 3).
        model: the embedding model folder (default all-MiniLM-L6-v2).
    """

    spec = ToolSpec(
        "FeatureRetrieve",
        "FeatureRetrieve(Feature_list, Query)",
        "Select the most relevant features from Feature_list according to Query",
    )

    def __init__(self, backend: str = "embed", *, top_k: int = 3,
                 model: str | os.PathLike[str] | None = None) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ToolError(f"FeatureRetrieve: top_k must be a positive integer, got {top_k!r}")
        self.top_k = top_k
        self.ranker = _Ranker("FeatureRetrieve", backend, model)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Bind the best features, comma-separated (empty when the item has none)."""
        arguments = action.arguments()
        source = arguments.get("Feature_list")
        query = arguments.get("Query") or arguments.get("Question")
        positional = list(arguments.positional)
        if source is None:
            if not positional:
                raise ToolError("expected a feature list, e.g. FeatureRetrieve(R2, Query: ...)")
            source = positional.pop(0)
        if query is None:
            query = ", ".join(positional)
        query = one_line(substitute_bound(query, ctx.variables))
        if not query:
            raise ToolError("empty query; write FeatureRetrieve(R2, Query: <instruction>)")
        text = substitute_bound(source, ctx.variables).strip()
        known = _lists(ctx).get(text)
        items = known if known is not None else [p.strip() for p in text.split(", ")]
        features = [f for f in items if f and f.lower() not in NAVIGATION]
        order = self.ranker.order(query, features)[: self.top_k] if features else []
        return ToolResult((", ".join(features[i] for i in order),))


class Pick(Tool):
    """Pick the item of a search result that best fits the query.

    Args:
        backend: ``"embed"`` or ``"lexical"``.
        model: the embedding model folder (default all-MiniLM-L6-v2).
    """

    spec = ToolSpec(
        "Pick",
        "Pick(Item_names, Item_features, Query)",
        "Pick the most relevant item from Item_names according to Query, Item_names and "
        "Item_features",
    )

    def __init__(self, backend: str = "embed", *,
                 model: str | os.PathLike[str] | None = None) -> None:
        self.ranker = _Ranker("Pick", backend, model)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Bind the asin of the best item."""
        arguments = action.arguments()
        positional = list(arguments.positional)
        names_arg = arguments.get("Item_names")
        features_arg = arguments.get("Item_features")
        if names_arg is None:
            if not positional:
                raise ToolError(
                    "expected Pick(Item_names: R1, Item_features: [R3, R6], Query: ...)"
                )
            names_arg = positional.pop(0)
        if features_arg is None:
            features_arg = positional.pop(0) if positional else "[]"
        query_text = arguments.get("Query") or ", ".join(positional)
        query = one_line(substitute_bound(query_text, ctx.variables))
        if not query:
            raise ToolError("empty query; write Pick(Item_names: R1, Item_features: [R3, R6], "
                            "Query: <instruction>)")
        listed = substitute_bound(names_arg, ctx.variables).split(" ** ")
        names = [n.strip() for n in listed if n.strip()]
        if not names:
            raise ToolError("no items to pick from; pass the result of Search, e.g. R1")
        items = split_list(features_arg)
        if items and all(_VARIABLE_RE.fullmatch(i) for i in items):
            items.sort(key=variable_order)  # Lumos paired them in variable order
        features = [substitute_bound(item, ctx.variables) for item in items]
        best = self.ranker.order(query, feature_candidates(names, features))[0]
        return ToolResult((names[best].split(" - ", 1)[0].strip(),))
