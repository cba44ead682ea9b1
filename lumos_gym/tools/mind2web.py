r"""Mind2Web's element actions ``CLICK``, ``TYPE``, ``SELECT`` and the element ranker behind them.

Each action names a page (``Env`` or a page variable ``R<k>``) and a ``QUERY``; the ranker
scores the page's candidate elements against the query and the top-1 is acted on, as in Lumos'
``eval/mind2web/run_eval.py``, whose MindAct cross-encoder reads ``"task is: {QUERY}\nPrevious
actions: {the last three gold action_reprs}"`` and where ``SELECT`` appends ``" The option
contents should be close to '{TEXT}'."`` to the query. Backends (``backend=`` tool option):

* ``"embed"`` (default): cosine similarity of MiniLM embeddings
  (:mod:`lumos_gym.retrieval.embed`; ``model=`` another encoder folder) of the query alone by
  default (``query_format="mindact"`` for MindAct's text, which an encoder not trained on it
  handles badly: see :class:`EmbedRanker`);
* ``"bm25"``: BM25 of the query alone over the candidates' texts (cheap, no model);
* ``"cross-encoder"``: any Hugging Face sequence-classification model scoring
  ``(MindAct text, candidate)`` pairs, e.g. MindAct's
  ``osunlp/MindAct_CandidateGeneration_deberta-v3-base`` (``model=`` required; loaded on the
  first ranking, never before);
* ``"oracle"``: the gold elements first (for replays of gold trajectories and annotations).

A candidate's text is its tag, its salient attribute values and its visible text in the step's
``cleaned_html`` (:attr:`Element.ranking_text`; the env's elements are
:class:`~lumos_gym.envs.web.mind2web_data.Candidate`). The env passes
``ranker=``/``ranker_model=`` to all three tools; ``tools={"CLICK": {...}}`` sets them one by
one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from lumos_gym.actions import Action
from lumos_gym.errors import BackendError, ToolError
from lumos_gym.retrieval.bm25 import get_index
from lumos_gym.retrieval.corpus import Corpus
from lumos_gym.retrieval.documents import Document
from lumos_gym.retrieval.embed import load_embedder
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec

if TYPE_CHECKING:
    from lumos_gym.retrieval.embed import Embedder

__all__ = [
    "RANKERS",
    "BM25Ranker",
    "CrossEncoderRanker",
    "ElementClick",
    "ElementRanker",
    "ElementSelect",
    "ElementType",
    "EmbedRanker",
    "OracleRanker",
    "make_ranker",
    "mindact_query",
    "select_query",
]


class Element(Protocol):
    """A candidate element of a page, as the rankers read it."""

    positive: bool

    @property
    def ranking_text(self) -> str:
        """The element as text for a ranker: its tag, attributes and visible text."""
        ...


class Page(Protocol):
    """A page of a Mind2Web step: its number and the elements an action may act on."""

    number: int
    candidates: Sequence[Element]


class Outcome(Protocol):
    """What acting on an element returned: the bound value and the observation text."""

    value: str
    text: str


@runtime_checkable
class StepSession(Protocol):
    """What ``CLICK``, ``TYPE`` and ``SELECT`` need of an episode's session.

    The Mind2Web env's :class:`~lumos_gym.envs.web.mind2web.Mind2WebSession` is one.
    """

    @property
    def done(self) -> bool:
        """Whether the task's steps are over."""
        ...

    def resolve(self, reference: str, variables: Mapping[str, str]) -> Page:
        """The page ``reference`` (``Env`` or an ``R<n>``) names."""
        ...

    def previous_actions(self) -> Sequence[str]:
        """The actions of the steps before this one, as rankers read them."""
        ...

    def act(self, page: Page, chosen: Element, op: str, value: str) -> Outcome:
        """Act on ``chosen`` of ``page`` (typing or selecting ``value``) and move on a step."""
        ...

PREVIOUS_ACTIONS = 3


def mindact_query(query: str, previous_actions: Sequence[str]) -> str:
    """Return MindAct's ranking query: the task line and the last three previous actions."""
    recent = "; ".join(previous_actions[-PREVIOUS_ACTIONS:]) if previous_actions else ""
    return f"task is: {query}\nPrevious actions: {recent}"


def select_query(query: str, text: str) -> str:
    """Return the query of a SELECT, extended with the option text as Lumos extends it."""
    return query + f" The option contents should be close to '{text}'."


class ElementRanker(Protocol):
    """Scores a page's candidates for a query; higher is better."""

    def scores(
        self, query: str, previous_actions: Sequence[str], candidates: Sequence[Element]
    ) -> np.ndarray:
        """Return one score per candidate, in order."""
        ...


