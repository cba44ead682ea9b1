"""The records of env families: what one family of envs brings to every part of lumos-gym.

A family (math, complex QA, code, web, multimodal, text games, or a plugin's) is one
:class:`Family` record, declared in its folder's ``__init__.py`` and registered once
(:func:`lumos_gym.envs.registration.register_family`). The record names everything the family
adds: its env ids, the converters of its datasets, the env that replays its annotations, the
tools its agents see, its offline splits, its metrics, its Lumos round limit, its training
mixture domains and shares, and its Lumos domain actions. The layers above read the records
(conversion, agents, leaderboard, workflows), so nothing else has to list a family.

The records name code of higher layers (a converter, a replay env) by lazy ``"module:attr"``
strings only, imported on first use: this module imports nothing heavy, and nothing above
:mod:`lumos_gym.envs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.registry import import_object

#: A metric of a summary: ``(name, key)``, the key naming the value in an episode record's
#: ``metrics``, or ``None`` for the record's ``reward`` (the env's primary metric).
MetricSpec = tuple[str, str | None]


@dataclass(frozen=True)
class EnvInfo:
    """What the env table says about a registered env.

    Attributes:
        id: the Gymnasium id, ``lumos/<Name>-v<k>``.
        entry_point: ``"module:Class"`` of the env.
        sources: where its tasks can come from (``bundled``, ``official``, ``hub``, ``generated``).
        size: the number of tasks, as text (e.g. ``"1,319 test; 25 bundled"``).
        description: one line.
        max_episode_steps: the step limit applied by ``gymnasium.make``.
        kwargs: default constructor arguments.
    """

    id: str
    entry_point: str
    sources: tuple[str, ...]
    size: str
    description: str
    max_episode_steps: int = 32
    kwargs: dict[str, Any] = field(default_factory=dict)

    def env_class(self) -> type:
        """Import and return the env class."""
        return import_object(self.entry_point)  # type: ignore[return-value]


@dataclass(frozen=True)
class OfflineSplit:
    """One split that ``lumos-gym data build`` makes without any download.

    Attributes:
        name: the file stem, e.g. ``"mathword-train"``.
        env_id: the env whose tasks it holds.
        kwargs: the env's constructor arguments.
        role: ``"train"`` (converted, verified and exported as training data) or ``"test"``
            (the task list, for evaluation).
        takes_num_tasks: the env gets ``data build --num-tasks`` as its ``num_tasks`` (tasks
            per level or per kind); otherwise the ``num_tasks`` and ``num_games`` of
            ``kwargs`` are scaled by ``--num-tasks / 200``.
    """

    name: str
    env_id: str
    kwargs: Mapping[str, Any]
    role: str
    takes_num_tasks: bool = False


@dataclass(frozen=True)
class Family:
    """One family of envs: every table entry it adds, in one record.

    Keys named "dataset" are the ``dataset`` of the family's envs and annotations (``gsm8k``,
    ``webshop``); "module:attr" strings are imported on first use.

    Attributes:
        name: the family's name (``math``, the folder's name for a built-in family).
        task_type: the task type of its tasks; one family per task type (a new one is added
            to the task types :class:`~lumos_gym.envs.tasks.Task` accepts).
        description: one line.
        envs: its env registrations (id, entry point, sources, size, description, step limit,
            default kwargs), registered with Gymnasium in this order.
        converters: dataset → ``"module:function"`` of its rule-based converter (a task to
            an annotation); ``None`` for an evaluation-only dataset (no rationale to convert).
        verify_env: ``"module:function"`` building the env that replays the family's
            annotations, ``function(tasks, dataset) -> LumosEnv``, for ``verify_annotations``
            without an env; ``None`` when only ``convert`` verifies (it replays in the env the
            tasks came from).
        tools: task type or dataset → ``"module:ATTR"`` of the tool names its agents see, in
            instruction order (a dataset's list wins over the task type's).
        splits: its ``lumos-gym data build`` splits, in build order.
        metrics: primary metric → the metrics of a summary, the primary first
            (:data:`MetricSpec`); an env's task type and primary metric pick the row.
        lumos_rounds: the most subgoals (plan and ground rounds) of a Lumos or baseline
            episode: one number, or task type or dataset → number (a dataset's entry wins;
            a task type without one gets 5).
        domains: task type or dataset → the Lumos domain of its training records (their
            ``dataset`` field and id prefix); a dataset's entry wins, and a task type without
            one is its own domain.
        mix: domain → records that the reference training mixture draws from it.
        domain_actions: Lumos domain → its action names, for the domains whose verbatim
            grounding instruction (:data:`lumos_gym.prompts.GROUND_INSTRUCTIONS`) an env
            with exactly these tools gets.
    """

    name: str
    task_type: str
    description: str
    envs: tuple[EnvInfo, ...] = ()
    converters: Mapping[str, str | None] = field(default_factory=dict)
    verify_env: str | None = None
    tools: Mapping[str, str] = field(default_factory=dict)
    splits: tuple[OfflineSplit, ...] = ()
    metrics: Mapping[str, tuple[MetricSpec, ...]] = field(default_factory=dict)
    lumos_rounds: int | Mapping[str, int] = 5
    domains: Mapping[str, str] = field(default_factory=dict)
    mix: Mapping[str, int] = field(default_factory=dict)
    domain_actions: Mapping[str, frozenset[str]] = field(default_factory=dict)


__all__ = ["EnvInfo", "Family", "MetricSpec", "OfflineSplit"]
