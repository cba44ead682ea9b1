"""The scorer record of the text games (TextWorld, TextWorld Express, ALFWorld).

The games score themselves: the engine reports its score, its maximum and whether the game
is won, and :class:`~lumos_gym.envs.games.base.GameEnv` turns that into ``score`` (the score
over the maximum, 1.0 for a won game), ``success`` and ``moves``. No separate scoring function
exists, so this module holds only the record ``run.json`` names.
"""

from __future__ import annotations

from lumos_gym.scoring.scorers import Scorer

__all__ = ["SCORERS"]

SCORERS = (
    Scorer(
        name="games/score",
        benchmark="TextWorld, TextWorld Express, ALFWorld",
        reproduces="the engines' own reports: TextWorld's infos score/max_score/won "
        "(microsoft/TextWorld, textworld/core.py GameState), ALFWorld's won flag "
        "(alfworld/alfworld, the TextWorld-based env's infos['won'])",
        rule="score = the engine's score over its maximum, clipped to [0, 1], and 1.0 when the "
        "game is won; success = 1.0 when won. ALFWorld papers report success (won).",
        departures=(
            "the primary metric is the normalised score, not the raw points TextWorld reports; "
            "for ALFWorld, whose games keep no score, score equals success",
        ),
        envs=("lumos/TextWorld-v0", "lumos/TextWorldExpress-v0", "lumos/ALFWorld-v0"),
    ),
)
