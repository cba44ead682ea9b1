"""Sandboxed test runs on HumanEval: all 164 canonical solutions scored as the code env does.

Measures, in this run:

* test runs per second, sequentially and with a thread pool of 2..4 workers (each run is one
  sandbox process: the official ``prompt + solution + test + check(entry_point)`` script);
* the sandbox's overhead per run: a trivial program through ``run_python`` against a bare
  ``python -c pass`` process, and a trivial check through ``check_program``.

Run: .venv/bin/python benchmarks/code_tests.py [--workers 1 2 3 4] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from lumos_gym.envs.code.data import load_humaneval
from lumos_gym.envs.code.official import score_submissions
from lumos_gym.tools.program import CheckSpec, check_program
from lumos_gym.tools.sandbox import run_python


def median_ms(fn, repeats: int) -> float:
    """Return the median wall time of ``fn()`` over ``repeats`` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    tasks = load_humaneval()
    pairs = [(task, task.answer) for task in tasks]
    print(f"HumanEval: {len(tasks)} canonical solutions, 3 s limit each")
    for workers in args.workers:
        start = time.perf_counter()
        results = score_submissions(pairs, workers=workers)
        elapsed = time.perf_counter() - start
        passed = sum(r["pass@1"] for r in results)
        print(
            f"  workers={workers}: {elapsed:6.2f} s, {len(pairs) / elapsed:6.1f} runs/s, "
            f"pass@1 {passed:.0f}/{len(pairs)}"
        )

    bare = median_ms(
        lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True), args.repeats
    )
    sandboxed = median_ms(lambda: run_python("pass"), args.repeats)
    check = median_ms(
        lambda: check_program(CheckSpec(program="x = 1", tests=("assert x == 1",))),
        args.repeats,
    )
    print(f"bare `python -I -c pass`: {bare:6.1f} ms (median of {args.repeats})")
    print(f"run_python('pass'):       {sandboxed:6.1f} ms (overhead {sandboxed - bare:+.1f} ms)")
    print(f"check_program (1 test):   {check:6.1f} ms (overhead {check - bare:+.1f} ms)")


if __name__ == "__main__":
    main()
