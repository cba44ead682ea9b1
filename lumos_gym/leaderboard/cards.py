"""Run cards and training seeds: what made each row, and the spread that training alone causes.

A row's *card* (read from its ``run.json``) names the commit and backend that scored it, the
code of an agent from outside lumos-gym (its module or file, with a checksum), the backend
options given (``--model-args``) and, for each adapter, the training card that
:mod:`lumos_gym.evaluation.provenance` recorded: the base model, the recipe, the seed, the
optimizer steps and batch, and the training files with their checksums.

Rows whose cards agree on everything but the seed (the same agent, base model, recipe, steps,
batch, learning rate and training files) are one agent trained with several seeds:
:func:`seed_groups` finds them, :func:`group_names` names the board's row of each
(``lumos-i (3 seeds)``), and :func:`seed_spread` gives, per env and for the suite score, the
mean over the seeds, the standard deviation between them and their range. That range is the
noise floor of a comparison: a difference between two agents smaller than the spread of one
agent's seeds says more about the luck of a training run than about the recipe. The board
shows each group as one row whose intervals resample the seeds as well as the tasks
(:func:`lumos_gym.leaderboard.stats.two_level_bootstrap`).

The functions read rows through :class:`Row` (what a leaderboard entry offers), so that the
renderer can use them without this module importing it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lumos_gym.text import markdown_table

#: The card fields of a training budget: rows of two budgets are not compared in a claim.
TRAINING_BUDGET = ("base_model", "recipe", "steps", "batch_size", "lr")
#: The card fields that must agree for two rows to be seeds of one agent.
SAME_BUDGET = (*TRAINING_BUDGET, "data")


class Row(Protocol):
    """What the cards read of a leaderboard row."""

    name: str
    cells: Mapping[str, Any]
    score: Mapping[str, Any]
    records: Mapping[str, Sequence[Mapping[str, Any]]]

    @property
    def run(self) -> dict[str, Any]: ...  # noqa: D102 - the row's run.json

    @property
    def agent(self) -> str: ...  # noqa: D102 - the agent's name

    @property
    def ceiling(self) -> bool: ...  # noqa: D102 - whether it reads gold data


def role_cards(run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Role → the training card of the adapter that role runs (roles without one left out).

    A role's adapter is the one its backend runs: a backend loaded with several adapters
    (a planner and a grounder on one model) names the one it uses under ``details.adapter``.
    """
    cards = run.get("training") or {}
    out: dict[str, dict[str, Any]] = {}
    for role, folders in sorted((run.get("adapters") or {}).items()):
        details = ((run.get("backends") or {}).get(role) or {}).get("details") or {}
        named = details.get("adapters") or {}
        chosen = named.get(details.get("adapter")) if isinstance(named, Mapping) else None
        for folder in [chosen] if chosen in folders else list(folders):
            if folder in cards:
                out[role] = cards[folder]
                break
    return out


def training_seeds(run: Mapping[str, Any]) -> list[int]:
    """The distinct training seeds of a run's adapters (empty: no training cards)."""
    return sorted({c["seed"] for c in role_cards(run).values() if c.get("seed") is not None})


def source_text(run: Mapping[str, Any]) -> str | None:
    """Where the run's agent came from, for an agent from outside lumos-gym (else None).

    E.g. ``agent calc_agent.py:CalculatorAgent (sha256 1a2b3c4d)`` or ``agent
    mypkg.agents:MyAgent from mypkg 1.0 (sha256 ...)``.
    """
    agent = run.get("agent")
    source = agent.get("source") if isinstance(agent, Mapping) else None
    if not isinstance(source, Mapping):
        return None
    where = source.get("module") or Path(str(source.get("file") or "?")).name
    text = f"agent {where}:{source.get('class', '?')}"
    if source.get("distribution"):
        text += f" from {source['distribution']}"
    return text + f" (sha256 {str(source.get('sha256') or '?')[:8]})"


