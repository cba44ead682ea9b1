"""An env that lives on another machine: the client of ``lumos-gym serve-env``.

``gymnasium.make("lumos/remote", url="http://host:8000")`` gives a Gymnasium env whose
``reset`` and ``step`` run on the env server at ``url`` (``lumos_gym.serving.envserver``), over
one WebSocket session of the OpenEnv protocol: the client sends ``{"type": "reset" | "step" |
"state" | "close", "data": ...}`` and the server answers ``{"type": "observation", "data":
{"observation": ..., "reward": ..., "done": ...}}``, ``{"type": "state", ...}`` or ``{"type":
"error", "data": {"message", "code"}}``. Episodes are the same as in-process: the server's env
is made with the same id and arguments, draws with the same seeds and returns the same text.

This module also holds the wire format both sides share: :func:`encode_step` (what the server
sends of a Gymnasium result) and :func:`decode_step` (what the client makes of it). An
observation travels as ``{"text", "image"?, "info", "terminated", "truncated"}``: the image of a
multimodal env as base64 bytes with its shape, the ``info`` as JSON (numpy values as numbers
and lists, tuples as lists).

A server started with an API key (``lumos-gym serve-env --api-key``) wants it on every request:
the client sends ``Authorization: Bearer KEY`` with its ``api_key`` argument, else
``$LUMOS_GYM_API_KEY`` (none when neither is set). A missing or wrong key is a
:class:`RemoteEnvError` that says so.

An error the served env answers with is a :class:`RemoteEnvError`; a failure of the link or
the server itself (unreachable, no reply in ``timeout_s``, the session dropped, the server at its
capacity) is a :class:`RemoteEnvTransportError`, an :class:`~lumos_gym.errors.InfraError`: the
runner records such an episode as ``infra-error`` and plays it again, instead of ``env-error``.

``websockets`` (the ``envserver`` extra) is imported when the first session opens.
"""

from __future__ import annotations

import base64
import json
import math
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lumos_gym.asgi import API_KEY_ENV, api_key_from
from lumos_gym.envs.text_space import TextSpace
from lumos_gym.errors import InfraError, LumosGymError

__all__ = ["RemoteEnv", "RemoteEnvError", "RemoteEnvTransportError", "decode_step", "encode_step",
           "jsonable"]


#: Error codes after which the server has ended the session (its env crashed, was reaped...).
_SESSION_ENDED = frozenset({"SESSION_ERROR", "EXECUTION_ERROR", "CAPACITY_REACHED",
                            "FACTORY_ERROR"})


#: Error codes that say the server, not its env, failed: another try may succeed.
_SERVER_BUSY = frozenset({"CAPACITY_REACHED"})


class RemoteEnvError(LumosGymError):
    """The env server answered with an error, or could not be reached."""


class RemoteEnvTransportError(RemoteEnvError, InfraError):
    """The env server could not be reached, stopped answering, dropped the session or is full.

    A failure of the machinery, not of the served env (which answers an error of its own with
    a plain :class:`RemoteEnvError`): the runner records the episode as ``infra-error`` and
    plays it again.
    """


# ------------------------------------------------------------------------------- wire format
def jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON data.

    Numpy scalars and arrays become numbers and lists, tuples and sets lists, mapping keys
    strings, non-finite floats and anything else their ``str``.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def _encode_observation(observation: Any) -> dict[str, Any]:
    if isinstance(observation, Mapping):  # multimodal: {"text", "image"}
        image = np.ascontiguousarray(observation["image"])
        return {
            "text": str(observation["text"]),
            "image": {"shape": list(image.shape), "dtype": str(image.dtype),
                      "base64": base64.b64encode(image.tobytes()).decode("ascii")},
        }
    return {"text": str(observation)}


def _decode_observation(data: Mapping[str, Any]) -> Any:
    image = data.get("image")
    if image is None:
        return data["text"]
    array = np.frombuffer(base64.b64decode(image["base64"]), dtype=np.dtype(image["dtype"]))
    return {"text": data["text"], "image": array.reshape(image["shape"]).copy()}


