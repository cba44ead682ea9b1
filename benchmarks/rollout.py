"""Rollout throughput: the same Lumos-I episodes sequentially (batch 1) and batched (8, 16).

Runs lumos-i with the default model (SmolLM2-135M-Instruct on the hf backend, greedy) on the
first N tasks of the bundled GSM8K sample at each batch size, in this one process, with the hf
backend's prefix cache off and on (emptied before every run, so no run reuses another's
prompts), and prints episodes per minute, generated tokens per second, the speed-up over
batch 1 without the cache, whether every episode's model outputs are identical to that
baseline's, and what the env, its tools and the model each take of the episodes' time.

Run: .venv/bin/python benchmarks/rollout.py [--episodes 16] [--batch-sizes 1 8 16]
"""

from __future__ import annotations

import argparse
import time

import lumos_gym  # noqa: F401
from lumos_gym.agents import make_agent
from lumos_gym.agents.runner import Runner
from lumos_gym.leaderboard.plan import episode_specs
from lumos_gym.leaderboard.suites import SuiteEntry
from lumos_gym.models.hf import HFBackend


def run_once(backend, batch_size, specs, max_new_tokens):
    agent = make_agent("lumos-i", max_new_tokens=max_new_tokens)
    runner = Runner(agent, {"planner": backend, "grounder": backend}, max_in_flight=batch_size)
    started = time.perf_counter()
    records = runner.run(specs)
    wall = time.perf_counter() - started
    return wall, {r.task_id: r for r in records}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="lumos/GSM8K-v0")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()

    specs = episode_specs([SuiteEntry(args.env, {}, args.episodes)])
    backends = {
        "off": HFBackend(args.model, batch_size=max(args.batch_sizes), prefix_cache=False),
        "on": HFBackend(args.model, batch_size=max(args.batch_sizes)),
    }
    print(f"model {args.model}: {backends['off'].info().details}")
    print(f"{len(specs)} lumos-i episodes of {args.env}, at most {args.max_new_tokens} new "
          "tokens a call")
    for backend in backends.values():
        run_once(backend, 1, specs[:1], args.max_new_tokens)  # warm-up: first-call costs
    baseline = None
    rows = []
    for cache, backend in backends.items():
        for batch_size in args.batch_sizes:
            if backend.prefix_cache is not None:
                backend.prefix_cache.clear()
            wall, records = run_once(backend, batch_size, specs, args.max_new_tokens)
            tokens = sum(r.output_tokens for r in records.values())
            outputs = {k: [t.get("output") for t in r.turns] for k, r in records.items()}
            if baseline is None:
                baseline = (wall, outputs)
            env = sum(r.env_s - r.tool_s for r in records.values())
            tools = sum(r.tool_s for r in records.values())
            model = sum(r.model_s for r in records.values())
            total = max(env + tools + model, 1e-9)
            rows.append((cache, batch_size, len(records) / wall * 60, tokens / wall,
                         baseline[0] / wall, outputs == baseline[1], env / total,
                         tools / total, model / total))
    print(f"{'prefix cache':>12}  {'batch':>5}  {'episodes/min':>12}  {'tokens/s':>8}  "
          f"{'speed-up':>8}  {'same outputs':>12}  {'env':>6}  {'tools':>6}  {'model':>6}")
    for cache, b, epm, tps, up, same, env, tools, model in rows:
        print(f"{cache:>12}  {b:>5}  {epm:>12.1f}  {tps:>8.1f}  {up:>7.2f}x  {str(same):>12}  "
              f"{env:>6.1%}  {tools:>6.1%}  {model:>6.1%}")
    for backend in backends.values():
        backend.close()


if __name__ == "__main__":
    main()