def card_text(run: Mapping[str, Any]) -> str:
    """One line naming what scored the run, its own agent's code, and what trained its adapters."""
    git = run.get("git") or {}
    commit = str(git.get("commit") or "?")[:7] + (" (dirty)" if git.get("dirty") else "")
    backends = ", ".join(run.get("backend") or [])
    # an agent without a model (oracle, a scripted one) records no backend
    parts = [f"scored at {commit} on {backends}" if backends else f"scored at {commit}, no model"]
    rescores = [r for r in run.get("rescored") or () if isinstance(r, Mapping)]
    if rescores:  # the scorers of the last pass scored its episodes again (lumos-gym rescore)
        again = rescores[-1].get("git") or {}
        parts[0] += (f", rescored at {str(again.get('commit') or '?')[:7]}"
                     f"{' (dirty)' if again.get('dirty') else ''}")
    source = source_text(run)
    if source is not None:
        parts.append(source)
    args = run.get("model_args")
    if args:
        parts.append("model args " + ", ".join(f"{k}={v}" for k, v in sorted(args.items())))
    build = matched_build(run)
    parts += [f"{role}: {_role_text(card, build)}" for role, card in role_cards(run).items()]
    if not role_cards(run):
        parts.append("no training card (shipped or untrained models, or an older run)")
    for session in run.get("sessions") or []:
        earlier = session.get("git") or {}
        parts.append(f"resumed: an earlier session at {str(earlier.get('commit') or '?')[:7]}"
                     f"{' (dirty)' if earlier.get('dirty') else ''}, {session.get('started')}")
    return "; ".join(parts)


def matched_build(run: Mapping[str, Any]) -> str | None:
    """The data build whose files have the checksums the run's cards name, per its leakage record.

    ``data leakage --record`` finds each training file a card names by its SHA-256 in a data
    build; when every one was found there, that build is what trained the adapters, even where
    the cards are too old to name it. None otherwise.
    """
    leakage = run.get("leakage") if isinstance(run.get("leakage"), Mapping) else {}
    files = [f for f in leakage.get("training_files") or () if isinstance(f, Mapping)]
    build = (leakage.get("recorded") or {}).get("data_build")
    if not build or not files:
        return None
    if any(not f.get("sha256") or f.get("sha256") != f.get("card_sha256") for f in files):
        return None
    return str(build)


def _role_text(card: Mapping[str, Any], build: str | None = None) -> str:
    """How one adapter was trained: recipe, seed, steps, data; and its reward, if it had one.

    ``build``: the data build the run's leakage record matched by checksums (:func:`matched_build`).
    """
    rewarded = card.get("reward_source") or {}
    envs = ", ".join(rewarded.get("envs") or []) or "?"
    if rewarded.get("method") == "grpo":
        start = ", ".join(a if a == r else f"{a} ({r})"  # each role's adapter folder name
                          for r, a in sorted((rewarded.get("start") or {}).items()))
        at = f" (its {rewarded['checkpoint']})" if rewarded.get("checkpoint") else ""
        return (f"GRPO from the adapters {start or '?'}, seed {card.get('seed')}, "
                f"{card.get('steps')} steps{at} "
                f"of {card.get('batch_size')} episodes (groups of {rewarded.get('group_size')}, "
                f"KL weight {rewarded.get('beta')}) on {envs}, reward: {rewarded.get('reward')}; "
                f"{rewarded.get('sampled_tokens')} tokens sampled on "
                f"{rewarded.get('device') or 'an unrecorded device'}"
                f"{_seconds(card.get('seconds'), ' in all')}{_leakage_text(rewarded)}")
    files = (card.get("data") or {}).items()
    data = ", ".join(f"{name} {digest[:8]}" for name, digest in files)
    text = (f"{card.get('recipe')} seed {card.get('seed')}, {card.get('steps')} steps of "
            f"{card.get('batch_size')}, {card.get('train_examples')} records ({data or 'no data'})")
    if card.get("datasets"):  # recorded since training reports count them
        text += " from " + ", ".join(f"{name or 'unnamed'} {count}"
                                     for name, count in card["datasets"].items())
    text += _seconds(card.get("seconds"), " of training")
    if card.get("device"):
        text += f" on {card['device']}"
    if rewarded:
        text += (f", exported from episodes with reward >= {rewarded.get('min_reward')} of "
                 f"{', '.join(rewarded.get('results') or []) or '?'} on {envs}")
        if rewarded.get("sampled_tokens") is not None:
            text += (f" ({rewarded['sampled_tokens']} prompt and generated tokens sampling"
                     f"{_seconds(rewarded.get('sampling_seconds'), '')})")
        text += _leakage_text(rewarded)
    return text + _origin_text(card, build)


