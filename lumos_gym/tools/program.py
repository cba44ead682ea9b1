r"""Actions that write, run and test whole Python programs: the code family's execution module.

Three actions, in the Lumos style (one line each, ``R<n>`` variables between them)::

    R1 = WriteProgram(def add(a, b):\n    return a + b)
    R2 = RunProgram(R1, Input: add(2, 3))
    R3 = TestProgram(R1, Test: assert add(2, 3) == 5)

* ``WriteProgram(code)`` binds the program text. The two characters ``\n`` outside string
  literals stand for a newline, as in the ``Code`` action (:mod:`lumos_gym.tools.code`); the
  program is only *parsed* here (:func:`ast.parse`), never run. ``WriteProgram(R4)`` takes the
  program held by ``R4``. The observation shows ``R1 = Program(add)``.
* ``RunProgram(program, Input: ...)`` runs the program as a script in the sandbox, then the
  input statements; the value is what the run printed, followed by the ``repr`` of the input's
  last expression (as a REPL shows it). A failing run is an ``Error:`` with the last traceback
  line, like ``Code``.
* ``TestProgram(program, Test: ...)`` runs the program, then each test statement on its own
  (``;`` or ``\n`` between them), in the sandbox. The value is ``Passed`` when every test passes,
  otherwise ``Failed k/n: <first failure>``, where a failing ``assert f(x) == y`` says what
  ``f(x)`` was. A failing test is a result, not an error: the agent can read it and fix the
  program.

``R<n>`` references in an input or a test are replaced by their values written as Python
literals (as in ``Code``). The action grammar counts brackets without reading string literals,
so a program whose strings hold unbalanced brackets must write them as escapes (``'\x28'`` for
``'('``); :func:`one_line` does so when it writes a program as an action.

:func:`check_program` is the sandboxed test harness shared with the code environments' scoring
(:mod:`lumos_gym.envs.code.official`): in one sandbox process it can run an *official*
script whose clean completion is the verdict (HumanEval's
``prompt + completion + test + check(entry_point)``) and then each test statement separately, to
count how many pass. Model-written code only ever runs in
:func:`~lumos_gym.tools.sandbox.run_python`'s child process. The sandbox protects the machine; the
verdict, like the official harness's, trusts Python inside that process: a program that exits early
or swallows the time limit fails, but one that reads the harness's own frames
(``sys._current_frames``) could forge its report.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lumos_gym.actions import Action, parse_action
from lumos_gym.errors import ActionParseError, ToolError, UndefinedVariableError
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from lumos_gym.tools.code import Code, prepare_code, split_literals
from lumos_gym.tools.sandbox import SandboxResult, run_python

__all__ = [
    "MAX_PROGRAM_CHARS",
    "PROGRAMS",
    "CheckReport",
    "CheckSpec",
    "Outcome",
    "RunProgram",
    "TestProgram",
    "WriteProgram",
    "check_program",
    "describe_program",
    "expand_newlines",
    "is_scored_test",
    "one_line",
    "split_statements",
    "submitted_program",
    "summarize_check",
]

#: Longest program (characters) ``WriteProgram`` accepts.
MAX_PROGRAM_CHARS = 100_000
#: ``ToolContext.state`` key: output variable → the program that action wrote, ran or tested.
PROGRAMS = "programs"

_VARIABLE_RE = re.compile(r"\s*(R[0-9]+|Output)\s*\Z")
_HEAD_RE = re.compile(r"\s*(R[0-9]+|Output)\s*(?:,\s*(.*))?\Z", re.DOTALL)
_MESSAGE_CHARS = 300

# ---------------------------------------------------------------------------------------------
# Program text: one action line <-> a multi-line program


def expand_newlines(text: str) -> str:
    r"""Turn the two characters ``\n`` outside string literals into newlines.

    This is the ``Code`` action's newline rule without its variable substitution: a program
    written on one action line becomes the multi-line program.

    Args:
        text: one-line program text.

    Returns:
        The program; string literals and comments are left as they are.
    """
    return "".join(
        piece.replace("\\n", "\n") if kind == "code" else piece
        for kind, piece in split_literals(text)
    )


def _string_prefix(before: str) -> str:
    match = re.search(r"[A-Za-z]*\Z", before)
    return match.group(0).lower() if match else ""


def _escape_brackets(piece: str, prefix: str) -> str:
    table = {"(": "\\x28", ")": "\\x29", "[": "\\x5b", "]": "\\x5d"}
    if "f" not in prefix:
        table.update({"{": "\\x7b", "}": "\\x7d"})
    return "".join(table.get(ch, ch) for ch in piece)


def _encode(program: str, *, escape: bool) -> str | None:
    """Write ``program`` on one line; None when a string literal cannot be written so."""
    pieces = split_literals(program)
    out: list[str] = []
    previous = ""
    for kind, piece in pieces:
        if kind == "code":
            text = piece.replace("\n", "\\n")
        elif kind == "comment":
            if escape and any(ch in piece for ch in "()[]{}"):
                text = ""
            else:
                text = piece.replace("\\n", "\\ n")
        else:
            prefix = _string_prefix(previous)
            text = piece
            if "\n" in piece:
                if "r" in prefix or re.search(r"(?<!\\)(?:\\\\)*\\\n", piece):
                    return None  # raw text or a backslash continuation: no escape keeps it
                text = piece.replace("\n", "\\n")
            if escape and any(ch in piece for ch in "()[]{}"):
                if "r" in prefix:
                    return None
                text = _escape_brackets(text, prefix)
        out.append(text)
        previous = piece
    return "".join(out)


def _same_program(line: str, tree_dump: str) -> bool:
    if "\n" in line or "\r" in line:
        return False
    try:
        if parse_action(f"R1 = WriteProgram({line})").args != line:
            return False
        return ast.dump(ast.parse(expand_newlines(line))) == tree_dump
    except (ActionParseError, SyntaxError, ValueError):
        return False


def one_line(code: str) -> str:
    r"""Write a program (or test code) as the argument of a one-line action.

    Newlines become ``\n`` (escaped inside string literals), and when the action grammar would
    see unbalanced brackets, brackets inside string literals become ``\x28``-style escapes and
    comments holding brackets are dropped. As a last resort the program is rewritten by
    :func:`ast.unparse` (comments lost). The result always means the same program:
    ``expand_newlines(one_line(code))`` parses to the same syntax tree as ``code``.

    Args:
        code: Python source that parses.

    Returns:
        One line that parses inside ``WriteProgram(...)`` and expands back to the program.

    Raises:
        ValueError: the code does not parse, or cannot be written on one line.
    """
    source = code.replace("\r\n", "\n").replace("\r", "\n")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"the code does not parse: {e.msg} (line {e.lineno})") from e
    dump = ast.dump(tree)
    for candidate in (source, ast.unparse(tree)):
        for escape in (False, True):
            line = _encode(candidate.strip("\n"), escape=escape)
            if line is not None and _same_program(line, dump):
                return line
    raise ValueError("the code cannot be written as one action line")


def describe_program(program: str) -> str:
    """Return how an observation shows a program: ``Program(add, helper)``.

    Args:
        program: Python source.

    Returns:
        ``Program(<top-level functions and classes>)``, or ``Program(<n> lines)`` when it
        defines none or does not parse.
    """
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if tree is not None:
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        names = [node.name for node in tree.body if isinstance(node, kinds)]
        if names:
            return f"Program({', '.join(dict.fromkeys(names))})"
    lines = len(program.strip("\n").splitlines())
    return f"Program({lines} line{'s' if lines != 1 else ''})"


def split_statements(code: str) -> tuple[str, ...]:
    """Split test code into its top-level statements (parsed here, never run).

    Args:
        code: Python statements.

    Returns:
        Each top-level statement as source (via :func:`ast.unparse`).

    Raises:
        ToolError: the code does not parse or holds no statement.
    """
    try:
        tree = ast.parse(code, "<test>")
    except SyntaxError as e:
        raise ToolError(f"the test does not parse: {e.msg} (line {e.lineno})") from e
    except (ValueError, RecursionError, MemoryError) as e:
        raise ToolError(f"the test does not parse: {type(e).__name__}: {e}") from e
    if not tree.body:
        raise ToolError("no test statement; write e.g. Test: assert f(2) == 4")
    return tuple(ast.unparse(node) for node in tree.body)


def is_scored_test(source: str) -> bool:
    """Say whether a test statement counts as a test: it holds an ``assert`` of a non-constant.

    Statements without one (imports, assignments, ``assert True``) set tests up.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return any(
        isinstance(node, ast.Assert) and not isinstance(node.test, ast.Constant)
        for node in ast.walk(tree)
    )


