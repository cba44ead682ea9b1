"""Complex-QA task sources: official-format loaders, gold plans and bundled samples.

Each loader reads one official file and returns :class:`~lumos_gym.envs.tasks.Task` records with
``task_type="qa"`` and ids ``"<dataset>/<split>/<official id or position>"``. A file that is
missing, empty or not in the expected format raises :class:`~lumos_gym.errors.DataError` with a
one-line message naming the file, the record and what was expected.

Formats handled (every field of a record is kept verbatim in ``Task.meta``, next to the QA
conventions ``documents``, ``aliases``, ``sub_answers``, ``answer_type`` and, for tasks with a
gold decomposition, ``subgoals``):

* **HotpotQA** (``hotpotqa/hotpot``): a JSON list of ``{"_id", "question", "answer", "type",
  "level", "supporting_facts": [[title, sent_id]], "context": [[title, [sentences]]]}``, the
  train and dev distractor files and the dev fullwiki file alike; the test fullwiki file (only
  ``_id``, ``question`` and ``context``: loaded only with ``unlabeled=True``); and the
  question-only file of the Lumos evaluation (``question``, ``answer``, ``type``; ids are
  positions). A document is a context paragraph, its sentences concatenated as written
  (HotpotQA sentences carry their own leading spaces).
* **StrategyQA** (``allenai.org/data/strategyqa``): ``strategyqa_train.json`` (``qid``,
  ``term``, ``description``, ``question``, ``answer`` (a bool), ``facts``, ``decomposition``,
  ``evidence``: per annotator, per decomposition step, a list of paragraph-id lists,
  ``"operation"`` or ``"no_evidence"``), ``strategyqa_train_filtered.json``,
  ``strategyqa_test.json`` (``qid`` and ``question`` only), the Lumos evaluation file
  (``question`` and a bool ``answer``) and BIG-bench's ``task.json`` (``examples`` with
  ``input``, ``target`` and ``target_scores``). The official zip archive is read directly.
  Documents are the evidence paragraphs when a paragraphs file is given (or the archive holds
  one), else one document per fact, titled with the term.
* **MuSiQue** (``StonyBrookNLP/musique``): JSON lines ``musique_{ans,full}_v1.0_{train,dev,test}
  .jsonl`` with ``id``, ``paragraphs`` (``idx``, ``title``, ``paragraph_text``,
  ``is_supporting``), ``question``, ``question_decomposition`` (``id``, ``question`` with
  ``#k`` references, ``answer``, ``paragraph_support_idx``), ``answer``, ``answer_aliases`` and,
  in the full files, ``answerable``. An unanswerable record keeps ``answerable: false`` in its
  meta and gets the id suffix ``:unanswerable`` (the full files hold each question twice under
  one id). The release zip is read directly (split names ``ans_dev``, ``full_train``...).
* **2WikiMultihopQA** (``Alab-NII/2wikimultihop``): JSON lists of ``{"_id", "type",
  "question", "context", "supporting_facts", "evidences": [[subject, relation, object]],
  "answer"}``, with ``entity_ids`` and, in the December 2020 release, ``evidences_id`` and
  ``answer_id``; ``train.json``, ``dev.json``, ``test.json`` (no answer, supporting facts or
  evidences), or the release zip.
* **Bamboogle** (Press et al., 2022): the Google Sheets CSV export (``Question``, ``Answer``
  columns), the hub's rows as JSON lines, or JSON records with ``question`` and ``answer`` (or
  ``golden_answers``); ids are positions; no documents.

Gold plans (:data:`GOLD_PLANS`) turn a dataset's decomposition or supporting facts into Lumos
subgoals and grounded actions (``KnowledgeQuery`` / ``ParagraphRetrieve`` / ``QA``). Loaders
use them for ``Task.gold_actions`` (one ``; ``-joined step per subgoal, then ``Answer(R<n>)``)
and ``meta["subgoals"]``, and add the question of every ``QA`` action whose answer is known to
``meta["sub_answers"]`` (:func:`plan_sub_answers`), so that a privileged env with the reference
``QA`` backend can replay the gold actions; :mod:`lumos_gym.conversion.qa_rules` uses the same
plans for annotations.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from lumos_gym.actions import parse_action, references
from lumos_gym.envs import datasets as data
from lumos_gym.envs.sources import BundledSource, FileSource, HubSource, Loader, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import ActionParseError, DataError
from lumos_gym.scoring.answers import normalize_text

__all__ = [
    "DATA_DIR",
    "GOLD_PLANS",
    "QA_DATASETS",
    "QA_LOADERS",
    "SAMPLE_FILES",
    "GoldPlanError",
    "PlanAction",
    "PlanStep",
    "answer_type",
    "gold_actions",
    "hotpotqa_plan",
    "load_bamboogle",
    "load_hotpotqa",
    "load_musique",
    "load_strategyqa",
    "load_twowiki",
    "musique_plan",
    "musique_sub_answers",
    "plan_sub_answers",
    "qa_source",
    "qa_subgoal",
    "relation_question",
    "sample_path",
    "strategyqa_plan",
    "twowiki_plan",
    "write_bamboogle_hub_rows",
    "write_hotpotqa_hub_rows",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "qa"
"""The folder of the bundled QA sample files."""

QA_DATASETS = ("hotpotqa", "strategyqa", "musique", "2wikimultihopqa", "bamboogle")
"""The complex-QA datasets with a loader here."""

SAMPLE_FILES: Mapping[str, str] = {
    "hotpotqa": "hotpotqa_sample.json",
    "strategyqa": "strategyqa_sample.json",
    "musique": "musique_full_sample.jsonl",
    "2wikimultihopqa": "2wikimultihopqa_sample.json",
    "bamboogle": "bamboogle_sample.csv",
}
"""The bundled sample of each dataset, relative to :data:`DATA_DIR` (written by the project)."""

STRATEGYQA_SAMPLE_PARAGRAPHS = "strategyqa_sample_paragraphs.json"
"""The evidence paragraphs of the bundled StrategyQA sample (``strategyqa_train_paragraphs``
format)."""

_HOTPOT_EXPECTED = (
    "HotpotQA JSON records with _id, question, answer, supporting_facts [[title, sent_id]] and "
    "context [[title, [sentences]]] (or the Lumos question/answer/type records)"
)
_STRATEGY_EXPECTED = (
    "StrategyQA JSON records with qid, question, answer (bool), facts, decomposition and "
    "evidence, or BIG-bench's {'examples': [...]}"
)
_PARAGRAPHS_EXPECTED = "StrategyQA paragraphs: a JSON object {id: {title, content, ...}}"
_MUSIQUE_EXPECTED = (
    "MuSiQue JSON lines with id, paragraphs [{idx, title, paragraph_text, is_supporting}], "
    "question, question_decomposition, answer and answer_aliases"
)
_TWOWIKI_EXPECTED = (
    "2WikiMultihopQA JSON records with _id, type, question, context [[title, [sentences]]], "
    "supporting_facts, evidences [[subject, relation, object]] and answer"
)
_BAMBOOGLE_EXPECTED = "Bamboogle CSV with Question and Answer columns (or JSON records)"

#: Members of the official zip archives, by split name.
_STRATEGY_MEMBERS = {
    "train": "strategyqa_train.json",
    "train_filtered": "strategyqa_train_filtered.json",
    "test": "strategyqa_test.json",
}
_STRATEGY_PARAGRAPH_MEMBER = "strategyqa_train_paragraphs.json"
_MUSIQUE_MEMBERS = {
    f"{kind}_{part}": f"musique_{kind}_v1.0_{part}.jsonl"
    for kind in ("ans", "full")
    for part in ("train", "dev", "test")
}
_TWOWIKI_MEMBERS = {
    **{part: f"{part}.json" for part in ("train", "dev", "test")},
    **{f"ids_{part}": f"{part}.json" for part in ("train", "dev", "test")},
}

# ---------------------------------------------------------------------------------------------
# Reading files


@dataclass(frozen=True)
class _Source:
    """The text of a data file (or of one member of a zip archive) and its name for errors."""

    name: str
    text: str


@dataclass(frozen=True)
class _Record:
    """One JSON object of a data file and where it was found."""

    index: int
    where: str
    data: Mapping[str, Any]


def _split_name(split: str) -> str:
    if not isinstance(split, str) or not split or "/" in split:
        raise ValueError(f"split must be a non-empty name without '/', got {split!r}")
    return split


def _decode(name: str, raw: bytes, expected: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not UTF-8 text (byte {e.start}); expected {expected}") from e


def _zip_member(path: Path, split: str, members: Mapping[str, str], expected: str) -> _Source:
    wanted = members.get(split)
    if wanted is None:
        known = ", ".join(sorted(members)) or "none"
        raise DataError(
            f"{path}: a zip archive, and split {split!r} names none of its files; "
            f"splits: {known}; expected {expected}"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            names = [
                n
                for n in archive.namelist()
                if not n.endswith("/")
                and "__MACOSX" not in n
                and not n.rsplit("/", 1)[-1].startswith("._")
            ]
            found = sorted(n for n in names if n.rsplit("/", 1)[-1] == wanted)
            if not found:
                listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                raise DataError(f"{path}: the archive has no {wanted} (it holds: {listed})")
            raw = archive.read(found[0])
    except zipfile.BadZipFile as e:
        raise DataError(f"{path}: a damaged zip archive ({e}); expected {expected}") from e
    name = f"{path}[{found[0]}]"
    return _Source(name, _decode(name, raw, expected))


def _read_source(
    path: Path, split: str, members: Mapping[str, str], expected: str
) -> _Source:
    """Read a data file, or the member of a zip archive that holds ``split``."""
    if not path.exists():
        raise DataError(f"{path}: file not found; expected {expected}")
    if not path.is_file():
        raise DataError(f"{path}: not a file; expected {expected}")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic == b"PK\x03\x04":
            return _zip_member(path, split, members, expected)
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror}); expected {expected}") from e
    if raw.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        raise DataError(
            f"{path}: an HTML page, not the data file (a download that met a confirmation or "
            f"sign-in page?); fetch the file in a browser; expected {expected}"
        )
    return _Source(str(path), _decode(str(path), raw, expected))


def _parse_json(src: _Source, expected: str) -> list[_Record] | dict[str, Any]:
    """Parse a whole-file JSON list (or object), or JSON lines (blank lines skipped)."""
    text = src.text
    if not text.strip():
        raise DataError(f"{src.name}: the file is empty; expected {expected}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg != "Extra data":
            raise DataError(
                f"{src.name}: bad JSON at line {e.lineno}, column {e.colno} ({e.msg}); "
                f"expected {expected}"
            ) from e
        return _json_lines(src, expected)
    if isinstance(value, dict):
        return value
    if not isinstance(value, list):
        raise DataError(
            f"{src.name}: the file holds a JSON {type(value).__name__}; expected {expected}"
        )
    records = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise DataError(
                f"{src.name}: record {i} is a {type(item).__name__}, not a JSON object; "
                f"expected {expected}"
            )
        records.append(_Record(i, f"record {i}", item))
    return records


def _json_lines(src: _Source, expected: str) -> list[_Record]:
    records: list[_Record] = []
    # split on newlines only: str.splitlines would also cut at U+2028 inside a JSON string
    for lineno, line in enumerate(src.text.split("\n"), start=1):
        if not line.strip():
            continue
        i = len(records)
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{src.name}: record {i} (line {lineno}): bad JSON ({e.msg}); expected "
                f"{expected}, one JSON object per line"
            ) from e
        if not isinstance(item, dict):
            raise DataError(
                f"{src.name}: record {i} (line {lineno}) is a {type(item).__name__}, not a "
                f"JSON object; expected {expected}"
            )
        records.append(_Record(i, f"record {i} (line {lineno})", item))
    return records


def _records(src: _Source, expected: str) -> list[_Record]:
    return _as_records(src, _parse_json(src, expected), expected)


def _as_records(
    src: _Source, parsed: list[_Record] | dict[str, Any], expected: str
) -> list[_Record]:
    """The records of a parsed file; one JSON object is a one-line JSON-lines file."""
    if isinstance(parsed, dict):
        return [_Record(0, "record 0", parsed)]
    if not parsed:
        raise DataError(f"{src.name}: no records found; expected {expected}")
    return parsed


class _Fields:
    """Typed access to one record's fields; every problem is a DataError naming the record."""

    def __init__(self, src: _Source, rec: _Record, expected: str) -> None:
        self.src = src
        self.rec = rec
        self.expected = expected

    def error(self, message: str) -> DataError:
        return DataError(f"{self.src.name}: {self.rec.where}: {message}; expected {self.expected}")

    def present(self, key: str) -> bool:
        return self.rec.data.get(key) is not None

    def text(self, key: str, *, required: bool = True, nonempty: bool = True) -> str | None:
        value = self.rec.data.get(key)
        if value is None:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(f"field {key!r} is a {type(value).__name__}, not text")
        text = str(value)
        if nonempty and required and not text.strip():
            raise self.error(f"field {key!r} is empty")
        return text

    def boolean(self, key: str, *, required: bool = True) -> bool | None:
        value = self.rec.data.get(key)
        if value is None:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        if not isinstance(value, bool):
            raise self.error(f"field {key!r} is a {type(value).__name__}, not true/false")
        return value

    def items(self, key: str, *, required: bool = False) -> list[Any] | None:
        value = self.rec.data.get(key)
        if value is None:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        if not isinstance(value, list):
            raise self.error(f"field {key!r} is a {type(value).__name__}, not a list")
        return value

    def texts(self, key: str, *, required: bool = False) -> list[str] | None:
        items = self.items(key, required=required)
        if items is None:
            return None
        for j, item in enumerate(items):
            if not isinstance(item, str):
                raise self.error(f"{key}[{j}] is a {type(item).__name__}, not text")
        return items


