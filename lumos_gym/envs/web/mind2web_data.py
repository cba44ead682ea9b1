r"""Mind2Web's official task files: loading, candidate pages, action strings and step scores.

The official data (Deng et al., 2023; ``OSU-NLP-Group/Mind2Web``, Hugging Face dataset
``osunlp/Mind2Web``, whose card lists every field below) comes as JSON files, each a list of
tasks: the training files ``data/train/train_*.json`` and the test folders ``test_task``,
``test_website`` and ``test_domain`` (unzipped from ``test.zip``; same layout). A task is::

    {"annotation_id": "...", "website": "...", "domain": "...", "subdomain": "...",
     "confirmed_task": "...",
     "action_reprs": ["[combobox]  Departing from -> TYPE: ATLANTA", "[span]  Atlanta -> CLICK"],
     "actions": [{"action_uid": "...", "raw_html": "...", "cleaned_html": "...",
                  "operation": {"op": "TYPE", "original_op": "TYPE", "value": "ATLANTA"},
                  "pos_candidates": [{"tag": "input", "attributes": "{\"backend_node_id\": ...}",
                                      "backend_node_id": "136", "is_original_target": true,
                                      "is_top_level_target": true}],
                  "neg_candidates": [...]}]}

* ``op`` is CLICK, TYPE or SELECT; ``original_op`` also has HOVER and ENTER, mapped to CLICK
  (dataset card);
* ``attributes`` is a JSON string since the dataset's commit "fix attributes field as
  serielized json dict" (a dict before: both are read);
* ``pos_candidates`` may be empty (the labelled element did not survive cleaning);
* ``cleaned_html`` carries a ``backend_node_id`` attribute on every kept element, which is how
  a candidate is found in it (MindAct's ``format_candidate`` in allenai/lumos
  ``eval/mind2web/dataloader.py`` does the same with lxml).

The optional MindAct candidate-generation output ``scores_all_data.pkl`` is a pickled dict
``{"scores": {key: {backend_node_id: score}}, "ranks": {key: {backend_node_id: rank}}}`` with
``key = f"{annotation_id}_{action_uid}"`` and rank 0 best (read this way by Synapse's
``run_mind2web.py``); with it, a step's page keeps the best-ranked candidates, as MindAct's
top-50 evaluation does.

Lumos evaluates step-wise and teacher-forced (docs/lumos-format.md §1.5, §2.3): at each gold
step the "page" is the step's candidate set (positives and negatives, at most 50).
:class:`StepPage` is one such page; :func:`score_step` scores a prediction on it under a
named rule of :mod:`lumos_gym.scoring.mind2web` (``mind2web/official``, Mind2Web's own
metric, by default; ``mind2web/lumos``, Lumos'), which also holds :class:`StepScore`,
:func:`operation_f1` and :func:`episode_metrics` (importable from here too).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from lumos_gym.envs.sources import TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.scoring.mind2web import (
    OFFICIAL,
    StepScore,
    episode_metrics,
    operation_f1,
    score_action,
)

__all__ = [
    "MAX_CANDIDATES",
    "OPERATIONS",
    "ORIGINAL_OPERATIONS",
    "SPLITS",
    "ActionRepr",
    "Candidate",
    "Mind2WebSource",
    "Operation",
    "StepPage",
    "StepScore",
    "build_page",
    "episode_metrics",
    "grounded_action",
    "infer_split",
    "load_candidate_ranks",
    "load_mind2web",
    "operation_f1",
    "parse_action_repr",
    "record_task",
    "score_step",
    "step_subgoal",
    "task_files",
]

#: The official split names (file layout ``train/train_*.json``, ``test_task/*.json``...).
SPLITS = ("train", "test_task", "test_website", "test_domain")
#: The operations scored (``operation.op``).
OPERATIONS = ("CLICK", "TYPE", "SELECT")
#: The operations as annotated (``operation.original_op``): HOVER and ENTER count as CLICK.
ORIGINAL_OPERATIONS = ("CLICK", "TYPE", "SELECT", "HOVER", "ENTER")
#: Candidates per page: Lumos and MindAct keep 50.
MAX_CANDIDATES = 50

_TASK_FIELDS = ("annotation_id", "confirmed_task", "action_reprs", "actions")
_ACTION_FIELDS = ("action_uid", "operation", "pos_candidates", "neg_candidates", "cleaned_html")
# MindAct's salient attributes (the ones its tree representation keeps); cleaned_html writes
# them with underscores (aria_label), pages written by hand may use dashes.
_SALIENT = (
    "role", "aria_role", "aria_label", "aria-label", "aria_description", "label", "placeholder",
    "title", "alt", "name", "type", "value", "input_value", "text_value", "input_checked",
    "option_selected",
)
_SHOWN = ("aria_label", "aria-label", "placeholder", "title", "alt", "label", "value",
          "input_value", "text_value", "name")
_REPR_RE = re.compile(
    r"\s*\[(?P<tag>[^\]]*)\]\s*(?P<text>.*?)\s*->\s*(?P<op>[A-Z]+)(?::\s?(?P<value>.*))?\s*\Z",
    re.DOTALL,
)
_WORD_LIMIT = 60
_LABEL_CHARS = 90
_BRACKETS = "()[]{}"


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Operation:
    """A step's gold operation.

    Attributes:
        op: CLICK, TYPE or SELECT (what is scored).
        value: the typed text or chosen option ("" for CLICK).
        original_op: the annotated operation (CLICK, TYPE, SELECT, HOVER or ENTER).
    """

    op: str
    value: str = ""
    original_op: str = ""

    @classmethod
    def from_record(cls, record: Any, where: str) -> Operation:
        """Read an official ``operation`` object.

        Raises:
            DataError: when it is not an object with an ``op`` of :data:`OPERATIONS`.
        """
        if not isinstance(record, Mapping) or "op" not in record:
            raise DataError(f"{where}: 'operation' must be an object with an 'op'")
        op = str(record["op"]).upper()
        if op not in OPERATIONS:
            raise DataError(f"{where}: operation {op!r} is not one of {OPERATIONS}")
        value = record.get("value")
        original = str(record.get("original_op") or op).upper()
        return cls(op, "" if value is None else str(value), original)


@dataclass(frozen=True)
class ActionRepr:
    """An ``action_reprs`` string read apart: ``[tag]  text -> OP: value``.

    Attributes:
        tag: the element's tag or role (``combobox``, ``span``, ``button``...).
        text: the element's text as the string gives it (may be empty).
        op: the operation written (CLICK, TYPE, SELECT, HOVER, ENTER).
        value: the value after ``OP:`` ("" when there is none).
    """

    tag: str
    text: str
    op: str
    value: str = ""


def parse_action_repr(text: str) -> ActionRepr | None:
    """Read an ``action_reprs`` string; None when it is not in ``[tag] text -> OP`` form."""
    match = _REPR_RE.match(text)
    if match is None:
        return None
    return ActionRepr(
        match.group("tag").strip(),
        " ".join(match.group("text").split()),
        match.group("op"),
        (match.group("value") or "").strip(),
    )


def _require(record: Any, fields: Sequence[str], where: str) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        raise DataError(f"{where}: expected an object, got {type(record).__name__}")
    missing = [name for name in fields if name not in record]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
    return record


def record_task(record: Mapping[str, Any], split: str, where: str = "task") -> Task:
    """Turn one official task record into a :class:`Task` (every field kept in ``meta``).

    The task id is ``mind2web/{split}/{annotation_id}``; the question is ``confirmed_task``; the
    answer and the rationale are ``'; '.join(action_reprs)`` (the "natural language plan" Lumos
    converted, docs/lumos-format.md §1.2); the gold actions are one grounded action per step
    (:func:`grounded_action`).

    Raises:
        DataError: naming ``where`` and the field when the record is malformed.
    """
    _require(record, _TASK_FIELDS, where)
    annotation_id = str(record["annotation_id"]).strip()
    if not annotation_id:
        raise DataError(f"{where}: empty annotation_id")
    where = f"{where} ({annotation_id})"
    actions, reprs = record["actions"], record["action_reprs"]
    if not isinstance(actions, list) or not actions:
        raise DataError(f"{where}: 'actions' must be a non-empty list")
    if not isinstance(reprs, list) or len(reprs) != len(actions):
        raise DataError(f"{where}: 'action_reprs' must list one string per action")
    operations = []
    for n, action in enumerate(actions):
        at = f"{where}, action {n}"
        _require(action, _ACTION_FIELDS, at)
        for key in ("pos_candidates", "neg_candidates"):
            if not isinstance(action[key], list):
                raise DataError(f"{at}: {key!r} must be a list")
        operations.append(Operation.from_record(action["operation"], at))
    reprs = [str(r) for r in reprs]
    gold = tuple(
        grounded_action(n, reprs[n], operations[n], strict=False) for n in range(len(actions))
    )
    return Task(
        id=f"mind2web/{split}/{annotation_id}",
        question=" ".join(str(record["confirmed_task"]).split()),
        answer="; ".join(reprs),
        task_type="web",
        rationale="; ".join(reprs),
        gold_actions=gold,
        meta={**record, "split": split},
    )


def _natural_key(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def infer_split(path: Path) -> str:
    """Return the split a path holds: a split folder's name, its parent's, ``train_*.json``."""
    for candidate in (path.name, path.parent.name):
        if candidate in SPLITS:
            return candidate
    if path.name.startswith("train_"):
        return "train"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem) or "custom"


def task_files(path: Path, split: str | None = None) -> list[Path]:
    """Return the task files at ``path``: the file itself, or a folder's ``*.json`` in order.

    A folder holding a sub-folder named ``split`` (the data root) is read from that sub-folder.
    Gzipped files (``*.json.gz``, as the bundled set is shipped) are read too.

    Raises:
        DataError: when the path is missing or the folder holds no ``*.json`` file.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DataError(f"{path}: no such Mind2Web file or folder")
    if split is not None and (path / split).is_dir():
        path = path / split
    found = [*path.glob("*.json"), *path.glob("*.json.gz")]
    files = sorted((p for p in found if p.is_file()), key=_natural_key)
    if not files:
        raise DataError(f"{path}: no Mind2Web task files (*.json) in this folder")
    return files


