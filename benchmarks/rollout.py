"""Rollout throughput per engine and batch size: the same Lumos-I episodes on each CPU engine.

Runs lumos-i with the default model (SmolLM2-135M-Instruct) and, as `make demo` does, the
shipped reference adapters (``--no-reference``: the base model), greedy, on the first N tasks
of an env, at each batch size, on each engine, all in this one process:

* ``hf``: the transformers backend (fp32, its prefix cache on, emptied before every run);
* ``openvino``: OpenVINO GenAI (fp32, its paged prefix cache on; the pipelines are rebuilt
  before every run, so no run reuses another's prompts);
* ``openvino-bf16``: the same in bf16 (on CPUs with AMX); ``openvino-nocache``: without the
  prefix cache; ``openvino-merged``: each adapter merged into its own export and pipeline
  (``openvino`` routes the planner and grounder through one); ``openvino-int8``: its large
  matmul weights in int8;
* ``hf-cuda`` and ``hf-cuda-fp32``: the transformers backend on the first CUDA GPU, in bf16 (its
  default there) or fp32 (``hf-cuda-nocache``: bf16 without the prefix cache);
* ``vllm`` and ``vllm-fp32``: vLLM in this process (its dtype, bf16 for SmolLM2, or fp32; its
  prefix caching on, the adapters as vLLM LoRAs);
* ``hf-mixed``, ``hf-cuda-fp32-mixed`` and ``vllm-mixed``: with ``mixed_batches``, the planner's
  and the grounder's requests in one batch, each with its own adapter.

Before the runs it measures what the cores give: fp32 matmul GFLOP/s with torch (every thread;
a prefill-shaped product, 2048 x 576 by 576 x 1536, and a square one) and with numpy; with a GPU
engine, also the GPU's matmul rate in that engine's dtype (16384 x 576 by 576 x 1536). Each run
prints episodes a minute, prompt tokens a second, generated tokens a second, the share of its
device's FLOP limit those tokens take (2 FLOPs per parameter per token, prompt and generated,
over the prefill-shaped matmul rate; a prefix cache skips prompt tokens, so it can pass 1), its
episodes a minute over the first run's (hf at batch 1 by default), and on how many of the
episodes both ran every model output equals the first run's (or, with ``--compare-to``, a run
saved by ``--save-outputs``, on another machine say).

``--modes`` runs each engine and batch size with the runner's continuous batching (each
backend's own session: on openvino a request joins the running batch at once) and/or by rounds
(``Runner(continuous=False)``: one ``generate`` call per backend a round), on the same episodes.

``--batch1-episodes N`` runs batch 1 on N of the episodes, spread evenly over them (a GPU's
batch 1 is slow beside its batch 32; generated suites list their tasks by level, so the first N
would be the shortest). An engine that fails is reported and the others still run.

Run: .venv/bin/python benchmarks/rollout.py [--episodes 16] [--batch-sizes 1 8 16]
     [--engines hf openvino openvino-merged openvino-int8 hf-cuda hf-cuda-fp32 vllm]
     [--modes continuous rounds]
     [--env lumos/MathWord-v0 --env-kwargs '{"split": "test", "num_tasks": 40}']
     [--save-outputs FILE] [--compare-to FILE]
"""

from __future__ import annotations

import argparse
import json
import time
import traceback

import numpy as np
import torch

import lumos_gym  # noqa: F401
from lumos_gym.agents import make_agent
from lumos_gym.agents.runner import Runner
from lumos_gym.evaluation.backends import with_reference
from lumos_gym.evaluation.plan import episode_specs
from lumos_gym.evaluation.suites import SuiteEntry
from lumos_gym.models.factory import ModelOptions, build_backends

ENGINES = {
    "hf": ("hf", {}),
    "openvino": ("openvino", {}),
    "openvino-bf16": ("openvino", {"dtype": "bf16"}),
    "openvino-nocache": ("openvino", {"prefix_cache": False}),
    "openvino-merged": ("openvino", {"adapter_mode": "merged"}),
    "openvino-int8": ("openvino", {"weights": "int8"}),
    "hf-cuda": ("hf", {"device": "cuda"}),
    "hf-cuda-fp32": ("hf", {"device": "cuda", "dtype": "float32"}),
    "hf-cuda-nocache": ("hf", {"device": "cuda", "prefix_cache": False}),
    "hf-cuda-fp32-mixed": ("hf", {"device": "cuda", "dtype": "float32", "mixed_batches": True}),
    "hf-mixed": ("hf", {"mixed_batches": True}),
    "vllm": ("vllm", {}),
    "vllm-fp32": ("vllm", {"dtype": "float32"}),
    "vllm-mixed": ("vllm", {"mixed_batches": True}),
}


def on_gpu(engine):
    """Whether ``engine`` runs on a CUDA GPU, and in which torch dtype."""
    backend, options = ENGINES[engine]
    if backend == "vllm" or options.get("device") == "cuda":
        return torch.float32 if options.get("dtype") == "float32" else torch.bfloat16
    return None


