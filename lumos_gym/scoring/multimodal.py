"""The scorer records of the multimodal envs (A-OKVQA, ScienceQA, Scenes).

The functions are in :mod:`lumos_gym.envs.multimodal.base` beside the envs that read the
datasets' fields (``aokvqa_scores``, ``scienceqa_scores``); Scenes scores its answers with
:func:`lumos_gym.scoring.answers.answers_match` (the ``math/exact`` rule: numbers by value,
text normalised). This module holds the records ``run.json`` names.
"""

from __future__ import annotations

from lumos_gym.scoring.scorers import Scorer

__all__ = ["SCORERS"]

SCORERS = (
    Scorer(
        name="aokvqa/official",
        benchmark="A-OKVQA",
        reproduces="allenai/aokvqa, evaluation/eval_predictions.py, eval_aokvqa "
        "(multiple_choice=True for MC; direct answers otherwise)",
        rule="mc_accuracy (primary): the option the answer names is choices[correct_choice_idx]; "
        "da_accuracy: min(number of the direct answers equal to the answer / 3, 1).",
        departures=(
            "the answer and the direct answers are normalised (lower case, punctuation and "
            "articles dropped) before they are compared; eval_aokvqa compares the strings as "
            "they are",
            "the answer may name its option by letter, number or text (choice_index); "
            "eval_aokvqa takes the option's text",
            "da_accuracy is averaged over every task; eval_aokvqa leaves out the questions "
            "marked difficult_direct_answer from the direct-answer average",
        ),
        envs=("lumos/AOKVQA-v0",),
    ),
    Scorer(
        name="scienceqa/official",
        benchmark="ScienceQA",
        reproduces="lupantech/ScienceQA, tools/evaluate_acc.py, get_scores (acc_average: "
        "the predicted option index equals the problem's answer)",
        rule="accuracy: the option the answer names is the problem's answer index.",
        departures=("the answer may name its option by letter, number or text (choice_index)",),
        envs=("lumos/ScienceQA-v0",),
    ),
    Scorer(
        name="scenes/exact",
        benchmark="Scenes (lumos-gym's own procedural pictures)",
        reproduces="none: lumos-gym's own benchmark",
        rule="accuracy: the answer equals the gold answer or an alias under answers_match's "
        "default rule (one number equal by exact value; else text normalised).",
        envs=("lumos/Scenes-v0",),
    ),
)
