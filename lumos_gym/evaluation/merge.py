"""``lumos-gym merge``: the shards of one run (``evaluate --shard i/n``) joined into one folder.

:func:`merge_results` refuses shards of different runs (configuration, adapter weights,
lumos-gym version, episode plan), overlapping shards and, unless partial, missing episodes or
shards; the merged folder's summary equals an unsharded run's (apart from timing and
provenance).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym import __version__
from lumos_gym.evaluation.identity import adapter_weights
from lumos_gym.evaluation.results import ResultsError, ResultsFolder, differences, read_results
from lumos_gym.evaluation.summary import provenance_for_summary, summarize
from lumos_gym.jsonl import write_json_atomic


@dataclass
class MergeReport:
    """What :func:`merge_results` did."""

    out: Path
    summary: dict[str, Any]
    episodes: int
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: planned episodes not merged: ``missing`` plus those of shards not given (``--partial``)
    missing_count: int = 0
    absent_shards: list[int] = field(default_factory=list)


def _listing(keys: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _check_same(folders: Sequence[ResultsFolder], what: str, get) -> None:
    first = folders[0]
    for other in folders[1:]:
        if get(other) != get(first):
            diff = "; ".join(differences(get(first), get(other))[:4]) or "differs"
            raise ResultsError(
                f"{first.path} and {other.path} are results of different {what} ({diff}); "
                "merge only shards of one run"
            )


def merge_results(
    shard_dirs: Sequence[str | Path], out: str | Path, *, partial: bool = False
) -> MergeReport:
    """Join the results folders of ``lumos-gym evaluate --shard i/n`` runs into one.

    Refuses shards of different configurations (agent, models), lumos-gym versions or
    episode plans (suite, limits, seeds); overlapping shards (an episode in two folders); and,
    unless ``partial``, missing episodes or shards. Corrupt or truncated lines are skipped
    with a warning (the valid records still load). The merged ``episodes.jsonl`` is sorted by
    episode key and its ``summary.json`` equals an unsharded run's (apart from timing and
    provenance).

    Raises:
        ResultsError: any of the above, naming the folders and episodes concerned.
    """
    if not shard_dirs:
        raise ResultsError("name the results folders to merge")
    out_dir = Path(out)
    if (out_dir / "episodes.jsonl").exists():
        raise ResultsError(f"{out_dir} already holds results; merge into a new folder")
    folders = [read_results(p) for p in shard_dirs]
    warnings = [p for f in folders for p in f.problems] + _check_one_run(folders)
    absent = _absent_shards(folders, partial)
    merged = _join_records(folders)
    planned: set[str] = set()
    for folder in folders:
        planned.update(folder.planned or folder.records)
    missing = sorted(planned - set(merged))
    if missing and not partial:
        raise ResultsError(
            f"{len(missing)} planned episode(s) have no valid record: {_listing(missing)}; "
            "run the shard again with the same --out to finish it (or pass --partial)"
        )
    # a record outside the plan is a result of a larger earlier run in the same folder
    records = [merged[k] for k in sorted(merged) if k in planned]
    run, count = _merged_run(folders, planned, len(records), missing, absent)
    incomplete = bool(missing or absent)
    summary = _write_merged(out_dir, records, run, count if incomplete else None)
    return MergeReport(out_dir, summary, len(records), warnings, missing,
                       count if incomplete else 0, [int(i) for i in absent])


def _check_one_run(folders: Sequence[ResultsFolder]) -> list[str]:
    """Refuse folders of different runs; return a warning when another lumos-gym made them."""
    warnings = []
    _check_same(folders, "configurations", lambda f: f.run.get("fingerprint"))
    _check_same(folders, "adapter weights", lambda f: adapter_weights(f.run))
    _check_same(folders, "lumos-gym versions", lambda f: f.run.get("lumos_gym"))
    version = folders[0].run.get("lumos_gym")
    if version != __version__:
        warnings.append(
            f"the shards were made by lumos-gym {version}, this is {__version__}: the summary "
            "is recomputed with this version's metrics"
        )
    _check_same(folders, "episode plans (suite, envs, limits or seeds)",
                lambda f: (f.run.get("plan") or {}).get("keys_sha256"))
    return warnings


def _absent_shards(folders: Sequence[ResultsFolder], partial: bool) -> list[str]:
    """Return the shards of the split not given; refuse a mixed split or a shard given twice.

    Raises:
        ResultsError: whole runs mixed with shards, shards of different splits, a shard
            given twice, or (unless ``partial``) a shard not given.
    """
    shards = [f.shard for f in folders]
    if all(s is None for s in shards):
        return []
    counts = {s[1] for s in shards if s is not None}
    if None in shards or len(counts) > 1:
        shown = ", ".join(f"{s[0]}/{s[1]}" if s else "whole" for s in shards)
        raise ResultsError(f"merge shards of one split: every folder needs --shard I/N with "
                           f"the same N (got {shown})")
    seen: dict[int, Path] = {}
    for folder, (i, _) in zip(folders, shards, strict=True):  # type: ignore[misc]
        if i in seen:
            raise ResultsError(f"{seen[i]} and {folder.path} are both shard {i}")
        seen[i] = folder.path
    n = counts.pop()
    absent = [str(i) for i in range(1, n + 1) if i not in seen]
    if absent and not partial:
        raise ResultsError(f"shard(s) {', '.join(absent)} of {n} are not given")
    return absent


def _join_records(folders: Sequence[ResultsFolder]) -> dict[str, dict[str, Any]]:
    """Return every folder's records by key; refuse an episode found in two folders."""
    owner: dict[str, Path] = {}
    overlap: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for key, record in folder.records.items():
            if key in owner:
                overlap.append(f"{key} ({owner[key]} and {folder.path})")
                continue
            owner[key] = folder.path
            merged[key] = record
    if overlap:
        raise ResultsError(f"{len(overlap)} episode(s) are in more than one folder: "
                           f"{_listing(overlap)}")
    return merged