def _gold_answer(f: _Fields, value: str | None, *, dataset: str, unlabeled: bool) -> str:
    if value is not None and value.strip():
        return value.strip()
    if unlabeled:
        return ""
    raise f.error(
        f"no gold 'answer' (an unlabeled {dataset} file, such as a test split?); pass "
        "unlabeled=True (qa_source(..., unlabeled=True)) to load its questions with empty "
        "answers"
    )


def _check_unique(src: _Source, ids: Iterable[str]) -> None:
    seen: set[str] = set()
    for task_id in ids:
        if task_id in seen:
            raise DataError(f"{src.name}: duplicate id {task_id!r}; expected unique ids")
        seen.add(task_id)


def _titled_paragraphs(f: _Fields, key: str) -> list[tuple[str, list[str]]]:
    """Validate a HotpotQA-style ``[[title, [sentences]]]`` field."""
    out = []
    for j, item in enumerate(f.items(key) or []):
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], list)
            and all(isinstance(s, str) for s in item[1])
        )
        if not ok:
            raise f.error(f"{key}[{j}] is not [title, [sentences]]")
        out.append((item[0], item[1]))
    return out


def _supporting_facts(f: _Fields) -> list[tuple[str, int]]:
    out = []
    for j, item in enumerate(f.items("supporting_facts") or []):
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        )
        if not ok:
            raise f.error(f"supporting_facts[{j}] is not [title, sentence index]")
        out.append((item[0], item[1]))
    return out


def _join_sentences(sentences: Sequence[str]) -> str:
    """Join sentences as written, adding one space only where neither side has one."""
    text = ""
    for sentence in sentences:
        if text and sentence and not text[-1].isspace() and not sentence[0].isspace():
            text += " "
        text += sentence
    return text


# ---------------------------------------------------------------------------------------------
# Task records

_NUMBER = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")


