"""BM25 search over a :class:`~lumos_gym.retrieval.corpus.Corpus`, on ``bm25s``.

A document is indexed as its title followed by its text. Text is lower-cased, split into words
of two or more word characters, English stopwords (``bm25s``' list) are dropped and the rest
stemmed with PyStemmer's English (Porter 2) stemmer; queries go through the same steps. Scores
are BM25 with ``bm25s``' defaults (Lucene variant, k1 = 1.5, b = 0.75).

Indexes are cached (:func:`get_index`):

* in memory, keyed by the corpus checksum, for the most recent :data:`MEMORY_CACHE_SIZE`
  corpora, so that a task's own ten paragraphs are indexed once however many episodes use them
  (building one costs about 1.5 ms; a hit costs a checksum of the texts, a few microseconds);
* on disk for corpora of :data:`DISK_MIN_DOCUMENTS` documents or more, under
  ``cache_root() / "indexes" / <checksum>``, written to a temporary folder that is then renamed,
  so a crashed or concurrent build never leaves a half-written index in place.

``bm25s`` and ``PyStemmer`` are imported on first use.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lumos_gym.errors import DataError
from lumos_gym.jsonl import cache_root
from lumos_gym.retrieval.corpus import Corpus
from lumos_gym.retrieval.documents import Document

if TYPE_CHECKING:
    import bm25s

__all__ = [
    "DISK_MIN_DOCUMENTS",
    "INDEX_FORMAT",
    "MEMORY_CACHE_SIZE",
    "BM25Index",
    "clear_memory_cache",
    "get_index",
    "index_dir",
    "tokenize",
]

#: Corpora with at least this many documents get an on-disk index cache.
DISK_MIN_DOCUMENTS = 1000
#: How many indexes the in-memory cache keeps (least recently used first out).
MEMORY_CACHE_SIZE = 128
#: Version of the on-disk layout and of the tokenisation; a different one is rebuilt.
INDEX_FORMAT = 1

_WORD_RE = re.compile(r"(?u)\b\w\w+\b")
_META = "lumos_index.json"
_LOCAL = threading.local()
_STOPWORDS: frozenset[str] | None = None


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise DataError("BM25 retrieval needs `pip install bm25s PyStemmer`") from e
    logging.getLogger("bm25s").setLevel(logging.ERROR)
    return bm25s


def _stem_words() -> Any:
    """Return this thread's ``stemWords`` (PyStemmer objects are not shared across threads)."""
    stem = getattr(_LOCAL, "stem_words", None)
    if stem is None:
        try:
            import Stemmer
        except ImportError as e:  # pragma: no cover - depends on the installed extras
            raise DataError("BM25 retrieval needs `pip install bm25s PyStemmer`") from e
        stem = Stemmer.Stemmer("english").stemWords
        _LOCAL.stem_words = stem
    return stem


