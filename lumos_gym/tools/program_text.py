r"""Program text for the program actions: one action line <-> a multi-line program, and tests.

:func:`expand_newlines` reads a program written on one action line (``\n`` outside string
literals is a newline) and :func:`one_line` writes one so; :func:`describe_program` names a
program in an observation (``Program(add)``); :func:`split_statements` and
:func:`is_scored_test` read test code. Everything here only *parses* code (:mod:`ast`), never runs
it. The public path of these names is :mod:`lumos_gym.tools.program`, which re-exports them.
"""

from __future__ import annotations

import ast
import re

from lumos_gym.actions import parse_action
from lumos_gym.errors import ActionParseError, ToolError
from lumos_gym.tools.code import split_literals


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
