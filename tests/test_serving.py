"""lumos-gym for other frameworks: `serve-env` (OpenEnv API), `lumos/remote`, `serve-tools` (MCP).

Each server runs on a free loopback port and is driven by the real clients: openenv-core's
``GenericEnvClient`` (WebSocket), plain HTTP with httpx, the ``mcp`` package's ``Client``, and
``gymnasium.make("lumos/remote")``. Episodes over the server must equal the in-process ones.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

import lumos_gym  # noqa: F401  (registers the lumos/* ids)
from lumos_gym.envs.math.official import MathEnv
from lumos_gym.envs.remote import RemoteEnvError, decode_step, encode_step, jsonable

SHOP = {"num_products": 300, "num_tasks": 4, "ranker": "lexical", "privileged": True}
MATH = {"privileged": True}


def comparable(observation, reward, terminated, truncated, info):
    """A result as plain data, without the timings that differ between two runs."""
    if isinstance(observation, dict):
        observation = {"text": observation["text"], "image": observation["image"].tolist()}
    info = {k: v for k, v in jsonable(info).items() if k != "tool_seconds"}
    return observation, float(reward), bool(terminated), bool(truncated), info


def in_process(env_id, kwargs, seed, options):
    """The gold episode played in-process: the first observation and each step's result."""
    env = gym.make(env_id, **kwargs)
    try:
        observation, info = env.reset(seed=seed, options=options)
        results = [comparable(observation, 0.0, False, False, info)]
        for action in info["gold_actions"]:
            results.append(comparable(*env.step(action)))
        return results
    finally:
        env.close()


def from_payload(payload):
    return comparable(*decode_step(payload))


def test_the_wire_format_round_trips_text_images_and_info():
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    info = {"a": (1, 2), "b": np.float32(0.5), "c": {3: np.array([1, 2])}}
    payload = json.loads(json.dumps(encode_step({"text": "hi", "image": image}, info,
                                                reward=1, terminated=True)))
    observation, reward, terminated, truncated, decoded = decode_step(payload)
    assert observation["text"] == "hi" and np.array_equal(observation["image"], image)
    assert (reward, terminated, truncated, payload["done"]) == (1.0, True, False, True)
    assert decoded == {"a": [1, 2], "b": 0.5, "c": {"3": [1, 2]}}


@pytest.mark.full
@pytest.mark.parametrize("env_id, kwargs, options", [
    ("lumos/GSM8K-v0", MATH, {"index": 2}),
    ("lumos/WebShop-v0", SHOP, {"index": 1}),
])
def test_an_episode_over_websocket_and_http_equals_the_in_process_one(
        env_servers, env_id, kwargs, options):
    import httpx
    from openenv.core import GenericEnvClient

    expected = in_process(env_id, kwargs, 7, options)
    server = env_servers(env_id, kwargs)
    with GenericEnvClient(base_url=server.base_url).sync() as client:
        result = client.reset(seed=7, options=options)
        over_ws = [comparable(*decode_step({"observation": result.observation,
                                            "reward": result.reward}))]
        for action in over_ws[0][4]["gold_actions"]:
            result = client.step({"text": action})
            over_ws.append(comparable(*decode_step({"observation": result.observation,
                                                    "reward": result.reward})))
        assert result.done and client.state()["step_count"] == len(over_ws) - 1
    assert over_ws == expected
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        reply = http.post("/reset", json={"seed": 7, "options": options})
        session = reply.headers["X-Session-Id"]
        owner = {"X-Session-Token": reply.headers["X-Session-Token"]}  # the session's token
        over_http = [from_payload(reply.json())]
        for action in over_http[0][4]["gold_actions"]:
            reply = http.post("/step", json={"action": {"text": action}, "session_id": session},
                              headers=owner)
            over_http.append(from_payload(reply.json()))
        assert reply.json()["done"]
        state = http.get("/state", headers={"X-Session-Id": session, **owner}).json()
        assert state["step_count"] == len(over_http) - 1 and state["task_id"]
        assert http.delete(f"/sessions/{session}", headers=owner).status_code == 200
    assert over_http == expected


