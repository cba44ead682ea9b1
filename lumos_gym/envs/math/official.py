"""Math environments: GSM8K, SVAMP, ASDiv (official formats) and the procedural MathWord.

The tools are Lumos' math actions, in the order of its grounding instruction; episodes end
with ``Answer(...)`` and score accuracy with a named rule of :mod:`lumos_gym.scoring.answers`
(the ``scorer`` option): GSM8K's own ``is_correct`` (``gsm8k/official``) for GSM8K, exact
values (``math/exact``) for the others.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lumos_gym.envs import datasets as data
from lumos_gym.envs.base import LumosEnv
from lumos_gym.envs.math.data import load_asdiv, load_gsm8k, load_svamp
from lumos_gym.envs.math.mathword import MathWordGenerator
from lumos_gym.envs.sources import (
    BundledSource,
    FileSource,
    GeneratedSource,
    HubSource,
    Loader,
    TaskSource,
)
from lumos_gym.envs.tasks import Task
from lumos_gym.scoring.answers import DEFAULT_MATH_SCORER, math_accuracy

#: Lumos' math actions, in the order its grounding instruction lists them.
MATH_TOOLS = (
    "Calculator",
    "SetEquation",
    "SolveEquation",
    "Count",
    "SolveInequality",
    "Code",
    "Define",
)

_LOADERS: dict[str, Loader] = {"gsm8k": load_gsm8k, "svamp": load_svamp, "asdiv": load_asdiv}
_BUNDLED = {
    "gsm8k": "gsm8k_sample.jsonl",
    "svamp": "svamp_sample.json",
    "asdiv": "asdiv_sample.xml",
}


#: The scoring rules each dataset offers, by short name (``scorer="official"``); the first is
#: its default. Only GSM8K has an official scorer; a dataset not listed here (ASDiv, MathWord)
#: offers ``exact`` (its default) and ``lenient``.
SCORER_CHOICES: dict[str, dict[str, str]] = {
    "gsm8k": {"official": "gsm8k/official", "lumos": "gsm8k/lumos",
              "exact": "math/exact", "lenient": "math/lenient"},
    "svamp": {"exact": "math/exact", "lumos": "svamp/lumos", "lenient": "math/lenient"},
}
_GENERIC_CHOICES = {"exact": DEFAULT_MATH_SCORER, "lenient": "math/lenient"}


def math_scorer(dataset: str, scorer: str | None = None) -> str:
    """Return the full name of the math rule ``scorer`` for ``dataset``.

    Args:
        dataset: ``gsm8k``, ``svamp``, ``asdiv``, ``mathword`` (any other name offers the
            generic rules).
        scorer: a full name (``gsm8k/official``) or a short one (``official``, ``lumos``,
            ``exact``, ``lenient``) among the dataset's choices; None for its default.

    Raises:
        ValueError: a name the dataset does not offer; the message lists the choices.
    """
    choices = SCORER_CHOICES.get(dataset, _GENERIC_CHOICES)
    if scorer is None:
        return next(iter(choices.values()))
    if scorer in choices:
        return choices[scorer]
    if scorer in choices.values():
        return scorer
    listed = ", ".join(f"{short!r} ({full})" for short, full in choices.items())
    raise ValueError(f"scorer {scorer!r} is not a math rule of {dataset}; choose one of {listed}")


def _write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def math_source(dataset: str, *, split: str, source: str | Path) -> TaskSource:
    """Return the task source of a math dataset.

    Args:
        dataset: ``gsm8k``, ``svamp`` or ``asdiv``.
        split: the split (``test``, ``train``...); the bundled sample is always ``sample``.
        source: ``"bundled"`` (the sample shipped in the package), ``"official"`` (the file
            fetched by ``lumos-gym data download``), ``"hub"`` (GSM8K from the Hugging Face hub)
            or a path to an official-format file.
    """
    loader = _LOADERS[dataset]
    if source == "bundled":
        return BundledSource(_BUNDLED[dataset], loader, split="sample", asked=(split, "test"))
    if source == "official":
        return FileSource(
            data.dataset_path(dataset, split),
            loader,
            split=split,
            hint=data.download_hint(dataset, split),
        )
    if source == "hub":
        info = data.DATASETS.get(dataset)
        if info.hub is None:
            raise ValueError(f"{dataset} has no hub source; use 'official' or a path")
        repo_id, config = info.hub
        return HubSource(
            repo_id,
            config=config,
            split=split,
            loader=loader,
            writer=_write_jsonl,
            cache_path=data.dataset_dir(dataset) / f"hub-{split}.jsonl",
        )
    return FileSource(
        source, loader, split=split, hint=f"pass the path of the official {dataset} file"
    )


class MathEnv(LumosEnv):
    """A math word-problem env over GSM8K, SVAMP or ASDiv.

    Args:
        dataset: ``gsm8k``, ``svamp`` or ``asdiv``.
        split: the split named in task ids.
        source: see :func:`math_source`.
        limit: keep only the first ``limit`` tasks (file order).
        tasks: explicit tasks instead of a source (for tests and converters).
        scorer: the accuracy rule (see :func:`math_scorer`): ``gsm8k/official`` by default
            for GSM8K, ``math/exact`` for the others; ``"lumos"`` gives Lumos' own rule
            (GSM8K, SVAMP), ``"lenient"`` number words, expressions and rounded decimals.
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``tools``, ``render_mode``,
            ``privileged``).

    Raises:
        ValueError: an unknown dataset, or a scorer the dataset does not offer.
    """

    task_type = "math"
    default_tools = MATH_TOOLS
    primary_metric = "accuracy"
    default_scorer = DEFAULT_MATH_SCORER

    def __init__(
        self,
        *,
        dataset: str = "gsm8k",
        split: str = "test",
        source: str | Path = "bundled",
        limit: int | None = None,
        tasks: Sequence[Task] | None = None,
        scorer: str | None = None,
        **options: Any,
    ) -> None:
        if dataset not in _LOADERS and tasks is None:
            raise ValueError(f"dataset must be one of {sorted(_LOADERS)}, got {dataset!r}")
        self.dataset = dataset
        self.scorer = math_scorer(dataset, scorer)
        loaded = tasks if tasks is not None else math_source(dataset, split=split, source=source)
        super().__init__(tasks=loaded, limit=limit, **options)

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Return ``{"accuracy": 1.0 or 0.0}`` under the env's rule (``self.scorer``)."""
        rule = self.scorer or DEFAULT_MATH_SCORER
        return {"accuracy": math_accuracy(prediction, task.answer, scorer=rule)}


