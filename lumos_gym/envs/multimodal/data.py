"""Loaders of the official A-OKVQA and ScienceQA files, and their gold decompositions.

A-OKVQA (allenai/aokvqa, ``README.md`` and ``load_aokvqa.py``): ``aokvqa_v1p0_{split}.json``
for ``split`` in ``train``, ``val``, ``test``, from
``https://prior-datasets.s3.us-east-2.amazonaws.com/aokvqa/aokvqa_v1p0.tar.gz``. Each file is a
JSON list of records with ``split``, ``image_id`` (int), ``question_id`` (str), ``question``,
``choices`` (4 strings) and, except in ``test``, ``correct_choice_idx``, ``direct_answers``
(10 strings), ``difficult_direct_answer`` (bool) and ``rationales`` (3 sentences). Images are
COCO 2017 files, ``{coco_dir}/{split}2017/{image_id:012}.jpg`` (``get_coco_path``).

ScienceQA (lupantech/ScienceQA, ``models/run_gpt3.py`` ``load_data``, ``tools/download.sh``):
``data/scienceqa/problems.json``, a dict from problem id to ``{question, choices, answer (0-based
index), hint, image ("image.png" or null), task, grade, subject, topic, category, skill,
lecture, solution, split}``, and ``pid_splits.json``, a dict from split name (``train``,
``val``, ``test``, ``minival``, ...) to problem ids. Images are
``images/{split}/{pid}/image.png``, ``split`` being the problem's own ``split`` field.

Every field of a record goes into ``Task.meta``, with ``image_file`` (the image's path under the
images folder, or None) and the gold decomposition of the record, built from its rationales
(A-OKVQA) or its lecture and solution (ScienceQA) by :func:`aokvqa_plan` and
:func:`scienceqa_plan`: ``subgoals``, ``tails`` (each action's result) and the gold facts
that the reference backends answer from in replays (``vqa_answers``, ``sub_answers``).
``Task.gold_actions`` replays it, ending with ``Answer(R<n>)``. The converters of
:mod:`lumos_gym.conversion.multimodal_rules` turn it into unified annotations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.actions import parse_actions
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import ActionParseError, DataError
from lumos_gym.jsonl import cache_root
from lumos_gym.scoring.qa import normalize_answer

__all__ = [
    "AOKVQA_URL",
    "DEFAULT_SPLITS",
    "GoldPlan",
    "aokvqa_file",
    "aokvqa_plan",
    "download_hint",
    "load_aokvqa",
    "load_scienceqa",
    "one_line",
    "options_text",
    "resolve_paths",
    "scienceqa_plan",
]

AOKVQA_VERSION = "v1p0"
AOKVQA_URL = "https://prior-datasets.s3.us-east-2.amazonaws.com/aokvqa/aokvqa_v1p0.tar.gz"
COCO_URL = "http://images.cocodataset.org/zips/<split>2017.zip"
SCIENCEQA_DATA_URL = "https://github.com/lupantech/ScienceQA/tree/main/data/scienceqa"
SCIENCEQA_IMAGES_URL = "https://scienceqa.s3.us-west-1.amazonaws.com/images/<split>.zip"
DEFAULT_SPLITS = {"aokvqa": "val", "scienceqa": "test"}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def download_hint(dataset: str) -> str:
    """Return how to get a dataset's files (for missing-file errors)."""
    if dataset == "aokvqa":
        return (f"A-OKVQA needs aokvqa_{AOKVQA_VERSION}_<split>.json: download {AOKVQA_URL} and "
                "extract it into that folder (or pass path=...); images are COCO 2017 files "
                f"<images>/<split>2017/<image_id:012>.jpg from {COCO_URL}")
    return (f"ScienceQA needs problems.json and pid_splits.json from {SCIENCEQA_DATA_URL} in "
            "that folder (or pass path=...); images are <images>/<split>/<pid>/image.png from "
            f"{SCIENCEQA_IMAGES_URL}")


def aokvqa_file(folder: Path, split: str) -> Path:
    """Return ``folder/aokvqa_v1p0_<split>.json``."""
    return folder / f"aokvqa_{AOKVQA_VERSION}_{split}.json"


def resolve_paths(
    dataset: str, split: str, path: str | Path | None, images: str | Path | None
) -> tuple[Path, Path]:
    """Return the file a dataset's loader reads and its images folder (see ``VQADatasetEnv``)."""
    base = Path(path).expanduser() if path is not None else cache_root() / "data" / dataset
    if dataset == "aokvqa":
        file = base if base.suffix == ".json" else aokvqa_file(base, split)
        folder = Path(images).expanduser() if images is not None else cache_root() / "data" / "coco"
    else:
        file = base if base.suffix == ".json" else base / "problems.json"
        folder = Path(images).expanduser() if images is not None else file.parent / "images"
    return file, folder


def one_line(text: object) -> str:
    """Return ``text`` with every run of whitespace (newlines included) as one space."""
    return " ".join(str(text or "").split())


def options_text(choices: Sequence[str]) -> str:
    """Return ``(A) first (B) second ...``, the options as ScienceQA's prompts write them."""
    return " ".join(f"({_LETTERS[i]}) {one_line(c)}" for i, c in enumerate(choices))


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise DataError(f"{path}: no such file") from e
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a readable JSON file: {e}") from e