# ---------------------------------------------------------------------------------------------
# The sandboxed test harness

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


# ---------------------------------------------------------------------------------------------
# The actions


def _program_of(name: str, ctx: ToolContext) -> str:
    """Return the program held by variable ``name`` (the program tested, for a test result)."""
    programs = ctx.state.get(PROGRAMS, {})
    if name in programs:
        return programs[name]
    if name not in ctx.variables:
        bound = ", ".join(ctx.variables) or "none"
        raise UndefinedVariableError(f"undefined variable {name} (defined: {bound})")
    return ctx.variables[name]


def _remember(action: Action, ctx: ToolContext, program: str) -> None:
    programs = ctx.state.setdefault(PROGRAMS, {})
    for var in action.outputs:
        programs[var] = program


def _program_and_rest(args: str, keys: Sequence[str], what: str) -> tuple[str, str]:
    """Split ``R1, Key: text`` into the program variable and the text (key optional)."""
    match = _HEAD_RE.match(args)
    if match is None:
        raise ToolError(
            f"the first argument must be a program variable such as R1 (write the program with "
            f"WriteProgram first), then {keys[0]}: {what}"
        )
    rest = (match.group(2) or "").lstrip()
    key = re.match(r"(" + "|".join(keys) + r")\s*:\s?", rest, re.IGNORECASE)
    if key:
        rest = rest[key.end() :]
    return match.group(1), rest