class MathWordEnv(MathEnv):
    """Procedural multi-step word problems (offline), seeded, with difficulty levels.

    Args:
        split: ``train``, ``validation`` or ``test`` (disjoint problems: see
            :mod:`~lumos_gym.envs.math.mathword`).
        levels: difficulty levels (1 = one step ... 5 = five steps); tasks are made per level.
        num_tasks: problems per level.
        seed: the generator seed.
        scorer: ``"exact"`` (``math/exact``, the default) or ``"lenient"`` (``math/lenient``).
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options.
    """

    def __init__(
        self,
        *,
        split: str = "test",
        levels: Sequence[int] | int = (1, 2, 3),
        num_tasks: int = 20,
        seed: int = 0,
        scorer: str | None = None,
        **options: Any,
    ) -> None:
        self.dataset = "mathword"
        self.scorer = math_scorer(self.dataset, scorer)
        levels = (levels,) if isinstance(levels, int) else tuple(levels)
        generator = MathWordGenerator()

        def generate() -> list[Task]:
            return [
                task
                for level in levels
                for task in generator.generate(num_tasks, seed=seed, level=level, split=split)
            ]

        params = {"generator": "mathword", "split": split, "levels": list(levels),
                  "num_tasks": num_tasks, "seed": seed}
        source = GeneratedSource(generate, params, share=True)
        LumosEnv.__init__(self, tasks=source, **options)
