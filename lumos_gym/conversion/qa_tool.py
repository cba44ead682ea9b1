"""Training records for the model behind the ``QA`` tool, from WorldQA's gold decompositions.

Lumos' ``QA`` tool asked gpt-3.5-turbo; offline it asks a small model
(:func:`~lumos_gym.tools.qa.default_qa_model`), which these records teach to answer as the gold
decompositions do. The input is WorldQA annotations (dataset ``worldqa``, ids
``worldqa/<split>/<seed>/<n>``), as ``lumos-gym data build`` writes them to
``annotations/worldqa-train.jsonl``, or WorldQA tasks (converted by the rule converter
:func:`~lumos_gym.conversion.worldqa_rules.worldqa_annotation`). Annotations of other datasets
are skipped: their corpus is not in the annotation, while a WorldQA world is rebuilt from the
id's split and seed.

Each annotation is replayed action by action in :class:`~lumos_gym.envs.qa.worldqa.WorldQAEnv`
with its replay options (privileged, the ``reference`` QA backend answering the gold
sub-answers when the retrieved evidence holds them, BM25 passage ranking), that is with the
real ``KnowledgeQuery`` and ``ParagraphRetrieve`` as the env runs them. Before each ``QA``
action, its question and context are read with the tool's own
:func:`~lumos_gym.tools.qa.read_qa_inputs`, and after it the reference answer is read back;
every ``QA`` call then gives one record::

    {"dataset": "qa_tool", "id": "qa_tool_<i>", "messages": [
        {"role": "user", "content": <QAInputs.prompt: Lumos' QA prompt with the context>},
        {"role": "assistant", "content": "Answer: <gold sub-answer>"}]}

the user message being the bytes the tool's model backend sends first, and the assistant
message an output that :func:`~lumos_gym.tools.qa.parse_qa_output` reads back as exactly the
gold sub-answer. Ids count the written records, in input order, so equal inputs give equal
files.

What is left out, and why:

* ``No answer`` targets: a gold decomposition's sub-answers are all found in its evidence (the
  reference backend answers ``No answer`` only when retrieval missed it, and such an
  annotation does not verify), and the tool reads ``No answer`` as a failure and retries, so
  nothing here would teach the model when to abstain. A sub-answer that
  :func:`~lumos_gym.tools.qa.parse_qa_output` would not read back as itself (one saying
  ``no answer``, one ending in ``.``) is dropped and counted.
* The retry prompts (without the context, or forcing yes/no): the tool sends them only after
  a ``No answer``, which a model trained on the first prompt rarely gives, and answering them
  means recalling the train world's facts without evidence, which teaches guessing on the
  test world (its names are disjoint). ``include_retries=True`` adds them anyway.
* Exact duplicates (the same sub-question over the same evidence in two tasks) are written
  once.
* An annotation whose replay fails (an error, a sub-answer not found in the evidence, a
  wrong final answer) gives no record; it is counted and logged.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.actions import format_action, last_variable
from lumos_gym.conversion.annotation import Annotation, AnnotationError, read_annotations
from lumos_gym.conversion.exports import write_records
from lumos_gym.conversion.verify import annotation_reference
from lumos_gym.conversion.worldqa_rules import worldqa_annotation
from lumos_gym.envs.qa.worldqa import WorldQAEnv
from lumos_gym.envs.replay import Replay
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError
from lumos_gym.scoring.qa import NO_ANSWER, normalize_answer
from lumos_gym.tools.qa import parse_qa_output, read_qa_inputs

__all__ = [
    "QA_TOOL_DATASET",
    "QAToolRecords",
    "qa_tool_records",
    "write_qa_tool_records",
]

logger = logging.getLogger(__name__)

#: The ``dataset`` field and id prefix of the records.
QA_TOOL_DATASET = "qa_tool"

_WORLDQA_ID = re.compile(r"worldqa/(?P<split>[^/]+)/(?P<seed>\d+)/(?P<number>\d+)")
_FAMILIES = 4  # task number n = i * len(FAMILIES) + family index (envs/qa/worldqa/questions.py)


@dataclass
class QAToolRecords:
    """The records :func:`qa_tool_records` made, and what it left out.

    Attributes:
        records: the training records, in order.
        annotations: the WorldQA annotations replayed.
        skipped: annotations of other datasets, left out.
        failed: ``(annotation id, reason)`` of each annotation whose replay failed.
        duplicates: records left out as exact duplicates of earlier ones.
        unparsable: sub-answers left out because ``parse_qa_output`` would not read them back.
        kinds: records per prompt kind (``context``, ``no-context``, ``forced``).
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    annotations: int = 0
    skipped: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    duplicates: int = 0
    unparsable: int = 0
    kinds: Counter[str] = field(default_factory=Counter)


