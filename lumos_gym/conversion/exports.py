"""Exports of unified annotations to the Lumos module training formats.

Each export turns an :class:`~lumos_gym.conversion.annotation.Annotation` into one training
record ``{"dataset": domain, "id": f"{domain}_{i}", "messages": [...]}`` with the bytes the
original data-processing code wrote (docs/lumos-format.md §1.3, §1.4 and §1.7), so that models
trained on them read the prompts of :mod:`lumos_gym.prompts` exactly as the released
``ai2lumos/*`` checkpoints did:

* ``plan-onetime``: one turn, the subgoal lines joined by ``"; "``;
* ``plan-iterative``: a subgoal per turn (``No, I will keep planning. `` from the second on),
  each followed by the result feedback, ending with ``Yes, I will stop planning.``. Math and
  QA quote the tail of the subgoal's last action; Mind2Web (``web_agent``) restates the subgoal
  (``We have already ...``), as Lumos did; WebShop and text games quote the executed result
  that replay verification recorded for each subgoal (:data:`RESULTS_FIELD`), as the Lumos-I
  agent quotes it at evaluation;
* ``ground-onetime``: the domain instruction, every subgoal, every action (a final ``Output``
  kept as written);
* ``ground-iterative``: one turn per subgoal (complex QA also quotes earlier results), a final
  ``Output`` renamed to the next ``R<n>``;

and the formats the baseline agents speak (:mod:`lumos_gym.agents.baselines`): ``integrated``
(each subgoal with its actions in one turn), ``react`` (thought and action turns, observations
as user turns), ``cot`` (``<reasoning> Answer is <answer>.``) and ``direct``. Every export is
built with the same prompt functions the agents use, so training and inference see the same
bytes (tests run each agent on an exported trajectory and compare).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym import prompts
from lumos_gym.actions import Action, format_action, last_variable
from lumos_gym.conversion.annotation import AnnotatedAction, Annotation, AnnotationError
from lumos_gym.envs.base import ANSWER_SPEC, STOP_SPEC
from lumos_gym.envs.math.data import strip_calc_marks
from lumos_gym.envs.registration import fill_from_families
from lumos_gym.envs.tasks import ENV_ENDED_TYPES
from lumos_gym.errors import ActionParseError, RegistryError
from lumos_gym.jsonl import atomic_writer
from lumos_gym.registry import Registry
from lumos_gym.tools import TOOLS
from lumos_gym.tools.base import ToolSpec

#: The Lumos domain name of each task type (the ``dataset`` field of a record), and of the
#: datasets whose domain is not their task type's (WebShop's), from the env families' records
#: (``domains`` of :class:`lumos_gym.envs.families.Family`). A task type without an entry is its
#: own domain.
DOMAINS: dict[str, str] = {}
DATASET_DOMAINS: dict[str, str] = {}
fill_from_families(
    DOMAINS, lambda family: [(k, v) for k, v in family.domains.items() if k == family.task_type]
)
fill_from_families(
    DATASET_DOMAINS,
    lambda family: [(k, v) for k, v in family.domains.items() if k != family.task_type],
)

Messages = list[dict[str, str]]

#: The annotation meta field that holds, for WebShop and game annotations, the executed result
#: of each subgoal's last action, one string per subgoal as
#: :func:`lumos_gym.prompts.feedback_result` writes it (one line, at most 400 characters).
#: Replay verification (:func:`lumos_gym.conversion.verify.verify_annotations`) records it; web
#: and game actions keep no ``= result`` tail (docs/lumos-format.md §1.2), so the grounder exports
#: do not change.
RESULTS_FIELD = "subgoal_results"


def domain_of(annotation: Annotation) -> str:
    """Return the Lumos domain of an annotation (its task type where Lumos had none).

    Web annotations are Mind2Web's ``web_agent`` domain, except WebShop's, whose actions
    (``Search``, ``Click``, ``FeatureRetrieve``, ``Pick``) have their own instruction.
    """
    if annotation.dataset in DATASET_DOMAINS:
        return DATASET_DOMAINS[annotation.dataset]
    return DOMAINS.get(annotation.task_type, annotation.task_type)


def quotes_results(annotation: Annotation) -> bool:
    """Return True when the planner feedback quotes recorded executed results (WebShop, games).

    Envs that end episodes themselves do, except Mind2Web (``web_agent``), whose feedback
    restates the subgoal as Lumos' did.
    """
    return annotation.task_type in ENV_ENDED_TYPES and domain_of(annotation) != "web_agent"


def recorded_results(annotation: Annotation) -> list[str]:
    """Return the executed result of each subgoal recorded in the annotation's meta.

    Raises:
        AnnotationError: the annotation has no :data:`RESULTS_FIELD` (it was not
            replay-verified), or not one string per subgoal.
    """
    results = annotation.meta.get(RESULTS_FIELD)
    if results is None:
        raise AnnotationError(
            f"no executed results recorded (meta[{RESULTS_FIELD!r}]): convert the task with "
            "replay verification to record them"
        )
    if (
        not isinstance(results, list | tuple)
        or len(results) != len(annotation.subgoals)
        or not all(isinstance(r, str) for r in results)
    ):
        raise AnnotationError(
            f"meta[{RESULTS_FIELD!r}] must hold one string per subgoal "
            f"({len(annotation.subgoals)})"
        )
    return list(results)


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def _assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def _check_actions(annotation: Annotation) -> None:
    if not annotation.subgoals:
        raise AnnotationError("the annotation has no subgoal")
    for k, subgoal in enumerate(annotation.subgoals, 1):
        if not subgoal.actions:
            raise AnnotationError(f"subgoal {k} has no action")


def _highest_r(annotation: Annotation) -> int:
    highest = 0
    for item in annotation.actions:
        for var in item.action.outputs:
            if var.startswith("R"):
                highest = max(highest, int(var[1:]))
    return highest


def _renamed(action: Action, output_name: str) -> Action:
    """Rename an ``Output`` variable (outputs and alias target) to ``output_name``."""
    outputs = tuple(output_name if v == "Output" else v for v in action.outputs)
    return Action(outputs, action.name, action.args, action.result)


def _action_text(item: AnnotatedAction, output_name: str) -> str:
    return format_action(_renamed(item.action, output_name), with_result=False)


def _feedback_value(item: AnnotatedAction) -> str:
    """The planner feedback's result: after the action text's last ``=``, skipping 2 chars."""
    text = item.text
    return text[text.rfind("=") + 2 :].strip().strip(".")


def _ground_result(item: AnnotatedAction) -> str:
    """The grounder's quoted result: the annotation tail after the last ``" = "``, as written."""
    text = item.text
    index = text.rfind(" = ")
    return text[index + 3 :].strip() if index >= 0 else ""


