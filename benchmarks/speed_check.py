"""Speed against the machine's own limit: its peaks, then the demo and rollouts measured on them.

One run on the machine at hand, in this one process, prints:

1. *The machine's peaks*, measured once: torch's fp32 matmul GFLOP/s on every thread (the
   prefill-shaped 2048 x 576 by 576 x 1536, and 2048^3; ``rollout.py``'s ``matmul_gflops``),
   the same in bf16, and int8 with ``torch._int_mm`` in GOP/s ("n/a" where it does not run; a
   product whose one call would take over 10 s, a slow path on a CPU without the instructions,
   is skipped); memory bandwidth from a 256 MB copy (bytes read + written over the best of four
   or more) by numpy (one thread) and torch (every thread); the CPU's model, which of avx2,
   avx512f, avx512_bf16, amx_bf16 and amx_int8 /proc/cpuinfo lists, and the precisions OpenVINO
   says the CPU computes natively (``native_precisions("CPU")``). Then the model's parameters
   (the tied embedding once, as ``rollout.py`` counts them), at 2 FLOPs a parameter a token, and
   the **fp32 FLOP limit** in tokens a second (the prefill-shaped fp32 rate over that); and the
   memory bound on decoding: a step reads every fp32 weight once, so at most bandwidth / (4 x
   parameters) steps a second (a step makes a token per request in flight).
2. *The demo*: ``lumos-gym evaluate --agent lumos-i`` as ``make demo`` runs it (offline suite,
   default engine, shipped adapters, batch 32), through the CLI's ``main`` in this process into
   a temporary ``--out``; a run that added to the lumos-gym cache (exports, converted weights,
   games) was a warm-up, reported apart, and is repeated. Printed: the evaluation's wall (the
   imports were done before it), the episodes' seconds (the span of ``evaluate``'s "tokens in
   S s" line, first episode to last record), the records' prompt and generated tokens, and
   the **fraction of the fp32 limit**: computed tokens x FLOPs a token / seconds / the
   prefill-shaped fp32 rate, over the wall and over the episodes' seconds. The records count
   the tokens the engine was *given*; its prefix cache skips prompt tokens it still holds, so
   the run keeps its prompts (``--keep-prompts``, the one flag ``make demo`` does not pass) and
   :func:`computed_tokens` counts the fewest prompt tokens it can have computed (a cache that
   evicts nothing). The fraction is therefore a lower bound; the QA tool's own model calls
   (inside its env) and attention's FLOPs are not counted either. The fraction of the tokens
   given is printed beside it.
3. *Where the demo's time goes*: start-up (the wall less the episodes' seconds: the plan, the
   models loaded or exported, the envs' first build); the records' summed ``model_s`` (the
   runner's time in the engine's session: a batched step's time is split among the requests in
   flight, so the sum counts the engine's time once), ``env_s`` (``env.step``, tools included)
   and ``tool_s`` (the tools' part, also per env: on the QA envs it holds the QA tool's model);
   and the rest (resets, the agent's code, writing records). The runner is one thread, so these
   add up. Then the batch's idle places: :class:`Occupancy` counts the requests in flight at
   each of the engine's steps, weighted by the step's seconds (the mean, and the seconds with
   fewer than 32 and fewer than 8 in flight: the tail of a run, when the last episodes decode
   in a batch that has emptied). Per role (planner, grounder) is left out: at batch 32 both
   roles decode in the same steps of one routed OpenVINO pipeline, so a step has no single
   role, and timing each role's backend would mean building the backends outside
   ``evaluate``.
4. *The default engine against hf*: the offline suite with ``--limit 2`` (14 episodes) on the
   default engine and with ``--backend hf``: the wall and episodes' seconds of each, their
   ratios, and the episodes whose every model output is the same. The QA tool's model stays on
   the default engine in both (it follows ``$LUMOS_GYM_BACKEND``, not ``--backend``).
5. *Batch 8 against batch 1*: the 24 bundled GSM8K episodes on the default engine with
   ``rollout.py``'s ``build``, ``set_batch_size``, ``reset`` and ``run_once`` (at most 64 new
   tokens a call, as its tables; each run from an empty prefix cache): episodes a minute, the
   share of the fp32 limit their computed tokens take (as in 2), the ratio, and the episodes
   alike.

``--quick``: tiny versions of 2, 4 and 5 (``--limit 1``; 4 GSM8K episodes) to check the
script; ``--skip demo,hf,batch`` leaves parts out; ``--json FILE`` saves every figure. A last
block gives one line a figure, in the shape of the README's speed table.

Run: .venv/bin/python benchmarks/speed_check.py [--quick] [--skip demo,hf,batch] [--json FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import tempfile
import time
import traceback
import weakref
from collections import defaultdict
from pathlib import Path

import numpy as np
import rollout  # benchmarks/rollout.py: this script's folder is on sys.path
import torch

from lumos_gym.cli import main as cli_main
from lumos_gym.evaluation.plan import episode_specs
from lumos_gym.evaluation.suites import SuiteEntry
from lumos_gym.jsonl import cache_root
from lumos_gym.models.factory import default_backend
from lumos_gym.models.hf.loading import load_tokenizer
from lumos_gym.models.sources import resolve_model

MODEL = "smollm2-135m"
PREFILL, SQUARE = (2048, 576, 1536), (2048, 2048, 2048)
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8")
SLOWEST_CALL_S = 10.0


def best_seconds(run, seconds=1.0, calls=1):
    """The quickest of ``run()`` calls over about ``seconds``, at least ``calls`` of them."""
    took = []
    while sum(took) < seconds or len(took) < calls:
        started = time.perf_counter()
        run()
        took.append(time.perf_counter() - started)
    return min(took)


def cpu_matmul(shape, dtype):
    """G(FL)OP/s of ``(m x k) @ (k x n)`` in bf16 or int8 on the cores (None: cannot run)."""
    m, k, n = shape
    if dtype is torch.int8:
        a, b = (torch.randint(-128, 128, size, dtype=torch.int8) for size in ((m, k), (k, n)))
        op = torch._int_mm
    else:
        a, b, op = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype), torch.matmul
    try:
        return 2 * m * k * n / best_seconds(lambda: op(a, b)) / 1e9
    except (RuntimeError, NotImplementedError):  # e.g. no int8 matmul kernel on this CPU
        return None


def copy_gbps(src, dst, copy):
    """GB/s of ``copy(dst, src)``: bytes read + written over the best of several copies (the
    first one also maps ``dst``'s pages)."""
    return 2 * src.nbytes / best_seconds(lambda: copy(dst, src), 2.0, calls=4) / 1e9


def cpu_info():
    """The CPU's model name and which of :data:`FLAGS` it lists."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    fields = dict(line.split(":", 1) for line in reversed(text.splitlines()) if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return fields.get("model name", "unknown"), [f for f in FLAGS if f in flags]


def openvino_precisions():
    try:
        from lumos_gym.models.openvino_backend import native_precisions
    except ImportError:
        return None
    return sorted(native_precisions("CPU") - {"EXPORT_IMPORT"})


def shown(rate, unit):
    return "n/a" if rate is None else f"{rate:,.1f} {unit}"


def peaks(fig, rows):
    """Measure and print the machine's peaks and the model's limits (into ``fig``)."""
    model, flags = cpu_info()
    precisions = openvino_precisions()
    rates = {"fp32": {"prefill": rollout.matmul_gflops(PREFILL),
                      "square": rollout.matmul_gflops(SQUARE)}}
    for name, dtype in (("bf16", torch.bfloat16), ("int8", torch.int8)):
        rate = cpu_matmul(PREFILL, dtype)
        slow = rate is None or 2 * np.prod(SQUARE) / (rate * 1e9) > SLOWEST_CALL_S
        rates[name] = {"prefill": rate, "square": None if slow else cpu_matmul(SQUARE, dtype)}
    array, tensor = np.ones(2**26, dtype=np.float32), torch.ones(2**26)  # 256 MB each
    memory = {"numpy_1_thread": copy_gbps(array, np.empty_like(array), np.copyto),
              "torch_all_threads": copy_gbps(tensor, torch.empty_like(tensor), torch.Tensor.copy_)}
    del array, tensor
    params = rollout.model_parameters(MODEL)
    limit = rates["fp32"]["prefill"] * 1e9 / (2 * params)
    steps = max(memory.values()) * 1e9 / (4 * params)
    threads = torch.get_num_threads()
    fig["machine"] = {"cpu": model, "flags": flags, "openvino_native": precisions,
                      "torch_threads": threads, "matmul": rates, "copy_gbps": memory,
                      "parameters": params, "fp32_limit_tokens_s": limit,
                      "decode_steps_s_bound": steps}
    native = ", ".join(precisions) if precisions is not None else "n/a (no openvino)"
    print(f"CPU: {model}; {threads} torch threads; flags {' '.join(flags) or '-'} (of "
          f"{' '.join(FLAGS)}); OpenVINO computes natively: {native}")
    for name, unit in (("fp32", "GFLOP/s"), ("bf16", "GFLOP/s"), ("int8", "GOP/s")):
        what = f"{name} matmul{' (torch._int_mm)' if name == 'int8' else ''}"
        got = [shown(rates[name][shape], unit) for shape in ("prefill", "square")]
        if rates[name]["prefill"] is not None and rates[name]["square"] is None:
            got[1] = f"skipped (a call over {SLOWEST_CALL_S:.0f} s)"
        print(f"{what}, 2048x576x1536 / 2048^3: {got[0]} / {got[1]}")
        rows.append((f"{what}, 2048×576×1536 / 2048³", " / ".join(got)))
    copies = f"{memory['numpy_1_thread']:.1f} / {memory['torch_all_threads']:.1f} GB/s"
    print(f"memory: a 256 MB copy, read + written, numpy (one thread) / torch (every thread): "
          f"{copies}")
    print(f"model {MODEL}: {params / 1e6:.1f} M parameters, {2 * params / 1e9:.3f} GFLOP a "
          f"token: fp32 FLOP limit {limit:,.0f} tokens/s; a decode step reads "
          f"{4 * params / 1e6:.0f} MB of fp32 weights: at most {steps:.0f} steps/s")
    rows += [("a 256 MB copy, read + written: numpy 1 thread / torch all threads", copies),
             (f"fp32 FLOP limit of {MODEL} (2 FLOPs a parameter a token)",
              f"{limit:,.0f} tokens/s"),
             ("memory bound on a decode step (fp32 weights read once)", f"{steps:.0f} steps/s")]


def cache_entries(depth=3):
    """The paths under the lumos-gym cache, ``depth`` levels deep (exports, weights, games)."""
    root, found = cache_root(), set()

    def walk(folder, level):
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                found.add(os.path.relpath(entry.path, root))
                if level < depth and entry.is_dir(follow_symlinks=False):
                    walk(entry.path, level + 1)

    walk(root, 1)
    return found


def evaluate_once(flags):
    """One in-process ``lumos-gym evaluate --agent lumos-i FLAGS`` into a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="lumos-gym-speed-") as scratch:
        out, printed = Path(scratch) / "run", io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(printed):
            code = cli_main(["evaluate", "--agent", "lumos-i", "--no-progress",
                             "--out", str(out), *flags])
        wall = time.perf_counter() - started
        span = re.search(r"tokens in ([\d.]+) s", printed.getvalue())
        if code != 0 or span is None:
            raise RuntimeError(f"evaluate {flags}: exit {code}, no 'tokens in S s' line:\n"
                               f"{printed.getvalue()}")
        with open(out / "episodes.jsonl") as lines:
            records = [json.loads(line) for line in lines if line.strip()]
    return {"wall": wall, "episodes_s": float(span.group(1)), "records": records}


