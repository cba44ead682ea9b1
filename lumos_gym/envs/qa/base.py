"""The complex-QA family: :class:`QAEnv`, the base of the HotpotQA, StrategyQA, MuSiQue... envs.

The tools are Lumos' complex-QA actions in the order of its grounding instruction
(:data:`QA_TOOLS`): ``KnowledgeQuery`` finds pages (by default in the task's own documents),
``ParagraphRetrieve`` picks the passages that answer a query, ``QA`` answers from them, and
``Calculator`` and ``Code`` compute. The observation of ``reset`` is the question alone; the
documents are reached only through ``KnowledgeQuery``. Episodes end with ``Answer(...)`` and
are scored by :func:`~lumos_gym.scoring.qa.qa_scores` (exact match, F1, accuracy) under the
dataset's named rule (``env.scorer``: ``hotpotqa/official``, ``musique/official``... see
:data:`~lumos_gym.scoring.qa.DATASET_SCORERS`) and, when a judge model is given, by Lumos'
LLM judge (``hotpotqa/lumos-judge``).

Task conventions (``Task.meta``): ``documents`` (``[{"title", "text"}]``, the task's own
context), ``sub_answers`` (``{sub-question: answer}`` from gold decompositions), ``aliases``
(other accepted answers), ``answer_type`` (``"yes/no"``, ``"span"`` or ``"number"``) and
``subgoals`` (the gold subgoal texts, aligned with ``Task.gold_actions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from lumos_gym.envs.base import LumosEnv
from lumos_gym.envs.qa.data import qa_source
from lumos_gym.envs.sources import TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError
from lumos_gym.models.base import Backend
from lumos_gym.models.factory import backend_from_spec
from lumos_gym.retrieval.documents import Document
from lumos_gym.scoring.qa import (
    ANSWER_TYPES,
    DATASET_SCORERS,
    DEFAULT_QA_SCORER,
    JUDGE_PROMPT,
    judge_correct,
    qa_scores,
)

__all__ = ["QA_TOOLS", "QADatasetEnv", "QAEnv", "qa_tool_options", "task_documents"]

#: Lumos' complex-QA actions, in the order its grounding instruction lists them.
QA_TOOLS = ("KnowledgeQuery", "ParagraphRetrieve", "QA", "Calculator", "Code")


def qa_tool_options(
    *,
    corpus: Any = None,
    qa_model: Any = None,
    qa_backend: str = "model",
    retrieve_backend: str | None = None,
    names: Sequence[str] = QA_TOOLS,
) -> dict[str, dict[str, Any]]:
    """Return the backend options of the QA tools, by tool name.

    Args:
        corpus: ``KnowledgeQuery``'s ``corpus`` option; ``"task"`` (the task's own documents)
            when None.
        qa_model: the ``QA`` tool's ``model`` option (a backend spec or a backend); its
            default when None.
        qa_backend: the ``QA`` tool's ``backend`` (``"model"``, or ``"reference"`` for oracle
            replays).
        retrieve_backend: ``ParagraphRetrieve``'s ``backend`` (``"embed"``, ``"bm25"``); its
            default when None.
        names: the tools to return options for, in order (others get no option).
    """
    options: dict[str, dict[str, Any]] = {
        "KnowledgeQuery": {"corpus": "task" if corpus is None else corpus},
        "ParagraphRetrieve": {} if retrieve_backend is None else {"backend": retrieve_backend},
        "QA": {"backend": qa_backend, **({} if qa_model is None else {"model": qa_model})},
    }
    return {name: dict(options.get(name, {})) for name in names}


def task_documents(task: Task) -> list[Document]:
    """Return the documents of ``task.meta["documents"]`` (``[{"title", "text"[, "id"]}]``).

    A ``text`` given as a list of sentences (HotpotQA writes paragraphs so) is joined with
    spaces.

    Raises:
        DataError: an entry that is not a mapping with a title and a text.
    """
    documents = []
    for i, entry in enumerate(task.meta.get("documents") or ()):
        if not isinstance(entry, Mapping) or "title" not in entry or "text" not in entry:
            raise DataError(f"task {task.id}: documents[{i}] needs a 'title' and a 'text'")
        text = entry["text"]
        if not isinstance(text, str):
            text = " ".join(str(part).strip() for part in text)
        documents.append(Document(str(entry["title"]), text, str(entry.get("id") or "")))
    return documents


class QAEnv(LumosEnv):
    """A complex-QA env over any list (or source) of QA tasks.

    Args:
        tasks: the tasks, or a task source.
        dataset: the dataset name, recorded as ``env.dataset``; it names the scoring rule
            (``env.scorer``, :data:`~lumos_gym.scoring.qa.DATASET_SCORERS`; ``qa/em-f1``
            for a name without one).
        corpus: ``KnowledgeQuery``'s corpus; ``"task"`` (the task's own documents) by default.
        qa_model: the ``QA`` tool's model: a spec ``BACKEND:MODEL[@URL]`` or a backend; the
            tool's default (the offline default model) when None. Loaded on the first ``QA``
            call, not here.
        qa_backend: the ``QA`` tool's backend: ``"model"``, or ``"reference"`` to answer from
            the gold sub-answers (needs ``privileged=True``).
        retrieve_backend: ``ParagraphRetrieve``'s backend (``"embed"``, ``"bm25"``).
        judge: a backend spec or backend for Lumos' LLM judge; when given, the metrics also
            hold ``judge_accuracy`` (and ``judge_error``: 1.0 when the judge failed, which
            then scores 0.0) and ``env.judge_prompt`` records the judge's prompt template.
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``limit``, ``render_mode``,
            ``privileged``, ``tools``). ``tools`` as a list of names keeps only those tools,
            with the options above; as a mapping of names to options it overrides everything.

    Raises:
        LumosGymError: no tasks, duplicate ids, or a task with an unknown ``answer_type``.
    """

    task_type = "qa"
    default_tools = QA_TOOLS
    primary_metric = "accuracy"
    default_scorer = DEFAULT_QA_SCORER
    #: Replays use the reference QA backend (gold sub-answers, checked against the retrieved
    #: evidence) and BM25 passage ranking, so that they need no model and give one outcome.
    replay_options: ClassVar[dict[str, Any]] = {
        "privileged": True,
        "qa_backend": "reference",
        "retrieve_backend": "bm25",
    }

    def __init__(
        self,
        *,
        tasks: Sequence[Task] | TaskSource,
        dataset: str = "qa",
        corpus: Any = None,
        qa_model: str | Backend | None = None,
        qa_backend: str = "model",
        retrieve_backend: str | None = None,
        judge: str | Backend | None = None,
        **options: Any,
    ) -> None:
        tools = options.pop("tools", None)
        if not isinstance(tools, Mapping):
            tools = qa_tool_options(
                corpus=corpus,
                qa_model=qa_model,
                qa_backend=qa_backend,
                retrieve_backend=retrieve_backend,
                names=QA_TOOLS if tools is None else list(tools),
            )
        self.dataset = dataset
        self.scorer = DATASET_SCORERS.get(dataset, DEFAULT_QA_SCORER)
        self.judge = judge
        #: The judge's prompt template (Lumos' own), recorded once per env; None without judge.
        self.judge_prompt: str | None = JUDGE_PROMPT if judge is not None else None
        self._judge_backend: Backend | None = judge if isinstance(judge, Backend) else None
        self._owns_judge = False
        super().__init__(tasks=tasks, tools=tools, **options)
        for task in self.tasks:
            answer_type = task.meta.get("answer_type")
            if answer_type is not None and answer_type not in ANSWER_TYPES:
                raise LumosGymError(
                    f"task {task.id}: answer_type must be one of {ANSWER_TYPES}, "
                    f"got {answer_type!r}"
                )

    # ---------------------------------------------------------------------------- the hooks
    def task_documents(self, task: Task) -> Sequence[Document]:
        """Return the task's own documents (``meta["documents"]``)."""
        return task_documents(task)

    def task_reference(self, task: Task) -> Mapping[str, Any]:
        """Return ``{"sub_answers": {sub-question: answer}}`` for the reference QA backend."""
        return {"sub_answers": dict(task.meta.get("sub_answers") or {})}

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return exact match, F1 and accuracy (and the judge's verdict when there is a judge)."""
        metrics = qa_scores(
            prediction,
            task.answer,
            aliases=task.meta.get("aliases") or (),
            answer_type=task.meta.get("answer_type"),
            scorer=self.scorer,
        )
        if self.judge is not None:
            metrics.update(self._judge_metrics(prediction, task))
        return metrics

    def close(self) -> None:
        """Close the tools and the judge backend if this env built it. Idempotent."""
        if self._owns_judge and self._judge_backend is not None:
            self._judge_backend.close()
            self._judge_backend = None
            self._owns_judge = False
        super().close()

    # ---------------------------------------------------------------------------- the judge
    def _judge_metrics(self, prediction: str, task: Task) -> dict[str, float]:
        try:
            verdict = judge_correct(self._judge_model(), task.question, prediction, task.answer)
        except (LumosGymError, ImportError, OSError, ValueError):
            return {"judge_accuracy": 0.0, "judge_error": 1.0}
        return {"judge_accuracy": verdict, "judge_error": 0.0}

    def _judge_model(self) -> Backend:
        if self._judge_backend is None:
            # Imported on first use: only an env with a judge needs the backend factory.
            self._judge_backend = backend_from_spec(str(self.judge), batch_size=1)
            self._owns_judge = True
        return self._judge_backend


class QADatasetEnv(QAEnv):
    """A complex-QA env over an official dataset (HotpotQA, StrategyQA, MuSiQue, 2Wiki...).

    Args:
        dataset: one of :data:`lumos_gym.envs.qa.data.QA_DATASETS`.
        split: the split named in task ids (see :func:`~lumos_gym.envs.qa.data.qa_source`).
        source: ``"bundled"`` (a small sample written by the project), ``"official"`` (the file
            of ``lumos-gym data download``), ``"hub"`` or a path to an official-format file.
        unlabeled: read a test split without gold answers (scores are then meaningless).
        paragraphs: StrategyQA: the paragraphs file giving the evidence documents.
        **options: :class:`QAEnv` options (``corpus``, ``qa_model``, ``qa_backend``,
            ``retrieve_backend``, ``judge``) and :class:`~lumos_gym.envs.base.LumosEnv` options.
    """

    def __init__(
        self,
        *,
        dataset: str = "hotpotqa",
        split: str = "dev",
        source: str | Path = "bundled",
        unlabeled: bool = False,
        paragraphs: str | Path | None = None,
        **options: Any,
    ) -> None:
        tasks = options.pop("tasks", None)
        if tasks is None:
            tasks = qa_source(
                dataset, split=split, source=source, unlabeled=unlabeled, paragraphs=paragraphs
            )
        super().__init__(tasks=tasks, dataset=dataset, **options)
