"""``lumos-gym leaderboard``: rank results folders, render them, and validate submissions.

A *results folder* is what ``lumos-gym evaluate`` writes (``episodes.jsonl``, ``summary.json``,
``run.json``). The command takes results folders, or folders of them (``reproduce`` writes one
folder per env under each agent: ``results/<agent>/<Env>/``), and groups them into *runs*: the
folders whose ``run.json`` holds the same configuration fingerprint (agent and models) and the
same adapter weights are one run, named after the folder they share. Each run is a row; each env
a column holding the env's primary metric, ``mean [low, high]`` with the 95% bootstrap interval
of ``summary.json`` (recomputed from ``episodes.jsonl`` with
:func:`lumos_gym.leaderboard.results.summarize` when the summary lacks it: older summaries,
several folders of one run, a corrupt summary). Runs are ranked by their suite score
(:mod:`lumos_gym.leaderboard.results`); a run that covers fewer of the table's envs ranks after
the runs that cover more, as its score is a mean over other envs.

The Lumos paper's reported numbers (``leaderboard/reported.json``, transcribed from the paper's
tables) come in a block of their own, marked reported and never ranked: they were measured on
the full official sets with the paper's models, and have no suite score.

Formats: a GitHub-flavoured Markdown table, a tidy CSV (one row per run and env), a static HTML
page (sortable, filterable, self-contained, with a trajectory viewer page per run and env beside
it) and a PNG bar chart with the intervals as error bars (the ``leaderboard`` extra:
matplotlib). :func:`validate` checks a submission folder.

Training seeds: the rows of one agent trained with several seeds on the same data and budget
(:func:`~lumos_gym.leaderboard.cards.seed_groups`) are shown as one row, a :class:`SeedRow`
(``lumos-i (3 seeds)``): each cell the mean over the seeds of each seed's env mean, with a
two-level bootstrap interval that resamples the seeds as well as the tasks
(:func:`~lumos_gym.leaderboard.stats.two_level_bootstrap`); each seed's own scores go to the
"Training seeds" section, and a row trained with one seed is labelled ``(1 seed)``.
``load_board(..., group_seeds=False)`` (``--no-seed-groups``) shows every seed's row instead.

Paired differences: :func:`attach_reference` compares every row with a reference row episode by
episode (:mod:`lumos_gym.leaderboard.stats`), and the md, csv and html outputs then add each
row's difference per env and for the suite score, with its paired interval and test; without a
reference they are as before. A seed group, as the reference or as a row, is compared over its
seeds and tasks (:func:`~lumos_gym.leaderboard.stats.compare_groups`); a reference that names
one seed's run stands for its group. :func:`render_comparison` writes the full paired table of
two rows (``--compare A B``).

Failures of the machinery: a row with episodes that ended in ``infra-error`` (a backend or env
server failed, not the agent; :func:`~lumos_gym.leaderboard.results.is_infra_error`) has them
left out of its means and paired differences, carries :data:`INFRA_MARK` after its name, and a
note under the table names their count per env; :func:`validate` refuses its folder unless
``allow_infra_errors``. A board without such a row renders as it always did.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lumos_gym import __version__
from lumos_gym.errors import EvaluationError, LumosGymError
from lumos_gym.evaluation.folders import follow_latest, is_latest_link
from lumos_gym.evaluation.identity import adapter_weights
from lumos_gym.evaluation.plan import plan_env, spec_key
from lumos_gym.evaluation.results import (
    ResultsError,
    differences,
    episodes_path,
    infra_errors,
    is_infra_error,
    keys_sha256,
    read_results,
)
from lumos_gym.evaluation.suites import get_suite, suite_entries
from lumos_gym.evaluation.summary import (
    SCORE_RULE,
    SUMMARY_FORMAT,
    comparable,
    env_kind,
    metrics_for,
    suite_mean_se,
    summarize,
)
from lumos_gym.jsonl import folder_problem
from lumos_gym.leaderboard.agents import agent_can_act, reads_gold_answers
from lumos_gym.leaderboard.agreement import AGREEMENT_NOTE, agreement, agreement_rows
from lumos_gym.leaderboard.attribution import (
    ATTRIBUTION_NOTE,
    TABLE_HEADERS,
    Attribution,
    board_attributions,
    counterfactual_kind,
    table_rows,
)
from lumos_gym.leaderboard.cards import (
    Spread,
    budget_text,
    cards_markdown,
    group_names,
    role_cards,
    seed_groups,
    seed_text,
    seeds_markdown,
    training_seeds,
)
from lumos_gym.leaderboard.claims import CLAIMS, claims_markdown, trained_families
from lumos_gym.leaderboard.stats import (
    Comparison,
    PairedDiff,
    SeedMatrix,
    compare_records,
    compare_seed_matrices,
    pair_key,
    seed_matrices,
    two_level_bootstrap,
)
from lumos_gym.text import markdown_table

#: The output formats.
FORMATS = ("md", "html", "csv", "png")
#: Characters of a long text shown before its "show more" toggle (trajectory viewer).
PREVIEW_CHARS = 400
#: The most characters of one text a viewer page holds (the rest stays in episodes.jsonl).
MAX_TEXT_CHARS = 4000
#: run.json keys every submission must have (their values may be null, e.g. git outside a
#: checkout); see docs/agents.md, "Provenance".
PROVENANCE_KEYS = (
    "lumos_gym", "git", "argv", "agent", "decoding", "backends", "backend", "models", "adapters",
    "hardware", "python", "platform", "versions", "started", "suite", "envs", "plan",
    "fingerprint",
)
#: Keys of each env in run.json's ``envs``.
ENV_PROVENANCE_KEYS = ("env_id", "kwargs", "version", "task_type", "primary_metric", "split",
                       "data", "task_ids", "seeds")
_RESULT_FILES = ("episodes.jsonl", "episodes.jsonl.gz", "summary.json", "run.json")
_IMAGE_PREFIXES = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


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


# ------------------------------------------------------------------------------ reading
@dataclass
class ResultsDir:
    """One results folder as read for the leaderboard.

    Attributes:
        path: the folder.
        run: its run.json.
        records: its valid episode records (read by
            :func:`lumos_gym.leaderboard.results.read_results`).
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


def _is_results_dir(path: Path) -> bool:
    return any((path / name).is_file() for name in _RESULT_FILES)


def find_results_dirs(path: str | Path) -> list[Path]:
    """Return the results folders at ``path``: itself, or its sub-folders down two levels.

    A ``latest`` pointer (:mod:`.folders`) stands for the folder it names; inside a folder it
    is passed over, as the folder it names is there too.

    Raises:
        LeaderboardError: ``path`` does not exist or holds no results folder.
    """
    root = follow_latest(Path(path))
    if not root.is_dir():
        raise LeaderboardError(f"{root}: no such results folder")
    if _is_results_dir(root):
        return [root]
    found: list[Path] = []
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not is_latest_link(p)):
        if _is_results_dir(child):
            found.append(child)
            continue
        found += sorted(g for g in child.iterdir() if g.is_dir() and _is_results_dir(g))
    if not found:
        raise LeaderboardError(f"{root} holds no results folder (no summary.json, episodes.jsonl "
                               "or run.json in it or two levels below)")
    return found


def _read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object; raise LeaderboardError naming the file when that fails."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LeaderboardError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LeaderboardError(f"{path}: cannot be read ({e})") from None
    except ValueError as e:
        raise LeaderboardError(f"{path}: not valid JSON, corrupt or truncated ({e})") from None
    if not isinstance(data, dict):
        raise LeaderboardError(f"{path}: not a JSON object")
    return data


def load_results_dir(path: str | Path) -> ResultsDir:
    """Read one results folder, keeping what is readable.

    Bad episode lines and an unreadable summary are listed in ``problems`` (the summary is
    then recomputed from the episodes).

    Raises:
        LeaderboardError: no readable run.json (the run's configuration is unknown), or
            neither episodes nor a summary to show.
    """
    folder = Path(path)
    run = _read_json(folder / "run.json")
    result = ResultsDir(folder, run)
    if episodes_path(folder) is not None:
        try:
            read = read_results(folder)
        except ResultsError as e:
            raise LeaderboardError(str(e)) from None
        result.records = list(read.records.values())
        result.problems += read.problems
    try:
        result.summary = _read_json(folder / "summary.json")
    except LeaderboardError as e:
        if result.records:
            result.problems.append(f"{e}; recomputed from episodes.jsonl")
    if not result.records:
        if result.summary is None:
            raise LeaderboardError(f"{folder}: neither episodes nor a readable summary")
        result.problems.append(f"{folder / 'episodes.jsonl'}: missing or empty; the summary "
                               "is shown without trajectories")
    return result


# ------------------------------------------------------------------------------- the board
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


