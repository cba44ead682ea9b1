"""``lumos-gym leaderboard --validate``: the checks of a submitted results folder.

:func:`validate_dir` checks one folder (its files, its plan, its suite, its summary against its
episodes, its provenance); :func:`validate` checks the folders of one board, and that one commit
scored them all (:func:`scoring_passes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym import __version__
from lumos_gym.errors import EvaluationError, LumosGymError
from lumos_gym.evaluation.plan import plan_env, spec_key
from lumos_gym.evaluation.results import (
    differences,
    episodes_path,
    infra_errors,
    is_infra_error,
    keys_sha256,
    read_results,
)
from lumos_gym.evaluation.suites import get_suite, suite_entries
from lumos_gym.evaluation.summary import SUMMARY_FORMAT, comparable, summarize
from lumos_gym.leaderboard.render.load import _read_json, find_results_dirs
from lumos_gym.leaderboard.render.rows import LeaderboardError, _reads_gold

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
                            "record them (lumos-gym rescore --recover-round-limits) or pass "
                            "--allow-missing-round-limits")
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
