"""The sections under the ranked table, written as Markdown lines.

The notes on seed groups (:func:`seed_rows_markdown`) and on rows with ``infra-error``
episodes (:func:`infra_markdown`), the paper's claims measured against the reference row
(with ``--paper``), each seed group's seeds, and the module attribution of runs that have
counterfactual runs. The md output shows them as they are; the html page converts them
(:func:`~lumos_gym.leaderboard.render.page.markdown_section_html`), all but the attribution,
which it writes with links to the trajectory pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lumos_gym.leaderboard.agents import agent_can_act
from lumos_gym.leaderboard.attribution import ATTRIBUTION_NOTE, TABLE_HEADERS, table_rows
from lumos_gym.leaderboard.cards import (
    Spread,
    seeds_markdown,
    training_budget,
    training_seeds,
)
from lumos_gym.leaderboard.claims import CLAIMS, claims_markdown, trained_families
from lumos_gym.leaderboard.render.compare import diff_text
from lumos_gym.leaderboard.render.rows import INFRA_NOTE, Board, Entry, short_env
from lumos_gym.text import markdown_table

#: What the rows of seed groups are, written under the ranked table of a board that has them.
SEED_ROWS_NOTE = (
    "Rows named `agent (k seeds)` are one agent trained with k seeds on the same data and "
    "budget (their cards agree on everything but the seed; the Training seeds section lists "
    "each seed's run): each cell is the mean over the seeds of each seed's mean, and its "
    "interval a two-level bootstrap that resamples the training seeds as well as the tasks. "
    "`--no-seed-groups` shows each seed's run as a row."
)


def seed_rows_markdown(board: Board) -> list[str]:
    """The note under the ranked table on its seed groups and single-seed rows (none: empty).

    It names the rows trained with one seed, whose intervals leave out the spread of
    training, and gives that spread where the board measures it: each group's standard
    deviation of the suite score over its seeds.
    """
    if board.shown is None:
        return []
    single = [e.name for e in board.rows if isinstance(e, Entry) and e.seed_note]
    spread = [(group.name, Spread([float(m.score["mean"]) for m in group.members]).sd)
              for group in board.groups]
    if not single and not spread:
        return []
    parts = [SEED_ROWS_NOTE] if spread else []
    sds = ", ".join(f"{sd:.3f} for {name}" for name, sd in spread)
    if single and spread:
        parts.append(f"Single-seed rows: {', '.join(single)}: their intervals hold the tasks' "
                     "noise only, not training's; the seed SD of the suite score is "
                     f"{sds}.")
    elif single:
        parts.append(f"Single-seed rows: {', '.join(single)}: their intervals hold the tasks' "
                     "noise only; no agent on this board was trained with several seeds, so the "
                     "spread that training alone causes is not measured here.")
    else:
        parts.append(f"The seed SD of the suite score is {sds}.")
    return ["", " ".join(parts)]


def infra_markdown(board: Board) -> list[str]:
    """The note under the measured table on rows with ``infra-error`` episodes (none: empty)."""
    flagged = [e for e in board.entries if e.infra]
    if not flagged:
        return []
    rows = "; ".join(
        f"{e.name}: {e.infra_errors} episode{'s' if e.infra_errors != 1 else ''} ("
        + ", ".join(f"{short_env(env)} {n}" for env, n in e.infra.items()) + ")"
        for e in flagged)
    return ["", f"{INFRA_NOTE} Infra-error episodes left: {rows}."]


def _seeds_md(board: Board) -> list[str]:
    """Each seed group's seeds: their runs' scores, and their spread."""
    return seeds_markdown(board.entries, board.envs, short_env)


def _claims_md(board: Board) -> list[str]:
    """The paper's claims measured against the reference row (with ``--paper`` alone).

    With seeds grouped, a seed group is measured as one row against the reference (its
    group). Ungrouped (``--no-seed-groups``), a run of claims (a) and (b) trained with another
    seed than the reference's is left out, as its seeds do not match; a line under the claims
    names it. So is a row trained under another budget than the reference's (the ``cpu``
    budget's rows on a board whose reference is a ``gpu`` row): the paper's claims compare
    agents trained alike.
    """
    paired = board.paired
    if paired is None or not board.paper:
        return []
    rows = [row for row in board.rows if not row.ceiling]
    agents = {row.name: row.agent for row in rows}
    trained = {row.name: trained_families((row.run.get("training") or {}).values())
               for row in rows}
    comparisons, unmatched = dict(paired.comparisons), []
    mine = training_seeds(paired.reference.run)
    against = {agent for claim in CLAIMS for agent in claim.against}
    if board.shown is None and isinstance(paired.reference, Entry) and mine:
        for row in rows:
            theirs = training_seeds(row.run)
            if row.name in comparisons and row.agent in against and theirs and theirs != mine:
                unmatched.append(row.name)
                del comparisons[row.name]
    budget, other_budget = training_budget(paired.reference.run), []
    for row in rows:
        theirs = training_budget(row.run)
        if row.name in comparisons and row.agent in against and budget and theirs \
                and theirs != budget:
            other_budget.append(row.name)
            del comparisons[row.name]
    lines = claims_markdown(paired.reference.name, paired.reference.agent, comparisons,
                            agents, board.reported.rows, short_env, diff_text, trained,
                            can_act=_can_act(board))
    if lines and unmatched:
        lines += ["", f"Left out of the claims, trained with another seed than "
                  f"`{paired.reference.name}`'s: {', '.join(unmatched)} (grouped by seed, the "
                  "default view, each agent's seeds are compared as one row)."]
    if lines and other_budget:
        lines += ["", f"Left out of the claims, trained under another budget than "
                  f"`{paired.reference.name}`'s: {', '.join(other_budget)} (a board with one "
                  "of them as `--reference` measures the claims in its budget)."]
    return lines


def env_task_types(entries: Iterable[Any]) -> dict[str, str]:
    """Env id → its task type, as the rows' ``run.json`` record it."""
    kinds: dict[str, str] = {}
    for entry in entries:
        for env in entry.run.get("envs") or ():
            if isinstance(env, Mapping) and env.get("task_type"):
                kinds.setdefault(str(env.get("env_id")), str(env["task_type"]))
    return kinds


def _can_act(board: Board) -> Callable[[str, str], bool]:
    """Whether an agent can act in an env of the board (its task type, its agent's class)."""
    kinds = env_task_types(board.entries)
    return lambda agent, env_id: agent_can_act(agent, kinds.get(env_id))


def _attribution_md(board: Board) -> list[str]:
    """The Markdown section of module attribution (empty without counterfactual runs)."""
    if not board.attributions:
        return []
    lines = ["", "## Module attribution", "", ATTRIBUTION_NOTE, ""]
    for attribution in board.attributions:
        compared = ", ".join(f"{k}: {v}" for k, v in attribution.counterfactuals.items())
        lines += [f"### {attribution.run} ({attribution.agent})", "",
                  f"Counterfactual runs: {compared}.", ""]
        lines += markdown_table(TABLE_HEADERS, table_rows(attribution))
        lines.append("")
    return lines[:-1]
