"""Rule-based converters: a dataset's gold rationale into a unified :class:`Annotation`.

The original Lumos asked GPT-4 to rewrite each rationale (docs/lumos-format.md §1.2); for math
datasets whose rationales already hold every calculation, the same annotation can be written by
rules, offline and deterministically:

* ``gsm8k``: each sentence of the solution holding ``<<expr=value>>`` marks becomes a subgoal
  (``Calculate how many passengers the full buses carry``, written from the sentence), each mark
  a ``Calculator`` action whose formula names earlier results as ``R<n>``, with the tail
  ``= value``; sentences without marks are dropped; the answer is the ``####`` number.
* ``svamp``: the record's ``Equation`` as one ``Calculator`` action.
* ``asdiv``: each part of the ``Formula`` as a ``Calculator`` action; the answer is ASDiv's own,
  units included (``7 (ducks)``).
* ``mathword``: the generator's gold steps (``meta["steps"]``), one subgoal each.

When the final answer is the value of an earlier calculation than the last, the plan ends with
the alias ``Output = R<k> = value`` (the Lumos convention for a final variable).

Each converter takes a :class:`~lumos_gym.envs.tasks.Task` and returns an annotation or raises
:class:`ConversionError`; :func:`convert_tasks` maps converters over tasks and yields a
:class:`~lumos_gym.conversion.exports.Rejected` for each task that cannot be converted, so bad
input never stops a run. Nothing here is random or depends on dict order: the same tasks give
the same annotations, byte for byte.

The converters' text helpers are in :mod:`~lumos_gym.conversion.math_formulas` (numbers,
formulas, exact values, ASDiv's formula parts) and :mod:`~lumos_gym.conversion.math_subgoals`
(subgoals phrased from questions and sentences); their public names are importable from here too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lumos_gym.conversion.annotation import Annotation, AnnotationError, make_subgoals
from lumos_gym.conversion.exports import Rejected
from lumos_gym.conversion.math_formulas import (
    _REL_TOL,
    _tidy_formula,
    asdiv_calculations,
    exact_value,
    problem_numbers,
    substitute_results,
    unmarked_formulas,
)
from lumos_gym.conversion.math_subgoals import question_subgoal, sentence_subgoal
from lumos_gym.envs.math.data import (
    _gsm8k_steps,
    _is_infix_arithmetic,
    calculator_expression,
    parse_asdiv_answer,
    parse_calc_marks,
)
from lumos_gym.envs.math.official import MathEnv
from lumos_gym.envs.registration import families, fill_from_families
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import LumosGymError, RegistryError
from lumos_gym.registry import Registry, import_object
from lumos_gym.scoring.answers import answers_match, to_fraction

if TYPE_CHECKING:
    from lumos_gym.envs.base import LumosEnv

__all__ = [
    "CONVERTERS",
    "ConversionError",
    "Converter",
    "asdiv_annotation",
    "asdiv_calculations",
    "exact_value",
    "convert_task",
    "convert_tasks",
    "gsm8k_annotation",
    "math_env_factory",
    "mathword_annotation",
    "module_converters",
    "problem_numbers",
    "question_subgoal",
    "sentence_subgoal",
    "substitute_results",
    "svamp_annotation",
    "unmarked_formulas",
]



class ConversionError(AnnotationError):
    """A task cannot be converted to an annotation by rules; the message says why."""


Converter = Callable[[Task], Annotation]

#: The rule-based converter of each dataset name, from the env families' records
#: (``converters`` of :class:`lumos_gym.envs.families.Family`).
CONVERTERS: Registry[Converter] = Registry("converter")
#: Evaluation-only datasets (a family's converter ``None``): their files hold questions and
#: answers, nothing to convert.
_NO_RATIONALES: list[str] = []

Plan = list[tuple[str, list[str]]]

# ---------------------------------------------------------------------------------------------
# Shared helpers


def _value_text(value: str) -> str:
    """A mark's value as a tail: stripped, no ``$``, no trailing ``.``."""
    return value.replace("$", "").strip().rstrip(".").strip()


def _check_number(value: str | None, where: str) -> str:
    if value is None or not value.strip():
        raise ConversionError(f"{where} has no value (expected <<expr=value>>)")
    text = _value_text(value)
    if to_fraction(text) is None:
        raise ConversionError(f"{where} has the value {value!r}, which is not a number")
    return text


