"""`serve-env` sessions: owned by their client, bounded, and never leaking an env.

Every server here is a real one on a free loopback port (``start_env_server``), driven over
HTTP (httpx) and WebSocket (``websockets`` and ``lumos/remote``). The served env counts the
instances made and closed (:class:`CountedEnv`), so that a leak shows as a number and not only
as the pool's own account. The last test runs an env with game worker processes (TextWorld)
and checks that none outlives its session.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time

import gymnasium as gym
import httpx
import pytest

import lumos_gym  # noqa: F401  (registers the lumos/* ids)
from lumos_gym.envs.base import ResetOptionsError
from lumos_gym.envs.math.official import MathEnv
from lumos_gym.envs.remote import RemoteEnvError
from lumos_gym.errors import LumosGymError

TOKEN = "X-Session-Token"
COUNTED = "lumos-test/Counted-v0"


class CountedEnv(MathEnv):
    """GSM8K's sample env that counts its instances made and closed (class-wide).

    ``delay_s`` makes each reset and step take that long, so that a request can be sent while
    another is in flight. A reset with seed 13 is refused by the env itself (as a game engine
    may refuse one), after the server's own checks have passed.
    """

    lock = threading.Lock()
    made = 0
    closed = 0

    def __init__(self, *, delay_s: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.delay_s = delay_s
        self._counted_close = False
        with CountedEnv.lock:
            CountedEnv.made += 1

    def reset(self, *, seed=None, options=None):
        time.sleep(self.delay_s)
        if seed == 13:
            raise LumosGymError("this env refuses seed 13")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        time.sleep(self.delay_s)
        return super().step(action)

    def close(self):
        with CountedEnv.lock:
            if not self._counted_close:
                self._counted_close = True
                CountedEnv.closed += 1
        super().close()

    @classmethod
    def live(cls) -> int:
        with cls.lock:
            return cls.made - cls.closed


@pytest.fixture
def counted():
    """Register :class:`CountedEnv` with fresh counters; yields its id."""
    CountedEnv.made = CountedEnv.closed = 0
    gym.register(COUNTED, entry_point=CountedEnv, kwargs={"dataset": "gsm8k"},
                 max_episode_steps=8)
    yield COUNTED
    gym.registry.pop(COUNTED)


def wait_for(predicate, what, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s  # a guard against a hang, not a speed claim
    while not predicate():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)


def assert_no_env_left(server):
    """No session open, and every env the server made closed (by its pool and by count)."""
    pool = server.app.state.pool
    wait_for(lambda: pool.active == 0 and CountedEnv.live() == 0, "every session to close")
    assert pool.live_envs == 0 and pool.envs_made == pool.envs_closed
    assert CountedEnv.made == pool.envs_made + 1  # and the probe create_app made and closed


def assert_client_error(response, *statuses):
    """A 4xx answered with one line of JSON naming the error, never a traceback."""
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    text = response.text
    assert "\n" not in text and "Traceback" not in text
    body = json.loads(text)
    assert body.get("code") or body.get("error"), text[:300]


def opened(reply):
    """The session id and the owner's headers of a /reset reply."""
    assert reply.status_code == 200, reply.text[:300]
    body = reply.json()
    assert reply.headers[TOKEN] == body["session_token"]
    return body["session_id"], {TOKEN: body["session_token"]}


# ------------------------------------------------------------------------------ in-process
@pytest.mark.parametrize("reset", [
    {"options": {"task_id": "nope"}},
    {"options": {"index": 10**6}},
    {"options": {"index": "0"}},
    {"options": {"indx": 0}},
    {"options": "x"},
    {"seed": -1},
])
def test_a_failed_reset_leaves_the_env_usable(reset):
    env = gym.make("lumos/GSM8K-v0")  # with gymnasium's checker, whose first reset this is
    with pytest.raises((ResetOptionsError, gym.error.Error)):
        env.reset(**reset)
    env.reset(seed=1)
    observation, _, terminated, _, info = env.step("R1 = Teleport(home)")
    assert observation.startswith("Error: unknown action") and not terminated
    with pytest.raises((ResetOptionsError, gym.error.Error)):
        env.reset(**reset)  # in mid-episode: the episode goes on untouched
    observation, reward, terminated, _, info = env.step("Answer(7)")
    assert terminated and info["steps"] == 2 and info["prediction"] == "7"
    env.close()


def test_an_unknown_option_names_the_known_ones():
    env = gym.make("lumos/GSM8K-v0")
    with pytest.raises(ResetOptionsError, match="'taskid'.* takes index, reference, task_id"):
        env.reset(options={"taskid": "gsm8k/sample/0"})
    env.close()