# ------------------------------------------------------------------------------ the formats
def plan_onetime(annotation: Annotation) -> Messages:
    """Return the Lumos-O planner conversation."""
    _check_actions(annotation)
    plan = "; ".join(s.line for s in annotation.subgoals)
    return [_user(prompts.plan_first_turn(annotation.task)), _assistant(plan)]


def plan_iterative(annotation: Annotation) -> Messages:
    """Return the Lumos-I planner conversation.

    Raises:
        AnnotationError: a subgoal has no action, or a WebShop or game annotation has no
            recorded results (see :func:`recorded_results`).
    """
    _check_actions(annotation)
    restate = annotation.task_type in ENV_ENDED_TYPES and not quotes_results(annotation)
    recorded = recorded_results(annotation) if quotes_results(annotation) else None
    messages = [_user(prompts.plan_first_turn(annotation.task))]
    for k, subgoal in enumerate(annotation.subgoals, 1):
        messages.append(_assistant(prompts.plan_turn(k, subgoal.line)))
        if restate:
            feedback = prompts.plan_feedback(k, "", subgoal=subgoal.line, web=True)
        elif recorded is not None:
            feedback = prompts.plan_feedback(k, recorded[k - 1])
        else:
            value = _feedback_value(subgoal.actions[-1])
            sentence = f"The executed result for Subgoal {k} is {value}".strip()
            feedback = sentence + ". Should we stop planning?"
        messages.append(_user(feedback))
    messages.append(_assistant(prompts.STOP_PLANNING))
    return messages


def _instruction(annotation: Annotation) -> str:
    domain = domain_of(annotation)
    if domain not in prompts.GROUND_INSTRUCTIONS:
        # a family Lumos did not train (code...): the same template over the env's own tools
        return prompts.grounding_instruction(annotation.task, _specs(annotation))
    return prompts.GROUND_INSTRUCTIONS[domain].replace("{task}", annotation.task)


