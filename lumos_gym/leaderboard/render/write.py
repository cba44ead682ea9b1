"""Writing the board in one of the :data:`FORMATS`, to a file or a folder (:func:`write_board`)."""

from __future__ import annotations

import os
from pathlib import Path

from lumos_gym.jsonl import folder_problem
from lumos_gym.leaderboard.render.csv import render_csv
from lumos_gym.leaderboard.render.html import render_html
from lumos_gym.leaderboard.render.markdown import render_markdown
from lumos_gym.leaderboard.render.png import render_png
from lumos_gym.leaderboard.render.rows import Board, LeaderboardError

#: The output formats.
FORMATS = ("md", "html", "csv", "png")


def write_board(
    board: Board, fmt: str, out: str | Path | None, *, trajectories: bool = True
) -> list[Path] | str:
    """Write the board in ``fmt``; ``out`` is a file, or a folder for ``leaderboard.<ext>``.

    ``trajectories=False`` writes the HTML page without a trajectory page per run and env
    (for boards of many episodes, whose pages would weigh more than the results).

    ``out`` names a folder when it exists as one, ends with ``/`` or has no file extension
    (``--out site`` writes ``site/leaderboard.html``).

    Returns:
        the files written, or the text itself for ``md``/``csv`` without ``out``.

    Raises:
        LeaderboardError: an unknown format, html/png without ``out``, or an ``out`` that
            cannot be written (:func:`~lumos_gym.jsonl.folder_problem`).
    """
    if fmt not in FORMATS:
        raise LeaderboardError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if out is None:
        if fmt in ("html", "png"):
            raise LeaderboardError(f"--format {fmt} needs --out FILE_OR_DIR")
        return render_markdown(board) if fmt == "md" else render_csv(board)
    path = Path(out)
    if path.is_dir() or str(out).endswith(("/", os.sep)) or not path.suffix:
        path = path / f"leaderboard.{fmt}"
    problem = folder_problem(path.parent)
    if problem:
        raise LeaderboardError(f"cannot write {path}: {problem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "png":
        return [render_png(board, path)]
    if fmt == "html":
        return render_html(board, path, trajectories=trajectories)
    text = render_markdown(board) if fmt == "md" else render_csv(board)
    path.write_text(text, encoding="utf-8")
    return [path]