def _unique_names(groups: Sequence[list[ResultsDir]]) -> list[str]:
    """Name each run after the folder its results share; clashing names get their paths."""
    homes = []
    for dirs in groups:
        common = Path(os.path.commonpath([str(d.path.resolve()) for d in dirs]))
        envs = {short_env(str(r["env_id"])) for d in dirs for r in d.records}
        envs |= {short_env(e) for d in dirs for e in (d.summary or {}).get("envs") or {}}
        if envs == {common.name}:  # one env folder of results/<run>/<Env>/: the run's name
            common = common.parent
        homes.append(common)
    names = [home.name or str(home) for home in homes]
    out = []
    for name, home in zip(names, homes, strict=True):
        clashing = [h for n, h in zip(names, homes, strict=True) if n == name]
        if len(clashing) > 1:
            base = Path(os.path.commonpath([str(h) for h in clashing]))
            name = str(home.relative_to(base)) if home != base else name
        while name in out:
            name += "'"
        out.append(name)
    return out


def _distinct_folders(paths: Sequence[str | Path], warnings: list[str]) -> list[tuple[int, Path]]:
    """The results folders of ``paths`` with the argument each came from, each folder once.

    A folder reached twice (``results/*`` gives ``results/latest`` beside the run it names)
    is kept under its own name rather than a ``latest`` link's. Arguments that hold no
    results add a warning.
    """
    found: list[tuple[int, Path]] = []
    for n, path in enumerate(paths):
        try:
            found += [(n, folder) for folder in find_results_dirs(path)]
        except LeaderboardError as e:
            warnings.append(str(e))
    kept: dict[Path, int] = {}
    for index, (_, folder) in enumerate(found):
        key = folder.resolve()
        if key not in kept or (is_latest_link(found[kept[key]][1]) and not is_latest_link(folder)):
            kept[key] = index
    return [found[i] for i in sorted(kept.values())]


def load_board(
    paths: Sequence[str | Path], *, suite: str | None = None, group_seeds: bool = True
) -> Board:
    """Read results folders into a ranked :class:`Board`.

    Folders that cannot be read are skipped with a warning naming the file; the others still
    load. With ``suite``, the columns are that suite's envs. With ``group_seeds`` (the
    default), each seed group is one row of the ranked table (:func:`group_seed_rows`).

    Raises:
        LeaderboardError: no results at all could be read, or an unknown suite.
    """
    warnings: list[str] = []
    groups: dict[tuple[int, str], list[ResultsDir]] = {}
    for n, folder in _distinct_folders(paths, warnings):
        try:
            d = load_results_dir(folder)
        except LeaderboardError as e:
            warnings.append(f"{e}; {folder} skipped")
            continue
        groups.setdefault((n, d.group_key()), []).append(d)  # runs never span arguments
    columns: list[str] | None = None
    if suite is not None:
        try:
            columns = [e.env_id for e in get_suite(suite).entries]
        except EvaluationError as e:
            raise LeaderboardError(str(e)) from None
    group_list = list(groups.values())
    entries = []
    for name, dirs in zip(_unique_names(group_list), group_list, strict=True):
        entry = build_entry(name, dirs, columns)
        warnings += [p for d in dirs for p in d.problems]
        shards = {tuple(s) for d in dirs if (s := (d.run.get("plan") or {}).get("shard"))}
        if shards and len(shards) < next(iter(shards))[1]:
            shown = ", ".join(f"{i}/{n}" for i, n in sorted(shards))
            warnings.append(f"{name}: only shard(s) {shown} of a run; merge every shard "
                            "(lumos-gym merge) before comparing it")
        if not entry.cells and entry.infra:
            warnings.append(f"{name}: every episode ended in infra-error ({entry.infra_errors}: "
                            "the backend or env server failed), so it has no score; left out "
                            "(lumos-gym evaluate --resume plays them again)")
            continue
        if not entry.cells:
            warnings.append(f"{name}: no env of suite {suite} in its results; left out")
            continue
        entries.append(entry)
    if not entries:
        shown = "; ".join(warnings) if warnings else "nothing given"
        raise LeaderboardError(f"no results could be read ({shown})")
    envs = columns if columns is not None else sorted({e for x in entries for e in x.cells})
    for entry in entries:
        entry.covered = sum(env in entry.cells for env in envs)
    entries.sort(key=lambda x: (x.ceiling, -x.covered, -float(x.score.get("mean", 0.0)), x.name))
    for n, entry in enumerate(entries, 1):
        entry.rank = 0 if entry.ceiling else n
    reported = reported_numbers()
    reported.matches = _match_datasets(reported, entries)
    board = Board(entries, envs, reported, warnings, suite)
    _attach_attributions(board)
    if group_seeds:
        group_seed_rows(board)
    return board


def _rank(rows: list[Shown]) -> None:
    """Sort rows as the board ranks them and number them (ceiling rows: 0)."""
    rows.sort(key=lambda x: (x.ceiling, -x.covered, -float(x.score.get("mean", 0.0)), x.name))
    for n, row in enumerate(rows, 1):
        row.rank = 0 if row.ceiling else n


def group_seed_rows(board: Board) -> None:
    """Show each seed group of ``board`` as one row, and label trained rows of one seed.

    The groups (:func:`~lumos_gym.leaderboard.cards.seed_groups`) become :class:`SeedRow` rows
    in ``board.groups``; every other run stays a row, labelled ``(1 seed)`` when it has a
    training card; ``board.shown`` holds the rows, ranked again.
    """
    groups = seed_groups(board.entries)
    grouped = {id(row) for group in groups for row in group.rows}
    rows: list[Shown] = [seed_row(name, group.rows, board.envs)  # type: ignore[arg-type]
                         for group, name in zip(groups, group_names(groups), strict=True)]
    for entry in board.entries:
        if id(entry) in grouped:
            continue
        if role_cards(entry.run) and not entry.ceiling:
            entry.seed_note = "1 seed"
        rows.append(entry)
    for row in rows:
        row.covered = sum(env in row.cells for env in board.envs)
    _rank(rows)
    board.groups = [row for row in rows if isinstance(row, SeedRow)]
    board.shown = rows


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


def _attach_attributions(board: Board) -> None:
    """Attribute the failures of each run that has counterfactual runs on the board.

    Each failed episode record of such a run gets ``attribution`` (one line: the module and
    its evidence), which its trajectory page shows.
    """
    runs = [(e.name, e.run, {r["key"]: r for rs in e.records.values() for r in rs})
            for e in board.entries]
    board.attributions, warnings = board_attributions(runs)
    board.warnings += warnings
    by_name = {name: records for name, _, records in runs}
    for attribution in board.attributions:
        records = by_name[attribution.run]
        for key, item in attribution.episodes.items():
            records[key]["attribution"] = item.describe()


def _match_datasets(reported: Reported, entries: Sequence[Entry]) -> dict[str, str]:
    """Dataset name → env id, for datasets a measured column ran (same env and arguments)."""
    matches = {}
    for dataset in reported.datasets:
        env_id, wanted = dataset.get("env"), dataset.get("kwargs") or {}
        for entry in entries:
            for record in entry.records.get(env_id or "", [])[:1]:
                kwargs = record.get("env_kwargs") or {}
                if all(kwargs.get(k) == v for k, v in wanted.items()):
                    matches[dataset["name"]] = env_id
    return matches


# ----------------------------------------------------------------------------- rendering
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
    lines += seed_rows_markdown(board)
    lines += infra_markdown(board)
    lines += paired_markdown(board)
    lines += _claims_md(board)
    lines += _seeds_md(board)
    lines += _attribution_md(board)
    lines += _reported_md(board)
    lines += cards_markdown([e for e in board.entries if not e.ceiling])
    return "\n".join(lines) + "\n"


def task_sets_problem(board: Board) -> str | None:
    """A line saying which rows cover other tasks than the first ranked row, or None.

    Rows ranked together should be scored on the same tasks (env, task and seed): a row over
    fewer or other tasks ranks by a suite score of other episodes. Ceiling and counterfactual
    rows count too: they are read beside the others.
    """
    if len(board.entries) < 2:
        return None
    keys = {e.name: {pair_key(r) for rs in e.records.values() for r in rs}
            for e in board.entries}
    first = board.entries[0].name
    others = [f"{name} ({len(k - keys[first])} not in {first}'s, {len(keys[first] - k)} of "
              f"its missing)" for name, k in keys.items() if k != keys[first]]
    if not others:
        return None
    return (f"rows cover different tasks: against {first}'s {len(keys[first])} episodes, "
            + "; ".join(others))


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


# ---------------------------------------------------------------------------------- PNG
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