def _ranking_input(query: str, previous_actions: Sequence[str], query_format: str) -> str:
    if query_format == "mindact":
        return mindact_query(query, previous_actions)
    return query


class EmbedRanker:
    r"""Cosine similarity of sentence embeddings (all-MiniLM-L6-v2 by default).

    Args:
        model: an encoder folder; None for the default model.
        embedder: an :class:`~lumos_gym.retrieval.embed.Embedder` to use instead of loading
            ``model`` (the process-wide one by default).
        query_format: ``"query"`` (default) embeds the query alone; ``"mindact"`` embeds
            MindAct's ``task is: ...\nPrevious actions: ...`` text. An encoder not trained on
            that format matches the previous actions' elements instead of the query's: with the
            gold subgoals as queries, MiniLM picks the gold element on 95% of the bundled
            recorded steps with the query alone and on 40% with the MindAct text.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        query_format: str = "query",
        embedder: Embedder | None = None,
    ) -> None:
        self.model = model
        self.query_format = _check_format(query_format)
        self.embedder = embedder

    def scores(
        self, query: str, previous_actions: Sequence[str], candidates: Sequence[Element]
    ) -> np.ndarray:
        """Return the cosine similarity of each candidate's text with the query."""
        embedder = self.embedder if self.embedder is not None else load_embedder(self.model)
        text = _ranking_input(query, previous_actions, self.query_format)
        vectors = embedder.encode([text] + [c.ranking_text for c in candidates])
        return vectors[1:] @ vectors[0]


class BM25Ranker:
    """BM25 of the query (alone: previous actions would only add noise to word matching)."""

    def scores(
        self, query: str, previous_actions: Sequence[str], candidates: Sequence[Element]
    ) -> np.ndarray:
        """Return the BM25 score of each candidate's text for the query."""
        documents = [Document("", c.ranking_text, id=str(i)) for i, c in enumerate(candidates)]
        return np.asarray(get_index(Corpus(documents, name="page")).scores(query), dtype=float)


@lru_cache(maxsize=2)
def _cross_encoder(model: str, device: str | None) -> tuple[Any, Any, threading.Lock]:
    """Load a sequence-classification model and its tokenizer once per process."""
    try:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise BackendError("the cross-encoder ranker needs transformers and torch") from e
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        network = AutoModelForSequenceClassification.from_pretrained(model)
    except (OSError, ValueError) as e:
        raise BackendError(f"cannot load the cross-encoder {model!r}: {e}") from e
    network.eval()
    if device:
        network.to(device)
    return tokenizer, network, threading.Lock()


class CrossEncoderRanker:
    """A cross-encoder scoring ``(query, candidate)`` pairs (MindAct's candidate generator).

    Args:
        model: a Hugging Face sequence-classification model id or folder.
        max_length: tokens per pair (MindAct used 512).
        batch_size: pairs per forward pass.
        device: a torch device (default CPU).
        query_format: ``"mindact"`` (default: the text MindAct's model was trained on) or
            ``"query"`` (the query alone).
    """

    def __init__(
        self,
        model: str,
        *,
        max_length: int = 512,
        batch_size: int = 32,
        device: str | None = None,
        query_format: str = "mindact",
    ) -> None:
        self.model = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.query_format = _check_format(query_format)

    def scores(
        self, query: str, previous_actions: Sequence[str], candidates: Sequence[Element]
    ) -> np.ndarray:
        """Return the model's relevance logit for each candidate (last label when several)."""
        import torch

        tokenizer, network, lock = _cross_encoder(self.model, self.device)
        full = _ranking_input(query, previous_actions, self.query_format)
        texts = [c.ranking_text for c in candidates]
        out: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            batch = tokenizer([full] * len(chunk), chunk, padding=True, truncation=True,
                              max_length=self.max_length, return_tensors="pt")
            if self.device:
                batch = batch.to(self.device)
            with lock, torch.inference_mode():
                logits = network(**batch).logits
            out.append(logits[:, -1].float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)


class OracleRanker:
    """The gold elements of the step score 1, the others 0."""

    def scores(
        self, query: str, previous_actions: Sequence[str], candidates: Sequence[Element]
    ) -> np.ndarray:
        """Return 1.0 for each positive candidate and 0.0 for the others."""
        return np.asarray([1.0 if c.positive else 0.0 for c in candidates])


#: The ranker backends by name.
RANKERS: dict[str, type] = {
    "embed": EmbedRanker,
    "bm25": BM25Ranker,
    "cross-encoder": CrossEncoderRanker,
    "oracle": OracleRanker,
}


