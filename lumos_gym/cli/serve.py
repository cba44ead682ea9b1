"""``lumos-gym serve``: a model and its adapters behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse

from lumos_gym.cli.args import add_exposure, at_least, port, positive_int
from lumos_gym.errors import LumosGymError


def _lora_module(value: str) -> tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FOLDER; got {value!r}")
    return name, path


def add_serve(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` verb."""
    p = sub.add_parser(
        "serve", help="serve a model and its adapters over an OpenAI-compatible HTTP API",
        description="Serve one base model, and any number of LoRA adapters on it, over an "
                    "OpenAI-compatible API (/v1/models, /v1/completions, /v1/chat/completions). "
                    "Each adapter is a model name, as with vLLM's --lora-modules.")
    p.add_argument("--model", default=None,
                   help="hub id, local folder, LoRA output folder or alias (default: the base "
                        "the adapters name, else smollm2-135m)")
    p.add_argument("--agent", default=None, metavar="AGENT",
                   help="serve AGENT's shipped adapters as AGENT-ROLE (lumos-i: lumos-i-planner "
                        "and lumos-i-grounder), the names `evaluate --backend openai` asks for")
    p.add_argument("--lora-modules", nargs="+", type=_lora_module, default=[],
                   metavar="NAME=FOLDER", help="adapters to serve, each under its NAME")
    p.add_argument("--adapter", default=None,
                   help="peft adapter folder that --model's own name answers with")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default: loopback only; another needs "
                        "--api-key or --insecure)")
    p.add_argument("--port", type=port, default=8000, help="TCP port, 0 to 65535 (default 8000)")
    add_exposure(p, max_body_mb=8.0)
    p.add_argument("--served-model-name", default=None, help="the base model's name for clients")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--batch-size", type=positive_int, default=8,
                   help="requests decoded together, at least 1 (default 8)")
    p.add_argument("--max-context", type=at_least(int, 2, "a token count"), default=None,
                   help="longest prompt plus completion in tokens, at least 2 (default: the "
                        "model's)")
    p.add_argument("--mixed-batches", action="store_true",
                   help="batch different adapters' requests together (peft mixed-adapter rows)")
    p.add_argument("--chat-only", action="store_true",
                   help="offer no /v1/completions, as chat-only hosted APIs")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a model over an OpenAI-compatible HTTP API until interrupted."""
    from lumos_gym.asgi import api_key_from  # with serve, below: the command alone needs them
    from lumos_gym.models.serve import serve  # heavy: imports fastapi and pydantic

    modules = dict(args.lora_modules)
    if len(modules) != len(args.lora_modules):
        raise LumosGymError("--lora-modules: a NAME is given twice")
    serve(
        args.model, adapter=args.adapter, lora_modules=modules, agent=args.agent,
        host=args.host, port=args.port, served_model_name=args.served_model_name,
        device=args.device, dtype=args.dtype, batch_size=args.batch_size,
        max_context=args.max_context, mixed_batches=args.mixed_batches,
        chat_only=args.chat_only, api_key=api_key_from(args.api_key), insecure=args.insecure,
        max_body_mb=args.max_body_mb, log_level=args.log_level,
    )
    return 0