# --------------------------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1b1f24;
background:#fff}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.2em;margin-top:1.6em}
p.note{color:#444;max-width:70em;font-size:.9em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #c9d1d9;padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#1f3b5b;color:#fff;cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
tbody tr:nth-child(even){background:#f3f6f9}
td.num{text-align:right;white-space:nowrap}td.name{white-space:nowrap}
.wrap{overflow-x:auto}
.ci{color:#57606a;font-size:.85em}
tr.reported td{font-style:italic}tr.ceiling td{color:#555;background:#f4f4f4}
input,select{font-size:1em;padding:.25em .4em;margin-right:.6em}
.episode{border:1px solid #c9d1d9;border-radius:6px;padding:.5em .8em;margin:.7em 0}
.episode h3{font-size:1em;margin:.1em 0 .4em}
.status{display:inline-block;padding:0 .45em;border-radius:4px;background:#ddf4ff;font-size:.85em}
.status-completed{background:#dafbe1}
.turn{margin:.25em 0 .25em 1em}.label{font-weight:600;color:#1f3b5b}
pre{white-space:pre-wrap;word-break:break-word;margin:.15em 0;font-size:.88em;background:#f6f8fa;
padding:.25em .4em;border-radius:4px}
img.shot{max-width:420px;border:1px solid #c9d1d9}
"""

#: The functions every page script uses: ``hashParams()``, the address's ``#key=value&...``
#: parameters as an object; ``showItems(items, keep, q, count, noun)``, which hides the items
#: that ``keep`` refuses or whose text lacks ``q`` and writes "N of M <noun>" into ``count``.
_PAGE_JS = """
function hashParams() {
  "use strict";
  var params = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (part) {
    var kv = part.split("=");
    if (kv[0]) { params[decodeURIComponent(kv[0])] = decodeURIComponent(kv.slice(1).join("=")); }
  });
  return params;
}
function showItems(items, keep, q, count, noun) {
  "use strict";
  var shown = 0;
  items.forEach(function (el) {
    var hide = !keep(el) || (q !== "" && el.textContent.toLowerCase().indexOf(q) < 0);
    el.hidden = hide;
    if (!hide) { shown += 1; }
  });
  count.textContent = shown + " of " + items.length + " " + noun;
}
"""

_BOARD_JS = _PAGE_JS + """
(function () {
  "use strict";
  function value(row, col) {
    var cell = row.cells[col];
    if (!cell) { return null; }
    var v = cell.getAttribute("data-value");
    return v === null ? cell.textContent.trim() : v;
  }
  function sortTable(table, col, dir) {
    var body = table.tBodies[0];
    var heads = table.tHead.rows[0].cells;
    var numeric = heads[col].getAttribute("data-type") === "num";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a, col), y = value(b, col);
      if (numeric) {
        x = (x === null || x === "") ? NaN : parseFloat(x);
        y = (y === null || y === "") ? NaN : parseFloat(y);
        if (isNaN(x) && isNaN(y)) { return 0; }
        if (isNaN(x)) { return 1; }
        if (isNaN(y)) { return -1; }
        return dir === "asc" ? x - y : y - x;
      }
      x = String(x).toLowerCase(); y = String(y).toLowerCase();
      return dir === "asc" ? x.localeCompare(y) : y.localeCompare(x);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < heads.length; i++) {
      var state = dir === "asc" ? "ascending" : "descending";
      heads[i].setAttribute("aria-sort", i === col ? state : "none");
    }
    table.setAttribute("data-sorted-by", col + ":" + dir);
  }
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.sortable"));
  tables.forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var now = table.getAttribute("data-sorted-by") || "";
        var numeric = th.getAttribute("data-type") === "num";
        var dir = numeric ? "desc" : "asc";
        if (now === col + ":desc") { dir = "asc"; } else if (now === col + ":asc") { dir = "desc"; }
        sortTable(table, col, dir);
      });
    });
  });
  var filter = document.getElementById("filter");
  var count = document.getElementById("shown");
  function applyFilter() {
    var rows = [];
    tables.forEach(function (table) {
      rows = rows.concat(Array.prototype.slice.call(table.tBodies[0].rows));
    });
    showItems(rows, function () { return true; }, filter.value.trim().toLowerCase(), count,
              "rows");
  }
  filter.addEventListener("input", applyFilter);
  var params = hashParams();
  if (params.sort !== undefined && tables.length) {
    var col = parseInt(params.sort, 10);
    if (!isNaN(col) && col >= 0 && col < tables[0].tHead.rows[0].cells.length) {
      sortTable(tables[0], col, params.dir === "asc" ? "asc" : "desc");
    }
  }
  if (params.q !== undefined) { filter.value = params.q; }
  applyFilter();
  document.body.setAttribute("data-ready", "1");
})();
"""

_VIEWER_JS = _PAGE_JS + """
(function () {
  "use strict";
  var status = document.getElementById("status");
  var text = document.getElementById("filter");
  var count = document.getElementById("shown");
  var episodes = Array.prototype.slice.call(document.querySelectorAll("section.episode"));
  function apply() {
    var s = status.value;
    showItems(episodes, function (ep) { return s === "" || ep.getAttribute("data-status") === s; },
              text.value.trim().toLowerCase(), count, "episodes");
  }
  status.addEventListener("change", apply);
  text.addEventListener("input", apply);
  var params = hashParams();
  if (params.status !== undefined) { status.value = params.status; }
  if (params.q !== undefined) { text.value = params.q; }
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, script: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{script}</script>\n</body></html>\n"
    )


def _or_dash(value: object) -> object:
    return "-" if value is None else value


def _short(value: object) -> object:
    """A float to 3 decimals (other values as they are)."""
    return f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else value


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x"


def _long_text(text: object) -> str:
    """Escape a text; a long one shows a preview and the rest behind a "show more" toggle."""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, indent=1, default=str)
    if len(text) <= PREVIEW_CHARS:
        return f"<pre>{_e(text)}</pre>"
    kept = text[:MAX_TEXT_CHARS]
    cut = len(text) - len(kept)
    more = f"\n[... {cut} more characters in episodes.jsonl]" if cut else ""
    return (
        f"<pre>{_e(text[:PREVIEW_CHARS])} ...</pre><details><summary>show more "
        f"({len(text)} characters)</summary><pre>{_e(kept)}{_e(more)}</pre></details>"
    )


def _images(value: Any, base: Path, page_dir: Path) -> str:
    """<img> tags for image data URIs, or relative image paths of the results folder."""
    items = value if isinstance(value, list) else [value]
    tags = []
    for item in items:
        if not isinstance(item, str):
            continue
        if item.startswith(_IMAGE_PREFIXES):
            src = item
        elif item.lower().endswith(_IMAGE_SUFFIXES) and "://" not in item:
            target = (base / item) if not os.path.isabs(item) else Path(item)
            src = quote(os.path.relpath(target, page_dir).replace(os.sep, "/"))
        else:
            continue
        tags.append(f'<img class="shot" alt="image" src="{_e(src)}">')
    return "".join(tags)


def _turn_html(turn: Mapping[str, Any], base: Path, page_dir: Path) -> str:
    parts = []
    if "role" in turn:
        parts.append(f'<span class="label">{_e(turn["role"])}</span>')
        parts.append(_long_text(turn.get("output", "")))
    if "action" in turn:
        parts.append('<span class="label">action</span>' + _long_text(turn["action"]))
    if "observation" in turn:
        parts.append('<span class="label">observation</span>' + _long_text(turn["observation"]))
    for key in ("image", "images"):
        if key in turn:
            parts.append(_images(turn[key], base, page_dir))
    known = {"role", "output", "action", "observation", "image", "images", "prompt"}
    for key, value in turn.items():
        if key not in known:
            parts.append(f'<span class="label">{_e(key)}</span>' + _long_text(value))
    if "prompt" in turn:
        parts.append("<details><summary>prompt</summary>" + _long_text(turn["prompt"]) +
                     "</details>")
    return '<div class="turn">' + "".join(parts) + "</div>"


def _episode_info(
    record: Mapping[str, Any], base: Path, page_dir: Path, *, task: bool = True
) -> str:
    """An episode's heading and facts: task (unless ``task=False``), status, reward, answers."""
    status = str(record.get("status", "?"))
    metrics = record.get("metrics") or {}
    shown_metrics = ", ".join(f"{_e(k)} {_e(_short(v))}" for k, v in sorted(metrics.items()))
    head = (f'<h3>{_e(record.get("task_id"))} <span class="status status-{_e(_slug(status))}">'
            f'{_e(status)}</span> reward {_e(_short(record.get("reward")))} · seed '
            f'{_e(record.get("seed"))} · {_e(record.get("steps"))} steps</h3>')
    info = [
        f'<div><span class="label">task</span>{_long_text(record.get("task", ""))}</div>',
    ] if task else []
    info += [
        f'<div><span class="label">prediction</span> {_e(_or_dash(record.get("prediction")))} · '
        f'<span class="label">gold</span> {_e(_or_dash(record.get("gold_answer")))} · '
        f'<span class="label">metrics</span> {shown_metrics or "-"}</div>',
    ]
    if record.get("reason"):
        info.append(f'<div><span class="label">reason</span> {_e(record["reason"])}</div>')
    info += _attribution_note(record)
    for key in ("image", "images"):
        if key in record:
            info.append(_images(record[key], base, page_dir))
    return head + "".join(info)


def _episode_html(record: Mapping[str, Any], base: Path, page_dir: Path) -> str:
    status = str(record.get("status", "?"))
    turns = "".join(_turn_html(t, base, page_dir) for t in record.get("turns") or []
                    if isinstance(t, Mapping))
    return (f'<section class="episode" data-status="{_e(status)}">'
            f"{_episode_info(record, base, page_dir)}"
            f"<details open><summary>{len(record.get('turns') or [])} turns</summary>{turns}"
            "</details></section>")