def _origin_text(card: Mapping[str, Any], build: str | None = None) -> str:
    """The code, the data build and the sessions that trained an adapter, as its card says.

    Cards written before they recorded these say so instead of leaving them out; the data build
    the leakage record matched by checksums (``build``) is named as such.
    """
    if "git" not in card and "sessions" not in card:
        if build:
            return (f"; data build {build} (its files have the card's checksums: the leakage "
                    "record); commit and resumptions not recorded (an older training report)")
        return "; commit, data build and resumptions not recorded (an older training report)"
    git = card.get("git") or {}
    text = f"; trained at {str(git.get('commit') or '?')[:7]}"
    text += " (dirty)" if git.get("dirty") else ""
    build = card.get("data_build") or {}
    if build.get("id"):
        text += f", data build {build['id']}"
        if build.get("from") == "mixture":
            text += f" (mixture seed {build.get('seed')})"
    else:
        text += ", data build unknown"
    sessions = card.get("sessions") or []
    if len(sessions) <= 1:
        text += ", in one session"
    else:
        spans = ", ".join(f"{s.get('from_step')}-{s.get('to_step')}" for s in sessions)
        text += f", resumed {len(sessions) - 1} time(s) (steps {spans})"
    return text


def _leakage_text(rewarded: Mapping[str, Any]) -> str:
    """``", train tasks checked against <suite>: N of M test tasks shared"``, if checked."""
    leakage = rewarded.get("leakage")
    if not leakage:
        return ""
    return (f", train tasks checked against {leakage.get('suite')}'s test tasks: "
            f"{leakage.get('shared_tasks')} of {leakage.get('test_tasks')} shared")


def _seconds(value: Any, what: str) -> str:
    """``", 123 s<what>"`` for a number of seconds, or nothing when it is unknown."""
    return f", {float(value):.0f} s{what}" if isinstance(value, int | float) else ""


def _budget_key(row: Row) -> str | None:
    cards = role_cards(row.run)
    if not cards or row.ceiling:
        return None
    same = {role: {k: card.get(k) for k in SAME_BUDGET} for role, card in cards.items()}
    return repr((row.agent, sorted(same.items(), key=lambda item: item[0])))


def training_budget(run: Mapping[str, Any]) -> frozenset[tuple[Any, ...]] | None:
    """The budgets of the run's adapters: (base model, recipe, steps, batch, lr) of each card.

    None for a run whose models have no training card (an untrained or a served model). Two
    runs trained under the same budget give the same set, whatever data each agent's format
    exports.
    """
    budgets = frozenset(tuple(card.get(k) for k in TRAINING_BUDGET)
                        for card in role_cards(run).values())
    return budgets or None


def budget_text(run: Mapping[str, Any]) -> str:
    """``gpu-small, 637 steps of 16``: the recipe and budget its adapters' cards name."""
    budgets = {f"{card.get('recipe')}, {card.get('steps')} steps of {card.get('batch_size')}"
               for card in role_cards(run).values()}
    return "; ".join(sorted(budgets)) or "no training card"


def seed_text(run: Mapping[str, Any]) -> str:
    """The run's training seeds as shown: ``0``, or ``0+1`` for adapters of two seeds."""
    return "+".join(map(str, training_seeds(run))) or "-"


@dataclass
class SeedGroup:
    """Rows of one agent trained on the same data and budget with different seeds."""

    agent: str
    rows: list[Row]
    seeds: list[int]


def seed_groups(rows: Sequence[Row]) -> list[SeedGroup]:
    """The groups of at least two rows that differ only in their training seed.

    Two rows with the same seed (the same models scored twice) count once, by the first.
    """
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        key = _budget_key(row)
        if key is not None:
            grouped.setdefault(key, []).append(row)
    groups = []
    for members in grouped.values():
        kept: dict[tuple[int, ...], Row] = {}
        for row in members:
            kept.setdefault(tuple(training_seeds(row.run)), row)
        if len(kept) >= 2:
            seeds = sorted({s for key in kept for s in key})
            groups.append(SeedGroup(members[0].agent, list(kept.values()), seeds))
    return groups


