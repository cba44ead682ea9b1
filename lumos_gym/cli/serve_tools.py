"""``lumos-gym serve-tools``: the Lumos tools as an MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import argparse

from lumos_gym.asgi import api_key_from
from lumos_gym.cli.args import add_exposure, port


def add_serve_tools(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve-tools`` verb."""
    p = sub.add_parser("serve-tools", help="serve the Lumos tools as an MCP server")
    p.add_argument("--tool", action="append", default=[], metavar="NAME[=JSON]",
                   help="a tool to serve, with its options as JSON, repeatable (default: the "
                        "tools that need no model: Calculator, equations, Code, programs, "
                        "KnowledgeQuery, ParagraphRetrieve); e.g. "
                        "--tool 'KnowledgeQuery={\"corpus\": \"wiki\"}' --tool QA")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (the client starts this command) or http (streamable HTTP)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface for http (default: loopback only; another needs --api-key "
                        "or --insecure)")
    p.add_argument("--port", type=port, default=8001,
                   help="TCP port for http, 0 to 65535 (0: a free one; default 8001)")
    add_exposure(p, max_body_mb=8)
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=cmd_serve_tools)


def cmd_serve_tools(args: argparse.Namespace) -> int:
    """Serve the tools until the client leaves (stdio) or until interrupted (http)."""
    from lumos_gym.serving.tools import parse_tool_options, serve_tools  # heavy: the mcp package

    serve_tools(parse_tool_options(args.tool), transport=args.transport, host=args.host,
                port=args.port, log_level=args.log_level, api_key=api_key_from(args.api_key),
                insecure=args.insecure, max_body_bytes=int(args.max_body_mb * 2**20))
    return 0