def render_viewer(entry: Entry, env_id: str, page: Path, board_page: Path) -> str:
    """Render the trajectory viewer of one run on one env (every episode, filterable)."""
    cell = entry.cells[env_id]
    records = entry.records.get(env_id, [])
    page_dir = page.parent
    back = quote(os.path.relpath(board_page, page_dir).replace(os.sep, "/"))
    stats = cell.metrics or {cell.metric: {"mean": cell.mean, "se": cell.se, "ci95": cell.ci95}}
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="num">{_num(s.get("mean"))}</td>'
        f'<td class="num">{_num(s.get("se"))}</td><td class="num">{_ci(s.get("ci95"))}</td></tr>'
        for name, s in stats.items()
    )
    statuses = sorted({str(r.get("status")) for r in records})
    options = "".join(f'<option value="{_e(s)}">{_e(s)}</option>' for s in statuses)
    counts = ", ".join(f"{_e(s)} {c}" for s, c in cell.statuses.items() if c) or "-"
    homes = {r["key"]: d.path for d in entry.dirs for r in d.records}
    episodes = "".join(_episode_html(r, homes.get(r["key"], Path(".")), page_dir)
                       for r in records)
    body = (
        f'<p><a href="{_e(back)}">&larr; leaderboard</a></p>'
        f"<h1>{_e(entry.name)} on {_e(short_env(env_id))}</h1>"
        f'<p class="note">agent {_e(entry.agent)} · models {_e(entry.models)} · '
        f"{cell.episodes} episodes · statuses: {counts}</p>"
        "<table><thead><tr><th>metric</th><th>mean</th><th>se</th><th>95% interval</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
        '<p><label>status <select id="status"><option value="">all</option>'
        f'{options}</select></label><input id="filter" type="search" '
        'placeholder="filter episodes" aria-label="filter episodes"> <span id="shown"></span></p>'
        f"{episodes or '<p>no episode records (summary only)</p>'}"
    )
    return _page(f"{entry.name} on {short_env(env_id)}", body, _VIEWER_JS)


def render_html(board: Board, out: Path, *, trajectories: bool = True) -> list[Path]:
    """Write the leaderboard page ``out`` and a viewer page per run and env beside it.

    Viewer pages go to ``<out stem>-trajectories/<run>/<env>.html``. Returns every file
    written, the leaderboard first.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.parent / f"{out.stem}-trajectories"
    written: list[Path] = []
    pages: dict[str, dict[str, Path]] = {}  # run → env id → its trajectory page
    for entry, slug in zip(board.entries, _run_slugs(board.entries), strict=True):
        pages[entry.name] = _write_viewers(board, entry, folder / slug, out) if trajectories else {}
        written += pages[entry.name].values()
    rows = [_measured_row(board, row, pages, out) for row in board.rows]
    heads = _measured_heads(board)
    rheads, rrows = _reported_table(board.reported)
    warnings = "".join(f"<li>{_e(w)}</li>" for w in board.warnings)
    body = (
        "<h1>lumos-gym leaderboard</h1>"
        + (f"<p>Suite: <code>{_e(board.suite)}</code></p>" if board.suite else "")
        + '<p class="note">Each cell: the env\'s primary metric, mean and its 95% bootstrap '
        "interval; click a value for the episodes. Runs are ranked by suite score ("
        + _e(SCORE_RULE) + "); a run covering fewer envs ranks after those covering more. "
        + _e(CEILING_NOTE) + " Click a header to sort.</p>"
        '<p><input id="filter" type="search" placeholder="filter rows" aria-label="filter rows">'
        ' <span id="shown"></span></p>'
        f'<div class="wrap"><table id="measured" class="sortable"><thead><tr>{"".join(heads)}'
        f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        + markdown_section_html(seed_rows_markdown(board))
        + markdown_section_html(infra_markdown(board))
        + paired_html(board)
        + markdown_section_html(_claims_md(board))
        + markdown_section_html(_seeds_md(board))
        + _attribution_html(board, out, links=trajectories)
        + (("<h2>Reported (Lumos paper)</h2>"
            f'<p class="note">Never ranked. {_e(board.reported.note)} '
            f"Values: the paper's percentages / {board.reported.scale:g}; ≈: approximate in "
            f"the paper. Source: {_e(board.reported.source)}</p>"
            f'<div class="wrap"><table id="reported" class="sortable"><thead><tr>'
            f'{"".join(rheads)}</tr></thead><tbody>{"".join(rrows)}</tbody></table></div>')
           if board.paper else "")
        + markdown_section_html(cards_markdown([e for e in board.entries if not e.ceiling]))
        + (f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else "")
    )
    out.write_text(_page("lumos-gym leaderboard", body, _BOARD_JS), encoding="utf-8")
    return [out, *written]


def markdown_section_html(lines: Sequence[str]) -> str:
    """The HTML of a section this module wrote as Markdown lines.

    Headings, paragraphs, ``- `` list items and pipe tables (the separator line dropped);
    the text is escaped, Markdown's escapes and backticks removed.
    """
    def text(value: str) -> str:
        return _e(value.replace("\\*", "*").replace("\\|", "|").replace("`", ""))

    parts: list[str] = []
    table: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if table:
            head = "".join(f"<th>{text(c)}</th>" for c in table[0])
            body = "".join("<tr>" + "".join(f"<td>{text(c)}</td>" for c in row) + "</tr>"
                           for row in table[1:])
            parts.append(f'<div class="wrap"><table class="sortable"><thead><tr>{head}</tr>'
                         f"</thead><tbody>{body}</tbody></table></div>")
            table.clear()
        if items:
            parts.append("<ul>" + "".join(f"<li>{text(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in lines:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(set(c) <= set("-:") for c in cells):
                table.append(cells)
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 4)
            parts.append(f"<h{level}>{text(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            parts.append(f'<p class="note">{text(line)}</p>')
    flush()
    return "".join(parts)


def _run_slugs(entries: Sequence[Entry]) -> list[str]:
    """Return each run's folder name for its viewer pages (its slug, made unique)."""
    slugs: list[str] = []
    for entry in entries:
        slug = _slug(entry.name)
        while slug in slugs:
            slug += "_"
        slugs.append(slug)
    return slugs


def _write_viewers(board: Board, entry: Entry, folder: Path, out: Path) -> dict[str, Path]:
    """Write a viewer page into ``folder`` per env of the board the run has; env id → page."""
    pages = {}
    for env_id in board.envs:
        if env_id not in entry.cells:
            continue
        page = folder / f"{_slug(short_env(env_id))}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render_viewer(entry, env_id, page, out), encoding="utf-8")
        pages[env_id] = page
    return pages


def _measured_heads(board: Board) -> list[str]:
    """Return the header cells of the measured table: the run's columns, then one per env."""
    heads = ['<th data-type="num">rank</th>', '<th data-type="text">run</th>',
             '<th data-type="text">agent</th>', '<th data-type="text">models</th>',
             '<th data-type="num">suite score</th>', '<th data-type="num">envs</th>']
    for env_id in board.envs:
        heads.append(f'<th data-type="num" title="{_e(env_id)}">{_e(short_env(env_id))}<br>'
                     f'<span class="ci">{_e(board.metric_of(env_id))}</span></th>')
    heads.append('<th data-type="num">episodes</th>')
    return heads


def _measured_row(
    board: Board, entry: Shown, pages: Mapping[str, Mapping[str, Path]], out: Path
) -> str:
    """Return one row of the measured table, each env's value linking to its page.

    ``pages``: run → env id → its trajectory page. A seed group's value links to each seed's.
    """
    provenance = entry.run
    git = provenance.get("git") or {}
    title = (f"lumos-gym {provenance.get('lumos_gym')}, commit {git.get('commit') or '-'}"
             f"{' (dirty)' if git.get('dirty') else ''}, folders: "
             + ", ".join(str(d.path) for d in entry.dirs))
    if isinstance(entry, SeedRow):
        title = f"seeds {entry.seeds}: " + ", ".join(m.name for m in entry.members) + "; " + title
    score = entry.score
    cells = [
        f'<td class="num" data-value="{entry.rank or len(board.rows) + 1}">'
        f"{entry.rank_text}</td>",
        f'<td class="name" title="{_e(title)}">{_e(entry.label)}</td>',
        f'<td class="name">{_e(entry.agent)}</td>',
        f"<td>{_e(entry.models)}</td>",
        f'<td class="num" data-value="{float(score.get("mean", 0.0))!r}">'
        f'{_num(score.get("mean"))} <span class="ci">{_ci(score.get("ci95"))}</span></td>',
        f'<td class="num" data-value="{entry.covered}">{entry.covered}/{len(board.envs)}</td>',
    ]
    for env_id in board.envs:
        cell = entry.cells.get(env_id)
        if cell is None:
            cells.append('<td class="num" data-value="">-</td>')
            continue
        if isinstance(entry, SeedRow):
            cells.append(f'<td class="num" data-value="{cell.mean!r}">{_num(cell.mean)} '
                         f'<span class="ci">{_ci(cell.ci95)}'
                         f"{_seed_links(entry, env_id, pages, out)}</span></td>")
            continue
        if env_id not in pages.get(entry.name, {}):  # rendered without trajectory pages
            cells.append(f'<td class="num" data-value="{cell.mean!r}">{_num(cell.mean)} '
                         f'<span class="ci">{_ci(cell.ci95)}</span></td>')
            continue
        href = quote(os.path.relpath(pages[entry.name][env_id], out.parent)
                     .replace(os.sep, "/"))
        cells.append(
            f'<td class="num" data-value="{cell.mean!r}"><a href="{_e(href)}" '
            f'title="{_e(cell.episodes)} episodes: trajectories">{_num(cell.mean)}</a> '
            f'<span class="ci">{_ci(cell.ci95)}</span></td>'
        )
    cells.append(f'<td class="num" data-value="{entry.episodes}">{entry.episodes}</td>')
    kind = "measured ceiling" if entry.ceiling else "measured"
    return f'<tr class="{kind}" data-run="{_e(entry.name)}">{"".join(cells)}</tr>'