def _calculator_plan(
    steps: Sequence[tuple[str, Sequence[tuple[str, str]]]], answer: str, question: str, where: str
) -> Plan:
    """Build the plan of ``(subgoal, [(expr, value), ...])`` steps ending at ``answer``.

    Formulas name earlier results (:func:`substitute_results`); when the answer is not the last
    value but an earlier one, the last subgoal ends with ``Output = R<k> = value``.
    """
    plan: Plan = []
    results: list[tuple[str, str]] = []
    given = problem_numbers(question)
    consumed: set[str] = set()
    for subgoal, calcs in steps:
        actions = []
        for expr, value in calcs:
            var = f"R{len(results) + 1}"
            formula = substitute_results(expr, results, given=given, consumed=consumed)
            consumed.update(re.findall(r"\bR\d+\b", formula))
            actions.append(f"{var} = Calculator({formula}) = {value}")
            results.append((var, value))
        plan.append((subgoal, actions))
    if not results:
        raise ConversionError(f"{where}: no calculation to convert")
    if not answers_match(results[-1][1], answer, rel_tol=_REL_TOL):
        earlier = [var for var, value in results if answers_match(value, answer, rel_tol=_REL_TOL)]
        if earlier:
            var = earlier[-1]
            plan[-1][1].append(f"Output = {var} = {dict(results)[var]}")
            return plan
        rounding = _rounding_step(results, answer)
        if rounding is None:
            values = ", ".join(value for _, value in results)
            raise ConversionError(
                f"{where}: the final answer {answer!r} is the value of no calculation ({values})"
            )
        plan.append(rounding)
    return plan


_ROUNDINGS = (("floor", math.floor, "down"), ("ceil", math.ceil, "up"), ("round", round, ""))


def _rounding_step(results: Sequence[tuple[str, str]], answer: str) -> tuple[str, list[str]] | None:
    """Return a last subgoal rounding a result to a whole-number answer, when one does.

    Word problems often answer with a whole number that the solution rounds silently (``20/6 =
    3.33``, so 3 full boxes); the latest result that rounds to the answer is used, with
    ``floor``, then ``ceil``, then ``round``.
    """
    target = to_fraction(answer)
    if target is None or target.denominator != 1:
        return None
    for var, value in reversed(results):
        number = to_fraction(value)
        if number is None or number.denominator == 1:
            continue
        for name, fn, how in _ROUNDINGS:
            if fn(number) == target:
                subgoal = f"Round the result {how} to a whole number.".replace("  ", " ")
                return subgoal, [f"R{len(results) + 1} = Calculator({name}({var})) = {answer}"]
    return None


def _annotation(task: Task, dataset: str, plan: Plan, answer: str, **meta: Any) -> Annotation:
    return Annotation(
        id=task.id,
        dataset=dataset,
        task_type="math",
        task=task.question,
        subgoals=make_subgoals(plan),
        answer=answer,
        meta={"converter": f"rules/{dataset}", **meta},
    )


def _require_text(task: Task) -> None:
    if not isinstance(task.question, str) or not task.question.strip():
        raise ConversionError("the task has no question text")
    if not isinstance(task.answer, str) or not task.answer.strip():
        raise ConversionError("the task has no gold answer")


# ---------------------------------------------------------------------------------------------
# GSM8K

# A sentence ends at . ! ? followed by a space and a capital letter or a quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def _sentences(line: str) -> list[str]:
    """Split a line into sentences, never inside a ``<<...>>`` mark."""
    masked = re.sub(r"<<.*?>>", lambda m: "\0" * len(m.group(0)), line)
    out, start = [], 0
    for m in _SENTENCE_END.finditer(masked):
        out.append(line[start : m.start()])
        start = m.end()
    out.append(line[start:])
    return [s.strip() for s in out if s.strip()]


def _gsm8k_marks(text: str, where: str) -> list[tuple[str, str]]:
    calcs = []
    for n, mark in enumerate(parse_calc_marks(text), 1):
        label = f"{where}, mark {n} <<{mark.expr}={mark.value or ''}>>"
        value = _check_number(mark.value, label)
        expr = calculator_expression(mark.expr)
        if not _is_infix_arithmetic(expr):
            raise ConversionError(f"{label}: the formula is not plain arithmetic")
        calcs.append((" ".join(expr.split()), value))
    return calcs


