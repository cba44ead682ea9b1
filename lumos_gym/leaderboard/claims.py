"""The Lumos paper's three claims, each measured here beside the paper's own numbers.

(a) Lumos-I beats the other training formulations on the same data: integrated training, CoT
training and direct answers; (b) Lumos-I against Lumos-O; (c) the unified agent generalises: it
beats the domain-specific ones on an unseen task (the paper's WebShop table).

Each measured comparison is ``Lumos-I minus X``, paired episode by episode, read from the
board's paired differences to its reference row (``--reference``, which must be a Lumos-I row):
per env, the interval of the difference either lies above 0 (Lumos-I ahead), below 0
(behind) or holds 0 (undecided). The paper's numbers are the differences of its LLaMA-2-7B rows
on its datasets, in percentage points (:data:`PAPER_ROWS`, from ``reported.json``); they are
set beside the measured ones, not compared cell by cell, since the envs are not the paper's
full datasets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lumos_gym.leaderboard.stats import PairedDiff
from lumos_gym.text import markdown_table

#: Our agent name → the paper's dataset → the reported row that stands for it (its baseline
#: formulations table: Lumos-I and Lumos-O are the domain-specific rows of each dataset).
PAPER_ROWS: dict[str, dict[str, str]] = {
    "lumos-i": {
        "Mind2Web": "Lumos-I_Web", "GSM8K": "Lumos-I_Math", "SVAMP": "Lumos-I_Math",
        "StrategyQA": "Lumos-I_QA (GPT-3.5-turbo QA tool)",
        "HotpotQA (LLM acc)": "Lumos-I_QA (GPT-3.5-turbo QA tool)",
    },
    "lumos-o": {
        "GSM8K": "Lumos-O_Math", "SVAMP": "Lumos-O_Math",
        "StrategyQA": "Lumos-O_QA (GPT-3.5-turbo QA tool)",
        "HotpotQA (LLM acc)": "Lumos-O_QA (GPT-3.5-turbo QA tool)",
    },
    "integrated": dict.fromkeys(("Mind2Web", "GSM8K", "SVAMP", "StrategyQA",
                                 "HotpotQA (LLM acc)"), "Integrated Training (LLaMA-2-7B)"),
    "cot": dict.fromkeys(("GSM8K", "SVAMP", "StrategyQA", "HotpotQA (LLM acc)"),
                         "CoT Training (LLaMA-2-7B)"),
}


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims: Lumos-I against the rows of other agents."""

    key: str
    title: str
    against: tuple[str, ...]


CLAIMS = (
    Claim("a", "Lumos-I against the other formulations trained on the same data",
          ("integrated", "cot", "direct")),
    Claim("b", "Lumos-I against Lumos-O", ("lumos-o",)),
)

#: Claim (c), stated with the paper's WebShop numbers: no run here measures it yet.
GENERALISATION = (
    "(c) Generalisation: the paper's unified Lumos-I_All scores 39.8 on WebShop, a task none of "
    "its agents trained on, against 34.7, 30.1 and 33.5 for Lumos-I trained on web, math or QA "
    "alone. Measuring it here takes agents trained on one family each and one trained with a "
    "family left out (the shop or the games), scored on that family: `lumos-gym reproduce "
    "--families` and `--leave-out` train them, but no such run has been scored yet, so this "
    "claim is not measured."
)


def paper_differences(reported_rows: Sequence[Mapping[str, Any]], other: str) -> str:
    """``GSM8K +1.6, SVAMP +1.9, ...``: the paper's Lumos-I minus ``other``, in points."""
    values = {row["agent"]: row.get("values") or {} for row in reported_rows}
    parts = []
    for dataset, mine in PAPER_ROWS["lumos-i"].items():
        theirs = PAPER_ROWS.get(other, {}).get(dataset)
        a, b = values.get(mine, {}).get(dataset), values.get(theirs, {}).get(dataset)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            parts.append(f"{dataset} {a - b:+.1f}")
    return ", ".join(parts) or "not reported"


