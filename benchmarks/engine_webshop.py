"""lumos/WebShop-v0 steps per second against the raw engine: HTTP GETs of the same pages.

The raw engine is the shop site itself: for each episode the env plays (the expert's actions),
the benchmark records the page URLs the env's session fetched, then fetches the same URLs with
a bare :class:`~lumos_gym.envs.web.shop.server.ShopClient` in a session holding the same goal. Both
sides count the time of the steps only (not the resets that open sessions), on the same server
in the same run, and report steps per second over the same action sequence:

* ``webshop-grammar``: WebShop's ``search[...]``/``click[...]``, one page per step; the env adds
  parsing each page (text, clickables) and the action language;
* ``lumos-grammar``: the expert's Lumos steps (several actions, and several pages, per step,
  plus ``FeatureRetrieve``/``Pick`` with the lexical ranker).

Run ``python benchmarks/engine_webshop.py [seconds]``.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any

from lumos_gym.envs.web.shop.server import ShopClient
from lumos_gym.envs.web.webshop import WebShopEnv
from lumos_gym.scoring.webshop import Goal

ENGINE = "shop site (FastAPI + uvicorn on loopback, httpx client)"


def _webshop_actions(task: Any) -> list[str]:
    expert = task.meta["expert"]
    clicks = [expert["asin"].lower(), *expert["options"].values(), "buy now"]
    return [f"search[{task.question}]", *(f"click[{c}]" for c in clicks)]


def _play(env: WebShopEnv, plans: list[tuple[Any, list[str]]], seconds: float) -> tuple[
        int, float, list[tuple[Goal, list[str]]]]:
    steps, spent, episodes = 0, 0.0, []
    for task, actions in itertools.cycle(plans):
        if spent >= seconds:
            break
        env.reset(options={"task_id": task.id})
        session = env._episode.context.session  # the episode's browser (benchmark only)
        start = len(session.visited)
        for action in actions:
            began = time.perf_counter()
            _, _, terminated, _, _ = env.step(action)
            spent += time.perf_counter() - began
            steps += 1
        assert terminated, f"{task.id}: the expert did not buy"
        urls = [u.replace(f"/s/{session.session_id}/", "/s/{sid}/") for u in
                session.visited[start:]]
        episodes.append((Goal.from_dict(task.meta["goal"]), urls, len(actions)))
    return steps, spent, episodes


def _fetch(client: ShopClient, episodes: list[Any], seconds: float) -> tuple[int, float]:
    steps, spent = 0, 0.0
    for goal, urls, count in itertools.cycle(episodes):
        if spent >= seconds:
            break
        sid = client.open_session(goal)
        began = time.perf_counter()
        for url in urls:
            client.get(url.replace("/s/{sid}/", f"/s/{sid}/")).raise_for_status()
        spent += time.perf_counter() - began
        client.close_session(sid)
        steps += count
    return steps, spent


def measure(seconds: float = 5.0, *, rounds: int = 5) -> list[dict[str, Any]]:
    """Return one row per action grammar: env steps/s and raw-engine steps/s.

    The two sides alternate in ``rounds`` rounds of ``seconds / rounds`` each, and the best
    round of each side counts, so that load from other processes hits both alike.
    """
    env = WebShopEnv(num_tasks=20, ranker="lexical")
    rows = []
    try:
        client = ShopClient(env.server.base_url)
        grammars = {
            "webshop-grammar": [(t, _webshop_actions(t)) for t in env.tasks],
            "lumos-grammar": [(t, list(t.gold_actions)) for t in env.tasks],
        }
        _play(env, grammars["webshop-grammar"][:2], 0.0)  # warm up the server and the index
        for grammar, plans in grammars.items():
            ours, raw = 0.0, 0.0
            for _ in range(rounds):
                ours_steps, ours_time, episodes = _play(env, plans, seconds / rounds)
                raw_steps, raw_time = _fetch(client, episodes, seconds / rounds)
                ours = max(ours, ours_steps / ours_time)
                raw = max(raw, raw_steps / raw_time)
            rows.append({"env": "lumos/WebShop-v0", "engine": ENGINE, "grammar": grammar,
                         "ours_steps_per_s": round(ours, 1), "raw_steps_per_s": round(raw, 1),
                         "overhead": round(raw / ours - 1.0, 3)})
        client.close()
    finally:
        env.close()
    return rows


if __name__ == "__main__":
    for row in measure(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0):
        print(row)
