"""The board and its rows: what every format of the leaderboard renders.

A :class:`ResultsDir` is one results folder as read; an :class:`Entry` one run (its folders'
cells and suite score, :func:`build_entry`); a :class:`SeedRow` one agent trained with several
seeds (:func:`seed_row`); a :class:`Board` the ranked rows with the env columns, the paper's
:class:`Reported` numbers and, with a reference row, the :class:`Paired` differences to it.
Also here: the notes written under every table (:data:`CEILING_NOTE`, :data:`INFRA_NOTE`), the
:class:`LeaderboardError` of the whole package, and how a cell's numbers are written
(:func:`cell_text`, :func:`short_env`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.identity import adapter_weights
from lumos_gym.evaluation.results import is_infra_error
from lumos_gym.evaluation.summary import SUMMARY_FORMAT, suite_mean_se, summarize
from lumos_gym.leaderboard.agents import reads_gold_answers
from lumos_gym.leaderboard.attribution import Attribution, counterfactual_kind
from lumos_gym.leaderboard.cards import budget_text, seed_text, training_seeds
from lumos_gym.leaderboard.stats import (
    Comparison,
    SeedMatrix,
    seed_matrices,
    two_level_bootstrap,
)

#: What a ``ceiling`` row is, written under every table.
CEILING_NOTE = (
    "Rows marked ceiling are agents that read the gold answers (the oracle replays each task's "
    "gold actions): what the env lets a perfect agent score; never ranked. Rows marked "
    "counterfactual replace one module of an agent with gold data (the gold plan, or gold "
    "grounding): they attribute the agent's failures to its modules and are never ranked either."
)


#: The mark after the name of a row with episodes that ended in ``infra-error``.
INFRA_MARK = "⚠"


#: What :data:`INFRA_MARK` means, written under a table that has such a row.
INFRA_NOTE = (
    f"{INFRA_MARK} marks a row with episodes that ended in infra-error: a failure of the "
    "machinery (the model backend or an env server: an engine that dropped a request, a "
    "server that timed out through its retries), not of the agent. They are left out of the "
    "row's means, intervals and paired differences instead of counting as 0, so the row "
    "rests on fewer episodes; lumos-gym evaluate --resume with the run's --out plays them again."
)


class LeaderboardError(LumosGymError):
    """Results cannot be read or rendered, or a format's dependency is missing."""


@dataclass
class ResultsDir:
    """One results folder as read for the leaderboard.

    Attributes:
        path: the folder.
        run: its run.json.
        records: its valid episode records (read by
            :func:`lumos_gym.evaluation.results.read_results`).
        summary: its summary.json, or None when missing or unreadable.
        problems: what was wrong (bad lines, an unreadable summary), each naming the file.
    """

    path: Path
    run: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    def group_key(self) -> str:
        """Return what identifies the run: its configuration and its adapters' weights.

        The configuration is the fingerprint (else the agent); the weights tell apart runs of
        adapters trained with other seeds or data under the same names.
        """
        config = self.run.get("fingerprint") or {"agent": self.run.get("agent")}
        identity = {"fingerprint": config, "adapter weights": adapter_weights(self.run)}
        return json.dumps(identity, sort_keys=True, default=str)


@dataclass
class Cell:
    """One run's result on one env: its primary metric with uncertainty."""

    env_id: str
    metric: str
    mean: float
    se: float | None
    ci95: list[float] | None
    episodes: int
    statuses: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Entry:
    """A measured row: one run (one agent configuration) over one or more results folders."""

    name: str
    dirs: list[ResultsDir]
    records: dict[str, list[dict[str, Any]]]
    cells: dict[str, Cell]
    score: dict[str, Any]
    rank: int = 0
    covered: int = 0
    #: env id → the episodes of the row's envs that ended in ``infra-error`` (none: empty)
    infra: dict[str, int] = field(default_factory=dict)
    #: shown after the name when the board groups seeds: ``1 seed`` for a trained row alone
    seed_note: str = ""

    @property
    def infra_errors(self) -> int:
        """Return the episodes of the row that ended in ``infra-error`` (left out of its means)."""
        return sum(self.infra.values())

    @property
    def label(self) -> str:
        """Return the row's name as shown: its seed note, and :data:`INFRA_MARK` if it needs one."""
        name = f"{self.name} ({self.seed_note})" if self.seed_note else self.name
        return f"{name} {INFRA_MARK}" if self.infra else name

    @property
    def ceiling(self) -> bool:
        """Whether the agent reads gold data (the oracle, a counterfactual): never ranked."""
        return _gold_kind(self.agent) is not None

    @property
    def rank_text(self) -> str:
        """The rank as shown: its number, ``ceiling`` or ``counterfactual``."""
        return _gold_kind(self.agent) or str(self.rank)

    @property
    def run(self) -> dict[str, Any]:
        """Return the first folder's run.json."""
        return self.dirs[0].run

    @property
    def agent(self) -> str:
        """Return the agent's name."""
        agent = self.run.get("agent")
        if isinstance(agent, Mapping) and agent.get("name"):
            return str(agent["name"])
        for records in self.records.values():
            if records and records[0].get("agent"):
                return str(records[0]["agent"])
        return "?"

    @property
    def models(self) -> str:
        """Return each role's model (and adapter) as one short line."""
        models = (self.run.get("fingerprint") or {}).get("models") or {}
        parts = []
        for role, value in sorted(models.items()):
            if isinstance(value, list) and len(value) >= 2:
                adapter = f"+{value[2]}" if len(value) > 2 and value[2] else ""
                how = [value[0]] if value[0] not in ("hf", value[1]) else []
                how += [str(n) for n in value[3:4] if n]  # numerics other than fp32
                served = f" ({', '.join(how)})" if how else ""
                parts.append(f"{role}: {value[1]}{adapter}{served}")
        return ", ".join(parts) or "-"

    @property
    def episodes(self) -> int:
        """Return the number of episodes over the table's envs."""
        return sum(c.episodes for c in self.cells.values())