def ground_onetime(annotation: Annotation) -> Messages:
    """Return the Lumos-O grounder conversation.

    A final ``Output`` variable is kept as written: the original processing code renames it
    to the next ``R<n>`` in the iterative records only (docs/lumos-format.md §1.7).
    """
    _check_actions(annotation)
    subgoals = "; ".join(s.line for s in annotation.subgoals)
    user = _instruction(annotation) + prompts.GROUND_SUBGOALS.format(subgoals=subgoals)
    actions = "; ".join(format_action(a.action, with_result=False) for a in annotation.actions)
    return [_user(user), _assistant(actions)]


def ground_iterative(annotation: Annotation) -> Messages:
    """Return the Lumos-I grounder conversation."""
    _check_actions(annotation)
    output_name = f"R{_highest_r(annotation) + 1}"
    with_results = domain_of(annotation) == "complex_qa"
    instruction = _instruction(annotation)
    messages: Messages = []
    results: list[str] = []
    for k, subgoal in enumerate(annotation.subgoals, 1):
        if k == 1:
            user = instruction + prompts.GROUND_SUBGOAL.format(subgoal=subgoal.line)
        else:
            user = prompts.ground_turn(
                subgoal.line, first=False, task=annotation.task, specs=(),
                earlier_results=results, with_results=with_results,
            )
        actions = "; ".join(_action_text(a, output_name) for a in subgoal.actions)
        messages += [_user(user), _assistant(actions)]
        results.append(_ground_result(subgoal.actions[-1]))
    return messages


# ------------------------------------------------------------- the baselines' formats
#: The tools an env family shows its agents, in instruction order, by dataset name (for
#: families whose datasets differ in tools, e.g. WebShop and Mind2Web) or by task type, from
#: the env families' records (``tools`` of :class:`lumos_gym.envs.families.Family`).
TOOL_LISTS: Registry[Sequence[str]] = Registry("tool list")
fill_from_families(TOOL_LISTS, lambda family: family.tools.items())


def tool_specs_for(task_type: str, dataset: str | None = None) -> list[ToolSpec]:
    """Return the tool specs an env of ``task_type`` shows its agents, in instruction order.

    A tool list registered under the ``dataset`` name wins over the task type's.
    """
    key = dataset if dataset is not None and dataset in TOOL_LISTS else task_type
    if key not in TOOL_LISTS:
        raise AnnotationError(f"no tool list for task type {task_type!r}")
    return [TOOLS.get(name).spec for name in TOOL_LISTS.get(key)]


def _specs(annotation: Annotation) -> list[ToolSpec]:
    return tool_specs_for(annotation.task_type, annotation.dataset)


def _terminal_spec(annotation: Annotation) -> ToolSpec:
    """The terminal action an env of the annotation's type shows (``Stop`` for web, games)."""
    return STOP_SPEC if annotation.task_type in ENV_ENDED_TYPES else ANSWER_SPEC


def integrated(annotation: Annotation) -> Messages:
    """Return the integrated agent's conversation: each subgoal with its actions in one turn."""
    plan = plan_iterative(annotation)
    output_name = f"R{_highest_r(annotation) + 1}"
    first = prompts.integrated_first_turn(annotation.task, _specs(annotation))
    messages = [_user(first)]
    for k, subgoal in enumerate(annotation.subgoals, 1):
        actions = "; ".join(_action_text(a, output_name) for a in subgoal.actions)
        turn = prompts.plan_turn(k, subgoal.line) + "\n" + prompts.INTEGRATED_ACTIONS + actions
        messages += [_assistant(turn), plan[2 * k]]
    messages.append(_assistant(prompts.STOP_PLANNING))
    return messages


def _observation(item: AnnotatedAction, output_name: str) -> str:
    action = _renamed(item.action, output_name)
    if action.result is None:  # web and game actions are annotated without their result
        return f"{', '.join(action.outputs)} = executed" if action.outputs else "executed"
    value = prompts.clean_result(action.result)
    return f"{', '.join(action.outputs)} = {value}" if action.outputs else value