# ------------------------------------------------------------------------------ the pool
def test_the_pool_closes_every_env_whatever_becomes_of_its_caller(counted):
    from lumos_gym.serving.sessions import SessionError, SessionPool

    def make():
        time.sleep(0.05)
        return CountedEnv(dataset="gsm8k")

    def busy(env):  # a call that runs a while, then says whether its env was closed under it
        time.sleep(0.05)
        return env.unwrapped._counted_close

    async def main():
        pool = SessionPool(make, max_sessions=4)
        # the caller goes away while its env is being made: the env is closed once made
        opening = asyncio.ensure_future(pool.open())
        await asyncio.sleep(0.01)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        # the caller goes away while its call runs: the session ends, the env is closed after
        session = await pool.open(owned=True)
        calling = asyncio.ensure_future(pool.call(session, busy))
        await asyncio.sleep(0.01)
        calling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await calling
        assert session.ended and pool.active == 0
        # a session closed while its call runs keeps its env until the call returns
        session = await pool.open(owned=True)
        calling = asyncio.ensure_future(pool.call(session, busy))
        await asyncio.sleep(0.01)
        await pool.close(session, "closed by its client")
        assert await calling is False  # not closed under the call
        assert session.env is None
        # the server shuts down while an env is being made: it is closed, not handed out
        opening = asyncio.ensure_future(pool.open())
        await asyncio.sleep(0.01)
        await pool.close_all()
        with pytest.raises(SessionError, match="shutting down"):
            await opening
        return pool

    pool = asyncio.run(main())
    wait_for(lambda: CountedEnv.live() == 0, "every env to close", timeout_s=10)
    assert CountedEnv.made == pool.envs_made == pool.envs_closed == 4


# ------------------------------------------------------------------------ HTTP: ownership
@pytest.mark.full
def test_one_client_cannot_step_read_or_delete_another_s_session(env_servers, counted):
    server = env_servers(counted, max_sessions=4)
    with httpx.Client(base_url=server.base_url, timeout=30) as alice, \
            httpx.Client(base_url=server.base_url, timeout=30) as bob:
        session, owner = opened(alice.post("/reset", json={"seed": 0}))
        bobs_session, bobs = opened(bob.post("/reset", json={"seed": 1}))
        unknown = "s9-000000000000"
        for name, headers in (("no token", {}), ("a wrong one", {TOKEN: "guess"}),
                              ("another session's", bobs)):
            for sid in (session, unknown):  # a foreign session reads as one that is not there
                answers = [
                    bob.post("/step", json={"session_id": sid, "action": {"text": "Answer(1)"}},
                             headers=headers),
                    bob.get("/state", params={"session_id": sid}, headers=headers),
                    bob.delete(f"/sessions/{sid}", headers=headers),
                    bob.post("/reset", json={"session_id": sid}, headers=headers),
                ]
                for answer in answers:
                    assert_client_error(answer, 404)
                    assert answer.json()["code"] == "SESSION_ERROR", name
                    assert answer.json()["detail"].replace(sid, "ID") == (
                        "no open session 'ID' with this session token (POST /reset opens one "
                        "and answers its token)")
        listed = bob.get("/sessions", headers=bobs).json()
        assert listed["active_sessions"] == 2
        assert [s["session_id"] for s in listed["sessions"]] == [bobs_session]
        assert bob.get("/sessions").json()["sessions"] == []
        both = {TOKEN: f"{owner[TOKEN]}, {bobs[TOKEN]}"}
        assert len(alice.get("/sessions", headers=both).json()["sessions"]) == 2
        # the owner's session went on untouched
        state = alice.get("/state", params={"session_id": session}, headers=owner).json()
        assert state["step_count"] == 0 and state["episodes"] == 1
        step = alice.post("/step", json={"session_id": session,
                                         "action": {"text": "R1 = Calculator(2+3)"}},
                          headers=owner)
        assert step.json()["observation"]["text"] == "R1 = 5"
        assert alice.delete(f"/sessions/{session}", headers=owner).json()["closed"]
        gone = alice.get("/state", params={"session_id": session}, headers=owner)
        assert gone.status_code == 404 and "closed by its client" in gone.json()["detail"]
        assert bob.delete(f"/sessions/{bobs_session}", headers=bobs).status_code == 200
    assert_no_env_left(server)


