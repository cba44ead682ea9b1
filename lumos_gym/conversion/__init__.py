"""Rationales into unified annotations, and annotations into training data.

* :mod:`~lumos_gym.conversion.annotation` — the unified annotation record and the lossless
  ``subgoal_plan`` text reader and writer;
* :mod:`~lumos_gym.conversion.exports` — the Lumos module training formats (plan/ground ×
  iterative/onetime), byte-exact with the original data.
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