def submitted_program(args: str, ctx: ToolContext) -> str | None:
    r"""Return the program that ``Answer(args)`` submits in a code episode.

    ``Answer(R1)`` submits the program ``R1`` holds; a variable bound by ``RunProgram`` or
    ``TestProgram`` stands for the program that action ran, so ``Answer(<the last R>)``
    submits the last program tested. Any other argument is program text, with ``\n`` outside
    string literals read as newlines.

    Args:
        args: the raw argument of the ``Answer`` action.
        ctx: the episode's tool context.

    Returns:
        The program, or None when ``args`` names a variable that is not bound.
    """
    match = _VARIABLE_RE.match(args)
    if match:
        name = match.group(1)
        if name in ctx.state.get(PROGRAMS, {}) or name in ctx.variables:
            return _program_of(name, ctx)
        return None
    text = expand_newlines(args)
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip()


class WriteProgram(Tool):
    r"""Bind a Python program, given on one line with ``\n`` between lines; parsed, not run."""

    spec = ToolSpec(
        "WriteProgram",
        "WriteProgram(code)",
        "Write a Python program, with \\n between its lines",
    )

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Return the program as the value and ``Program(<names>)`` as the display.

        Raises:
            UndefinedVariableError: ``WriteProgram(R<n>)`` with ``R<n>`` unbound.
            ToolError: an empty or too long program, or one that does not parse.
        """
        match = _VARIABLE_RE.match(action.args)
        text = _program_of(match.group(1), ctx) if match else expand_newlines(action.args)
        lines = text.split("\n")
        while lines and not lines[0].strip():
            lines.pop(0)
        program = "\n".join(lines).rstrip()
        if not program:
            raise ToolError("no program; write it inside WriteProgram(...), \\n between lines")
        if len(program) > MAX_PROGRAM_CHARS:
            raise ToolError(f"the program is longer than {MAX_PROGRAM_CHARS} characters")
        program = _parsed(program)
        _remember(action, ctx, program)
        return ToolResult((program,), observation=describe_program(program),
                          display=describe_program(program))


def _parsed(program: str) -> str:
    """Return the program (its first line unindented if that makes it parse) or raise."""
    candidates = [program]
    if program[:1].isspace():
        candidates.append(program.lstrip())
    error: SyntaxError | None = None
    for candidate in candidates:
        try:
            ast.parse(candidate, "<program>")
        except SyntaxError as e:
            error = error or e
            continue
        except (ValueError, RecursionError, MemoryError) as e:
            raise ToolError(f"the program does not parse: {type(e).__name__}: {e}") from e
        return candidate + "\n"
    assert error is not None
    raise ToolError(f"the program does not parse: {error.msg} (line {error.lineno})")


# Runs the program as a script, then the input; prints the input's last expression's repr.
_RUN_RUNNER = """\
import ast as _ast