def load_mind2web(path: Path, split: str) -> list[Task]:
    """Read the Mind2Web tasks of a file or folder (the :data:`~.sources.Loader` signature).

    Args:
        path: an official JSON file (a list of tasks), a folder of them, or the data root
            holding a folder named ``split``.
        split: the split name written into task ids.

    Raises:
        DataError: a missing path, unreadable JSON, a malformed task or a repeated id.
    """
    tasks: list[Task] = []
    seen: set[str] = set()
    for file in task_files(Path(path), split):
        try:
            raw = file.read_bytes()
            if file.name.endswith(".gz"):
                raw = gzip.decompress(raw)
            records = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, EOFError) as e:
            raise DataError(f"{file}: not readable as JSON ({e})") from e
        if not isinstance(records, list):
            raise DataError(f"{file}: expected a list of tasks, got {type(records).__name__}")
        for n, record in enumerate(records):
            task = record_task(record, split, f"{file.name}[{n}]")
            if task.id in seen:
                raise DataError(f"{file.name}[{n}]: annotation_id repeated ({task.id})")
            seen.add(task.id)
            tasks.append(task)
    return tasks


class Mind2WebSource(TaskSource):
    """Mind2Web tasks from an official file, a folder of them or a split folder.

    Args:
        path: the file or folder.
        split: the split written into task ids (default: :func:`infer_split`).
        kind: ``"file"`` or ``"bundled"``, for provenance.
        shown_path: the path :meth:`describe` reports (a package-relative one when bundled).
        hint: how to get the data when the path is missing.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        split: str | None = None,
        kind: str = "file",
        shown_path: str | None = None,
        hint: str = "",
    ) -> None:
        self.path = Path(path).expanduser()
        self.split = split or infer_split(self.path)
        self.kind = kind
        self.shown_path = shown_path or str(self.path)
        self.hint = hint

    def load(self) -> list[Task]:
        """Read the tasks; a missing path is a one-line DataError with the hint."""
        if not self.path.exists():
            hint = f"; {self.hint}" if self.hint else ""
            raise DataError(f"{self.path}: no such Mind2Web file or folder{hint}")
        return load_mind2web(self.path, self.split)

    def describe(self) -> dict[str, Any]:
        """Return the kind, path, split and a SHA-256 over the task files' bytes."""
        digest = None
        if self.path.exists():
            sha = hashlib.sha256()
            for file in task_files(self.path, self.split):
                sha.update(file.name.encode())
                sha.update(file.read_bytes())
            digest = sha.hexdigest()
        return {"kind": self.kind, "path": self.shown_path, "split": self.split, "sha256": digest}