def matmul_gflops(shape, seconds=1.0, library="torch", dtype=None):
    """The best GFLOP/s of ``(m x k) @ (k x n)`` over about ``seconds`` of repeats.

    fp32 on the CPU with torch or numpy; with ``dtype``, in that dtype on the CUDA GPU.
    """
    m, k, n = shape
    if dtype is not None:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)

        def run():
            torch.matmul(a, b)
            torch.cuda.synchronize()
    elif library == "torch":
        a, b = torch.randn(m, k), torch.randn(k, n)
        run = lambda: torch.matmul(a, b)  # noqa: E731
    else:
        a = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
        b = np.random.default_rng(1).standard_normal((k, n), dtype=np.float32)
        run = lambda: a @ b  # noqa: E731
    run()
    best, spent = float("inf"), 0.0
    while spent < seconds:
        started = time.perf_counter()
        run()
        took = time.perf_counter() - started
        best, spent = min(best, took), spent + took
    return 2 * m * k * n / best / 1e9


def model_parameters(model):
    """Parameters of the model (the tied embedding counted once): its FLOPs per token / 2."""
    from lumos_gym.models.hf import HFBackend

    with HFBackend(model, prefix_cache=False) as backend:
        base = backend._shared.model
        return sum(p.numel() for p in base.parameters())


def build(engine, model, batch_size, reference):
    backend, options = ENGINES[engine]
    models = ModelOptions(backend=backend, model=None if reference else model,
                          batch_size=batch_size, options=dict(options), reference=reference)
    return build_backends(["planner", "grounder"], with_reference("lumos-i", models))


def reset(backends):
    """Empty every prefix cache, then warm each role up (first-call and compile costs)."""
    for backend in backends.values():
        shared = getattr(backend, "_shared", None)  # vllm keeps its own cache
        if getattr(shared, "prefix", None) is not None:
            shared.prefix.clear()
        if hasattr(shared, "pipelines"):
            shared.pipelines.clear()  # rebuilt on the next call, with an empty cache
    from lumos_gym.models.base import GenerationRequest

    for backend in backends.values():
        backend.generate([GenerationRequest(prompt="Hello", max_new_tokens=2)])
    for backend in backends.values():
        shared = getattr(backend, "_shared", None)
        if getattr(shared, "prefix", None) is not None:
            shared.prefix.clear()


def set_batch_size(backends, batch_size, options):
    """The batch each backend may decode at once (vllm: the requests in flight decide).

    On openvino with ``adapter_mode`` left to ``auto``, the adapters are routed or merged as a
    backend built at this batch size would have them (``reset`` then rebuilds the pipelines).
    """
    for backend in backends.values():
        shared = getattr(backend, "_shared", None)
        if shared is not None:
            shared.batch_size = batch_size
        if hasattr(shared, "settings"):
            shared.settings.batch_size = batch_size
        if hasattr(shared, "routed") and "adapter_mode" not in options:
            # only openvino backends have ``routed``: a GPU machine may lack the extra
            from lumos_gym.models.openvino_backend import _routes

            shared.routed = _routes("auto", shared.adapters, batch_size)


