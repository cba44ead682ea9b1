"""The ``lumos-gym`` command. Each verb parses its flags and calls one library function.

A verb lives in its own module (a few related verbs share one): an ``add_<verb>`` function adds
its subparser and flags, and ``cmd_<verb>`` runs it. :func:`build_parser` adds them in the
order of :data:`VERBS`, which is the order ``lumos-gym --help`` lists them in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from lumos_gym import __version__
from lumos_gym.cli import (
    agents,
    attribute,
    convert,
    data,
    envs,
    evaluate,
    leaderboard,
    learn,
    reproduce,
    rescore,
    serve,
    serve_env,
    serve_tools,
    train,
    view,
)
from lumos_gym.cli.args import Parser
from lumos_gym.errors import LumosGymError

#: The functions that add each verb, in ``--help`` order.
VERBS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    envs.add_envs,
    envs.add_check,
    envs.add_play,
    data.add_data,
    agents.add_agents,
    evaluate.add_evaluate,
    leaderboard.add_suites,
    serve.add_serve,
    serve_env.add_serve_env,
    serve_tools.add_serve_tools,
    convert.add_convert,
    convert.add_export,
    train.add_train,
    learn.add_improve,
    learn.add_grpo,
    leaderboard.add_merge,
    rescore.add_rescore,
    rescore.add_restrict,
    leaderboard.add_leaderboard,
    attribute.add_attribute,
    view.add_view,
    reproduce.add_reproduce,
)


def build_parser() -> Parser:
    """Build the argument parser of every verb (a mistyped flag or verb gets a suggestion)."""
    parser = Parser(
        prog="lumos-gym",
        description="Gymnasium environments, agents and training for Lumos-style agents.",
    )
    parser.add_argument("--version", action="version", version=f"lumos-gym {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for add_verb in VERBS:
        add_verb(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors of lumos-gym print one line and exit with status 2.

    So does an error of the operating system (a file that cannot be written or read: an
    output path under a file, a read-only folder, a full disk), named with its file.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # a log file sees each line as it comes, not at exit
        reconfigure(line_buffering=True)
    try:
        return int(args.func(args))
    except LumosGymError as e:
        print(f"lumos-gym {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the place, not lumos-gym: no traceback either
        print(f"lumos-gym {args.verb}: error: {_os_error(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lumos-gym {args.verb}: interrupted", file=sys.stderr)
        return 130


def _os_error(error: OSError) -> str:
    """Return ``file: reason`` for an error of the operating system (no file: the reason)."""
    reason = error.strerror or str(error)
    return f"{error.filename}: {reason}" if error.filename is not None else reason