def _seed_links(
    row: SeedRow, env_id: str, pages: Mapping[str, Mapping[str, Path]], out: Path
) -> str:
    """`` seeds 0 1 2``, each seed linking to its run's trajectory page ("" without pages)."""
    links = []
    for member in row.members:
        page = pages.get(member.name, {}).get(env_id)
        if page is not None:
            href = quote(os.path.relpath(page, out.parent).replace(os.sep, "/"))
            links.append(f'<a href="{_e(href)}" title="{_e(member.name)}: trajectories">'
                         f"{_e(seed_text(member.run))}</a>")
    return f"<br>seeds {' '.join(links)}" if links else ""


def _reported_table(reported: Reported) -> tuple[list[str], list[str]]:
    """Return the header cells and the rows of the reported (paper) table."""
    names = [d["name"] for d in reported.datasets]
    heads = ['<th data-type="text">agent (reported)</th>']
    for dataset in reported.datasets:
        match = reported.matches.get(dataset["name"])
        note = f" = {short_env(match)}" if match else ""
        heads.append(f'<th data-type="num">{_e(dataset["name"])}{_e(note)}<br><span class="ci">'
                     f'{_e(dataset["metric"])}</span></th>')
    rows = []
    for row in reported.rows:
        cells = [f"<td>{_e(row['agent'])}{' (cited)' if row.get('cited') else ''}</td>"]
        for name in names:
            value = (row.get("values") or {}).get(name)
            shown = _reported_value(reported, row, name)
            data = "" if value is None else repr(float(value) / reported.scale)
            cells.append(f'<td class="num" data-value="{data}">{_e(shown)}</td>')
        rows.append(f'<tr class="reported">{"".join(cells)}</tr>')
    return heads, rows


# ---------------------------------------------------------------------- paired differences
#: The ``--reference`` value naming the top-ranked run that is not a ceiling row.
TOP = "top"
#: The columns a CSV gains when the board has a reference row.
PAIRED_CSV_COLUMNS = ["reference", "test", "p_value", "excludes_zero", "p_holm", "significant"]
#: How the paired differences are made, written under their tables.
PAIRED_NOTE = (
    "Paired by env, task and seed over the episodes both runs have; the interval is a paired "
    "bootstrap of the per-episode differences (2,000 resamples, seed 0; for the suite score, "
    "resampled within each env and averaged over envs); p is the paired test's: exact McNemar "
    "for 0/1 metrics, a sign-flip permutation test otherwise (and for the suite score)."
)
#: How a seed group is compared, written under the paired table of a board that groups seeds.
GROUP_PAIRED_NOTE = (
    "A comparison with a row of several training seeds (the reference's included) resamples "
    "seeds and tasks: each of 2,000 replicates draws the seeds with replacement (seed pairs "
    "when both rows have the same seeds, each row's seeds apart otherwise; a single-seed row "
    "is its one seed) and the tasks with replacement, and takes the difference of the mean "
    "over the drawn seeds of each seed's mean over the drawn tasks (for the suite score the "
    "seeds are drawn once for every env, the tasks within each env); its p is the sign-flip "
    "test of the per-task differences of the means over the seeds, and its count is of tasks."
)


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


def find_entry(board: Board, name: str) -> Entry:
    """Return the board's row called ``name``: a run name, a results folder, or ``top``.

    ``top`` is the top-ranked row that is not a ceiling (unless a run is called ``top``).

    Raises:
        LeaderboardError: no row matches; the message lists the runs.
    """
    for entry in board.entries:
        if entry.name == name:
            return entry
    if name == TOP:
        for entry in board.entries:
            if not entry.ceiling:
                return entry
    wanted = Path(name).resolve()
    for entry in board.entries:
        if any(d.path.resolve() == wanted or wanted in d.path.resolve().parents
               for d in entry.dirs):
            return entry
    known = ", ".join(e.name for e in board.entries)
    raise LeaderboardError(f"no run {name!r} on the board; runs: {known} (or a results folder, "
                           f"or {TOP})")


def find_row(board: Board, name: str) -> Shown:
    """Return the row of the ranked table that ``name`` names (:func:`find_entry`).

    ``name`` may name a seed group's row, or one seed's run (or folder): that run's group.
    ``top`` is the top-ranked row that is not a ceiling (unless a row is called ``top``).

    Raises:
        LeaderboardError: no row matches; the message lists the runs.
    """
    for row in board.rows:
        if row.name == name:
            return row
    if name == TOP and not any(e.name == TOP for e in board.entries):
        for row in board.rows:
            if not row.ceiling:
                return row
    try:
        entry = find_entry(board, name)
    except LeaderboardError as e:
        if not board.groups:
            raise
        shown = ", ".join(g.name for g in board.groups)
        raise LeaderboardError(f"{e}; seed groups: {shown}") from None
    return next((g for g in board.groups if any(m is entry for m in g.members)), entry)


def entry_records(entry: Entry) -> list[dict[str, Any]]:
    """Return every episode record of a row (over the board's envs)."""
    return [r for records in entry.records.values() for r in records]


def compare_entries(a: Entry, b: Entry, envs: Iterable[str] | None = None) -> Comparison:
    """Compare two rows episode by episode (A minus B), on every metric of each env."""
    records_a, records_b = entry_records(a), entry_records(b)
    metrics = {}
    for env_id in sorted(set(a.records) | set(b.records)):
        task_type, primary = env_kind(env_id, a.records.get(env_id) or b.records[env_id])
        metrics[env_id] = metrics_for(task_type, primary)
    return compare_records(records_a, records_b, envs=envs, metrics=metrics)


def attach_reference(board: Board, name: str) -> Paired:
    """Compare every row of ``board`` with the row ``name`` and keep it in ``board.paired``.

    ``name`` may name one seed's run of a seed group: the group is then the reference.
    """
    reference = find_row(board, name)
    cache: dict[int, dict[str, SeedMatrix]] = {}
    comparisons = {row.name: compare_rows(row, reference, board.envs, cache=cache)
                   for row in board.rows if row is not reference}
    board.paired = Paired(reference, comparisons)
    return board.paired


def _matrices(
    row: Shown, envs: Iterable[str] | None, cache: dict[int, dict[str, SeedMatrix]]
) -> dict[str, SeedMatrix]:
    """A row's seeds × tasks values per env: a group's own, or a run's as one seed's."""
    wanted = set(envs) if envs is not None else None
    if isinstance(row, SeedRow):
        return {e: m for e, m in row.matrices.items() if wanted is None or e in wanted}
    if id(row) not in cache:
        runs = {tuple(training_seeds(row.run)): entry_records(row)}
        cache[id(row)] = seed_matrices(runs, envs=wanted)
    return cache[id(row)]


def compare_rows(
    a: Shown, b: Shown, envs: Iterable[str] | None = None, *,
    cache: dict[int, dict[str, SeedMatrix]] | None = None,
) -> Comparison:
    """Compare two rows of the ranked table (A minus B) on each env's primary metric.

    Two runs pair episode by episode (:func:`~lumos_gym.leaderboard.stats.compare_records`);
    a seed group on either side makes it a comparison over seeds and tasks
    (:func:`~lumos_gym.leaderboard.stats.compare_seed_matrices`, a run being one seed's).
    ``cache`` keeps the runs' matrices between calls over the same ``envs``.
    """
    if isinstance(a, Entry) and isinstance(b, Entry):
        return compare_records(entry_records(a), entry_records(b), envs=envs)
    envs = list(envs) if envs is not None else None
    cache = {} if cache is None else cache
    return compare_seed_matrices(_matrices(a, envs, cache), _matrices(b, envs, cache))


def _p_text(p: float | None) -> str:
    if p is None:
        return "-"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _tested_text(diff: PairedDiff) -> str:
    """``p=0.004``, with the Holm-adjusted p-value after it when it was adjusted."""
    text = _p_text(diff.p_value)
    adjusted = _p_text(diff.p_holm) if diff.p_holm is not None else text
    return text if adjusted == text else f"{text} (Holm {adjusted[1:].lstrip('=')})"


def diff_text(diff: PairedDiff | None, *, mark: str = " *") -> str:
    """Return ``+0.125 [0.040, 0.210] p=0.004 (Holm 0.020) *``.

    ``mark`` when the difference is significant: its interval excludes 0 and its test's p,
    Holm-adjusted when it was (:attr:`~lumos_gym.leaderboard.stats.PairedDiff.significant`).
    """
    if diff is None or diff.n == 0:
        return "-"
    return (f"{diff.diff:+.3f} {_ci(diff.ci95)} {_tested_text(diff)}"
            + (mark if diff.significant else ""))