#: The rule of a seed group's suite score (a :class:`SeedRow`'s ``score``).
GROUP_SCORE_RULE = (
    "unweighted mean over envs of each env's mean over seeds of each seed's mean; ci95 = "
    "two-level percentile bootstrap resampling the training seeds (once for every env) and the "
    "tasks within each env; se = the replicates' standard deviation"
)


@dataclass
class SeedRow:
    """The runs of one agent trained with several seeds on one budget, shown as one row.

    Each cell is the mean over the seeds of each seed's env mean, with the two-level bootstrap
    interval of :func:`~lumos_gym.leaderboard.stats.two_level_bootstrap` (``se``: the
    replicates' standard deviation); the suite score (:data:`GROUP_SCORE_RULE`) is the mean of
    the cells. The members keep their own rows in ``Board.entries`` (their cards, trajectory
    pages, the "Training seeds" section).

    Attributes:
        name: the row's name (:func:`~lumos_gym.leaderboard.cards.group_names`).
        members: the runs of the group, one per training seed, in seed order.
        cells: env id → the group's cell.
        score: the group's suite score.
        matrices: env id → the group's seeds × tasks values (what its intervals resample).
    """

    name: str
    members: list[Entry]
    cells: dict[str, Cell]
    score: dict[str, Any]
    rank: int = 0
    covered: int = 0
    matrices: dict[str, SeedMatrix] = field(default_factory=dict, repr=False)

    @property
    def agent(self) -> str:
        """Return the agent's name."""
        return self.members[0].agent

    @property
    def ceiling(self) -> bool:
        """A seed group never reads gold data (such rows are never grouped)."""
        return False

    @property
    def rank_text(self) -> str:
        """The rank as shown."""
        return str(self.rank)

    @property
    def run(self) -> dict[str, Any]:
        """Return the first seed's run.json."""
        return self.members[0].run

    @property
    def dirs(self) -> list[ResultsDir]:
        """Return every results folder of the group."""
        return [d for member in self.members for d in member.dirs]

    @property
    def models(self) -> str:
        """Return each role's model, then the recipe and budget that trained them."""
        return f"{self.members[0].models}; trained {budget_text(self.run)}"

    @property
    def infra(self) -> dict[str, int]:
        """Return env id → the group's episodes that ended in ``infra-error``."""
        out: dict[str, int] = {}
        for member in self.members:
            for env_id, n in member.infra.items():
                out[env_id] = out.get(env_id, 0) + n
        return dict(sorted(out.items()))

    @property
    def infra_errors(self) -> int:
        """Return the group's episodes that ended in ``infra-error``."""
        return sum(self.infra.values())

    @property
    def label(self) -> str:
        """Return the row's name as shown (with :data:`INFRA_MARK` if a seed has infra errors)."""
        return f"{self.name} {INFRA_MARK}" if self.infra else self.name

    @property
    def episodes(self) -> int:
        """Return the number of episodes over the table's envs, every seed's."""
        return sum(c.episodes for c in self.cells.values())

    @property
    def seeds(self) -> str:
        """Return the training seeds, as shown: ``0, 1, 2``."""
        return ", ".join(seed_text(m.run) for m in self.members)