def evaluate_warm(flags, label):
    """:func:`evaluate_once`, run again when the first run filled the cache (a warm-up)."""
    before = cache_entries()
    run = evaluate_once(flags)
    built = sorted(cache_entries() - before)
    if built:
        warm = {"wall": run["wall"], "startup": run["wall"] - run["episodes_s"], "built": built}
        print(f"  {label}: warm-up: the run added {len(built)} cache entries ("
              f"{', '.join(built[:3])}{', ...' if len(built) > 3 else ''}); start-up "
              f"{warm['startup']:.1f} s of its {warm['wall']:.1f} s; running it again",
              flush=True)
        run = {**evaluate_once(flags), "warm_up": warm}
    return run


def outputs(turns):
    return [t.get("output") for t in turns if "output" in t]


def alike(first, second):
    """Episodes (by key) of ``first`` whose every model output equals ``second``'s."""
    theirs = {r["key"]: outputs(r["turns"]) for r in second}
    common = [r for r in first if r["key"] in theirs]
    return sum(outputs(r["turns"]) == theirs[r["key"]] for r in common), len(common)


def computed_tokens(episodes, tokenizer):
    """The fewest prompt tokens the engine can have computed for ``episodes`` (turn lists).

    The engine's prefix cache skips a prompt's tokens whose keys and values it still holds. Here
    the cache is taken to keep everything it ever saw: one trie of token ids a role (a routed
    export shifts each adapter's ids, so two roles never share an entry), and each module call,
    in the records' order, computes only its prompt beyond the longest prefix already in its
    role's trie; its prompt and its output then join the trie. A real cache evicts and works in
    blocks, so the engine computed at least this many. Prompts are rendered as the openvino
    backend renders them (the chat template, then the ids without special tokens).
    """
    tries, computed = defaultdict(dict), 0
    for turns in episodes:
        for turn in turns:
            if "prompt" not in turn or "role" not in turn:
                continue
            prompt = turn["prompt"]
            if not isinstance(prompt, str):
                prompt = tokenizer.apply_chat_template(
                    [dict(m) for m in prompt], tokenize=False, add_generation_prompt=True)
            ids = tokenizer.encode(prompt, add_special_tokens=False)
            output = tokenizer.encode(turn.get("output") or "", add_special_tokens=False)
            node, seen, shared = tries[turn["role"]], 0, True
            for i, token in enumerate(ids + output):
                shared = shared and token in node
                if shared and i < len(ids):
                    seen = i + 1
                node = node.setdefault(token, {})
            computed += len(ids) - seen
    return computed