def group_names(groups: Sequence[SeedGroup]) -> list[str]:
    """The name of each group's row: ``lumos-i (3 seeds)``.

    An agent with several groups (another recipe, budget or data) names each with its budget,
    ``lumos-i (5 seeds, cpu-small, 110 steps of 2)``, even when their sizes differ: a reader
    should not have to tell ``lumos-i (3 seeds)`` from ``lumos-i (5 seeds)`` by the cards.
    Names still alike get a ``'``.
    """
    agents = [g.agent for g in groups]
    names: list[str] = []
    for group in groups:
        name = f"{group.agent} ({len(group.rows)} seeds)"
        if agents.count(group.agent) > 1:
            name = f"{group.agent} ({len(group.rows)} seeds, {budget_text(group.rows[0].run)})"
        while name in names:
            name += "'"
        names.append(name)
    return names


@dataclass
class Spread:
    """One env's (or the suite score's) values over a group's seeds."""

    values: list[float]

    @property
    def mean(self) -> float:
        """The mean over seeds."""
        return sum(self.values) / len(self.values)

    @property
    def sd(self) -> float:
        """The sample standard deviation between seeds."""
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in self.values) / (len(self.values) - 1))

    @property
    def range(self) -> float:
        """The largest minus the smallest seed's value."""
        return max(self.values) - min(self.values)


def seed_spread(group: SeedGroup, envs: Sequence[str]) -> dict[str, Spread]:
    """``"suite"`` and each env every row of the group has → its :class:`Spread`."""
    spread = {"suite": Spread([float(row.score["mean"]) for row in group.rows])}
    for env_id in envs:
        if all(env_id in row.cells for row in group.rows):
            spread[env_id] = Spread([float(row.cells[env_id].mean) for row in group.rows])
    return spread


SEEDS_NOTE = (
    "Agents trained with several seeds on the same data and budget (their cards agree on "
    "everything but the seed): each seed's row with its suite score and env means, then "
    "`mean ± sd (range)` over the seeds. The board ranks each group as one row: the mean over "
    "its seeds, with an interval that resamples the seeds as well as the tasks. The range is the "
    "noise floor of training: a difference between two agents smaller than it could come from "
    "the seed alone."
)


def seeds_markdown(rows: Sequence[Row], envs: Sequence[str], short: Any) -> list[str]:
    """The Markdown section of the seed groups: each seed's scores, and their spread.

    None without groups.
    """
    groups = seed_groups(rows)
    if not groups:
        return []
    headers = ["group", "run", "seed", "suite score", *[short(e) for e in envs]]
    table = []
    for group, name in zip(groups, group_names(groups), strict=True):
        for row in sorted(group.rows, key=lambda r: training_seeds(r.run)):
            table.append([name, row.name, seed_text(row.run), f"{float(row.score['mean']):.3f}",
                          *[f"{row.cells[e].mean:.3f}" if e in row.cells else "-"
                            for e in envs]])
        spread = seed_spread(group, envs)
        table.append([name, "mean ± sd (range)", ", ".join(map(str, group.seeds)),
                      *[_spread_text(spread.get(key)) for key in ("suite", *envs)]])
    return ["", "## Training seeds", "", SEEDS_NOTE, "", *markdown_table(headers, table)]


def _spread_text(spread: Spread | None) -> str:
    if spread is None:
        return "-"
    return f"{spread.mean:.3f} ± {spread.sd:.3f} ({spread.range:.3f})"


def cards_markdown(rows: Sequence[Row]) -> list[str]:
    """The Markdown section naming what scored each row and what trained its models."""
    if not rows:
        return []
    lines = ["", "## Run cards", "",
             "What scored each row (the commit that played it and, if its episodes were scored "
             "again, that of its last rescore; the backend) and what trained its adapters (recipe, "
             "seed, optimizer steps of a batch, training records, and each training file with "
             "the first 8 hex digits of its SHA-256), from its `run.json`.", ""]
    lines += [f"- `{row.name}` ({row.agent}): {card_text(row.run)}" for row in rows]
    return lines
