"""``lumos-gym serve``: one model behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse


def add_serve(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` verb."""
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API")
    p.add_argument("--model", default="smollm2-135m",
                   help="hub id, local folder or 'smollm2-135m' (default)")
    p.add_argument("--adapter", default=None, help="peft adapter folder")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-context", type=int, default=None)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a model over an OpenAI-compatible HTTP API until interrupted."""
    from lumos_gym.models.serve import serve  # heavy: imports fastapi and pydantic

    serve(
        args.model, adapter=args.adapter, host=args.host, port=args.port,
        served_model_name=args.served_model_name, device=args.device, dtype=args.dtype,
        batch_size=args.batch_size, max_context=args.max_context,
    )
    return 0
