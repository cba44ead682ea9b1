"""``lumos-gym serve-tools``: the execution module's tools as an MCP server.

Each Lumos tool (Calculator, SetEquation/SolveEquation, Code, KnowledgeQuery,
ParagraphRetrieve, QA, VQA, WriteProgram/TestProgram...) is one MCP tool of the same name whose
input is ``{"args": "<what goes between the parentheses>", "outputs"?: ["R1", ...],
"episode"?: "<name>", "image"?: "<base64 picture>"}``. The call runs the very tool class the
envs run (the Calculator's AST whitelist, the Code sandbox, the same options), so an MCP agent
gets what a lumos-gym agent gets:

* the result is the text an env would show (``R1 = 24`` when ``outputs`` are named, else the
  values), plus ``{"values": [...]}`` as structured content;
* a tool error (a formula outside the whitelist, a program that fails in the sandbox) is an MCP
  error result (``isError``) holding the env's ``Error: ...`` text, never a protocol failure;
* calls that name the same ``episode`` share an episode's state, as the actions of one env
  episode do: the variables bound by ``outputs`` (which later ``args`` may reference as
  ``R1``), SetEquation's equations for SolveEquation, WriteProgram's programs for TestProgram,
  retrieved pages for ParagraphRetrieve;
* ``VQA`` asks about the picture given as ``image`` (PNG or JPEG bytes, base64).

Served over stdio (the default: an MCP client starts ``lumos-gym serve-tools`` itself) or
streamable HTTP (``--transport http``, on loopback unless another host is named). Over HTTP
every request passes :class:`~lumos_gym.asgi.Guard` first: with an API key, each needs
``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, and a body over the size limit is refused
with 413 before it is read; a non-loopback host needs a key (or ``insecure``).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from lumos_gym import __version__
from lumos_gym.actions import Action
from lumos_gym.asgi import Guard, bind_socket, check_exposure
from lumos_gym.errors import LumosGymError, ToolError
from lumos_gym.tools import ToolContext, Toolset

try:
    from mcp import types
    from mcp.server import Server
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError("`lumos-gym serve-tools` needs the mcp package; install it with: "
                      "pip install 'lumos-gym[envserver]'") from e

__all__ = ["DEFAULT_TOOLS", "MAX_BODY_BYTES", "ToolService", "create_server", "serve_tools",
           "streamable_http_app"]

logger = logging.getLogger(__name__)

#: The tools served by default (name → options): those that need no model or picture to be
#: configured. A served tool has no task of its own, so KnowledgeQuery searches the offline
#: Wikipedia summaries.
DEFAULT_TOOLS: dict[str, dict[str, Any]] = {
    **{name: {} for name in ("Calculator", "SetEquation", "SolveEquation", "SolveInequality",
                             "Define", "Count", "Code", "WriteProgram", "RunProgram",
                             "TestProgram")},
    "KnowledgeQuery": {"corpus": "wiki"},
    "ParagraphRetrieve": {},
}
#: The most episodes whose state is kept; the least recently used is forgotten first.
MAX_EPISODES = 256
#: The largest request body over HTTP by default: 8 MiB (a VQA picture in base64 fits).
MAX_BODY_BYTES = 8 * 2**20


class ToolService:
    """Runs Lumos tools for MCP calls, with one :class:`ToolContext` per named episode.

    Args:
        tools: tool names, or tool name → options (as an env's ``tools`` argument).
        vqa_picture_size: the (height, width) a ``VQA`` picture is shown at.
    """

    def __init__(self, tools: Sequence[str] | Mapping[str, Mapping[str, Any]] = DEFAULT_TOOLS,
                 *, vqa_picture_size: tuple[int, int] = (224, 224)) -> None:
        self.toolset = Toolset(tools)
        self.vqa_picture_size = vqa_picture_size
        self._episodes: OrderedDict[str, ToolContext] = OrderedDict()
        self._lock = threading.Lock()  # calls run in worker threads; one call at a time

    def describe(self) -> list[types.Tool]:
        """Return the MCP description of every tool."""
        listed = []
        for spec in self.toolset.specs:
            properties: dict[str, Any] = {
                "args": {"type": "string", "description": f"the arguments of {spec.signature},"
                         " as written between its parentheses (may reference bound R<n>)"},
                "outputs": {"type": "array", "items": {"type": "string", "pattern": "^R[0-9]+$"},
                            "description": "variables to bind the results to (R1, R2...)"},
                "episode": {"type": "string", "description": "calls naming the same episode "
                            "share variables and tool state (default: 'default')"},
            }
            if spec.name == "VQA":
                properties["image"] = {"type": "string",
                                       "description": "the picture, PNG or JPEG bytes in base64"}
            listed.append(types.Tool(name=spec.name, description=f"{spec.signature}: {spec.doc}",
                                     input_schema={"type": "object", "required": ["args"],
                                                   "properties": properties}))
        return listed

    def call(self, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """Run one tool call; a tool error is an ``isError`` result with the env's text."""
        tool = self.toolset.get(name)
        if tool is None:
            return _error(f"Error: unknown tool {name!r}; served: {', '.join(self.toolset.names)}")
        try:
            args, outputs, episode = _arguments(arguments)
            with self._lock:
                ctx = self._context(episode)
                if "image" in arguments:
                    ctx.session = self._picture(arguments["image"])
                action = Action(outputs, name, args)
                result = tool.run(action, ctx)
                if outputs and len(result.values) != len(outputs):
                    raise ToolError(f"gave {len(result.values)} value(s) for {len(outputs)} "
                                    "output variable(s)")
                assert isinstance(ctx.variables, dict)
                ctx.variables.update(zip(outputs, result.values, strict=False))
        except (LumosGymError, ValueError) as e:
            return _error(f"Error: {name}: {e}")
        except Exception as e:  # a tool's own bug: reported, and the server goes on
            logger.exception("tool %s failed", name)
            return _error(f"Error: {name} failed: {type(e).__name__}: {e}")
        shown = result.display if result.display is not None else ", ".join(result.values)
        text = f"{', '.join(outputs)} = {shown}" if outputs else result.text
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content={"values": list(result.values)})

    def close(self) -> None:
        """Close every tool (sandboxes, models)."""
        self.toolset.close()

    def _context(self, episode: str) -> ToolContext:
        ctx = self._episodes.get(episode)
        if ctx is None:
            ctx = self._episodes[episode] = ToolContext(variables={})
            while len(self._episodes) > MAX_EPISODES:
                self._episodes.popitem(last=False)
        self._episodes.move_to_end(episode)
        return ctx

    def _picture(self, encoded: Any) -> Any:
        from PIL import Image, UnidentifiedImageError  # optional extra: vision

        from lumos_gym.envs.multimodal.base import TaskImage  # imports Pillow (vision extra)
        from lumos_gym.envs.multimodal.scenes import SCENE_READER  # as does the scene reader

        try:
            image = Image.open(io.BytesIO(base64.b64decode(str(encoded), validate=True)))
            image = image.convert("RGB")
        except (ValueError, UnidentifiedImageError) as e:
            raise ToolError(f"image is not a base64 PNG or JPEG picture: {e}") from e
        return TaskImage(image, size=self.vqa_picture_size, reader=SCENE_READER)