@pytest.mark.full
def test_with_an_api_key_sessions_lists_them_all_but_stepping_needs_the_token(env_servers, counted):
    key = {"Authorization": "Bearer k3y"}
    server = env_servers(counted, api_key="k3y")
    with httpx.Client(base_url=server.base_url, timeout=30, headers=key) as http:
        session, owner = opened(http.post("/reset", json={"seed": 0}))
        listed = http.get("/sessions").json()["sessions"]
        assert [s["session_id"] for s in listed] == [session]
        foreign = http.post("/step", json={"session_id": session, "action": {"text": "x"}})
        assert_client_error(foreign, 404)
        assert http.delete(f"/sessions/{session}").status_code == 404
        assert http.delete(f"/sessions/{session}", headers=owner).status_code == 200
    assert_no_env_left(server)


# ------------------------------------------------------------------ capacity and leaks
@pytest.mark.full
def test_64_bad_resets_leave_the_capacity_untouched(env_servers, counted):
    server = env_servers(counted, max_sessions=2)
    pool = server.app.state.pool
    bad = [{"seed": -1}, {"seed": "a"}, {"seed": 2**64}, {"seed": True}, {"options": "x"},
           {"options": {"task_id": "nope"}}, {"options": {"index": 24}},
           {"options": {"index": 1.0}}, {"options": {"colour": "red"}}, {"session_id": ["s1"]},
           {"session_id": 7}, {"episode_id": {"a": 1}}, {"sed": 1}, {"options": [1]},
           {"options": {"reference": 3}}, {"options": {"task_id": 5}}]

    async def main():
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            answers = await asyncio.gather(*(http.post("/reset", json=bad[n % len(bad)])
                                             for n in range(64)))
            for answer in answers:
                assert_client_error(answer, 422)
            assert pool.envs_made == 0 and pool.active == 0
            good = await asyncio.gather(*(http.post("/reset", json={"seed": n})
                                          for n in range(3)))
            return sorted(answer.status_code for answer in good), good

    statuses, good = asyncio.run(main())
    assert statuses == [200, 200, 503]  # the capacity is whole: two open, the third refused
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for answer in good:
            if answer.status_code == 200:
                session, owner = opened(answer)
                assert http.delete(f"/sessions/{session}", headers=owner).status_code == 200
    assert_no_env_left(server)


@pytest.mark.full
def test_four_rounds_of_duplicate_and_concurrent_resets_leak_no_env(env_servers, counted):
    server = env_servers(counted, {"delay_s": 0.02}, max_sessions=3)
    pool = server.app.state.pool

    async def round_(http, n):
        # six new sessions at once: three open, three are refused (none made past capacity)
        fresh = await asyncio.gather(*(http.post("/reset", json={"seed": k}) for k in range(6)))
        assert sorted(r.status_code for r in fresh) == [200] * 3 + [503] * 3
        owned = [opened(r) for r in fresh if r.status_code == 200]
        # six resets at once naming an id no client was given: nothing is opened for them
        named = await asyncio.gather(*(http.post("/reset", json={"session_id": f"dup{n}"})
                                       for _ in range(6)))
        assert {r.status_code for r in named} == {404}
        # six resets at once of each open session: each restarts that session's own env
        again = await asyncio.gather(*(http.post("/reset", json={"session_id": sid, "seed": k},
                                                 headers=owner)
                                       for sid, owner in owned for k in range(6)))
        assert {r.status_code for r in again} == {200}
        assert {r.json()["session_id"] for r in again} == {sid for sid, _ in owned}
        assert pool.envs_made == 3 * (n + 1) and pool.live_envs == 3
        # a delete while a reset of the same session is in flight
        sid, owner = owned[0]
        racing = asyncio.ensure_future(http.post("/reset", json={"session_id": sid},
                                                 headers=owner))
        await asyncio.sleep(0.005)
        tokens = {TOKEN: ", ".join(owner[TOKEN] for _, owner in owned)}
        listed = (await http.get("/sessions", headers=tokens)).json()["sessions"]
        assert sorted(s["session_id"] for s in listed) == sorted(sid for sid, _ in owned)
        ends = await asyncio.gather(*(http.delete(f"/sessions/{s}", headers=o)
                                      for s, o in owned))
        assert {r.status_code for r in ends} == {200}
        assert (await racing).status_code in (200, 404)
        assert (await http.get("/sessions")).json()["active_sessions"] == 0

    async def main():
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            for n in range(4):
                await round_(http, n)

    asyncio.run(main())
    assert_no_env_left(server)
    assert pool.envs_made == 12