def spread(specs, n):
    """``n`` of ``specs`` at even steps (all of them for ``None``): generated suites list their
    tasks by level, so the first ``n`` would be the easiest and the shortest."""
    if n is None or n >= len(specs):
        return specs
    return [specs[i * len(specs) // n] for i in range(n)]


def run_once(backends, batch_size, specs, max_new_tokens, continuous=True, keep_prompts=False):
    agent = make_agent("lumos-i", max_new_tokens=max_new_tokens)
    runner = Runner(agent, backends, max_in_flight=batch_size, continuous=continuous,
                    keep_prompts=keep_prompts)
    started = time.perf_counter()
    records = runner.run(specs)
    return time.perf_counter() - started, {r.task_id: r for r in records}


HEADER = (f"{'engine':>14}  {'batch':>5}  {'mode':>10}  {'episodes/min':>12}  "
          f"{'prompt tok/s':>12}  {'gen tok/s':>9}  {'FLOP limit':>10}  {'vs first':>8}  "
          f"{'same outputs':>12}")


def row_text(row):
    engine, b, mode, epm, pps, gps, share, up, same = row
    return (f"{engine:>14}  {b:>5}  {mode:>10}  {epm:>12.1f}  {pps:>12.0f}  {gps:>9.1f}  "
            f"{share:>10.2%}  {up:>7.2f}x  {same:>12}")


def flop_limits(args):
    """Print the matmul rates of the cores (and of the GPU, for GPU engines) and the model's
    FLOP limit on each; return tokens a second at that limit, by torch dtype (None: the CPU)."""
    threads = torch.get_num_threads()
    prefill = matmul_gflops((2048, 576, 1536))
    square = matmul_gflops((2048, 2048, 2048))
    numpy_rate = matmul_gflops((2048, 576, 1536), library="numpy")
    params = model_parameters(args.model)
    flops_per_token = 2 * params
    limits = {None: prefill * 1e9 / flops_per_token}
    print(f"cores: {threads} torch threads; fp32 matmul {prefill:.0f} GFLOP/s (2048x576x1536), "
          f"{square:.0f} GFLOP/s (2048^3); numpy {numpy_rate:.0f} GFLOP/s (2048x576x1536)")
    for dtype in sorted({on_gpu(e) for e in args.engines} - {None}, key=str):
        if not torch.cuda.is_available():
            limits[dtype] = float("nan")
            print("no CUDA GPU here: the GPU engines will fail")
            continue
        rate = matmul_gflops((16384, 576, 1536), dtype=dtype)
        limits[dtype] = rate * 1e9 / flops_per_token
        print(f"GPU {torch.cuda.get_device_name()}: {str(dtype).removeprefix('torch.')} matmul "
              f"{rate:.0f} GFLOP/s (16384x576x1536), FLOP limit {limits[dtype]:.0f} tokens/s")
    print(f"model {args.model}: {params / 1e6:.1f} M parameters, "
          f"{flops_per_token / 1e9:.3f} GFLOP a token: the cores' FLOP limit is "
          f"{limits[None]:.0f} tokens/s")
    return limits


def run_engine(engine, args, specs, limit, baseline, saved):
    """Every batch size and mode of ``engine``: a row each, printed as it ends."""
    rows = []
    backends = build(engine, args.model, max(args.batch_sizes), not args.no_reference)
    try:
        for batch_size, mode in [(b, m) for b in args.batch_sizes for m in args.modes]:
            set_batch_size(backends, batch_size, ENGINES[engine][1])
            reset(backends)
            some = spread(specs, args.batch1_episodes) if batch_size == 1 else specs
            wall, records = run_once(backends, batch_size, some, args.max_new_tokens,
                                     continuous=mode == "continuous")
            prompt = sum(r.input_tokens for r in records.values())
            generated = sum(r.output_tokens for r in records.values())
            outputs = {k: [t.get("output") for t in r.turns] for k, r in records.items()}
            label = f"{engine} batch {batch_size} {mode}"
            saved[label] = outputs
            per_minute = len(records) / wall * 60
            baseline.setdefault("per_minute", per_minute)
            baseline.setdefault("outputs", outputs)
            common = [k for k in outputs if k in baseline["outputs"]]
            same = sum(outputs[k] == baseline["outputs"][k] for k in common)
            rows.append((engine, batch_size, mode, per_minute, prompt / wall, generated / wall,
                         (prompt + generated) / wall / limit,
                         per_minute / baseline["per_minute"], f"{same}/{len(common)}"))
            print(f"  {label}: {len(records)} episodes in {wall:.1f} s", flush=True)
            print(row_text(rows[-1]), flush=True)
    finally:
        backends.close()
    return rows


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="lumos/GSM8K-v0")
    parser.add_argument("--env-kwargs", type=json.loads, default={},
                        help="the env's keyword arguments, as JSON")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--batch1-episodes", type=int, default=None,
                        help="run batch 1 on N episodes spread evenly over the others")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--engines", nargs="+", default=["hf", "openvino"], choices=ENGINES)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--modes", nargs="+", default=["continuous"],
                        choices=["continuous", "rounds"],
                        help="the runner's continuous batching, or one generate call a round")
    parser.add_argument("--no-reference", action="store_true",
                        help="the base model instead of the shipped Lumos-I adapters")
    parser.add_argument("--save-outputs", default=None,
                        help="write every run's model outputs (JSON, by run and task)")
    parser.add_argument("--compare-to", default=None,
                        help="count outputs equal to the first run saved in this file instead")
    return parser.parse_args()


def main():
    args = parse_args()
    limits = flop_limits(args)
    specs = episode_specs([SuiteEntry(args.env, args.env_kwargs, args.episodes)])
    adapters = "base model" if args.no_reference else "reference adapters"
    print(f"{len(specs)} lumos-i episodes of {args.env} ({adapters}), greedy, at most "
          f"{args.max_new_tokens} new tokens a call", flush=True)
    baseline, saved, rows = {}, {}, []
    if args.compare_to:
        first, outputs = next(iter(json.loads(open(args.compare_to).read()).items()))
        baseline["outputs"] = outputs
        print(f"outputs compared with {first!r} of {args.compare_to}")
    for engine in args.engines:
        try:
            rows += run_engine(engine, args, specs, limits[on_gpu(engine)], baseline, saved)
        except Exception:  # noqa: BLE001 - one engine failing leaves the others' rows
            print(f"  {engine} failed:\n{traceback.format_exc()}", flush=True)
        if args.save_outputs:
            with open(args.save_outputs, "w") as out:
                json.dump(saved, out)
    print(HEADER)
    for row in rows:
        print(row_text(row))


if __name__ == "__main__":
    main()
