"""``lumos-gym serve-env``: one registered env served with the OpenEnv API.

The routes are those of ``openenv-core``'s env server, so that its clients (``EnvClient``,
``GenericEnvClient`` and what TRL, SkyRL, ART and Unsloth build on them) work unchanged:

* ``WS /ws``: a persistent session with its own env instance. The client sends
  ``{"type": "reset", "data": {"seed"?, "options"?, "episode_id"?}}``, ``{"type": "step",
  "data": {"text": ACTION}}``, ``{"type": "state"}`` or ``{"type": "close"}``; the server answers
  ``{"type": "observation", "data": {"observation", "reward", "done"}}``, ``{"type": "state",
  "data": ...}`` or ``{"type": "error", "data": {"message", "code"}}``.
* ``POST /reset``, ``POST /step``, ``GET /state``: the same over HTTP. OpenEnv's HTTP routes
  make a new env per request; here ``/reset`` opens a session (or restarts the one named by
  ``session_id``) and answers its id in the body and in the ``X-Session-Id`` header, which
  ``/step`` and ``/state`` then take (body field, query parameter or header), so that an episode
  can be played to its end over plain HTTP too. ``DELETE /sessions/{id}`` ends one.
* ``GET /health``, ``/metadata``, ``/schema`` (action, observation and state JSON schemas),
  ``/sessions`` (the open sessions and the capacity) and ``/env`` (what ``lumos/remote`` needs:
  the env id and arguments, task ids, task type, spaces).

Observations are :func:`lumos_gym.envs.remote.encode_step`'s: ``{"text", "image"?, "info",
"terminated", "truncated"}``. Sessions, capacity, idle reaping and crashes are
:class:`~lumos_gym.serving.sessions.SessionPool`'s; error codes are OpenEnv's (HTTP statuses:
``CAPACITY_REACHED`` 503, ``SESSION_ERROR`` 404, ``VALIDATION_ERROR`` 422, ``EXECUTION_ERROR``
and ``FACTORY_ERROR`` 500). Shutting down (Ctrl-C, SIGTERM) closes every session's env.

Every request passes :class:`~lumos_gym.asgi.Guard` first: with an API key, each route but
``GET /health`` (the WebSocket handshake included) needs ``Authorization: Bearer KEY`` or
``X-API-Key: KEY``, and a body over the size limit is refused with 413 before it is read.
:func:`serve_env` refuses a non-loopback host without a key (unless ``insecure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

try:
    from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
    from fastapi.responses import Response
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError("`lumos-gym serve-env` needs fastapi, uvicorn and websockets; install "
                      "them with: pip install 'lumos-gym[envserver]'") from e

import gymnasium as gym

from lumos_gym import __version__
from lumos_gym.asgi import Guard, ThreadedServer, bind_socket, check_exposure
from lumos_gym.envs.registration import make_env
from lumos_gym.envs.remote import encode_step, jsonable
from lumos_gym.errors import LumosGymError
from lumos_gym.serving.sessions import Session, SessionError, SessionPool

__all__ = ["MAX_BODY_BYTES", "EnvService", "create_app", "describe_env", "serve_env",
           "start_env_server"]

#: The largest request body (and WebSocket message) by default: 16 MiB.
MAX_BODY_BYTES = 16 * 2**20

SESSION_HEADER = "X-Session-Id"
_RESET_KEYS = frozenset({"seed", "options", "episode_id"})


def describe_env(env_id: str, kwargs: Mapping[str, Any], env: gym.Env) -> dict[str, Any]:
    """Return ``GET /env``: what a client needs to stand in for the served env."""
    unwrapped = env.unwrapped
    observation = env.observation_space
    shown: dict[str, Any] = {"max_length": getattr(observation, "max_length", None),
                             "image_shape": None}
    if isinstance(observation, gym.spaces.Dict):
        shown = {"max_length": getattr(observation["text"], "max_length", None),
                 "image_shape": list(observation["image"].shape)}
    task_ids = unwrapped.task_ids() if hasattr(unwrapped, "task_ids") else []
    source = getattr(unwrapped, "source", None)
    specs = getattr(unwrapped, "action_specs", [])
    return jsonable({
        "env_id": env_id,
        "kwargs": dict(kwargs),
        "version": __version__,
        "task_type": getattr(unwrapped, "task_type", None),
        "primary_metric": getattr(unwrapped, "primary_metric", None),
        "ends_by_answer": getattr(unwrapped, "ends_by_answer", True),
        "replay_options": dict(getattr(unwrapped, "replay_options", {})),
        "actions": [spec.describe() for spec in specs],
        "task_ids": task_ids,
        "source": source.describe() if source is not None and hasattr(source, "describe")
        else None,
        "observation": shown,
        "action_max_length": getattr(env.action_space, "max_length", None),
        "max_episode_steps": env.spec.max_episode_steps if env.spec is not None else None,
    })


def _schemas(description: Mapping[str, Any]) -> dict[str, Any]:
    """``GET /schema``: JSON schemas of the action, the observation and the state."""
    text = {"type": "string", "maxLength": description["observation"]["max_length"]}
    image = {"type": "object", "description": "an RGB picture: base64 bytes, shape, dtype",
             "properties": {"base64": {"type": "string"}, "dtype": {"type": "string"},
                            "shape": {"type": "array", "items": {"type": "integer"}}}}
    observation = {"title": "LumosObservation", "type": "object", "required": ["text", "info"],
                   "properties": {"text": text, "info": {"type": "object"},
                                  "terminated": {"type": "boolean"},
                                  "truncated": {"type": "boolean"}}}
    if description["observation"]["image_shape"] is not None:
        observation["properties"]["image"] = image
    action = {"title": "LumosAction", "type": "object", "required": ["text"],
              "properties": {"text": {"type": "string", "description": "grounded action(s)",
                                      "maxLength": description["action_max_length"]},
                             "metadata": {"type": "object"}}}
    state = {"title": "LumosState", "type": "object",
             "properties": {"episode_id": {"type": ["string", "null"]},
                            "step_count": {"type": "integer", "minimum": 0},
                            "session_id": {"type": "string"}, "task_id": {"type": "string"}}}
    return {"action": action, "observation": observation, "state": state}


# ------------------------------------------------------------------------------ env calls
# run in a session's worker thread, the env first
def _reset(env: gym.Env, seed: int | None, options: dict[str, Any]) -> dict[str, Any]:
    observation, info = env.reset(seed=seed, options=options)
    return encode_step(observation, info)


def _step(env: gym.Env, text: str) -> dict[str, Any]:
    observation, reward, terminated, truncated, info = env.step(text)
    return encode_step(observation, info, reward=reward, terminated=terminated,
                       truncated=truncated)


class EnvService:
    """What a session can ask, for both transports: reset, step and state.

    Args:
        env_id: the served env.
        kwargs: its constructor arguments.
        pool: the sessions.
    """

    def __init__(self, env_id: str, kwargs: Mapping[str, Any], pool: SessionPool) -> None:
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.pool = pool

    async def reset(self, session: Session, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """Start an episode in ``session``; ``data`` holds ``seed``, ``options``, ``episode_id``."""
        data = dict(data or {})
        seed, options = data.get("seed"), data.get("options") or {}
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise SessionError("VALIDATION_ERROR", f"seed must be an integer >= 0; got {seed!r}")
        if not isinstance(options, dict):
            raise SessionError("VALIDATION_ERROR", f"options must be an object; got {options!r}")
        result = await self.pool.call(session, _reset, seed, options)
        session.steps = 0
        session.episodes += 1
        session.task_id = result["observation"]["info"].get("task_id")
        session.episode_id = str(data.get("episode_id") or f"{session.id}-{session.episodes}")
        return result

    async def step(self, session: Session, action: Any) -> dict[str, Any]:
        """Run one action (``{"text": ...}``) in ``session``."""
        if not isinstance(action, Mapping) or not isinstance(action.get("text"), str):
            raise SessionError("VALIDATION_ERROR", 'an action is {"text": "<grounded actions>"}; '
                               f"got {str(action)[:200]}")
        result = await self.pool.call(session, _step, action["text"])
        session.steps += 1
        return result

    def state(self, session: Session) -> dict[str, Any]:
        """Return the OpenEnv state of ``session``."""
        return {"episode_id": session.episode_id, "step_count": session.steps,
                "session_id": session.id, "task_id": session.task_id, "env_id": self.env_id,
                "episodes": session.episodes}

    async def message(self, session: Session, raw: str) -> str | None:
        """Answer one WebSocket message (None: the client closed the session)."""
        try:
            message = json.loads(raw)
            if not isinstance(message, dict):
                raise ValueError("a message is a JSON object")
        except ValueError as e:
            return _ws_error("INVALID_JSON", f"invalid JSON: {e}")
        kind = message.get("type")
        try:
            if kind == "reset":
                return _ws_reply("observation", await self.reset(session, message.get("data")))
            if kind == "step":
                return _ws_reply("observation", await self.step(session, message.get("data")))
            if kind == "state":
                return _ws_reply("state", self.state(self.pool.get(session.id)))
            if kind == "close":
                return None
        except SessionError as e:
            return _ws_error(e.code, str(e))
        return _ws_error("UNKNOWN_TYPE", f"unknown message type {kind!r} "
                         "(reset, step, state or close)")


def _ws_reply(kind: str, data: Any) -> str:
    return json.dumps({"type": kind, "data": data})


def _ws_error(code: str, message: str) -> str:
    return _ws_reply("error", {"message": message, "code": code})


def _json(data: Any, status: int = 200, session: Session | None = None) -> Response:
    headers = {SESSION_HEADER: session.id} if session is not None else None
    return Response(json.dumps(data), status_code=status, media_type="application/json",
                    headers=headers)


# ---------------------------------------------------------------------------------- the app
def create_app(
    env_id: str, kwargs: Mapping[str, Any] | None = None, *, max_sessions: int = 64,
    idle_timeout_s: float | None = 600.0, call_timeout_s: float | None = 300.0,
    api_key: str | None = None, max_body_bytes: int = MAX_BODY_BYTES, announce: bool = False,
) -> FastAPI:
    """Return the FastAPI app serving ``env_id`` made with ``kwargs``, ready for uvicorn.

    One env is made here and closed (a bad id or argument fails now, not at the first
    client); each session then makes its own. The app needs uvicorn's lifespan (``"on"``): it
    starts the idle reaper and, at shutdown, closes every session (``announce``: and prints
    how many).

    Args:
        env_id: a registered env id.
        kwargs: its constructor arguments.
        max_sessions: sessions open at once; one more is refused (``CAPACITY_REACHED``).
        idle_timeout_s: a session idle this long is closed; None: never.
        call_timeout_s: a reset or step running longer is answered with an error; None: none.
        api_key: the key every request but ``GET /health`` must carry; None: none.
        max_body_bytes: a larger request body is refused (413) before it is read.
        announce: print how many sessions shutting down closed.

    Raises:
        LumosGymError: the env cannot be made with ``kwargs``, or ``max_body_bytes`` is below 1.
    """
    if max_body_bytes < 1:  # checked now: the middleware itself is made at the first request
        raise LumosGymError(f"max_body_bytes must be at least 1; got {max_body_bytes}")
    kwargs = dict(kwargs or {})
    probe = make_env(env_id, **kwargs)
    try:
        description = describe_env(env_id, kwargs, probe)
    finally:
        probe.close()
    pool = SessionPool(lambda: make_env(env_id, **kwargs), max_sessions=max_sessions,
                       idle_timeout_s=idle_timeout_s, call_timeout_s=call_timeout_s)
    service = EnvService(env_id, kwargs, pool)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(pool.reap_forever())
        try:
            yield
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            await pool.close_all()
            if announce:
                print(f"shut down: {pool.closed} session(s) closed with their envs", flush=True)

    app = FastAPI(title=f"lumos-gym: {env_id}", version=__version__, lifespan=lifespan)
    app.state.pool = pool

    @app.exception_handler(SessionError)
    async def session_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SessionError)
        return _json({"detail": str(exc), "code": exc.code}, exc.status)

    _add_info_routes(app, description, pool)
    _add_http_session_routes(app, service)
    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes)

    @app.websocket("/ws")
    async def websocket(ws: WebSocket) -> None:
        await ws.accept()
        try:
            session = await pool.open()
        except SessionError as e:
            await _refuse(ws, e)
            return
        try:
            while True:
                reply = await service.message(session, await ws.receive_text())
                if reply is None:
                    break
                await ws.send_text(reply)
        except WebSocketDisconnect:
            pass
        finally:
            await pool.close(session, "its client closed the connection")
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await ws.close()  # already closed when the client went first

    return app


async def _refuse(ws: WebSocket, error: SessionError, *, limit_s: float = 30.0) -> None:
    """Answer each message of a connection that got no session with ``error``, then close.

    The connection stays open until the client closes it (or ``limit_s``), so that the client
    reads the error as the reply to its first message instead of a closed connection.
    """
    with contextlib.suppress(WebSocketDisconnect, TimeoutError):
        async with asyncio.timeout(limit_s):
            while True:
                raw = await ws.receive_text()
                if '"close"' in raw:
                    break
                await ws.send_text(_ws_error(error.code, str(error)))
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await ws.close()


def _add_info_routes(app: FastAPI, description: dict[str, Any], pool: SessionPool) -> None:
    schemas = _schemas(description)
    metadata = {"name": description["env_id"], "version": description["version"],
                "description": f"lumos-gym's {description['env_id']} "
                               f"({description['task_type']}) with {description['kwargs']}",
                "readme_content": None, "author": "lumos-gym",
                "documentation_url": None}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/metadata")
    async def get_metadata() -> dict[str, Any]:
        return metadata

    @app.get("/schema")
    async def get_schema() -> dict[str, Any]:
        return schemas

    @app.get("/env")
    async def get_env() -> Response:
        return _json({**description, "max_sessions": pool.max_sessions,
                      "idle_timeout_s": pool.idle_timeout_s})

    @app.get("/sessions")
    async def sessions() -> dict[str, Any]:
        return {"active_sessions": pool.active, "max_sessions": pool.max_sessions,
                "sessions": [s.info() for s in list(pool.sessions.values())]}


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise SessionError("VALIDATION_ERROR", f"invalid JSON: {e}") from e
    if not isinstance(body, dict):
        raise SessionError("VALIDATION_ERROR", "the body is a JSON object")
    return body


def _session_id(request: Request, body: Mapping[str, Any]) -> str | None:
    found = body.get("session_id") or request.query_params.get("session_id")
    return found or request.headers.get(SESSION_HEADER)


def _add_http_session_routes(app: FastAPI, service: EnvService) -> None:
    pool = service.pool

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        body = await _body(request)
        session_id = _session_id(request, body)
        session = pool.sessions.get(session_id) if session_id else None
        if session is None:
            session = await pool.open(session_id)
        result = await service.reset(session, {k: body[k] for k in _RESET_KEYS if k in body})
        return _json({**result, "session_id": session.id}, session=session)

    @app.post("/step")
    async def step(request: Request) -> Response:
        body = await _body(request)
        session_id = _session_id(request, body)
        if not session_id:
            raise SessionError("SESSION_ERROR", "no session_id: POST /reset first and pass the "
                               f"session_id it answers (body field or {SESSION_HEADER} header)")
        session = pool.get(session_id)
        result = await service.step(session, body.get("action"))
        return _json({**result, "session_id": session.id}, session=session)

    @app.get("/state")
    async def state(request: Request) -> Response:
        session_id = _session_id(request, {})
        if not session_id:  # the server's own state: no episode
            return _json({"episode_id": None, "step_count": 0, "active_sessions": pool.active,
                          "max_sessions": pool.max_sessions})
        session = pool.get(session_id)
        return _json(service.state(session), session=session)

    @app.delete("/sessions/{session_id}")
    async def end_session(session_id: str) -> Response:
        await pool.close(pool.get(session_id), "closed by its client")
        return _json({"session_id": session_id, "closed": True})


# --------------------------------------------------------------------------------- running
def start_env_server(env_id: str, kwargs: Mapping[str, Any] | None = None, *,
                     host: str = "127.0.0.1", port: int = 0, insecure: bool = False,
                     **options: Any) -> ThreadedServer:
    """Serve ``env_id`` in a background thread of this process (tests, benchmarks, notebooks).

    ``options`` are :func:`create_app`'s (``api_key``, ``max_body_bytes``...); a non-loopback
    ``host`` needs ``api_key`` or ``insecure``, as in :func:`serve_env`. Returns the started
    server: ``base_url``, ``stop()``.

    Raises:
        LumosGymError: the host is exposed without a key, or the env cannot be made.
    """
    check_exposure(host, options.get("api_key"), insecure, "the env server")
    app = create_app(env_id, kwargs, **options)
    return ThreadedServer(app, host, port, name="env server", lifespan="on").start()


def serve_env(env_id: str, kwargs: Mapping[str, Any] | None = None, *, host: str = "127.0.0.1",
              port: int = 8000, log_level: str = "warning", api_key: str | None = None,
              insecure: bool = False, max_body_bytes: int = MAX_BODY_BYTES,
              **options: Any) -> None:
    """Serve ``env_id`` on ``host:port`` until interrupted (Ctrl-C or SIGTERM close it cleanly).

    After a signal's clean shutdown uvicorn raises the signal again, so the process ends with
    that signal's status (as its default handler would).

    Args:
        env_id: a registered env id.
        kwargs: its constructor arguments.
        host: the interface; the default accepts local clients only, and another needs
            ``api_key`` or ``insecure``.
        port: the TCP port (0: a free one, printed).
        log_level: uvicorn's log level.
        api_key: the key every request but ``GET /health`` must carry; None: none.
        insecure: serve a non-loopback ``host`` without a key all the same (a warning is
            logged).
        max_body_bytes: the largest request body and WebSocket message; a larger body is
            refused (413) before it is read, a larger message closes its connection.
        **options: :func:`create_app`'s ``max_sessions``, ``idle_timeout_s``, ``call_timeout_s``.

    Raises:
        LumosGymError: the host is exposed without a key, the port is taken, or the env
            cannot be made.
    """
    import uvicorn  # optional extra: envserver

    check_exposure(host, api_key, insecure, "lumos-gym serve-env")
    sock = bind_socket(host, port)  # before the env is made: a busy port fails at once
    try:
        app = create_app(env_id, kwargs, announce=True, api_key=api_key,
                         max_body_bytes=max_body_bytes, **options)
        shown = f"[{host}]" if ":" in host else host
        keyed = "; every client must send the API key" if api_key else ""
        print(f"serving {env_id} on http://{shown}:{sock.getsockname()[1]} (OpenEnv: HTTP "
              f"/reset /step /state /schema, WebSocket /ws{keyed}); Ctrl-C stops it",
              flush=True)
        config = uvicorn.Config(app, log_level=log_level, lifespan="on",
                                timeout_graceful_shutdown=5, ws_max_size=max_body_bytes)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
