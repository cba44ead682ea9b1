r"""The ``Code`` tool: run a one-line Python program in the sandbox and return what it shows.

How the argument of ``R1 = Code(...)`` becomes a program:

1. **Newlines.** An action is one line, so a program may separate statements with ``;``, and
   the two characters ``\n`` *outside string literals* stand for a newline:
   ``Code(def f(x):\n    return x * 2\nf(R1))``. Inside a string literal (``"a\nb"``) they are
   left alone and keep their Python meaning. A ``# comment`` ends at such a ``\n``. (Outside a
   string, a backslash followed by ``n`` is never valid Python, so the rule changes no program
   that was valid.)
2. **Variables.** ``R<n>`` (and a bound ``Output``) outside string literals and comments is
   replaced by its value written as a Python literal (:func:`python_literal`): ``"24"`` becomes
   ``24``, ``"-3"`` becomes ``(-3)``, ``"Paris"`` becomes ``'Paris'``. The referenced variables are
   also bound as Python names, so an f-string ``f"{R1} km"`` sees them too.
3. **The value.** As in a notebook, when the last statement is an expression whose value is not
   None, it is printed (with ``print``, i.e. ``str``, not ``repr``). The value of the action is
   the program's whole standard output, stripped. With several outputs (``R1, R2 = Code(...)``)
   the program must print one value per line; a last expression that is a tuple or list of the
   right length is printed one item per line (``R1, R2 = Code(divmod(17, 5))``).

Limitations of the scanner: in Python 3.12+ an f-string may reuse its own quote inside a
replacement field (``f"{d["k"]}"``); such nested quotes are read as the end of the string.

The program never runs in this process: the argument is only scanned as text here, and parsing,
rewriting and executing happen in :func:`~lumos_gym.tools.sandbox.run_python`'s child.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from lumos_gym.actions import Action, references, substitute
from lumos_gym.errors import SandboxError, ToolError
from lumos_gym.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from lumos_gym.tools.sandbox import MAX_WORK_FILES, MAX_WRITE_MB, SandboxResult, run_python

__all__ = ["Code", "prepare_code", "python_literal", "split_literals"]

# The program sent to the sandbox; SOURCE, OUTPUTS and NAMES are filled in with literals.
_RUNNER = """\
import ast as _ast


def _lumos_code(source, outputs, names):
    tree = _ast.parse(source, "<code>")
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    scope = {{"__name__": "__main__", "__builtins__": __builtins__, **names}}
    exec(compile(tree, "<code>", "exec"), scope)
    if last is None:
        return
    value = eval(compile(last, "<code>", "eval"), scope)
    if value is None:
        return
    if outputs > 1 and isinstance(value, (tuple, list)) and len(value) == outputs:
        for item in value:
            print(item)
    else:
        print(value)


_lumos_code({source}, {outputs}, {names})
"""

_CODE_LINE_RE = re.compile(r'File "<code>", line (\d+)')

_SIGNAL_HINTS = {
    "SIGXCPU": "CPU time limit exceeded",
    "SIGKILL": "killed from outside, e.g. out of memory",
    "SIGSEGV": "segmentation fault",
    "SIGXFSZ": "file size limit exceeded",
    "SIGABRT": "aborted",
}


def python_literal(value: str) -> str:
    """Write a variable's value as a Python literal for insertion into code.

    A value that parses as a finite int or float stays a number (negative numbers are
    parenthesised, so that ``R1 ** 2`` with ``R1 = -3`` gives ``9``); anything else becomes a
    string literal via :func:`repr`.

    Examples:
        >>> python_literal("24"), python_literal(" 2.50 "), python_literal("-3")
        ('24', '2.5', '(-3)')
        >>> python_literal("Paris"), python_literal("inf")
        ("'Paris'", "'inf'")
    """
    text = value.strip()
    number: int | float
    try:
        number = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            return repr(value)
        if not math.isfinite(number):
            return repr(value)
    literal = repr(number)
    return f"({literal})" if literal.startswith("-") else literal


def split_literals(text: str) -> list[tuple[str, str]]:
    r"""Split Python source text into code, string-literal and comment pieces.

    String literals are found by their quotes (single, double, triple) with backslash escapes;
    prefixes such as ``r``/``b``/``f`` stay at the end of the preceding code piece. A comment
    runs to a newline or to the two characters ``\n``. An unterminated string runs to the end
    of its line (Python will report it).

    Args:
        text: the source.

    Returns:
        ``(kind, piece)`` pairs, ``kind`` being ``"code"``, ``"string"`` or ``"comment"``; the
        pieces joined give back ``text``.
    """
    pieces: list[tuple[str, str]] = []
    start = i = 0
    n = len(text)

    def flush(end: int) -> None:
        if end > start:
            pieces.append(("code", text[start:end]))

    while i < n:
        ch = text[i]
        if ch == "#":
            flush(i)
            ends = [e for e in (text.find("\n", i), text.find("\\n", i)) if e >= 0]
            end = min(ends) if ends else n
            pieces.append(("comment", text[i:end]))
            start = i = end
        elif ch in "'\"":
            flush(i)
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                elif text.startswith(quote, j):
                    j += len(quote)
                    break
                elif text[j] == "\n" and len(quote) == 1:
                    break
                else:
                    j += 1
            j = min(j, n)
            pieces.append(("string", text[i:j]))
            start = i = j
        else:
            i += 1
    flush(n)
    return pieces


def prepare_code(args: str, variables: Mapping[str, str]) -> str:
    """Turn the argument of a ``Code`` action into Python source (rules 1 and 2 above).

    Args:
        args: the raw argument text of the action.
        variables: the values bound so far.

    Raises:
        UndefinedVariableError: for an ``R<n>`` outside string literals that is not bound.
    """
    parts: list[str] = []
    for kind, piece in split_literals(args):
        if kind == "code":
            piece = substitute(piece.replace("\\n", "\n"), variables, render=python_literal)
        parts.append(piece)
    return "".join(parts)


def _runner(source: str, outputs: int, names: Mapping[str, str]) -> str:
    """Return the sandbox program that runs ``source`` and prints its last expression."""
    bound = ", ".join(f"{name!r}: {literal}" for name, literal in names.items())
    return _RUNNER.format(source=repr(source), outputs=outputs, names=f"{{{bound}}}")


def _error_message(stderr: str, source: str) -> str:
    """Return the last traceback line, with the line number for multi-line programs."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    message = lines[-1].strip()
    found = _CODE_LINE_RE.findall(stderr)
    if found and "\n" in source.strip():
        message += f" (line {found[-1]})"
    return message