# ---------------------------------------------------------------------------------------------
# Gold decompositions


@dataclass
class GoldPlan:
    """A gold decomposition: one subgoal per step, one action per subgoal, with results.

    Attributes:
        subgoals: the subgoal texts.
        steps: the grounded actions of each subgoal (``R<n> = Tool(...)``).
        tails: each action's result.
        vqa_answers: ``VQA`` question → answer (for the reference ``VQA`` backend).
        sub_answers: ``QA`` question → answer (for the reference ``QA`` backend).
    """

    subgoals: list[str] = field(default_factory=list)
    steps: list[list[str]] = field(default_factory=list)
    tails: list[list[str]] = field(default_factory=list)
    vqa_answers: dict[str, str] = field(default_factory=dict)
    sub_answers: dict[str, str] = field(default_factory=dict)

    def add(self, subgoal: str, tool: str, context: str, question: str, answer: str) -> str:
        """Add one subgoal whose action asks ``tool`` (``VQA`` or ``QA``); return its variable."""
        var = f"R{len(self.steps) + 1}"
        if tool == "VQA":
            action = f"{var} = VQA(<img>, {question})"
            self.vqa_answers[question] = answer
        else:
            action = f"{var} = QA([{context}], Question: {question})"
            self.sub_answers[question] = answer
        self.subgoals.append(subgoal)
        self.steps.append([action])
        self.tails.append([answer])
        return var

    def gold_actions(self) -> tuple[str, ...]:
        """Return one ``step`` per subgoal, then ``Answer`` of the last result."""
        return (*("; ".join(step) for step in self.steps), f"Answer(R{len(self.steps)})")

    def meta(self) -> dict[str, Any]:
        """Return the fields kept in ``Task.meta``."""
        return {
            "subgoals": list(self.subgoals),
            "tails": [list(t) for t in self.tails],
            "vqa_answers": dict(self.vqa_answers),
            "sub_answers": dict(self.sub_answers),
        }

    def parses(self) -> bool:
        """Whether every action parses (odd brackets in a question can break one)."""
        try:
            for step in self.steps:
                parse_actions("; ".join(step))
        except ActionParseError:
            return False
        return True


def _mentions(text: str, answer: str) -> bool:
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


def aokvqa_plan(record: Mapping[str, Any]) -> GoldPlan | None:
    """Decompose an A-OKVQA record from its rationales; None without rationales or answer.

    Subgoal 1 asks ``VQA`` for the visual evidence (the gold answer: the first rationale that
    names the correct option, else the first rationale); subgoal 2 asks ``QA`` to choose the
    option from that evidence (the gold answer: the correct option).
    """
    rationales = [one_line(r) for r in record.get("rationales") or () if one_line(r)]
    index = record.get("correct_choice_idx")
    if not rationales or not isinstance(index, int):
        return None
    choices = [one_line(c) for c in record["choices"]]
    correct = choices[index]
    evidence = next((r for r in rationales if _mentions(r, correct)), rationales[0])
    question = one_line(record["question"])
    plan = GoldPlan()
    r1 = plan.add("Find the visual evidence for the question in the image.", "VQA", "",
                  f"What in the image helps to answer: {question}", evidence)
    plan.add("Choose the option that the evidence supports.", "QA", r1,
             f"{question} Options: {', '.join(choices)}", correct)
    return plan if plan.parses() else None


def _first_sentences(text: str, count: int) -> str:
    paragraph = next((p for p in str(text or "").split("\n") if p.strip()), "")
    return " ".join(_SENTENCE_END.split(one_line(paragraph))[:count])


def scienceqa_plan(problem: Mapping[str, Any]) -> GoldPlan | None:
    """Decompose a ScienceQA problem from its lecture and solution.

    Subgoals: recall the background (``QA`` on the topic, answered by the lecture's first two
    sentences), when there is a lecture; find the facts of this question (``VQA`` of the
    image, or ``QA`` over the hint without one, answered by the solution), when there is a
    solution; choose the option (``QA``, answered by the correct option).
    """
    choices = [one_line(c) for c in problem["choices"]]
    correct = choices[problem["answer"]]
    question = one_line(problem["question"])
    topic = one_line(problem.get("topic")) or "science"
    lecture = _first_sentences(problem.get("lecture", ""), 2)
    solution = one_line(problem.get("solution"))
    hint = one_line(problem.get("hint"))
    plan = GoldPlan()
    last = topic
    if lecture:
        last = plan.add(f"Recall the science background on {topic}.", "QA", topic,
                        f"What should one know about {topic} to answer: {question}",
                        lecture)
    if solution:
        if problem.get("image"):
            last = plan.add("Look at the image for the facts the question needs.", "VQA", "",
                            f"What does the image show that answers: {question}",
                            solution)
        else:
            context = ", ".join(x for x in (last if lecture else "", hint) if x) or topic
            last = plan.add("Work out the answer from the context.", "QA", context,
                            f"How is this answered: {question}", solution)
    plan.add("Choose the option that answers the question.", "QA", last,
             f"{question} Options: {', '.join(choices)}", correct)
    return plan if plan.parses() else None