def answer_type(answer: str) -> str:
    """Classify a gold answer as ``"yes/no"``, ``"number"`` or ``"span"``.

    Args:
        answer: the answer text.

    Returns:
        ``"yes/no"`` for yes or no (any case, a final ``.`` ignored), ``"number"`` for one
        number (thousands commas, a sign, ``$`` or ``%`` allowed), else ``"span"``.
    """
    text = answer.strip().rstrip(".").strip()
    if text.lower() in ("yes", "no"):
        return "yes/no"
    if _NUMBER.fullmatch(text):
        return "number"
    return "span"


def _clean(text: object) -> str:
    """One line of text: runs of whitespace (newlines included) become single spaces."""
    return " ".join(str(text).split())


def _make_task(
    dataset: str,
    split: str,
    local_id: str,
    question: str,
    answer: str,
    *,
    raw: Mapping[str, Any],
    documents: list[dict[str, str]],
    aliases: Sequence[str] = (),
    sub_answers: Mapping[str, str] | None = None,
    rationale: str | None = None,
    plan: Callable[[Task], tuple[PlanStep, ...]] | None = None,
    labeled: bool = True,
) -> Task:
    meta: dict[str, Any] = {"dataset": dataset}
    meta.update((k, v) for k, v in raw.items() if k not in ("question", "answer"))
    meta.update(
        documents=documents,
        aliases=[a for a in aliases if a.strip() and a.strip() != answer],
        sub_answers=dict(sub_answers or {}),
        answer_type=answer_type(answer) if labeled else None,
        labeled=labeled,
    )
    task = Task(
        id=f"{dataset}/{split}/{local_id}",
        question=question,
        answer=answer,
        task_type="qa",
        rationale=rationale,
        meta=meta,
    )
    if plan is None or not labeled:
        return task
    try:
        steps = plan(task)
    except GoldPlanError:
        return task
    known = {**meta["sub_answers"], **plan_sub_answers(steps)}
    return dataclasses.replace(
        task,
        gold_actions=gold_actions(steps),
        meta={**meta, "sub_answers": known, "subgoals": [step.subgoal for step in steps]},
    )


# ---------------------------------------------------------------------------------------------
# Gold plans


class GoldPlanError(DataError):
    """A task's gold decomposition cannot be written as Lumos actions; the message says why."""


@dataclass(frozen=True)
class PlanAction:
    """One grounded action of a gold plan.

    Attributes:
        text: the action without tail, e.g. ``"R1 = KnowledgeQuery(Julius Caesar)"``.
        result: the annotation tail (``"WikipediaPage(Julius Caesar)"``, an answer), or None
            where the dataset does not know it.
    """

    text: str
    result: str | None = None

    @property
    def output(self) -> str:
        """The variable the action binds."""
        return self.text.split(" = ", 1)[0]


@dataclass(frozen=True)
class PlanStep:
    """One subgoal of a gold plan and its actions."""

    subgoal: str
    actions: tuple[PlanAction, ...]


class _PlanBuilder:
    """Writes Lumos QA actions with globally numbered ``R<n>`` variables, subgoal by subgoal."""

    def __init__(self) -> None:
        self._steps: list[PlanStep] = []
        self._pending: list[PlanAction] = []
        self._count = 0

    def _add(self, name: str, args: str, result: str | None, *, free_text: str) -> str:
        self._count += 1
        var = f"R{self._count}"
        text = f"{var} = {name}({args})"
        if _BRACKETS.search(free_text):  # without brackets in the text, the action is sound
            try:
                parsed = parse_action(text)
            except ActionParseError as e:
                raise GoldPlanError(f"{name}({args}) is not a valid action: {e}") from e
            if parsed.name != name or parsed.args != args or parsed.result is not None:
                raise GoldPlanError(f"{name}({args}) does not read back as one action")
        tail = None if result is None else _clean(result)
        if tail is not None and not tail:
            raise GoldPlanError(f"{name}({args}) has an empty result")
        self._pending.append(PlanAction(text, tail))
        return var

    def knowledge(self, title: str) -> str:
        title = _plain(title, "the page title")
        return self._add(
            "KnowledgeQuery", title, f"WikipediaPage({title})", free_text=title
        )

    def retrieve(self, source: str, query: str, result: str | None) -> str:
        return self._add(
            "ParagraphRetrieve", f"{source}, Query: {query}", result, free_text=query
        )

    def qa(self, context: Sequence[str], question: str, result: str | None) -> str:
        args = f"[{', '.join(context)}], Question: {question}"
        return self._add("QA", args, result, free_text=question)

    def subgoal(self, text: str) -> None:
        text = _clean(text)
        if not text or not self._pending:
            raise GoldPlanError("a subgoal without text or actions")
        self._steps.append(PlanStep(text, tuple(self._pending)))
        self._pending = []

    def steps(self) -> tuple[PlanStep, ...]:
        if self._pending or not self._steps:
            raise GoldPlanError("the plan is empty or ends without a subgoal")
        return tuple(self._steps)


_BRACKETS = re.compile(r"[()\[\]{}]")


def _plain(text: object, what: str) -> str:
    """Text placed inside an action: one line, with no ``R<n>`` the env would substitute."""
    text = _clean(text)
    if not text:
        raise GoldPlanError(f"{what} is empty")
    refs = [r for r in references(text) if r != "Output"]
    if refs:
        raise GoldPlanError(
            f"{what} {text!r} mentions {refs[0]}, which the action language reads as a variable"
        )
    return text


def gold_actions(steps: Sequence[PlanStep]) -> tuple[str, ...]:
    """Return the oracle trajectory of a gold plan.

    Args:
        steps: the plan.

    Returns:
        One ``; ``-joined step per subgoal (actions without tails), then ``Answer(R<n>)`` with
        the variable of the plan's last action.
    """
    out = ["; ".join(action.text for action in step.actions) for step in steps]
    out.append(f"Answer({steps[-1].actions[-1].output})")
    return tuple(out)


def plan_sub_answers(steps: Sequence[PlanStep]) -> dict[str, str]:
    """Return ``{question: answer}`` of the plan's ``QA`` actions whose answer is known.

    The questions are written as in the actions (StrategyQA's with their ``R<n>``), so that a
    privileged env's reference ``QA`` backend answers the gold actions when they are replayed.
    """
    known = {}
    for step in steps:
        for action in step.actions:
            parsed = parse_action(action.text)
            question = parsed.arguments().get("Question") if parsed.name == "QA" else None
            if question is not None and action.result is not None:
                known[question] = action.result
    return known


_WH_START = re.compile(
    r"^(?:(?:in|on|at|for|from|by|during|of|to|with|after|before|since|until)\s+)?"
    r"(?:who|whom|whose|what|which|when|where|why|how)\b",
    re.IGNORECASE,
)
# Auxiliaries: after a wh-word they mostly mean an inverted question ("When did X open?"),
# which does not read as an embedded clause ("find out when did X open").
_AUXILIARY = re.compile(
    r"\b(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|may|might)\b",
    re.IGNORECASE,
)
_COPULA_FIRST = re.compile(
    r"^(?:who|what|which)\s+(?:is|are|was|were)\b(?!.*\b(?:do|does|did)\b)", re.IGNORECASE
)


def relation_question(subject: str, relation: str) -> tuple[str, str]:
    """Phrase a ``subject >> relation`` hop (MuSiQue) or an evidence triple (2Wiki).

    Args:
        subject: the entity, e.g. ``"Green"``.
        relation: the relation, e.g. ``"performer"`` or ``"part of"``.

    Returns:
        ``(question, subgoal)``: ``("What is the performer of Green?", "Identify the
        performer of Green.")``; a relation ending in ``of`` gives ``("What is Green part
        of?", "Identify what Green is part of.")``.
    """
    subject, relation = _clean(subject), _clean(relation)
    if relation.lower().endswith(" of"):
        return f"What is {subject} {relation}?", f"Identify what {subject} is {relation}."
    return f"What is the {relation} of {subject}?", f"Identify the {relation} of {subject}."