def gsm8k_annotation(task: Task) -> Annotation:
    """Convert a GSM8K task (main or socratic rationale) by rules.

    Args:
        task: a task of :func:`~lumos_gym.envs.math.data.load_gsm8k` (its ``rationale`` is the
            solution before ``####``, its ``answer`` the ``####`` number).

    Returns:
        The annotation: one subgoal per sentence with marks (per line for the socratic format,
        phrased from its sub-question), one ``Calculator`` action per mark; a sentence without
        marks contributes its :func:`unmarked_formulas`.

    Raises:
        ConversionError: no rationale, no marks, a mark without a numeric value or with a
            formula that is not arithmetic, or a final answer that no mark computes.
    """
    _require_text(task)
    if not isinstance(task.rationale, str) or not task.rationale.strip():
        raise ConversionError("the task has no rationale to convert")
    rationale = task.rationale.split("####", 1)[0]
    steps: list[tuple[str, list[tuple[str, str]]]] = []
    for n, step in enumerate(_gsm8k_steps(rationale), 1):
        if step["subquestion"] is not None:
            calcs = _gsm8k_marks(step["text"], f"line {n}") or unmarked_formulas(step["text"])
            if calcs:
                steps.append((question_subgoal(step["subquestion"]), calcs))
            continue
        for m, sentence in enumerate(_sentences(step["text"]), 1):
            calcs = _gsm8k_marks(sentence, f"line {n}, sentence {m}") or unmarked_formulas(
                sentence
            )
            if calcs:
                steps.append((sentence_subgoal(sentence), calcs))
    if not steps:
        raise ConversionError("the rationale has no <<expr=value>> calculator marks")
    answer = task.answer.strip().replace(",", "")
    return _annotation(
        task, "gsm8k", _calculator_plan(steps, answer, task.question, "gsm8k"), answer
    )


# ---------------------------------------------------------------------------------------------
# SVAMP


def svamp_annotation(task: Task) -> Annotation:
    """Convert a SVAMP task: its ``Equation`` becomes one ``Calculator`` action.

    Args:
        task: a task of :func:`~lumos_gym.envs.math.data.load_svamp` (``meta["equation"]``).

    Returns:
        One subgoal phrased from the question part, with ``R1 = Calculator(<equation>) =
        <answer>``.

    Raises:
        ConversionError: no equation, or one that is not plain arithmetic.
    """
    _require_text(task)
    equation = task.meta.get("equation")
    if not isinstance(equation, str) or not equation.strip():
        raise ConversionError("the SVAMP record has no Equation")
    formula = _tidy_formula(equation)
    if not _is_infix_arithmetic(formula):
        raise ConversionError(f"the Equation {equation!r} is not plain arithmetic")
    part = task.meta.get("question_part")
    question = part if isinstance(part, str) and part.strip() else task.question
    answer = _check_number(task.answer, "the SVAMP answer")
    plan = _calculator_plan(
        [(question_subgoal(question), [(formula, answer)])], answer, "", "svamp"
    )
    return _annotation(task, "svamp", plan, answer, type=task.meta.get("type"))


# ---------------------------------------------------------------------------------------------
# ASDiv


def _asdiv_question_part(task: Task) -> str:
    raw = task.meta.get("raw")
    if isinstance(raw, dict):
        for key in ("Question", "question"):
            value = raw.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return task.question


def asdiv_annotation(task: Task) -> Annotation:
    """Convert an ASDiv task: each part of its ``Formula`` becomes a ``Calculator`` action.

    The annotation's answer is ASDiv's answer as written, units included (``7 (ducks)``); the
    units are also kept in ``meta["units"]``.

    Args:
        task: a task of :func:`~lumos_gym.envs.math.data.load_asdiv` (``meta["formula"]``).

    Returns:
        One subgoal phrased from the question part, one action per formula part.

    Raises:
        ConversionError: no formula, a formula part that :func:`asdiv_calculations` cannot
            read (algebra, comparisons), an answer that is not one number or ratio (lists,
            text), or a final answer that no part computes.
    """
    _require_text(task)
    formula = task.meta.get("formula")
    if not isinstance(formula, str) or not formula.strip():
        raise ConversionError("the ASDiv record has no Formula")
    raw = task.meta.get("raw")
    raw_answer = raw.get("Answer", raw.get("answer")) if isinstance(raw, dict) else None
    written = str(raw_answer).strip() if raw_answer is not None else task.answer
    parsed = parse_asdiv_answer(written)
    if parsed.kind not in ("number", "ratio"):
        raise ConversionError(f"the ASDiv answer {written!r} is a {parsed.kind}, not one number")
    calcs = asdiv_calculations(formula, parsed.text)
    if calcs is None:
        raise ConversionError(f"the Formula {formula!r} is not plain arithmetic")
    steps = [
        (question_subgoal(_asdiv_question_part(task)), [(_tidy_formula(e), v) for e, v in calcs])
    ]
    plan = _calculator_plan(steps, parsed.text, task.question, "asdiv")
    return _annotation(
        task,
        "asdiv",
        plan,
        written,
        units=list(parsed.units),
        solution_type=task.meta.get("solution_type"),
    )


