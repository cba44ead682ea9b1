"""The Lumos agents: a planning module and a grounding module over the env's execution tools.

``lumos-i`` (Lumos-I, iterative) plans one subgoal, grounds it to actions, executes them, and
feeds the result back to the planner, until the planner says ``Yes, I will stop planning.`` or
the round limit is reached. The feedback quotes the value of the subgoal's last action
(:func:`subgoal_feedback`): as Lumos did for math and QA; one line, at most 400 characters
(:func:`executed_result`) for WebShop (the search results name the items later subgoals
select, as in Lumos' WebShop evaluation) and text games (the game's reply); Mind2Web alone
restates the subgoal (``We have already ...``), as Lumos did.

``lumos-o`` (Lumos-O, onetime) plans every subgoal at once, grounds them all at once and
executes the actions in one step. Both follow the original evaluation loop
(``docs/lumos-format.md`` §1.5): module prompts byte-exact (:mod:`lumos_gym.prompts`), greedy
decoding, the first newline ends a module answer, an execution error ends planning, and the
final answer is the value of ``Output`` or of the highest-numbered ``R<n>``.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lumos_gym import prompts
from lumos_gym.actions import last_variable, parse_actions
from lumos_gym.agents.base import Act, Agent, Ask, EpisodeLogic, Note, StepOutcome
from lumos_gym.envs.families import Family
from lumos_gym.envs.registration import fill_from_families
from lumos_gym.envs.tasks import ENV_ENDED_TYPES, rounds_from_tables
from lumos_gym.errors import ActionParseError
from lumos_gym.models.base import Completion
from lumos_gym.tools.base import ToolSpec

#: Subgoals (plan + ground rounds) per task type, from the env families' records
#: (``lumos_rounds`` of :class:`lumos_gym.envs.families.Family`); 5 for any other task type.
LUMOS_ROUNDS: dict[str, int] = {}
#: ... and per dataset, where a family gives one of its datasets a limit of its own (a
#: dataset's limit wins over its task type's).
DATASET_ROUNDS: dict[str, int] = {}


def _family_rounds(family: Family, datasets: bool) -> list[tuple[str, int]]:
    rounds = family.lumos_rounds
    if isinstance(rounds, int):
        return [] if datasets else [(family.task_type, rounds)]
    if datasets:
        return [(k, int(v)) for k, v in rounds.items() if k != family.task_type]
    return [(family.task_type, int(rounds.get(family.task_type, 5)))]


fill_from_families(LUMOS_ROUNDS, lambda family: _family_rounds(family, datasets=False))
fill_from_families(DATASET_ROUNDS, lambda family: _family_rounds(family, datasets=True))


def round_limit(info: Mapping[str, Any]) -> int:
    """Return the most subgoals of the episode ``info`` describes (its dataset's or task type's).

    The dataset is the first part of the task id (``svamp/sample/3`` is SVAMP's).
    """
    return rounds_from_tables(info.get("task_id"), info.get("task_type", "math"),
                              LUMOS_ROUNDS, DATASET_ROUNDS)


def action_specs(info: Mapping[str, Any]) -> list[ToolSpec]:
    """Return the specs of every allowed action (``info["actions"]``: ``"Signature: doc"``)."""
    specs = []
    for line in info.get("actions", []):
        signature, _, doc = str(line).partition(": ")
        specs.append(ToolSpec(signature.split("(", 1)[0], signature, doc))
    return specs


def tool_specs(info: Mapping[str, Any]) -> list[ToolSpec]:
    """Return the specs of the tools the grounding instruction lists, in its order.

    ``info["instruction_actions"]`` names them; the terminal ``Answer`` is not among them.
    """
    described = {spec.name: spec for spec in action_specs(info)}
    names = info.get("instruction_actions") or [n for n in described if n != "Answer"]
    return [described.get(n, ToolSpec(n, f"{n}(...)", "")) for n in names]


def has_error(outcome: StepOutcome) -> bool:
    """Return True when the env reported an error for the step."""
    return any(line.startswith("Error:") for line in outcome.observation.splitlines())


def last_result(action_text: str, outcome: StepOutcome) -> str:
    """Return the value of the last executed action: its output variables' values, joined.

    Falls back to the last observation line for a call with no output variable.
    """
    variables = outcome.info.get("variables", {})
    try:
        last = parse_actions(action_text)[-1]
    except ActionParseError:
        last = None
    if last is not None and last.outputs and all(v in variables for v in last.outputs):
        return ", ".join(str(variables[v]) for v in last.outputs)
    lines = [line for line in outcome.observation.splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    return text.split(" = ", 1)[-1] if " = " in text else text


def executed_result(action_text: str, outcome: StepOutcome) -> str:
    """Return the executed result a WebShop or game planner feedback quotes after a step.

    It is the value of the step's last action (:func:`last_result`: its output variables'
    values), or, for a lone call with no output variable (``Command(look)``, a bare game
    command, WebShop's ``search[...]``), the call's whole answer; made one line and cut at
    :data:`~lumos_gym.prompts.MAX_FEEDBACK_RESULT_CHARS` by
    :func:`~lumos_gym.prompts.feedback_result`. Replay verification records each subgoal's
    result with this function on the replayed step, so the training records quote the bytes
    the agent quotes here.
    """
    try:
        actions = parse_actions(action_text)
    except ActionParseError:
        actions = []  # a step that ran anyway was rewritten by the env: one bare call
    if len(actions) <= 1 and not (actions and actions[0].outputs):
        return prompts.feedback_result(outcome.observation)
    return prompts.feedback_result(last_result(action_text, outcome))


def restates_subgoal(task_type: str, domain: str | None) -> bool:
    """Return True when the planner feedback restates the subgoal (Mind2Web's ``web_agent``).

    Web envs other than WebShop do, as Lumos' web_agent data did (docs/lumos-format.md §1.3); the
    export makes the same choice (:func:`lumos_gym.conversion.exports.quotes_results`).
    """
    return task_type == "web" and domain != "webshop"


def subgoal_feedback(
    index: int,
    subgoal: str,
    action_text: str,
    outcome: StepOutcome,
    *,
    task_type: str,
    domain: str | None,
) -> str:
    """Return the planner's user turn after subgoal ``index`` was grounded and executed.

    Args:
        index: the subgoal's number (1-based).
        subgoal: the subgoal line.
        action_text: the grounded actions sent to the env.
        outcome: the env's answer to them.
        task_type: the env's task type.
        domain: the Lumos domain of the env's tools (:func:`~lumos_gym.prompts.lumos_domain`).
    """
    if restates_subgoal(task_type, domain):
        return prompts.plan_feedback(index, "", subgoal=subgoal, web=True)
    if task_type in ENV_ENDED_TYPES:
        return prompts.plan_feedback(index, executed_result(action_text, outcome))
    return prompts.plan_feedback(index, last_result(action_text, outcome))


def sanitize_answer(value: str) -> str:
    """Make free text safe inside ``Answer(...)``: drop brackets and ``;`` that would not parse."""
    text = value.replace("</s>", " ").strip()
    for ch in "()[]{};":
        text = text.replace(ch, " ")
    return " ".join(text.split())


def final_answer(outcome: StepOutcome | None) -> str:
    """Return the terminal action: ``Answer(<Output or the highest R<n>>)``, or ``Answer()``."""
    variables = outcome.info.get("variables", {}) if outcome is not None else {}
    name = last_variable(variables)
    return f"Answer({name})" if name else "Answer()"


def ends_by_env(info: Mapping[str, Any]) -> bool:
    """Return True when the env ends episodes itself (web, games): its terminal is ``Stop()``."""
    return "Stop" in info.get("action_names", ())


def closing_action(info: Mapping[str, Any], outcome: StepOutcome | None) -> str:
    """Return the action that ends an episode the agent is done with.

    ``Answer(<last variable>)`` where episodes end by an answer; ``Stop()`` (give up where the
    episode stands) where the environment ends them.
    """
    return "Stop()" if ends_by_env(info) else final_answer(outcome)


class LumosAgent(Agent):
    """What both Lumos formulations share: roles, round limits, module calls."""

    roles: ClassVar[tuple[str, ...]] = ("planner", "grounder")

    def rounds(self, info: Mapping[str, Any]) -> int:
        """Return the most subgoals of the episode ``info`` describes (:func:`round_limit`)."""
        if self.config.max_rounds is not None:
            return self.config.max_rounds
        return round_limit(info)

    def module(self, role: str, messages: Sequence[dict[str, str]]) -> Ask:
        """Return the ask for one module call on the conversation so far."""
        prompt = prompts.render_inference(messages)
        return Ask(role, self.request(prompt=prompt, stop=prompts.MODULE_STOP))

    def finish(self, info: Mapping[str, Any], outcome: StepOutcome | None) -> EpisodeLogic:
        """End the episode unless it has ended: the final answer, or ``Stop()`` (web, games)."""
        if outcome is not None and outcome.terminated:
            return
        yield Act(closing_action(info, outcome))


@dataclass
class IterativeState:
    """One Lumos-I episode in progress, as the hooks of :class:`LumosIterativeAgent` see it.

    Attributes:
        info: the ``info`` of ``reset`` (with the run's ``agent_info``).
        plan: the planner conversation so far.
        ground: the grounder conversation so far.
        outcome: the env's answer to the last step, or None before the first.
        memo: what a subclass keeps for the episode (the agent object is shared by the
            episodes in flight, so per-episode state lives here).
    """

    info: Mapping[str, Any]
    plan: list[dict[str, str]]
    ground: list[dict[str, str]] = field(default_factory=list)
    outcome: StepOutcome | None = None
    memo: dict[str, Any] = field(default_factory=dict)


#: What a module hook of :class:`LumosIterativeAgent` is: it may ask a model or write a note,
#: and returns the module's answer.
ModuleLogic = Generator[Ask | Note, Completion | None, str]


class LumosIterativeAgent(LumosAgent):
    """Lumos-I: plan a subgoal, ground it, execute it, feed the result back; repeat."""

    name = "lumos-i"

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Run the plan → ground → execute loop of docs/lumos-format.md §1.5."""
        task_type = str(info.get("task_type", "math"))
        specs = tool_specs(info)
        domain = prompts.lumos_domain(s.name for s in specs)
        with_results = domain == "complex_qa" or (domain is None and task_type == "qa")
        state = IterativeState(info, [{"role": "user",
                                       "content": prompts.plan_first_turn(observation)}])
        results: list[str] = []
        for index in range(1, self.round_limit(task_type, state) + 1):
            output = yield from self.next_subgoal(index, state)
            if not output or prompts.is_stop(output):
                break
            subgoal = prompts.subgoal_of(output)
            state.plan.append({"role": "assistant", "content": output})
            state.ground.append({"role": "user", "content": prompts.ground_turn(
                subgoal, first=index == 1, task=observation, specs=specs,
                earlier_results=[prompts.result_as_written(r) for r in results],
                with_results=with_results,
            )})
            actions = yield from self.ground_subgoal(index, subgoal, state)
            state.ground.append({"role": "assistant", "content": actions})
            outcome = state.outcome = yield Act(actions)
            if outcome.terminated or has_error(outcome):
                break
            result = last_result(actions, outcome)
            results.append(result)
            feedback = subgoal_feedback(index, subgoal, actions, outcome, task_type=task_type,
                                        domain=domain)
            state.plan.append({"role": "user", "content": feedback})
        yield from self.finish(info, state.outcome)

    def round_limit(self, task_type: str, state: IterativeState) -> int:
        """Return the most subgoals of this episode (:meth:`rounds` of its task)."""
        del task_type
        return self.rounds(state.info)

    def next_subgoal(self, index: int, state: IterativeState) -> ModuleLogic:
        """The planning module: return the planner's answer for subgoal ``index``."""
        del index
        planned = yield self.module("planner", state.plan)
        return planned.text.strip()

    def ground_subgoal(self, index: int, subgoal: str, state: IterativeState) -> ModuleLogic:
        """The grounding module: return the actions of ``subgoal``.

        The grounder's user turn for it is the last of ``state.ground``.
        """
        del index, subgoal
        grounded = yield self.module("grounder", state.ground)
        return grounded.text.strip()


class LumosOnetimeAgent(LumosAgent):
    """Lumos-O: plan every subgoal, ground them all, then execute the actions in one step."""

    name = "lumos-o"

    def episode(self, observation: str, info: Mapping[str, Any]) -> EpisodeLogic:
        """Plan once, ground once, execute once, answer."""
        specs = tool_specs(info)
        plan = [{"role": "user", "content": prompts.plan_first_turn(observation)}]
        planned = yield self.module("planner", plan)
        subgoals = planned.text.strip()
        content = prompts.ground_onetime(observation, subgoals, specs)
        grounded = yield self.module("grounder", [{"role": "user", "content": content}])
        outcome = yield Act(grounded.text.strip())
        yield from self.finish(info, outcome)
