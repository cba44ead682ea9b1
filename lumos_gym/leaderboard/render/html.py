"""The leaderboard as a static HTML page (``--format html``).

:func:`render_html` writes the page, sortable and filterable, each env's value linking to its
trajectory page (:mod:`~lumos_gym.leaderboard.render.trajectories`), with the sections of the
Markdown output converted, the paired differences (:func:`paired_html`) and the module
attribution (linking to the attributed episodes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from lumos_gym.evaluation.summary import SCORE_RULE
from lumos_gym.leaderboard.attribution import ATTRIBUTION_NOTE, TABLE_HEADERS, table_rows
from lumos_gym.leaderboard.cards import cards_markdown, seed_text
from lumos_gym.leaderboard.render.compare import _paired_cells, _paired_note, _tested_text
from lumos_gym.leaderboard.render.page import (
    _BOARD_JS,
    _e,
    _page,
    _slug,
    markdown_section_html,
)
from lumos_gym.leaderboard.render.rows import (
    CEILING_NOTE,
    Board,
    Reported,
    SeedRow,
    Shown,
    _ci,
    _num,
    _reported_value,
    short_env,
)
from lumos_gym.leaderboard.render.sections import (
    _claims_md,
    _seeds_md,
    infra_markdown,
    seed_rows_markdown,
)
from lumos_gym.leaderboard.render.trajectories import _run_slugs, _write_viewers


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