# ---------------------------------------------------------------------------- the fuzz
def hostile_bodies(rng: random.Random, n: int) -> list[tuple[str, str, bytes, dict]]:
    """``n`` requests (method, path, body, headers) no server may answer with a 5xx."""
    values = [None, True, -1, 0, 2**64, 1e308, "", "x" * 300, [], {}, [1, [2]], {"a": {"b": 1}},
              "s1-000000000000", "\u0000", "\ud83d\ude00"]
    fixed = [b"[" * 100_000, b'{"a":' * 50_000, b'{"session_id": ' + b"[" * 70 + b"]" * 70 + b"}",
             b"\xff\xfe\x00", b"nul\x00l", b'{"seed": 1e999}', b'{"seed": NaN}', b'"just a string"',
             b"1" * 5000, b'{"action": {"text": "' + b"y" * 10_000 + b'"}, "session_id": "s1"}',
             b'{"options": {"index": 99999999999999999999999}}', b"{}" * 3, b"{" + b" " * 1000]
    requests = []
    for body in fixed:
        for path in ("/reset", "/step"):
            requests.append(("POST", path, body, {}))
    for _ in range(n - len(requests)):
        fields = {key: rng.choice(values) for key in rng.sample(
            ["seed", "options", "episode_id", "session_id", "action", "type", "data"],
            rng.randint(0, 4))}
        if rng.random() < 0.3:
            fields["options"] = {rng.choice(["index", "task_id", "reference", "x"]):
                                 rng.choice(values)}
        if rng.random() < 0.3:
            fields["action"] = {"text": rng.choice(["R1 = Calculator(1+1)", "x" * 9000, ""])}
        headers = {}
        if rng.random() < 0.3:
            headers[TOKEN] = rng.choice(["", "guess", "a" * 500, "t, u, v"])
        if rng.random() < 0.2:
            headers["X-Session-Id"] = rng.choice(["s1-000000000000", "x" * 300, "a b"])
        method, path = rng.choice([("POST", "/reset"), ("POST", "/step"), ("GET", "/state"),
                                   ("GET", "/sessions"), ("DELETE", "/sessions/s1-0"),
                                   ("DELETE", "/sessions/%00%ff")])
        body = json.dumps(fields).encode() if method == "POST" else b""
        requests.append((method, path, body, headers))
    return requests


@pytest.mark.full
def test_hostile_http_bodies_get_4xx_and_leave_nothing_open(env_servers, counted):
    server = env_servers(counted, max_sessions=2, max_body_bytes=2**20)
    statuses = []
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        # a session of its own runs beside the fuzz and must come out of it untouched
        session, owner = opened(http.post("/reset", json={"seed": 3}))
        for method, path, body, headers in hostile_bodies(random.Random(37), 300):
            answer = http.request(method, path, content=body, headers=headers)
            statuses.append(answer.status_code)
            if answer.status_code == 200:  # a new session some body opened: close it again
                if path == "/reset":
                    sid, token = opened(answer)
                    assert http.delete(f"/sessions/{sid}", headers=token).status_code == 200
                continue
            assert_client_error(answer, 400, 404, 413, 422, 503)
        huge = http.post("/step", json={"session_id": session,
                                        "action": {"text": "R1 = " + "9" * 100_000}},
                         headers=owner)
        assert_client_error(huge, 422)
        assert "at most 8192" in huge.json()["detail"]
        too_big = http.post("/step", content=b'{"action": {"text": "' + b"z" * 2**21 + b'"}}')
        assert too_big.status_code == 413
        deep = http.post("/reset", content=b'{"options": ' + b"[" * 70 + b"]" * 70 + b"}")
        assert_client_error(deep, 400)
        assert deep.json()["detail"] == "the JSON is nested more than 64 levels deep"
        # the env itself refuses a reset: a new session is closed with its env, an open one
        # keeps its episode
        refused = http.post("/reset", json={"seed": 13})
        assert_client_error(refused, 422)
        assert "refuses seed 13" in refused.json()["detail"]
        assert server.app.state.pool.active == 1 and CountedEnv.live() == 1
        refused = http.post("/reset", json={"seed": 13, "session_id": session}, headers=owner)
        assert_client_error(refused, 422)
        step = http.post("/step", json={"session_id": session,
                                        "action": {"text": "R1 = Calculator(6*7)"}},
                         headers=owner)
        assert step.json()["observation"]["text"] == "R1 = 42"
        assert http.delete(f"/sessions/{session}", headers=owner).status_code == 200
    assert max(statuses) < 500 and statuses.count(422) > 50 and statuses.count(400) > 10
    assert_no_env_left(server)


