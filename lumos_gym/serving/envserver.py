"""``lumos-gym serve-env``: one registered env served with the OpenEnv API.

The routes are those of ``openenv-core``'s env server, so that its clients (``EnvClient``,
``GenericEnvClient`` and what TRL, SkyRL, ART and Unsloth build on them) work unchanged:

* ``WS /ws``: a persistent session with its own env instance, owned by the connection (no
  token). The client sends ``{"type": "reset", "data": {"seed"?, "options"?, "episode_id"?}}``,
  ``{"type": "step", "data": {"text": ACTION}}``, ``{"type": "state"}`` or ``{"type":
  "close"}``; the server answers ``{"type": "observation", "data": {"observation", "reward",
  "done"}}``, ``{"type": "state", "data": ...}`` or ``{"type": "error", "data": {"message",
  "code"}}``. A bad message is answered with an error and the session goes on; the session
  and its env end when the connection does.
* ``POST /reset``, ``POST /step``, ``GET /state``: the same over HTTP. OpenEnv's HTTP routes
  make a new env per request; here ``/reset`` opens a session and answers its id and its
  owner token, in the body (``session_id``, ``session_token``) and in the ``X-Session-Id`` and
  ``X-Session-Token`` headers. ``/step``, ``GET /state`` and ``DELETE /sessions/{id}`` take
  the id (body field, query parameter or header) and need the token in the
  ``X-Session-Token`` header; a ``/reset`` naming a session (with its token) starts a new
  episode in that session's env. A wrong or missing token is answered as an unknown id (404
  ``SESSION_ERROR``), so a client learns nothing of the sessions of others.
* ``GET /health``, ``/metadata``, ``/schema`` (action, observation and state JSON schemas),
  ``/sessions`` (the capacity, how many sessions are open, and the sessions whose tokens the
  request carries in ``X-Session-Token``, comma-separated or repeated: all of them on a server
  with an API key, whose every client holds the key) and ``/env`` (what ``lumos/remote``
  needs: the env id and arguments, task ids, reset options, task type, spaces).

Observations are :func:`lumos_gym.envs.remote.encode_step`'s: ``{"text", "image"?, "info",
"terminated", "truncated"}``. Sessions, capacity, idle reaping and crashes are
:class:`~lumos_gym.serving.sessions.SessionPool`'s; error codes are OpenEnv's. Over HTTP each
error is one line of JSON, ``{"detail", "code"}``, with the status of its code:

* ``INVALID_JSON`` 400: a body or message that is not JSON, or is nested more than
  :data:`MAX_JSON_DEPTH` levels deep;
* ``VALIDATION_ERROR`` 422: a body that is not an object, a ``session_id`` that is not a
  string, a reset key other than ``seed`` (an int from 0 to 2**64 - 1, or null), ``options``
  (an object with the env's option keys: ``task_id`` of a served task, ``index`` within the
  tasks) and ``episode_id`` (a string), an action that is not ``{"text": ...}`` or is longer
  than the action space's ``max_length`` (:data:`~lumos_gym.envs.base.MAX_ACTION_CHARS`); all
  checked before a session is opened or an env called, so a bad request holds no capacity and
  leaves its session as it was;
* ``SESSION_ERROR`` 404: no session with that id and token; ``CAPACITY_REACHED`` 503: the
  server holds ``max_sessions`` sessions; ``EXECUTION_ERROR`` and ``FACTORY_ERROR`` 500: the
  env itself failed (the session ends, its env closed).

A body over the size limit is refused by :class:`~lumos_gym.asgi.Guard` (413) before it is
read. Every env a session makes is closed when the session ends (a delete, the idle timeout,
a crash, a connection that went away, a first reset that failed), and shutting down (Ctrl-C,
SIGTERM) closes every session's env.

Every request passes :class:`~lumos_gym.asgi.Guard` first: with an API key, each route but
``GET /health`` (the WebSocket handshake included) needs ``Authorization: Bearer KEY`` or
``X-API-Key: KEY``. :func:`serve_env` refuses a non-loopback host without a key (unless
``insecure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
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
from lumos_gym.envs.base import MAX_ACTION_CHARS, ResetOptionsError, validate_reset_options
from lumos_gym.envs.registration import make_env
from lumos_gym.envs.remote import encode_step, jsonable
from lumos_gym.errors import LumosGymError
from lumos_gym.serving.sessions import Session, SessionError, SessionPool

__all__ = ["MAX_BODY_BYTES", "MAX_JSON_DEPTH", "SESSION_HEADER", "TOKEN_HEADER", "EnvService",
           "ResetRequest", "create_app", "describe_env", "parse_json", "serve_env",
           "start_env_server"]

logger = logging.getLogger(__name__)

#: The largest request body (and WebSocket message) by default: 16 MiB.
MAX_BODY_BYTES = 16 * 2**20
#: The deepest nesting of arrays and objects a body or message may have.
MAX_JSON_DEPTH = 64
#: The largest reset seed (numpy's seeds are unbounded; OpenEnv's clients send 64-bit ones).
MAX_SEED = 2**64 - 1
#: The longest ``episode_id`` a client may name.
MAX_EPISODE_ID_CHARS = 256

SESSION_HEADER = "X-Session-Id"
TOKEN_HEADER = "X-Session-Token"
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
    option_keys = getattr(unwrapped, "reset_option_keys", None)
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
        "reset_options": sorted(option_keys) if option_keys is not None else None,
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


# --------------------------------------------------------------------------- reading requests
def parse_json(raw: str | bytes) -> Any:
    """Return the JSON value of a body or message.

    Raises:
        SessionError: ``INVALID_JSON``: not JSON (nor UTF-8), or nested more than
            :data:`MAX_JSON_DEPTH` levels deep.
    """
    deep = SessionError("INVALID_JSON", f"the JSON is nested more than {MAX_JSON_DEPTH} levels "
                        "deep")
    try:
        value = json.loads(raw)
    except RecursionError:  # the parser's own limit (about 1,000 levels)
        raise deep from None
    except ValueError as e:  # UnicodeDecodeError included
        raise SessionError("INVALID_JSON", f"invalid JSON: {str(e)[:200]}") from None
    if _too_deep(value, MAX_JSON_DEPTH):
        raise deep
    return value


def _too_deep(value: Any, limit: int) -> bool:
    """Return True when ``value`` nests arrays and objects more than ``limit`` levels deep."""
    pending = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, dict | list))
    return False


@dataclass(frozen=True)
class ResetRequest:
    """A checked reset: what the env's ``reset`` gets, and the episode id to report."""

    seed: int | None
    options: dict[str, Any]
    episode_id: str | None


