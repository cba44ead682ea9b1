"""Argument helpers shared by the verbs: ``key=value`` options and bounded numbers."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from lumos_gym.errors import LumosGymError


def parse_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """Parse ``key=value`` pairs; values are JSON when they parse as JSON, else strings."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise LumosGymError(f"expected key=value, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value
    return kwargs


def parse_model_args(values: Sequence[str]) -> dict[str, Any]:
    """Parse ``--model-args`` values: ``key=value,key=value``, the flag repeatable.

    A comma starts a new pair only where a ``key=`` follows it, so a JSON value may hold
    commas (``engine_options={"a": 1, "b": 2}``). Values are JSON when they parse (numbers,
    ``true``, ``null``...), else strings.

    Raises:
        LumosGymError: an item that is not ``key=value``, or a key given twice.
    """
    args: dict[str, Any] = {}
    for value in values:
        for pair in re.split(r",(?=\s*[A-Za-z_][A-Za-z0-9_]*=)", value):
            parsed = parse_kwargs([pair.strip()])
            for key in parsed:
                if not key.isidentifier():
                    raise LumosGymError(f"--model-args: expected key=value, got {pair!r}")
                if key in args:
                    raise LumosGymError(f"--model-args: {key} is given twice")
            args.update(parsed)
    return args


def at_least(kind: type, minimum: float, name: str) -> Callable[[str], Any]:
    """An argparse type: a ``kind`` (int or float) of at least ``minimum``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {text}")
        return value

    return parse


positive_int = at_least(int, 1, "an integer")
nonnegative_float = at_least(float, 0, "a number")