@pytest.mark.full
def test_hostile_websocket_messages_and_dropped_connections_leave_nothing_open(
        env_servers, counted):
    from websockets.sync.client import connect

    server = env_servers(counted, {"delay_s": 0.2}, max_sessions=4)
    url = server.base_url.replace("http://", "ws://") + "/ws"
    messages = ["[" * 100_000, '{"a":' * 50_000, "not json", "[1]", '{"type": [1]}',
                '{"type": "reset", "data": {"options": {"index": 999}}}',
                '{"type": "reset", "data": {"options": {"task_id": "nope"}}}',
                '{"type": "reset", "data": {"seed": -1}}', '{"type": "reset", "data": [1]}',
                '{"type": "step", "data": {"text": "' + "x" * 9000 + '"}}',
                '{"type": "step", "data": "R1 = Calculator(1+1)"}', b"\xff\xfe"]
    with connect(url, proxy=None, open_timeout=10) as ws:
        for message in messages:
            ws.send(message)
            reply = json.loads(ws.recv(timeout=30))
            assert reply["type"] == "error", reply
            assert reply["data"]["code"] in ("INVALID_JSON", "VALIDATION_ERROR",
                                             "UNKNOWN_TYPE", "SESSION_ERROR")
        # the session is still there, and still the same
        ws.send(json.dumps({"type": "reset", "data": {"seed": 0, "options": {"index": 3}}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        ws.send(json.dumps({"type": "step", "data": {"text": "R1 = Calculator(2*4)"}}))
        assert json.loads(ws.recv(timeout=30))["data"]["observation"]["text"] == "R1 = 8"
        ws.send('{"type": "state"}')
        assert json.loads(ws.recv(timeout=30))["data"]["step_count"] == 1
    # connections that go away mid-episode: after a reply, and with a call in flight
    for in_flight in (False, True, True):
        ws = connect(url, proxy=None, open_timeout=10)
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        if not in_flight:
            ws.recv(timeout=30)
        ws.socket.shutdown(socket.SHUT_RDWR)  # no close frame: the client just disappears
        ws.socket.close()
    # an HTTP client that goes away before its new session (and its token) is answered
    with socket.create_connection(("127.0.0.1", server.port)) as raw:
        body = b'{"seed": 0}'
        raw.sendall(b"POST /reset HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body))
        time.sleep(0.05)
        raw.shutdown(socket.SHUT_RDWR)
    assert_no_env_left(server)


# ------------------------------------------------------------------------ over the clients
@pytest.mark.full
def test_a_bad_index_or_task_id_over_lumos_remote_keeps_the_session(env_servers, counted):
    server = env_servers(counted)
    env = gym.make("lumos/remote", url=server.base_url)
    env.reset(seed=0)
    first = env.unwrapped.state()["session_id"]
    for options in ({"index": 999}, {"task_id": "gsm8k/sample/typo"}, {"colour": 1}):
        with pytest.raises(RemoteEnvError, match="VALIDATION_ERROR"):
            env.reset(seed=1, options=options)
    env.reset(seed=1, options={"index": 2})
    assert env.step("R1 = Calculator(1+1)")[0] == "R1 = 2"
    assert env.unwrapped.state()["session_id"] == first  # never dropped
    env.close()
    assert_no_env_left(server)


@pytest.mark.full
def test_game_workers_end_with_their_sessions(env_servers):
    import psutil

    def workers():
        return {p.pid for p in psutil.Process().children(recursive=True)
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}

    before = workers()
    server = env_servers("lumos/TextWorld-v0", {"num_games": 2}, max_sessions=2)
    pool = server.app.state.pool

    async def main():
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as http:
            fresh = await asyncio.gather(*(http.post("/reset", json={"seed": k})
                                           for k in range(4)))
            assert sorted(r.status_code for r in fresh) == [200, 200, 503, 503]
            owned = [opened(r) for r in fresh if r.status_code == 200]
            sid, owner = owned[0]
            again = await asyncio.gather(*(http.post("/reset", json={"session_id": sid,
                                                                     "seed": k}, headers=owner)
                                           for k in range(3)))
            assert {r.status_code for r in again} == {200}
            assert len(workers() - before) == 2  # one game worker per session, no more
            ends = await asyncio.gather(*(http.delete(f"/sessions/{s}", headers=o)
                                          for s, o in owned))
            assert {r.status_code for r in ends} == {200}

    asyncio.run(main())
    wait_for(lambda: pool.live_envs == 0 and pool.active == 0, "the sessions to close")
    wait_for(lambda: not workers() - before, "the game workers to end")
    assert pool.envs_made == 2
