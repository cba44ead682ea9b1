"""Argument helpers of the verbs: the parser, ``key=value`` options, numbers, ``--format``."""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

from lumos_gym.envs.registration import MAX_COUNT
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
    """Parse ``key=value`` pairs; values are JSON when they parse as JSON, else strings.

    Raises:
        LumosGymError: an item that is not ``key=value``, or a number that is not finite
            (``1e400``, ``Infinity``, ``NaN``, which JSON reads as floats).
    """
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise LumosGymError(f"expected key=value, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value
        if not _finite(kwargs[key]):
            raise LumosGymError(f"{key}={value}: expected a finite number")
    return kwargs


def _finite(value: Any) -> bool:
    """Whether every number in ``value`` (a JSON value) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    return True


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


class Number:
    """An argparse type: a finite ``kind`` (int or float) from ``low`` up to ``high``.

    Args:
        kind: ``int`` or ``float``.
        low: the smallest value taken.
        high: the largest value taken, or ``None`` for no bound.
        name: what is expected, for the error of a value that is not a ``kind``.

    :attr:`range` is the text that the option's help holds (``at least 1``, ``0 to 65535``),
    which a test checks.
    """

    def __init__(self, kind: type, low: float, high: float | None, name: str) -> None:
        self.kind = kind
        self.low = low
        self.high = high
        self.name = name
        self.__name__ = name  # what argparse names the type by

    @property
    def range(self) -> str:
        """The values taken, as the option's help writes them."""
        if self.low == -math.inf:
            return "any finite number"
        if self.high is None:
            return f"at least {_shown(self.low)}"
        return f"{_shown(self.low)} to {_shown(self.high)}"

    def __call__(self, text: str) -> Any:
        """Return ``text`` as a ``kind``; raise ``ArgumentTypeError`` for one outside the range."""
        try:
            value = self.kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected {self.name}, got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if not self.low <= value <= (math.inf if self.high is None else self.high):
            raise argparse.ArgumentTypeError(f"must be {self.range}, got {text}")
        return value


def _shown(number: float) -> str:
    """Return ``number`` as the help writes it: ``1000000``, ``0.001``."""
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def at_least(kind: type, minimum: float, name: str) -> Number:
    """An argparse type: a finite ``kind`` (int or float) of at least ``minimum``."""
    return Number(kind, minimum, None, name)


def between(kind: type, low: float, high: float, name: str) -> Number:
    """An argparse type: a ``kind`` (int or float) from ``low`` to ``high``, both included."""
    return Number(kind, low, high, name)


#: A TCP port (0: the system picks a free one).
port = between(int, 0, 65535, "a port number")
positive_int = at_least(int, 1, "an integer")
#: A seed: numpy's generators take no negative one.
nonnegative_int = at_least(int, 0, "an integer")
nonnegative_float = at_least(float, 0, "a number")
#: A number of tasks to generate or read.
count = between(int, 1, MAX_COUNT, "an integer")
#: A sampling temperature.
temperature = at_least(float, 0, "a temperature")
#: A share, from none to all.
fraction = between(float, 0, 1, "a number")
#: Any finite number (a reward, a penalty).
finite_float = at_least(float, -math.inf, "a number")


def nonempty(name: str) -> Callable[[str], str]:
    """An argparse type: a string that is not empty nor blank (a path, a name)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"expected {name}, got an empty string")
        return text

    parse.__name__ = name
    return parse


#: A file or folder to write.
out_path = nonempty("a path")


def base_url(text: str) -> str:
    """An argparse type: the ``http://`` or ``https://`` root of an OpenAI-compatible API."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"expected a URL such as http://127.0.0.1:8000/v1, got {text!r}")
    return text


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


#: Libraries whose INFO records are one line per request or file: the web envs' local shop
#: answers every page through httpx, which would print thousands of lines in a data build.
CHATTY_LOGGERS = ("httpx", "httpcore")


def log_progress() -> None:
    """Print lumos-gym's INFO records (steps, losses) as bare lines, not the chatty libraries'."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