def _paired_cells(board: Board, comparison: Comparison) -> list[PairedDiff | None]:
    """The suite difference, then each env column's."""
    return [comparison.suite, *[comparison.envs.get(e) for e in board.envs]]


def paired_markdown(board: Board) -> list[str]:
    """Return the Markdown lines of the paired differences to the reference (none without)."""
    paired = board.paired
    if paired is None:
        return []
    name = paired.reference.name
    headers = ["rank", "run", "agent", f"suite score - {name}"]
    headers += [f"{short_env(e)} - {name}" for e in board.envs]
    headers.append("paired tasks" if board.groups else "paired episodes")
    rows = []
    for entry in board.rows:
        comparison = paired.comparisons.get(entry.name)
        if comparison is None:
            continue
        cells = [diff_text(d, mark=" \\*") for d in _paired_cells(board, comparison)]
        rows.append([entry.rank_text, entry.name, entry.agent, *cells, comparison.suite.n])
    note = _paired_note(board)
    return ["", f"## Paired differences to `{name}`", "",
            f"Each cell: the row's primary metric minus `{name}`'s, `difference [95% interval] "
            f"p`; \\* marks a difference whose interval excludes 0 and whose test gives p < 0.05 "
            f"after a Holm correction over the row's envs (the adjusted p in brackets). {note}",
            "",
            *markdown_table(headers, rows, align="r")]


def _paired_note(board: Board) -> str:
    """How the paired differences were made: run by run, over seeds and tasks, or both."""
    if board.paired is not None and isinstance(board.paired.reference, SeedRow):
        return GROUP_PAIRED_NOTE
    if board.groups:
        return f"{PAIRED_NOTE} {GROUP_PAIRED_NOTE}"
    return PAIRED_NOTE


def _seeds_md(board: Board) -> list[str]:
    """Each seed group's seeds: their runs' scores, and their spread."""
    return seeds_markdown(board.entries, board.envs, short_env)