class Code(Tool):
    """Run the argument as Python in the sandbox; the value is what the program shows.

    See the module docstring for how the argument becomes a program.

    Args:
        timeout: wall-clock seconds the program may run.
        memory_mb: address-space limit of the program, in MiB.
        network: allow network access (off by default; the sandbox cuts it where it can).
    """

    spec = ToolSpec(
        "Code",
        "Code(pseudo_code)",
        "Generate a Python function that corresponds to the pseudo code",
    )

    def __init__(self, *, timeout: float = 5.0, memory_mb: int = 512, network: bool = False):
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if not memory_mb > 0:
            raise ValueError(f"memory_mb must be positive, got {memory_mb!r}")
        self.timeout = float(timeout)
        self.memory_mb = int(memory_mb)
        self.network = bool(network)

    def run(self, action: Action, ctx: ToolContext) -> ToolResult:
        """Run ``action.args`` as a program and return its stripped output.

        Raises:
            UndefinedVariableError: for an unbound ``R<n>``.
            SandboxError: on timeout, on a signal, when memory runs out, or when the program's
                folder goes over the sandbox's write cap where no tmpfs bounds it (a write
                past a tmpfs's cap is the program's own ``OSError``, a ToolError).
            ToolError: when the program fails (the last line of its traceback), prints
                nothing while an output variable waits for a value, or prints the wrong number
                of lines for several outputs.
        """
        source = prepare_code(action.args, ctx.variables)
        if not source.strip():
            raise ToolError("no code to run; write the program inside Code(...)")
        names = {
            name: python_literal(ctx.variables[name])
            for name in references(action.args)
            if name in ctx.variables
        }
        n_outputs = len(action.outputs)
        result = run_python(
            _runner(source, max(n_outputs, 1), names),
            timeout=self.timeout,
            memory_mb=self.memory_mb,
            network=self.network,
        )
        self._check(result, source)
        text = result.stdout.strip()
        if n_outputs > 1:
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            if len(lines) != n_outputs:
                raise ToolError(
                    f"{', '.join(action.outputs)} need {n_outputs} values, one per line, but "
                    f"the code printed {len(lines)} line(s)"
                )
            return ToolResult(tuple(lines))
        if n_outputs == 1 and not text:
            raise ToolError(
                "the code printed nothing; end it with an expression or print() the value"
            )
        return ToolResult((text,), observation=text or "(no output)")

    def _check(self, result: SandboxResult, source: str) -> None:
        """Raise the error that describes a failed run; return when it succeeded."""
        if result.timed_out:
            raise SandboxError(f"timed out after {self.timeout} s")
        if result.write_cap_exceeded:
            raise SandboxError(
                f"stopped: its working folder held more than {MAX_WRITE_MB} MB or "
                f"{MAX_WORK_FILES} files"
            )
        if result.signal is not None:
            hint = _SIGNAL_HINTS.get(result.signal)
            raise SandboxError(f"killed by {result.signal}" + (f" ({hint})" if hint else ""))
        if result.returncode == 0:
            return
        message = _error_message(result.stderr, source)
        if message.startswith("MemoryError"):
            raise SandboxError(f"out of memory (limit {self.memory_mb} MB): {message}")
        raise ToolError(message or f"the code exited with status {result.returncode}")