def react(annotation: Annotation) -> Messages:
    """Return the ReAct conversation: a thought and actions per subgoal, then ``Answer``."""
    _check_actions(annotation)
    output_name = f"R{_highest_r(annotation) + 1}"
    specs = [*_specs(annotation), _terminal_spec(annotation)]
    messages = [_user(prompts.react_first_turn(annotation.task, specs))]
    outputs: list[str] = []
    for k, subgoal in enumerate(annotation.subgoals, 1):
        actions = "; ".join(_action_text(a, output_name) for a in subgoal.actions)
        messages.append(_assistant(f"Thought: {subgoal.text}\nAction: {actions}"))
        if k == len(annotation.subgoals) and annotation.task_type in ENV_ENDED_TYPES:
            return messages  # the environment ended the episode with this subgoal's actions
        observation = "\n".join(_observation(a, output_name) for a in subgoal.actions)
        messages.append(_user(prompts.react_observation(observation)))
        outputs += [v for a in subgoal.actions for v in _renamed(a.action, output_name).outputs]
    final = last_variable(outputs) or annotation.answer or ""
    messages.append(_assistant(f"Thought: I have the final answer.\nAction: Answer({final})"))
    return messages


def _reasoning(annotation: Annotation) -> str:
    """The gold reasoning text: the source rationale without calculator marks or ``####``."""
    rationale = annotation.meta.get("rationale")
    if rationale:
        lines = [ln for ln in str(rationale).splitlines() if not ln.startswith("####")]
        return " ".join(strip_calc_marks(" ".join(lines)).split())
    parts = []
    for subgoal in annotation.subgoals:
        value = prompts.clean_result(subgoal.actions[-1].action.result or "")
        parts.append(f"{subgoal.text.rstrip('.')}: {value}." if value else subgoal.text)
    return " ".join(parts)


def _answer(annotation: Annotation) -> str:
    if annotation.answer is None:
        raise AnnotationError("the annotation has no final answer")
    return annotation.answer


def cot(annotation: Annotation) -> Messages:
    """Return Lumos' CoT training pair: ``<reasoning> Answer is <answer>.``."""
    answer = _answer(annotation)
    _check_actions(annotation)
    return [_user(annotation.task), _assistant(f"{_reasoning(annotation)} Answer is {answer}.")]


def direct(annotation: Annotation) -> Messages:
    """Return Lumos' direct training pair: the task, then the answer."""
    return [_user(annotation.task), _assistant(_answer(annotation))]


#: The export formats by name: the four Lumos module formats and the baselines'.
FORMATS: dict[str, Callable[[Annotation], Messages]] = {
    "plan-onetime": plan_onetime,
    "plan-iterative": plan_iterative,
    "ground-onetime": ground_onetime,
    "ground-iterative": ground_iterative,
    "integrated": integrated,
    "react": react,
    "cot": cot,
    "direct": direct,
}


@dataclass(frozen=True)
class Rejected:
    """An annotation an export could not use, and why."""

    id: str
    reason: str


def export_records(
    annotations: Iterable[Annotation], fmt: str, *, dataset: str | None = None
) -> Iterator[dict[str, Any] | Rejected]:
    """Yield one training record per annotation in format ``fmt``, or a :class:`Rejected`.

    Args:
        annotations: the annotations, in order (record ids count the exported ones).
        fmt: one of :data:`FORMATS`.
        dataset: the ``dataset`` field (and id prefix); by default each annotation's domain
            (``unified`` for Lumos-I_All-style mixed files).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    build = FORMATS[fmt]
    counts: dict[str, int] = {}
    for annotation in annotations:
        try:
            messages = build(annotation)
        except (AnnotationError, ActionParseError, RegistryError) as e:
            yield Rejected(annotation.id, str(e))
            continue
        name = dataset or domain_of(annotation)
        index = counts.get(name, 0)
        counts[name] = index + 1
        yield {"dataset": name, "id": f"{name}_{index}", "messages": messages}


def record_bytes(record: Mapping[str, Any]) -> str:
    """Return a record as one JSON line, as the original files store them."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_records(records: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write training records as JSON lines, atomically (a reader never sees half a file)."""
    count = 0
    with atomic_writer(path) as f:
        for record in records:
            f.write(record_bytes(record))
            count += 1
    return count


def save_hf_dataset(records: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Save training records as a Hugging Face ``datasets`` folder (``load_from_disk``).

    Needs the ``hub`` extra (``pip install 'lumos-gym[hub]'``); ``Dataset.push_to_hub`` on the
    result publishes it.
    """
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise AnnotationError(
            "the HF datasets output needs the hub extra: pip install 'lumos-gym[hub]'"
        ) from e
    rows = [dict(r) for r in records]
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return len(rows)
