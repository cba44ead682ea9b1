"""The agent contract: an episode is straight-line logic that yields asks and acts.

An agent's :meth:`Agent.episode` is a generator. It yields

* :class:`Ask` — "complete this request with the model playing role R" — and receives a
  :class:`~lumos_gym.models.base.Completion`;
* :class:`Act` — "send this action text to the env" — and receives a :class:`StepOutcome`
  (defined with the env step in :mod:`lumos_gym.envs.replay`, imported here);
* :class:`Note` — "write this turn into the episode record" (a module output the agent took
  from gold data instead of a model: the counterfactual agents) — and receives None.

The runner drives many episodes at once and keeps the pending asks for one model in flight
together on its backend (continuous batching where the backend has it), so an agent never deals
with batching, threads or servers.
"""

from __future__ import annotations

import functools
import sys
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from lumos_gym.envs.replay import StepOutcome
from lumos_gym.envs.sources import file_sha256
from lumos_gym.envs.tasks import ENV_ENDED_TYPES
from lumos_gym.models.base import Completion, GenerationRequest
from lumos_gym.registry import Registry


@dataclass(frozen=True)
class Ask:
    """A request for a completion from the model playing ``role``."""

    role: str
    request: GenerationRequest


@dataclass(frozen=True)
class Act:
    """An action text for the env."""

    action: str


@dataclass(frozen=True)
class Note:
    """A turn for the episode record that no model wrote.

    E.g. ``{"role": "planner", "output": ..., "gold": True}`` for a gold subgoal that a
    counterfactual agent used instead of asking its planner.
    """

    turn: Mapping[str, Any]


EpisodeLogic = Generator[Ask | Act | Note, Completion | StepOutcome | None, None]


@dataclass
class AgentConfig:
    """Settings shared by the agents.

    Attributes:
        max_rounds: the most plan/ground (or think/act) rounds in an episode; None uses the
            per-task-type default of the agent (Lumos' own limits where it had them).
        max_new_tokens: the generation budget of one model call.
        temperature: 0 for greedy decoding.
        seed: recorded with every request.
    """

    max_rounds: int | None = None
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_rounds is not None and self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")


class Agent(ABC):
    """Base class of agents. Subclasses set ``name`` and ``roles`` and write ``episode``.

    Args:
        config: the agent settings.
    """

    name: ClassVar[str]
    #: The model roles the agent asks, e.g. ``("planner", "grounder")`` or ``("policy",)``;
    #: empty for agents that need no model (the oracle).
    roles: ClassVar[tuple[str, ...]] = ("policy",)
    #: For a counterfactual agent (one module of another agent replaced by gold data, e.g.
    #: ``lumos-i+gold-plan``): the agent it stands in for, whose models it runs; its runs read
    #: gold data, so they are never ranked.
    counterfactual_of: ClassVar[str | None] = None
    #: For a counterfactual agent: the role it replaces with gold data (``planner``,
    #: ``grounder``).
    replaces: ClassVar[str | None] = None
    #: The run gives each episode the task's gold plan (``info["gold_plan"]``: subgoals and
    #: their grounded actions, from the dataset's converter; see
    #: :func:`lumos_gym.conversion.gold.gold_info`) without making the env privileged.
    needs_gold_plan: ClassVar[bool] = False
    #: The agent answers in one step and reads no reply of the env (CoT, direct). It cannot act
    #: in an env whose episodes need several actions, each after the env's reply to the last
    #: (web and games: :data:`~lumos_gym.envs.tasks.ENV_ENDED_TYPES`): its score there is 0 by
    #: construction, so the leaderboard's claims leave those envs out for it.
    single_step: ClassVar[bool] = False

    @classmethod
    def can_act(cls, task_type: str | None) -> bool:
        """Whether the agent can act in an env of ``task_type`` (see :attr:`single_step`)."""
        return not (cls.single_step and task_type in ENV_ENDED_TYPES)

    def __init__(self, config: AgentConfig | None = None) -> None:
        self.config = config or AgentConfig()

    def request(
        self, *, prompt: str | None = None, messages: tuple[dict[str, str], ...] | None = None,
        stop: tuple[str, ...] = (), max_new_tokens: int | None = None,
    ) -> GenerationRequest:
        """Build a request with the agent's decoding settings."""
        return GenerationRequest(
            prompt=prompt,
            messages=messages,
            stop=stop,
            max_new_tokens=max_new_tokens or self.config.max_new_tokens,
            temperature=self.config.temperature,
            seed=self.config.seed,
        )

    @abstractmethod
    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Play one episode from the first observation and ``info`` of ``reset``."""

    def describe(self) -> dict[str, Any]:
        """Return the agent's name and full config, for results provenance.

        An agent from outside lumos-gym also gets its ``source`` (:func:`agent_source`), so
        that its results say which code ran, and a run resumes only with the same code.
        """
        described = {"name": self.name, "roles": list(self.roles), "config": vars(self.config)}
        source = agent_source(type(self))
        if source is not None:
            described["source"] = source
        return described


#: The prefix of the module names that :func:`lumos_gym.agents.plugins.agent_class` gives the
#: agent files it imports (``path/to/file.py:Class``).
FILE_MODULE_PREFIX = "_lumos_gym_agent_file_"


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


def _distribution(module: str) -> str | None:
    """The installed distribution (``name version``) that holds ``module``, if any."""
    for name in _distributions().get(module.partition(".")[0], [])[:1]:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            return None
    return None


def agent_source(cls: type) -> dict[str, Any] | None:
    """Where an agent class from outside lumos-gym comes from; None for lumos-gym's own.

    Returns:
        ``{"file", "class", "sha256"}`` for a class imported from a file, else ``{"module",
        "class", "file", "sha256"}`` (``file``: the module's file; ``sha256``: the checksum of
        that file's bytes) and ``distribution`` (``name version``) when an installed package
        holds the module, e.g. a plugin's. lumos-gym's own agents have none: the run's version
        and git commit say what they ran.
    """
    module = cls.__module__
    if module.partition(".")[0] == "lumos_gym":
        return None
    source: dict[str, Any] = {"class": cls.__qualname__}
    if not module.startswith(FILE_MODULE_PREFIX):
        source["module"] = module
        distribution = _distribution(module)
        if distribution is not None:
            source["distribution"] = distribution
    path = getattr(sys.modules.get(module), "__file__", None)
    if path and Path(path).is_file():
        source["file"] = str(Path(path).resolve())
        source["sha256"] = file_sha256(Path(path))
    return source


AGENTS: Registry[type[Agent]] = Registry("agent")