def _stopwords() -> frozenset[str]:
    global _STOPWORDS
    if _STOPWORDS is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOPWORDS = frozenset(STOPWORDS_EN)
    return _STOPWORDS


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Return the stemmed, stopword-free tokens of each text (the index's tokenisation)."""
    stop = _stopwords()
    words = [[w for w in _WORD_RE.findall(text.lower()) if w not in stop] for text in texts]
    unique = list({w: None for doc in words for w in doc})
    stems = dict(zip(unique, _stem_words()(unique), strict=True))
    return [[stems[w] for w in doc] for doc in words]


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Return the indices of the ``k`` best positive scores, best first, ties by position."""
    candidates = np.flatnonzero(scores > 0)
    k = min(k, len(candidates))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if len(candidates) > 4 * k + 64:
        values = scores[candidates]
        threshold = values[np.argpartition(-values, k - 1)[k - 1]]
        candidates = candidates[values >= threshold]  # keep every tie at the boundary
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order[:k]]


class BM25Index:
    """A BM25 index over a corpus: build one with :meth:`build`, or get a cached one.

    :func:`get_index` returns cached indexes.

    Attributes:
        corpus: the indexed corpus; result documents come from it.
        source: how the index came to be: ``"built"`` or ``"disk"`` (loaded from the cache).
    """

    def __init__(self, corpus: Corpus, retriever: bm25s.BM25 | None, *, source: str) -> None:
        self.corpus = corpus
        self.source = source
        self._retriever = retriever
        self._vocab: dict[str, int] = dict(retriever.vocab_dict) if retriever is not None else {}
        self._vocab.pop("", None)

    @classmethod
    def build(cls, corpus: Corpus) -> BM25Index:
        """Index ``corpus`` (titles and texts).

        Raises:
            DataError: for an empty corpus.
        """
        if not len(corpus):
            raise DataError(f"corpus {corpus.name!r} has no documents to index")
        tokens = tokenize([f"{doc.title}\n{doc.text}" for doc in corpus])
        if not any(tokens):  # only stopwords: nothing can ever match
            return cls(corpus, None, source="built")
        retriever = _bm25s().BM25()
        retriever.index(tokens, show_progress=False)
        return cls(corpus, retriever, source="built")

    @classmethod
    def load(cls, corpus: Corpus, folder: str | os.PathLike[str]) -> BM25Index:
        """Load the index of ``corpus`` saved by :meth:`save` in ``folder``.

        Raises:
            DataError: when the folder does not hold an index of this corpus in this format.
        """
        folder = Path(folder)
        try:
            meta = json.loads((folder / _META).read_text())
        except (OSError, ValueError) as e:
            raise DataError(f"{folder}: no readable index metadata ({e})") from e
        expected = {"format": INDEX_FORMAT, "checksum": corpus.checksum, "documents": len(corpus)}
        if {key: meta.get(key) for key in expected} != expected:
            raise DataError(f"{folder}: the index is of another corpus or format")
        if meta.get("empty"):
            return cls(corpus, None, source="disk")
        try:
            retriever = _bm25s().BM25.load(folder, show_progress=False)
        except (OSError, ValueError, KeyError) as e:
            raise DataError(f"{folder}: cannot load the BM25 index ({e})") from e
        if retriever.scores.get("num_docs") != len(corpus):
            raise DataError(f"{folder}: the index does not have {len(corpus)} documents")
        return cls(corpus, retriever, source="disk")

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write the index (not the corpus) and its metadata into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self._retriever is not None:
            self._retriever.save(folder, show_progress=False)
        meta = {
            "format": INDEX_FORMAT,
            "checksum": self.corpus.checksum,
            "documents": len(self.corpus),
            "corpus": self.corpus.name,
            "empty": self._retriever is None,
        }
        (folder / _META).write_text(json.dumps(meta, indent=2) + "\n")

    def __len__(self) -> int:
        return len(self.corpus)

    def query_ids(self, query: str) -> list[int]:
        """Return the vocabulary ids of the query's tokens (unknown tokens are dropped)."""
        vocab = self._vocab
        return [vocab[t] for t in tokenize([query])[0] if t in vocab]

    def scores(self, query: str) -> np.ndarray:
        """Return the BM25 score of every document for ``query`` (0 where nothing matches)."""
        ids = self.query_ids(query)
        if not ids or self._retriever is None:
            return np.zeros(len(self.corpus), dtype=np.float32)
        return self._retriever.get_scores_from_ids(ids)

    def search(self, query: str, k: int = 10) -> list[tuple[Document, float]]:
        """Return up to ``k`` ``(document, score)`` pairs matching ``query``, best first.

        Documents that share no token with the query are never returned, so a query with no
        hit gives an empty list.
        """
        scores = self.scores(query)
        return [(self.corpus[int(i)], float(scores[i])) for i in _top(scores, k)]

    def search_batch(
        self, queries: Sequence[str], k: int = 10
    ) -> list[list[tuple[Document, float]]]:
        """Return :meth:`search` of each query, in order."""
        return [self.search(query, k) for query in queries]


_MEMORY: OrderedDict[str, BM25Index] = OrderedDict()
_LOCK = threading.RLock()


def clear_memory_cache() -> None:
    """Forget every index held in memory (the disk cache stays)."""
    with _LOCK:
        _MEMORY.clear()


def index_dir(corpus: Corpus) -> Path:
    """Return where the on-disk index of ``corpus`` lives."""
    return cache_root() / "indexes" / corpus.checksum


def _remember(index: BM25Index) -> BM25Index:
    _MEMORY[index.corpus.checksum] = index
    _MEMORY.move_to_end(index.corpus.checksum)
    while len(_MEMORY) > MEMORY_CACHE_SIZE:
        _MEMORY.popitem(last=False)
    return index


def _save_atomically(index: BM25Index, folder: Path) -> None:
    """Save into a temporary sibling folder, then rename it into place."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name[:16]}-", dir=folder.parent))
    except OSError as e:
        warnings.warn(f"cannot cache the BM25 index in {folder.parent} ({e})", stacklevel=3)
        return
    try:
        index.save(tmp)
        if folder.exists():  # a stale or foreign index: move it aside, then swap
            stale = Path(tempfile.mkdtemp(prefix=".stale-", dir=folder.parent))
            os.replace(folder, stale / "index")
            shutil.rmtree(stale, ignore_errors=True)
        os.rename(tmp, folder)
    except OSError as e:
        if not (folder / _META).is_file():  # unless another process just wrote it
            warnings.warn(f"cannot cache the BM25 index in {folder} ({e})", stacklevel=3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def get_index(corpus: Corpus, *, disk: bool | None = None) -> BM25Index:
    """Return the BM25 index of ``corpus``, from the memory or disk cache when possible.

    Args:
        corpus: the corpus.
        disk: use the on-disk cache; by default only for corpora of at least
            :data:`DISK_MIN_DOCUMENTS` documents.
    """
    checksum = corpus.checksum
    with _LOCK:
        cached = _MEMORY.get(checksum)
        if cached is not None:
            _MEMORY.move_to_end(checksum)
            return cached
        use_disk = len(corpus) >= DISK_MIN_DOCUMENTS if disk is None else disk
        if not use_disk:
            return _remember(BM25Index.build(corpus))
        folder = index_dir(corpus)
        if (folder / _META).is_file():
            try:
                return _remember(BM25Index.load(corpus, folder))
            except DataError as e:
                warnings.warn(f"rebuilding the BM25 index: {e}", stacklevel=2)
        index = BM25Index.build(corpus)
        _save_atomically(index, folder)
        return _remember(index)
