"""How fast `lumos-gym serve` lets go: of a client that went away, and of a body too large.

The shipped Lumos-I planner and grounder are served on SmolLM2-135M (the hf backend, fp32, this
machine's CPU) in this process's background thread, on loopback. Then:

1. a client asks the planner for a long completion (``max_tokens`` 2000, a stop string that
   never comes) and is killed once the engine is decoding it; printed: the seconds from the
   kill to the engine being free, the tokens it had decoded, and what the whole request would
   have cost (its tokens per second times the budget);
2. a 50 MB body is posted; printed: the status and the seconds to the answer.

Run: .venv/bin/python benchmarks/serve_limits.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time

import httpx

from lumos_gym.asgi import ThreadedServer
from lumos_gym.models.hf import HFBackend
from lumos_gym.models.reference import reference_models, served_name
from lumos_gym.models.serve import create_app

BUDGET = 2000


def abandon(url: str, batcher) -> tuple[float, int, float]:
    """Kill a client mid-request: (seconds to a free engine, tokens decoded, tokens/s)."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"model": served_name("lumos-i", "planner"), "prompt": "Subgoal 1:",
                       "max_tokens": BUDGET, "temperature": 0, "stop": ["\x00never"]}).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: bench\r\n"
                 b"Content-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    while not batcher.busy:
        time.sleep(0.001)
    started = time.perf_counter()
    time.sleep(1.0)  # let it decode a while
    killed = time.perf_counter()
    sock.close()
    while batcher.busy:
        time.sleep(0.001)
    freed = time.perf_counter()
    stopped = batcher.stopped[-1]
    rate = stopped.output_tokens / max(killed - started, 1e-9)
    return freed - killed, stopped.output_tokens, rate


def refuse(url: str) -> tuple[int, float]:
    """Post a 50 MB body: (status, seconds to the answer)."""
    body = b'{"model": "x", "prompt": "' + b"x" * (50 * 2**20) + b'"}'
    started = time.perf_counter()
    answer = httpx.post(f"{url}/v1/completions", content=body,
                        headers={"Content-Type": "application/json"}, timeout=120)
    return answer.status_code, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    adapters = {served_name("lumos-i", r): p for r, p in reference_models("lumos-i").items()}
    with HFBackend("smollm2-135m", adapters=adapters, device="cpu") as backend:
        app = create_app(backend, model_name="smollm2-135m",
                         adapters={n: backend.with_adapter(n) for n in adapters})
        with ThreadedServer(app, lifespan="on", name="serve") as server:
            runs = [abandon(server.base_url, app.state.batcher) for _ in range(args.rounds)]
            refusals = [refuse(server.base_url) for _ in range(args.rounds)]
    print("| measure | median | runs |")
    print("|---|---|---|")
    freed = [r[0] for r in runs]
    print(f"| client killed mid-request: seconds to a free engine | {statistics.median(freed):.3f} "
          f"| {', '.join(f'{x:.3f}' for x in freed)} |")
    decoded = [r[1] for r in runs]
    rate = statistics.median(r[2] for r in runs)
    print(f"| tokens decoded before the kill (of {BUDGET}) | {statistics.median(decoded):.0f} "
          f"| {', '.join(map(str, decoded))} |")
    print(f"| the whole request would have taken (s, at {rate:.0f} tokens/s) "
          f"| {BUDGET / rate:.0f} | |")
    seconds = [r[1] for r in refusals]
    print(f"| 50 MB body: HTTP {refusals[0][0]}, seconds to the answer "
          f"| {statistics.median(seconds):.3f} | {', '.join(f'{x:.3f}' for x in seconds)} |")


if __name__ == "__main__":
    main()
