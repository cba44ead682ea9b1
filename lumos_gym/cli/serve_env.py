"""``lumos-gym serve-env``: a registered env served with the OpenEnv API (HTTP + WebSocket)."""

from __future__ import annotations

import argparse

from lumos_gym.asgi import api_key_from
from lumos_gym.cli.args import add_exposure, at_least, parse_kwargs, port, positive_int
from lumos_gym.envs.registration import resolve_env_id

SECONDS = at_least(float, 0.001, "a number of seconds")


def add_serve_env(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve-env`` verb."""
    p = sub.add_parser("serve-env", help="serve an env over HTTP/WebSocket (OpenEnv API)")
    p.add_argument("env", help="env id, e.g. lumos/GSM8K-v0 (or module:lumos/Name-v0)")
    p.add_argument("--kwarg", "-k", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor argument of the env, repeatable (values are JSON or text)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default: loopback only; another needs "
                        "--api-key or --insecure)")
    p.add_argument("--port", type=port, default=8000,
                   help="TCP port, 0 to 65535 (0: a free one; default 8000)")
    add_exposure(p, max_body_mb=16)
    p.add_argument("--max-sessions", type=positive_int, default=64,
                   help="sessions (env instances) open at once; one more is refused; at least 1 "
                   "(default 64)")
    p.add_argument("--idle-timeout", type=SECONDS,
                   default=600.0,
                   help="close a session idle this many seconds, at least 0.001 (default 600)")
    p.add_argument("--step-timeout", type=SECONDS,
                   default=300.0,
                   help="answer a reset or step that runs longer with an error; seconds, at "
                   "least 0.001 (default 300)")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=cmd_serve_env)


def cmd_serve_env(args: argparse.Namespace) -> int:
    """Serve one env until interrupted."""
    from lumos_gym.serving.envserver import serve_env  # heavy: imports fastapi and uvicorn

    serve_env(
        resolve_env_id(args.env), parse_kwargs(args.kwarg), host=args.host, port=args.port,
        log_level=args.log_level, api_key=api_key_from(args.api_key), insecure=args.insecure,
        max_body_bytes=int(args.max_body_mb * 2**20), max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout, call_timeout_s=args.step_timeout,
    )
    return 0
