"""The leaderboard as a tidy CSV (``--format csv``): one line per row and env."""

from __future__ import annotations

import csv
import io

from lumos_gym.leaderboard.cards import role_cards, seed_text
from lumos_gym.leaderboard.render.compare import PAIRED_CSV_COLUMNS, paired_csv_rows
from lumos_gym.leaderboard.render.rows import Board, SeedRow, Shown, _gold_kind


def render_csv(board: Board) -> str:
    """Render the board as a tidy CSV.

    One row per run and env (and one for its suite score), then one per reported agent and
    dataset. When a row has episodes that ended in ``infra-error``, a column ``infra_errors``
    counts them (per env; the row's total on its suite score). When the board groups seeds
    and has trained rows, a last column ``seeds`` names each row's training seeds (``0, 1, 2``
    for a seed group, ``0`` for a row of one seed, empty without a training card).
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    shown = board.rows
    infra = ["infra_errors"] if any(e.infra for e in shown) else []
    seeds = {row.name: _seeds_column(row) for row in shown}
    seeded = ["seeds"] if board.shown is not None and any(seeds.values()) else []
    extra = PAIRED_CSV_COLUMNS if board.paired is not None else []
    pad = [""] * (len(extra) + len(infra) + len(seeded))
    writer.writerow(["kind", "rank", "run", "agent", "models", "env", "metric", "mean", "se",
                     "ci_low", "ci_high", "episodes", *extra, *infra, *seeded])
    paired_pad = [""] * len(extra)
    for entry in shown:
        score = entry.score
        ci = score.get("ci95") or [None, None]
        kind, rank = (_gold_kind(entry.agent), "") if entry.ceiling else ("measured", entry.rank)
        tail = [seeds[entry.name]] if seeded else []
        writer.writerow([
            kind, rank, entry.name, entry.agent, entry.models, "suite score",
            f"mean of {score.get('envs', 0)} envs", score.get("mean"), score.get("se"), ci[0],
            ci[1], entry.episodes, *paired_pad, *([entry.infra_errors] if infra else []), *tail,
        ])
        for env_id in board.envs:
            cell = entry.cells.get(env_id)
            if cell is None:
                continue
            ci = cell.ci95 or [None, None]
            writer.writerow([kind, rank, entry.name, entry.agent, entry.models, env_id,
                             cell.metric, cell.mean, cell.se, ci[0], ci[1], cell.episodes,
                             *paired_pad, *([entry.infra.get(env_id, 0)] if infra else []),
                             *tail])
    for row in paired_csv_rows(board):
        writer.writerow(row + [""] * len(infra) + ([seeds.get(row[2], "")] if seeded else []))
    reported = board.reported
    metric = {d["name"]: d["metric"] for d in reported.datasets}
    for row in reported.rows if board.paper else ():
        for dataset, value in (row.get("values") or {}).items():
            writer.writerow(["reported", "", "", row["agent"], "", dataset, metric.get(dataset),
                             float(value) / reported.scale, "", "", "", "", *pad])
    return out.getvalue()


def _seeds_column(row: Shown) -> str:
    """A row's training seeds for the CSV: ``0, 1, 2`` (a group), ``0`` (one), or empty."""
    if isinstance(row, SeedRow):
        return row.seeds
    return seed_text(row.run) if role_cards(row.run) else ""
