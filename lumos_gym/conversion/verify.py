"""Replay verification: keep an annotation only when its own actions solve its task.

Each annotation is replayed in the environment of its task type, built over the annotated task
(for math, :class:`~lumos_gym.envs.math.official.MathEnv` over ``Task(id, task, answer)``): one
``step`` per subgoal with the subgoal's actions, tails removed and ``"; "``-joined, then
``Answer(<Output or the highest R>)``. The annotation is kept when no step observes an
``Error:``, every action's computed value agrees with its annotation tail (numerically
tolerant), and the episode ends with reward 1.0. Otherwise it is rejected with a reason
``"<kind>: <details>"``, the kinds being:

* ``conversion`` / ``malformed``: the converter rejected the task (reasons passed through);
* ``unsupported``: no env is registered for the task type, or the annotation has no answer;
* ``duplicate-id``: an earlier annotation of the same dataset has this id;
* ``bad-action``: an action does not parse;
* ``error``: an observation holds ``Error:`` (a tool error, an undefined variable...);
* ``tail-mismatch``: an action's computed value differs from its annotation tail;
* ``no-answer``: the plan defines no ``R<n>`` or ``Output`` to answer with;
* ``wrong-answer``: the episode ended with a reward below 1.0.

A kept WebShop or game annotation also records what its replay executed: the result of each
subgoal's last action, one line as the Lumos-I agent quotes it at evaluation
(:func:`~lumos_gym.agents.lumos.executed_result`), in ``meta["subgoal_results"]``
(:data:`~lumos_gym.conversion.exports.RESULTS_FIELD`), for the planner feedback of the
``plan-iterative`` export. Other annotations are kept unchanged.

One env is built per dataset and task type and reset to each task by id, so verification costs
one env construction per dataset. A family names its replay env in its record
(``verify_env``); :func:`register_env_factory` adds or replaces one by hand.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.actions import Action, format_action, last_variable, split_list
from lumos_gym.agents.lumos import executed_result
from lumos_gym.conversion.annotation import Annotation
from lumos_gym.conversion.exports import RESULTS_FIELD, Rejected, quotes_results
from lumos_gym.envs.base import LumosEnv
from lumos_gym.envs.registration import fill_from_families
from lumos_gym.envs.replay import Replay
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError
from lumos_gym.registry import Registry
from lumos_gym.scoring.answers import answers_match, to_fraction

__all__ = [
    "ENV_FACTORIES",
    "EnvFactory",
    "ReplayFailure",
    "annotation_reference",
    "VerificationReport",
    "register_env_factory",
    "replay",
    "task_of",
    "values_agree",
    "verify_annotations",
]

#: Builds an env over the given tasks of one dataset: ``factory(tasks, dataset)``.
EnvFactory = Callable[[Sequence[Task], str], LumosEnv]

#: The env factory of each task type, from the env families' records (``verify_env`` of
#: :class:`lumos_gym.envs.families.Family`) and :func:`register_env_factory`.
ENV_FACTORIES: Registry[EnvFactory] = Registry("verification env factory")
fill_from_families(
    ENV_FACTORIES,
    lambda family: [(family.task_type, family.verify_env)] if family.verify_env else [],
)


def register_env_factory(task_type: str, factory: EnvFactory, *, overwrite: bool = False) -> None:
    """Register the env used to replay annotations of ``task_type``.

    Args:
        task_type: a task type (``math``, ``qa``...).
        factory: ``factory(tasks, dataset)`` returning an env whose ``reset`` accepts
            ``options={"task_id": ...}`` for each of ``tasks``.
        overwrite: replace an existing factory.
    """
    ENV_FACTORIES.register(task_type, factory, overwrite=overwrite)


# ---------------------------------------------------------------------------------------------
# The report


@dataclass
class VerificationReport:
    """The outcome of :func:`verify_annotations`.

    Attributes:
        kept: the verified annotations, in input order.
        rejected: the rejected items (id and ``"<kind>: <details>"`` reason), in input order.
        totals: the number of items seen per dataset.
        kept_counts: the number of kept annotations per dataset.
    """

    kept: list[Annotation] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    totals: Counter[str] = field(default_factory=Counter)
    kept_counts: Counter[str] = field(default_factory=Counter)

    def yields(self) -> dict[str, float]:
        """Return the kept fraction per dataset, datasets sorted by name."""
        return {name: self.kept_counts[name] / n for name, n in sorted(self.totals.items()) if n}

    @property
    def yield_rate(self) -> float:
        """The kept fraction over every dataset (0.0 when nothing was verified)."""
        total = sum(self.totals.values())
        return len(self.kept) / total if total else 0.0

    def reason_counts(self) -> dict[str, int]:
        """Return the number of rejections of each kind, most frequent first (ties by name)."""
        counts = Counter(_kind(r.reason) for r in self.rejected)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def format_report(self, *, examples: int = 3) -> str:
        """Return the report as text: yield per dataset, rejection kinds, a few examples each.

        Args:
            examples: how many rejections to quote per kind.
        """
        lines = ["Replay verification"]
        width = max((len(name) for name in self.totals), default=7)
        for name, rate in self.yields().items():
            kept, total = self.kept_counts[name], self.totals[name]
            lines.append(f"  {name:<{width}}  {kept:>6} / {total:<6} kept  ({rate:.1%})")
        total = sum(self.totals.values())
        lines.append(f"  {'all':<{width}}  {len(self.kept):>6} / {total:<6} kept  "
                     f"({self.yield_rate:.1%})")
        if self.rejected:
            lines.append("Rejections by kind")
            for kind, count in self.reason_counts().items():
                lines.append(f"  {kind}: {count}")
                quoted = [r for r in self.rejected if _kind(r.reason) == kind][:examples]
                lines.extend(f"    {r.id}: {r.reason}" for r in quoted)
        return "\n".join(lines)


def _kind(reason: str) -> str:
    head, sep, _ = reason.partition(":")
    return head if sep and " " not in head.strip() else "other"


def _dataset_of(item: Annotation | Rejected) -> str:
    if isinstance(item, Annotation):
        return item.dataset
    return item.id.partition("/")[0] if "/" in item.id else "unknown"


# ---------------------------------------------------------------------------------------------
# Replaying one annotation


class ReplayFailure(LumosGymError):
    """An annotation fails replay verification; the message is ``"<kind>: <details>"``.

    Args:
        kind: the kind of failure (see the module docstring).
        details: what failed, where.
    """

    def __init__(self, kind: str, details: str) -> None:
        super().__init__(f"{kind}: {details}")


def task_of(annotation: Annotation) -> Task:
    """Return the env task of an annotation: its id, task text, answer and task type."""
    return Task(
        id=annotation.id,
        question=annotation.task,
        answer=annotation.answer or "",
        task_type=annotation.task_type,
        meta={"dataset": annotation.dataset},
    )


def _decimals(text: str) -> int | None:
    match = re.fullmatch(r"\s*[-+]?\$?[\d,]*(?:\.(\d+))?\s*", text)
    return None if match is None else len(match.group(1) or "")


def values_agree(computed: str, written: str) -> bool:
    """Say whether a computed value agrees with an annotation tail.

    They agree when :func:`~lumos_gym.scoring.answers.answers_match` says so (relative tolerance
    1e-6), or when the tail is the computed number rounded to the tail's own decimals (GSM8K
    writes ``<<20/6=3.33>>``).

    Args:
        computed: the value the tool produced.
        written: the tail written in the annotation.
    """
    if answers_match(computed, written, rel_tol=1e-6):
        return True
    places = _decimals(written)
    exact, tail = to_fraction(computed), to_fraction(written)
    if places is None or exact is None or tail is None:
        return False
    return abs(exact - tail) <= 10 ** (-places) / 2 * (1 + 1e-9)


_PAGE_TAIL = re.compile(r"WikipediaPage\((.*)\)\Z")
_PARAGRAPH_TAIL = re.compile(r"Paragraph\(.*\)\Z")


def _page_titles(value: str) -> list[str]:
    """The page titles of a ``KnowledgeQuery`` value (lines ``"{title} *** {passage}"``)."""
    return [line.split(" *** ", 1)[0].strip() for line in value.splitlines() if " *** " in line]


def _check_tail(item: Action, label: str, variables: dict[str, str]) -> None:
    if item.result is None or not item.outputs:
        return
    written = item.result.strip().rstrip(".").strip()
    if _PARAGRAPH_TAIL.match(written):
        return  # a passage id of the original corpus: nothing here to compare it with
    page = _PAGE_TAIL.match(written)
    if page is not None and len(item.outputs) == 1:
        titles = _page_titles(variables.get(item.outputs[0]) or "")
        if page.group(1).strip().lower() not in {t.lower() for t in titles}:
            raise ReplayFailure(
                "tail-mismatch",
                f"{label}: the page {page.group(1)!r} is not among the retrieved pages {titles}",
            )
        return
    parts = split_list(written) if len(item.outputs) > 1 else [written]
    if len(parts) != len(item.outputs):
        raise ReplayFailure(
            "tail-mismatch", f"{label}: {len(item.outputs)} outputs, tail {written!r}"
        )
    for var, part in zip(item.outputs, parts, strict=True):
        value = variables.get(var)
        if value is None or not values_agree(value, part):
            raise ReplayFailure(
                "tail-mismatch", f"{label}: {var} computes {value!r}, the annotation says {part!r}"
            )


def _parse(annotation: Annotation) -> list[list[tuple[str, Action]]]:
    plan = []
    for k, subgoal in enumerate(annotation.subgoals, 1):
        actions = []
        for j, item in enumerate(subgoal.actions, 1):
            label = item.label or f"Action {k}-{j}"
            try:
                actions.append((label, item.action))
            except LumosGymError as e:
                raise ReplayFailure("bad-action", f"{label}: {e}") from e
        plan.append(actions)
    return plan


def annotation_reference(annotation: Annotation) -> dict[str, Any]:
    """Return the gold facts an annotation states for reference tool backends.

    Each ``QA`` action with a question and a tail (``R3 = QA([R2], Question: q) = 3``) gives
    ``sub_answers[q] = "3"``: in a replay, the reference ``QA`` backend answers ``q`` with the
    annotation's own answer, but only when the evidence retrieved by the replay holds it, so the
    replay checks the retrieval and the chain of variables, and the final answer is scored
    against the dataset's gold answer. ``VQA`` actions give ``vqa_answers`` the same way (for
    the reference ``VQA`` backend). Facts known to the task itself take precedence.
    """
    found: dict[str, dict[str, str]] = {"QA": {}, "VQA": {}}
    for subgoal in annotation.subgoals:
        for item in subgoal.actions:
            try:
                action = item.action
            except LumosGymError:
                continue
            if action.name not in found or action.result is None:
                continue
            arguments = action.arguments()
            question = arguments.get("Question") or arguments.get("Query")
            if question is None and len(arguments.positional) > 1:
                question = ", ".join(arguments.positional[1:])
            tail = action.result.strip().rstrip(".").strip()
            if question and tail:
                found[action.name].setdefault(question.strip(), tail)
    keys = {"QA": "sub_answers", "VQA": "vqa_answers"}
    return {keys[name]: answers for name, answers in found.items() if answers}


def replay(env: LumosEnv, annotation: Annotation) -> list[str]:
    """Replay one annotation in ``env`` (which must hold its task); return when it verifies.

    Args:
        env: an env built over the annotation's task (see :func:`task_of`).
        annotation: the annotation.

    Returns:
        The executed result of each subgoal's last action, one line as the Lumos-I agent
        quotes it (:func:`~lumos_gym.agents.lumos.executed_result`; ``""`` for a subgoal
        without actions).

    Raises:
        ReplayFailure: the annotation fails; the message is the rejection reason.
    """
    plan = _parse(annotation)
    episode = Replay(env, annotation.id, reference=annotation_reference(annotation))
    grounded = [(k, actions) for k, actions in enumerate(plan, 1) if actions]
    texts = ("; ".join(format_action(a, with_result=False) for _, a in actions)
             for _, actions in grounded)
    outputs: list[str] = []
    results = [""] * len(plan)  # a subgoal without actions keeps ""
    env_ended = not env.ends_by_answer
    for (k, actions), step in zip(grounded, episode.play(texts), strict=False):
        if "Error:" in step.observation:
            line = next(x for x in step.observation.splitlines() if "Error:" in x)
            raise ReplayFailure("error", f"subgoal {k}: {line.strip()}")
        results[k - 1] = executed_result(step.action, step)
        if env_ended and step.terminated and k == len(plan):
            if step.reward < 1.0:  # web and game episodes end by the env: a purchase, a win
                raise ReplayFailure(
                    "wrong-answer", f"the episode ended with reward {step.reward:.3f}, not 1"
                )
            return results
        if step.ended:
            raise ReplayFailure("error", f"subgoal {k}: the episode ended before the answer")
        variables = step.variables
        for label, action in actions:
            _check_tail(action, label, variables)
            outputs.extend(action.outputs)
    if env_ended:
        raise ReplayFailure("no-answer", "the plan ends before the environment ends the episode")
    final = last_variable(outputs)
    if final is None:
        raise ReplayFailure("no-answer", "the plan defines no R<n> or Output to answer with")
    answered = episode.step(f"Answer({final})")
    if "Error:" in answered.observation:
        raise ReplayFailure("error", f"answer: {answered.observation.strip()}")
    if not answered.terminated or answered.reward != 1.0:
        prediction = answered.info.get("prediction")
        raise ReplayFailure(
            "wrong-answer",
            f"Answer({final}) gives {prediction!r}, the gold answer is {annotation.answer!r}",
        )
    return results


# ---------------------------------------------------------------------------------------------
# Verifying many


def _precheck(item: Annotation, seen: set[tuple[str, str]], *, known: bool) -> str | None:
    """The reason an annotation cannot be replayed at all, or ``None``."""
    if not known and item.task_type not in ENV_FACTORIES:
        return f"unsupported: no env to replay task type {item.task_type!r}"
    if not item.answer or not item.answer.strip():
        return "unsupported: the annotation has no answer"
    if (item.dataset, item.id) in seen:
        return "duplicate-id: an earlier annotation of the dataset has this id"
    seen.add((item.dataset, item.id))
    return None


def verify_annotations(
    items: Iterable[Annotation | Rejected], *, env_factory: EnvFactory | None = None
) -> VerificationReport:
    """Replay each annotation in its env and keep those that verify.

    Args:
        items: annotations, and rejections passed through from a converter (they count in the
            yield of their dataset, taken from the id's prefix, ``gsm8k/train/3`` → ``gsm8k``).
        env_factory: builds the replay env instead of :data:`ENV_FACTORIES` (``convert_env``
            passes the env the tasks came from, built with its ``replay_options``, so that
            tasks keep their documents, corpora and gold facts).

    Returns:
        The report; ``kept`` and ``rejected`` follow the input order. Kept WebShop and game
        annotations carry their replay's results in ``meta["subgoal_results"]``.
    """
    items = list(items)
    outcomes: dict[int, str | None] = {}
    recorded: dict[int, Annotation] = {}
    groups: dict[tuple[str, str], list[int]] = {}
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(items):
        if isinstance(item, Rejected):
            outcomes[index] = item.reason
            continue
        reason = _precheck(item, seen, known=env_factory is not None)
        if reason is not None:
            outcomes[index] = reason
        else:
            groups.setdefault((item.task_type, item.dataset), []).append(index)
    for (task_type, dataset), indices in groups.items():
        annotations = [items[i] for i in indices]
        factory = env_factory or ENV_FACTORIES.get(task_type)
        env = factory([task_of(a) for a in annotations], dataset)
        try:
            for index, annotation in zip(indices, annotations, strict=True):
                outcomes[index], results = _verdict(env, annotation)
                if results is not None and quotes_results(annotation):
                    meta = {**annotation.meta, RESULTS_FIELD: results}
                    recorded[index] = dataclasses.replace(annotation, meta=meta)
        finally:
            env.close()
    report = VerificationReport()
    for index, item in enumerate(items):
        dataset = _dataset_of(item)
        report.totals[dataset] += 1
        reason = outcomes[index]
        if reason is None and isinstance(item, Annotation):
            report.kept.append(recorded.get(index, item))
            report.kept_counts[dataset] += 1
        else:
            report.rejected.append(Rejected(item.id, reason or "other: not verified"))
    return report


def _verdict(env: LumosEnv, annotation: Annotation) -> tuple[str | None, list[str] | None]:
    """The rejection reason (None when it verifies) and the replay's results."""
    try:
        results = replay(env, annotation)
    except ReplayFailure as e:
        return str(e), None
    except (LumosGymError, ValueError) as e:  # a bad annotation must not stop the run
        return f"error: {type(e).__name__}: {e}", None
    return None, results
