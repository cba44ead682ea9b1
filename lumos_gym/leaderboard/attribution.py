"""Module attribution: which Lumos module each failed episode of an agent failed in.

An agent's run is compared, episode by episode (paired by episode key), with the runs of its
counterfactual agents (:mod:`lumos_gym.agents.counterfactual`): ``lumos-i+gold-plan`` (the
gold plan, grounded by the agent's own grounder) and ``lumos-i+gold-ground`` (the agent's own
planner, its subgoals that match a gold subgoal grounded by the gold actions). An episode
*fails* when its reward (the env's primary metric) is below 1, full marks; a counterfactual
*solves* it when its episode scores 1. Each failed episode of the agent is attributed to one
module, in this order:

1. ``planning``: the gold-plan run solves it;
2. ``grounding``: the gold-ground run solves it and grounded at least one subgoal with gold
   actions (a run that used none is the agent's own run again);
3. ``execution``: neither solves it and the agent's episode hit a tool error (a tool failed
   on its input: ``tool_errors`` of the record) or ended as ``env-error`` (the env's engine
   died);
4. ``unexplained``: none of these (both modules replaced one at a time still fail, e.g. both
   are wrong, or the tools answer wrongly without an error).

Apart from these, each env's table counts the failed episodes that hit a tool error whatever
their module (``tool errors``), and those missing a counterfactual (``no counterfactual``: not
in a counterfactual's folder, or the task has no gold plan), which can only land in execution
or unexplained. An episode of the agent that ended in ``infra-error`` (a backend or env server
failed: no score) is not attributed at all, and a counterfactual's such episode counts as
missing.

:func:`attribute` is pure (records in, an :class:`Attribution` out); :func:`attribute_runs`
reads the three results folders and checks that they are one agent's runs with the same models
and decoding; :func:`board_attributions` finds such runs among a leaderboard's rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.evaluation.results import ResultsError, is_infra_error, read_results
from lumos_gym.leaderboard.agents import counterfactual_roles
from lumos_gym.text import markdown_table

#: The modules a failed episode is attributed to, in the order they are tried.
MODULES = ("planning", "grounding", "execution", "unexplained")
#: The counterfactual runs, by the module their agent replaces (``replaces`` of the agent).
COUNTERFACTUALS = {"planner": "gold plan", "grounder": "gold grounding"}
#: An episode reward at or above this is full marks (rewards are floats).
SOLVED = 1.0 - 1e-9
#: The statuses whose failure is the environment's, counted under execution.
ENV_FAILURES = ("env-error",)


class AttributionError(ResultsError):
    """The runs cannot be compared (another agent, other models or decoding)."""


@dataclass(frozen=True)
class EpisodeAttribution:
    """One failed episode of the agent and the module it is attributed to.

    Attributes:
        key: the episode key.
        env_id: its env.
        task_id: its task.
        module: one of :data:`MODULES`.
        reward: the agent's reward.
        gold_plan: the gold-plan run's reward, or None without one (missing, or no gold plan).
        gold_ground: the gold-ground run's reward, or None without one.
        gold_grounded: the subgoals the gold-ground run grounded with gold actions.
        tool_errors: the tool errors of the agent's episode.
        status: the agent's episode status.
    """

    key: str
    env_id: str
    task_id: str
    module: str
    reward: float
    gold_plan: float | None
    gold_ground: float | None
    gold_grounded: int
    tool_errors: int
    status: str

    def describe(self) -> str:
        """Return one line: the module and the evidence for it."""
        plan = "-" if self.gold_plan is None else f"{self.gold_plan:.3g}"
        ground = "-" if self.gold_ground is None else f"{self.gold_ground:.3g}"
        return (f"{self.module}: reward {self.reward:.3g}; with the gold plan {plan}; with gold "
                f"grounding {ground} ({_count(self.gold_grounded, 'subgoal')} grounded by gold "
                f"actions); {_count(self.tool_errors, 'tool error')}; status {self.status}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass
class EnvAttribution:
    """The counts of one env (or of all, ``env_id`` ``"all"``)."""

    env_id: str
    episodes: int = 0
    failed: int = 0
    modules: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODULES, 0))
    tool_errors: int = 0
    no_counterfactual: int = 0

    def add(self, item: EpisodeAttribution | None) -> None:
        """Count one episode of the agent: ``item`` when it failed, None when it succeeded."""
        self.episodes += 1
        if item is None:
            return
        self.failed += 1
        self.modules[item.module] += 1
        self.tool_errors += item.tool_errors > 0
        self.no_counterfactual += item.gold_plan is None or item.gold_ground is None

    def share(self, module: str) -> float | None:
        """Return the share of the failed episodes attributed to ``module`` (None: none)."""
        return self.modules[module] / self.failed if self.failed else None


@dataclass
class Attribution:
    """The attribution of one agent run's failed episodes.

    Attributes:
        run: the agent run's name (its folder).
        agent: the agent.
        counterfactuals: ``"gold plan"``/``"gold grounding"`` → the run compared with (its
            folder), for those given.
        episodes: every failed episode, by key (sorted).
        envs: the counts per env (sorted), then ``"all"``.
    """

    run: str
    agent: str
    counterfactuals: dict[str, str]
    episodes: dict[str, EpisodeAttribution]
    envs: dict[str, EnvAttribution]

    def to_dict(self) -> dict[str, Any]:
        """Return the attribution as JSON-ready data."""
        return {
            "run": self.run, "agent": self.agent, "counterfactuals": self.counterfactuals,
            "modules": list(MODULES),
            "envs": {k: {**asdict(v), "shares": {m: v.share(m) for m in MODULES}}
                     for k, v in self.envs.items()},
            "episodes": [asdict(e) for e in self.episodes.values()],
        }


def solved(record: Mapping[str, Any] | None) -> bool:
    """Whether an episode record scored full marks."""
    return record is not None and float(record.get("reward") or 0.0) >= SOLVED


def gold_turns(record: Mapping[str, Any], role: str) -> int:
    """Return how many ``role`` turns of a record came from gold data (``"gold": true``)."""
    return sum(1 for t in record.get("turns") or ()
               if isinstance(t, Mapping) and t.get("role") == role and t.get("gold"))


def _usable(record: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A counterfactual record, or None: missing, its task had no gold plan, or no score."""
    if record is None or is_infra_error(record):
        return None
    if record.get("status") == "agent-error" and "no gold plan" in str(record.get("reason")):
        return None
    return record


