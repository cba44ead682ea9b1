"""WorldQA's env: :class:`WorldQAEnv`, multi-hop QA over a generated world."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lumos_gym.envs.qa.base import QAEnv
from lumos_gym.envs.qa.worldqa.generator import build_world
from lumos_gym.envs.qa.worldqa.questions import FAMILIES, generate_tasks
from lumos_gym.envs.sources import GeneratedSource
from lumos_gym.envs.tasks import Task


class WorldQAEnv(QAEnv):
    """Multi-hop QA over a generated world; ``KnowledgeQuery`` searches all of its pages.

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"`` (see :func:`build_world`).
        num_tasks: questions per family.
        families: the question families (default all of :data:`FAMILIES`).
        seed: the world and question seed.
        num_countries: countries of the world.
        num_cities: cities of the world.
        num_people: people of the world.
        num_organisations: organisations of the world.
        **options: :class:`~lumos_gym.envs.qa.base.QAEnv` options (``qa_model``, ``qa_backend``,
            ``retrieve_backend``, ``judge``) and :class:`~lumos_gym.envs.base.LumosEnv`
            options (``limit``, ``render_mode``, ``privileged``, ``tools``). ``corpus``
            defaults to the world's pages.
    """

    def __init__(
        self,
        *,
        split: str = "test",
        num_tasks: int = 10,
        families: Sequence[str] | str = FAMILIES,
        seed: int = 0,
        num_countries: int = 6,
        num_cities: int = 30,
        num_people: int = 120,
        num_organisations: int = 48,
        **options: Any,
    ) -> None:
        families = (families,) if isinstance(families, str) else tuple(families)
        sizes = {
            "num_countries": num_countries,
            "num_cities": num_cities,
            "num_people": num_people,
            "num_organisations": num_organisations,
        }
        self.world = build_world(seed=seed, split=split, **sizes)
        world = self.world

        def generate() -> list[Task]:
            return generate_tasks(world, num_tasks=num_tasks, families=families)

        params = {"generator": "worldqa", "split": split, "seed": seed, "num_tasks": num_tasks,
                  "families": list(families), **sizes}
        options.setdefault("corpus", world.documents())
        super().__init__(tasks=GeneratedSource(generate, params), dataset="worldqa", **options)
