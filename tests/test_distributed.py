"""``evaluate --ray``: episodes on actors of a local Ray instance; the driver alone writes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import ScriptedBackend, served

from lumos_gym.agents import make_agent
from lumos_gym.agents.oracle import OracleAgent
from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.plan import plan_env
from lumos_gym.evaluation.suites import suite_entries
from lumos_gym.evaluation.summary import comparable

ray = pytest.importorskip("ray")

from lumos_gym.evaluation.distributed import DistributedError, RayPool  # noqa: E402


@pytest.mark.full
def test_the_command_starts_a_local_ray_and_stops_it(tmp_path):
    """`lumos-gym evaluate --ray` in its own process: a local Ray instance, then none left."""
    command = [sys.executable, "-m", "lumos_gym.cli", "evaluate", "--agent", "oracle", "--env",
               "SVAMP-v0", "--env", "GSM8K-v0", "--limit", "2", "--ray", "--workers", "2",
               "--out", str(tmp_path), "--no-progress"]
    import psutil

    def ray_processes():
        found = set()
        for process in psutil.process_iter(["pid", "name", "cmdline"]):
            text = " ".join(process.info["cmdline"] or [process.info["name"] or ""])
            if "raylet" in text or "gcs_server" in text or "ray::" in text:
                found.add(process.info["pid"])
        return found

    before = ray_processes()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "suite score" in done.stdout and "lumos/GSM8K-v0" in done.stdout
    deadline = time.monotonic() + 10
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ray_processes() - before, "the command left Ray processes behind"
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["ray"]["workers"] == 2 and run["argv"][-1] == "--no-progress"
    assert json.loads((tmp_path / "summary.json").read_text())["overall"]["mean"] == 1.0


@pytest.mark.full
def test_an_unreachable_cluster_address_fails_fast_with_a_clear_message(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-m", "lumos_gym.cli", "evaluate", "--agent", "oracle", "--env",
         "SVAMP-v0", "--limit", "1", "--ray", f"127.0.0.1:{port}", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert f"cannot reach the Ray cluster at '127.0.0.1:{port}'" in done.stderr
    assert "ray start --head" in done.stderr and not (tmp_path / "episodes.jsonl").exists()
    if os.environ.get("RAY_ADDRESS") or os.path.exists("/tmp/ray/ray_current_cluster"):
        return  # a cluster runs on this machine: `auto` would find it
    done = subprocess.run(
        [sys.executable, "-m", "lumos_gym.cli", "evaluate", "--agent", "oracle", "--env",
         "SVAMP-v0", "--limit", "1", "--ray", "auto", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2 and "cannot reach the Ray cluster at 'auto'" in done.stderr


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (two CPUs) for the module; evaluate joins it."""
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent)  # actors unpickle scripted backends from here
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=True,
             logging_level="ERROR", runtime_env={"env_vars": {"PYTHONPATH": tests}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("torch")
    from conftest import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=2048)


def _episodes(folder):
    rows = [json.loads(line) for line in (folder / "episodes.jsonl").open()]
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "an episode was written twice"
    return sorted((r["key"], r["status"], r["reward"], r["prediction"], r["steps"],
                   json.dumps(r["turns"], sort_keys=True)) for r in rows)


def _half_right(request):
    prompt = request.prompt or json.dumps(request.messages)
    return "4" if len(prompt) % 2 else "7"


@pytest.mark.full
def test_a_ray_run_equals_the_local_run(local_ray, tmp_path):
    envs = ["GSM8K-v0", "SVAMP-v0", "WebShop-v0"]
    local = evaluate(RunConfig("oracle", envs=envs, limit=3, out=tmp_path / "local",
                               progress=False))
    spread = evaluate(RunConfig("oracle", envs=envs, limit=3, out=tmp_path / "ray", ray=True,
                                workers=2, progress=False))
    assert _episodes(tmp_path / "ray") == _episodes(tmp_path / "local")
    assert comparable(spread.summary) == comparable(local.summary)
    assert spread.summary["overall"]["episodes"] == 9 and spread.summary["overall"]["mean"] == 1
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["ray"]["workers"] == 2 and run["ray"]["nodes"] == 1
    assert run["ray"]["resources"]["CPU"] == 2
    assert "ray" not in json.loads((tmp_path / "local" / "run.json").read_text())


