"""The conversion pipeline behind ``lumos-gym convert`` and ``lumos-gym export``.

``convert_env``: an env's tasks → annotations (rule-based, or an LLM through any backend) →
replay verification in the env → kept annotations and, kept aside with their reasons, the
rejected ones. ``export_files``: annotation files → training records in one format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.conversion.annotation import (
    Annotation,
    AnnotationError,
    read_annotations,
    write_annotations,
)
from lumos_gym.conversion.exports import (
    FORMATS,
    Rejected,
    export_records,
    save_hf_dataset,
    write_records,
)
from lumos_gym.conversion.llm import LLMConverter, RationaleItem
from lumos_gym.conversion.qa_tool import write_qa_tool_records
from lumos_gym.conversion.rules import convert_tasks
from lumos_gym.conversion.verify import verify_annotations
from lumos_gym.databuild import SPLITS_FILE, build_digest
from lumos_gym.envs.families import OfflineSplit
from lumos_gym.envs.registration import fill_from_families, resolve_env_id
from lumos_gym.errors import LumosGymError
from lumos_gym.jsonl import write_json_atomic
from lumos_gym.models.caching import CachingBackend
from lumos_gym.models.factory import backend_from_spec


@dataclass
class ExportSummary:
    """What :func:`export_files` wrote and what it could not use."""

    records: int
    unreadable: list[str] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def format(self) -> str:
        """Return a short text report."""
        lines = [f"{self.records} records written"]
        if self.unreadable:
            lines.append(f"{len(self.unreadable)} unreadable annotation lines, e.g. "
                         f"{self.unreadable[0]}")
        reasons = Counter(r.reason.split(":")[0] for r in self.rejected)
        for reason, count in reasons.most_common():
            lines.append(f"{count} rejected: {reason}")
        return "\n".join(lines)


def export_files(
    inputs: Sequence[str | Path],
    fmt: str,
    out: str | Path,
    *,
    dataset: str | None = None,
    hf_dir: str | Path | None = None,
) -> ExportSummary:
    """Export the annotations of ``inputs`` (JSONL files, in order) as ``fmt`` records.

    Args:
        inputs: annotation files written by ``lumos-gym convert``.
        fmt: one of :data:`~lumos_gym.conversion.exports.FORMATS`.
        out: the JSONL file of training records.
        dataset: the records' ``dataset`` field and id prefix (``unified`` mixes domains, as
            Lumos-I_All did); by default each annotation's Lumos domain.
        hf_dir: also save the records as a Hugging Face ``datasets`` folder there.
    """
    if fmt not in FORMATS:
        raise LumosGymError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    unreadable: list[str] = []

    def annotations() -> Iterable[Annotation]:
        for path in inputs:
            if not Path(path).is_file():
                raise LumosGymError(f"no annotation file at {path}")
            for item in read_annotations(path):
                if isinstance(item, AnnotationError):
                    unreadable.append(str(item))
                else:
                    yield item

    records: list[dict[str, Any]] = []
    rejected: list[Rejected] = []
    for item in export_records(annotations(), fmt, dataset=dataset):
        (rejected if isinstance(item, Rejected) else records).append(item)  # type: ignore[arg-type]
    if unreadable and not records and not rejected:  # not one annotation: the wrong file
        raise LumosGymError(
            f"no annotation could be read from {', '.join(map(str, inputs))}: "
            f"{len(unreadable)} unreadable line(s), e.g. {unreadable[0]}; export reads the "
            "annotation files `lumos-gym convert` writes (training records are already exported)"
        )
    write_records(records, out)
    if hf_dir is not None:
        save_hf_dataset(records, hf_dir)
    return ExportSummary(len(records), unreadable, rejected)


def write_rejected(rejected: Iterable[Rejected | Mapping[str, Any]], path: str | Path) -> int:
    """Write rejected items (id, reason and any raw output) as JSON lines."""
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for item in rejected:
            row = dict(item) if isinstance(item, Mapping) else (
                item.to_dict() if hasattr(item, "to_dict") else {"id": item.id,
                                                                 "reason": item.reason}
            )
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    return count


@dataclass
class ConvertSummary:
    """What :func:`convert_env` wrote."""

    out: Path
    rejected_path: Path
    kept: int
    rejected: int
    report: Any = None

    def format(self) -> str:
        """Return the verification report (or the counts when nothing was verified)."""
        head = f"{self.kept} annotations kept in {self.out}; {self.rejected} rejected in " + str(
            self.rejected_path
        )
        return head if self.report is None else f"{self.report.format_report()}\n{head}"


def _llm_annotations(
    tasks: Sequence[Any], dataset: str, spec: str, out: Path, batch_size: int
) -> list[Annotation | Rejected]:
    """Convert tasks' rationales with a model (cached and resumable next to ``out``)."""
    items, missing = [], []
    for task in tasks:
        if task.rationale:
            items.append(RationaleItem(task.id, dataset, task.task_type, task.question,
                                       task.rationale, task.answer))
        else:
            missing.append(Rejected(task.id, "conversion: the task has no rationale"))
    raw, raw_rejected = out.with_suffix(".llm.jsonl"), out.with_suffix(".llm-rejected.jsonl")
    backend = CachingBackend(backend_from_spec(spec, batch_size=batch_size),
                             out.with_suffix(".llm-cache.jsonl"))
    try:
        LLMConverter(backend, batch_size=batch_size).convert_file(items, raw, raw_rejected)
    finally:
        backend.close()
    converted: list[Annotation | Rejected] = [
        a for a in read_annotations(raw) if isinstance(a, Annotation)
    ]
    with open(raw_rejected, encoding="utf-8") as f:
        converted += [Rejected(r["id"], f"conversion: {r['reason']}") for r in map(json.loads, f)]
    return converted + missing


