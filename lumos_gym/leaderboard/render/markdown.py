"""The leaderboard as GitHub-flavoured Markdown (``--format md``, the default).

The ranked table, then its sections (:mod:`~lumos_gym.leaderboard.render.sections`), the
paired differences to the reference row, the paper's reported numbers (with ``--paper``) and
the training cards.
"""

from __future__ import annotations

from lumos_gym.evaluation.summary import SCORE_RULE
from lumos_gym.leaderboard.cards import cards_markdown
from lumos_gym.leaderboard.render.compare import paired_markdown
from lumos_gym.leaderboard.render.rows import (
    CEILING_NOTE,
    Board,
    _reported_value,
    cell_text,
    short_env,
)
from lumos_gym.leaderboard.render.sections import (
    _attribution_md,
    _claims_md,
    _seeds_md,
    infra_markdown,
    seed_rows_markdown,
)
from lumos_gym.text import markdown_table


def render_markdown(board: Board) -> str:
    """Render the board as GitHub-flavoured Markdown (measured table, then reported block)."""
    headers = ["rank", "run", "agent", "models", "suite score", "envs"]
    headers += [f"{short_env(e)} ({board.metric_of(e)})" for e in board.envs]
    headers.append("episodes")
    rows = []
    for entry in board.rows:
        rows.append([
            entry.rank_text, entry.label, entry.agent, entry.models, cell_text(entry.score),
            f"{entry.covered}/{len(board.envs)}",
            *[cell_text(entry.cells.get(e)) for e in board.envs], entry.episodes,
        ])
    lines = ["# lumos-gym leaderboard", ""]
    if board.suite:
        lines += [f"Suite: `{board.suite}`.", ""]
    lines += [
        "Each cell: the env's primary metric, `mean [95% bootstrap interval]`. Runs are ranked "
        f"by suite score ({SCORE_RULE}); a run covering fewer envs ranks after those covering "
        f"more. {CEILING_NOTE}", "",
    ]
    lines += markdown_table(headers, rows, align="r")
    if board.warnings:
        lines += ["", "**Warnings** (also printed when the board is made):", ""]
        lines += [f"- {w}" for w in board.warnings]
    lines += seed_rows_markdown(board)
    lines += infra_markdown(board)
    lines += paired_markdown(board)
    lines += _claims_md(board)
    lines += _seeds_md(board)
    lines += _attribution_md(board)
    lines += _reported_md(board)
    lines += cards_markdown([e for e in board.entries if not e.ceiling])
    return "\n".join(lines) + "\n"


def _reported_md(board: Board) -> list[str]:
    """The paper's reported numbers, apart (none without ``--paper``)."""
    if not board.paper:
        return []
    lines: list[str] = []
    reported = board.reported
    names = [d["name"] for d in reported.datasets]
    lines += ["", "## Reported (Lumos paper)", "",
              f"Never ranked. {reported.note} Values: the paper's "
              f"percentages / {reported.scale:g}; ≈ marks values the paper gives as approximate.",
              "", f"Source: {reported.source}", ""]
    if reported.matches:
        shown = ", ".join(f"{k} = {short_env(v)}" for k, v in sorted(reported.matches.items()))
        lines += [f"Measured columns on the same data: {shown}.", ""]
    rows = [[r["agent"] + (" (cited)" if r.get("cited") else ""), "reported",
             *[_reported_value(reported, r, n) for n in names]] for r in reported.rows]
    lines += markdown_table(["agent", "kind", *names], rows)
    return lines