def _claims_md(board: Board) -> list[str]:
    """The paper's claims measured against the reference row (with ``--paper`` alone).

    With seeds grouped, a seed group is measured as one row against the reference (its
    group). Ungrouped (``--no-seed-groups``), a run of claims (a) and (b) trained with another
    seed than the reference's is left out, as its seeds do not match; a line under the claims
    names it.
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
    lines = claims_markdown(paired.reference.name, paired.reference.agent, comparisons,
                            agents, board.reported.rows, short_env, diff_text, trained,
                            can_act=_can_act(board))
    if lines and unmatched:
        lines += ["", f"Left out of the claims, trained with another seed than "
                  f"`{paired.reference.name}`'s: {', '.join(unmatched)} (grouped by seed, the "
                  "default view, each agent's seeds are compared as one row)."]
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


def paired_csv_rows(board: Board) -> list[list[Any]]:
    """Return the CSV rows of the paired differences (kind ``difference``; none without)."""
    paired = board.paired
    if paired is None:
        return []
    rows = []
    for entry in board.rows:
        comparison = paired.comparisons.get(entry.name)
        if comparison is None:
            continue
        rank = "" if entry.ceiling else entry.rank
        columns = [("suite score", f"mean of {comparison.suite.envs} envs")]
        columns += [(e, board.metric_of(e)) for e in board.envs]
        for (env, metric), d in zip(columns, _paired_cells(board, comparison), strict=True):
            if d is None or d.n == 0:
                continue
            ci = d.ci95 or [None, None]
            rows.append(["difference", rank, entry.name, entry.agent, entry.models, env, metric,
                         d.diff, "", ci[0], ci[1], d.n, paired.reference.name, d.test,
                         d.p_value, d.excludes_zero, d.p_holm, d.significant])
    return rows


def paired_html(board: Board) -> str:
    """Return the HTML section of the paired differences to the reference ("" without)."""
    paired = board.paired
    if paired is None:
        return ""
    name = paired.reference.name
    heads = ['<th data-type="num">rank</th>', '<th data-type="text">run</th>',
             '<th data-type="text">agent</th>', '<th data-type="num">suite score</th>']
    heads += [f'<th data-type="num" title="{_e(e)}">{_e(short_env(e))}</th>' for e in board.envs]
    heads.append(f'<th data-type="num">paired {"tasks" if board.groups else "episodes"}</th>')
    rows = []
    for entry in board.rows:
        comparison = paired.comparisons.get(entry.name)
        if comparison is None:
            continue
        cells = [f'<td class="num" data-value="{entry.rank or len(board.rows) + 1}">'
                 f"{entry.rank_text}</td>", f'<td class="name">{_e(entry.name)}</td>',
                 f'<td class="name">{_e(entry.agent)}</td>']
        for d in _paired_cells(board, comparison):
            if d is None or d.n == 0:
                cells.append('<td class="num" data-value="">-</td>')
                continue
            shown = f"{d.diff:+.3f}" + (" *" if d.significant else "")
            if d.significant:
                shown = f"<strong>{shown}</strong>"
            cells.append(
                f'<td class="num" data-value="{d.diff!r}" title="{_e(d.test)}, {d.n} pairs">'
                f'{shown}<br><span class="ci">{_ci(d.ci95)} {_e(_tested_text(d))}</span></td>'
            )
        cells.append(f'<td class="num" data-value="{comparison.suite.n}">'
                     f"{comparison.suite.n}</td>")
        rows.append(f'<tr data-run="{_e(entry.name)}">{"".join(cells)}</tr>')
    return (
        f"<h2>Paired differences to {_e(name)}</h2>"
        f'<p class="note">Each cell: the row\'s primary metric minus {_e(name)}\'s, with its '
        "95% interval and p-value (the test and the pairs: hover); bold and * mark a "
        "difference whose interval excludes 0 and whose test gives p < 0.05 after a Holm "
        "correction over the row's envs. "
        f"{_e(_paired_note(board))}</p>"
        f'<div class="wrap"><table id="paired" class="sortable"><thead><tr>{"".join(heads)}'
        f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


#: The columns of ``lumos-gym leaderboard --compare A B --format csv``.
COMPARE_COLUMNS = ["env", "level", "metric", "paired", "mean_a", "mean_b", "diff", "ci_low",
                   "ci_high", "excludes_zero", "test", "p_value", "discordant_a", "discordant_b",
                   "p_holm", "significant"]


def _comparison_rows(comparison: Comparison) -> list[tuple[str, str, str, PairedDiff]]:
    """``(env, level, metric, difference)`` rows: the suite, then each env, level and metric."""
    rows = [("suite score", "", f"mean of {comparison.suite.envs} envs", comparison.suite)]
    for env_id, diff in comparison.envs.items():
        metrics = comparison.metrics.get(env_id) or {}
        primary = next(iter(metrics), "reward")
        rows.append((env_id, "", primary, diff))
        for level, d in comparison.groups.get(env_id, {}).items():
            rows.append((env_id, level, primary, d))
        for metric, d in list(metrics.items())[1:]:
            rows.append((env_id, "", metric, d))
    return rows


def render_comparison(board: Board, a: str, b: str, fmt: str = "md") -> str:
    """Render the full paired comparison of two rows of ``board`` (A minus B) as md or csv.

    One row for the suite score, then per env its primary metric, each of its levels (or task
    families) and each of its other metrics, with the paired episodes, both means, the
    difference, its paired bootstrap interval and the paired test.

    Raises:
        LeaderboardError: a run that is not on the board, or a format other than md and csv.
    """
    if fmt not in ("md", "csv"):
        raise LeaderboardError(f"--compare writes md or csv, not {fmt}")
    first, second = find_entry(board, a), find_entry(board, b)
    comparison = compare_entries(first, second, board.envs)
    rows = _comparison_rows(comparison)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COMPARE_COLUMNS)
        for env, level, metric, d in rows:
            ci = d.ci95 or [None, None]
            odd = list(d.discordant) if d.discordant is not None else ["", ""]
            writer.writerow([env, level, metric, d.n, d.mean_a, d.mean_b, d.diff, ci[0], ci[1],
                             d.excludes_zero, d.test, d.p_value, *odd, d.p_holm, d.significant])
        return out.getvalue()
    headers = ["env", "level", "metric", "paired", first.name, second.name,
               f"{first.name} - {second.name}", "95% interval", "test", "p"]
    cells = [
        [short_env(env), level or "-", metric, d.n, _num(d.mean_a), _num(d.mean_b),
         f"{d.diff:+.3f}" + (" \\*" if d.significant else "") if d.n else "-", _ci(d.ci95),
         d.test + (f" ({d.discordant[0]} vs {d.discordant[1]})" if d.discordant else ""),
         _tested_text(d)]
        for env, level, metric, d in rows
    ]
    lines = [f"# {first.name} - {second.name}", "",
             f"A: `{first.name}` ({first.agent}; {first.models}). "
             f"B: `{second.name}` ({second.agent}; {second.models}). "
             "\\* marks a difference whose interval excludes 0 and whose test gives p < 0.05 "
             "(for an env's primary metric, Holm-adjusted over the envs); McNemar's counts are "
             f"the pairs only A solved vs only B solved. {PAIRED_NOTE}", ""]
    lines += markdown_table(headers, cells)
    lines += _unpaired_lines(comparison, first.name, second.name)
    lines += _agreement_lines(comparison)
    return "\n".join(lines) + "\n"


def _agreement_lines(comparison: Comparison) -> list[str]:
    """The section on identical module outputs and episodes (none without paired episodes)."""
    by_env = agreement(comparison.pairing)
    if not by_env:
        return []
    headers, rows = agreement_rows(by_env, short_env)
    return ["", "## The same outputs", "", AGREEMENT_NOTE, "", *markdown_table(headers, rows)]


def _unpaired_lines(comparison: Comparison, a: str, b: str) -> list[str]:
    """Lines naming the episodes left out of the comparison (none when every one paired)."""
    pairing = comparison.pairing
    notes = []
    for name, counts in ((a, pairing.only_a), (b, pairing.only_b)):
        if counts:
            shown = ", ".join(f"{short_env(e)} {n}" for e, n in sorted(counts.items()))
            notes.append(f"Episodes only `{name}` has (left out): {shown}.")
    if pairing.mismatched:
        notes.append(f"{len(pairing.mismatched)} episode(s) show different task texts under "
                     f"one id (left out), e.g. {pairing.mismatched[0]}.")
    return ["", *notes] if notes else []


# ------------------------------------------------------------------------ module attribution
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


def _attribution_html(board: Board, out: Path, *, links: bool = True) -> str:
    """The HTML section of module attribution (empty without counterfactual runs).

    Each env name links to the run's trajectory page there, filtered to its failed episodes'
    attributions (``#q=attributed``).
    """
    if not board.attributions:
        return ""
    slugs = dict(zip((e.name for e in board.entries), _run_slugs(board.entries), strict=True))
    folder = f"{out.stem}-trajectories"
    parts = ["<h2>Module attribution</h2>", f'<p class="note">{_e(ATTRIBUTION_NOTE)}</p>']
    heads = "".join(f"<th>{_e(h)}</th>" for h in TABLE_HEADERS)
    for attribution in board.attributions:
        compared = ", ".join(f"{k}: {v}" for k, v in attribution.counterfactuals.items())
        rows = []
        for env_id, row in zip(attribution.envs, table_rows(attribution), strict=True):
            name = _e(row[0])
            if env_id != "all" and links:
                page = f"{folder}/{slugs[attribution.run]}/{_slug(short_env(env_id))}.html"
                name = f'<a href="{_e(quote(page))}#q=attributed">{name}</a>'
            cells = "".join(f'<td class="num">{_e(c)}</td>' for c in row[1:])
            rows.append(f'<tr class="attribution"><td class="name">{name}</td>{cells}</tr>')
        parts.append(f"<h3>{_e(attribution.run)} ({_e(attribution.agent)})</h3>"
                     f'<p class="note">Counterfactual runs: {_e(compared)}.</p>'
                     f'<div class="wrap"><table class="attribution"><thead><tr>{heads}</tr>'
                     f'</thead><tbody>{"".join(rows)}</tbody></table></div>')
    return "".join(parts)


def _attribution_note(record: Mapping[str, Any]) -> list[str]:
    """The line a failed episode's viewer entry shows: the module it is attributed to."""
    if not record.get("attribution"):
        return []
    return [f'<div class="attribution"><span class="label">attributed to</span> '
            f'{_e(record["attribution"])}</div>']


# -------------------------------------------------------------------------------- output
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


# ------------------------------------------------------------------------------ validate
def _major(version: object) -> str:
    return str(version).split(".", 1)[0]


def validate_dir(
    path: str | Path, *, suite: str | None = None, allow_infra_errors: bool = False,
    allow_dirty: bool = False, allow_missing_round_limits: bool = False,
) -> list[str]:
    """Check one submitted results folder; return its problems (empty: valid).

    Checks: run.json, summary.json and episodes.jsonl present and readable (every line an
    episode record, none twice); the same lumos-gym major version as this one; a whole run
    (not a shard) with every planned episode present and none outside the plan, the plan's
    keys matching its checksum; ``suite`` (when given) is the run's suite, with the same file
    checksum as the shipped one; summary.json equal to the summary recomputed from the
    episodes (timing and provenance aside); the provenance fields present; and, unless
    ``allow_infra_errors``, no episode that ended in ``infra-error`` (a backend or env server
    failed: the episode has no score, and ``evaluate --resume`` plays it again); unless
    ``allow_dirty``, no scoring pass (:func:`scoring_passes`) run from a checkout whose code
    differed from its commit; unless ``allow_missing_round_limits``, ``run.json`` records the
    agent's ``round_limits`` (every run since lumos-gym records them; without them a board
    cannot tell under which subgoal limits its rows were played).
    """
    folder = Path(path)
    problems: list[str] = []
    run_path, summary_path = folder / "run.json", folder / "summary.json"
    run: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    for name in ("summary.json", "run.json"):
        if not (folder / name).is_file():
            problems.append(f"{folder / name}: missing")
    if episodes_path(folder) is None:
        problems.append(f"{folder / 'episodes.jsonl'}: missing")
    try:
        run = _read_json(run_path)
    except LeaderboardError as e:
        if run_path.is_file():
            problems.append(str(e))
    try:
        summary = _read_json(summary_path)
    except LeaderboardError as e:
        if summary_path.is_file():
            problems.append(str(e))
    records: list[dict[str, Any]] | None = None
    if run is not None and episodes_path(folder) is not None:
        read = read_results(folder)
        problems += read.problems
        records = list(read.records.values())
        if not allow_infra_errors:
            problems += _check_infra(folder, records)
    if run is not None:
        problems += _check_run(run, run_path, records, __version__, suite)
        if not allow_dirty:
            problems += _check_dirty(run, run_path)
        if not allow_missing_round_limits and "round_limits" not in run:
            problems.append(f"{run_path}: no round_limits (the subgoal limits the agent ran "
                            "under; made before lumos-gym recorded them): evaluate it again, "
                            "or pass --allow-missing-round-limits")
    if summary is not None:
        if summary.get("format") != SUMMARY_FORMAT:
            problems.append(f"{summary_path}: summary format {summary.get('format')!r}, not "
                            f"{SUMMARY_FORMAT} (made by an older lumos-gym)")
        elif records is not None:
            published = {k: v for k, v in comparable(summary).items() if k != "missing_episodes"}
            diffs = differences(published, comparable(summarize(records)),
                                names=("in summary", "recomputed"), rel_tol=1e-9)
            if diffs:
                more = f"; {len(diffs) - 4} more" if len(diffs) > 4 else ""
                shown = "; ".join(diffs[:4]) + more
                problems.append(f"{summary_path}: does not match its episodes: {shown}")
        if "provenance" not in summary:
            problems.append(f"{summary_path}: no provenance")
        elif run is not None:
            recorded = summary["provenance"] if isinstance(summary["provenance"], Mapping) else {}
            for key in ("lumos_gym", "fingerprint"):
                if recorded.get(key) != run.get(key):
                    problems.append(f"{summary_path}: its provenance's {key} differs from "
                                    "run.json's (files of different runs?)")
    return problems


def _check_infra(folder: Path, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One problem naming the episodes that ended in ``infra-error``, if any."""
    n = infra_errors(records)
    if not n:
        return []
    first = next(r for r in records if is_infra_error(r))
    return [f"{episodes_path(folder)}: {n} episode(s) ended in infra-error (the backend or env "
            f"server failed, not the agent; e.g. {first['key']}: {first.get('reason')}): play "
            f"them again with lumos-gym evaluate --resume --out {folder}, or pass "
            "--allow-infra-errors to accept them (they are left out of the means)"]


def _check_run(
    run: Mapping[str, Any], run_path: Path, records: list[dict[str, Any]] | None,
    version: str, suite: str | None,
) -> list[str]:
    problems = []
    missing = [k for k in PROVENANCE_KEYS if k not in run]
    if missing:
        problems.append(f"{run_path}: provenance field(s) missing: {', '.join(missing)}")
    made = run.get("lumos_gym")
    if made is None or _major(made) != _major(version):
        problems.append(f"{run_path}: made by lumos-gym {made}, this is {version} (another "
                        "major version: re-run it with this one)")
    for n, env in enumerate(run.get("envs") or []):
        absent = [k for k in ENV_PROVENANCE_KEYS if not isinstance(env, Mapping) or k not in env]
        if absent:
            name = env.get("env_id", n) if isinstance(env, Mapping) else n
            problems.append(f"{run_path}: env {name}: provenance field(s) missing: "
                            f"{', '.join(absent)}")
    plan = run.get("plan")
    if not isinstance(plan, Mapping) or plan.get("keys") is None:
        problems.append(f"{run_path}: no plan with the episode keys (made by an older lumos-gym?)")
    else:
        if plan.get("shard"):
            i, n = plan["shard"]
            problems.append(f"{run_path}: shard {i}/{n} of a run; submit the shards merged "
                            "(lumos-gym merge)")
        keys = list(plan["keys"])
        partial = run.get("partial") if isinstance(run.get("partial"), Mapping) else None
        if partial:
            absent = partial.get("absent_shards") or []
            problems.append(
                f"{run_path}: a partial merge: {partial.get('missing_episodes')} planned "
                "episode(s) missing" + (f" (shard(s) {', '.join(map(str, absent))} not given)"
                                        if absent else "")
                + "; merge every shard, finished, without --partial"
            )
        elif not plan.get("shard") and keys_sha256(keys) != plan.get("keys_sha256"):
            problems.append(f"{run_path}: the plan's keys do not match its keys_sha256")
        if not plan.get("shard") and plan.get("episodes") != len(keys):
            problems.append(f"{run_path}: the plan counts {plan.get('episodes')} episodes but "
                            f"lists {len(keys)}")
        if records is not None:
            have = {r["key"] for r in records}
            absent_keys = sorted(set(keys) - have)
            extra = sorted(have - set(keys))
            episodes = episodes_path(run_path.parent)
            if absent_keys:
                problems.append(f"{episodes}: {len(absent_keys)} planned episode(s) missing, "
                                f"e.g. {absent_keys[0]}")
            if extra:
                problems.append(f"{episodes}: {len(extra)} episode(s) not in the plan, "
                                f"e.g. {extra[0]}")
    if records is not None:
        described = run.get("agent")
        agent = described.get("name") if isinstance(described, Mapping) else None
        others = sorted({str(r.get("agent")) for r in records if r.get("agent") != agent})
        if agent and others:
            problems.append(f"{run_path.parent / 'episodes.jsonl'}: records of agent(s) "
                            f"{', '.join(others)}, run.json names {agent}")
    if suite is not None:
        problems += _check_suite(run, run_path, suite)
    return problems


def _check_suite(run: Mapping[str, Any], run_path: Path, suite: str) -> list[str]:
    try:
        expected = get_suite(suite)
    except EvaluationError as e:
        return [f"--suite {suite}: {e}"]
    recorded = run.get("suite") if isinstance(run.get("suite"), Mapping) else None
    if recorded is None:
        return [f"{run_path}: not a run of a suite (envs named one by one); expected {suite}"]
    if recorded.get("name") not in (expected.name, *expected.aliases):
        return [f"{run_path}: a run of suite {recorded.get('name')}, expected {expected.name}"]
    if recorded.get("sha256") != expected.sha256:
        return [
            f"{run_path}: suite {expected.name} was another version of its file (sha256 "
            f"{str(recorded.get('sha256'))[:12]}..., this one {expected.sha256[:12]}...)"
        ]
    return _check_whole_suite(run, run_path, suite)


def _check_whole_suite(run: Mapping[str, Any], run_path: Path, suite: str) -> list[str]:
    """A submission runs every episode of the suite: no --limit, --seed or missing shard."""
    described = run.get("agent")
    privileged = _reads_gold(str(described.get("name") if isinstance(described, Mapping) else ""))
    try:
        keys = [spec_key(spec) for entry in suite_entries(suite=suite)
                for spec in plan_env(entry, privileged=privileged).specs]
    except LumosGymError as e:
        return [f"--suite {suite}: its episodes cannot be planned here ({e})"]
    plan = run.get("plan") if isinstance(run.get("plan"), Mapping) else {}
    if plan.get("keys_sha256") == keys_sha256(keys):
        return []
    return [f"{run_path}: not the whole suite {suite}: its plan has {plan.get('episodes')} "
            f"episodes, the suite {len(keys)} (run it without --limit or --seed)"]


def _git_of(git: object) -> tuple[str | None, bool | None]:
    """The commit and the dirty flag of a recorded ``git`` entry (``None``: not recorded)."""
    if not isinstance(git, Mapping):
        return None, None
    dirty = git.get("dirty")
    return (str(git["commit"]) if git.get("commit") else None,
            bool(dirty) if dirty is not None else None)


def scoring_passes(run: Mapping[str, Any]) -> list[tuple[str, str | None, bool | None]]:
    """The passes whose code scored a run's episodes: ``(pass, commit, dirty)`` each.

    An env's episodes were last scored by the last ``lumos-gym rescore`` that covered the env
    (``run.json``'s ``rescored`` entries, in order, matched by env id: a rescore keys its envs by
    the episodes' arguments, which hold what the run adds, such as ``privileged``; an entry
    without ``envs`` covers them all), else by the run that played them: ``run`` (its ``git``)
    and each earlier session of a resumed run (``session N``, from ``sessions``). A folder
    rescored whole at one commit is therefore scored at that commit, whatever commits played
    its episodes. A commit or flag that was not recorded (a run outside a git checkout) is
    ``None``.
    """
    rescores = [r for r in run.get("rescored") or () if isinstance(r, Mapping)]
    sessions = [s for s in run.get("sessions") or () if isinstance(s, Mapping)]

    def covers(entry: Mapping[str, Any], env_id: object) -> bool:
        envs = [e for e in entry.get("envs") or () if isinstance(e, Mapping)]
        return env_id is None or not envs or env_id in {e.get("env_id") for e in envs}

    env_ids = [e.get("env_id") for e in run.get("envs") or () if isinstance(e, Mapping)]
    passes: dict[str, object] = {}
    for env_id in env_ids or [None]:
        last = next((n for n in range(len(rescores), 0, -1) if covers(rescores[n - 1], env_id)),
                    None)
        if last is not None:
            passes[f"rescore {last}"] = rescores[last - 1].get("git")
        else:
            passes.update({f"session {n}": s.get("git") for n, s in enumerate(sessions, 1)})
            passes["run"] = run.get("git")
    return [(name, *_git_of(git)) for name, git in passes.items()]


def _check_dirty(run: Mapping[str, Any], run_path: Path) -> list[str]:
    """One problem naming the scoring passes made from a dirty checkout, if any."""
    dirty = [f"{name} at {str(commit)[:12]}" for name, commit, flag in scoring_passes(run)
             if flag]
    if not dirty:
        return []
    return [f"{run_path}: scored from a dirty checkout ({', '.join(dirty)}: the code differed "
            "from its commit); score it again from a clean checkout (lumos-gym rescore), or "
            "pass --allow-dirty"]


def _commits_text(passes: Sequence[tuple[str, str | None, bool | None]]) -> str:
    """``commit (pass, pass); commit (pass)`` for a folder's scoring passes."""
    by_commit: dict[str, list[str]] = {}
    for name, commit, _ in passes:
        by_commit.setdefault(commit[:12] if commit else "no commit recorded", []).append(name)
    return "; ".join(f"{c} ({', '.join(names)})" for c, names in sorted(by_commit.items()))


def _check_commits(runs: Sequence[tuple[Path, Mapping[str, Any]]]) -> list[str]:
    """The folders of one board not all scored at one commit: a problem line for each.

    The board's commit is the one that scored the most folders (:func:`scoring_passes`); a
    folder scored at another commit too, or at none recorded, is named with its commits. With
    no single most common commit (a tie, or one folder scored at two), every folder is named.
    """
    passes = {path: scoring_passes(run) for path, run in runs}
    commits = {path: {c for _, c, _ in each} for path, each in passes.items()}
    counts: dict[str, int] = {}
    for found in commits.values():
        for commit in found - {None}:
            counts[commit] = counts.get(commit, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    if len(ranked) <= 1 and all(len(found) == 1 and None not in found
                               for found in commits.values()):
        return []
    single = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
    board = (f"the board's commit is {single[:12]}, which scored {counts[single]} of its "
             f"{len(runs)} folder(s)" if single else
             f"the board's {len(runs)} folder(s) were scored at {len(ranked)} commits")
    return [f"{path}: scored at {_commits_text(passes[path])}, not one commit: {board}; score "
            "every folder at one commit (lumos-gym rescore), or pass --allow-mixed-commits"
            for path, found in commits.items() if single is None or found != {single}]


def validate(
    paths: Sequence[str | Path], *, suite: str | None = None, allow_infra_errors: bool = False,
    allow_mixed_commits: bool = False, allow_dirty: bool = False,
    allow_missing_round_limits: bool = False,
) -> tuple[int, list[str]]:
    """Validate every results folder under ``paths`` (:func:`validate_dir`) as one board.

    Unless ``allow_mixed_commits``, the folders must also have been scored at one commit: each
    one's scoring passes (:func:`scoring_passes`: its last rescore's, else the run's and its
    sessions') all at the same commit, and that commit the same for every folder
    (:func:`_check_commits`).

    Returns:
        ``(folders checked, problems)``; each problem names its file.
    """
    problems: list[str] = []
    runs: list[tuple[Path, Mapping[str, Any]]] = []
    checked = 0
    for path in paths:
        try:
            folders = find_results_dirs(path)
        except LeaderboardError as e:
            problems.append(str(e))
            continue
        for folder in folders:
            checked += 1
            problems += validate_dir(folder, suite=suite, allow_infra_errors=allow_infra_errors,
                                     allow_dirty=allow_dirty,
                                     allow_missing_round_limits=allow_missing_round_limits)
            try:
                runs.append((Path(folder) / "run.json", _read_json(Path(folder) / "run.json")))
            except LeaderboardError:
                continue  # validate_dir named it
    if not allow_mixed_commits:
        problems += _check_commits(runs)
    return checked, problems