def qa_subgoal(question: str) -> str:
    """Phrase a sub-question as a subgoal, by rules.

    Args:
        question: a sub-question, e.g. ``"Who founded the city?"``.

    Returns:
        ``"Find out who founded the city."`` for a wh-question that reads as an embedded
        clause (an opening preposition allowed: ``"In which year..."``; ``"What is the
        capital of X?"`` too), else ``"Answer the question: <question>"`` (yes/no questions
        and inverted ones such as ``"When did X open?"``).
    """
    text = _clean(question)
    wh = _WH_START.match(text)
    if wh and (_COPULA_FIRST.match(text) or not _AUXILIARY.search(text, wh.end())):
        return f"Find out {text[:1].lower()}{text[1:].rstrip('?!. ')}."
    return f"Answer the question: {text}"


def _hop(text: str) -> tuple[str, str]:
    """``(question, subgoal)`` of a decomposition step, ``>>`` hops phrased."""
    subject, sep, relation = text.partition(">>")
    if sep and subject.strip() and relation.strip():
        return relation_question(subject, relation)
    question = _clean(text)
    return question, qa_subgoal(question)


_REFERENCE = re.compile(r"#(\d+)")


def _resolve(text: str, values: Sequence[str], where: str) -> str:
    """Replace ``#k`` with ``values[k - 1]``; a reference to no earlier step is an error."""

    def replace(match: re.Match[str]) -> str:
        k = int(match.group(1))
        if not 1 <= k <= len(values):
            raise GoldPlanError(f"{where} refers to #{k}, which no earlier step answers")
        return values[k - 1]

    return _REFERENCE.sub(replace, text)


def _require_answer(task: Task) -> str:
    answer = _clean(task.answer) if isinstance(task.answer, str) else ""
    if not answer:
        raise GoldPlanError("the task has no gold answer")
    return answer


