"""One episode of a run: what to play, what came of it, and how it ended.

:class:`EpisodeSpec` is an episode to play, :class:`EpisodeRecord` what came of it (one line
of ``episodes.jsonl``) and :data:`STATUSES` how it can end. The rollout runner
(:mod:`lumos_gym.agents.runner`) takes the specs and writes the records; ``lumos-gym
evaluate`` plans the specs and appends the records; the results and the leaderboard read them
back (:mod:`lumos_gym.evaluation.results`). Plain data that imports nothing of lumos-gym, so
that reading results loads neither the runner nor the envs and models it drives. An episode
ends in ``infra-error`` when the machinery failed, not the agent (the runner's module
docstring says when); the results leave such an episode out of every mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: The status of an episode that the machinery failed, not the agent (see
#: :mod:`lumos_gym.agents.runner`).
INFRA_ERROR = "infra-error"

#: The fixed taxonomy of episode statuses.
STATUSES = (
    "completed",
    "invalid-action-limit",
    "step-limit",
    "context-limit",
    "tool-error",
    "agent-error",
    "env-error",
    INFRA_ERROR,
)


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: an env (id and constructor arguments), a task and a seed.

    ``agent_info`` is added to the ``info`` of ``reset`` that the agent gets (never to the
    env): gold data for agents that read it (``gold_plan`` for the counterfactual agents),
    given by the run's plan; empty for every other agent.
    """

    env_id: str
    task_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    agent_info: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeRecord:
    """Everything about one finished episode (one JSON line in a results file).

    ``tokens`` holds, when the runner records tokens, the compact token entry of each module
    call (:mod:`lumos_gym.agents.tokens`); it is not part of :meth:`to_dict` (results keep
    it in a file of its own).
    """

    env_id: str
    task_id: str
    env_kwargs: dict[str, Any]
    seed: int
    agent: str
    status: str
    reason: str | None = None
    reward: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    prediction: str | None = None
    gold_answer: str | None = None
    task: str = ""
    steps: int = 0
    invalid_actions: int = 0
    tool_errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0
    env_s: float = 0.0
    tool_s: float = 0.0
    model_s: float = 0.0
    turns: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the record as plain JSON-ready data (``tokens`` left out)."""
        data = asdict(self)
        del data["tokens"]
        return data
