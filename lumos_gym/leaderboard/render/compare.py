"""Paired differences between rows: to a reference row (``--reference``), and ``--compare A B``.

:func:`attach_reference` compares every row of a board with one reference row
(:func:`compare_rows`: episode by episode for two runs, over seeds and tasks for a seed group)
and keeps the result in ``Board.paired``; :func:`paired_markdown` and :func:`paired_csv_rows`
write it for the md and csv outputs (the html one is
:func:`~lumos_gym.leaderboard.render.html.paired_html`). :func:`render_comparison` writes the
full paired table of two runs, every level and metric, as md or csv.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lumos_gym.evaluation.summary import env_kind, metrics_for
from lumos_gym.leaderboard.agreement import AGREEMENT_NOTE, agreement, agreement_rows
from lumos_gym.leaderboard.cards import training_seeds
from lumos_gym.leaderboard.render.rows import (
    Board,
    Entry,
    LeaderboardError,
    Paired,
    SeedRow,
    Shown,
    _ci,
    _num,
    entry_records,
    short_env,
)
from lumos_gym.leaderboard.stats import (
    Comparison,
    PairedDiff,
    SeedMatrix,
    compare_records,
    compare_seed_matrices,
    seed_matrices,
)
from lumos_gym.text import markdown_table

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
