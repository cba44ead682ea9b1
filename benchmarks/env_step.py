"""Env step overhead: a Calculator action through `env.step` against the same sympy work done
directly, and the sandbox's overhead per `Code` call against a bare `python -I` process.

Run: .venv/bin/python benchmarks/env_step.py [--repeats N]
Prints medians and p99s measured in this run, and their ratios.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import sympy

import lumos_gym  # noqa: F401
from lumos_gym.tools.sandbox import run_python

FORMULA = "48/2 + 17*3 - 5^2"


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--code-repeats", type=int, default=30)
    args = parser.parse_args()

    env = gym.make("lumos/MathWord-v0").unwrapped
    env.reset(seed=0)

    def env_step():
        env.step(f"R1 = Calculator({FORMULA})")

    def direct():
        str(sympy.sympify(FORMULA.replace("^", "**")))

    timed(env_step, 50), timed(direct, 50)  # warm up caches of both
    env_med, env_p99 = timed(env_step, args.repeats)
    raw_med, raw_p99 = timed(direct, args.repeats)
    print(f"Calculator step: median {env_med * 1e6:.0f} us, p99 {env_p99 * 1e6:.0f} us")
    print(f"direct sympy:    median {raw_med * 1e6:.0f} us, p99 {raw_p99 * 1e6:.0f} us")
    print(f"env overhead ratio (median): {env_med / raw_med:.2f}x")

    def sandbox():
        run_python("print(1)")

    def bare():
        subprocess.run([sys.executable, "-I", "-c", "print(1)"], capture_output=True, check=True)

    sandbox_med, sandbox_p99 = timed(sandbox, args.code_repeats)
    bare_med, _ = timed(bare, args.code_repeats)
    print(f"sandbox run: median {sandbox_med * 1e3:.1f} ms, p99 {sandbox_p99 * 1e3:.1f} ms")
    print(f"bare python -I: median {bare_med * 1e3:.1f} ms")
    print(f"sandbox overhead per Code call: {(sandbox_med - bare_med) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
