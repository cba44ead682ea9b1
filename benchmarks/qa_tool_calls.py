"""The QA tool's share of the demo: its model calls, their tokens, and the floor those set.

``speed_check.py`` finds the ``QA`` tool's model taking about a sixth of the demo's episodes'
time (WorldQA's tool seconds). This script says whether that time is arithmetic or waiting: it
replays the WorldQA episodes of a results folder (default: the shipped Lumos-I's offline run)
action by action, each observation checked against the recorded one, and counts every call the
tool makes to its model (prompt and generated tokens, seconds). It then prints the floor of
those calls on this machine: their prompt and generated tokens at the fp32 matmul rate (2
FLOPs a parameter a token) and their decode steps at the memory bound (each step of a lone
request reads every fp32 weight once). What batching the tool's calls across episodes could
save is at most the decode part: prefill is arithmetic at any batch size.

Run: .venv/bin/python benchmarks/qa_tool_calls.py [RESULTS_FOLDER]
"""
from __future__ import annotations

import argparse
import time

import rollout  # benchmarks/rollout.py: this script's folder is on sys.path
import speed_check
import torch

from lumos_gym.envs.registration import make_env
from lumos_gym.envs.replay import step_env
from lumos_gym.evaluation.results import episodes_path, read_episodes
from lumos_gym.tools.qa import QA

MODEL = "smollm2-135m"


def records(folder):
    """The folder's episode records (``episodes.jsonl``, or gzipped), as every reader reads them."""
    path = episodes_path(folder)
    if path is None:
        raise SystemExit(f"{folder}: no episodes.jsonl(.gz)")
    return list(read_episodes(path)[0].values())


def replay_counting(folder):
    """Replay the folder's WorldQA episodes; return each QA model call's (in, out, seconds)."""
    calls, generate = [], QA._generate

    def counted(self, lm, prompt, *, chat):
        started = time.perf_counter()
        completion = generate(self, lm, prompt, chat=chat)
        calls.append((completion.input_tokens, completion.output_tokens,
                      time.perf_counter() - started))
        return completion

    QA._generate = counted
    opened = []  # kept open to the end, as an evaluation's env pool does: the tools share one
    try:         # model, closed with the last of them (closing each env would reload it)
        for record in records(folder):
            if "WorldQA" not in record["env_id"]:
                continue
            env = make_env(record["env_id"], **record["env_kwargs"])
            opened.append(env)
            env.reset(seed=record["seed"], options={"task_id": record["task_id"]})
            for turn in record["turns"]:
                if "action" in turn:
                    seen = step_env(env, turn["action"]).observation
                    if seen != turn["observation"]:
                        raise SystemExit(f"{record['key']}: the replay diverged at "
                                         f"{turn['action']!r}")
    finally:
        QA._generate = generate
        for env in opened:
            env.close()
    return calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="leaderboards/offline/lumos-i")
    args = parser.parse_args()
    calls = replay_counting(args.folder)
    prompt, generated = sum(c[0] for c in calls), sum(c[1] for c in calls)
    seconds = sum(c[2] for c in calls)
    params = rollout.model_parameters(MODEL)
    fp32 = speed_check.cpu_matmul(speed_check.PREFILL, torch.float32)
    weights = torch.randn(64 * 2**20)  # 256 MB, as speed_check.py copies
    bandwidth = speed_check.copy_gbps(weights, torch.empty_like(weights), torch.Tensor.copy_)
    arithmetic = (prompt + generated) * 2 * params / (fp32 * 1e9)
    decode = generated / (bandwidth * 1e9 / (4 * params))
    print(f"{len(calls)} QA model calls in {args.folder}'s WorldQA episodes: {prompt:,} prompt "
          f"+ {generated:,} generated tokens, {seconds:.1f} s here (the first call loads "
          f"the model: {calls[0][2]:.1f} s)" if calls else "no QA model call")
    print(f"floor on this machine: their FLOPs at fp32 {fp32:.1f} GFLOP/s: {arithmetic:.1f} s; "
          f"their {generated} decode steps at {bandwidth:.1f} GB/s: {decode:.1f} s")


if __name__ == "__main__":
    main()