@pytest.mark.full
def test_schema_metadata_and_health_answer_as_openenv_does(env_servers):
    import httpx

    server = env_servers("lumos/GSM8K-v0")
    with httpx.Client(base_url=server.base_url) as http:
        assert http.get("/health").json() == {"status": "healthy"}
        schema = http.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert schema["action"]["required"] == ["text"]
        assert http.get("/metadata").json()["name"] == "lumos/GSM8K-v0"
        assert http.get("/state").json()["episode_id"] is None
        missing = http.post("/step", json={"action": {"text": "Answer(1)"}})
        assert missing.status_code == 404 and "POST /reset" in missing.json()["detail"]
        bad = http.post("/reset", json={"seed": -1})
        assert bad.status_code == 422 and bad.json()["code"] == "VALIDATION_ERROR"


@pytest.mark.full
def test_32_concurrent_sessions_and_a_clear_error_past_the_capacity(env_servers):
    from openenv.core import GenericEnvClient

    server = env_servers("lumos/GSM8K-v0", max_sessions=32)

    async def play(n, client):
        result = await client.reset(seed=n, options={"index": n % 24})  # 24 bundled tasks
        result = await client.step({"text": "R1 = Calculator(6*7)"})
        state = await client.state()
        return result.observation["text"], state["session_id"], state["task_id"]

    async def main():
        clients = [GenericEnvClient(base_url=server.base_url) for _ in range(33)]
        for client in clients[:32]:
            await client.connect()
        try:
            played = await asyncio.gather(*(play(n, c) for n, c in enumerate(clients[:32])))
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                await clients[32].reset()
        finally:
            await asyncio.gather(*(c.close() for c in clients))
        return played

    played = asyncio.run(main())
    assert [text for text, _, _ in played] == ["R1 = 42"] * 32
    assert len({session for _, session, _ in played}) == 32
    assert len({task for _, _, task in played}) == 24  # the bundled sample: 24 tasks


