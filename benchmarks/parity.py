"""Engine parity on the offline suite: Lumos-I with the shipped adapters, engine by engine.

Each engine runs ``evaluate`` on the offline suite's 83 episodes (greedy, 32 in flight, as
``make demo``), in this process one after another. They are compared with a reference run: by
default the shipped hf run (``leaderboards/offline/lumos-i``, written by the hf backend in fp32
on a CPU), or, with ``--reference first``, the first engine's run. For each engine it prints the
wall time and the suite score, and against the reference: the paired difference of suite scores
with its 95% interval, the episodes written the same turn for turn, and the module calls that
saw the same prompt with how many wrote the same text (:mod:`lumos_gym.leaderboard.agreement`,
as ``lumos-gym leaderboard --compare`` counts them).

An engine is a backend name with constructor arguments after a colon, as ``--model-args``
takes them: ``openvino``, ``openvino:weights=int8``, ``openvino:dtype=bf16``, ``hf``,
``vllm:dtype=float32``.

Run: .venv/bin/python benchmarks/parity.py                 # openvino and int8 vs the hf run
     .venv/bin/python benchmarks/parity.py --engines hf openvino --reference first
     .venv/bin/python benchmarks/parity.py --engines openvino --limit 2   # a quick look
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from lumos_gym.cli.args import parse_model_args
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.leaderboard.agreement import agreement, overall
from lumos_gym.leaderboard.render import compare_entries, load_board

SHIPPED = Path(__file__).resolve().parents[1] / "leaderboards" / "offline" / "lumos-i"


def engine_options(engine: str) -> ModelOptions:
    """``backend[:key=value,...]`` as the models of a Lumos-I run (the shipped adapters)."""
    backend, _, args = engine.partition(":")
    options = parse_model_args([args]) if args else {}
    return ModelOptions(backend=backend, batch_size=32, options=options)


def run_engine(engine: str, out: Path, limit: int | None) -> tuple[Path, float]:
    """Evaluate Lumos-I with ``engine`` into ``out``; return the folder and the wall time."""
    started = time.perf_counter()
    evaluate(RunConfig("lumos-i", models=engine_options(engine), out=out, limit=limit,
                       progress=False))
    return out, time.perf_counter() - started


def compare(run: Path, reference: Path) -> str:
    """One row of the table: the run's score, its difference to the reference, the agreement."""
    board = load_board([run, reference])
    mine, theirs = board.entries[0], board.entries[1]
    if mine.dirs[0].path.resolve() != run.resolve():
        mine, theirs = theirs, mine
    comparison = compare_entries(mine, theirs, board.envs)
    suite = comparison.suite
    found = overall(agreement(comparison.pairing))
    interval = f"[{suite.ci95[0]:+.3f}, {suite.ci95[1]:+.3f}]" if suite.ci95 else "-"
    share = f"{found.share:.1%}" if found.share is not None else "-"
    episodes = f"{found.same_episodes}/{found.episodes}"
    calls = f"{found.total_same}/{found.total_calls}"
    return (f"{suite.mean_a:>6.3f}  {suite.diff:>+9.3f}  {interval:>17}  {episodes:>13}  "
            f"{calls:>11}  {share:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["openvino", "openvino:weights=int8"])
    parser.add_argument("--reference", default=str(SHIPPED),
                        help="a results folder to compare with, or 'first': the first engine's "
                        "run (default: the shipped hf run)")
    parser.add_argument("--limit", type=int, default=None, help="the most tasks per env")
    parser.add_argument("--out", default=None,
                        help="keep the runs' folders here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumos-gym-parity-") as scratch:
        root = Path(args.out or scratch)
        runs = []
        for n, engine in enumerate(args.engines):
            folder, wall = run_engine(engine, root / f"{n}-{engine.replace(':', '-')}",
                                      args.limit)
            runs.append((engine, folder, wall))
            print(f"  {engine}: {wall:.1f} s", flush=True)
        reference = runs[0][1] if args.reference == "first" else Path(args.reference)
        print(f"reference: {reference}")
        print(f"{'engine':>28}  {'wall s':>7}  {'suite':>6}  {'minus ref':>9}  "
              f"{'95% interval':>17}  {'same episodes':>13}  {'same calls':>11}  {'share':>7}")
        for engine, folder, wall in runs:
            shown = "(the reference)" if folder == reference else compare(folder, reference)
            print(f"{engine:>28}  {wall:>7.1f}  {shown}")


if __name__ == "__main__":
    main()
