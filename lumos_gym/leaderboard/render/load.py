"""Reading results folders into a ranked :class:`~lumos_gym.leaderboard.render.rows.Board`.

:func:`find_results_dirs` finds the results folders under an argument, :func:`load_results_dir`
reads one, and :func:`load_board` groups them into runs (one row each), ranks the rows, matches
the paper's datasets, attributes failures from counterfactual runs and, by default, shows each
seed group as one row (:func:`group_seed_rows`). :func:`task_sets_problem` says when the rows
were scored on different tasks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym.envs.tasks import rounds_from_tables
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.folders import follow_latest, is_latest_link
from lumos_gym.evaluation.results import ResultsError, episodes_path, read_results
from lumos_gym.evaluation.suites import get_suite
from lumos_gym.leaderboard.attribution import board_attributions
from lumos_gym.leaderboard.cards import group_names, role_cards, seed_groups
from lumos_gym.leaderboard.render.rows import (
    Board,
    Entry,
    LeaderboardError,
    Reported,
    ResultsDir,
    SeedRow,
    Shown,
    build_entry,
    reported_numbers,
    seed_row,
    short_env,
)
from lumos_gym.leaderboard.stats import pair_key

_RESULT_FILES = ("episodes.jsonl", "episodes.jsonl.gz", "summary.json", "run.json")


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
    warnings += round_limit_warnings(entries, envs)
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


def _round_limit(run: Mapping[str, Any], record: Mapping[str, Any]) -> int | None:
    """The most rounds the run's agent had in the episode ``record`` (None: not recorded).

    ``--max-rounds`` (the run's ``decoding``) wins; else the recorded limit of the episode's
    dataset (its task id's first part), else of its task type, as the agents read them.
    """
    fixed = (run.get("decoding") or {}).get("max_rounds")
    if fixed is not None:
        return int(fixed)
    limits = run.get("round_limits")
    if not isinstance(limits, Mapping):
        return None
    return rounds_from_tables(record.get("task_id"), record.get("task_type"),
                              limits.get("task_types") or {}, limits.get("datasets") or {})


def round_limit_warnings(entries: Sequence[Entry], envs: Sequence[str]) -> list[str]:
    """Warning lines: the rows whose round limits are unrecorded; each env where rows differ.

    A row whose agent had at most 10 subgoals on WebShop and one that had 5 did not play the
    same game; ceilings are left out (they replay gold actions, whatever the limit).
    """
    ranked = [e for e in entries if not e.ceiling]
    unknown = [e.name for e in ranked if any(_round_limit(d.run, {}) is None for d in e.dirs)]
    lines = []
    if unknown and len(ranked) > 1:  # whether they played the same game cannot be told
        lines.append(f"round limits not recorded for {', '.join(unknown)} (made before "
                     "run.json recorded them; lumos-gym rescore --recover-round-limits reads "
                     "them from the commit that played them, where that was one clean commit)")
    for env in envs:
        seen: dict[str, list[str]] = {}
        for entry in ranked:
            if entry.name in unknown or not entry.records.get(env):
                continue
            limits = {_round_limit(d.run, r) for d in entry.dirs for r in d.records
                      if r.get("env_id") == env}
            seen.setdefault("/".join(sorted(str(x) for x in limits)), []).append(entry.name)
        if len(seen) > 1:
            parts = "; ".join(f"{limit}: {', '.join(names)}" for limit, names in seen.items())
            lines.append(f"{short_env(env)}: rows ran under different round limits "
                         f"({parts}); their scores there are not of the same game")
    return lines
