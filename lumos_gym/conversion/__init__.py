"""Rationales into unified annotations, and annotations into training data.

* :mod:`~lumos_gym.conversion.annotation` — the unified annotation record and the lossless
  ``subgoal_plan`` text reader and writer;
* :mod:`~lumos_gym.conversion.rules` — deterministic converters of datasets' own rationales
  (GSM8K, SVAMP, ASDiv, MathWord);
* :mod:`~lumos_gym.conversion.llm` — a converter that asks any backend to rewrite free-text
  rationales, cached and resumable;
* :mod:`~lumos_gym.conversion.verify` — replay of annotations in their env, keeping only those
  that reach the gold answer, with a report of yields and rejection reasons;
* :mod:`~lumos_gym.conversion.exports` — the training formats: the four Lumos module formats,
  byte-exact with the original data, and the baselines' (integrated, react, cot, direct);
* :mod:`~lumos_gym.conversion.pipeline` — ``lumos-gym convert`` and ``lumos-gym export``.
"""

from lumos_gym.conversion.annotation import (
    AnnotatedAction,
    Annotation,
    AnnotationError,
    Subgoal,
    format_subgoal_plan,
    make_subgoals,
    parse_subgoal_plan,
    read_annotations,
    write_annotations,
)
from lumos_gym.conversion.exports import FORMATS, Rejected, export_records

__all__ = [
    "FORMATS",
    "AnnotatedAction",
    "Annotation",
    "AnnotationError",
    "Rejected",
    "Subgoal",
    "export_records",
    "format_subgoal_plan",
    "make_subgoals",
    "parse_subgoal_plan",
    "read_annotations",
    "write_annotations",
]
