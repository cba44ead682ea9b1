"""Scale-out: the same evaluation in one process and on Ray actors (``evaluate --ray``).

Runs ``lumos_gym.evaluation.evaluate.evaluate`` twice on one suite, in this process and then with
``ray=True, workers=N`` (a local Ray instance started for it, its start-up timed apart), and
prints the wall time of each, the speed-up, and whether the two runs wrote the same episodes
(status, reward, prediction and every turn) and the same summary apart from timing and
provenance. With ``--served`` both runs are clients of one ``lumos-gym serve`` process (the
default model, started here): the in-process run keeps ``--batch-size`` requests in flight,
each Ray actor as many.

Run: .venv/bin/python benchmarks/scaleout.py [--agent oracle --suite code] [--workers 2]
     .venv/bin/python benchmarks/scaleout.py --agent lumos-i --suite offline --limit 2
     .venv/bin/python benchmarks/scaleout.py --served --agent lumos-o --env GSM8K-v0 --limit 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lumos_gym.agents.base import AgentConfig
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.results import read_episodes
from lumos_gym.evaluation.summary import comparable


def episodes(folder: Path) -> list[tuple]:
    rows, _ = read_episodes(folder / "episodes.jsonl")
    return sorted((r["key"], r["status"], r["reward"], r["prediction"],
                   json.dumps(r["turns"], sort_keys=True)) for r in rows.values())


@contextlib.contextmanager
def server(model: str):
    """``lumos-gym serve MODEL`` on a free port; yields its base URL."""
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "lumos_gym.cli", "serve", "--model", model, "--port", str(port),
         "--served-model-name", "served"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the model server did not start")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="oracle")
    parser.add_argument("--suite", default=None, help="default: code (when no --env)")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--served", action="store_true", help="clients of one lumos-gym serve")
    parser.add_argument("--model", default="smollm2-135m", help="the served model")
    args = parser.parse_args()
    suite = args.suite or (None if args.env else "code")
    config = AgentConfig(max_new_tokens=args.max_new_tokens)

    with contextlib.ExitStack() as stack:
        models = ModelOptions(batch_size=args.batch_size)
        if args.served:
            url = stack.enter_context(server(args.model))
            models = ModelOptions(backend="openai", base_url=url, model="served",
                                  batch_size=args.batch_size)
        out = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        common = {"envs": args.env, "suite": suite, "limit": args.limit, "models": models,
                  "agent_config": config, "progress": False}
        started = time.perf_counter()
        local = evaluate(RunConfig(args.agent, out=out / "local", **common))
        local_s = time.perf_counter() - started

        import ray

        started = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
                 configure_logging=True, logging_level="ERROR")
        init_s = time.perf_counter() - started
        try:
            started = time.perf_counter()
            spread = evaluate(RunConfig(args.agent, out=out / "ray", ray=True,
                                        workers=args.workers, **common))
            ray_s = time.perf_counter() - started
        finally:
            ray.shutdown()
        same_episodes = episodes(out / "local") == episodes(out / "ray")
        same_summary = comparable(local.summary) == comparable(spread.summary)

    n = local.summary["overall"]["episodes"]
    what = f"{args.agent} on {suite or ', '.join(args.env)}" + (
        f" (first {args.limit} per env)" if args.limit else ""
    )
    backend = f"one served {args.model}" if args.served else "models in each process"
    print(f"{what}: {n} episodes, {backend}")
    print(f"  one process (batch {args.batch_size}):  {local_s:7.1f} s")
    print(f"  Ray, {args.workers} workers:          {ray_s:7.1f} s  "
          f"(+ {init_s:.1f} s to start Ray)")
    with_start = local_s / (ray_s + init_s)
    print(f"  speed-up: {local_s / ray_s:.2f}x (with Ray's start: {with_start:.2f}x)")
    print(f"  same episodes: {same_episodes}; same summary (timing, provenance apart): "
          f"{same_summary}")


if __name__ == "__main__":
    main()
