"""Argument helpers of the verbs: the parser, ``key=value`` options, numbers, ``--format``."""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from lumos_gym.errors import LumosGymError


class Parser(argparse.ArgumentParser):
    """The parser of ``lumos-gym`` and its verbs: a mistyped flag or choice gets a suggestion.

    ``--limt 5`` fails with ``unrecognized arguments: --limt 5 (did you mean --limit?)``, as an
    error of the verb it was given to, and ``lumos-gym evalute`` with ``did you mean
    'evaluate'?`` (what Python 3.14's ``suggest_on_error`` does for choices, here on 3.11 too).
    A bad command line is one error line on stderr and status 2.
    """

    def parse_args(  # type: ignore[override]  # same call, the namespace always returned
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse ``args``; unknown arguments exit with status 2, naming the closest flags."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._verb_parser(parsed)
            parser.error(f"unrecognized arguments: {' '.join(extras)}{parser.suggest(extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line (no usage: ``--help`` shows it) and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")

    def suggest(self, extras: Sequence[str]) -> str:
        """Return `` (did you mean --flag?)`` for the unknown flags of ``extras``, or nothing.

        Only a flag close to one of this parser's flags gets a suggestion.
        """
        # names compared without their dashes, which would make every flag look alike
        flags = {flag.lstrip("-"): flag for a in self._actions for flag in a.option_strings}
        hints = []
        for extra in extras:
            typed = extra.split("=", 1)[0]
            if not typed.startswith("-") or typed.lstrip("-").replace(".", "").isdigit():
                continue  # a value, or a negative number
            close = difflib.get_close_matches(typed.lstrip("-"), list(flags), n=1)
            if close:
                hints.append((typed, flags[close[0]]))
        if len(hints) == 1:
            return f" (did you mean {hints[0][1]}?)"
        if not hints:
            return ""
        return f" ({'; '.join(f'{typed}: did you mean {flag}?' for typed, flag in hints)})"

    def _verb_parser(self, parsed: argparse.Namespace) -> Parser:
        """Return the parser of the verb in ``parsed`` (this parser when there is none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(chosen, Parser):
                    return chosen._verb_parser(parsed)
        return self

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """Refuse a value outside ``action.choices``, naming the closest choice."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as e:
            choices = [str(choice) for choice in action.choices or ()]
            close = difflib.get_close_matches(str(value), choices, n=1)
            if not close or "did you mean" in e.message:
                raise
            message = f"{e.message} (did you mean {close[0]!r}?)"
            raise argparse.ArgumentError(action, message) from None


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


def between(kind: type, low: float, high: float, name: str) -> Callable[[str], Any]:
    """An argparse type: a ``kind`` (int or float) from ``low`` to ``high``, both included."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low:g} to {high:g}, got {text}")
        return value

    return parse


#: A TCP port (0: the system picks a free one).
port = between(int, 0, 65535, "a port number")
positive_int = at_least(int, 1, "an integer")
#: A seed: numpy's generators take no negative one.
nonnegative_int = at_least(int, 0, "an integer")
nonnegative_float = at_least(float, 0, "a number")


#: A request body limit in MiB.
body_mb = between(float, 0.001, 1024, "a size in MiB")


def add_exposure(p: argparse.ArgumentParser, *, max_body_mb: float) -> None:
    """Add ``--api-key``, ``--insecure`` and ``--max-body-mb`` (default ``max_body_mb``).

    Read them with :func:`lumos_gym.asgi.api_key_from` (``args.api_key``),
    ``args.insecure`` and ``args.max_body_mb``.
    """
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="the key every client must send, as 'Authorization: Bearer KEY' "
                        "(default: $LUMOS_GYM_API_KEY; other users of this machine can see "
                        "a command line, so prefer the variable)")
    p.add_argument("--insecure", action="store_true",
                   help="serve a non-loopback --host without a key (anyone who can reach the "
                        "port can use it)")
    p.add_argument("--max-body-mb", type=body_mb, default=max_body_mb, metavar="MB",
                   help="largest request body in MiB, 0.001 to 1024; a larger one is refused "
                        f"with 413 before it is read (default {max_body_mb:g})")


def add_format(p: argparse.ArgumentParser, shown: str) -> None:
    """Add ``--format text|json``: ``shown`` as text (the default) or as JSON on stdout."""
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=f"text (default) or json: {shown} as JSON on stdout, for scripts")


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (non-ASCII characters as they are)."""
    print(json.dumps(data, indent=2, ensure_ascii=False))
