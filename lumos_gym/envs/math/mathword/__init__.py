"""MathWord: an offline, seeded generator of multi-step word problems with GSM8K-style rationales.

A problem starts from one given quantity (``"Tom picks 24 apples."``) and applies ``level``
steps to it, each step one arithmetic operation described by one sentence (``"He gives 4
apples to Mia."``), and ends with a question about the last quantity. Each step kind is a
template with a category; the categories allowed widen with the level:

====== ================================================================================
level  categories
====== ================================================================================
1      ``add``, ``sub``
2      + ``mul`` (times as many, parts of each item, repeated purchases, days of work)
3      + ``div`` (sharing, packing, splitting a bill; always an integral or cent result)
4      + ``percent`` (discounts, tips, shares) and ``rate`` (unit prices, wages, speeds,
       fuel use, savings per week, minutes per item)
5      + ``compare`` (more/fewer/half as many as someone else, together, how many more)
====== ================================================================================

A level-``L`` problem has exactly ``L`` steps and, from level 2 on, at least one step of a
category that level introduces. Every value (intermediate ones included) is a positive integer,
or a money amount in whole cents.

Determinism: problem ``index`` of ``(seed, level)`` is drawn from
``random.Random(f"{seed}-{level}-{index}")``, so it never depends on how many other problems
are generated. The ``train`` and ``test`` splits (:meth:`MathWordGenerator.split`) are
disjoint by content: a problem belongs to ``test`` when the SHA-256 of its question text falls
in the test bucket (1 in 5), else to ``train``; a split walks the indices from 0 and keeps the
problems of its bucket, dropping repeated questions, so no question text is in both splits
whatever seeds they use.

A ``validation`` split, for choices made before a test run (the rounds of ``lumos-gym
improve``, learning rates), takes train-bucket questions, so it never shares one with
``test``; it walks the indices from :data:`VALIDATION_START`, which no train walk reaches, and
drops every question that is among the first :data:`VALIDATION_GUARD` train problems of the
same seed and level (more than any recipe here trains on), so it shares none with them either.

The modules: :mod:`.story` (vocabulary, quantities, steps, number formatting, the story context
and the template registry), :mod:`.steps_arith` (the ``add``, ``sub``, ``mul`` and ``div``
templates), :mod:`.steps_applied` (``percent``, ``rate``, ``compare``) and :mod:`.generator`
(starting quantities, problem assembly, :class:`MathWordGenerator` and the splits).
"""

from lumos_gym.envs.math.mathword.generator import (
    CATEGORIES,
    LEVEL_CATEGORIES,
    MathWordGenerator,
    split_of,
    template_names,
)
from lumos_gym.envs.math.mathword.generator import (
    VALIDATION_GUARD as VALIDATION_GUARD,  # re-exported: public, not in __all__
)
from lumos_gym.envs.math.mathword.generator import (
    VALIDATION_START as VALIDATION_START,  # re-exported: public, not in __all__
)

__all__ = ["CATEGORIES", "LEVEL_CATEGORIES", "MathWordGenerator", "split_of", "template_names"]