def seed_row(name: str, members: Sequence[Entry], envs: Sequence[str]) -> SeedRow:
    """Build the row of a seed group from its runs (each one seed's), over ``envs``."""
    members = sorted(members, key=lambda m: training_seeds(m.run))
    runs = {tuple(training_seeds(m.run)): entry_records(m) for m in members}
    matrices = seed_matrices(runs, envs=envs)
    boot = two_level_bootstrap(matrices)
    cells = {}
    for env_id, estimate in boot.envs.items():
        have = [m.cells[env_id] for m in members if env_id in m.cells]
        statuses: dict[str, int] = {}
        for cell in have:
            for status, n in cell.statuses.items():
                statuses[status] = statuses.get(status, 0) + n
        cells[env_id] = Cell(env_id, have[0].metric if have else "reward", estimate.value,
                             estimate.se, estimate.ci95, sum(c.episodes for c in have), statuses)
    suite = boot.suite
    score = {"rule": GROUP_SCORE_RULE, "envs": len(cells),
             "mean": suite.value if suite else 0.0, "se": suite.se if suite else None,
             "ci95": suite.ci95 if suite else None}
    return SeedRow(name, list(members), cells, score, matrices=matrices)


#: A row of the ranked table: one run, or a seed group.
Shown = Entry | SeedRow


@dataclass
class Reported:
    """The paper's reported numbers (``leaderboard/reported.json``)."""

    source: str
    note: str
    scale: float
    datasets: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    #: dataset name → the measured env column it matches (env id and arguments), if any
    matches: dict[str, str] = field(default_factory=dict)


@dataclass
class Board:
    """A leaderboard: ranked measured runs, the env columns, the reported block, warnings."""

    entries: list[Entry]
    envs: list[str]
    reported: Reported
    warnings: list[str] = field(default_factory=list)
    suite: str | None = None
    #: module attributions of the runs that have counterfactual runs on the board
    attributions: list[Attribution] = field(default_factory=list)
    #: each row's paired differences to a reference row (``--reference``), or None
    paired: Paired | None = None
    #: the seed groups shown as one row each (:func:`group_seed_rows`; empty: not grouped)
    groups: list[SeedRow] = field(default_factory=list)
    #: the rows of the ranked table, ranked, when seeds are grouped (None: ``entries``)
    shown: list[Shown] | None = None
    #: show the Lumos paper's reported numbers and its claims measured (``--paper``)
    paper: bool = False

    @property
    def rows(self) -> list[Shown]:
        """Return the rows of the ranked table: each seed group as one row (when grouped)."""
        return self.shown if self.shown is not None else list(self.entries)

    def metric_of(self, env_id: str) -> str:
        """Return the primary metric's name of an env column."""
        for entry in self.entries:
            if env_id in entry.cells:
                return entry.cells[env_id].metric
        return "-"


@dataclass
class Paired:
    """Every row's paired differences to one reference row (row minus reference).

    Attributes:
        reference: the reference row (a run, or a seed group).
        comparisons: row name → its :class:`~lumos_gym.leaderboard.stats.Comparison` with
            the reference (the reference itself left out), for each row of ``Board.rows``.
    """

    reference: Shown
    comparisons: dict[str, Comparison]


def reported_numbers() -> Reported:
    """Load the Lumos paper's reported numbers shipped with the package."""
    text = resources.files("lumos_gym.leaderboard").joinpath("reported.json").read_text("utf-8")
    data = json.loads(text)
    return Reported(str(data["source"]), str(data.get("note", "")), float(data.get("scale", 1)),
                    list(data["datasets"]), list(data["rows"]))


def _cell(env_id: str, stats: Mapping[str, Any]) -> Cell:
    ci = stats.get("ci95")
    return Cell(
        env_id, str(stats.get("primary_metric") or "reward"), float(stats.get("mean", 0.0)),
        float(stats["se"]) if stats.get("se") is not None else None,
        [float(ci[0]), float(ci[1])] if ci else None, int(stats.get("episodes", 0)),
        dict(stats.get("statuses") or {}), dict(stats.get("metrics") or {}),
    )