def _reward(record: Mapping[str, Any] | None) -> float | None:
    return None if record is None else float(record.get("reward") or 0.0)


def attribute_episode(
    key: str, record: Mapping[str, Any], gold_plan: Mapping[str, Any] | None,
    gold_ground: Mapping[str, Any] | None,
) -> EpisodeAttribution | None:
    """Attribute one episode of the agent (None when it did not fail); see the module doc."""
    if solved(record):
        return None
    plan, ground = _usable(gold_plan), _usable(gold_ground)
    grounded = gold_turns(ground, "grounder") if ground is not None else 0
    tool_errors = int(record.get("tool_errors") or 0)
    status = str(record.get("status", ""))
    if solved(plan):
        module = "planning"
    elif solved(ground) and grounded:
        module = "grounding"
    elif tool_errors or status in ENV_FAILURES:
        module = "execution"
    else:
        module = "unexplained"
    return EpisodeAttribution(
        key, str(record.get("env_id", "")), str(record.get("task_id", "")), module,
        float(record.get("reward") or 0.0), _reward(plan), _reward(ground), grounded,
        tool_errors, status,
    )


def attribute(
    records: Mapping[str, Mapping[str, Any]],
    gold_plan: Mapping[str, Mapping[str, Any]] | None = None,
    gold_ground: Mapping[str, Mapping[str, Any]] | None = None,
    *, run: str = "", agent: str = "", counterfactuals: Mapping[str, str] | None = None,
) -> Attribution:
    """Attribute each failed episode of an agent's run to a module (see the module doc).

    Args:
        records: the agent's episode records by key.
        gold_plan: the gold-plan run's records by key (None: not run).
        gold_ground: the gold-ground run's records by key (None: not run).
        run: the agent run's name, for the report.
        agent: the agent's name, for the report.
        counterfactuals: the counterfactual runs' names, for the report.
    """
    episodes: dict[str, EpisodeAttribution] = {}
    envs: dict[str, EnvAttribution] = {}
    total = EnvAttribution("all")
    for key in sorted(records):
        record = records[key]
        if is_infra_error(record):  # no score: neither a failure nor a success of the agent
            continue
        item = attribute_episode(key, record, (gold_plan or {}).get(key),
                                 (gold_ground or {}).get(key))
        env_id = str(record.get("env_id", ""))
        envs.setdefault(env_id, EnvAttribution(env_id)).add(item)
        total.add(item)
        if item is not None:
            episodes[key] = item
    envs = {k: envs[k] for k in sorted(envs)}
    envs["all"] = total
    return Attribution(run, agent, dict(counterfactuals or {}), episodes, envs)


# ------------------------------------------------------------------------ runs and checks
def counterfactual_kind(agent: str) -> tuple[str, str] | None:
    """Return ``(agent it stands in for, "gold plan" or "gold grounding")``, or None.

    None for an agent that is not a counterfactual, or that this installation does not know.
    """
    roles = counterfactual_roles(agent)
    if roles is None:
        return None
    of, replaces = roles
    if not of or replaces not in COUNTERFACTUALS:
        return None
    return str(of), COUNTERFACTUALS[replaces]


