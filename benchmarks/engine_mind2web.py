"""Steps per second of ``lumos/Mind2Web-v0`` against its raw step: ranking and scoring a page.

Mind2Web has no engine of its own (its pages are recorded): the raw step here is what one
action costs without the env, on the same pages and the same actions: rank the page's
candidates for the query (BM25, or MiniLM with its text cache off so that every step embeds its
page) and score the top-1 against the gold step. Ours is ``env.step`` with the same ranker
object on the bundled recorded tasks, gold actions replayed, one episode after another (resets
included).

Run: .venv/bin/python benchmarks/engine_mind2web.py [--seconds S]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from lumos_gym.actions import parse_action
from lumos_gym.envs.web.mind2web import MIND2WEB_TOOLS, Mind2WebEnv
from lumos_gym.envs.web.mind2web_data import score_step
from lumos_gym.retrieval.embed import TransformerEmbedder, default_model_path
from lumos_gym.tools.mind2web import EmbedRanker, make_ranker, select_query, top_candidate


def _plan(env: Mind2WebEnv) -> list[tuple[Any, list[tuple[str, str, str]]]]:
    """Each task with its steps' (op, query, text), read from the gold actions."""
    plans = []
    for task in env.tasks:
        steps = []
        for text in task.gold_actions:
            action = parse_action(text)
            args = action.arguments()
            steps.append((action.name or "", args.get("QUERY") or "", args.get("TEXT") or ""))
        plans.append((task, steps))
    return plans


def _ours(env: Mind2WebEnv, seconds: float) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for task in env.tasks:
            env.reset(options={"task_id": task.id})
            for text in task.gold_actions:
                env.step(text)
                steps += 1
    return steps / (time.perf_counter() - started)


def _raw(env: Mind2WebEnv, ranker: Any, seconds: float) -> float:
    plans = _plan(env)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for task, plan in plans:
            reprs = [str(r) for r in task.meta["action_reprs"]]
            for n, (op, query, text) in enumerate(plan):
                page = env.page(task, n)
                ranking = select_query(query, text) if op == "SELECT" else query
                scores = ranker.scores(ranking, reprs[max(0, n - 3) : n], page.candidates)
                score_step(page, page.candidates[top_candidate(scores)], op, text)
                steps += 1
    return steps / (time.perf_counter() - started)


def _ranker(backend: str) -> Any:
    if backend != "embed":
        return make_ranker(backend)
    # MiniLM without its text cache: every step embeds its page, as a first visit does
    embedder = TransformerEmbedder(default_model_path(), cache_size=0)
    return EmbedRanker(embedder=embedder)


def measure(seconds: float = 5.0) -> list[dict[str, Any]]:
    """Return one row per ranker: our env's steps per second and the raw ranking's.

    MiniLM runs on one torch thread here (restored afterwards): with two, the figures on a
    shared two-core machine swing by a factor of two from run to run.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [_measure(backend, seconds) for backend in ("bm25", "embed")]
    finally:
        torch.set_num_threads(threads)


def _measure(backend: str, seconds: float) -> dict[str, Any]:
    ranker = _ranker(backend)
    env = Mind2WebEnv(tools={name: {"ranker": ranker} for name in MIND2WEB_TOOLS})
    try:
        for task in env.tasks:  # warm the page cache and the model, as the raw side has them
            env.reset(options={"task_id": task.id})
            for text in task.gold_actions:
                env.step(text)
        raw = _raw(env, ranker, seconds)
        ours = _ours(env, seconds)
    finally:
        env.close()
    return {
        "env": "lumos/Mind2Web-v0",
        "engine": f"page ranking + scoring ({backend})",
        "ours_steps_per_s": ours,
        "raw_steps_per_s": raw,
    }


def main() -> None:
    """Print the rows."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    for row in measure(args.seconds):
        ours, raw = row["ours_steps_per_s"], row["raw_steps_per_s"]
        print(f"{row['env']:<20} {row['engine']:<34} ours {ours:8.1f}/s  raw {raw:8.1f}/s  "
              f"overhead {(raw / ours - 1) * 100:5.1f}%")


if __name__ == "__main__":
    main()