def _merged_run(
    folders: Sequence[ResultsFolder], planned: set[str], merged: int, missing: list[str],
    absent: list[str],
) -> tuple[dict[str, Any], int]:
    """Return the merged run.json and how many planned episodes it lacks.

    The first folder's run.json, with the whole plan, where each shard came from and, when
    episodes or shards are missing, which.
    """
    plan = folders[0].run.get("plan") or {}
    total = plan.get("episodes")
    run = dict(folders[0].run)
    run["plan"] = {**plan, "shard": None, "keys": sorted(planned),
                   "episodes": total if total is not None else len(planned)}
    run["merged_from"] = [
        {"path": str(f.path), "shard": list(f.shard) if f.shard else None,
         "episodes": len(f.records), "git": f.run.get("git"), "started": f.run.get("started"),
         "hardware": f.run.get("hardware")}
        for f in folders
    ]
    # with shards not given, their keys are unknown here: the plan's count says how many
    count = (total if total is not None else len(planned)) - merged
    if missing or absent:
        run["missing"] = missing
        run["partial"] = {"absent_shards": [int(i) for i in absent], "missing_episodes": count}
    return run, count


def _write_merged(
    out_dir: Path, records: Sequence[Mapping[str, Any]], run: Mapping[str, Any],
    missing: int | None,
) -> dict[str, Any]:
    """Write the merged folder (episodes sorted by key, run.json, summary.json); return the summary.

    ``missing``: the planned episodes not merged, noted in the summary (None: none).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "episodes.jsonl", "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    write_json_atomic(out_dir / "run.json", run)
    summary = summarize(records)
    summary["provenance"] = provenance_for_summary(run)
    if missing is not None:
        summary["missing_episodes"] = missing
    write_json_atomic(out_dir / "summary.json", summary)
    return summary