def load_candidate_ranks(path: str | Path) -> dict[str, Mapping[str, int]]:
    """Read MindAct's ``scores_all_data.pkl``: ranks per ``{annotation_id}_{action_uid}``.

    The file is a pickle: load only the official file or one you made (pickles run code).

    Raises:
        DataError: when the file is missing or has no ``ranks`` table.
    """
    path = Path(path).expanduser()
    try:
        with open(path, "rb") as f:
            data = pickle.load(f)  # noqa: S301 - the official MindAct output is a pickle
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        raise DataError(f"{path}: cannot read the MindAct candidate ranks ({e})") from e
    ranks = data.get("ranks") if isinstance(data, Mapping) else None
    if not isinstance(ranks, Mapping):
        raise DataError(f"{path}: expected a dict with a 'ranks' table (scores_all_data.pkl)")
    return {str(k): {str(n): int(r) for n, r in v.items()} for k, v in ranks.items()}


# ---------------------------------------------------------------------------------------------
# Pages


@dataclass(frozen=True)
class Candidate:
    """One candidate element of a page.

    Attributes:
        backend_node_id: its id in the page's ``cleaned_html``.
        tag: its tag.
        attributes: its attributes (the candidate record's, completed from the element).
        text: its visible text in ``cleaned_html`` (whitespace collapsed, at most 60 words).
        positive: whether it is a gold element of the step.
    """

    backend_node_id: str
    tag: str
    attributes: Mapping[str, str]
    text: str
    positive: bool = False

    @cached_property
    def name(self) -> str:
        """Return the text that names the element: its visible text, else a telling attribute."""
        if self.text:
            return self.text
        for key in _SHOWN:
            value = self.attributes.get(key, "").strip()
            if value:
                return " ".join(value.split())
        return ""

    @cached_property
    def label(self) -> str:
        """Return ``[tag] name`` (the ``action_reprs`` style), at most 90 characters."""
        text = f"[{self.tag}] {self.name}".strip()
        return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 3] + "..."

    @cached_property
    def ranking_text(self) -> str:
        """Return the text rankers score: tag, salient attribute values and visible text."""
        values = [self.attributes[k] for k in _SALIENT if self.attributes.get(k, "").strip()]
        return " ".join(" ".join([self.tag, *values, self.text]).split())


