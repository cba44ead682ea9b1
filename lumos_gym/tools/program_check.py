"""The sandboxed test harness of the program actions and of the code environments' scoring.

:func:`check_program` runs a :class:`CheckSpec` (an official script, then the program and each
test statement on its own) in one :func:`~lumos_gym.tools.sandbox.run_python` process, through
the runner script :data:`_CHECK_RUNNER`, and returns a :class:`CheckReport` of
:class:`Outcome` records; :func:`summarize_check` writes one as ``Passed`` or
``Failed k/n: <first failure>``. The public path of these names is
:mod:`lumos_gym.tools.program`, which re-exports them (see its docstring for what the verdict
trusts).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from lumos_gym.tools.program_text import is_scored_test
from lumos_gym.tools.sandbox import SandboxResult, run_python

_MESSAGE_CHARS = 300

# Runs in the sandbox. CONFIG is replaced by a dict literal. The nonce arrives on stdin and
# prefixes every report line, written to a copy of the original stdout; the program's own
# stdin and stdout are /dev/null, as HumanEval's harness swallows its I/O.
_CHECK_RUNNER = '''\
import ast
import json
import os
import signal
import sys
import time

CONFIG = __CONFIG__


class _Deadline(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Deadline()


def _short(value, limit=200):
    try:
        text = repr(value)
    except BaseException:
        text = "<unprintable>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _lumos_expect_equal(left, right, source):
    if not left == right:
        raise AssertionError(source + " is " + _short(left) + ", expected " + _short(right))


def _explained(source):
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    node = tree.body[0] if len(tree.body) == 1 else None
    if (
        isinstance(node, ast.Assert)
        and node.msg is None
        and isinstance(node.test, ast.Compare)
        and len(node.test.ops) == 1
        and isinstance(node.test.ops[0], ast.Eq)
    ):
        left = ast.unparse(node.test.left)
        right = ast.unparse(node.test.comparators[0])
        return "_lumos_expect_equal(%s, %s, %r)" % (left, right, left)
    return source


def _describe(exc):
    if exc is None:
        return ""
    try:
        text = str(exc)
    except BaseException:
        text = ""
    line = type(exc).__name__ + (": " + text if text else "")
    line = " ".join(line.split())
    tb, where = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<program>":
            where = tb.tb_lineno
        tb = tb.tb_next
    if where is not None:
        line += " (line %d)" % where
    return line[:300]


def _phase(run, seconds):
    try:
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
        try:
            run()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Deadline:
        return "timeout", None
    except BaseException as exc:
        return "failed", exc
    return "passed", None


def _main():
    nonce = sys.stdin.readline().strip()
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)

    def report(*item):
        os.write(out, (nonce + " " + json.dumps(item) + "\\n").encode("utf-8", "replace"))

    signal.signal(signal.SIGALRM, _on_alarm)
    limit = CONFIG["timeout"]
    if CONFIG["official"] is not None:
        code = CONFIG["official"]
        status, exc = _phase(lambda: exec(compile(code, "<check>", "exec"), {}), limit)
        report("official", status, _describe(exc))
        if status == "passed" or not CONFIG["tests"]:
            report("done")
            os._exit(0)
    scope = {}
    parts = [(n, CONFIG[n]) for n in ("setup", "program", "prelude") if CONFIG[n]]

    def build():
        for name, source in parts:
            report("phase", name)
            exec(compile(source, "<" + name + ">", "exec"), scope)
        report("phase", "bind")
        for name, expr in CONFIG["bind"].items():
            tests_scope[name] = eval(expr, scope)

    tests_scope = {}
    status, exc = _phase(build, limit)
    report("program", status, _describe(exc))
    if status != "passed":
        report("done")
        os._exit(0)
    for key, value in scope.items():
        tests_scope.setdefault(key, value)
    tests_scope["_lumos_expect_equal"] = _lumos_expect_equal
    deadline = time.monotonic() + limit
    for index, source in enumerate(CONFIG["tests"]):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            report("test", index, "timeout", "")
            continue
        code = _explained(source) if CONFIG["explain"] else source
        status, exc = _phase(lambda: exec(compile(code, "<test>", "exec"), tests_scope), remaining)
        report("test", index, status, _describe(exc))
    report("done")
    os._exit(0)


_main()
'''


@dataclass(frozen=True)
class CheckSpec:
    """What :func:`check_program` runs, in order, in one sandbox process.

    Attributes:
        program: the program under test (for HumanEval, the prompt followed by the submission).
        tests: test statements, each run on its own after the program; a failing one does not
            stop the next.
        official: a whole script run first in a fresh namespace; when given, its clean
            completion is the verdict and the tests only count how many pass when it fails.
        setup: code run before the program, in its namespace (MBPP's ``test_setup_code``).
        prelude: code run after the program, in its namespace (HumanEval's ``test`` defining
            ``check``).
        bind: names bound for the tests to expressions evaluated in the program's namespace,
            e.g. ``{"candidate": "add"}``.
    """

    program: str
    tests: tuple[str, ...] = ()
    official: str | None = None
    setup: str = ""
    prelude: str = ""
    bind: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """How one part of a check ended.

    Attributes:
        source: what ran (a test statement, ``"program"`` or ``"official"``).
        status: ``passed``, ``failed``, ``timeout`` or ``not-run`` (the process ended first).
        message: the exception's last line (``AssertionError``, ``NameError: ...``), if any.
        scored: whether it counts as a test (see :func:`is_scored_test`).
    """

    source: str
    status: str
    message: str = ""
    scored: bool = True

    @property
    def passed(self) -> bool:
        """Return True when it ran to the end without an exception."""
        return self.status == "passed"


@dataclass(frozen=True)
class CheckReport:
    """The result of :func:`check_program`.

    Attributes:
        official: the official script's outcome, or None when the spec had none.
        program: the outcome of building the program (setup, program, prelude, binds), or
            None when the official script passed and nothing else ran.
        tests: one outcome per test statement (empty when the official script passed).
        sandbox: the raw sandbox result.
        failed_phase: the part of the build that failed (``setup``, ``program``...), if any.
    """

    official: Outcome | None
    program: Outcome | None
    tests: tuple[Outcome, ...]
    sandbox: SandboxResult
    failed_phase: str | None = None

    @property
    def passed(self) -> bool:
        """Return the verdict: the official script passed, or the program and every test did."""
        if self.official is not None:
            return self.official.passed
        return self.program is not None and self.program.passed and all(
            t.passed for t in self.tests
        )

    @property
    def tests_passed_fraction(self) -> float:
        """Return the fraction of scored tests that passed (1.0 when the verdict is a pass)."""
        if self.passed:
            return 1.0
        scored = [t for t in self.tests if t.scored]
        if not scored:
            return 0.0
        return sum(t.passed for t in scored) / len(scored)

    @property
    def timed_out(self) -> bool:
        """Return True when what decides the verdict ran out of time."""
        deciding = [self.official] if self.official is not None else [self.program, *self.tests]
        return any(o is not None and o.status == "timeout" for o in deciding)

    def first_failure(self) -> Outcome | None:
        """Return the first outcome that did not pass (the build before the tests)."""
        for outcome in (self.official, self.program, *self.tests):
            if outcome is not None and not outcome.passed:
                return outcome
        return None


def _runner_config(spec: CheckSpec, timeout: float, explain: bool) -> str:
    config = {
        "official": spec.official,
        "setup": spec.setup,
        "program": spec.program,
        "prelude": spec.prelude,
        "bind": dict(spec.bind),
        "tests": list(spec.tests),
        "timeout": float(timeout),
        "explain": bool(explain),
    }
    return _CHECK_RUNNER.replace("__CONFIG__", repr(config))


def _reports(result: SandboxResult, nonce: str) -> list[list]:
    items = []
    head = nonce + " "
    for line in result.stdout.splitlines():
        if line.startswith(head):
            try:
                item = json.loads(line[len(head) :])
            except ValueError:
                continue
            if isinstance(item, list) and item:
                items.append(item)
    return items


def _crash_message(result: SandboxResult) -> str:
    if result.timed_out:
        return "timed out (the whole run)"
    if result.write_cap_exceeded:
        return "stopped: its working folder outgrew the sandbox's write cap"
    if result.signal is not None:
        return f"killed by {result.signal}"
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    if lines:
        return lines[-1].strip()[:_MESSAGE_CHARS]
    return f"the process ended with status {result.returncode}"


def check_program(
    spec: CheckSpec,
    *,
    timeout: float = 3.0,
    memory_mb: int = 512,
    network: bool = False,
    explain: bool = False,
) -> CheckReport:
    """Run a program and its tests in one sandbox process and report each outcome.

    Args:
        spec: what to run.
        timeout: seconds for each phase (the official script, the program build, all tests
            together); the sandbox's wall limit is their sum plus one second.
        memory_mb: address-space limit of the sandbox, in MiB.
        network: allow network access (off by default).
        explain: rewrite a failing ``assert a == b`` test so its message shows ``a``'s value.

    Returns:
        The report. A crash of the whole process (memory, a signal, the wall limit) leaves the
        outcomes it did not reach as ``not-run`` (or ``timeout`` on the wall limit).
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    phases = (spec.official is not None) + 2
    nonce = secrets.token_hex(16)
    result = run_python(
        _runner_config(spec, timeout, explain),
        timeout=timeout * phases + 1.0,
        memory_mb=memory_mb,
        network=network,
        stdin=nonce + "\n",
        max_output_bytes=1 << 20,
    )
    items = _reports(result, nonce)
    missing = "timeout" if result.timed_out else "not-run"
    crash = _crash_message(result)
    official: Outcome | None = None
    program: Outcome | None = None
    phase: str | None = None
    found: dict[int, Outcome] = {}
    for item in items:
        kind = item[0]
        if kind == "official" and len(item) == 3:
            official = Outcome("official", str(item[1]), str(item[2]))
        elif kind == "phase" and len(item) == 2:
            phase = str(item[1])
        elif kind == "program" and len(item) == 3:
            program = Outcome("program", str(item[1]), str(item[2]))
        elif kind == "test" and len(item) == 4 and isinstance(item[1], int):
            if 0 <= item[1] < len(spec.tests):
                source = spec.tests[item[1]]
                found[item[1]] = Outcome(source, str(item[2]), str(item[3]))
    if spec.official is not None and official is None:
        official = Outcome("official", missing, crash)
    official_passed = official is not None and official.passed
    if not official_passed and program is None:
        program = Outcome("program", missing, crash)
    tests: tuple[Outcome, ...] = ()
    if not official_passed:
        scored = [is_scored_test(source) for source in spec.tests]
        if not any(scored):
            scored = [True] * len(spec.tests)
        built = program is not None and program.passed
        tests = tuple(
            _scored(found.get(i) or Outcome(s, missing if built else "not-run", crash), flag)
            for i, (s, flag) in enumerate(zip(spec.tests, scored, strict=True))
        )
    failed_phase = phase if program is not None and not program.passed else None
    return CheckReport(official, program, tests, result, failed_phase)


def _scored(outcome: Outcome, scored: bool) -> Outcome:
    return Outcome(outcome.source, outcome.status, outcome.message, scored)


def summarize_check(report: CheckReport) -> str:
    """Return ``Passed`` or ``Failed k/n: <first failure>`` for a :class:`CheckReport`."""
    if report.passed:
        return "Passed"
    scored = [t for t in report.tests if t.scored] or list(report.tests)
    failed = sum(not t.passed for t in scored)
    head = f"Failed {failed}/{len(scored)}" if scored else "Failed"
    outcome = report.first_failure()
    if outcome is None:
        return head
    if outcome.source == "program":
        phase = report.failed_phase or "program"
        if phase == "bind":
            phase = "program"
        if outcome.status == "timeout":
            return f"{head}: the {phase} timed out"
        return f"{head}: the {phase} raised {outcome.message or 'an error'}"
    if outcome.status == "timeout":
        return f"{head}: {outcome.source} timed out"
    if outcome.status == "not-run":
        return f"{head}: {outcome.source} did not run ({outcome.message})"
    message = outcome.message
    if message.startswith("AssertionError: ") and " is " in message:
        return f"{head}: {message[len('AssertionError: ') :]}"
    if message == "AssertionError":
        return f"{head}: {outcome.source}"
    return f"{head}: {outcome.source} raised {message}"