# ---------------------------------------------------------------------------------------------
# A-OKVQA


def _need(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in record:
        raise DataError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise DataError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
    return value


def _strings(record: Mapping[str, Any], key: str, where: str) -> list[str]:
    values = _need(record, key, list, where)
    if not all(isinstance(v, str) for v in values):
        raise DataError(f"{where}: field {key!r} must be a list of strings")
    return values


def load_aokvqa(path: Path, split: str) -> list[Task]:
    """Read ``aokvqa_v1p0_<split>.json`` into tasks (``aokvqa/<split>/<question_id>``).

    Raises:
        DataError: the file is not a list of A-OKVQA records (the message names the record
            and the field).
    """
    records = _read_json(path)
    if not isinstance(records, list):
        raise DataError(f"{path}: expected a JSON list of A-OKVQA records")
    tasks = []
    for i, record in enumerate(records):
        where = f"{path}: record {i}"
        if not isinstance(record, dict):
            raise DataError(f"{where}: not an object")
        question_id = _need(record, "question_id", str, where)
        where = f"{path}: record {i} ({question_id})"
        image_id = _need(record, "image_id", int, where)
        question = _need(record, "question", str, where)
        choices = _strings(record, "choices", where)
        if not choices:
            raise DataError(f"{where}: no choices")
        labeled = "correct_choice_idx" in record
        answer = ""
        if labeled:
            index = _need(record, "correct_choice_idx", int, where)
            if not 0 <= index < len(choices):
                raise DataError(f"{where}: correct_choice_idx {index} is not an option")
            _strings(record, "direct_answers", where)
            _strings(record, "rationales", where)
            _need(record, "difficult_direct_answer", bool, where)
            answer = choices[index]
        coco_split = str(record.get("split") or split)
        plan = aokvqa_plan(record)
        tasks.append(Task(
            id=f"aokvqa/{split}/{question_id}",
            question=f"{one_line(question)} Options: {options_text(choices)}",
            answer=answer,
            task_type="multimodal",
            rationale=" ".join(record.get("rationales") or ()) or None,
            gold_actions=plan.gold_actions() if plan else (),
            meta={
                **record,
                "dataset": "aokvqa",
                "labeled": labeled,
                "image_file": f"{coco_split}2017/{image_id:012d}.jpg",
                **(plan.meta() if plan else {}),
            },
        ))
    return tasks


# ---------------------------------------------------------------------------------------------
# ScienceQA


def load_scienceqa(path: Path, split: str, *, pid_splits: Path | None = None) -> list[Task]:
    """Read ScienceQA's ``problems.json`` (and ``pid_splits.json`` beside it) into tasks.

    Args:
        path: ``problems.json``.
        split: a key of ``pid_splits.json``; tasks come in its order
            (``scienceqa/<split>/<pid>``).
        pid_splits: the splits file, if not beside ``problems.json``.

    Raises:
        DataError: a missing file or split, or a malformed problem.
    """
    splits_path = pid_splits or path.parent / "pid_splits.json"
    if not splits_path.is_file():
        raise DataError(f"{splits_path}: no such file; {download_hint('scienceqa')}")
    problems, splits = _read_json(path), _read_json(splits_path)
    if not isinstance(problems, dict) or not isinstance(splits, dict):
        raise DataError(f"{path}, {splits_path}: expected JSON objects (pid → problem, "
                        "split → pids)")
    if split not in splits:
        raise DataError(f"{splits_path} has no split {split!r}; splits: {', '.join(splits)}")
    tasks = []
    for pid in splits[split]:
        pid = str(pid)
        where = f"{path}: problem {pid}"
        problem = problems.get(pid)
        if not isinstance(problem, dict):
            raise DataError(f"{where}: listed in split {split!r} but missing")
        question = _need(problem, "question", str, where)
        choices = _strings(problem, "choices", where)
        index = _need(problem, "answer", int, where)
        if not 0 <= index < len(choices):
            raise DataError(f"{where}: answer {index} is not an option")
        image = problem.get("image")
        if image is not None and not isinstance(image, str):
            raise DataError(f"{where}: field 'image' must be a file name or null")
        hint = one_line(problem.get("hint"))
        parts = [f"Question: {one_line(question)}"]
        if hint:
            parts.append(f"Context: {hint}")
        parts.append(f"Options: {options_text(choices)}")
        image_split = str(problem.get("split") or split)
        plan = scienceqa_plan(problem)
        rationale = "\n".join(x for x in (problem.get("lecture"), problem.get("solution")) if x)
        tasks.append(Task(
            id=f"scienceqa/{split}/{pid}",
            question=" ".join(parts),
            answer=choices[index],
            task_type="multimodal",
            rationale=rationale or None,
            gold_actions=plan.gold_actions() if plan else (),
            meta={
                **problem,
                "pid": pid,
                "dataset": "scienceqa",
                "image_file": f"{image_split}/{pid}/{image}" if image else None,
                **(plan.meta() if plan else {}),
            },
        ))
    return tasks
