"""Math task sources: loaders for the official GSM8K, SVAMP and ASDiv files, and bundled samples.

Each loader reads one file and returns a list of :class:`~lumos_gym.envs.tasks.Task` with
``task_type="math"``. A file that is missing, empty or not in the expected format raises
:class:`~lumos_gym.errors.DataError` with a one-line message naming the file, the record and
what was expected.

Formats handled:

* **GSM8K** (``openai/grade-school-math``): JSON lines ``{"question", "answer"}``, the answer
  holding solution lines with ``<<expr=value>>`` calculator marks and a last line
  ``#### <number>``; also the *socratic* files, whose solution lines start with a sub-question
  and ``" ** "``. A JSON list of the same records (a hub export) is accepted too.
* **SVAMP** (``arkilpatel/SVAMP``, ``SVAMP.json``): a JSON list of ``{"ID", "Body", "Question",
  "Equation", "Answer", "Type"}``; also JSON lines, lower-case keys, the hub's extra
  ``question_concat``, and the variants with ``Numbers`` (``number0`` placeholders in the text
  and equation) and ``Group``/``group_nums`` fields, including the repository's ``.csv`` folds.
* **ASDiv** (``chaochun/nlu-asdiv-dataset``, ``ASDiv.xml``): ``<Problem ID Grade Source>``
  elements with ``<Body>``, ``<Question>``, ``<Solution-Type>``, ``<Answer>`` and ``<Formula>``;
  also the JSON (lines) variant on the hub with ``body``, ``question``, ``solution_type``,
  ``answer`` and ``formula``.

:func:`load_math_dataset` picks the loader from a dataset name, or from the file's content
when no name is given, and falls back to the bundled samples (``lumos_gym/envs/data``) when no
path is given; those samples are the offline test split of the default suite.

The modules: :mod:`.files` (reading records and fields, shared), :mod:`.calc` (calculator marks,
arithmetic formulas, gold calculator actions, shared), one loader each in :mod:`.gsm8k`,
:mod:`.svamp` and :mod:`.asdiv`, and :mod:`.loading` (by name or content, bundled samples).
"""

from lumos_gym.envs.math.data.asdiv import (
    AsdivAnswer,
    load_asdiv,
    parse_asdiv_answer,
    parse_asdiv_formula,
)
from lumos_gym.envs.math.data.calc import (
    CalcMark,
    calculator_expression,
    parse_calc_marks,
    strip_calc_marks,
)
from lumos_gym.envs.math.data.calc import (
    _is_infix_arithmetic as _is_infix_arithmetic,  # re-exported: conversion.rules imports it
)
from lumos_gym.envs.math.data.gsm8k import (
    _gsm8k_steps as _gsm8k_steps,  # re-exported: conversion.rules imports it
)
from lumos_gym.envs.math.data.gsm8k import load_gsm8k
from lumos_gym.envs.math.data.loading import (
    DATA_DIR,
    MATH_LOADERS,
    SAMPLE_FILES,
    detect_math_format,
    load_math_dataset,
    sample_path,
)
from lumos_gym.envs.math.data.svamp import load_svamp

__all__ = [
    "DATA_DIR",
    "MATH_LOADERS",
    "SAMPLE_FILES",
    "AsdivAnswer",
    "CalcMark",
    "calculator_expression",
    "detect_math_format",
    "load_asdiv",
    "load_gsm8k",
    "load_math_dataset",
    "load_svamp",
    "parse_asdiv_answer",
    "parse_asdiv_formula",
    "parse_calc_marks",
    "sample_path",
    "strip_calc_marks",
]