def convert_env(
    env_id: str,
    *,
    out: str | Path,
    env_kwargs: Mapping[str, Any] | None = None,
    limit: int | None = None,
    llm: str | None = None,
    verify: bool = True,
    rejected_path: str | Path | None = None,
    batch_size: int = 8,
) -> ConvertSummary:
    """Convert the tasks of an env into unified annotations and verify them by replay.

    Args:
        env_id: the env whose tasks (and their gold rationales) are converted.
        out: the JSONL file of kept annotations.
        env_kwargs: env constructor arguments (``split``, ``source``, ``num_tasks``...).
        limit: only the first ``limit`` tasks.
        llm: ``BACKEND:MODEL[@BASE_URL]`` to rewrite rationales with a model instead of the
            dataset's rule-based converter; its outputs are cached and the run resumes.
        verify: replay each annotation in its env and keep only those that reach the answer.
        rejected_path: where rejected items go (default: ``<out>.rejected.jsonl``).
        batch_size: model requests per batch (``llm``).
    """
    import gymnasium as gym

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    env_id = resolve_env_id(env_id)
    env = gym.make(env_id, **dict(env_kwargs or {}))
    try:
        base = env.unwrapped
        tasks = list(base.tasks)[:limit]
        dataset = str(getattr(base, "dataset", env_id))
        replay_kwargs = {**dict(env_kwargs or {}), **dict(getattr(base, "replay_options", {}))}
    finally:
        env.close()
    items = (
        _llm_annotations(tasks, dataset, llm, out, batch_size)
        if llm else list(convert_tasks(tasks, dataset))
    )

    def replay_env(_tasks: Sequence[Any], _dataset: str) -> Any:
        # the env the tasks came from (documents, corpora and gold facts included), built
        # for deterministic replays
        return gym.make(env_id, **replay_kwargs).unwrapped

    report = None
    if verify:
        report = verify_annotations(items, env_factory=replay_env)
        kept, rejected = report.kept, report.rejected
    else:
        kept = [a for a in items if isinstance(a, Annotation)]
        rejected = [r for r in items if isinstance(r, Rejected)]
    rejected_file = Path(rejected_path) if rejected_path else out.with_suffix(".rejected.jsonl")
    write_annotations(kept, out)
    write_rejected(rejected, rejected_file)
    return ConvertSummary(out, rejected_file, len(kept), len(rejected), report)


#: The offline splits: procedural train and test sets, and the bundled official-format samples,
#: from the env families' records (``splits`` of :class:`lumos_gym.envs.families.Family`), in
#: family order.
OFFLINE_SPLITS: list[OfflineSplit] = []
fill_from_families(OFFLINE_SPLITS, lambda family: family.splits)