class Occupancy:
    """The requests in flight while the default engine steps, by seconds (a probe).

    Patches the openvino backend's session (``submit`` and ``collect``) for the ``with`` block:
    each ``collect`` (the pipeline's steps) adds its seconds to the number of requests in flight
    in every session of its pipeline when it began (the planner's and the grounder's sessions
    step one routed pipeline). ``busiest()`` gives the histogram of the pipeline that stepped
    longest: the agent's, not the QA tool's (whose ``generate`` steps a pipeline of its own).
    """

    def __init__(self):
        self.runs, self.sessions = {}, weakref.WeakSet()

    def __enter__(self):
        from lumos_gym.models.openvino_backend.backend import _Session  # the probe's target

        self.target, self.originals = _Session, (_Session.submit, _Session.collect)
        submit, collect = self.originals
        runs, sessions = self.runs, self.sessions

        def submitted(session, request):
            sessions.add(session)
            return submit(session, request)

        def collected(session, wait=True):
            shared = session._backend._shared
            flight = sum(len(s._running) for s in sessions
                         if s._backend._shared is shared)
            started = time.perf_counter()
            try:
                return collect(session, wait)
            finally:
                seconds = runs.setdefault(id(shared), defaultdict(float))
                seconds[flight] += time.perf_counter() - started

        _Session.submit, _Session.collect = submitted, collected
        return self

    def __exit__(self, *exc):
        self.target.submit, self.target.collect = self.originals

    def busiest(self):
        """The histogram of the pipeline that stepped longest: the planner's and grounder's."""
        return dict(max(self.runs.values(), key=lambda h: sum(h.values()), default={}))


