"""The baseline agents of the Lumos paper: integrated, ReAct, CoT and direct.

* ``integrated`` — one model writes each subgoal *and* its grounded actions in one turn (the
  paper's "integrated training" baseline, which the original release left without a format;
  lumos-gym's format is in :mod:`lumos_gym.prompts` and ``docs/agents.md``).
* ``react`` — Thought / Action / Observation with the same action language; the model ends the
  episode with ``Action: Answer(...)``.
* ``cot`` — reasoning then ``Answer is <answer>.``, no tools (Lumos' CoT training format).
* ``direct`` — the answer only (Lumos' direct training format).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lumos_gym import prompts
from lumos_gym.agents.base import Act, Agent, Ask, EpisodeLogic, StepOutcome
from lumos_gym.agents.lumos import (
    action_specs,
    closing_action,
    ends_by_env,
    has_error,
    round_limit,
    sanitize_answer,
    subgoal_feedback,
    tool_specs,
)


class _PolicyAgent(Agent):
    """An agent with one model, the ``policy``."""

    roles: ClassVar[tuple[str, ...]] = ("policy",)

    def rounds(self, info: Mapping[str, Any]) -> int:
        """Return the most think/act rounds of the episode ``info`` describes."""
        if self.config.max_rounds is not None:
            return self.config.max_rounds
        return round_limit(info)

    def ask(self, prompt: str, stop: tuple[str, ...]) -> Ask:
        """Return an ask for the policy model."""
        return Ask("policy", self.request(prompt=prompt, stop=stop))

    def submit(self, info: Mapping[str, Any], outcome: StepOutcome | None) -> EpisodeLogic:
        """End the episode unless it has ended: ``Answer(<last variable>)``, or ``Stop()``."""
        if outcome is not None and outcome.terminated:
            return
        yield Act(closing_action(info, outcome))

    def answer(self, text: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Submit a free-text answer; ``Answer()`` if the env refused it.

        An env that ends episodes itself takes no answer: the episode stops where it stands.
        """
        if ends_by_env(info):
            yield Act("Stop()")
            return
        outcome = yield Act(f"Answer({sanitize_answer(text)})")
        if not outcome.terminated:
            yield Act("Answer()")


class IntegratedAgent(_PolicyAgent):
    """One model plans and grounds: ``Subgoal k: ...`` then ``Actions: ...`` in each turn."""

    name = "integrated"

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Plan-and-ground a subgoal, execute, feed back; stop like Lumos-I's planner."""
        task_type = str(info.get("task_type", "math"))
        specs = tool_specs(info)
        domain = prompts.lumos_domain(s.name for s in specs)
        first = prompts.integrated_first_turn(observation, specs)
        messages: list[dict[str, str]] = [{"role": "user", "content": first}]
        outcome: StepOutcome | None = None
        for index in range(1, self.rounds(info) + 1):
            completion = yield self.ask(
                prompts.render_inference(messages), prompts.INTEGRATED_STOP
            )
            output = completion.text.strip()
            if not output or prompts.is_stop(output.split("\n", 1)[0]):
                break
            subgoal, actions = prompts.split_integrated(output)
            messages.append({"role": "assistant", "content": prompts.integrated_turn(output)})
            outcome = yield Act(actions)
            if outcome.terminated or has_error(outcome):
                break
            feedback = subgoal_feedback(index, subgoal, actions, outcome, task_type=task_type,
                                        domain=domain)
            messages.append({"role": "user", "content": feedback})
        yield from self.submit(info, outcome)


class ReActAgent(_PolicyAgent):
    """Thought / Action / Observation, with the env's grounded actions."""

    name = "react"

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Think and act until the model answers or the round limit is reached."""
        first = prompts.react_first_turn(observation, action_specs(info))
        messages: list[dict[str, str]] = [{"role": "user", "content": first}]
        outcome: StepOutcome | None = None
        for _ in range(self.rounds(info)):
            completion = yield self.ask(prompts.render_inference(messages), prompts.REACT_STOP)
            output = completion.text.strip()
            action = prompts.react_action(output)
            outcome = yield Act(action if action is not None else output)
            if outcome.terminated:
                return
            messages.append({"role": "assistant", "content": output})
            messages.append({"role": "user", "content": prompts.react_observation(
                outcome.observation)})
        yield from self.submit(info, outcome)


class CoTAgent(_PolicyAgent):
    """Reason, then ``Answer is <answer>.``; no tools."""

    name = "cot"
    single_step = True

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Ask once and submit the answer the reasoning ends with."""
        prompt = prompts.render_inference([{"role": "user", "content": observation}])
        completion = yield self.ask(prompt, prompts.COT_STOP)
        yield from self.answer(prompts.cot_answer(completion.text), info)


class DirectAgent(_PolicyAgent):
    """The answer only, on one line."""

    name = "direct"
    single_step = True

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Ask once and submit the first line of the answer."""
        prompt = prompts.render_inference([{"role": "user", "content": observation}])
        completion = yield self.ask(prompt, prompts.MODULE_STOP)
        yield from self.answer(completion.text, info)