def build_entry(name: str, dirs: Sequence[ResultsDir], envs: Iterable[str] | None = None) -> Entry:
    """Build one run's row from its folders (restricted to ``envs`` when given).

    An env's cell is its folder's summary.json entry when exactly one folder holds that env
    and its summary has the current format and counts the env's ``infra-error`` episodes as
    the records do; otherwise it is recomputed from the episodes. An env whose every episode
    ended in ``infra-error`` has no score, hence no cell.
    The suite score is the single folder's when it covers exactly the row's envs, else it is
    recomputed from the episodes of every folder. A folder with problems (lines that do not
    load, an unreadable summary) is always recomputed from the episodes that load.
    """
    wanted = set(envs) if envs is not None else None
    by_key: dict[str, dict[str, Any]] = {}
    for d in dirs:
        repeated = [r["key"] for r in d.records if r["key"] in by_key]
        by_key.update({r["key"]: r for r in d.records if r["key"] not in by_key})
        if repeated:
            d.problems.append(f"{d.path}: {len(repeated)} episode(s) also in another folder of "
                              f"this run (e.g. {repeated[0]}); the first copies kept")
    records = [r for r in by_key.values() if wanted is None or r["env_id"] in wanted]
    recomputed = summarize(records) if records else None
    infra: dict[str, int] = {}
    for record in records:
        if is_infra_error(record):
            infra[record["env_id"]] = infra.get(record["env_id"], 0) + 1
    holders: dict[str, list[ResultsDir]] = {}
    for d in dirs:
        env_ids = set((d.summary or {}).get("envs") or {}) | {r["env_id"] for r in d.records}
        for env_id in env_ids:
            holders.setdefault(env_id, []).append(d)
    cells: dict[str, Cell] = {}
    for env_id, owners in sorted(holders.items()):
        if wanted is not None and env_id not in wanted:
            continue
        summary = owners[0].summary or {}
        published = (summary.get("envs") or {}).get(env_id)
        current = summary.get("format") == SUMMARY_FORMAT and published and published.get("ci95")
        # a summary written before its infra-error episodes were told apart scored them 0
        same_infra = bool(published) and published.get("infra_errors", 0) == infra.get(env_id, 0)
        # a folder with unreadable lines: its summary counts episodes that no longer load
        if len(owners) == 1 and current and same_infra and not owners[0].problems:
            cells[env_id] = _cell(env_id, published)
        elif recomputed and env_id in recomputed["envs"]:
            if recomputed["envs"][env_id]["mean"] is not None:  # else no episode has a score
                cells[env_id] = _cell(env_id, recomputed["envs"][env_id])
        elif published:  # an old summary without episodes: mean and SE, no interval
            cells[env_id] = _cell(env_id, {"primary_metric": "reward", **published})
    only = dirs[0].summary if len(dirs) == 1 and not dirs[0].problems else None
    only_current = (
        only and only.get("format") == SUMMARY_FORMAT and set(only.get("envs") or {}) == set(cells)
        and (only.get("overall") or {}).get("infra_errors", 0) == sum(infra.values())
    )
    if only_current:
        score = dict(only["score"])
    elif recomputed and _scored_envs(recomputed) == set(cells):
        score = recomputed["score"]
    else:
        score = suite_mean_se([{"mean": c.mean, "se": c.se} for c in cells.values()])
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(records, key=lambda r: r["key"]):
        grouped.setdefault(record["env_id"], []).append(record)
    return Entry(name, list(dirs), grouped, cells, score, infra=dict(sorted(infra.items())))


def _scored_envs(summary: Mapping[str, Any]) -> set[str]:
    """The envs of a summary that have a score (not every episode ended in ``infra-error``)."""
    return {e for e, stats in (summary.get("envs") or {}).items() if stats.get("mean") is not None}


def _reads_gold(agent: str) -> bool:
    """Whether the registered agent ``agent`` reads gold answers (False for an unknown one)."""
    return reads_gold_answers(agent)


def _gold_kind(agent: str) -> str | None:
    """Return how a row reads gold data: ``ceiling``, ``counterfactual`` or None (ranked).

    ``ceiling``: it reads the gold answers (the oracle); ``counterfactual``: one module of
    another agent is replaced by gold data.
    """
    if _reads_gold(agent):
        return "ceiling"
    return "counterfactual" if counterfactual_kind(agent) is not None else None


def entry_records(entry: Entry) -> list[dict[str, Any]]:
    """Return every episode record of a row (over the board's envs)."""
    return [r for records in entry.records.values() for r in records]


def short_env(env_id: str) -> str:
    """Return an env id without the ``lumos/`` prefix."""
    return env_id.removeprefix("lumos/")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ci(ci: Sequence[float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[-]"


def cell_text(cell: Cell | Mapping[str, Any] | None) -> str:
    """Return ``mean [low, high]`` of a cell or score ("-" when absent)."""
    if cell is None:
        return "-"
    if isinstance(cell, Cell):
        return f"{cell.mean:.3f} {_ci(cell.ci95)}"
    return f"{float(cell.get('mean', 0.0)):.3f} {_ci(cell.get('ci95'))}"


def _reported_value(reported: Reported, row: Mapping[str, Any], dataset: str) -> str:
    value = (row.get("values") or {}).get(dataset)
    if value is None:
        return "-"
    approx = "≈" if dataset in (row.get("approx") or []) else ""
    return f"{approx}{float(value) / reported.scale:.3f}"
