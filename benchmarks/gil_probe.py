"""Does the default engine's step let other Python threads run (could env steps overlap it)?

The runner steps envs in its one thread between the engine's steps. Env steps in worker threads
would overlap the engine only if its step releases Python's GIL. This script measures that: a
thread sleeps 1 ms in a loop, first alone, then while the main thread steps the OpenVINO engine
through 8 requests (SmolLM2-135M, 64 new tokens each). A step that holds the GIL lets the thread
wake only between steps, so its wake-ups a second fall to about the steps a second.

Run: .venv/bin/python benchmarks/gil_probe.py
"""
from __future__ import annotations

import threading
import time

from lumos_gym.models.base import GenerationRequest
from lumos_gym.models.openvino_backend import OpenVINOBackend


class Sleeper:
    """A thread that sleeps 1 ms at a time and counts its wake-ups."""

    def __init__(self) -> None:
        self.wakes, self.longest, self.stop = 0, 0.0, False
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop:
            started = time.perf_counter()
            time.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - started)
            self.wakes += 1

    def __enter__(self) -> Sleeper:
        self.started = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop = True
        self.thread.join()
        self.seconds = time.perf_counter() - self.started


def main() -> None:
    with Sleeper() as alone:
        time.sleep(1.0)
    print(f"alone: {alone.wakes / alone.seconds:.0f} wake-ups/s")
    with OpenVINOBackend("smollm2-135m") as backend:
        session = backend.open_session()
        request = GenerationRequest(prompt="Write a long story about a cat. " * 20,
                                    max_new_tokens=64, temperature=0.0)
        for _ in range(8):
            session.submit(request)
        session.collect(wait=False)  # the first step (prefill) before timing
        steps = done = 0
        with Sleeper() as beside:
            while done < 8:
                done += len(session.collect(wait=False))
                steps += 1
    print(f"beside the engine's steps: {beside.wakes / beside.seconds:.0f} wake-ups/s, "
          f"{steps / beside.seconds:.0f} steps/s, longest sleep {beside.longest * 1e3:.0f} ms "
          f"(asked: 1 ms), over {beside.seconds:.1f} s")


if __name__ == "__main__":
    main()
