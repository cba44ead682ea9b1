"""Wall-clock bounds that the unit tests check without timing them.

A unit test asserts what happened (the sandbox killed the program with SIGXCPU, the calculator
refused a power tower); how long it took depends on the machine's load, so the bounds the tests
used to assert are measured here instead: the sandbox's wall and CPU limits, a program's
background child not holding the run, the shop catalogue's generation, the calculator's refusal
of formula bombs and ``SolveEquation``'s time limit.

Run: .venv/bin/python benchmarks/time_bounds.py [--repeats N]
Prints, per case, the least, median and most seconds of N runs beside the case's bound, and
exits 1 when a run is outside its bound.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from lumos_gym.actions import Action, parse_action
from lumos_gym.envs.web.shop.catalog import generate_catalog
from lumos_gym.errors import ToolError
from lumos_gym.tools import make_tool
from lumos_gym.tools.base import ToolContext
from lumos_gym.tools.math import limits as math_limits
from lumos_gym.tools.sandbox import run_python

#: Formulas the calculator must refuse at once (sizes are checked before anything is computed).
BOMBS = (
    "9^9^9^9",
    "2**10**10",
    "10^10^10",
    "sqrt(2)^(10^9)",
    "(1 + sqrt(2))^(10^999)",
    "pi^(10^999)",
    "exp(exp(100))",
    "sin(exp(exp(100)))",
    "factorial(factorial(10))",
    "binomial(10^6, 5*10^5)",
)


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)


def sandbox_loop_timeout() -> None:
    result = run_python("while True:\n    pass\n", timeout=1.0)
    _expect(result.timed_out and result.signal == "SIGKILL", "the loop was not killed")


def sandbox_sleeper_timeout() -> None:
    result = run_python("import time; time.sleep(60)", timeout=0.5)
    _expect(result.timed_out, "the sleeper was not killed")


def sandbox_cpu_limit() -> None:
    result = run_python("while True:\n    pass\n", timeout=5.0, cpu_seconds=1)
    _expect(not result.timed_out and result.signal == "SIGXCPU", "no SIGXCPU")


def sandbox_background_child() -> None:
    program = "import subprocess; subprocess.Popen(['sleep', '30']); print('started')"
    result = run_python(program, timeout=10.0)
    _expect(result.ok and result.stdout == "started\n", "the run failed")


def shop_catalogue() -> None:
    _expect(len(generate_catalog(seed=3, num_products=1200)) == 1200, "wrong product count")


def calculator_bomb(formula: str) -> Callable[[], None]:
    def refuse() -> None:
        action = Action(("R99",), "Calculator", formula)
        try:
            make_tool("Calculator").run(action, ToolContext(variables={}))
        except ToolError:
            return
        raise AssertionError(f"{formula} was computed")

    return refuse


def solve_time_limit() -> None:
    action = parse_action("R1 = SolveEquation(exp(x) = x^10)")
    saved, math_limits.TIME_LIMIT = math_limits.TIME_LIMIT, 0.05
    try:
        make_tool(action.name).run(action.without_result(), ToolContext(variables={}))
    except ToolError as e:
        _expect("gave up" in str(e), f"another error: {e}")
        return
    finally:
        math_limits.TIME_LIMIT = saved
    raise AssertionError("SolveEquation did not give up")


# The worker a time limit stopped is retired and a successor starts at once in the background
# (about half a second): a call on a ready worker, and one made straight after the last.
solve_time_limit_back_to_back = solve_time_limit


def solve_time_limit_ready() -> None:
    solve_time_limit()


def _a_worker_ready() -> None:
    math_limits._WORKERS.wait_started()
    action = parse_action("R1 = Calculator(1 + 1)")  # takes the idle worker, or starts one
    make_tool(action.name).run(action.without_result(), ToolContext(variables={}))


solve_time_limit_ready.before = _a_worker_ready  # type: ignore[attr-defined]


#: Name, work, and the (low, high) bound in seconds the unit tests used to assert.
CASES: list[tuple[str, Callable[[], None], tuple[float, float]]] = [
    ("sandbox: wall timeout 1 s of a loop", sandbox_loop_timeout, (1.0, 2.0)),
    ("sandbox: wall timeout 0.5 s of a sleeper", sandbox_sleeper_timeout, (0.0, 1.5)),
    ("sandbox: cpu_seconds=1 of a loop", sandbox_cpu_limit, (0.0, 3.0)),
    ("sandbox: a background child holds stdout", sandbox_background_child, (0.0, 3.0)),
    ("shop: a 1,200-product catalogue", shop_catalogue, (0.0, 2.0)),
    *[(f"calculator refuses {f}", calculator_bomb(f), (0.0, 1.0)) for f in BOMBS],
    ("SolveEquation, TIME_LIMIT 0.05 s, worker ready", solve_time_limit_ready, (0.0, 1.0)),
    ("SolveEquation, TIME_LIMIT 0.05 s, back to back", solve_time_limit_back_to_back, (0.0, 2.0)),
]


def timed(work: Callable[[], None], repeats: int) -> list[float]:
    times = []
    before = getattr(work, "before", None)  # set-up left out of the time
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.monotonic()
        work()
        times.append(time.monotonic() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    failed = 0
    print(f"{'case':46s} {'min':>7s} {'median':>7s} {'max':>7s}  bound")
    for name, work, (low, high) in CASES:
        times = timed(work, args.repeats)
        inside = low <= min(times) and max(times) < high
        failed += not inside
        print(f"{name:46s} {min(times):7.3f} {statistics.median(times):7.3f} {max(times):7.3f}  "
              f"[{low:g}, {high:g}) s{'' if inside else '  OUTSIDE'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
