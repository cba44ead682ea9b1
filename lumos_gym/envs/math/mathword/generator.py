"""MathWord's generator: starting quantities, problem assembly, the splits (see the package).

The step templates come from :mod:`.steps_arith` and :mod:`.steps_applied`, in that order;
the order of :data:`_TEMPLATES` is the order the generator shuffles them from.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction

from lumos_gym.envs.math.mathword.steps_applied import _APPLIED_TEMPLATES
from lumos_gym.envs.math.mathword.steps_arith import _ARITH_TEMPLATES
from lumos_gym.envs.math.mathword.story import (
    _BIG_BUYS,
    _ITEMS,
    _PEOPLE,
    _STARTS,
    _WORKPLACES,
    _Ctx,
    _evaluate,
    _fmt,
    _money,
    _Qty,
    _render,
    _Step,
    _TemplateSpec,
)
from lumos_gym.envs.tasks import Task

CATEGORIES = ("add", "sub", "mul", "div", "percent", "rate", "compare")
"""Every step category, in the order levels introduce them."""

LEVEL_CATEGORIES: dict[int, tuple[str, ...]] = {
    1: ("add", "sub"),
    2: ("add", "sub", "mul"),
    3: ("add", "sub", "mul", "div"),
    4: ("add", "sub", "mul", "div", "percent", "rate"),
    5: CATEGORIES,
}
"""The categories a step may use at each level."""

_TEST_BUCKETS = 5  # one problem in five belongs to the test split
_ATTEMPTS = 200
_SPLITS = ("train", "validation", "test")
VALIDATION_START = 1_000_000
"""The first generator index of the ``validation`` split (train walks start at 0)."""
VALIDATION_GUARD = 2_000
"""How many of the first train problems of a seed and level validation questions avoid."""


_TEMPLATES: list[_TemplateSpec] = [*_ARITH_TEMPLATES, *_APPLIED_TEMPLATES]


def template_names() -> dict[str, list[str]]:
    """Return the step template names of each category (for documentation and tests).

    Returns:
        ``{category: [template name, ...]}`` for every category in :data:`CATEGORIES`.
    """
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for spec in _TEMPLATES:
        out[spec.category].append(spec.name)
    return out


# ---------------------------------------------------------------------------------------------
# Starting quantities


def _start(c: _Ctx) -> tuple[str, _Qty]:
    p = c.rng.choice(_PEOPLE)
    c.used.append(p)
    kind = c.pick(("count", "count", "count", "cash", "cash", "cost", "cost", "hours"))
    lead = c.pick(_STARTS)
    if kind == "count":
        item = c.rng.choice(_ITEMS)
        a = c.randint(6, 60) if item.part is None else c.randint(2, 12)
        verb = c.pick((item.get[0], "has"))
        sentence = f"{lead if verb != 'has' else ''}{p.name} {verb} {a} {item.many}."
        qty = _Qty(Fraction(a), "count", str(a), p, (item.one, item.many), item,
                   what=f"the number of {item.many} {p.name} has")
    elif kind == "cash":
        a = c.randint(12, 200)
        sentence = c.pick((f"{p.name} has ${a} in {p.poss} wallet.",
                           f"{p.name} gets ${a} for {p.poss} birthday.",
                           f"{p.name} has saved ${a}."))
        qty = _Qty(Fraction(a), "cash", str(a), p, what=f"the money {p.name} has")
    elif kind == "cost":
        if c.rng.random() < 0.5:
            thing = c.pick(_BIG_BUYS)
            a = c.randint(4, 60) * 5
            sentence = f"{p.name} wants to buy a {thing} that costs ${a}."
            qty = _Qty(Fraction(a), "cost", str(a), p, what=f"the price of the {thing}",
                       purchase=True)
        else:
            a = Fraction(c.randint(24, 240), 2)
            sentence = c.pick((f"The bill for {p.owns} dinner is {_money(a)}.",
                               f"{p.name} orders food that costs {_money(a)}."))
            qty = _Qty(a, "cost", _fmt(a), p, what="the cost of the meal", meal=True)
    else:
        activity = c.pick(("work", "drive"))
        a = c.randint(2, 9)
        if activity == "work":
            place = c.pick(_WORKPLACES)
            sentence = f"{p.name} works {a} hours at the {place} on Saturday."
        else:
            place = ""
            sentence = f"{p.name} drives for {a} hours on Saturday."
        qty = _Qty(Fraction(a), "hours", str(a), p, activity=activity, place=place, daily=True,
                   what=f"the hours {p.name} spends on Saturday")
    return sentence, qty


# ---------------------------------------------------------------------------------------------
# Assembling a problem


@dataclass(frozen=True)
class _Problem:
    question: str
    answer: str
    rationale: str
    actions: tuple[str, ...]
    steps: tuple[dict[str, str], ...]
    categories: tuple[str, ...]
    templates: tuple[str, ...]


def _choose_step(c: _Ctx, q: _Qty, cats: tuple[str, ...], last: bool) -> _Step | None:
    specs = [
        s for s in _TEMPLATES
        if s.category in cats and q.kind in s.kinds and (last or not s.final_only)
    ]
    c.rng.shuffle(specs)
    for spec in specs:
        if spec.name in c.templates:
            continue  # one use of each template per problem keeps the story varied
        step = spec.fn(c, q, last)
        if step is not None:
            c.templates.add(spec.name)
            return replace(step, template=spec.name)
    return None


def _try_build(c: _Ctx, level: int) -> _Problem | None:
    sentence, q = _start(c)
    c.last = q.owner
    allowed = LEVEL_CATEGORIES[level]
    new = tuple(x for x in allowed if x not in LEVEL_CATEGORIES.get(level - 1, ()))
    force_at = c.rng.randrange(level)
    sentences, lines, actions, steps, cats, names = [sentence], [], [], [], [], []
    for i in range(level):
        last = i == level - 1
        step = _choose_step(c, q, new if i == force_at else allowed, last)
        if step is None:
            return None
        if step.sentence:
            sentences.append(step.sentence)
        k = i + 1
        result = replace(step.result, ref=f"R{k}")
        action_expr = _render(step.tokens, lambda t: t.ref, " ")
        calc = _render(step.tokens, lambda t: _fmt(t.value), "")
        shown = _render(step.tokens, lambda t: _fmt(t.value), " ")
        if _evaluate(calc) != step.value:  # pragma: no cover - a template bug
            raise AssertionError(f"template arithmetic is wrong: {calc} != {step.value}")
        dollar = "$" if result.money else ""
        value = _fmt(step.value)
        lines.append(step.explain.format(calc=f"{shown} = {dollar}<<{calc}={value}>>{value}"))
        action = f"R{k} = Calculator({action_expr})"
        actions.append(action)
        steps.append({"subgoal": step.subgoal, "action": action, "value": value})
        cats.append(step.category)
        names.append(step.template)
        c.used.extend(x for x in step.people if x not in c.used)
        c.last = step.subject
        q = result
    if level > 1 and not set(cats) & set(new):
        return None
    answer = _fmt(q.value)
    sentences.append(q.ask)
    lines.append(f"#### {answer}")
    actions.append(f"Answer(R{level})")
    return _Problem(" ".join(sentences), answer, "\n".join(lines), tuple(actions), tuple(steps),
                    tuple(cats), tuple(names))


def split_of(question: str) -> str:
    """Return the split (``"train"`` or ``"test"``) a MathWord question belongs to.

    Args:
        question: the question text.

    Returns:
        ``"test"`` for one question in five (by SHA-256 of the text), else ``"train"``.
    """
    digest = hashlib.sha256(question.encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:4], "big") % _TEST_BUCKETS == 0 else "train"


class MathWordGenerator:
    """Seeded generator of multi-step arithmetic word problems (see the module docstring).

    Examples:
        >>> gen = MathWordGenerator()
        >>> task = gen.problem(0, seed=0, level=2)
        >>> task.id, len(task.gold_actions)
        ('mathword/L2/0/0', 3)
    """

    levels = tuple(LEVEL_CATEGORIES)

    def problem(self, index: int, *, seed: int, level: int) -> Task:
        """Generate problem ``index`` of ``(seed, level)``.

        Args:
            index: the problem index (non-negative).
            seed: the seed.
            level: difficulty 1..5 (the number of steps).

        Returns:
            A task with id ``mathword/L{level}/{seed}/{index}``, a GSM8K-style rationale,
            one ``R<k> = Calculator(...)`` action per step and a final ``Answer(R{level})``;
            ``meta["steps"]`` lists ``{"subgoal", "action", "value"}`` per step.

        Raises:
            ValueError: a level outside 1..5 or a negative index.
        """
        if level not in LEVEL_CATEGORIES:
            raise ValueError(f"level must be one of {self.levels}, got {level!r}")
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        rng = random.Random(f"{seed}-{level}-{index}")
        for _ in range(_ATTEMPTS):
            problem = _try_build(_Ctx(rng), level)
            if problem is not None:
                break
        else:  # pragma: no cover - every level has templates for every start
            raise RuntimeError(f"could not generate a level-{level} problem for index {index}")
        return Task(
            id=f"mathword/L{level}/{seed}/{index}",
            question=problem.question,
            answer=problem.answer,
            task_type="math",
            rationale=problem.rationale,
            gold_actions=problem.actions,
            meta={
                "dataset": "mathword",
                "seed": seed,
                "level": level,
                "index": index,
                "split": split_of(problem.question),
                "categories": list(problem.categories),
                "templates": list(problem.templates),
                "steps": [dict(s) for s in problem.steps],
            },
        )

    def generate(
        self, n: int, *, seed: int, level: int, start: int = 0, split: str | None = None
    ) -> list[Task]:
        """Generate problems ``start .. start + n - 1`` of ``(seed, level)``, or of one split.

        Args:
            n: how many problems.
            seed: the seed.
            level: difficulty 1..5.
            start: the first index (only without ``split``).
            split: ``None`` for every index in order (both splits mixed); ``"train"`` or
                ``"test"`` for the first ``n`` problems of that split (see :meth:`split`).

        Returns:
            The tasks, in index order.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if split is not None:
            if start:
                raise ValueError("start cannot be combined with split")
            return self.split(split, n, seed=seed, level=level)
        return [self.problem(i, seed=seed, level=level) for i in range(start, start + n)]

    def iter_split(self, split: str, *, seed: int, level: int) -> Iterator[Task]:
        """Yield the problems of one split, in index order, without repeated questions.

        Args:
            split: ``"train"``, ``"validation"`` or ``"test"``.
            seed: the seed.
            level: difficulty 1..5.

        Yields:
            Tasks whose question belongs to ``split`` (see :func:`split_of`).
        """
        if split not in _SPLITS:
            raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
        if split == "validation":
            yield from self._iter_validation(seed=seed, level=level)
            return
        seen: set[str] = set()
        index = 0
        while True:
            task = self.problem(index, seed=seed, level=level)
            index += 1
            if task.meta["split"] == split and task.question not in seen:
                seen.add(task.question)
                yield task

    def _iter_validation(self, *, seed: int, level: int) -> Iterator[Task]:
        """Train-bucket problems from :data:`VALIDATION_START`, none of the guarded train ones."""
        seen = set(_train_questions(self, seed, level))
        index = VALIDATION_START
        while True:
            task = self.problem(index, seed=seed, level=level)
            index += 1
            if task.meta["split"] == "train" and task.question not in seen:
                seen.add(task.question)
                yield replace(task, meta={**task.meta, "split": "validation"})

    def split(self, split: str, n: int, *, seed: int = 0, level: int) -> list[Task]:
        """Return the first ``n`` problems of a split (disjoint from the other split by content).

        Args:
            split: ``"train"`` or ``"test"``.
            n: how many problems.
            seed: the seed.
            level: difficulty 1..5.

        Returns:
            The tasks; their ids keep the raw generator index.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        out: list[Task] = []
        if n == 0:
            return out
        for task in self.iter_split(split, seed=seed, level=level):
            if len(out) == n:
                break
            out.append(task)
        return out


_TRAIN_QUESTIONS: dict[tuple[int, int], frozenset[str]] = {}


def _train_questions(generator: MathWordGenerator, seed: int, level: int) -> frozenset[str]:
    """The questions of the first :data:`VALIDATION_GUARD` train problems (cached)."""
    key = (seed, level)
    if key not in _TRAIN_QUESTIONS:
        walk = generator.iter_split("train", seed=seed, level=level)
        _TRAIN_QUESTIONS[key] = frozenset(next(walk).question for _ in range(VALIDATION_GUARD))
    return _TRAIN_QUESTIONS[key]