def _agent_name(run: Mapping[str, Any]) -> str:
    agent = run.get("agent")
    return str(agent.get("name", "")) if isinstance(agent, Mapping) else ""


def _role_adapter_sha(run: Mapping[str, Any], role: str) -> str | None:
    """The SHA-256 of the adapter the run's ``role`` used, when run.json records it."""
    details = ((run.get("backends") or {}).get(role) or {}).get("details") or {}
    path = (details.get("adapters") or {}).get(details.get("adapter") or "")
    return ((run.get("adapters") or {}).get(role) or {}).get(path) if path else None


def _decoding(run: Mapping[str, Any]) -> dict[str, Any]:
    config = dict((((run.get("fingerprint") or {}).get("agent") or {}).get("config")) or {})
    config.pop("extra", None)  # the match threshold of gold grounding is not decoding
    return config


def compatibility(agent_run: Mapping[str, Any], other_run: Mapping[str, Any]) -> list[str]:
    """Return why ``other_run`` is not a counterfactual of ``agent_run`` (empty when it is).

    It must be a counterfactual agent standing in for ``agent_run``'s agent, with the same
    model (backend, model, adapter and its checksum) for each of its roles and the same
    decoding settings.
    """
    agent, other = _agent_name(agent_run), _agent_name(other_run)
    kind = counterfactual_kind(other)
    if kind is None or kind[0] != agent:
        return [f"agent {other or '?'} is not a counterfactual of {agent or '?'}"]
    problems = []
    ours = (agent_run.get("fingerprint") or {}).get("models") or {}
    theirs = (other_run.get("fingerprint") or {}).get("models") or {}
    for role, model in sorted(theirs.items()):
        if ours.get(role) != model:
            problems.append(f"its {role} is {model}, the agent's {ours.get(role)}")
        sha, other_sha = _role_adapter_sha(agent_run, role), _role_adapter_sha(other_run, role)
        if sha and other_sha and sha != other_sha:
            problems.append(f"its {role} adapter differs (sha256 {other_sha[:12]}..., the "
                            f"agent's {sha[:12]}...)")
    if _decoding(agent_run) != _decoding(other_run):
        problems.append(f"its decoding {_decoding(other_run)} differs from the agent's "
                        f"{_decoding(agent_run)}")
    return problems


def attribute_runs(
    agent_dir: str | Path, gold_plan: str | Path | None = None,
    gold_ground: str | Path | None = None,
) -> tuple[Attribution, list[str]]:
    """Read an agent's results folder and its counterfactual runs' folders; attribute.

    Returns:
        the attribution and the warnings (unreadable lines, episodes of the agent missing
        from a counterfactual run).

    Raises:
        AttributionError: no counterfactual folder given, or one that is not a counterfactual
            of the agent's run (another agent, other models or decoding).
        ResultsError: a folder that is not a results folder.
    """
    if gold_plan is None and gold_ground is None:
        raise AttributionError("give a gold-plan run, a gold-ground run or both")
    base = read_results(agent_dir)
    warnings = list(base.problems)
    runs: dict[str, Any] = {}
    for expected, path in (("gold plan", gold_plan), ("gold grounding", gold_ground)):
        if path is None:
            continue
        folder = read_results(path)
        problems = compatibility(base.run, folder.run)
        kind = counterfactual_kind(_agent_name(folder.run))
        if not problems and kind is not None and kind[1] != expected:
            problems = [f"it is a {kind[1]} run, given as the {expected} run"]
        if problems:
            raise AttributionError(f"{folder.path} cannot be compared with {base.path}: "
                                   + "; ".join(problems))
        warnings += folder.problems + _missing(base.records, folder.records, folder.path)
        runs[expected] = folder
    attribution = attribute(
        base.records, _records(runs.get("gold plan")), _records(runs.get("gold grounding")),
        run=Path(agent_dir).name, agent=_agent_name(base.run),
        counterfactuals={k: str(v.path) for k, v in runs.items()},
    )
    return attribution, warnings


def _records(folder: Any) -> dict[str, dict[str, Any]] | None:
    return None if folder is None else folder.records


def _missing(ours: Mapping[str, Any], theirs: Mapping[str, Any], path: Path) -> list[str]:
    absent = [k for k in ours if k not in theirs]
    if not absent:
        return []
    return [f"{path}: {len(absent)} of the agent's {len(ours)} episodes are not there (e.g. "
            f"{sorted(absent)[0]}); they count as without a counterfactual"]