def encode_step(
    observation: Any, info: Mapping[str, Any], *, reward: float | None = None,
    terminated: bool = False, truncated: bool = False,
) -> dict[str, Any]:
    """Return the OpenEnv result of a reset (``reward`` None) or a step, as JSON data.

    ``{"observation": {"text", "image"?, "info", "terminated", "truncated"}, "reward", "done"}``
    where ``done`` is ``terminated or truncated``.
    """
    body = _encode_observation(observation)
    body.update(info=jsonable(info), terminated=bool(terminated), truncated=bool(truncated))
    return {"observation": body, "reward": None if reward is None else float(reward),
            "done": bool(terminated or truncated)}


def decode_step(payload: Mapping[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Return ``(observation, reward, terminated, truncated, info)`` of an :func:`encode_step`."""
    body = payload["observation"]
    reward = payload.get("reward")
    return (_decode_observation(body), 0.0 if reward is None else float(reward),
            bool(body.get("terminated")), bool(body.get("truncated")), dict(body.get("info", {})))


# -------------------------------------------------------------------------------- the client
def ws_url(url: str) -> str:
    """Return the WebSocket URL of the env server at ``url`` (``http(s)://`` or ``ws(s)://``)."""
    base = url.rstrip("/")
    for plain, secure in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(plain):
            return secure + base[len(plain):] + "/ws"
    return (base if base.startswith(("ws://", "wss://")) else f"ws://{base}") + "/ws"


def auth_headers(api_key: str | None) -> dict[str, str]:
    """Return the headers that carry ``api_key`` to a server (none for no key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _key_refused(url: str, status: int) -> RemoteEnvError:
    return RemoteEnvError(f"the env server at {url} refused the API key (HTTP {status}): pass "
                          f"api_key=KEY or set ${API_KEY_ENV} to the server's --api-key")


def fetch_env_spec(url: str, timeout_s: float = 10.0, api_key: str | None = None) -> dict[str, Any]:
    """Return what the env server at ``url`` serves (its ``GET /env``).

    Args:
        url: the server, ``http://host:port``.
        timeout_s: how long the answer may take.
        api_key: the server's key, sent as ``Authorization: Bearer``; None: none.

    Raises:
        RemoteEnvError: the server refused the key.
        RemoteEnvTransportError: the server cannot be reached or answers no JSON.
    """
    base = url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    request = urllib.request.Request(f"{base}/env", headers=auth_headers(api_key))
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise _key_refused(url, e.code) from None
        raise RemoteEnvTransportError(f"the env server at {url} answered GET /env with HTTP "
                                      f"{e.code} (is `lumos-gym serve-env` running there?)") from e
    except (OSError, ValueError) as e:
        raise RemoteEnvTransportError(f"cannot reach the env server at {url}: {e} (is "
                                      "`lumos-gym serve-env` running there?)") from e


class RemoteEnv(gym.Env):
    """A Gymnasium env played on a ``lumos-gym serve-env`` server, one session per instance.

    Args:
        url: the server, ``http://host:port``.
        env_id: the env id the server must serve (checked); any when None.
        timeout_s: how long one reply may take (a step of a slow env included).
        connect_timeout_s: how long opening the session may take.
        api_key: the server's API key (sent as ``Authorization: Bearer``); None:
            ``$LUMOS_GYM_API_KEY``, else none. Prefer the variable on a command line, where
            ``-k`` arguments are shown and recorded.
        **env_kwargs: constructor arguments the served env must have been made with
            (checked against the server's; the server decides them, the client cannot).

    The env's attributes (``task_type``, ``primary_metric``, ``ends_by_answer``, the task
    ids, the spaces) are the served env's. ``state()`` returns the session's OpenEnv state.

    Raises:
        RemoteEnvError: the server serves another env or arguments, or refused the key.
        RemoteEnvTransportError: the server cannot be reached.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, *, url: str, env_id: str | None = None, timeout_s: float = 300.0,
                 connect_timeout_s: float = 10.0, api_key: str | None = None,
                 **env_kwargs: Any) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._api_key = api_key_from(api_key)
        spec = fetch_env_spec(url, connect_timeout_s, self._api_key)
        self.served = spec
        _check_served(spec, url, env_id, env_kwargs)
        self.env_id: str = spec["env_id"]
        self.task_type = spec.get("task_type")
        self.primary_metric = spec.get("primary_metric")
        self.ends_by_answer = spec.get("ends_by_answer", True)
        self.replay_options = dict(spec.get("replay_options") or {})
        self.version = spec.get("version")
        self._task_ids = list(spec.get("task_ids") or [])
        self.observation_space, self.action_space = _spaces(spec)
        self._ws: Any = None

    def task_ids(self) -> list[str]:
        """Return the ids of the served env's tasks, in source order."""
        return list(self._task_ids)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode on the server (the same arguments as the served env's ``reset``)."""
        super().reset(seed=seed)
        data = {"seed": seed, "options": jsonable(options or {})}
        observation, _, _, _, info = decode_step(self._call("reset", data))
        return observation, info

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Send one action text; return the served env's result."""
        return decode_step(self._call("step", {"text": str(action)}))

    def state(self) -> dict[str, Any]:
        """Return the session's state on the server (episode id, step count, task id...)."""
        return dict(self._call("state", None))

    def close(self) -> None:
        """End the session on the server (its env is closed there). Idempotent."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(json.dumps({"type": "close"}))
            except Exception:  # the server may be gone already: nothing left to end
                pass
            ws.close()
        super().close()

    def _connect(self) -> Any:
        if self._ws is None:
            from websockets.exceptions import InvalidHandshake, InvalidStatus  # as below
            from websockets.sync.client import connect  # optional extra: envserver

            try:
                self._ws = connect(ws_url(self.url), open_timeout=self.connect_timeout_s,
                                   max_size=None, proxy=None, compression=None,
                                   additional_headers=auth_headers(self._api_key))
            except InvalidStatus as e:
                status = e.response.status_code
                if status in (401, 403):  # the server closes a handshake without the key: 403
                    raise _key_refused(self.url, status) from None
                raise RemoteEnvTransportError(f"cannot open a session at {self.url}: {e}") from e
            except (OSError, TimeoutError, InvalidHandshake) as e:
                raise RemoteEnvTransportError(f"cannot open a session at {self.url}: {e}") from e
        return self._ws

    def _call(self, kind: str, data: Any) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed  # optional extra: envserver

        ws = self._connect()
        message = {"type": kind} if data is None else {"type": kind, "data": data}
        try:
            ws.send(json.dumps(message))
            reply = json.loads(ws.recv(timeout=self.timeout_s))
        except TimeoutError as e:
            self._drop()
            raise RemoteEnvTransportError(
                f"{self.url}: no reply to {kind} in {self.timeout_s} s") from e
        except ConnectionClosed as e:
            self._drop()
            raise RemoteEnvTransportError(f"{self.url}: the session was closed ({e})") from e
        if reply.get("type") == "error":
            error = reply.get("data") or {}
            if error.get("code") in _SESSION_ENDED:  # the next reset opens a new session
                self._drop()
            kind_of = (RemoteEnvTransportError if error.get("code") in _SERVER_BUSY
                       else RemoteEnvError)
            raise kind_of(f"{self.url}: {error.get('code', 'ERROR')}: "
                          f"{error.get('message', 'unknown error')}")
        return reply.get("data") or {}

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.close()


def _check_served(spec: Mapping[str, Any], url: str, env_id: str | None,
                  env_kwargs: Mapping[str, Any]) -> None:
    served_id = spec.get("env_id", "")
    if env_id is not None and env_id not in (served_id, served_id.removeprefix("lumos/")):
        raise RemoteEnvError(f"the server at {url} serves {served_id}, not {env_id}")
    served = spec.get("kwargs") or {}
    differ = {k: v for k, v in env_kwargs.items() if jsonable(v) != served.get(k)}
    if differ:
        wanted = " ".join(f"-k {k}={json.dumps(jsonable(v))}" for k, v in differ.items())
        raise RemoteEnvError(
            f"the server at {url} serves {served_id} with {served}, not with {dict(differ)}: "
            f"start it as `lumos-gym serve-env {served_id} {wanted}`"
        )


def _spaces(spec: Mapping[str, Any]) -> tuple[spaces.Space, spaces.Space]:
    shown = spec.get("observation") or {}
    text = TextSpace(int(shown.get("max_length", 200_000)))
    action = TextSpace(int(spec.get("action_max_length", 10_000)))
    shape = shown.get("image_shape")
    if shape is None:
        return text, action
    image = spaces.Box(0, 255, tuple(shape), np.uint8)
    return spaces.Dict({"text": text, "image": image}), action