def _invalid(message: str) -> SessionError:
    return SessionError("VALIDATION_ERROR", message)


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

    The ``check_*`` methods read a request without touching any session or env; the callers
    check first, so that a bad request holds nothing and changes nothing.

    Args:
        env_id: the served env.
        kwargs: its constructor arguments.
        pool: the sessions.
        description: :func:`describe_env` of the served env (its task ids, reset option keys
            and action length).
    """

    def __init__(self, env_id: str, kwargs: Mapping[str, Any], pool: SessionPool,
                 description: Mapping[str, Any] | None = None) -> None:
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.pool = pool
        description = description or {}
        self.task_ids = frozenset(description.get("task_ids") or ())
        keys = description.get("reset_options")
        self.option_keys = frozenset(keys) if keys is not None else None
        self.action_max_chars = int(description.get("action_max_length") or MAX_ACTION_CHARS)

    def check_reset(self, data: Any, *, also: frozenset[str] = frozenset()) -> ResetRequest:
        """Return the reset ``data`` (``seed``, ``options``, ``episode_id``; None: none) checked.

        Args:
            data: the reset's data.
            also: further keys the data may hold (the HTTP body's ``session_id``), left out.

        Raises:
            SessionError: ``VALIDATION_ERROR`` naming what is wrong.
        """
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise _invalid(f"reset data must be an object, not {type(data).__name__}")
        unknown = sorted(str(key)[:60] for key in data if key not in _RESET_KEYS | also)
        if unknown:
            known = ", ".join(sorted(_RESET_KEYS | also))
            raise _invalid(f"unknown reset key(s) {', '.join(map(repr, unknown))}; "
                           f"a reset takes {known}")
        seed = data.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)
                                 or not 0 <= seed <= MAX_SEED):
            raise _invalid(f"seed must be an integer from 0 to 2**64 - 1, or null; got "
                           f"{seed!r:.60}")
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str)
                                       or len(episode_id) > MAX_EPISODE_ID_CHARS):
            raise _invalid(f"episode_id must be a string of at most {MAX_EPISODE_ID_CHARS} "
                           f"characters, or null; got {episode_id!r:.60}")
        options = data.get("options")
        if options is None:
            options = {}
        if self.option_keys is None:  # not a lumos-gym env: its own reset checks the rest
            if not isinstance(options, dict):
                raise _invalid(f"options must be an object; got {options!r:.60}")
        else:
            try:
                validate_reset_options(options, self.task_ids, owner=self.env_id,
                                       known=self.option_keys)
            except ResetOptionsError as e:
                raise _invalid(str(e)) from None
        return ResetRequest(seed, dict(options), episode_id)

    def check_action(self, action: Any) -> str:
        """Return the text of ``action`` (``{"text": ...}``), checked.

        Raises:
            SessionError: ``VALIDATION_ERROR``: not such an object, or a text longer than the
                action space's ``max_length``.
        """
        if not isinstance(action, Mapping) or not isinstance(action.get("text"), str):
            shown = action if isinstance(action, str | int | float | None) else type(action)
            raise _invalid('an action is {"text": "<grounded actions>"}; '
                           f"got {str(shown)[:200]}")
        text = action["text"]
        if len(text) > self.action_max_chars:
            raise _invalid(f"the action is {len(text)} characters long; this env takes at most "
                           f"{self.action_max_chars}")
        return text

    async def reset(self, session: Session, request: ResetRequest) -> dict[str, Any]:
        """Start an episode in ``session`` (``request`` from :meth:`check_reset`)."""
        result = await self.pool.call(session, _reset, request.seed, request.options)
        session.steps = 0
        session.episodes += 1
        session.task_id = result["observation"]["info"].get("task_id")
        session.episode_id = request.episode_id or f"{session.id}-{session.episodes}"
        return result

    async def step(self, session: Session, text: str) -> dict[str, Any]:
        """Run one action text (from :meth:`check_action`) in ``session``."""
        result = await self.pool.call(session, _step, text)
        session.steps += 1
        return result

    def state(self, session: Session) -> dict[str, Any]:
        """Return the OpenEnv state of ``session``."""
        if session.ended is not None:
            raise SessionError("SESSION_ERROR", f"session {session.id!r} is closed: "
                               f"{session.ended}")
        return {"episode_id": session.episode_id, "step_count": session.steps,
                "session_id": session.id, "task_id": session.task_id, "env_id": self.env_id,
                "episodes": session.episodes}

    async def message(self, session: Session, raw: str | bytes) -> str | None:
        """Answer one WebSocket message (None: the client closed the session)."""
        try:
            message = parse_json(raw)
        except SessionError as e:
            return _ws_error(e.code, str(e))
        if not isinstance(message, dict):
            return _ws_error("INVALID_JSON", 'a message is a JSON object {"type": ...}')
        kind = message.get("type")
        try:
            if kind == "reset":
                request = self.check_reset(message.get("data"))
                return _ws_reply("observation", await self.reset(session, request))
            if kind == "step":
                text = self.check_action(message.get("data"))
                return _ws_reply("observation", await self.step(session, text))
            if kind == "state":
                return _ws_reply("state", self.state(session))
            if kind == "close":
                return None
        except SessionError as e:
            return _ws_error(e.code, str(e))
        except Exception as e:  # a bug here must not drop the connection with its session
            logger.exception("answering a WebSocket message failed")
            return _ws_error("EXECUTION_ERROR", f"the server failed: {type(e).__name__}")
        return _ws_error("UNKNOWN_TYPE", f"unknown message type {str(kind)[:60]!r} "
                         "(reset, step, state or close)")


def _ws_reply(kind: str, data: Any) -> str:
    return json.dumps({"type": kind, "data": data})


def _ws_error(code: str, message: str) -> str:
    return _ws_reply("error", {"message": message, "code": code})


def _json(data: Any, status: int = 200, session: Session | None = None, *,
          token: bool = False) -> Response:
    """Answer ``data``; with ``session``, its id (``token``: and its token) in the headers."""
    headers = {}
    if session is not None:
        headers[SESSION_HEADER] = session.id
        if token and session.token is not None:
            headers[TOKEN_HEADER] = session.token
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
    service = EnvService(env_id, kwargs, pool, description)

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

    @app.exception_handler(Exception)
    async def server_error(_request: Request, exc: Exception) -> Response:
        # a bug, not the client's: one line of JSON for the client, the traceback in the log
        return _json({"detail": f"the server failed: {type(exc).__name__}",
                      "code": "EXECUTION_ERROR"}, 500)

    _add_info_routes(app, description, pool, listed_all=api_key is not None)
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
            while (raw := await _receive(ws)) is not None:
                reply = await service.message(session, raw)
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


async def _receive(ws: WebSocket) -> str | bytes | None:
    """Return the next WebSocket message, text or bytes; None once the client has gone."""
    message = await ws.receive()
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    return text if text is not None else message.get("bytes") or b""


async def _refuse(ws: WebSocket, error: SessionError, *, limit_s: float = 30.0) -> None:
    """Answer each message of a connection that got no session with ``error``, then close.

    The connection stays open until the client closes it (or ``limit_s``), so that the client
    reads the error as the reply to its first message instead of a closed connection.
    """
    with contextlib.suppress(WebSocketDisconnect, TimeoutError):
        async with asyncio.timeout(limit_s):
            while (raw := await _receive(ws)) is not None:
                if isinstance(raw, str) and '"close"' in raw:
                    break
                await ws.send_text(_ws_error(error.code, str(error)))
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await ws.close()


def _add_info_routes(app: FastAPI, description: dict[str, Any], pool: SessionPool, *,
                     listed_all: bool) -> None:
    """Add the routes that tell about the server; ``listed_all``: ``/sessions`` lists all."""
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
    async def sessions(request: Request) -> Response:
        # with an API key every request here carries it (Guard): the key holders see them all
        tokens = [token.strip() for value in request.headers.getlist(TOKEN_HEADER)
                  for token in value.split(",")]
        shown = list(pool.sessions.values()) if listed_all else pool.owned(tokens)
        return _json({"active_sessions": pool.active, "max_sessions": pool.max_sessions,
                      "sessions": [s.info() for s in shown]})


async def _body(request: Request) -> dict[str, Any]:
    """Return the JSON object of a request's body (an empty body: ``{}``)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise _invalid(f"the body must be a JSON object, not {type(body).__name__}")
    return body


def _session_id(request: Request, body: Mapping[str, Any]) -> str | None:
    """Return the session id a request names: body field, query parameter or header."""
    found = body.get("session_id")
    if found is not None and not isinstance(found, str):
        raise _invalid(f"session_id must be a string, not {type(found).__name__}")
    found = found or request.query_params.get("session_id")
    return found or request.headers.get(SESSION_HEADER) or None


def _owned(pool: SessionPool, request: Request, session_id: str) -> Session:
    """Return the session ``session_id`` if the request carries its token, else 404."""
    return pool.get(session_id, request.headers.get(TOKEN_HEADER))


def _add_http_session_routes(app: FastAPI, service: EnvService) -> None:
    pool = service.pool

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        body = await _body(request)
        session_id = _session_id(request, body)
        checked = service.check_reset(body, also=frozenset({"session_id"}))
        if session_id is not None:  # a new episode in the client's own session
            session = _owned(pool, request, session_id)
            result = await service.reset(session, checked)
        else:
            session = await pool.open(owned=True)
            try:
                result = await service.reset(session, checked)
            except BaseException:  # its client has no token yet: nobody else would close it
                await pool.close(session, "its first reset failed")
                raise
            if await request.is_disconnected():
                await pool.close(session, "its client went away before it was answered")
        return _json({**result, "session_id": session.id, "session_token": session.token},
                     session=session, token=True)

    @app.post("/step")
    async def step(request: Request) -> Response:
        body = await _body(request)
        session_id = _session_id(request, body)
        text = service.check_action(body.get("action"))
        if not session_id:
            raise SessionError("SESSION_ERROR", "no session_id: POST /reset first and pass the "
                               f"session_id it answers (body field or {SESSION_HEADER} header) "
                               f"with its session_token in the {TOKEN_HEADER} header")
        session = _owned(pool, request, session_id)
        result = await service.step(session, text)
        return _json({**result, "session_id": session.id}, session=session)

    @app.get("/state")
    async def state(request: Request) -> Response:
        session_id = _session_id(request, {})
        if not session_id:  # the server's own state: no episode
            return _json({"episode_id": None, "step_count": 0, "active_sessions": pool.active,
                          "max_sessions": pool.max_sessions})
        session = _owned(pool, request, session_id)
        return _json(service.state(session), session=session)

    @app.delete("/sessions/{session_id}")
    async def end_session(session_id: str, request: Request) -> Response:
        await pool.close(_owned(pool, request, session_id), "closed by its client")
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