@pytest.mark.full
def test_scripted_backends_travel_and_a_resumed_ray_run_writes_each_episode_once(
    local_ray, tmp_path
):
    options = {"envs": ["GSM8K-v0"], "limit": 6, "progress": False}
    whole = evaluate(RunConfig("direct", out=tmp_path / "whole",
                               backends={"policy": ScriptedBackend(_half_right)}, **options))
    evaluate(RunConfig("direct", out=tmp_path / "killed",
                       backends={"policy": ScriptedBackend(_half_right)}, **options))
    path = tmp_path / "killed" / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:30])  # killed mid-write
    resumed = evaluate(RunConfig("direct", out=tmp_path / "killed", resume=True, ray=True,
                                 workers=2, backends={"policy": ScriptedBackend(_half_right)},
                                 **options))
    assert resumed.resumed == 2
    assert _episodes(tmp_path / "killed") == _episodes(tmp_path / "whole")
    assert comparable(resumed.summary) == comparable(whole.summary)


@pytest.mark.full
def test_chunks_spread_a_small_run_over_every_worker(local_ray):
    entry = suite_entries(envs=["SVAMP-v0"], limit=5)[0]
    specs = list(plan_env(entry, privileged=True).specs)
    assert len(specs) == 5
    pool = RayPool(make_agent("oracle"), workers=2, runner={"max_in_flight": 8})
    try:
        got = []
        counts = pool.run(specs, chunk=8, on_record=got.append)
        # a worker that raises (a bug, not an episode's failure) stops the run with its error
        with pytest.raises(DistributedError, match="a Ray worker failed: AttributeError: .*env_id"):
            pool.run([None], chunk=1, on_record=got.append)
    finally:
        pool.close()
    assert sorted(r.task_id for r in got) == sorted(s.task_id for s in specs)
    assert sorted(counts) == [2, 3] and {r.status for r in got} == {"completed"}


class KillingOracle(OracleAgent):
    """The oracle, except that the worker process dies on one task (as a native crash would)."""

    victim = ""

    def episode(self, observation, info):
        if info.get("task_id") == self.victim:
            os._exit(3)
        return super().episode(observation, info)


# slow tier: kills a Ray worker and waits for its successor to load (20 s on quiet cores,
# 76 s under load); `make test-slow` runs it
@pytest.mark.slow
def test_an_episode_that_kills_its_worker_ends_as_env_error_and_the_rest_run(local_ray):
    entry = suite_entries(envs=["SVAMP-v0"], limit=6)[0]
    specs = list(plan_env(entry, privileged=True).specs)
    agent = KillingOracle()
    agent.victim = specs[2].task_id
    pool = RayPool(agent, workers=2, runner={"max_in_flight": 8})
    try:
        got = []
        pool.run(specs, chunk=3, on_record=got.append)
        again = []  # the restarted worker still runs episodes
        pool.run(specs[:2], chunk=1, on_record=again.append)
    finally:
        pool.close()
    by_task = {r.task_id: r for r in got}
    assert sorted(by_task) == sorted(s.task_id for s in specs) and len(got) == 6
    died = by_task.pop(specs[2].task_id)
    assert died.status == "env-error" and "Ray worker died running this episode" in died.reason
    assert {r.status for r in by_task.values()} == {"completed"}, [r.reason for r in got]
    assert [r.status for r in again] == ["completed", "completed"]


@pytest.mark.full
def test_a_worker_that_cannot_build_its_model_fails_clearly(local_ray, tmp_path):
    with pytest.raises(DistributedError, match="a Ray worker failed: .*no-such-model"):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=tmp_path, ray=True,
                           workers=1, models=ModelOptions(model=str(tmp_path / "no-such-model")),
                           progress=False))
    assert not (tmp_path / "episodes.jsonl").exists()