def _names(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _same(a: str, b: str) -> bool:
    return normalize_text(a) == normalize_text(b)


def hotpotqa_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a HotpotQA task, from its supporting facts.

    One subgoal per supporting page, in the order the supporting facts first name it
    (``KnowledgeQuery(title) = WikipediaPage(title)``, then ``ParagraphRetrieve(R, Query:
    question) = Paragraph(title)``), then a final subgoal ``QA([evidence], Question:
    question) = answer`` (yes/no comparisons too).

    Raises:
        GoldPlanError: no supporting facts, no answer, or text that cannot be an action.
    """
    answer = _require_answer(task)
    facts = task.meta.get("supporting_facts")
    titles: list[str] = []
    for fact in facts if isinstance(facts, list | tuple) else ():
        if isinstance(fact, list | tuple) and fact and isinstance(fact[0], str):
            title = _clean(fact[0])
            if title and title not in titles:
                titles.append(title)
    if not titles:
        raise GoldPlanError("the task has no supporting facts")
    question = _plain(task.question, "the question")
    plan = _PlanBuilder()
    evidence = []
    for title in titles:
        page = plan.knowledge(title)
        evidence.append(plan.retrieve(page, question, f"Paragraph({title})"))
        plan.subgoal(f"Find the relevant information about {title}.")
    plan.qa(evidence, question, answer)
    plan.subgoal(f"Answer the question based on the information about {_names(titles)}.")
    return plan.steps()


def _musique_hops(decomposition: object) -> list[tuple[str, str, str, Any]]:
    """``(question, subgoal, answer, paragraph_support_idx)`` per step, ``#k`` resolved."""
    if not isinstance(decomposition, list | tuple) or not decomposition:
        raise GoldPlanError("the task has no question_decomposition")
    answers: list[str] = []
    hops = []
    for k, step in enumerate(decomposition, 1):
        if not isinstance(step, Mapping) or not isinstance(step.get("question"), str):
            raise GoldPlanError(f"decomposition step {k} has no question")
        answer = step.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise GoldPlanError(f"decomposition step {k} has no answer")
        text = _resolve(step["question"], answers, f"decomposition step {k}")
        question, subgoal = _hop(text)
        answers.append(_clean(answer))
        hops.append((question, subgoal, answers[-1], step.get("paragraph_support_idx")))
    return hops


def musique_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a MuSiQue task, from its question decomposition.

    One subgoal per decomposition step, ``#k`` replaced by the answer of step ``k`` and
    ``subject >> relation`` hops phrased as questions: ``KnowledgeQuery(<supporting
    paragraph's title>)``, ``ParagraphRetrieve(R, Query: q)``, ``QA([R], Question: q) =
    <step answer>``; the last step's answer must be the task's answer (or an alias).

    Raises:
        GoldPlanError: an unanswerable task, a step without supporting paragraph, a dangling
            ``#k``, or a last answer that is not the task's.
    """
    answer = _require_answer(task)
    if task.meta.get("answerable") is False:
        raise GoldPlanError("the question is unanswerable (answerable: false)")
    hops = _musique_hops(task.meta.get("question_decomposition"))
    paragraphs = task.meta.get("paragraphs")
    titles = {
        p["idx"]: p.get("title")
        for p in (paragraphs if isinstance(paragraphs, list | tuple) else ())
        if isinstance(p, Mapping) and isinstance(p.get("idx"), int)
    }
    aliases = task.meta.get("aliases")
    accepted = [answer, *(aliases if isinstance(aliases, list | tuple) else ())]
    if not any(_same(hops[-1][2], a) for a in accepted if isinstance(a, str)):
        raise GoldPlanError(
            f"the last step's answer {hops[-1][2]!r} is not the task's answer {answer!r}"
        )
    plan = _PlanBuilder()
    for k, (question, subgoal, step_answer, support) in enumerate(hops, 1):
        title = titles.get(support) if isinstance(support, int) else None
        if not isinstance(title, str) or not title.strip():
            raise GoldPlanError(f"decomposition step {k} has no supporting paragraph")
        question = _plain(question, f"the question of step {k}")
        page = plan.knowledge(title)
        evidence = plan.retrieve(page, question, f"Paragraph({_clean(title)})")
        plan.qa([evidence], question, answer if k == len(hops) else step_answer)
        plan.subgoal(subgoal)
    return plan.steps()


def musique_sub_answers(decomposition: object) -> dict[str, str]:
    """Return ``{sub-question: answer}`` of a MuSiQue decomposition (``#k`` resolved).

    The questions are phrased as in :func:`musique_plan`, so they are the ``Question:`` texts of
    its ``QA`` actions.

    Raises:
        GoldPlanError: the decomposition is missing or malformed.
    """
    return {question: answer for question, _, answer, _ in _musique_hops(decomposition)}


def _strategy_step_evidence(evidence: object, step: int) -> tuple[str, list[str]]:
    """``("retrieval", ids)``, ``("operation", [])`` or ``("no_evidence", [])`` of one step.

    Annotators are read in order; the first one whose evidence for the step is not
    ``no_evidence`` decides.
    """
    for annotator in evidence if isinstance(evidence, list | tuple) else ():
        if not isinstance(annotator, list | tuple) or step >= len(annotator):
            continue
        items = annotator[step]
        items = items if isinstance(items, list | tuple) else [items]
        ids = [
            pid
            for item in items
            if isinstance(item, list | tuple)
            for pid in item
            if isinstance(pid, str) and pid.strip()
        ]
        if ids:
            return "retrieval", list(dict.fromkeys(ids))
        if "operation" in items:
            return "operation", []
    return "no_evidence", []


def _paragraph_title(pid: str, documents: object) -> str:
    for doc in documents if isinstance(documents, list | tuple) else ():
        if isinstance(doc, Mapping) and doc.get("id") == pid and isinstance(doc.get("title"), str):
            return doc["title"]
    head, sep, _ = pid.rpartition("-")
    return head if sep and head.strip() else pid


def strategyqa_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a StrategyQA task, from its decomposition and evidence.

    One subgoal per decomposition step. A retrieval step (an annotator gives paragraph ids)
    queries each evidence page (``KnowledgeQuery(title)``, ``ParagraphRetrieve(R, Query: q) =
    Paragraph(Title-N)``) then asks ``QA([evidence], Question: q)``; an ``operation`` or
    ``no_evidence`` step asks ``QA`` over the results it references (or every earlier result).
    A reference ``#k`` becomes the variable of step ``k``'s ``QA`` action in the actions (the
    env substitutes its value) and "the result of Subgoal k" in the subgoal text.

    StrategyQA does not record the sub-answers, so every ``QA`` action but the last has no
    ``= result`` tail; the last step answers the question and its tail is ``yes`` or ``no``.

    Raises:
        GoldPlanError: no decomposition, a dangling ``#k``, an evidence paragraph missing from
            the paragraphs file, or a first step with neither evidence nor an earlier result.
    """
    answer = _require_answer(task)
    steps = task.meta.get("decomposition")
    if not isinstance(steps, list | tuple) or not steps:
        raise GoldPlanError("the task has no decomposition")
    evidence = task.meta.get("evidence")
    documents = task.meta.get("documents")
    plan = _PlanBuilder()
    results: list[str] = []
    for k, step in enumerate(steps, 1):
        if not isinstance(step, str) or not step.strip():
            raise GoldPlanError(f"decomposition step {k} is not a question")
        where = f"decomposition step {k}"
        text = _plain(step, f"the question of step {k}")
        question = _resolve(text, results, where)
        subgoal = qa_subgoal(
            _resolve(text, [f"the result of Subgoal {j}" for j in range(1, k)], where)
        )
        used = [results[int(j) - 1] for j in dict.fromkeys(_REFERENCE.findall(text))]
        kind, ids = _strategy_step_evidence(evidence, k - 1)
        context: list[str] = []
        if kind == "retrieval":
            pages: dict[str, list[str]] = {}
            known = {
                d.get("id") for d in documents if isinstance(d, Mapping) and d.get("id")
            } if isinstance(documents, list | tuple) else set()
            for pid in ids:
                if known and pid not in known:
                    raise GoldPlanError(f"{where}: the evidence paragraph {pid!r} is missing")
                pages.setdefault(_paragraph_title(pid, documents), []).append(_clean(pid))
            for title, pids in pages.items():
                page = plan.knowledge(title)
                tail = ", ".join(f"Paragraph({pid})" for pid in pids)
                context.append(plan.retrieve(page, question, tail))
        else:
            context = used or list(results)
            if not context:
                raise GoldPlanError(f"{where} has no evidence paragraph and no earlier result")
        results.append(plan.qa(context, question, answer if k == len(steps) else None))
        plan.subgoal(subgoal)
    return plan.steps()


def _match_title(entity: str, titles: Sequence[str]) -> str:
    """The context title of an evidence entity: exact, case-blind, or before ``" ("``."""
    for title in titles:
        if title == entity:
            return title
    folded = entity.casefold()
    for title in titles:
        if title.casefold() == folded:
            return title
    for title in titles:
        if title.split(" (", 1)[0].strip().casefold() == folded:
            return title
    return entity


def _triples(task: Task) -> list[tuple[str, str, str]]:
    raw = task.meta.get("evidences")
    triples = []
    for j, item in enumerate(raw if isinstance(raw, list | tuple) else ()):
        if not (
            isinstance(item, list | tuple)
            and len(item) == 3
            and all(isinstance(x, str) and x.strip() for x in item)
        ):
            raise GoldPlanError(f"evidence {j} is not [subject, relation, object]")
        triples.append((_clean(item[0]), _clean(item[1]), _clean(item[2])))
    if not triples:
        raise GoldPlanError("the task has no evidence triples")
    return triples


def twowiki_plan(task: Task) -> tuple[PlanStep, ...]:
    """The gold plan of a 2WikiMultihopQA task, from its evidence triples.

    Each triple ``[subject, relation, object]`` is one subgoal (``KnowledgeQuery(<context title
    of the subject>)``, ``ParagraphRetrieve(R, Query: What is the <relation> of <subject>?)``,
    ``QA([R], Question: ...) = <object>``). Compositional and inference questions need the
    triples to chain (each subject is the previous object) to the answer; comparison and
    bridge-comparison questions (and yes/no answers) end with ``QA([every retrieved paragraph],
    Question: question) = answer``.

    Raises:
        GoldPlanError: no triples, a malformed triple, or triples that do not chain to the
            answer of a compositional or inference question.
    """
    answer = _require_answer(task)
    triples = _triples(task)
    kind = str(task.meta.get("type") or "").replace("-", "_")
    compare = "comparison" in kind or answer_type(answer) == "yes/no"
    if not compare:
        chained = all(_same(b[0], a[2]) for a, b in zip(triples, triples[1:], strict=False))
        if not chained or not _same(triples[-1][2], answer):
            raise GoldPlanError("the evidence triples do not chain to the answer")
    context = task.meta.get("context")
    titles = [
        c[0]
        for c in (context if isinstance(context, list | tuple) else ())
        if isinstance(c, list | tuple) and c and isinstance(c[0], str)
    ]
    plan = _PlanBuilder()
    evidence = []
    for k, (subject, relation, obj) in enumerate(triples, 1):
        question, subgoal = relation_question(subject, relation)
        question = _plain(question, f"the question of triple {k}")
        title = _match_title(subject, titles)
        page = plan.knowledge(title)
        evidence.append(plan.retrieve(page, question, f"Paragraph({_clean(title)})"))
        last = k == len(triples) and not compare
        plan.qa([evidence[-1]], question, answer if last else obj)
        plan.subgoal(subgoal)
    if compare:  # over the paragraphs: the values alone do not say whose they are
        relation = triples[-1][1]
        entities = list(dict.fromkeys(s for s, r, _ in triples if r == relation))
        plan.qa(evidence, _plain(task.question, "the question"), answer)
        plan.subgoal(f"Compare {_names(entities)} to answer the question.")
    return plan.steps()


GOLD_PLANS: Mapping[str, Callable[[Task], tuple[PlanStep, ...]]] = {
    "hotpotqa": hotpotqa_plan,
    "musique": musique_plan,
    "strategyqa": strategyqa_plan,
    "2wikimultihopqa": twowiki_plan,
}
"""The gold plan builder of each dataset with gold decompositions or supporting facts."""

# ---------------------------------------------------------------------------------------------
# HotpotQA


def load_hotpotqa(path: str | Path, split: str = "dev", *, unlabeled: bool = False) -> list[Task]:
    """Load a HotpotQA file: train/dev distractor, dev/test fullwiki, or the Lumos eval file.

    Args:
        path: the official JSON list.
        split: the split name used in task ids (``hotpotqa/{split}/{_id}``; the position in
            the file for records without ``_id``, as in the Lumos evaluation file).
        unlabeled: accept records without ``answer`` (the test fullwiki file), loading them
            with an empty answer and ``meta["labeled"] = False``.

    Returns:
        One task per record, in file order. ``meta`` holds every field but ``question`` and
        ``answer`` verbatim, ``documents`` (the context paragraphs), ``aliases`` (none),
        ``answer_type``, and for records with supporting facts the gold plan of
        :func:`hotpotqa_plan` (``gold_actions``, ``subgoals``, and in ``sub_answers`` its final
        question with the answer).

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record (the message names the
            record), a record without answer (unless ``unlabeled``), or duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _HOTPOT_EXPECTED
    src = _read_source(path, split, {}, exp)
    tasks = []
    for rec in _records(src, exp):
        f = _Fields(src, rec, exp)
        question = f.text("question").strip()
        value = f.text("answer", required=False)
        answer = _gold_answer(f, value, dataset="HotpotQA", unlabeled=unlabeled)
        f.text("type", required=False)
        f.text("level", required=False)
        _supporting_facts(f)
        documents = [
            {"title": title, "text": "".join(sentences)}
            for title, sentences in _titled_paragraphs(f, "context")
        ]
        local_id = (f.text("_id", required=False) or "").strip() or str(rec.index)
        tasks.append(
            _make_task(
                "hotpotqa", split, local_id, question, answer, raw=rec.data,
                documents=documents, plan=hotpotqa_plan, labeled=bool(answer),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks


def _hub_pairs(value: object, first: str, second: str) -> list[list[Any]] | None:
    if isinstance(value, Mapping):
        pairs = zip(value.get(first) or [], value.get(second) or [], strict=False)
        return [list(pair) for pair in pairs]
    return value if isinstance(value, list) else None


def write_hotpotqa_hub_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Write hub rows of ``hotpotqa/hotpot_qa`` as an official HotpotQA JSON list.

    The hub stores ``id`` and column-wise ``supporting_facts`` (``title``/``sent_id``) and
    ``context`` (``title``/``sentences``); the official file has ``_id`` and
    ``[[title, sent_id]]`` / ``[[title, [sentences]]]`` lists. Rows already in the official
    layout are written as they are; an empty answer (the hub's test rows) is left out.

    Args:
        rows: the hub rows.
        path: the JSON file to write.
    """
    records = []
    for row in rows:
        record: dict[str, Any] = {"_id": row.get("_id", row.get("id"))}
        for key in ("question", "answer", "type", "level"):
            if row.get(key) not in (None, ""):
                record[key] = row[key]
        facts = _hub_pairs(row.get("supporting_facts"), "title", "sent_id")
        if facts:
            record["supporting_facts"] = facts
        context = _hub_pairs(row.get("context"), "title", "sentences")
        if context is not None:
            record["context"] = context
        records.append(record)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# StrategyQA


def _yes_no(value: object) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false"):
        return "yes" if value.strip().lower() in ("yes", "true") else "no"
    return None


def _strategy_evidence(f: _Fields) -> None:
    """Validate ``evidence``: annotators × steps × (id list | "operation" | "no_evidence")."""
    for a, annotator in enumerate(f.items("evidence") or []):
        if not isinstance(annotator, list):
            raise f.error(f"evidence[{a}] is not a list of steps")
        for s, items in enumerate(annotator):
            if not isinstance(items, list):
                raise f.error(f"evidence[{a}][{s}] is not a list")
            for item in items:
                ok = item in ("operation", "no_evidence") or (
                    isinstance(item, list) and all(isinstance(x, str) for x in item)
                )
                if not ok:
                    raise f.error(
                        f"evidence[{a}][{s}] holds {item!r}; expected paragraph-id lists, "
                        "'operation' or 'no_evidence'"
                    )


def _read_paragraphs(path: Path) -> dict[str, dict[str, Any]]:
    src = _read_source(path, "paragraphs", {"paragraphs": _STRATEGY_PARAGRAPH_MEMBER},
                       _PARAGRAPHS_EXPECTED)
    parsed = _parse_json(src, _PARAGRAPHS_EXPECTED)
    if not isinstance(parsed, dict):
        raise DataError(f"{src.name}: not a JSON object; expected {_PARAGRAPHS_EXPECTED}")
    for pid, para in parsed.items():
        if not (
            isinstance(para, dict)
            and isinstance(para.get("title"), str)
            and isinstance(para.get("content"), str)
        ):
            raise DataError(
                f"{src.name}: paragraph {pid!r} lacks a text title or content; "
                f"expected {_PARAGRAPHS_EXPECTED}"
            )
    return parsed


def _archive_has(path: Path, member: str) -> bool:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as archive:
            return any(n.rsplit("/", 1)[-1] == member for n in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _strategy_documents(
    evidence: object, facts: Sequence[str] | None, term: str | None,
    paragraphs: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[list[dict[str, str]], list[str]]:
    """The documents of a record and the evidence ids missing from the paragraphs file."""
    if paragraphs is None:
        title = term or "Facts"
        return [{"title": title, "text": fact} for fact in facts or ()], []
    ids: dict[str, None] = {}
    for annotator in evidence if isinstance(evidence, list) else ():
        for items in annotator:
            for item in items:
                if isinstance(item, list):
                    ids.update(dict.fromkeys(item))
    documents, missing = [], []
    for pid in ids:
        para = paragraphs.get(pid)
        if para is None:
            missing.append(pid)
        else:
            documents.append({"id": pid, "title": para["title"], "text": para["content"]})
    return documents, missing


def _bigbench_answer(example: Mapping[str, Any]) -> str | None:
    scores = example.get("target_scores")
    if isinstance(scores, Mapping):
        numbers = {k: v for k, v in scores.items() if isinstance(v, int | float)}
        ranked = sorted(numbers.items(), key=lambda kv: -kv[1])
        if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
            return _yes_no(ranked[0][0])
    target = example.get("target")
    target = target[0] if isinstance(target, list) and target else target
    match = re.match(r"\s*(yes|no)\b", target, re.IGNORECASE) if isinstance(target, str) else None
    return match.group(1).lower() if match else None


def _load_bigbench(src: _Source, split: str, task: Mapping[str, Any]) -> list[Task]:
    exp = "BIG-bench task.json with examples [{input, target, target_scores}]"
    examples = task.get("examples")
    if not isinstance(examples, list) or not examples:
        raise DataError(f"{src.name}: a JSON object without 'examples'; expected {exp}")
    tasks = []
    for i, example in enumerate(examples):
        where = f"{src.name}: examples[{i}]"
        if not isinstance(example, dict):
            raise DataError(f"{where} is a {type(example).__name__}; expected {exp}")
        question = example.get("input")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{where} has no text 'input'; expected {exp}")
        answer = _bigbench_answer(example)
        if answer is None:
            raise DataError(f"{where}: no Yes/No answer in target_scores or target; expected {exp}")
        target = example.get("target")
        target = target[0] if isinstance(target, list) and target else target
        rationale = None
        if isinstance(target, str):
            rationale = re.sub(r"^\s*(yes|no)\b[.,:]?\s*", "", target, flags=re.IGNORECASE)
            rationale = rationale.strip() or None
        raw = {k: v for k, v in example.items() if k != "input"}
        tasks.append(
            _make_task("strategyqa", split, str(i), question.strip(), answer, raw=raw,
                       documents=[], rationale=rationale)
        )
    return tasks


def load_strategyqa(
    path: str | Path,
    split: str = "train",
    *,
    unlabeled: bool = False,
    paragraphs: str | Path | None = None,
) -> list[Task]:
    """Load a StrategyQA file (train, train_filtered, test, Lumos eval or BIG-bench).

    Args:
        path: the JSON file, or the official ``strategyqa_dataset.zip`` (the split names
            its member: ``train``, ``train_filtered`` or ``test``).
        split: the split name used in task ids (``strategyqa/{split}/{qid}``; the position for
            records without ``qid``, as in the Lumos and BIG-bench files).
        unlabeled: accept records without ``answer`` (``strategyqa_test.json``).
        paragraphs: a ``strategyqa_train_paragraphs.json`` file (or the zip holding it); the
            evidence paragraphs of each record become its documents. By default the official
            zip's own paragraphs file is used when ``path`` is that zip; otherwise each fact
            is a document titled with the term.

    Returns:
        One task per record, in file order. ``answer`` is ``"yes"`` or ``"no"``;
        ``rationale`` is the facts joined by spaces (BIG-bench: the target's justification);
        ``meta`` holds every other field verbatim, the QA conventions, ``missing_paragraphs``
        (evidence ids absent from the paragraphs file) and the gold plan of
        :func:`strategyqa_plan` for decomposed records.

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record, an answer that is not
            a boolean (or yes/no), a record without answer (unless ``unlabeled``), or
            duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _STRATEGY_EXPECTED
    src = _read_source(path, split, _STRATEGY_MEMBERS, exp)
    parsed = _parse_json(src, exp)
    if isinstance(parsed, dict) and "examples" in parsed:
        return _load_bigbench(src, split, parsed)
    records = _as_records(src, parsed, exp)
    if paragraphs is None and _archive_has(path, _STRATEGY_PARAGRAPH_MEMBER):
        paragraphs = path
    para_map = _read_paragraphs(Path(paragraphs)) if paragraphs is not None else None
    tasks = []
    for rec in records:
        f = _Fields(src, rec, exp)
        question = f.text("question").strip()
        answer: str | None = None
        if f.present("answer"):
            answer = _yes_no(rec.data["answer"])
            if answer is None:
                raise f.error(f"field 'answer' is {rec.data['answer']!r}, not true/false")
        gold = _gold_answer(f, answer, dataset="StrategyQA", unlabeled=unlabeled)
        term = f.text("term", required=False)
        f.text("description", required=False)
        facts = f.texts("facts")
        f.texts("decomposition")
        _strategy_evidence(f)
        documents, missing = _strategy_documents(rec.data.get("evidence"), facts, term, para_map)
        raw = dict(rec.data)
        if para_map is not None:
            raw["missing_paragraphs"] = missing
        local_id = (f.text("qid", required=False) or "").strip() or str(rec.index)
        tasks.append(
            _make_task(
                "strategyqa", split, local_id, question, gold, raw=raw, documents=documents,
                rationale=" ".join(x.strip() for x in facts) if facts else None,
                plan=strategyqa_plan, labeled=bool(gold),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks


# ---------------------------------------------------------------------------------------------
# MuSiQue


def _musique_paragraphs(f: _Fields) -> list[Mapping[str, Any]]:
    paragraphs = f.items("paragraphs", required=True) or []
    for j, p in enumerate(paragraphs):
        ok = (
            isinstance(p, dict)
            and isinstance(p.get("idx"), int)
            and isinstance(p.get("title"), str)
            and isinstance(p.get("paragraph_text"), str)
            and isinstance(p.get("is_supporting", False), bool)
        )
        if not ok:
            raise f.error(f"paragraphs[{j}] is not {{idx, title, paragraph_text, is_supporting}}")
    return paragraphs


def _musique_decomposition(f: _Fields) -> None:
    for j, step in enumerate(f.items("question_decomposition") or []):
        support = step.get("paragraph_support_idx") if isinstance(step, dict) else None
        ok = (
            isinstance(step, dict)
            and isinstance(step.get("question"), str)
            and isinstance(step.get("answer"), str)
            and (support is None or (isinstance(support, int) and not isinstance(support, bool)))
        )
        if not ok:
            raise f.error(
                f"question_decomposition[{j}] is not {{id, question, answer, "
                "paragraph_support_idx}"
            )


def load_musique(
    path: str | Path, split: str = "ans_dev", *, unlabeled: bool = False
) -> list[Task]:
    """Load a MuSiQue file (MuSiQue-Ans or MuSiQue-Full, any split).

    Args:
        path: a ``musique_*_v1.0_*.jsonl`` file, or the release zip (the split names the
            member: ``ans_train``, ``ans_dev``, ``ans_test``, ``full_train``...).
        split: the split name used in task ids (``musique/{split}/{id}``, with the suffix
            ``:unanswerable`` for ``answerable: false`` records and ``#2``... for the later
            copies of an id in an unlabeled full file).
        unlabeled: accept records without ``answer`` (the test files).

    Returns:
        One task per record, in file order. ``meta`` holds every field but ``question`` and
        ``answer`` verbatim (``answerable`` included: ``False`` marks an unanswerable
        question), ``documents`` (the paragraphs), ``aliases`` (``answer_aliases``),
        ``sub_answers`` (each decomposition question, ``#k`` resolved and phrased as in
        :func:`musique_plan`, with its answer) and, for answerable records, the gold plan.

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record, a record without
            answer (unless ``unlabeled``), or duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _MUSIQUE_EXPECTED
    src = _read_source(path, split, _MUSIQUE_MEMBERS, exp)
    tasks = []
    seen: dict[str, int] = {}
    for rec in _records(src, exp):
        f = _Fields(src, rec, exp)
        record_id = f.text("id").strip()
        question = f.text("question").strip()
        paragraphs = _musique_paragraphs(f)
        _musique_decomposition(f)
        value = f.text("answer", required=False)
        answer = _gold_answer(f, value, dataset="MuSiQue", unlabeled=unlabeled)
        aliases = f.texts("answer_aliases") or []
        answerable = f.boolean("answerable", required=False)
        try:
            sub_answers = musique_sub_answers(rec.data.get("question_decomposition"))
        except GoldPlanError:
            sub_answers = {}
        local_id = record_id + (":unanswerable" if answerable is False else "")
        if not answer and answerable is None:  # unlabeled full files repeat each id
            seen[local_id] = seen.get(local_id, 0) + 1
            if seen[local_id] > 1:
                local_id = f"{local_id}#{seen[local_id]}"
        documents = [{"title": p["title"], "text": p["paragraph_text"]} for p in paragraphs]
        tasks.append(
            _make_task(
                "musique", split, local_id, question, answer, raw=rec.data,
                documents=documents, aliases=aliases, sub_answers=sub_answers,
                plan=musique_plan, labeled=bool(answer),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks


# ---------------------------------------------------------------------------------------------
# 2WikiMultihopQA


def _evidences(f: _Fields) -> list[tuple[str, str, str]]:
    out = []
    for j, item in enumerate(f.items("evidences") or []):
        if not (
            isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)
        ):
            raise f.error(f"evidences[{j}] is not [subject, relation, object]")
        out.append((item[0], item[1], item[2]))
    return out


def load_twowiki(path: str | Path, split: str = "dev", *, unlabeled: bool = False) -> list[Task]:
    """Load a 2WikiMultihopQA file (``train.json``, ``dev.json``, ``test.json``, any release).

    Args:
        path: the JSON list, or a release zip (the split names the member: ``dev`` for
            ``dev.json``; ``ids_dev`` too, for the release with ``evidences_id``).
        split: the split name used in task ids (``2wikimultihopqa/{split}/{_id}``).
        unlabeled: accept records without ``answer`` (``test.json``).

    Returns:
        One task per record, in file order. ``meta`` holds every field but ``question`` and
        ``answer`` verbatim (``type``, ``entity_ids``, ``evidences``, ``evidences_id``,
        ``answer_id``...), ``documents`` (the context paragraphs, sentences joined with a
        space where they have none), ``sub_answers`` (one question per evidence triple, as in
        :func:`twowiki_plan`) and the gold plan where the triples allow one.

    Raises:
        DataError: missing or empty file, bad JSON, a malformed record, a record without
            answer (unless ``unlabeled``), or duplicate ids.
    """
    path, split = Path(path), _split_name(split)
    exp = _TWOWIKI_EXPECTED
    src = _read_source(path, split, _TWOWIKI_MEMBERS, exp)
    tasks = []
    for rec in _records(src, exp):
        f = _Fields(src, rec, exp)
        question = f.text("question").strip()
        value = f.text("answer", required=False)
        answer = _gold_answer(f, value, dataset="2WikiMultihopQA", unlabeled=unlabeled)
        f.text("type", required=False)
        f.text("entity_ids", required=False)
        _supporting_facts(f)
        triples = _evidences(f)
        documents = [
            {"title": title, "text": _join_sentences(sentences)}
            for title, sentences in _titled_paragraphs(f, "context")
        ]
        sub_answers = {relation_question(s, r)[0]: _clean(o) for s, r, o in triples}
        local_id = (f.text("_id", required=False) or "").strip() or str(rec.index)
        tasks.append(
            _make_task(
                "2wikimultihopqa", split, local_id, question, answer, raw=rec.data,
                documents=documents, sub_answers=sub_answers, plan=twowiki_plan,
                labeled=bool(answer),
            )
        )
    _check_unique(src, (t.id for t in tasks))
    return tasks


# ---------------------------------------------------------------------------------------------
# Bamboogle


def _csv_records(src: _Source, expected: str) -> list[_Record]:
    try:
        reader = csv.DictReader(io.StringIO(src.text, newline=""))
        rows = []
        for row in reader:
            values = [v for v in row.values() if isinstance(v, str)]
            if not any(v.strip() for v in values):
                continue
            i = len(rows)
            rows.append(_Record(i, f"row {i} (line {reader.line_num})", row))
    except csv.Error as e:
        raise DataError(f"{src.name}: bad CSV ({e}); expected {expected}") from e
    if not rows:
        raise DataError(f"{src.name}: no rows under the CSV header; expected {expected}")
    return rows


def _field(data: Mapping[str, Any], *names: str) -> Any:
    keys = {str(k).strip().lower(): k for k in data if k is not None}
    for name in names:
        key = keys.get(name)
        if key is not None and data[key] is not None:
            return data[key]
    return None


def load_bamboogle(path: str | Path, split: str = "test", *, unlabeled: bool = False) -> list[Task]:
    """Load Bamboogle: the sheet's CSV export, or JSON (lines) records.

    Args:
        path: a ``.csv`` with ``Question`` and ``Answer`` columns (any case; other columns are
            kept), or JSON records with ``question`` and ``answer`` (or a ``golden_answers``
            list whose first item is the answer and the rest aliases).
        split: the split name used in task ids (``bamboogle/{split}/{position}``).
        unlabeled: accept rows without an answer.

    Returns:
        One task per non-blank row, in file order, without documents.

    Raises:
        DataError: missing or empty file, bad CSV or JSON, a row without question, or a row
            without answer (unless ``unlabeled``).
    """
    path, split = Path(path), _split_name(split)
    exp = _BAMBOOGLE_EXPECTED
    src = _read_source(path, split, {}, exp)
    if not src.text.strip():
        raise DataError(f"{src.name}: the file is empty; expected {exp}")
    is_json = src.text.lstrip()[:1] in ("[", "{")
    rows = _records(src, exp) if is_json else _csv_records(src, exp)
    tasks = []
    for rec in rows:
        question = _field(rec.data, "question")
        if not isinstance(question, str) or not question.strip():
            raise DataError(
                f"{src.name}: {rec.where}: no text in column 'Question'; expected {exp}"
            )
        golden = _field(rec.data, "golden_answers")
        answer = _field(rec.data, "answer")
        aliases: list[str] = []
        if answer is None and isinstance(golden, list) and golden:
            answer, aliases = golden[0], [str(a) for a in golden[1:]]
        if answer is not None and not isinstance(answer, str | int | float):
            raise DataError(f"{src.name}: {rec.where}: the answer is not text; expected {exp}")
        text = str(answer).strip() if answer is not None else ""
        if not text and not unlabeled:
            raise DataError(
                f"{src.name}: {rec.where}: no text in column 'Answer'; expected {exp} (pass "
                "unlabeled=True to load questions without answers)"
            )
        raw = {
            k: v
            for k, v in rec.data.items()
            if str(k).strip().lower() not in ("question", "answer")
        }
        tasks.append(
            _make_task("bamboogle", split, str(rec.index), question.strip(), text, raw=raw,
                       documents=[], aliases=aliases, labeled=bool(text))
        )
    return tasks


def write_bamboogle_hub_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Write hub rows of ``chiayewken/bamboogle`` (``Question``, ``Answer``) as JSON lines."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------
# Sources

QA_LOADERS: Mapping[str, Callable[..., list[Task]]] = {
    "hotpotqa": load_hotpotqa,
    "strategyqa": load_strategyqa,
    "musique": load_musique,
    "2wikimultihopqa": load_twowiki,
    "bamboogle": load_bamboogle,
}
"""The loader of each dataset: ``loader(path, split, *, unlabeled=False, ...)``."""

#: Hub ``(config, split)`` of each HotpotQA split name.
_HOTPOT_HUB_SPLITS = {
    "train": ("distractor", "train"),
    "dev": ("distractor", "validation"),
    "dev_fullwiki": ("fullwiki", "validation"),
    "test_fullwiki": ("fullwiki", "test"),
}
_HUB_WRITERS: Mapping[str, tuple[Callable[[list[dict[str, Any]], Path], None], str]] = {
    "hotpotqa": (write_hotpotqa_hub_rows, "json"),
    "bamboogle": (write_bamboogle_hub_rows, "jsonl"),
}


def sample_path(dataset: str) -> Path:
    """Return the path of a dataset's bundled sample file."""
    return DATA_DIR / SAMPLE_FILES[dataset]


def _hub_source(dataset: str, split: str, loader: Loader) -> TaskSource:
    info = data.DATASETS.get(dataset)
    if info.hub is None or dataset not in _HUB_WRITERS:
        raise ValueError(f"{dataset} has no hub source; use 'official' or a path")
    repo_id, config = info.hub
    hub_split = split
    if dataset == "hotpotqa":
        if split not in _HOTPOT_HUB_SPLITS:
            raise ValueError(
                f"HotpotQA on the hub has the splits {', '.join(_HOTPOT_HUB_SPLITS)}; "
                f"got {split!r}"
            )
        config, hub_split = _HOTPOT_HUB_SPLITS[split]
    writer, suffix = _HUB_WRITERS[dataset]

    def load_cached(path: Path, _hub_split: str) -> list[Task]:
        return loader(path, split)

    return HubSource(
        repo_id, config=config, split=hub_split, loader=load_cached, writer=writer,
        cache_path=data.dataset_dir(dataset) / f"hub-{config or 'default'}-{split}.{suffix}",
    )


def qa_source(
    dataset: str,
    *,
    split: str,
    source: str | Path,
    unlabeled: bool = False,
    paragraphs: str | Path | None = None,
) -> TaskSource:
    """Return the task source of a complex-QA dataset.

    Args:
        dataset: one of :data:`QA_DATASETS`.
        split: the split (HotpotQA ``train``, ``dev``, ``dev_fullwiki``, ``test_fullwiki``,
            ``lumos_eval``; StrategyQA ``train``, ``train_filtered``, ``test``, ``lumos_eval``,
            ``bigbench``; MuSiQue ``ans_dev``, ``full_train``...; 2WikiMultihopQA ``train``,
            ``dev``, ``test``, ``ids_dev``...; Bamboogle ``test``); the bundled sample is
            always ``sample``.
        source: ``"bundled"`` (the sample shipped in the package), ``"official"`` (the file
            fetched by ``lumos-gym data download``), ``"hub"`` (HotpotQA and Bamboogle from
            the Hugging Face hub) or a path to an official-format file.
        unlabeled: load records without gold answers (test splits) with empty answers.
        paragraphs: StrategyQA only: a paragraphs file for the documents (see
            :func:`load_strategyqa`).

    Raises:
        ValueError: an unknown dataset, or a hub source the dataset does not have.
    """
    if dataset not in QA_LOADERS:
        raise ValueError(f"dataset must be one of {', '.join(QA_DATASETS)}, got {dataset!r}")
    options: dict[str, Any] = {"unlabeled": unlabeled}
    if dataset == "strategyqa":
        if source == "bundled" and paragraphs is None:
            paragraphs = DATA_DIR / STRATEGYQA_SAMPLE_PARAGRAPHS
        options["paragraphs"] = paragraphs
    elif paragraphs is not None:
        raise ValueError("paragraphs= is a StrategyQA option")
    loader: Loader = partial(QA_LOADERS[dataset], **options)
    if source == "bundled":
        return BundledSource(f"qa/{SAMPLE_FILES[dataset]}", loader, split="sample")
    if source == "official":
        return FileSource(
            data.dataset_path(dataset, split),
            loader,
            split=split,
            hint=data.download_hint(dataset, split),
        )
    if source == "hub":
        return _hub_source(dataset, split, loader)
    return FileSource(
        source, loader, split=split, hint=f"pass the path of the official {dataset} file"
    )
