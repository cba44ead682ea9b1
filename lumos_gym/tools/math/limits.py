"""The bounds of the math tools' work: number sizes, the time limit and the worker processes.

Sizes are checked before a power is computed (:func:`_check_power`) and on every intermediate
result (:func:`_check_size`, :func:`_check_magnitude`). Sympy work runs under
:data:`TIME_LIMIT` (:func:`_as_tool_error`), whose ``SIGALRM`` is set only in the main thread of
a worker process of :data:`_WORKERS` (:func:`_in_a_worker`), or in the caller's main thread
where no worker can be started (see :mod:`lumos_gym.tools.math` for why). The limit and the
flags that say where the work runs are this module's globals, set by :func:`_in_worker_call`
in a worker and by :func:`_in_a_worker` when no worker starts: a caller that changes the limit
sets ``lumos_gym.tools.math.limits.TIME_LIMIT``, not the package's copy of the name.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sympy as sp

from lumos_gym.errors import ToolError, UndefinedVariableError
from lumos_gym.tools.math.values import _shown
from lumos_gym.tools.worker import WorkerPool, WorkerStartError

#: Longest formula accepted, after variables are substituted.
MAX_FORMULA_CHARS = 2000
#: Deepest bracket nesting accepted.
MAX_NESTING = 50
#: Most digits of an exact number, in a literal or in any intermediate result.
MAX_DIGITS = 1000
#: Seconds of sympy work allowed per action, in any thread (see the package docstring).
TIME_LIMIT = 3.0
#: Seconds a worker process may take beyond TIME_LIMIT before it is killed.
_WORKER_GRACE_S = 2.0

_MAX_BITS = math.ceil(MAX_DIGITS * math.log2(10))
_MAX_EXP_ARGUMENT = math.floor(MAX_DIGITS * math.log(10))  # exp(x) < 10**MAX_DIGITS
_MAX_FACTORIAL = 450  # 450! has 1001 digits
_MAX_BINOMIAL = 10_000
_MAX_UNKNOWNS = 8
_MAX_SOLVE_OPS = 400
_MAX_DEGREE = 24  # of a polynomial to solve
_MAX_ROOT = 6  # largest n of an n-th root of an unknown in an equation
_MAX_BEZOUT = 32  # product of the degrees of a polynomial system


#: How often the time limit's alarm repeats once the limit has passed, in seconds.
_REPEAT_S = 0.05


class _Timeout(BaseException):
    """Raised by the alarm of :func:`_time_limit`; a BaseException so sympy cannot swallow it."""


class _GaveUp(ToolError):
    """The time limit stopped a tool; the worker process it ran in is retired, not reused."""

    retire_worker = True


def _alarm_usable() -> bool:
    """Say whether :func:`_time_limit` can use the alarm.

    In the main thread with the timer free, and only in a worker process or where no worker
    can be started (see the package docstring).
    """
    return (
        (_in_worker or _worker_failed or not _POSIX)
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` with :class:`_Timeout`.

    Only where :func:`_alarm_usable`; elsewhere it is a no-op, and :class:`_SympyTool` runs the
    tools in a worker process where it is usable.
    """
    if not _alarm_usable():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, interrupt)
    # The alarm repeats: an interrupt that lands in a garbage-collector callback or a __del__
    # is swallowed by Python (an "unraisable" exception), and the work would then run unbounded.
    signal.setitimer(signal.ITIMER_REAL, seconds, _REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _as_tool_error(tool: str) -> Iterator[None]:
    """Run a tool's work under :data:`TIME_LIMIT`, turning every failure into a ToolError."""
    try:
        with _time_limit(TIME_LIMIT):
            yield
    except (ToolError, UndefinedVariableError):
        raise
    except _Timeout:
        raise _GaveUp(f"{tool} gave up after {TIME_LIMIT:g} s; simplify the input") from None
    except RecursionError:
        raise ToolError("the input is nested too deeply") from None
    except MemoryError:
        raise ToolError("the input needs too much memory") from None
    except Exception as e:  # sympy raises many exception types on odd input: all are bad input
        raise ToolError(f"cannot compute this: {type(e).__name__}: {e}") from e


def _check_size(value: sp.Basic) -> sp.Basic:
    """Refuse an exact number with more than :data:`MAX_DIGITS` digits, or a float as large."""
    if isinstance(value, sp.Rational):
        if max(int(value.p).bit_length(), int(value.q).bit_length()) > _MAX_BITS:
            raise ToolError(f"a number in this formula has more than {MAX_DIGITS} digits")
    elif isinstance(value, sp.Float) and value:
        _, mantissa, exponent, _ = value._mpf_
        if abs(exponent + int(mantissa).bit_length()) > _MAX_BITS:
            raise ToolError(f"a number in this formula has more than {MAX_DIGITS} digits")
    return value


def _check_magnitude(value: sp.Expr) -> sp.Expr:
    """Refuse a non-rational number too large or too small to write with MAX_DIGITS digits."""
    if value.is_number and not value.is_Rational:
        for part in value.evalf(15).as_real_imag():
            _check_size(part)
    return value


def _check_power(base: sp.Expr, exponent: sp.Expr) -> None:
    """Refuse ``base ** exponent`` before computing it when the result would be too large.

    sympy computes a power of numbers exactly as soon as it is built (``sqrt(2)^(10^9)`` is
    ``2^(5*10^8)``), so the size is estimated first: ``|exponent| * log2|base|`` bits.
    """
    if not (base.is_number and exponent.is_number) or base.is_zero:
        return
    if base.is_Rational and exponent.is_Rational:
        if base in (1, -1):
            return
        size = max(int(base.p).bit_length(), int(base.q).bit_length()) - 1
        bits: sp.Expr = abs(exponent) * max(size, 1)
    else:
        bits = (abs(exponent) * abs(sp.log(abs(base), 2))).evalf(15)
    if bits.is_number and bits.is_extended_real and bits > _MAX_BITS:
        raise ToolError(
            f"{_shown(sp.Pow(base, exponent, evaluate=False))} has more than {MAX_DIGITS} "
            "digits; use smaller numbers"
        )


def _check_number_text(text: str) -> str:
    mantissa, _, exponent = text.lower().partition("e")
    if len(mantissa.replace(".", "").lstrip("0")) > MAX_DIGITS or (
        exponent and abs(int(exponent)) > MAX_DIGITS
    ):
        raise ToolError(f"the number {text[:20]}... has more than {MAX_DIGITS} digits")
    return text


#: The worker processes; each imports this module, so the whole package, before it is ready.
_WORKERS = WorkerPool(preload=(__name__,))
_POSIX = os.name == "posix"
#: Set when no worker process could be started: from then on the tools run in the caller.
_worker_failed = False
#: Set in a worker process of :data:`_WORKERS` (by its first call).
_in_worker = False


def _in_process() -> bool:
    """Say whether sympy work runs here rather than in a worker (see the package docstring)."""
    return _in_worker or _worker_failed or not _POSIX


def _in_a_worker(name: str, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Return ``function(*args)`` computed in a worker, under the time limit.

    ``function`` is a module-level function of this package: it travels by pickle, as its
    module and name. Falls back to calling it here (with a warning, once) when no worker can be
    started.

    Raises:
        ToolError: when the worker did not answer in time or died.
    """
    global _worker_failed
    call = (function, TIME_LIMIT, *args)
    try:
        return _WORKERS.run(__name__, "_in_worker_call", call, TIME_LIMIT + _WORKER_GRACE_S)
    except TimeoutError:
        raise ToolError(f"{name} gave up after {TIME_LIMIT:g} s; simplify the input") from None
    except EOFError:  # killed by the system (out of memory) or crashed
        raise ToolError(f"{name} failed: its worker process died; simplify the input") from None
    except WorkerStartError as e:  # no subprocess here: the alarm, in the main thread only
        _worker_failed = True
        warnings.warn(f"{e}; math tools run in this process, with a time limit in the main "
                      "thread only", RuntimeWarning, stacklevel=3)
        return function(*args)


def _in_worker_call(function: Callable[..., Any], time_limit: float, *args: Any) -> Any:
    """Call ``function(*args)`` in a worker process, under the caller's limit."""
    global TIME_LIMIT, _in_worker
    TIME_LIMIT, _in_worker = time_limit, True
    return function(*args)