class _ReplayFailed(Exception):
    """An annotation whose replay does not verify (the message is the reason)."""


def _annotations(sources: Iterable[Any]) -> Iterable[Annotation]:
    """Annotations from annotation files, annotations and WorldQA tasks, in order."""
    for source in sources:
        if isinstance(source, Annotation):
            yield source
        elif isinstance(source, Task):
            yield worldqa_annotation(source)
        elif isinstance(source, str | Path):
            for item in read_annotations(source):
                if isinstance(item, AnnotationError):
                    raise item
                yield item
        else:
            raise DataError(
                "QA-tool records come from annotation files, annotations or WorldQA tasks; "
                f"got {type(source).__name__}"
            )


def _world_key(annotation: Annotation) -> tuple[str, int, int] | None:
    """``(split, seed, task number)`` of a WorldQA annotation; ``None`` for other datasets."""
    match = _WORLDQA_ID.fullmatch(annotation.id)
    if annotation.dataset != "worldqa" or annotation.task_type != "qa" or match is None:
        return None
    return match["split"], int(match["seed"]), int(match["number"])


def _replay(env: Any, annotation: Annotation) -> list[tuple[Any, str]]:
    """Replay one annotation action by action; return each ``QA`` call's inputs and answer.

    The actions are stepped one at a time (:meth:`~lumos_gym.envs.replay.Replay.step`) since
    a ``QA`` call's inputs are read from the variables its step starts from.

    Raises:
        _ReplayFailed: an action errs, a ``QA`` answer is not the annotation's tail (the
            evidence was not retrieved), or the final answer is wrong.
    """
    episode = Replay(env, annotation.id, reference=annotation_reference(annotation))
    outputs: list[str] = []
    calls: list[tuple[Any, str]] = []
    for item in annotation.actions:
        action = item.action
        before = episode.result.variables  # read before the step, as the tool reads them
        inputs = read_qa_inputs(action, before) if action.name == "QA" else None
        step = episode.step(format_action(action, with_result=False))
        if "Error:" in step.observation or step.ended:
            raise _ReplayFailed(f"{item.label or action.name}: {step.observation.strip()}")
        variables = step.variables
        outputs.extend(action.outputs)
        if inputs is None:
            continue
        if len(action.outputs) != 1 or action.result is None:
            raise _ReplayFailed(f"{item.label}: a QA action needs one output and a result tail")
        answer = variables[action.outputs[0]]
        tail = action.result.strip().rstrip(".").strip()
        if answer == NO_ANSWER or normalize_answer(answer) != normalize_answer(tail):
            raise _ReplayFailed(f"{item.label}: the QA tool answers {answer!r}, the tail {tail!r}")
        calls.append((inputs, answer))
    final = last_variable(outputs)
    if final is None:
        raise _ReplayFailed("the plan defines no R<n> to answer with")
    answered = episode.step(f"Answer({final})")
    if not answered.terminated or answered.reward != 1.0:
        prediction = answered.info.get("prediction")
        raise _ReplayFailed(f"Answer({final}) gives {prediction!r}, not the answer")
    return calls