def board_attributions(
    runs: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Mapping[str, Any]]]],
) -> tuple[list[Attribution], list[str]]:
    """Attribute every run that has counterfactual runs among ``runs``.

    Args:
        runs: ``(name, run.json, records by key)`` of each leaderboard row.

    Returns:
        the attributions (in the order of ``runs``) and warnings (a second counterfactual run
        of one kind for one agent run; the first is used).
    """
    found: list[Attribution] = []
    warnings: list[str] = []
    for name, run, records in runs:
        if counterfactual_kind(_agent_name(run)) is not None:
            continue
        chosen: dict[str, tuple[str, Mapping[str, Mapping[str, Any]]]] = {}
        for other_name, other_run, other_records in runs:
            kind = counterfactual_kind(_agent_name(other_run))
            if kind is None or compatibility(run, other_run):
                continue
            if kind[1] in chosen:
                warnings.append(f"{name}: {other_name} is a second {kind[1]} run; "
                                f"{chosen[kind[1]][0]} is used")
                continue
            chosen[kind[1]] = (other_name, other_records)
        if chosen:
            found.append(attribute(
                records, (chosen.get("gold plan") or ("", None))[1],
                (chosen.get("gold grounding") or ("", None))[1], run=name,
                agent=_agent_name(run), counterfactuals={k: v[0] for k, v in chosen.items()},
            ))
    return found, warnings


# ------------------------------------------------------------------------------- tables
def _cell(count: int, whole: int) -> str:
    return f"{count} ({count / whole:.0%})" if whole else str(count)


TABLE_HEADERS = ("env", "episodes", "failed", *MODULES, "tool errors", "no counterfactual")
TABLE_ALIGN = "l" + "r" * (len(TABLE_HEADERS) - 1)  # the env, then counts


def table_rows(attribution: Attribution) -> list[list[str]]:
    """Return the rows of the attribution table: per env, then ``all``.

    Each module cell is ``count (share of the env's failed episodes)``.
    """
    rows = []
    for env_id, counts in attribution.envs.items():
        rows.append([
            env_id.removeprefix("lumos/"), str(counts.episodes), str(counts.failed),
            *[_cell(counts.modules[m], counts.failed) for m in MODULES],
            _cell(counts.tool_errors, counts.failed), str(counts.no_counterfactual),
        ])
    return rows


def render_markdown(attribution: Attribution) -> str:
    """Return the attribution as a Markdown section: what was compared, then the table."""
    compared = ", ".join(f"{k}: `{v}`" for k, v in attribution.counterfactuals.items())
    lines = [f"### {attribution.run} ({attribution.agent})", "",
             f"Counterfactual runs: {compared or 'none'}.", "",
             *markdown_table(TABLE_HEADERS, table_rows(attribution), align=TABLE_ALIGN)]
    return "\n".join(lines) + "\n"


def render_csv_rows(attributions: Iterable[Attribution]) -> list[list[str]]:
    """Return tidy rows ``run, agent, env, module, count, share, failed, episodes``."""
    rows = []
    for attribution in attributions:
        for env_id, counts in attribution.envs.items():
            for module in (*MODULES, "tool errors", "no counterfactual"):
                count = (counts.modules[module] if module in MODULES else
                         counts.tool_errors if module == "tool errors" else
                         counts.no_counterfactual)
                share = count / counts.failed if counts.failed else ""
                rows.append([attribution.run, attribution.agent, env_id, module, str(count),
                             str(share), str(counts.failed), str(counts.episodes)])
    return rows


def to_json(attribution: Attribution) -> str:
    """Return the attribution as indented JSON."""
    return json.dumps(attribution.to_dict(), indent=1, sort_keys=False) + "\n"


#: What the attribution table says, written above it.
ATTRIBUTION_NOTE = (
    "Each failed episode (reward below 1) of a run is attributed to the first module whose "
    "replacement by gold data solves it: planning (the gold plan, grounded by the run's own "
    "grounder), grounding (gold actions for the run's subgoals that match a gold subgoal), "
    "else execution (a tool error or an env error in the run's episode), else unexplained. "
    "Cells: episodes (share of the failed). Tool errors: failed episodes with a tool error, "
    "whatever their module; no counterfactual: failed episodes missing a counterfactual run "
    "or a gold plan."
)


__all__ = [
    "ATTRIBUTION_NOTE",
    "COUNTERFACTUALS",
    "MODULES",
    "TABLE_HEADERS",
    "Attribution",
    "AttributionError",
    "EnvAttribution",
    "EpisodeAttribution",
    "attribute",
    "attribute_episode",
    "attribute_runs",
    "board_attributions",
    "compatibility",
    "counterfactual_kind",
    "render_csv_rows",
    "render_markdown",
    "table_rows",
    "to_json",
]