def _write_tasks(env_id: str, kwargs: Mapping[str, Any], path: Path) -> int:
    """Write an env's tasks as JSON lines (id, question, answer, rationale, gold actions...)."""
    import dataclasses

    import gymnasium as gym

    env = gym.make(env_id, **dict(kwargs))
    try:
        tasks = list(env.unwrapped.tasks)
    finally:
        env.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for task in tasks:
            row = dataclasses.asdict(task)
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True, default=str) + "\n")
    return len(tasks)


def build_offline_data(out: str | Path, *, num_tasks: int = 200) -> list[str]:
    """Build every offline split under ``out`` and return one report line per file.

    ``train`` splits become verified annotations (``annotations/``) and training records in
    every export format (``train/<format>.jsonl``); ``test`` splits become task lists
    (``test/<name>.jsonl``); ``splits.json`` lists every split with the env arguments it was
    built with (:mod:`lumos_gym.conversion.leakage` rebuilds the train splits from it). Official
    files are not fetched: ``lumos-gym data status all`` says where each goes.

    Args:
        out: the folder.
        num_tasks: the ``num_tasks`` of the splits that take it (``takes_num_tasks``: MathWord's
            tasks per difficulty level, WorldQA's per question family); the other generated
            splits (WebShop, Mind2Web recordings, Scenes, TextWorld games per level, ALFWorld
            problems per task type and level) scale their listed sizes by ``num_tasks / 200``.
    """
    out = Path(out)
    lines: list[str] = []
    annotation_files: list[Path] = []
    for split in OFFLINE_SPLITS:
        kwargs = split_kwargs(split, num_tasks)
        if split.role == "train":
            target = out / "annotations" / f"{split.name}.jsonl"
            summary = convert_env(split.env_id, out=target, env_kwargs=kwargs)
            annotation_files.append(target)
            lines.append(f"{target}: {summary.kept} verified annotations, {summary.rejected} "
                         "rejected")
        else:
            target = out / "test" / f"{split.name}.jsonl"
            lines.append(f"{target}: {_write_tasks(split.env_id, kwargs, target)} tasks")
    for fmt in FORMATS:
        target = out / "train" / f"{fmt}.jsonl"
        summary = export_files(annotation_files, fmt, target)
        lines.append(f"{target}: {summary.records} records")
    # the QA tool's own model learns from the QA calls of the verified WorldQA plans
    target = out / "train" / "qa-tool.jsonl"
    lines.append(f"{target}: {write_qa_tool_records(annotation_files, target)} records")
    manifest = {"num_tasks": num_tasks, "splits": [
        {"name": s.name, "env_id": s.env_id, "kwargs": split_kwargs(s, num_tasks), "role": s.role}
        for s in OFFLINE_SPLITS
    ]}
    manifest["build"] = build_digest(out)  # the build's id, for the training cards
    write_json_atomic(out / SPLITS_FILE, manifest)
    lines.append(f"{out / SPLITS_FILE}: the {len(OFFLINE_SPLITS)} splits and their env arguments, "
                 f"data build {manifest['build']['id']}")
    return lines




def split_kwargs(split: OfflineSplit, num_tasks: int = 200) -> dict[str, Any]:
    """Return the env arguments ``data build --num-tasks num_tasks`` builds ``split`` with.

    The ``num_tasks`` of a split that ``takes_num_tasks``; the ``num_tasks`` and
    ``num_games`` of the others scaled by ``num_tasks / 200`` (at least 1).
    """
    kwargs = dict(split.kwargs)
    if split.takes_num_tasks:
        kwargs["num_tasks"] = num_tasks
    else:
        for key in {"num_tasks", "num_games"} & kwargs.keys():
            kwargs[key] = max(1, int(kwargs[key]) * num_tasks // 200)
    return kwargs


__all__ = [
    "OFFLINE_SPLITS",
    "OfflineSplit",
    "SPLITS_FILE",
    "split_kwargs",
    "build_offline_data",
    "ConvertSummary",
    "ExportSummary",
    "convert_env",
    "export_files",
    "write_rejected",
]
