"""Sampled episodes → verified annotations → training records (expert iteration).

Expert iteration (rejection-sampling fine-tuning) trains a model on its own episodes that
scored well. :func:`annotations_from_episodes` turns the episode records of a results folder
into unified annotations, so that every export format (:data:`~.exports.FORMATS`) can be
written from them exactly as from converted rationales:

1. an episode is kept for conversion when it completed with ``reward >= min_reward``;
2. its plan is read from its turns: each subgoal the planner (Lumos-I) or the policy
   (integrated) wrote, paired with the action text the env executed for it (the closing
   ``Answer``/``Stop`` is not a subgoal); other agents are refused (``unsupported``);
3. the plan is replayed in the episode's own env (its id and arguments: the same tools and
   tool models, so the same values): a step that observes ``Error:`` rejects it; each action
   gets its computed value as its annotation tail (``R1 = Calculator(3*4) = 12``), and
   WebShop and game plans their executed results (:data:`~.exports.RESULTS_FIELD`), as
   replay verification records them; the replay must end with ``reward >= min_reward``;
4. with ``min_reward`` 1 (the default), the annotation then goes through replay verification
   itself (:func:`~.verify.replay`), the check every converted annotation passes;
5. an annotation whose plan (task and subgoal plan text) was seen before is a duplicate.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from lumos_gym import prompts
from lumos_gym.actions import Action, format_action, last_variable, parse_actions
from lumos_gym.agents.lumos import executed_result
from lumos_gym.conversion.annotation import (
    AnnotatedAction,
    Annotation,
    Subgoal,
    format_subgoal_plan,
)
from lumos_gym.conversion.exports import RESULTS_FIELD, Rejected, quotes_results
from lumos_gym.conversion.verify import ReplayFailure, replay
from lumos_gym.envs.replay import Replay
from lumos_gym.errors import LumosGymError

#: The agents whose episodes hold a subgoal plan, and the role that writes its subgoals.
PLAN_ROLES = {"lumos-i": "planner", "integrated": "policy"}

_SUBGOAL_LINE = re.compile(r"Subgoal \d+: (.*)\Z", re.DOTALL)

#: The report ``lumos-gym export --from-results`` writes beside its records: the results
#: folders, their agent and envs, the reward threshold and the counts.
EXPORT_REPORT = "export.json"


@dataclass
class EpisodeConversion:
    """What :func:`annotations_from_episodes` made of a set of episodes.

    Attributes:
        kept: the annotations, in episode order.
        rejected: the episodes it could not use, each with its key and ``"<kind>: ..."``.
        seen: the episodes read.
        below: episodes that did not complete with ``reward >= min_reward``.
        duplicates: annotations dropped because an earlier one had the same plan.
    """

    kept: list[Annotation] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    seen: int = 0
    below: int = 0
    duplicates: int = 0

    def reasons(self) -> dict[str, int]:
        """The number of rejections of each kind."""
        return dict(Counter(r.reason.split(":", 1)[0] for r in self.rejected).most_common())


def episode_plan(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Return the ``(subgoal text, executed action text)`` pairs of a Lumos-I or integrated episode.

    Raises:
        ReplayFailure: ``unsupported`` for another agent, ``no-plan`` for an episode that
            executed no subgoal.
    """
    role = PLAN_ROLES.get(str(record.get("agent")))
    if role is None:
        raise ReplayFailure("unsupported", f"episodes of agent {record.get('agent')!r} hold no "
                            f"subgoal plan (only {', '.join(PLAN_ROLES)})")
    plan: list[tuple[str, str]] = []
    pending: str | None = None
    for turn in record.get("turns") or []:
        if turn.get("role") == role:
            output = str(turn.get("output", "")).strip()
            if role == "policy":
                line, _ = prompts.split_integrated(output)
            else:
                line = "" if prompts.is_stop(output) else prompts.subgoal_of(output)
            match = _SUBGOAL_LINE.match(line.strip())
            pending = match.group(1).strip() if match else None
        elif "action" in turn and pending is not None:
            plan.append((pending, str(turn["action"])))
            pending = None
    if not plan:
        raise ReplayFailure("no-plan", "the episode executed no subgoal")
    return plan


def _with_tails(actions: Sequence[Action], variables: Mapping[str, Any]) -> list[str]:
    """Each action as an annotation line, its outputs' computed values as its tail."""
    lines = []
    for action in actions:
        values = [variables.get(v) for v in action.outputs]
        tail = ", ".join(str(v) for v in values) if values and None not in values else None
        lines.append(format_action(Action(action.outputs, action.name, action.args, tail)))
    return lines


