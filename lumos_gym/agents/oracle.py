"""The oracle agent: replays an env's gold actions. It validates envs and the runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lumos_gym.agents.base import Act, Agent, EpisodeLogic


class OracleAgent(Agent):
    """Replays ``info["gold_actions"]``; needs the env made with ``privileged=True``."""

    name = "oracle"
    roles: ClassVar[tuple[str, ...]] = ()
    #: The runner makes envs with ``privileged=True`` for agents that set this.
    needs_privileged_info: ClassVar[bool] = True

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Send each gold step in turn."""
        if "gold_actions" not in info:
            raise ValueError("the oracle needs an env made with privileged=True")
        if not info["gold_actions"]:
            raise ValueError("no gold actions for this task (its dataset gives no gold plan)")
        for step in info["gold_actions"]:
            outcome = yield Act(step)
            del outcome
        # the runner stops asking once the env ends the episode: reaching here means it did not
        raise ValueError("the gold actions ran out before the episode ended")