def occupancy_text(seconds, batch):
    """``mean 27.1 of 32 in flight; 12.3 s of 118 s with fewer than 8``, and the figures."""
    total = sum(seconds.values())
    mean = sum(k * s for k, s in seconds.items()) / total if total else 0.0
    few = sum(s for k, s in seconds.items() if k < batch // 4)
    short = sum(s for k, s in seconds.items() if k < batch)
    text = (f"the engine's {total:.1f} s: {mean:.1f} of {batch} requests in flight on average "
            f"(time-weighted); {short:.1f} s with fewer than {batch}, {few:.1f} s with fewer "
            f"than {batch // 4}")
    return text, {"engine_s": total, "mean_in_flight": mean, "below_batch_s": short,
                  "below_quarter_s": few}


def tokenizer_of(model):
    """The tokenizer of ``model`` (an alias is built in the cache by its first use)."""
    return load_tokenizer(resolve_model(model).path, local=True)


def demo(args, fig, rows):
    machine, engine = fig["machine"], default_backend()
    flags = (["--limit", "1"] if args.quick else []) + ["--keep-prompts"]
    print(f"\nthe demo: lumos-gym evaluate --agent lumos-i {' '.join(flags)} (engine {engine},"
          " shipped adapters, batch 32)", flush=True)
    with Occupancy() as probe:
        run = evaluate_warm(flags, "demo")
    flight_text, flight = occupancy_text(probe.busiest(), 32)
    records, wall, span = run["records"], run["wall"], run["episodes_s"]
    prompt = sum(r["input_tokens"] for r in records)
    generated = sum(r["output_tokens"] for r in records)
    computed = computed_tokens([r["turns"] for r in records], tokenizer_of(MODEL))
    flops = (computed + generated) * 2 * machine["parameters"]
    peak = machine["matmul"]["fp32"]["prefill"] * 1e9
    share_wall, share_span = flops / wall / peak, flops / span / peak
    given = (prompt + generated) * 2 * machine["parameters"] / span / peak
    sums = {k: sum(r[k] for r in records) for k in ("model_s", "env_s", "tool_s")}
    rest = span - sums["model_s"] - sums["env_s"]
    tools = defaultdict(float)
    for r in records:
        tools[r["env_id"].removeprefix("lumos/")] += r["tool_s"]
    fig["demo"] = {"engine": engine, "flags": flags, "wall_s": wall, "episodes_s": span,
                   "startup_s": wall - span, "episodes": len(records), "prompt_tokens": prompt,
                   "computed_prompt_tokens_at_least": computed, "generated_tokens": generated,
                   "flops": flops, "fp32_share_wall": share_wall,
                   "fp32_share_episodes": share_span, "fp32_share_given_episodes": given,
                   "generated_tokens_s": generated / span,
                   **sums, "rest_s": rest, "tool_s_by_env": dict(tools),
                   "in_flight": flight, "warm_up": run.get("warm_up")}
    print(f"  {len(records)} episodes: wall {wall:.1f} s (start-up {wall - span:.1f} s, "
          f"episodes {span:.1f} s); tokens given: {prompt:,} prompt + {generated:,} generated;"
          f" computed: at least {computed:,} prompt (the rest in the prefix cache) + "
          f"{generated:,} generated: {flops / 1e12:.2f} TFLOP")
    print(f"  fraction of the fp32 limit: at least {share_wall:.1%} over the wall, "
          f"{share_span:.1%} over the episodes' seconds (computed tokens; the QA tool's model "
          f"and attention not counted); the tokens given would make {given:.1%}")
    print(f"  generated {generated / span:.1f} tokens/s over the episodes' seconds; decode steps: "
          f"at most {machine['decode_steps_s_bound']:.0f}/s from memory")
    print(f"  where the time goes: start-up {wall - span:.1f} s; of the episodes' {span:.1f} s: "
          f"model {sums['model_s']:.1f} s, env steps {sums['env_s']:.1f} s (tools "
          f"{sums['tool_s']:.1f} s of it), rest {rest:.1f} s")
    print(f"  the batch: {flight_text}")
    busy = sorted(((s, e) for e, s in tools.items() if s > 0.05), reverse=True)
    print("  tools' seconds by env (on the QA envs, the QA tool's model included): "
          + (", ".join(f"{e} {s:.1f} s" for s, e in busy) or "-"))
    what = "`make demo`" + (" --limit 1" if args.quick else "")
    rows += [(f"{what}: {len(records)} episodes on {engine}, wall (start-up)",
              f"{wall:.1f} s ({wall - span:.1f} s)"),
             (f"{what}: share of the fp32 FLOP limit, over the wall / the episodes",
              f"{share_wall:.1%} / {share_span:.1%}"),
             (f"{what}: model / env steps (tools) / rest of the episodes' seconds",
              f"{sums['model_s']:.1f} / {sums['env_s']:.1f} ({sums['tool_s']:.1f}) / "
              f"{rest:.1f} s")]


def against_hf(args, fig, rows):
    limit, engine = ("1" if args.quick else "2"), default_backend()
    print(f"\n{engine} against hf: the offline suite, --limit {limit}", flush=True)
    runs = {}
    for name, extra in ((engine, []), ("hf", ["--backend", "hf"])):
        r = runs[name] = evaluate_warm(["--limit", limit, *extra], name)
        print(f"  {name}: {len(r['records'])} episodes, wall {r['wall']:.1f} s, episodes "
              f"{r['episodes_s']:.1f} s", flush=True)
    mine, hf = runs[engine], runs["hf"]
    same, common = alike(mine["records"], hf["records"])
    fig["hf"] = {name: {"wall_s": r["wall"], "episodes_s": r["episodes_s"],
                        "episodes": len(r["records"])} for name, r in runs.items()}
    fig["hf"]["same_episodes"] = [same, common]
    wall_ratio, span_ratio = hf["wall"] / mine["wall"], hf["episodes_s"] / mine["episodes_s"]
    print(f"  hf over {engine}: {wall_ratio:.2f}x the wall, {span_ratio:.2f}x the episodes' "
          f"seconds; {same}/{common} episodes the same")
    rows.append((f"offline suite --limit {limit}: {engine} vs hf, wall (episodes the same)",
                 f"{mine['wall']:.1f} s vs {hf['wall']:.1f} s: {wall_ratio:.2f}× "
                 f"({same}/{common})"))


def batch_sizes(args, fig, rows):
    engine, machine = default_backend(), fig["machine"]
    if engine not in rollout.ENGINES:
        print(f"\nbatch 8 against 1: {engine} is not an engine of rollout.py; left out")
        return
    every = episode_specs([SuiteEntry("lumos/GSM8K-v0", {}, 24)])
    specs = rollout.spread(every, 4 if args.quick else None)
    print(f"\nbatch 8 against 1: {len(specs)} GSM8K episodes on {engine}, at most 64 new "
          "tokens a call", flush=True)
    flop_rate = machine["matmul"]["fp32"]["prefill"] * 1e9 / (2 * machine["parameters"])
    backends, found, tokenizer = rollout.build(engine, MODEL, 8, True), {}, tokenizer_of(MODEL)
    try:
        for size in (1, 8):
            rollout.set_batch_size(backends, size, rollout.ENGINES[engine][1])
            rollout.reset(backends)
            wall, records = rollout.run_once(backends, size, specs, 64, keep_prompts=True)
            tokens = computed_tokens([r.turns for r in records.values()], tokenizer)
            tokens += sum(r.output_tokens for r in records.values())
            found[size] = {"episodes_min": len(records) / wall * 60,
                           "fp32_share": tokens / wall / flop_rate,
                           "outputs": {k: outputs(r.turns) for k, r in records.items()}}
            print(f"  batch {size}: {len(records)} episodes in {wall:.1f} s: "
                  f"{found[size]['episodes_min']:.1f} episodes/min, "
                  f"at least {found[size]['fp32_share']:.1%} of the fp32 limit (computed "
                  "tokens)", flush=True)
    finally:
        backends.close()
    one, eight = found[1], found[8]
    ratio = eight["episodes_min"] / one["episodes_min"]
    first, second = one.pop("outputs"), eight.pop("outputs")
    same = sum(second.get(k) == v for k, v in first.items())
    fig["batch"] = {"engine": engine, "episodes": len(specs), "ratio": ratio,
                    "same_episodes": same, "batch_1": one, "batch_8": eight}
    print(f"  batch 8 over batch 1: {ratio:.2f}x; {same}/{len(specs)} episodes alike")
    rows.append((f"{engine} batch 8 vs 1, {len(specs)} GSM8K episodes (alike)",
                 f"{eight['episodes_min']:.1f} vs {one['episodes_min']:.1f} episodes/min: "
                 f"{ratio:.2f}× ({same}/{len(specs)})"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny runs (--limit 1, 4 GSM8K episodes) to check the script")
    parser.add_argument("--skip", default="", help="parts to leave out: demo,hf,batch")
    parser.add_argument("--json", default=None, help="save every figure to this file")
    args = parser.parse_args()
    skip = {p for p in args.skip.split(",") if p}
    if skip - {"demo", "hf", "batch"}:
        parser.error(f"--skip takes demo, hf and batch; got {args.skip}")
    fig, rows = {"quick": args.quick}, []
    peaks(fig, rows)
    for name, part in (("demo", demo), ("hf", against_hf), ("batch", batch_sizes)):
        if name not in skip:
            try:
                part(args, fig, rows)
            except Exception:  # noqa: BLE001 - one part failing leaves the others' figures
                print(f"  {name} failed:\n{traceback.format_exc()}", flush=True)
                fig[name] = {"failed": traceback.format_exc()}
    print("\n| what | figure |\n|---|---|")
    for what, figure in rows:
        print(f"| {what} | {figure} |")
    if args.json:
        fig["summary"] = dict(rows)
        Path(args.json).write_text(json.dumps(fig, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