def listening_ports() -> set[int]:
    import psutil

    return {c.laddr.port for c in psutil.Process().net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def wait_for(predicate, what, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s  # a guard against a hang, not a speed claim
    while not predicate():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


@pytest.mark.full
def test_an_idle_session_is_reaped_with_its_shop_server(env_servers):
    import httpx
    from openenv.core import GenericEnvClient

    server = env_servers("lumos/WebShop-v0", SHOP, idle_timeout_s=0.5)
    before = listening_ports()
    with GenericEnvClient(base_url=server.base_url).sync() as client:
        client.reset(seed=0)
        shop_ports = listening_ports() - before  # the session's own shop site
        assert len(shop_ports) == 1
        sessions = lambda: httpx.get(f"{server.base_url}/sessions").json()["active_sessions"]  # noqa: E731
        wait_for(lambda: sessions() == 0, "the idle session to be reaped")
        wait_for(lambda: not listening_ports() & shop_ports, "its shop site to close")
        with pytest.raises(RuntimeError, match="SESSION_ERROR.*|idle for more than 0.5 s"):
            client.step({"text": "Search(red shoes)"})


class CrashingMathEnv(MathEnv):
    """A math env whose step raises on the action ``crash`` (a bug, not an agent's error)."""

    def step(self, action):
        if action == "crash":
            raise RuntimeError("the engine fell over")
        return super().step(action)


@pytest.fixture
def crashing_env():
    gym.register("lumos-test/Crashing-v0", entry_point=CrashingMathEnv,
                 kwargs={"dataset": "gsm8k"}, max_episode_steps=8)
    yield "lumos-test/Crashing-v0"
    gym.registry.pop("lumos-test/Crashing-v0")


@pytest.mark.full
def test_a_crashed_env_is_answered_with_an_error_and_the_next_session_works(
        env_servers, crashing_env):
    import httpx
    from openenv.core import GenericEnvClient

    server = env_servers(crashing_env)
    with GenericEnvClient(base_url=server.base_url).sync() as client:
        client.reset(seed=0)
        with pytest.raises(RuntimeError, match="EXECUTION_ERROR.*|the engine fell over"):
            client.step({"text": "crash"})
        with pytest.raises(RuntimeError, match="SESSION_ERROR"):
            client.step({"text": "R1 = Calculator(1+1)"})
    with httpx.Client(base_url=server.base_url) as http:
        opened = http.post("/reset", json={}).json()
        crashed = http.post("/step", json={"action": {"text": "crash"},
                                           "session_id": opened["session_id"]},
                            headers={"X-Session-Token": opened["session_token"]})
        assert crashed.status_code == 500 and crashed.json()["code"] == "EXECUTION_ERROR"
        assert "the engine fell over" in crashed.json()["detail"]
        assert http.get("/sessions").json()["active_sessions"] == 0
    env = gym.make("lumos/remote", url=server.base_url)
    env.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="the engine fell over"):
        env.step("crash")
    env.reset(seed=0)  # a new session
    assert env.step("R1 = Calculator(1+1)")[0] == "R1 = 2"
    env.close()


@pytest.mark.full
def test_serve_env_shuts_down_cleanly_leaving_no_process_or_port():
    import psutil
    from openenv.core import GenericEnvClient

    command = [sys.executable, "-m", "lumos_gym.cli", "serve-env", "lumos/WebShop-v0",
               "--port", "0", *(f"-k{k}={json.dumps(v)}" for k, v in SHOP.items())]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line + server.stderr.read()
        port = int(match.group(1))
        client = GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync()
        client.connect()
        client.reset(seed=0)  # the session's shop site now runs in the server
        ports = {c.laddr.port for c in psutil.Process(server.pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN}
        assert len(ports) == 2
        # what the server started (the shop site, tool workers): none may outlive it
        spawned = psutil.Process(server.pid).children(recursive=True)
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down, then raises the signal again: the status is SIGTERM's
        assert server.wait(timeout=60) in (0, -signal.SIGTERM), server.stderr.read()
        assert "shut down: 1 session(s) closed" in server.stdout.read()
        client.close()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        server.stdout.close()
        server.stderr.close()
    for port in ports:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0
    wait_for(lambda: not any(_alive(p) for p in spawned), "the server's children to end")


def _alive(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.full
def test_the_runner_plays_the_same_episodes_through_lumos_remote(env_servers):
    from lumos_gym.agents import make_agent
    from lumos_gym.agents.runner import EpisodeSpec, Runner

    def records(env_id, kwargs):
        specs = [EpisodeSpec(env_id, f"gsm8k/sample/{n}", kwargs, seed=n) for n in range(6)]
        done = Runner(make_agent("oracle"), {}, max_in_flight=3).run(specs)
        return sorted((r.task_id, r.status, r.reward, r.metrics, r.prediction, r.gold_answer,
                       r.steps, r.turns) for r in done)

    server = env_servers("lumos/GSM8K-v0", MATH)
    local = records("lumos/GSM8K-v0", MATH)
    remote = records("lumos/remote", {"url": server.base_url, "env_id": "lumos/GSM8K-v0",
                                      **MATH})
    assert remote == local
    assert {r[1] for r in local} == {"completed"} and all(r[2] == 1.0 for r in local)


@pytest.mark.full
def test_lumos_remote_checks_what_the_server_serves(env_servers):
    server = env_servers("lumos/GSM8K-v0")
    with pytest.raises(RemoteEnvError, match="serves lumos/GSM8K-v0, not lumos/SVAMP-v0"):
        gym.make("lumos/remote", url=server.base_url, env_id="lumos/SVAMP-v0")
    with pytest.raises(RemoteEnvError, match="-k privileged=true"):
        gym.make("lumos/remote", url=server.base_url, privileged=True)
    env = gym.make("lumos/remote", url=server.base_url)
    assert env.unwrapped.task_type == "math" and len(env.unwrapped.task_ids()) == 24
    env.close()
    with pytest.raises(RemoteEnvError, match="cannot reach"):
        gym.make("lumos/remote", url="http://127.0.0.1:9")


@pytest.mark.full
def test_a_scenes_episode_keeps_its_picture_over_the_wire(env_servers):
    kwargs = {"num_tasks": 2, "privileged": True}
    expected = in_process("lumos/Scenes-v0", kwargs, 0, {"index": 0})
    server = env_servers("lumos/Scenes-v0", kwargs)
    env = gym.make("lumos/remote", url=server.base_url)
    observation, info = env.reset(seed=0, options={"index": 0})
    got = [comparable(observation, 0.0, False, False, info)]
    got += [comparable(*env.step(action)) for action in info["gold_actions"]]
    env.close()
    assert got == expected


def call_tools(target):
    """Calls through an MCP client connected to ``target``; returns what each answered."""
    from mcp import Client

    async def main():
        async with Client(target) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            calls = [
                ("Calculator", {"args": "2*(3+4)", "outputs": ["R1"]}),
                ("Calculator", {"args": "R1/7"}),
                ("Calculator", {"args": "__import__('os').system('true')"}),
                ("SetEquation", {"args": "x + 2 = 7", "episode": "e"}),
                ("SolveEquation", {"args": "x", "episode": "e", "outputs": ["R1"]}),
                ("SolveEquation", {"args": "x", "episode": "other"}),
                ("Code", {"args": "print(sum(range(10)))"}),
                ("Code", {"args": "import socket; socket.create_connection(('1.1.1.1', 80))"}),
            ]
            answers = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                answers.append((result.content[0].text, result.is_error))
            return names, answers

    return asyncio.run(main())


def check_tool_answers(names, answers):
    assert {"Calculator", "SetEquation", "SolveEquation", "Code", "WriteProgram",
            "TestProgram", "KnowledgeQuery", "ParagraphRetrieve"} <= set(names)
    assert answers[0] == ("R1 = 14", False)
    assert answers[1] == ("2", False)
    assert answers[2][1] and answers[2][0].startswith("Error: Calculator:")
    assert answers[4] == ("R1 = 5", False)
    assert answers[5][1]  # another episode has no equation set
    assert answers[6] == ("45", False)
    assert answers[7][1] and answers[7][0].startswith("Error: Code:")  # no network in the box


@pytest.mark.full
def test_the_tools_over_mcp_stdio():
    from mcp.client.stdio import StdioServerParameters

    target = StdioServerParameters(command=sys.executable,
                                   args=["-m", "lumos_gym.cli", "serve-tools"])
    check_tool_answers(*call_tools(target))


@pytest.mark.full
def test_the_tools_over_mcp_streamable_http():
    from lumos_gym.asgi import ThreadedServer
    from lumos_gym.serving.tools import ToolService, streamable_http_app

    service = ToolService(["Calculator", "SetEquation", "SolveEquation", "Code",
                           "WriteProgram", "TestProgram", "KnowledgeQuery",
                           "ParagraphRetrieve"])
    with ThreadedServer(streamable_http_app(service), name="tool server",
                        lifespan="on") as server:
        check_tool_answers(*call_tools(f"{server.base_url}/mcp"))
    service.close()


@pytest.mark.full
def test_vqa_over_mcp_reads_a_scene_picture():
    from lumos_gym.serving.tools import ToolService

    env = gym.make("lumos/Scenes-v0", num_tasks=4, privileged=True)
    observation, info = env.reset(seed=0, options={"index": 0})
    task = env.unwrapped.tasks[0]
    image = env.unwrapped.load_image(task)
    env.close()
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    question = next(a for a in info["gold_actions"] if "VQA(" in a)
    args = question.split("VQA(", 1)[1].rsplit(")", 1)[0]
    service = ToolService({"VQA": {"backend": "scene"}})
    result = service.call("VQA", {"args": args,
                                  "image": base64.b64encode(buffer.getvalue()).decode()})
    service.close()
    assert not result.is_error, result.content[0].text
    assert result.structured_content["values"][0]


def test_the_default_tools_search_the_offline_wikipedia_summaries():
    # a env_servers tool has no task corpus: KnowledgeQuery searches the wiki summaries by default
    from lumos_gym.serving.tools import ToolService, parse_tool_options

    service = ToolService(parse_tool_options([]))
    result = service.call("KnowledgeQuery", {"args": "Paris", "outputs": ["R1"]})
    service.close()
    assert not result.is_error, result.content[0].text
    assert result.content[0].text.startswith("R1 = WikipediaPage(Paris)")
    assert parse_tool_options(["Calculator"]) == {"Calculator": {}}