# ---------------------------------------------------------------------------------------------
# MathWord


def mathword_annotation(task: Task) -> Annotation:
    """Convert a MathWord task from its generator's gold steps (``meta["steps"]``).

    Args:
        task: a task of :class:`~lumos_gym.envs.math.mathword.MathWordGenerator`.

    Returns:
        One subgoal per step (the generator's subgoal text), its action with the tail
        ``= value``.

    Raises:
        ConversionError: no steps, or a step without its subgoal, action or value.
    """
    _require_text(task)
    steps = task.meta.get("steps")
    if not isinstance(steps, list | tuple) or not steps:
        raise ConversionError("the MathWord task has no gold steps in meta['steps']")
    plan: Plan = []
    for n, step in enumerate(steps, 1):
        if not isinstance(step, dict) or not all(
            isinstance(step.get(k), str) and step[k].strip() for k in ("subgoal", "action", "value")
        ):
            raise ConversionError(f"step {n} lacks its subgoal, action or value")
        plan.append((step["subgoal"], [f"{step['action']} = {step['value']}"]))
    last = str(steps[-1]["value"])
    if not answers_match(last, task.answer, rel_tol=_REL_TOL):
        raise ConversionError(f"the last step's value {last!r} is not the answer {task.answer!r}")
    return _annotation(
        task, "mathword", plan, task.answer, level=task.meta.get("level"),
        templates=list(task.meta.get("templates") or []),
    )


def math_env_factory(tasks: Sequence[Task], dataset: str) -> LumosEnv:
    """Build the math env that replays annotations of ``dataset`` (for ``verify``)."""
    return MathEnv(dataset=dataset, tasks=tasks)


fill_from_families(
    CONVERTERS, lambda family: [(k, v) for k, v in family.converters.items() if v is not None]
)
fill_from_families(
    _NO_RATIONALES, lambda family: [k for k, v in family.converters.items() if v is None]
)


def module_converters(module: str) -> dict[str, Converter]:
    """Return the converters that the families' records name in ``module``, by dataset.

    A converter module calls this at its end for its own table (``QA_CONVERTERS`` of
    :mod:`lumos_gym.conversion.qa_rules`), so the records stay the one list of converters.
    """
    return {
        dataset: import_object(path)  # type: ignore[misc]
        for family in families()
        for dataset, path in family.converters.items()
        if path is not None and path.partition(":")[0] == module
    }


# ---------------------------------------------------------------------------------------------
# Running converters


def convert_task(task: Task, dataset: str) -> Annotation:
    """Convert one task with the converter registered for ``dataset``.

    Raises:
        RegistryError: no converter for ``dataset``.
        ConversionError: the task cannot be converted.
    """
    return CONVERTERS.get(dataset)(task)


_BAD_INPUT = (LumosGymError, ValueError, TypeError, KeyError, AttributeError, IndexError)


def _convert_one(converter: Converter, task: object, index: int) -> Annotation | Rejected:
    task_id = getattr(task, "id", None)
    task_id = str(task_id) if task_id is not None else f"#{index}"
    if not isinstance(task, Task):
        return Rejected(task_id, f"conversion: expected a Task, got {type(task).__name__}")
    try:
        return converter(task)
    except ConversionError as e:
        return Rejected(task_id, f"conversion: {e}")
    except _BAD_INPUT as e:  # malformed records must not stop the run
        return Rejected(task_id, f"malformed: {type(e).__name__}: {e}")


def convert_tasks(tasks: Iterable[Task], dataset: str) -> Iterator[Annotation | Rejected]:
    """Convert tasks by the rules of ``dataset``, yielding a :class:`Rejected` for each failure.

    Args:
        tasks: the tasks, in order.
        dataset: a name registered in :data:`CONVERTERS` (``gsm8k``, ``svamp``, ``asdiv``,
            ``mathword``).

    Returns:
        An iterator of annotations and rejections (``reason`` starts with ``conversion:`` or
        ``malformed:``), one per task, in order.

    Raises:
        RegistryError: an unknown dataset (raised at once, before any task is read).
    """
    if dataset in _NO_RATIONALES and dataset not in CONVERTERS:
        raise RegistryError(
            f"{dataset} has no rationales or gold decompositions to convert: it is an "
            "evaluation-only set (lumos-gym evaluate --env ...)"
        )
    converter = CONVERTERS.get(dataset)
    return (_convert_one(converter, task, i) for i, task in enumerate(tasks))
