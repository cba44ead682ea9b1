"""The one replay loop: known action texts played in an env, step by step, every step recorded.

Every replay of given actions runs here: the oracle replay of ``lumos-gym check``
(:func:`~lumos_gym.envs.checks.replay_gold`), the replay verification of annotations
(:func:`~lumos_gym.conversion.verify.replay`), the replays of ``lumos-gym rescore``
(:mod:`lumos_gym.evaluation.rescore`) and the replays that make the records of the
``QA`` tool's model (:mod:`lumos_gym.conversion.qa_tool`). :class:`Replay` resets the env to
a task and plays action texts (:meth:`Replay.play`, or one at a time with :meth:`Replay.step`);
its :class:`ReplayResult` keeps each step's observation, reward, end and ``info``, and gives
the final reward, metrics, variables and ``Error:`` lines.

:func:`step_env` is the step itself (``env.step`` with the observation as text), shared with
the rollout runner (:mod:`lumos_gym.agents.runner`), which plays the oracle agent's gold
actions as it plays any agent's: it interleaves many episodes with batched model calls and
keeps per-episode accounts and statuses, so it drives its own loop and shares only the step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from lumos_gym.envs.base import observation_text

__all__ = ["Replay", "ReplayResult", "ReplayStep", "StepOutcome", "replay_actions", "step_env"]


@dataclass(frozen=True)
class StepOutcome:
    """What ``env.step`` returned for one action text, the observation as text."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: Mapping[str, Any]


def step_env(env: gym.Env, action: str) -> StepOutcome:
    """Send one action text to ``env`` and return the outcome (the observation made text)."""
    shown, reward, terminated, truncated, info = env.step(action)
    return StepOutcome(observation_text(shown), float(reward), terminated, truncated, info)


@dataclass(frozen=True)
class ReplayStep(StepOutcome):
    """One replayed step: the action text sent, and what the env returned for it."""

    action: str

    @property
    def ended(self) -> bool:
        """Whether this step ended the episode (terminated or truncated)."""
        return self.terminated or self.truncated

    @property
    def variables(self) -> dict[str, str]:
        """The episode's variables after this step (``info["variables"]``; ``{}`` without)."""
        return dict(self.info.get("variables") or {})

    @property
    def errors(self) -> list[str]:
        """The observation's lines that start with ``Error:``."""
        return [line for line in self.observation.splitlines() if line.startswith("Error:")]


@dataclass
class ReplayResult:
    """The steps of one replayed episode, and what they came to.

    Attributes:
        task_id: the task replayed.
        steps: every step played, in order; only the last one can have ended the episode.
    """

    task_id: str
    steps: list[ReplayStep] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        """Whether the episode ended (the last step terminated or truncated it)."""
        return bool(self.steps) and self.steps[-1].ended

    @property
    def terminated(self) -> bool:
        """Whether the episode ended by termination (an answer, a purchase, a win...)."""
        return bool(self.steps) and self.steps[-1].terminated

    @property
    def reward(self) -> float:
        """The reward the episode ended with; 0.0 while it has not ended."""
        return self.steps[-1].reward if self.ended else 0.0

    @property
    def info(self) -> Mapping[str, Any]:
        """The ``info`` of the last step (``{}`` before the first)."""
        return self.steps[-1].info if self.steps else {}

    @property
    def metrics(self) -> dict[str, float]:
        """The episode's metrics (``info["metrics"]`` of the step that ended it; else ``{}``)."""
        return dict(self.info.get("metrics") or {})

    @property
    def variables(self) -> dict[str, str]:
        """The episode's variables after the last step (``{}`` before the first)."""
        return self.steps[-1].variables if self.steps else {}

    @property
    def errors(self) -> list[str]:
        """The ``Error:`` lines of every step's observation, in order."""
        return [line for step in self.steps for line in step.errors]

    @property
    def ok(self) -> bool:
        """Return True when the replay ended the episode with full reward and no error."""
        return self.terminated and self.reward >= 1.0 and not self.errors


class Replay:
    """One episode of ``env`` replayed from known action texts; made, it has reset the env.

    Args:
        env: an env holding the task (its ``reset`` takes ``options={"task_id": ...}``).
        task_id: the task to replay.
        reference: gold facts for the env's reference tool backends, sent as the reset's
            ``options["reference"]``; ``None`` sends none.
        seed: the reset's seed (a recorded episode's, to replay it as the runner played it);
            ``None`` leaves the env's generator as it is.
    """

    def __init__(
        self, env: gym.Env, task_id: str, *, reference: Mapping[str, Any] | None = None,
        seed: int | None = None,
    ) -> None:
        options: dict[str, Any] = {"task_id": task_id}
        if reference is not None:
            options["reference"] = reference
        env.reset(seed=seed, options=options)
        self.env = env
        self.result = ReplayResult(task_id)

    def step(self, action: str) -> ReplayStep:
        """Play one action text, record the step and return it."""
        outcome = step_env(self.env, action)
        step = ReplayStep(
            outcome.observation, outcome.reward, outcome.terminated, outcome.truncated,
            outcome.info, action,
        )
        self.result.steps.append(step)
        return step

    def play(self, actions: Iterable[str]) -> Iterator[ReplayStep]:
        """Play each action text in turn, yielding its step; stop after the episode ends.

        ``actions`` is read one text at a time, just before its step, and the caller sees
        each step before the next one runs (it may stop the replay there).
        """
        for action in actions:
            step = self.step(action)
            yield step
            if step.ended:
                return


def replay_actions(
    env: gym.Env,
    task_id: str,
    actions: Iterable[str],
    *,
    reference: Mapping[str, Any] | None = None,
) -> ReplayResult:
    """Replay ``actions`` in an episode of task ``task_id`` until they run out or it ends.

    Arguments as :class:`Replay`; ``actions`` are the action texts, one per ``step``.
    """
    replay = Replay(env, task_id, reference=reference)
    for _ in replay.play(actions):
        pass
    return replay.result