def test_what_cannot_travel_to_workers_and_workers_without_ray_are_refused(local_ray, tmp_path):
    import threading

    class Locked(ScriptedBackend):
        def __init__(self):
            super().__init__(_half_right)
            self.lock = threading.Lock()  # cannot be pickled (like a live HTTP client)

    with pytest.raises(DistributedError, match="the backends cannot be sent to Ray workers"):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=tmp_path, ray=True,
                           backends={"policy": Locked()}, progress=False))
    too_many = r"3 worker\(s\) x 1 CPU each = 3 CPU, but the Ray cluster has 2"
    with pytest.raises(DistributedError, match=too_many):
        evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=4, out=tmp_path, ray=True, workers=3,
                           progress=False))
    no_gpu = r"1 worker\(s\) x 1 GPU each = 1 GPU, but .* 0: ask fewer"
    with pytest.raises(DistributedError, match=no_gpu):
        evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=4, out=tmp_path, ray=True, workers=1,
                           worker_gpus=1, progress=False))
    with pytest.raises(EvaluationError, match="--workers and --worker-gpus need --ray"):
        evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=1, out=tmp_path, workers=2,
                           progress=False))


def test_without_ray_installed_the_flag_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    code = main(["evaluate", "--agent", "oracle", "--env", "SVAMP-v0", "--limit", "1",
                 "--ray", "--out", str(tmp_path), "--no-progress"])
    assert code == 2 and "pip install 'lumos-gym[ray]'" in capsys.readouterr().err


@pytest.mark.full
def test_ray_workers_share_one_served_model(local_ray, tiny_model, tmp_path):
    """`lumos-gym serve` in its own process; two Ray actors are its clients."""
    from lumos_gym.agents.base import AgentConfig

    with served(tiny_model) as url:
        options = ModelOptions(backend="openai", base_url=url, model="tiny", batch_size=2)
        config = AgentConfig(max_new_tokens=8, max_rounds=2)
        runs = {}
        for name, spread in (("local", {}), ("ray", {"ray": True, "workers": 2})):
            runs[name] = evaluate(RunConfig("lumos-o", envs=["GSM8K-v0"], limit=4, models=options,
                                            agent_config=config, out=tmp_path / name,
                                            progress=False, **spread))
    assert _episodes(tmp_path / "ray") == _episodes(tmp_path / "local")
    assert all(r["output_tokens"] > 0 for r in runs["ray"].records)
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["models"] == {"planner": "tiny", "grounder": "tiny"}
    assert run["ray"]["workers"] == 2


@pytest.mark.full
def test_each_actor_loads_a_local_model_given_by_a_relative_path(local_ray, tiny_model, tmp_path,
                                                                 monkeypatch):
    from lumos_gym.agents.base import AgentConfig

    # a relative path: actors on other nodes start in other folders, so it is made absolute
    monkeypatch.chdir(tiny_model.parent)
    options = ModelOptions(model=tiny_model.name, batch_size=2, options={"device": "cpu"})
    config = AgentConfig(max_new_tokens=6, max_rounds=2)
    for name, spread in (("local", {}), ("ray", {"ray": True, "workers": 2})):
        evaluate(RunConfig("lumos-i", envs=["MathWord-v0"], limit=4, models=options,
                           agent_config=config, out=tmp_path / name, progress=False, **spread))
    assert _episodes(tmp_path / "ray") == _episodes(tmp_path / "local")
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["backends"]["planner"]["backend"] == "hf" and run["ray"]["workers"] == 2


@pytest.mark.full
def test_an_existing_folder_needs_resume_with_or_without_ray(local_ray, tmp_path):
    evaluate(RunConfig("oracle", envs=["SVAMP-v0"], limit=1, out=tmp_path, progress=False))
    with pytest.raises(EvaluationError, match="already holds 1 episode; pass --resume"):
        evaluate(RunConfig("oracle", envs=["SVAMP-v0"], limit=2, out=tmp_path, ray=True,
                           progress=False))
    again = evaluate(RunConfig("oracle", envs=["SVAMP-v0"], limit=2, out=tmp_path, ray=True,
                               resume=True, progress=False))
    assert again.resumed == 1 and again.summary["overall"]["episodes"] == 2