@dataclass(frozen=True)
class StepPage:
    """The page of one gold step: its candidates (shuffled) and the gold operation.

    Attributes:
        step: the 0-based step index.
        steps: the task's number of steps.
        candidates: the candidate elements, in display order.
        operation: the gold operation.
        action_repr: the step's ``action_reprs`` string.
        key: ``{annotation_id}_{action_uid}``.
    """

    step: int
    steps: int
    candidates: tuple[Candidate, ...]
    operation: Operation
    action_repr: str
    key: str

    @property
    def number(self) -> int:
        """Return the 1-based page number."""
        return self.step + 1

    def listing(self) -> str:
        """Return the page as text: a header and one ``[tag] name`` line per candidate."""
        head = f"Page {self.number} of {self.steps} ({len(self.candidates)} elements):"
        lines = [f"- {c.label}" for c in self.candidates] or ["(no candidate elements)"]
        return "\n".join([head, *lines])


def parse_attributes(value: Any) -> dict[str, str]:
    """Return a candidate's attributes as a dict: a JSON string or a dict (older files)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return {}
    if not isinstance(value, Mapping):
        return {}
    return {str(k): " ".join(str(v).split()) if v is not None else "" for k, v in value.items()}


def _element_index(cleaned_html: str) -> dict[str, Any]:
    from bs4 import BeautifulSoup  # imported with the first page (web extra)

    soup = BeautifulSoup(cleaned_html or "", "html.parser")
    return {
        str(el.get("backend_node_id")): el for el in soup.find_all(attrs={"backend_node_id": True})
    }


def _candidate(record: Any, index: Mapping[str, Any], positive: bool) -> Candidate | None:
    if not isinstance(record, Mapping):
        return None
    attributes = parse_attributes(record.get("attributes"))
    node_id = str(record.get("backend_node_id") or attributes.get("backend_node_id") or "")
    if not node_id:
        return None
    element = index.get(node_id)
    text = ""
    if element is not None:
        words = element.get_text(" ", strip=True).split()
        text = " ".join(words[:_WORD_LIMIT])
        for key, value in element.attrs.items():
            if key not in attributes and isinstance(value, str):
                attributes[key] = " ".join(value.split())
    tag = str(record.get("tag") or (element.name if element is not None else "") or "element")
    return Candidate(node_id, tag, attributes, text, positive)


def build_page(
    task: Task,
    step: int,
    *,
    max_candidates: int = MAX_CANDIDATES,
    seed: int = 0,
    ranks: Mapping[str, Mapping[str, int]] | None = None,
) -> StepPage:
    """Build the page of gold step ``step`` of a Mind2Web task.

    Without ``ranks`` the page keeps the positives then the negatives in file order, the first
    ``max_candidates`` of them (Lumos' ``env[:50]``); with MindAct ranks it keeps the
    ``max_candidates`` best-ranked candidates, as MindAct's evaluation does (a positive ranked
    below the cut is then not on the page). The kept candidates are shuffled with a generator
    seeded by ``(seed, task id, step)``, so the order never gives the gold element away.

    Raises:
        DataError: when ``step`` is out of range.
    """
    actions = task.meta["actions"]
    if not 0 <= step < len(actions):
        raise DataError(f"{task.id}: no step {step} (it has {len(actions)})")
    action = actions[step]
    operation = Operation.from_record(action["operation"], f"{task.id}, action {step}")
    index = _element_index(str(action.get("cleaned_html") or ""))
    found: dict[str, Candidate] = {}
    for key, positive in (("pos_candidates", True), ("neg_candidates", False)):
        for record in action.get(key) or ():
            candidate = _candidate(record, index, positive)
            if candidate is not None and candidate.backend_node_id not in found:
                found[candidate.backend_node_id] = candidate
    candidates = list(found.values())
    key = f"{task.meta['annotation_id']}_{action.get('action_uid', step)}"
    page_ranks = ranks.get(key) if ranks is not None else None
    if page_ranks is not None:
        worst = len(candidates) + 1_000_000
        order = sorted(
            range(len(candidates)),
            key=lambda i: (page_ranks.get(candidates[i].backend_node_id, worst), i),
        )
        candidates = [candidates[i] for i in order]
    candidates = candidates[: max(0, max_candidates)]
    random.Random(f"{seed}/{task.id}/{step}").shuffle(candidates)
    reprs = task.meta["action_reprs"]
    return StepPage(step, len(actions), tuple(candidates), operation, str(reprs[step]), key)


# ---------------------------------------------------------------------------------------------
# Subgoals and grounded actions (shared by the gold trajectories and the converter)


def _clean_query(text: str) -> str:
    """Make free text safe as a ``QUERY:`` value: no brackets, ``;`` or argument keys."""
    for ch in _BRACKETS + ";":
        text = text.replace(ch, " ")
    text = re.sub(r",(\s*)(QUERY|Query|TEXT|Text)\s*:", r"\1\2", text)
    return " ".join(text.split())


def step_subgoal(action_repr: str, operation: Operation) -> str:
    """Render a gold step as a subgoal, in the spirit of Lumos' ``translate_action``.

    ``Click {tag} {text}``, ``Hover over ...``, ``Press Enter in ...``, ``Type {value} in the
    {tag} {text}``, ``Select {value} in the {tag} {text}``, with one fixed wording per operation
    (the original draws among synonyms at random). The text is made safe for a ``QUERY:``.
    """
    parsed = parse_action_repr(action_repr)
    tag, text = (parsed.tag, parsed.text) if parsed is not None else ("element", action_repr)
    target = " ".join(f"{tag} {text}".split()) or "element"
    kind = operation.original_op if operation.original_op in ORIGINAL_OPERATIONS else operation.op
    value = " ".join(operation.value.split())
    if operation.op == "TYPE":
        sentence = f"Type {value} in the {target}"
    elif operation.op == "SELECT":
        sentence = f"Select {value} in the {target}"
    elif kind == "HOVER":
        sentence = f"Hover over {target}"
    elif kind == "ENTER":
        sentence = f"Press Enter in {target}"
    else:
        sentence = f"Click {target}"
    return _clean_query(sentence)


def _balanced(text: str) -> bool:
    depth = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in text:
        if ch in "([{":
            depth.append(ch)
        elif ch in pairs:
            if not depth or depth.pop() != pairs[ch]:
                return False
    return not depth


def grounded_action(
    step: int, action_repr: str, operation: Operation, *, strict: bool = True
) -> str:
    """Return the grounded action of gold step ``step`` (0-based), chained as Lumos chains it.

    ``R1 = TYPE(Env, QUERY: ..., TEXT: ...)`` for the first step, then ``R{k+1} = CLICK(R{k},
    QUERY: ...)``: each result is the next step's page (docs/lumos-format.md §1.4, §2.3).

    Args:
        step: the step index.
        action_repr: the step's ``action_reprs`` string.
        operation: the step's gold operation.
        strict: raise when the value cannot be written in an action (unbalanced brackets);
            otherwise the brackets are dropped (the action then scores as a wrong value).

    Raises:
        DataError: (strict) the value cannot be written.
    """
    page = "Env" if step == 0 else f"R{step}"
    query = step_subgoal(action_repr, operation)
    head = f"R{step + 1} = {operation.op}({page}, QUERY: {query}"
    if operation.op == "CLICK":
        return head + ")"
    value = " ".join(operation.value.split())
    if not _balanced(value) or re.search(r",\s*(QUERY|Query|TEXT|Text)\s*:", value):
        if strict:
            raise DataError(f"step {step + 1}: the value {value!r} cannot be written in an action")
        value = _clean_query(value)
    return f"{head}, TEXT: {value})"


# ---------------------------------------------------------------------------------------------
# Scores


def score_step(
    page: StepPage,
    chosen: Candidate | None,
    op: str,
    value: str,
    *,
    on_page: bool = True,
    scorer: str = OFFICIAL,
) -> StepScore:
    """Score a predicted step against its gold page (:mod:`lumos_gym.scoring.mind2web`).

    Args:
        page: the gold step's page.
        chosen: the element picked (None when nothing could be picked).
        op: the predicted operation (CLICK, TYPE, SELECT).
        value: the predicted value (the official rule scores a CLICK's value too).
        on_page: whether ``chosen`` was picked on ``page`` itself (not on another step's page).
        scorer: ``mind2web/official`` (default) or ``mind2web/lumos``.

    Raises:
        ValueError: an unknown scorer.
    """
    gold = page.operation
    return score_action(
        op,
        value,
        gold.op,
        gold.value,
        element_correct=chosen is not None and on_page and chosen.positive,
        has_gold_element=any(c.positive for c in page.candidates),
        predicted_element=chosen is not None,
        scorer=scorer,
    )
