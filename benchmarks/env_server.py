"""Steps a second of an env served by `lumos-gym serve-env` against the same env in-process.

The same episodes (GSM8K's bundled tasks, each played with its gold actions, reset included)
run in-process, through `gymnasium.make("lumos/remote")` over the server's WebSocket, and over
its HTTP routes, one session at a time; then N sessions at once over WebSocket (threads, one
`lumos/remote` each). The server runs in this process's background thread on loopback, so the
figures hold the serialisation and the local network round trip, not a real network.

Run: .venv/bin/python benchmarks/env_server.py [--rounds N] [--sessions N]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import httpx

import lumos_gym  # noqa: F401
from lumos_gym.serving.envserver import start_env_server

ENV_ID = "lumos/GSM8K-v0"
KWARGS = {"privileged": True}


def episodes(rounds: int) -> list[tuple[int, list[str]]]:
    """(task index, gold actions) of every bundled task, ``rounds`` times over."""
    env = gym.make(ENV_ID, **KWARGS)
    plans = []
    for index in range(len(env.unwrapped.tasks)):
        _, info = env.reset(seed=0, options={"index": index})
        plans.append((index, list(info["gold_actions"])))
    env.close()
    return plans * rounds


def play_gym(env: gym.Env, plan: list[tuple[int, list[str]]]) -> int:
    calls = 0
    for index, actions in plan:
        env.reset(seed=0, options={"index": index})
        for action in actions:
            env.step(action)
        calls += 1 + len(actions)
    return calls


def play_http(base_url: str, plan: list[tuple[int, list[str]]]) -> int:
    calls = 0
    with httpx.Client(base_url=base_url, timeout=60) as http:
        session = None
        for index, actions in plan:
            body = {"seed": 0, "options": {"index": index}}
            answer = http.post("/reset", json={**body, "session_id": session})
            answer.raise_for_status()
            session = answer.json()["session_id"]
            # The session's token, returned at reset, is needed for its steps and its delete.
            http.headers["X-Session-Token"] = answer.json()["session_token"]
            for action in actions:
                http.post("/step", json={"action": {"text": action},
                                         "session_id": session}).raise_for_status()
            calls += 1 + len(actions)
        http.delete(f"/sessions/{session}").raise_for_status()
    return calls


def rate(fn, *args) -> float:
    start = time.perf_counter()
    calls = fn(*args)
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10, help="passes over the 24 tasks")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent sessions")
    args = parser.parse_args()
    plan = episodes(args.rounds)
    server = start_env_server(ENV_ID, KWARGS, max_sessions=max(args.sessions, 2))
    try:
        local = gym.make(ENV_ID, **KWARGS)
        remote = gym.make("lumos/remote", url=server.base_url)
        play_gym(local, plan[:24]), play_gym(remote, plan[:24])  # warm up both
        in_process = rate(play_gym, local, plan)
        over_ws = rate(play_gym, remote, plan)
        over_http = rate(play_http, server.base_url, plan)
        local.close()
        remote.close()
        envs = [gym.make("lumos/remote", url=server.base_url) for _ in range(args.sessions)]
        start = time.perf_counter()
        with ThreadPoolExecutor(args.sessions) as pool:
            calls = sum(pool.map(play_gym, envs, [plan] * args.sessions))
        concurrent = calls / (time.perf_counter() - start)
        for env in envs:
            env.close()
    finally:
        server.stop()
    calls = sum(1 + len(actions) for _, actions in plan)
    print(f"{len(plan)} episodes, {calls} reset/step calls each way ({ENV_ID}, gold actions)")
    print(f"in-process:             {in_process:8.0f} calls/s")
    print(f"lumos/remote (WS):      {over_ws:8.0f} calls/s  ({over_ws / in_process:.2f}x)")
    print(f"HTTP /reset + /step:    {over_http:8.0f} calls/s  ({over_http / in_process:.2f}x)")
    print(f"{args.sessions} WS sessions at once: {concurrent:8.0f} calls/s "
          f"({concurrent / in_process:.2f}x in-process)")


if __name__ == "__main__":
    main()