def flipped(diff: PairedDiff) -> PairedDiff:
    """The same comparison the other way round (B minus A)."""
    ci = [-diff.ci95[1], -diff.ci95[0]] if diff.ci95 else None
    discordant = diff.discordant[::-1] if diff.discordant else None
    return PairedDiff(diff.n, diff.mean_b, diff.mean_a, -diff.diff, ci, diff.test, diff.p_value,
                      discordant, diff.envs)


@dataclass
class Verdict:
    """Where Lumos-I stands against one row: the envs it is ahead of, behind, undecided."""

    row: str
    suite: PairedDiff
    ahead: list[str]
    behind: list[str]
    undecided: list[str]


def verdict(row: str, suite: PairedDiff, envs: Mapping[str, PairedDiff]) -> Verdict:
    """Sort the envs of one comparison (already Lumos-I minus the row) by their interval."""
    ahead, behind, undecided = [], [], []
    for env_id, diff in envs.items():
        if diff.n == 0 or not diff.ci95:
            continue
        low, high = diff.ci95
        (ahead if low > 0 else behind if high < 0 else undecided).append(env_id)
    return Verdict(row, suite, ahead, behind, undecided)


def claim_rows(
    claim: Claim, reference_agent: str, comparisons: Mapping[str, Any],
    agents: Mapping[str, str],
) -> list[tuple[str, Verdict]]:
    """(agent, verdict) for each measured row of the claim's agents (none: nothing measured).

    ``comparisons``: row name → its comparison with the reference row (row minus reference);
    ``agents``: row name → agent name.
    """
    if reference_agent != "lumos-i":
        return []
    out = []
    for name, comparison in comparisons.items():
        if agents.get(name) in claim.against:
            envs = {e: flipped(d) for e, d in comparison.envs.items()}
            out.append((agents[name], verdict(name, flipped(comparison.suite), envs)))
    return out


CLAIMS_NOTE = (
    "Each measured row: the reference Lumos-I row minus the named row, paired by env, task and "
    "seed; *ahead* and *behind* count the envs whose 95% interval lies above or below 0, the "
    "rest are undecided. The paper's column gives its LLaMA-2-7B rows' differences on its own "
    "datasets, in points."
)


def claims_markdown(
    reference: str, reference_agent: str, comparisons: Mapping[str, Any],
    agents: Mapping[str, str], reported_rows: Sequence[Mapping[str, Any]],
    short: Callable[[str], str], diff_text: Callable[[PairedDiff], str],
) -> list[str]:
    """The Markdown section of the paper's claims.

    None without a Lumos-I reference row, or when no row measures a claim (a board of Lumos-I
    variants alone, such as the ``learning`` suite's).
    """
    measured_rows = [claim_rows(claim, reference_agent, comparisons, agents) for claim in CLAIMS]
    if not any(measured_rows):  # also when the reference is not Lumos-I (no rows at all)
        return []
    lines = ["", "## The paper's claims, measured", "",
             f"Reference: `{reference}`. {CLAIMS_NOTE}", ""]
    headers = ["claim", "against", "run", "paper: Lumos-I minus it", "suite score",
               "ahead", "behind", "undecided"]
    table = []
    for claim, rows in zip(CLAIMS, measured_rows, strict=True):
        measured = {agent for agent, _ in rows}
        for agent, v in rows:
            table.append([
                f"({claim.key})", agent, f"`{v.row}`", paper_differences(reported_rows, agent),
                diff_text(v.suite).replace("*", "\\*"),
                _envs(v.ahead, short), _envs(v.behind, short), _envs(v.undecided, short),
            ])
        table += [
            [f"({claim.key})", agent, "not measured", paper_differences(reported_rows, agent),
             "-", "-", "-", "-"]
            for agent in claim.against if agent not in measured
        ]
    lines += markdown_table(headers, table)
    return [*lines, "", GENERALISATION]


def _envs(envs: Sequence[str], short: Callable[[str], str]) -> str:
    return f"{len(envs)}: " + ", ".join(short(e) for e in envs) if envs else "0"