def _lumos_run(program, entry):
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(program, "<code>", "exec"), scope)
    if not entry.strip():
        return
    tree = _ast.parse(entry, "<input>")
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<input>", "exec"), scope)
    if last is not None:
        print(repr(eval(compile(last, "<input>", "eval"), scope)))


_lumos_run(__PROGRAM__, __INPUT__)
"""


class RunProgram(Code):
    """Run a program in the sandbox, then an input; the value is what the run printed.

    Args:
        timeout: wall-clock seconds the run may take.
        memory_mb: address-space limit, in MiB.
        network: allow network access (off by default).
    """

    spec = ToolSpec(
        "RunProgram",
        "RunProgram(program, input)",
        "Run the program, then the input code, and show what it printed and the input's value",
    )

    def __init__(self, *, timeout: float = 5.0, memory_mb: int = 512, network: bool = False):
        super().__init__(timeout=timeout, memory_mb=memory_mb, network=network)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run ``RunProgram(R1, Input: ...)``.

        Raises:
            UndefinedVariableError: an unbound variable.
            SandboxError: timeout, a signal, or out of memory.
            ToolError: a bad first argument, or the run failed (the traceback's last line).
        """
        name, rest = _program_and_rest(action.args, ("Input",), "the code to run")
        program = _program_of(name, ctx)
        entry = prepare_code(rest, ctx.variables)
        if entry.strip():
            try:
                ast.parse(entry, "<input>")
            except SyntaxError as e:
                raise ToolError(f"the input does not parse: {e.msg} (line {e.lineno})") from e
            except (ValueError, RecursionError, MemoryError) as e:
                raise ToolError(f"the input does not parse: {type(e).__name__}: {e}") from e
        code = _RUN_RUNNER.replace("__PROGRAM__", repr(program)).replace(
            "__INPUT__", repr(entry)
        )
        result = run_python(
            code, timeout=self.timeout, memory_mb=self.memory_mb, network=self.network
        )
        self._check(result, program)
        text = result.stdout.strip() or "(no output)"
        _remember(action, ctx, program)
        return ToolResult((text,))


class TestProgram(Code):
    """Run test statements against a program in the sandbox and report whether they pass.

    Args:
        timeout: seconds for building the program and, separately, for all the tests.
        memory_mb: address-space limit, in MiB.
        network: allow network access (off by default).
    """

    __test__ = False  # not a pytest test class

    spec = ToolSpec(
        "TestProgram",
        "TestProgram(program, test)",
        "Run the test statements, e.g. asserts, on the program and report whether they pass",
    )

    def __init__(self, *, timeout: float = 3.0, memory_mb: int = 512, network: bool = False):
        super().__init__(timeout=timeout, memory_mb=memory_mb, network=network)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run ``TestProgram(R1, Test: assert f(2) == 4)``; the value is ``Passed`` or why not.

        Raises:
            UndefinedVariableError: an unbound variable.
            ToolError: a bad first argument, or a test that does not parse.
        """
        name, rest = _program_and_rest(action.args, ("Test", "Tests"), "the test statements")
        program = _program_of(name, ctx)
        statements = split_statements(prepare_code(rest, ctx.variables))
        report = check_program(
            CheckSpec(program=program, tests=statements),
            timeout=self.timeout,
            memory_mb=self.memory_mb,
            network=self.network,
            explain=True,
        )
        _remember(action, ctx, program)
        return ToolResult((summarize_check(report),))


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