QUERY_FORMATS = ("query", "mindact")


def _check_format(query_format: str) -> str:
    if query_format not in QUERY_FORMATS:
        raise ToolError(f"query_format must be one of {QUERY_FORMATS}, got {query_format!r}")
    return query_format


def make_ranker(backend: str = "embed", model: str | None = None, **options: Any) -> ElementRanker:
    """Return the ranker ``backend`` (see :data:`RANKERS`).

    Args:
        backend: ``embed``, ``bm25``, ``cross-encoder`` or ``oracle``.
        model: the model of ``embed`` (an encoder folder) or ``cross-encoder`` (required).
        **options: the backend's options (``query_format``; the cross-encoder's
            ``max_length``, ``batch_size``, ``device``).

    Raises:
        ToolError: an unknown backend or option, or a cross-encoder without a model.
    """
    if backend not in RANKERS:
        raise ToolError(f"unknown element ranker {backend!r}; choose from {sorted(RANKERS)}")
    if backend == "cross-encoder" and not model:
        raise ToolError("the cross-encoder ranker needs a model (a Hugging Face model id)")
    try:
        if backend in ("embed", "cross-encoder"):
            return RANKERS[backend](model, **options)
        return RANKERS[backend](**options)
    except TypeError as e:
        raise ToolError(f"bad options for the {backend} ranker: {e}") from e


def top_candidate(scores: np.ndarray) -> int:
    """Return the index of the best score (the first one on ties)."""
    return int(np.argmax(np.asarray(scores, dtype=float)))


class _ElementAction(Tool):
    """What CLICK, TYPE and SELECT share: resolve the page, rank, act, show the next page.

    Args:
        backend: the ranker backend (see :data:`RANKERS`).
        model: the ranker's model, where it takes one.
        ranker: a ranker object, used instead of ``backend`` (e.g. one shared by the tools).
        **options: ranker options (``max_length``, ``batch_size``, ``device``).
    """

    op: ClassVar[str]
    takes_text: ClassVar[bool] = False

    def __init__(
        self,
        backend: str = "embed",
        model: str | None = None,
        ranker: ElementRanker | None = None,
        **options: Any,
    ) -> None:
        self.ranker = ranker if ranker is not None else make_ranker(backend, model, **options)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Pick the top-1 element of the page for the query, act on it and move on."""
        session = ctx.session
        if not isinstance(session, StepSession):
            raise ToolError(f"{self.op} acts on a Mind2Web page; this env has none")
        args = action.arguments()
        reference = args.positional[0] if args.positional else "Env"
        page = session.resolve(reference, ctx.variables)
        query = args.get("QUERY") or (args.positional[1] if len(args.positional) > 1 else "")
        query = " ".join(query.split())
        if not query:
            raise ToolError(f"{self.op} needs a QUERY: what to act on")
        text = ""
        if self.takes_text:
            text = " ".join((args.get("TEXT") or "").split())
            if not text:
                raise ToolError(f"{self.op} needs a TEXT: the value to {self.op.lower()}")
        if session.done:
            raise ToolError("the task's steps are over")
        if not page.candidates:
            raise ToolError(f"page {page.number} has no candidate elements to act on")
        ranking = select_query(query, text) if self.op == "SELECT" else query
        scores = self.ranker.scores(ranking, session.previous_actions(), page.candidates)
        chosen = page.candidates[top_candidate(scores)]
        outcome = session.act(page, chosen, self.op, text)
        return ToolResult((outcome.value,), observation=outcome.text, display=outcome.text)


class ElementClick(_ElementAction):
    """``CLICK(Env, QUERY: ...)``: click the element of the page that best fits the query."""

    spec = ToolSpec(
        "CLICK", "CLICK(Env, Query)", "Click the relevant html region in Env according to Query"
    )
    op = "CLICK"


class ElementType(_ElementAction):
    """``TYPE(Env, QUERY: ..., TEXT: ...)``: type the text into the best-fitting element."""

    spec = ToolSpec(
        "TYPE",
        "TYPE(Env, Query, Text)",
        "Type Text into the relevant html region in Env according to Query",
    )
    op = "TYPE"
    takes_text = True


class ElementSelect(_ElementAction):
    """``SELECT(Env, QUERY: ..., TEXT: ...)``: choose the option in the best selection box."""

    spec = ToolSpec(
        "SELECT",
        "SELECT(Env, Query, Text)",
        "Select the value Text of the relevant selection box in Env according to Query",
    )
    op = "SELECT"
    takes_text = True
