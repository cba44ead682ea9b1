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

Layout: this module holds the three actions; the program text (:func:`one_line`,
:func:`expand_newlines`, :func:`describe_program`, :func:`split_statements`,
:func:`is_scored_test`) is in :mod:`lumos_gym.tools.program_text`, and the test harness
(:func:`check_program`, :class:`CheckSpec`, :class:`CheckReport`, :class:`Outcome`,
:func:`summarize_check`) in :mod:`lumos_gym.tools.program_check`. Every public name is
importable from here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from lumos_gym.actions import Action
from lumos_gym.errors import ToolError, UndefinedVariableError
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from lumos_gym.tools.code import Code, prepare_code
from lumos_gym.tools.program_check import (
    CheckReport,
    CheckSpec,
    Outcome,
    check_program,
    summarize_check,
)
from lumos_gym.tools.program_text import (
    describe_program,
    expand_newlines,
    is_scored_test,
    one_line,
    split_statements,
)
from lumos_gym.tools.sandbox import run_python

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