def _arguments(arguments: Mapping[str, Any]) -> tuple[str, tuple[str, ...], str]:
    args = arguments.get("args")
    if not isinstance(args, str):
        raise ToolError('give the arguments as {"args": "..."} (the text between the '
                        "parentheses of the action)")
    outputs = arguments.get("outputs") or []
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise ToolError('outputs is a list of variable names, e.g. ["R1"]')
    episode = arguments.get("episode") or "default"
    return args, tuple(outputs), str(episode)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=True)


def create_server(service: ToolService) -> Server:
    """Return the MCP server (the ``mcp`` package's low-level ``Server``) of ``service``."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=service.describe())

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # tools block (sandboxes, models): run them off the event loop
        return await anyio.to_thread.run_sync(service.call, params.name, params.arguments or {})

    return Server("lumos-gym-tools", version=__version__,
                  instructions="Lumos' execution-module tools: Calculator, equations, Code, "
                               "programs, retrieval, QA, VQA. Each takes {'args': ...}.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def parse_tool_options(values: Sequence[str]) -> list[str] | dict[str, dict[str, Any]]:
    """Parse ``--tool NAME`` or ``--tool NAME=JSON_OPTIONS`` values (empty: the defaults)."""
    if not values:
        return {name: dict(options) for name, options in DEFAULT_TOOLS.items()}
    tools: dict[str, dict[str, Any]] = {}
    for value in values:
        name, sep, options = value.partition("=")
        try:
            parsed = json.loads(options) if sep else {}
        except ValueError as e:
            raise LumosGymError(f"--tool {value!r}: the options are not JSON ({e})") from None
        if not isinstance(parsed, dict):
            raise LumosGymError(f"--tool {value!r}: the options are a JSON object")
        tools[name.strip()] = parsed
    return tools


def streamable_http_app(service: ToolService, host: str = "127.0.0.1", *,
                        api_key: str | None = None,
                        max_body_bytes: int = MAX_BODY_BYTES) -> Guard:
    """Return the ASGI app serving ``service`` over streamable HTTP at ``/mcp``.

    It is the ``mcp`` package's Starlette app behind a :class:`~lumos_gym.asgi.Guard`.

    Args:
        service: the tools.
        host: the interface it is served on (the ``mcp`` app's DNS rebinding protection).
        api_key: the key every request must carry; None: none.
        max_body_bytes: a larger request body is refused (413) before it is read.

    Raises:
        LumosGymError: ``max_body_bytes`` is below 1.
    """
    app = create_server(service).streamable_http_app(host=host)
    return Guard(app, api_key=api_key, max_body_bytes=max_body_bytes, open_paths=())


def serve_tools(tools: Sequence[str] | Mapping[str, Mapping[str, Any]] = DEFAULT_TOOLS, *,
                transport: str = "stdio", host: str = "127.0.0.1", port: int = 8001,
                log_level: str = "warning", api_key: str | None = None, insecure: bool = False,
                max_body_bytes: int = MAX_BODY_BYTES) -> None:
    """Serve the tools until the client leaves (stdio) or until interrupted (HTTP).

    Args:
        tools: tool names, or tool name → options.
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP at ``/mcp``).
        host: the interface for ``http``; the default accepts local clients only, and another
            needs ``api_key`` or ``insecure``.
        port: the TCP port for ``http`` (0: a free one, printed).
        log_level: uvicorn's log level (``http``).
        api_key: the key every ``http`` request must carry; None: none (stdio needs none).
        insecure: serve a non-loopback ``host`` without a key all the same (a warning is
            logged).
        max_body_bytes: the largest ``http`` request body; a larger one is refused (413)
            before it is read.

    Raises:
        LumosGymError: a bad transport, an exposed host without a key, a taken port, or a tool
            that cannot be configured.
    """
    if transport not in ("stdio", "http"):
        raise LumosGymError(f"transport must be 'stdio' or 'http'; got {transport!r}")
    if transport == "http":  # before the tools load: an exposed host fails at once
        check_exposure(host, api_key, insecure, "lumos-gym serve-tools")
    service = ToolService(tools)
    try:
        if transport == "stdio":
            anyio.run(_serve_stdio, service)
        else:
            _serve_http(service, host, port, log_level, api_key, max_body_bytes)
    finally:
        service.close()


async def _serve_stdio(service: ToolService) -> None:
    from mcp.server.stdio import stdio_server  # optional extra: envserver (as mcp above)

    server = create_server(service)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _serve_http(service: ToolService, host: str, port: int, log_level: str,
                api_key: str | None, max_body_bytes: int) -> None:
    import uvicorn  # optional extra: envserver

    app = streamable_http_app(service, host, api_key=api_key, max_body_bytes=max_body_bytes)
    sock = bind_socket(host, port)
    try:
        shown = f"[{host}]" if ":" in host else host
        keyed = " (every client must send the API key)" if api_key else ""
        print(f"serving {len(service.toolset.names)} tools over MCP at "
              f"http://{shown}:{sock.getsockname()[1]}/mcp{keyed}; Ctrl-C stops it", flush=True)
        config = uvicorn.Config(app, log_level=log_level, lifespan="on",
                                timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
