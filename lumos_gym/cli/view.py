"""``lumos-gym view``: static pages of a run's episodes, or two runs of the same tasks compared."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from lumos_gym.cli.args import out_path, port
from lumos_gym.envs import load_plugins
from lumos_gym.leaderboard.viewer import (
    SOLVED,
    VIEW_FOLDER,
    default_out,
    load_run,
    serve_folder,
    write_view,
)


def add_view(sub: argparse._SubParsersAction) -> None:
    """Add the ``view`` verb."""
    p = sub.add_parser(
        "view", help="write (or serve) pages of a run's episodes, or of two runs compared",
        description="Write static HTML pages of a results folder's episodes: per env, every "
        "episode with its turns numbered by subgoal, a failures filter (reward below "
        f"{SOLVED:g}, whatever the status), sorting by reward, turns or tokens, and a search. "
        "With a second results folder of the same tasks, also the tasks that flipped (A solved "
        "and B not, the reverse, reward changes) and each paired episode side by side. The "
        "pages open from the file system; --serve also serves them on 127.0.0.1.",
    )
    p.add_argument("results", metavar="RESULTS",
                   help="a results folder, or the folders of one run (results/<agent>)")
    p.add_argument("other", nargs="?", default=None, metavar="OTHER",
                   help="a second run of the same tasks to compare with (B)")
    p.add_argument("--out", type=out_path, default=None, metavar="DIR",
                   help=f"folder for the pages (default: RESULTS/{VIEW_FOLDER}, or "
                   f"RESULTS/{VIEW_FOLDER}-vs-<OTHER's name>; with --serve, a temporary "
                   "folder removed when the server stops)")
    p.add_argument("--serve", nargs="?", type=port, const=8000, default=None, metavar="PORT",
                   help="serve the pages on http://127.0.0.1:PORT/ until interrupted "
                   "(PORT 0 to 65535; default 8000; 0: any free port)")
    p.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    """Write the pages (and serve them with ``--serve``); print where they are."""
    load_plugins()
    first = load_run(args.results, "A")
    second = load_run(args.other, "B") if args.other else None
    for run in (first, second):
        for warning in run.warnings if run is not None else ():
            print(f"lumos-gym view: warning: {run.label}: {warning}", file=sys.stderr)
    temporary = None
    if args.out is not None:
        out, where = Path(args.out), "--out"
    elif args.serve is not None:
        temporary = tempfile.mkdtemp(prefix="lumos-gym-view-")
        out, where = Path(temporary), "a temporary folder, removed when the server stops"
    else:
        out, where = default_out(args.results, second), "the default: under RESULTS"
    try:
        server = serve_folder(out, args.serve) if args.serve is not None else None
        written = write_view(first, second, out)
        print(f"view: {written[0]} ({len(written)} pages in {out}: {where})")
        if server is None:
            return 0
        host, port = server.server_address[:2]
        print(f"serving http://{host}:{port}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped")
        finally:
            server.server_close()
        return 0
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