def _world_env(split: str, seed: int, numbers: Iterable[int], options: Mapping[str, Any]) -> Any:
    """The WorldQA env of a world, with its replay options and every task numbered here."""
    num_tasks = max(numbers) // _FAMILIES + 1
    return WorldQAEnv(split=split, seed=seed, num_tasks=num_tasks,
                      **{**WorldQAEnv.replay_options, **options})


def qa_tool_records(
    sources: Iterable[str | Path | Annotation | Task],
    *,
    include_retries: bool = False,
    world_options: Mapping[str, Any] | None = None,
) -> QAToolRecords:
    """Build the QA-tool training records of WorldQA annotations (see the module docstring).

    Args:
        sources: annotation files (JSONL, e.g. every ``annotations/*.jsonl`` of a data build:
            other datasets are skipped), annotations, or WorldQA tasks.
        include_retries: also write each call's retry prompt (without the context, or forcing
            yes/no) with the gold answer.
        world_options: :class:`~lumos_gym.envs.qa.worldqa.WorldQAEnv` options the worlds were
            built with (``num_people``...), when not the defaults.

    Raises:
        DataError: a source that is none of the above, or an unreadable annotation line.
        LumosGymError: an annotation's task is not the task of that id in the rebuilt world
            (the world was built with other options: pass ``world_options``).
    """
    result = QAToolRecords()
    by_world: dict[tuple[str, int], list[tuple[int, Annotation]]] = {}
    for annotation in _annotations(sources):
        key = _world_key(annotation)
        if key is None:
            result.skipped += 1
            continue
        split, seed, number = key
        by_world.setdefault((split, seed), []).append((number, annotation))
    calls: list[tuple[str, Any, str]] = []  # (annotation id, inputs, answer) in input order
    order: dict[str, int] = {}
    for (split, seed), items in by_world.items():
        env = _world_env(split, seed, (n for n, _ in items), dict(world_options or {}))
        try:
            tasks = {task.id: task for task in env.tasks}
            for _, annotation in items:
                order.setdefault(annotation.id, len(order))
                task = tasks.get(annotation.id)
                if task is None or task.question != annotation.task:
                    raise LumosGymError(
                        f"annotation {annotation.id}: its task is not task {annotation.id} of "
                        f"the world rebuilt with split={split!r}, seed={seed}; pass the "
                        "world_options the annotations were made with"
                    )
                result.annotations += 1
                try:
                    calls += [(annotation.id, i, a) for i, a in _replay(env, annotation)]
                except (_ReplayFailed, LumosGymError) as e:
                    result.failed.append((annotation.id, str(e)))
        finally:
            env.close()
    calls.sort(key=lambda call: order[call[0]])  # worlds were replayed in groups
    seen: set[tuple[str, str]] = set()
    for _, inputs, answer in calls:
        target = f"Answer: {answer}"
        if parse_qa_output(target) != answer:
            result.unparsable += 1
            continue
        prompts = [("context", inputs.prompt)]
        if include_retries:
            prompts.append((inputs.retry_kind, inputs.retry_prompt))
        for kind, prompt in prompts:
            if (prompt, target) in seen:
                result.duplicates += 1
                continue
            seen.add((prompt, target))
            result.kinds[kind] += 1
            result.records.append({
                "dataset": QA_TOOL_DATASET,
                "id": f"{QA_TOOL_DATASET}_{len(result.records)}",
                "messages": [{"role": "user", "content": prompt},
                             {"role": "assistant", "content": target}],
            })
    if result.failed:
        shown = "; ".join(f"{i}: {reason}" for i, reason in result.failed[:3])
        logger.warning("%d annotation(s) did not replay: %s", len(result.failed), shown)
    return result


def write_qa_tool_records(
    sources: Iterable[str | Path | Annotation | Task],
    target: str | Path,
    *,
    include_retries: bool = False,
    world_options: Mapping[str, Any] | None = None,
) -> int:
    """Write the QA-tool records of ``sources`` to ``target`` (JSONL, atomically).

    Arguments as :func:`qa_tool_records`; returns the number of records written.
    """
    built = qa_tool_records(sources, include_retries=include_retries, world_options=world_options)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    return write_records(built.records, target)
