"""The leaderboard as a PNG bar chart (``--format png``; matplotlib, the ``leaderboard`` extra)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lumos_gym.leaderboard.render.rows import Board, Cell, LeaderboardError, short_env


def render_png(board: Board, out: Path, *, max_runs: int = 12) -> Path:
    """Draw the suite score and each env's primary metric per run, intervals as error bars.

    Raises:
        LeaderboardError: matplotlib (the ``leaderboard`` extra) is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise LeaderboardError(
            "--format png needs matplotlib, the 'leaderboard' extra: "
            "pip install 'lumos-gym[leaderboard]' (or pip install 'matplotlib>=3.8')"
        ) from None
    entries = board.rows[:max_runs]
    groups = ["suite score", *[short_env(e) for e in board.envs]]
    width = 0.8 / max(len(entries), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) + 2), 4.5), dpi=100)
    for n, entry in enumerate(entries):
        stats: list[Cell | Mapping[str, Any] | None] = [entry.score]
        stats += [entry.cells.get(e) for e in board.envs]
        xs, means, low, high = [], [], [], []
        for g, item in enumerate(stats):
            if item is None:
                continue
            mean = item.mean if isinstance(item, Cell) else float(item.get("mean", 0.0))
            ci = item.ci95 if isinstance(item, Cell) else item.get("ci95")
            xs.append(g - 0.4 + width * (n + 0.5))
            means.append(mean)
            low.append(max(mean - ci[0], 0.0) if ci else 0.0)
            high.append(max(ci[1] - mean, 0.0) if ci else 0.0)
        label = f"{entry.rank_text}. {entry.label}"
        ax.bar(xs, means, width, yerr=[low, high], capsize=3, label=label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30, ha="right")
    ax.set_ylabel("primary metric (95% bootstrap interval)")
    ax.set_ylim(0, 1.05)
    ax.set_title("lumos-gym leaderboard" + (f" ({board.suite})" if board.suite else ""))
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    plt.close(fig)
    return out
