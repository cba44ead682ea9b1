r"""Rule-based converters for code tasks: a canonical solution into a unified annotation.

Each code task becomes one subgoal whose actions write the canonical program and test it on a
public example, so that the subgoal's result (the planner's feedback) is the test's ``Passed``::

    Subgoal 1: Write a function has_close_elements that checks if in given list of numbers, are
    any two numbers closer to each other than given threshold.
    Action 1-1: R1 = WriteProgram(from typing import List\n\n\ndef has_close_elements(...)
    Action 1-2: R2 = TestProgram(R1, Test: assert has_close_elements([1.0], 0.5) == False) = Passed

The episode then ends with ``Answer(R2)``, which in a code env submits the program ``R2``
tested (:func:`~lumos_gym.tools.program.submitted_program`).

* The subgoal is written from the first sentence of the function's docstring (HumanEval) or of
  the task text (MBPP): ``Write a function <name> that <sentence>``, the sentence's leading
  imperative verb put in the third person ("Return ..." → "returns ..."; MBPP's "Write a
  function to find ..." → "finds ..."); a sentence that reads otherwise follows a colon.
* The public example: MBPP's first test (the one its prompt shows). For HumanEval, the first
  docstring example that reads as a call with a literal result, either a doctest
  (``>>> f(x)`` then the output line) or a line such as ``f(x) ==> y``, ``f(x) ➞ y`` or
  ``f(x) should return y``; else the first plain ``assert`` of the official ``check``, with
  ``candidate`` renamed to the function. A task with none of these is rejected.

Converters only read text (the example's literals with :func:`ast.literal_eval`); the replay in
the env (:func:`code_env_factory` for :mod:`lumos_gym.conversion.verify`) runs them.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from lumos_gym.conversion.annotation import Annotation, make_subgoals
from lumos_gym.conversion.rules import ConversionError, module_converters
from lumos_gym.envs import datasets as data
from lumos_gym.envs.code.data import MBPP_SPLITS
from lumos_gym.envs.code.official import CodeEnv, code_source
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.tools.program import one_line

if TYPE_CHECKING:
    from lumos_gym.envs.base import LumosEnv

__all__ = [
    "CODE_CONVERTERS",
    "code_env_factory",
    "docstring_example",
    "first_sentence",
    "humaneval_annotation",
    "mbpp_annotation",
    "write_subgoal",
]

#: The value ``TestProgram`` gives when every test passes (the action's annotation tail).
PASSED = "Passed"

# Leading words that are imperative verbs in HumanEval/MBPP task sentences.
_IMPERATIVES = frozenset(
    """add calculate change check compare compute concatenate convert count create
    decode determine encode evaluate filter find flip get implement insert make multiply
    normalize remove replace return reverse rotate round sort split sum test""".split()
)
_WRITE_PREFIX = re.compile(
    r"^(?:write|create|complete|implement)\s+(?:a|the)\s+(?:python\s+)?function"
    r"(?:\s+\w+\(\))?\s+(that|which|to)\s+(.*)$",
    re.IGNORECASE | re.DOTALL,
)
_THIS_FUNCTION = re.compile(r"^(?:this|the)\s+function\s+(.*)$", re.IGNORECASE | re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_SEPARATORS = ("should return", "returns", "==>", "=>", "->", "➞", "==", "=")
_LINE_LEAD = re.compile(r"^\s*(?:[*-]\s+|for\s+|assert\s+|\d+[.)]\s+)?")


# ---------------------------------------------------------------------------------------------
# The subgoal


def first_sentence(text: str) -> str:
    """Return the first sentence of a task text or docstring, on one line.

    The first paragraph (up to a blank line or a doctest) is joined; a one-word heading such as
    ``Task`` is skipped.
    """
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    for paragraph in paragraphs:
        lines = []
        for line in paragraph.splitlines():
            if line.strip().startswith(">>>"):
                break
            lines.append(line.strip())
        if len(lines) > 1 and len(lines[0].split()) == 1 and lines[0][-1:] not in ".!?:":
            lines = lines[1:]  # a heading such as "Task"
        joined = " ".join(" ".join(lines).split())
        if joined:
            return _SENTENCE_END.split(joined, 1)[0]
    return ""


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return lower + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def _lower_first(text: str) -> str:
    word = text.split(" ", 1)[0]
    if len(word) > 1 and word[1:2].isupper():
        return text  # an acronym or a name written in capitals
    return text[:1].lower() + text[1:]


def _clause(sentence: str) -> str | None:
    """Return ``sentence`` as the clause after "that", or None when it does not read as one."""
    sentence = sentence.strip().rstrip(".").strip()
    match = _WRITE_PREFIX.match(sentence)
    if match:
        link, rest = match.group(1).lower(), match.group(2).strip()
        if not rest:
            return None
        if link == "to":
            verb, _, tail = rest.partition(" ")
            return " ".join(filter(None, (_third_person(verb), tail)))
        return rest
    match = _THIS_FUNCTION.match(sentence)
    if match:
        return match.group(1).strip() or None
    verb, _, tail = sentence.partition(" ")
    lower = verb.lower()
    if tail and lower in _IMPERATIVES:
        return f"{_third_person(verb)} {_lower_first(tail)}"
    if tail and (lower[:-1] in _IMPERATIVES or lower[:-2] in _IMPERATIVES):
        return f"{lower} {tail}"  # already in the third person: "Checks if ..."
    return None


def write_subgoal(name: str, sentence: str) -> str:
    """Return ``Write a function <name> that <sentence as a clause>.``.

    Args:
        name: the function's name.
        sentence: the task's first sentence (see :func:`first_sentence`).
    """
    sentence = " ".join(sentence.split())
    if not sentence:
        return f"Write a function {name}."
    clause = _clause(sentence)
    if clause is not None:
        return f"Write a function {name} that {clause}."
    return f"Write a function {name}: {sentence.rstrip('.')}."


# ---------------------------------------------------------------------------------------------
# The public example


def _literal(text: str) -> ast.expr | None:
    """Parse ``text`` as a literal value (``true``/``false`` read as booleans)."""
    text = text.strip().rstrip(".").strip()
    if not text:
        return None
    for candidate in (text, re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", text))):
        try:
            node = ast.parse(candidate, mode="eval").body
            ast.literal_eval(node)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        return node
    return None


def _calls(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in ast.walk(node)
    )


def _free_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assert(left: ast.expr, right: ast.expr) -> str:
    test = ast.Compare(left=left, ops=[ast.Eq()], comparators=[right])
    return ast.unparse(ast.fix_missing_locations(ast.Assert(test=test, msg=None)))


def _doctest_examples(doc: str, name: str) -> list[str]:
    found = []
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith(">>>") or i + 1 >= len(lines):
            continue
        source = stripped[3:].split("#", 1)[0].strip()
        expected = lines[i + 1].strip()
        if not expected or expected.startswith(">>>"):
            continue
        try:
            call = ast.parse(source, mode="eval").body
        except SyntaxError:
            continue
        value = _literal(expected)
        allowed = {name, "round", "sorted", "list", "tuple", "set", "abs", "True", "False", "None"}
        if value is not None and _calls(call, name) and _free_names(call) <= allowed:
            found.append(_assert(call, value))
    return found


def _closing(text: str, start: int) -> int:
    depth = 0
    quote = ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _line_examples(doc: str, name: str) -> list[str]:
    """Find ``f(x) SEP y`` lines: arrows before ``=``, then the latest "Examples" block first."""
    found: list[tuple[bool, int, str]] = []
    headings = 0
    for line in doc.splitlines():
        if re.match(r"\s*(?:\[?input/output\]?\s*samples?|for\s+)?examples?\b", line, re.I):
            headings += 1
        body = line[_LINE_LEAD.match(line).end() :]
        if not body.startswith(name + "("):
            continue
        close = _closing(body, len(name))
        if close < 0:
            continue
        call_text, rest = body[: close + 1], body[close + 1 :].strip()
        rest = rest.removeprefix("#").strip()
        for separator in _SEPARATORS:
            if rest.startswith(separator):
                rest = rest[len(separator) :]
                break
        else:
            continue
        try:
            call = ast.parse(call_text, mode="eval").body
            ast.literal_eval(ast.Tuple(elts=list(call.args), ctx=ast.Load()))
        except (SyntaxError, ValueError, TypeError, AttributeError):
            continue
        if not isinstance(call, ast.Call) or call.keywords:
            continue
        value = _literal(re.split(r"\s+#|\s\(", rest, maxsplit=1)[0])
        if value is not None:
            found.append((separator == "=", -headings, _assert(call, value)))
    return [text for *_, text in sorted(found, key=lambda item: item[:2])]


def _official_assert(test: str, name: str) -> str | None:
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError):
        return None
    check = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )
    if check is None or not check.args.args:
        return None
    param = check.args.args[0].arg
    known = set(dir(builtins)) | {param}
    for stmt in check.body:
        if isinstance(stmt, ast.Assert) and _calls(stmt, param) and _free_names(stmt) <= known:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and node.id == param:
                    node.id = name
            stmt.msg = None
            return ast.unparse(stmt)
    return None


def docstring_example(prompt: str, name: str, test: str = "") -> str | None:
    """Return a public example of a HumanEval problem as an ``assert`` statement.

    Args:
        prompt: the problem's prompt (signature and docstring).
        name: the entry point.
        test: the official ``test`` code, for the fallback.

    Returns:
        The first doctest example, else the first example line of the docstring, else the
        first plain assert of ``check``; None when there is none.
    """
    doc = _docstring(prompt, name) or prompt
    for finder in (_doctest_examples, _line_examples):
        examples = finder(doc, name)
        if examples:
            return examples[0]
    return _official_assert(test, name) if test else None


def _docstring(prompt: str, name: str) -> str | None:
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.get_docstring(node)
    return None


# ---------------------------------------------------------------------------------------------
# The converters


def _annotation(task: Task, dataset: str, name: str, sentence: str, example: str) -> Annotation:
    if not isinstance(task.answer, str) or not task.answer.strip():
        raise ConversionError("the task has no canonical program")
    try:
        program = one_line(task.answer)
        test = one_line(example)
    except ValueError as e:
        raise ConversionError(f"cannot write the program or its test as an action: {e}") from e
    plan = [
        (
            write_subgoal(name, sentence),
            [
                f"R1 = WriteProgram({program})",
                f"R2 = TestProgram(R1, Test: {test}) = {PASSED}",
            ],
        )
    ]
    harness = {k: v for k, v in task.meta.items() if k != "record"}
    return Annotation(
        id=task.id,
        dataset=dataset,
        task_type="code",
        task=task.question,
        subgoals=make_subgoals(plan),
        answer=task.answer,
        meta={"converter": f"rules/{dataset}", "entry_point": name, "example": example,
              "task_meta": harness},
    )


def humaneval_annotation(task: Task) -> Annotation:
    """Convert a HumanEval task (from :func:`~lumos_gym.envs.code.data.load_humaneval`).

    Raises:
        ConversionError: no prompt or entry point, or no public example to test.
    """
    prompt, name = task.meta.get("prompt"), task.meta.get("entry_point")
    if not isinstance(prompt, str) or not isinstance(name, str) or not name:
        raise ConversionError("the task lacks HumanEval's prompt and entry_point")
    example = docstring_example(prompt, name, str(task.meta.get("test") or ""))
    if example is None:
        raise ConversionError(f"no public example of {name} in the docstring or the tests")
    sentence = first_sentence(_docstring(prompt, name) or "")
    return _annotation(task, "humaneval", name, sentence, example)


def mbpp_annotation(task: Task) -> Annotation:
    """Convert an MBPP task (full or sanitized, from :func:`~lumos_gym.envs.code.data.load_mbpp`).

    Raises:
        ConversionError: no tests, or no function called by the first test.
    """
    tests = task.meta.get("test_list")
    name = task.meta.get("entry_point")
    if not isinstance(tests, Sequence) or not tests or not isinstance(tests[0], str):
        raise ConversionError("the task has no MBPP test_list")
    if not isinstance(name, str) or not name:
        raise ConversionError("the first test calls no function of the program")
    dataset = "mbpp" if task.meta.get("variant", "full") == "full" else "mbpp_sanitized"
    sentence = first_sentence(str(task.meta.get("text") or ""))
    setup = str(task.meta.get("setup") or "").strip()
    example = f"{setup}\n{tests[0]}" if setup else tests[0]
    return _annotation(task, dataset, name, sentence, example)


#: The rule-based converter of each code dataset (MBPP's handles both of its files), as the code
#: family's record (``lumos_gym/envs/code``) names them.
CODE_CONVERTERS: Mapping[str, Callable[[Task], Annotation]] = module_converters(__name__)


# ---------------------------------------------------------------------------------------------
# Replay verification


def code_env_factory(tasks: Sequence[Task], dataset: str) -> LumosEnv:
    """Build the code env that replays annotations of ``dataset`` (for ``verify``).

    Tasks whose ``meta`` lacks the scoring fields get them from ``meta["task_meta"]`` (what
    converters store in the annotation's meta) or, failing that, from the task of the same id in
    the files found offline (the HumanEval wheel, MBPP's bundled samples and downloaded official
    files); a task found nowhere is left out, so its replay reports an unknown task id.

    Args:
        tasks: the tasks, as :func:`~lumos_gym.conversion.verify.task_of` builds them.
        dataset: the dataset name.

    Returns:
        A :class:`~lumos_gym.envs.code.official.CodeEnv` over the tasks.
    """
    reference: dict[str, Task] | None = None
    resolved = []
    for task in tasks:
        meta = dict(task.meta)
        if "harness" not in meta and isinstance(meta.get("task_meta"), Mapping):
            meta.update(meta["task_meta"])
        if "harness" not in meta:
            if reference is None:
                reference = _reference_tasks()
            known = reference.get(task.id)
            if known is None:
                continue
            meta = dict(known.meta)
        resolved.append(
            Task(task.id, task.question, task.answer, "code", task.rationale,
                 task.gold_actions, meta)
        )
    return CodeEnv(dataset=dataset, tasks=resolved or list(tasks))


def _reference_tasks() -> dict[str, Task]:
    """Return the code tasks that can be found offline by id: HumanEval and MBPP files."""
    sources = [code_source("humaneval")]
    for variant in ("full", "sanitized"):
        sources.append(code_source("mbpp", variant=variant))
        if data.dataset_path("mbpp", variant).is_file():
            sources += [code_source("mbpp", split=s, source="official", variant=variant)
                        for s in MBPP_SPLITS]
    found: dict[str, Task] = {}
    for source in sources:
        try:
            found.update((task.id, task) for task in source.load())
        except DataError:
            continue
    return found
