"""Env validation: Gymnasium's checker plus an oracle replay of gold actions."""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from lumos_gym.envs.base import LumosEnv
from lumos_gym.envs.registration import make_env
from lumos_gym.envs.replay import ReplayResult, replay_actions
from lumos_gym.envs.tasks import Task


@dataclass
class CheckReport:
    """What ``lumos-gym check`` found for one env id.

    Attributes:
        gold_tasks: the tasks that have gold actions (the oracle replays them, up to the
            replay limit).
    """

    env_id: str
    api_ok: bool
    api_error: str | None
    warnings: list[str]
    replays: list[ReplayResult]
    tasks: int
    gold_tasks: int = 0

    @property
    def status(self) -> str:
        """Return ``ok``, ``FAILED`` or ``unverified``.

        ``FAILED``: the API check, a warning or a replay failed; ``unverified``: all passed,
        but the oracle replayed no task.
        """
        if not (self.api_ok and not self.warnings and all(r.ok for r in self.replays)):
            return "FAILED"
        return "ok" if self.replays else "unverified"

    @property
    def ok(self) -> bool:
        """Return True when the API check passed and the oracle replayed tasks, all winning."""
        return self.status == "ok"

    @property
    def unverified_reason(self) -> str | None:
        """Say why the oracle replayed nothing (None when it replayed a task)."""
        if self.replays:
            return None
        if self.gold_tasks:
            return f"replay limit 0: {self.gold_tasks} tasks have gold actions, none replayed"
        return (f"none of the {self.tasks} tasks has gold actions (this data gives no gold "
                "trajectories), so the oracle replayed nothing")


def replay_gold(env: LumosEnv, task: Task) -> ReplayResult:
    """Play ``task.gold_actions`` in ``env`` and return the replay (final reward, error lines)."""
    return replay_actions(env, task.id, task.gold_actions)


def check_env_id(
    env_id: str, *, kwargs: dict[str, Any] | None = None, replay_limit: int | None = None
) -> CheckReport:
    """Run Gymnasium's env checker on ``env_id`` and replay the gold actions of its tasks.

    The replays run in a second env built with the env's ``replay_options`` (for QA envs, the
    reference ``QA`` backend and BM25 passage ranking), so the check loads no model.

    Args:
        env_id: a registered id.
        kwargs: constructor arguments for ``gymnasium.make``.
        replay_limit: replay at most this many tasks (default: every task with gold actions).
    """
    env = make_env(env_id, disable_env_checker=True, **(kwargs or {}))
    base = env.unwrapped
    assert isinstance(base, LumosEnv)
    api_error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:  # the render check draws a frame: kept off the report's output
            with contextlib.redirect_stdout(io.StringIO()):
                check_env(base, skip_render_check=False, skip_close_check=True)
        except Exception as e:  # report any checker failure as the env's result
            api_error = f"{type(e).__name__}: {e}"
    caught_messages = [str(w.message) for w in caught]
    replays = []
    with_gold = [t for t in base.tasks if t.gold_actions][:replay_limit]
    if not base.replay_options:
        replays = [replay_gold(base, task) for task in with_gold]
    env.close()
    if with_gold and base.replay_options:
        # gold trajectories replay with the env's replay options (reference backends for
        # model-backed tools, privileged facts), so that the check needs no model
        replay_env = gym.make(
            env_id, disable_env_checker=True, **{**(kwargs or {}), **base.replay_options}
        )
        try:
            replay_base = replay_env.unwrapped
            assert isinstance(replay_base, LumosEnv)
            replays = [replay_gold(replay_base, task) for task in with_gold]
        finally:
            replay_env.close()
    gold_tasks = sum(1 for t in base.tasks if t.gold_actions)
    return CheckReport(
        env_id, api_error is None, api_error, caught_messages, replays, len(base.tasks), gold_tasks
    )
