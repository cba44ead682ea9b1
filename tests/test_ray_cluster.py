"""``evaluate --ray HOST:PORT`` on a cluster of two Ray nodes, one of them killed mid-run.

Both nodes run on this machine, each a ``ray start --block`` of its own (its own session,
temp folder and resources: ``head`` and ``second``), joined as on a real cluster by the head's
address and a token. The run is ``lumos-gym evaluate`` in its own process, as a user runs it;
its agent is the oracle slowed down (:class:`PacedOracle`), so that the second node can be
killed, raylet, workers and all, while it holds chunks. Its chunks must run again on the head:
every episode written once, the same episodes and summary as a run in one process.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lumos_gym.agents.oracle import OracleAgent
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.summary import comparable

pytest.importorskip("ray")

TESTS = Path(__file__).resolve().parent
PACE_S = 0.4  # per episode: a chunk of 2 takes 0.8 s, time enough to kill a node holding one
MARKS = "LUMOS_GYM_TEST_MARKS"  # the folder where each node notes the episodes it begins
NODE = "LUMOS_GYM_TEST_NODE"  # the name of the node a process runs on (its `ray start` env)
ENVS = ["GSM8K-v0", "SVAMP-v0"]
LIMIT = 6  # episodes per env: 12 in chunks of 2, two chunks queued per worker


class PacedOracle(OracleAgent):
    """The oracle, ``PACE_S`` slower per episode; it notes each episode it begins, per node."""

    name = "paced-oracle"

    def episode(self, observation, info):
        marks = os.environ.get(MARKS)
        if marks:  # one line per episode begun, in the file of the node it began on
            with open(Path(marks) / os.environ.get(NODE, "driver"), "a") as file:
                file.write(f"{info.get('task_id')}\n")
        time.sleep(PACE_S)
        return (yield from super().episode(observation, info))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _session(leader: int) -> list[int]:
    """The processes of the session ``leader`` began: a node's raylet, agents and workers.

    Ray's workers run in process groups of their own, and a killed raylet's children are
    reparented, so neither the group nor the process tree holds them all; the session does.
    """
    import psutil  # only this helper scans the process table

    found = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) == leader:
                found.append(pid)
    return found


def _kill_session(process: subprocess.Popen) -> None:
    for pid in _session(process.pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=30)


def _marks(folder: Path, node: str) -> list[str]:
    path = folder / node
    return path.read_text().split() if path.exists() else []


def _written(path: Path) -> set[str]:
    """The task ids of the episodes a running evaluation has written so far."""
    tasks = set()
    with contextlib.suppress(FileNotFoundError), path.open() as lines:
        for line in lines:
            with contextlib.suppress(ValueError):  # the line being written
                tasks.add(json.loads(line)["task_id"])
    return tasks


def _episodes(folder: Path) -> list[tuple]:
    """The episodes of a results folder, in a form equal between equal runs (each key once)."""
    rows = [json.loads(line) for line in (folder / "episodes.jsonl").open()]
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "an episode was written twice"
    return sorted((r["key"], r["status"], r["reward"], r["prediction"], r["steps"],
                   json.dumps(r["turns"], sort_keys=True)) for r in rows)


@pytest.fixture
def cluster(tmp_path):
    """Start a two-node Ray cluster on this machine: ``start(name, *args)`` adds a node.

    Yields ``(start, env)``: ``env`` is what every process of the cluster (the driver too)
    runs with, a fresh token among it. Every node is stopped after the test, failed or not:
    SIGTERM to its ``ray start --block`` (which stops what it started), then SIGKILL to
    anything left in its session.
    """
    # Ray's socket paths must fit in 107 characters: tmp_path is too deep for them
    temp = Path(tempfile.mkdtemp(prefix="lg-ray-"))
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           MARKS: str(marks),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)  # the address is always given
    ray_cli = str(Path(sys.executable).parent / "ray")
    nodes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> subprocess.Popen:
        log = temp / f"{name}.log"
        with log.open("w") as out:
            node = subprocess.Popen(
                [ray_cli, "start", "--block", "--disable-usage-stats", f"--temp-dir={temp / name}",
                 f"--dashboard-agent-listen-port={_free_port()}", *args],
                env={**env, NODE: name}, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        nodes.append(node)
        deadline = time.monotonic() + 120
        # printed once the node is registered with the head (ray start waits for that)
        while "will now block forever" not in log.read_text():
            assert node.poll() is None, f"ray start {name} failed:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"node {name} did not start in 120 s"
            time.sleep(0.2)
        return node

    try:
        yield start, env
    finally:
        for node in nodes:
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(timeout=30)
            _kill_session(node)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_a_node_killed_mid_run_loses_no_episode_and_repeats_none(cluster, tmp_path):
    start, env = cluster
    port = _free_port()
    start("head", "--head", f"--port={port}", "--num-cpus=1", '--resources={"head": 1}',
          "--include-dashboard=false", f"--ray-client-server-port={_free_port()}")
    second = start("second", f"--address=127.0.0.1:{port}", "--num-cpus=1",
                   '--resources={"second": 1}')
    out = tmp_path / "cluster"
    command = [sys.executable, "-m", "lumos_gym.cli", "evaluate", "--agent",
               "test_ray_cluster:PacedOracle", "--limit", str(LIMIT), "--batch-size", "2",
               "--ray", f"127.0.0.1:{port}", "--workers", "2", "--no-progress", "--out", str(out)]
    for env_id in ENVS:
        command += ["--env", env_id]
    marks = tmp_path / "marks"
    with (tmp_path / "driver.log").open("w") as log:
        driver = subprocess.Popen(command, env={**env, NODE: "driver"}, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        killed_after = None  # episodes the second node had begun when it was killed
        while driver.poll() is None:
            assert time.monotonic() < deadline, "the run did not end in 240 s"
            begun = _marks(marks, "second")
            # its third episode begun and its first chunk written: its second chunk in flight
            if (killed_after is None and len(begun) >= 3
                    and set(begun[:2]) <= _written(out / "episodes.jsonl")):
                _kill_session(second)
                killed_after = len(begun)
            time.sleep(0.05)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    printed = (tmp_path / "driver.log").read_text()
    assert driver.returncode == 0, printed[-3000:]
    assert killed_after is not None, "the run ended before the second node began a 2nd chunk"

    local = evaluate(RunConfig("oracle", envs=ENVS, limit=LIMIT, out=tmp_path / "local",
                               progress=False))
    # 0 lost, 0 repeated: each planned episode written exactly once, as in one process
    assert _episodes(out) == _episodes(tmp_path / "local")
    assert len(_episodes(out)) == len(ENVS) * LIMIT
    summary = json.loads((out / "summary.json").read_text())
    assert comparable(summary) == comparable(local.summary)
    assert summary["overall"]["mean"] == 1.0

    ray_block = json.loads((out / "run.json").read_text())["ray"]
    assert ray_block["workers"] == 2 and ray_block["nodes"] == 2
    per_node = {("head" if "head" in n["resources"] else "second"): n
                for n in ray_block["episodes_per_node"]}
    assert sorted(per_node) == ["head", "second"], ray_block
    head, lost = per_node["head"], per_node["second"]
    assert lost["lost"] and not head["lost"]
    assert head["episodes"] + lost["episodes"] == len(ENVS) * LIMIT
    assert lost["episodes"] >= 2  # its first chunk was written before it was killed
    assert ray_block["lost_nodes"] == [lost["node"]]
    retried = [key for chunk in ray_block["retried"] for key in chunk["episodes"]]
    assert retried and {c["node"] for c in ray_block["retried"]} == {lost["node"]}
    assert len(retried) == len(set(retried))
    tasks = {row["key"]: row["task_id"] for row in map(json.loads, (out / "episodes.jsonl").open())}
    assert set(retried) <= set(tasks)
    # what the second node began and never sent back ran again on the head, with the chunks
    # still queued on it; what it sent back ran nowhere else
    on_second, on_head = _marks(marks, "second"), _marks(marks, "head")
    assert len(on_second) >= killed_after and len(on_head) == head["episodes"]
    again = set(on_second) & set(on_head)
    assert again and again <= {tasks[key] for key in retried} <= set(on_head)
    assert len(on_second) - len(again) == lost["episodes"]
    assert len(set(on_second) | set(on_head)) == len(ENVS) * LIMIT
    print(f"\nsecond node: {lost['episodes']} episodes written, killed at its episode "
          f"{killed_after}; head: {head['episodes']}; retried: {len(retried)} episodes in "
          f"{len(ray_block['retried'])} chunk(s); lost 0, repeated 0")


def test_a_cluster_that_refuses_the_token_says_how_to_give_one():
    from lumos_gym.evaluation.distributed import _token_hint  # the message alone, no cluster

    class AuthenticationError(Exception):
        """Ray's own, as ray.init wraps it (RuntimeError, then ConnectionError)."""

    try:
        try:
            raise AuthenticationError("RPC error: InvalidAuthToken: the token is missing")
        except AuthenticationError as e:
            raise ConnectionError("Failed to connect to Ray cluster at 127.0.0.1:1") from e
    except ConnectionError as e:
        assert "set RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN" in _token_hint(e)
    assert _token_hint(ConnectionError("Connection refused")) == ""