def replay_plan(
    env: Any, record: Mapping[str, Any], plan: Sequence[tuple[str, str]], min_reward: float
) -> Annotation:
    """Replay an episode's plan in ``env`` and return it as an annotation (see the module doc).

    Raises:
        ReplayFailure: an action that does not parse, an ``Error:`` observation, or a replay
            that ends below ``min_reward``.
    """
    episode = Replay(env, str(record["task_id"]))
    subgoals, results, outputs = [], [], []
    step = None
    for k, (text, action_text) in enumerate(plan, 1):
        try:
            actions = parse_actions(action_text)
        except LumosGymError as e:
            raise ReplayFailure("bad-action", f"subgoal {k}: {e}") from e
        step = episode.step(action_text)
        if "Error:" in step.observation:
            raise ReplayFailure("error", f"subgoal {k}: {step.observation.strip()[:200]}")
        lines = _with_tails(actions, step.variables)
        subgoals.append(Subgoal(text, tuple(AnnotatedAction(line, f"Action {k}-{j}")
                                            for j, line in enumerate(lines, 1)), f"Subgoal {k}"))
        results.append(executed_result(step.action, step))
        outputs += [v for a in actions for v in a.outputs]
        if step.ended and k < len(plan):
            raise ReplayFailure("error", f"subgoal {k}: the episode ended before the plan did")
    if step is not None and not step.ended and env.ends_by_answer:
        final = last_variable(outputs)
        step = episode.step(f"Answer({final})" if final else "Answer()")
    reward = step.reward if step is not None and step.terminated else 0.0
    if reward < min_reward:
        raise ReplayFailure("wrong-answer", f"the replay ends with reward {reward:.3f}")
    base = env.unwrapped if hasattr(env, "unwrapped") else env
    meta: dict[str, Any] = {"source": "episode", "episode": record.get("key"),
                            "reward": record.get("reward"), "env_id": record.get("env_id")}
    annotation = Annotation(
        id=str(record["task_id"]), dataset=str(getattr(base, "dataset", record["env_id"])),
        task_type=str(record.get("task_type") or getattr(base, "task_type", "")),
        task=str(record.get("task", "")), subgoals=tuple(subgoals),
        answer=record.get("gold_answer"), meta=meta,
    )
    if quotes_results(annotation):
        annotation = dataclasses.replace(annotation, meta={**meta, RESULTS_FIELD: results})
    return annotation


def _env_for(record: Mapping[str, Any], cache: dict[str, Any]) -> Any:
    """The episode's env (its id and arguments), one per setting."""
    kwargs = dict(record.get("env_kwargs") or {})
    key = f"{record['env_id']}|{json.dumps(kwargs, sort_keys=True)}"
    if key not in cache:
        cache[key] = gym.make(record["env_id"], **kwargs).unwrapped
    return cache[key]


def _convert_one(
    record: Mapping[str, Any], envs: dict[str, Any], min_reward: float
) -> Annotation:
    plan = episode_plan(record)
    env = _env_for(record, envs)
    annotation = replay_plan(env, record, plan, min_reward)
    if min_reward >= 1.0:  # the check every converted annotation passes
        replay(env, annotation)
    return annotation


def annotations_from_episodes(
    records: Iterable[Mapping[str, Any]], *, min_reward: float = 1.0
) -> EpisodeConversion:
    """Turn episode records into verified, deduplicated annotations (see the module doc).

    Args:
        records: episode records, as ``episodes.jsonl`` holds them (with their ``key``).
        min_reward: the least reward an episode (and its replay) must reach.
    """
    report = EpisodeConversion()
    envs: dict[str, Any] = {}
    plans: set[tuple[str, str, str]] = set()
    try:
        for record in records:
            report.seen += 1
            key = str(record.get("key") or record.get("task_id"))
            if record.get("status") != "completed" or float(record.get("reward", 0)) < min_reward:
                report.below += 1
                continue
            try:
                annotation = _convert_one(record, envs, min_reward)
            except ReplayFailure as e:
                report.rejected.append(Rejected(key, str(e)))
                continue
            except (LumosGymError, ValueError, KeyError) as e:  # one bad episode: not the run
                report.rejected.append(Rejected(key, f"error: {type(e).__name__}: {e}"))
                continue
            signature = (annotation.dataset, annotation.task,
                         format_subgoal_plan(annotation.subgoals))
            if signature in plans:
                report.duplicates += 1
                continue
            plans.add(signature)
            report.kept.append(annotation)
    finally:
        for env in envs.values():
            env.close()
    return report


__all__ = [
    "EXPORT_REPORT",
    "PLAN_ROLES",
    "EpisodeConversion",
    "annotations_from_episodes",
    "episode_plan",
    "replay_plan",
]
