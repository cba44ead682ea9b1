"""The complex-QA dataset tables and :func:`qa_source`.

The tables name each dataset's loader, gold plan builder and bundled sample;
:func:`qa_source` turns a dataset, split and source (bundled, official, hub or a path) into a
task source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from lumos_gym.envs import datasets as data
from lumos_gym.envs.qa.data.bamboogle import load_bamboogle, write_bamboogle_hub_rows
from lumos_gym.envs.qa.data.hotpotqa import hotpotqa_plan, load_hotpotqa, write_hotpotqa_hub_rows
from lumos_gym.envs.qa.data.musique import load_musique, musique_plan
from lumos_gym.envs.qa.data.plans import PlanStep
from lumos_gym.envs.qa.data.strategyqa import load_strategyqa, strategyqa_plan
from lumos_gym.envs.qa.data.twowiki import load_twowiki, twowiki_plan
from lumos_gym.envs.sources import BundledSource, FileSource, HubSource, Loader, TaskSource
from lumos_gym.envs.tasks import Task

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "qa"
"""The folder of the bundled QA sample files."""

QA_DATASETS = ("hotpotqa", "strategyqa", "musique", "2wikimultihopqa", "bamboogle")
"""The complex-QA datasets with a loader in :mod:`lumos_gym.envs.qa.data`."""

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


GOLD_PLANS: Mapping[str, Callable[[Task], tuple[PlanStep, ...]]] = {
    "hotpotqa": hotpotqa_plan,
    "musique": musique_plan,
    "strategyqa": strategyqa_plan,
    "2wikimultihopqa": twowiki_plan,
}
"""The gold plan builder of each dataset with gold decompositions or supporting facts."""


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
