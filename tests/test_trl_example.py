"""examples/trl_grpo_openenv.py: GRPO with TRL, rewarded by a `serve-env` server, on CPU.

TRL is not a dependency of lumos-gym: the test is skipped where it is not importable. The server
is the real `lumos-gym serve-env` command on a free loopback port; the model is the tiny random
Llama of conftest, so every reward is 0.0 but comes from the server's `step` (the gold program
of a task, played through the same code, is rewarded 1.0).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import save_tiny_model

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl_grpo_openenv.py"


@contextlib.contextmanager
def serve_env(*arguments: str):
    """`lumos-gym serve-env ARGUMENTS --port 0` in its own process; yields its base URL."""
    command = [sys.executable, "-m", "lumos_gym.cli", "serve-env", *arguments, "--port", "0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, line + server.stderr.read()
        yield match.group(0)
    finally:
        server.terminate()
        server.wait(timeout=60)
        server.stdout.close()
        server.stderr.close()


def load_example():
    """The example script as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("trl_grpo_openenv", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_trl_grpo_example_trains_on_rewards_from_serve_env(tmp_path):
    pytest.importorskip("trl")
    from openenv.core import GenericEnvClient

    model = save_tiny_model(tmp_path / "tiny", max_positions=1024)
    example = load_example()
    with serve_env("lumos/MathWord-v0", "-k", "privileged=true") as url:
        # the reward path of the example: the env's step scores the grounded program
        with GenericEnvClient(base_url=url).sync() as env:
            info = env.reset(seed=3).observation["info"]
        rollout = example.ServedEnvRollout(url, {})
        gold = "; ".join(info["gold_actions"])
        assert rollout.play([info["task_id"]] * 2, [gold, "R1 = Calculator(1+1); Answer(R1)"]) \
            == [1.0, 0.0]
        run = subprocess.run(
            [sys.executable, str(EXAMPLE), "--url", url, "--model", str(model),
             "--max-steps", "1", "--num-tasks", "2", "--batch-size", "2",
             "--num-generations", "2", "--max-completion-length", "8",
             "--output-dir", str(tmp_path / "out")],
            capture_output=True, text=True, timeout=600,
        )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 tasks from " + url in run.stdout
    rollouts = re.findall(rf"rollout 1: 2 completions, .* played on {re.escape(url)} in .*; "
                          r"env rewards (\[[^\]]*\])", run.stdout)
    assert len(rollouts) == 1, run.stdout
    rewards = ast.literal_eval(rollouts[0])
    assert len(rewards) == 2 and all(r in (0.0, 1.0) for r in rewards)
    assert "trained 1 step(s) in " in run.stdout
    assert re.search(r"step 1: mean reward \d\.\d{3}", run.stdout), run.stdout
