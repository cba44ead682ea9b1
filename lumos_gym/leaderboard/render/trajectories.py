"""The trajectory pages of the HTML leaderboard: every episode of one run on one env.

:func:`render_viewer` writes one page (filterable by status and text); :func:`_write_viewers`
writes a run's pages into its folder (:func:`_run_slugs` names the folders). The pieces of an
episode (:func:`_episode_info`, :func:`_turn_html`, :func:`_long_text`) serve
``lumos-gym view`` as well.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lumos_gym.leaderboard.render.page import (
    _VIEWER_JS,
    _e,
    _or_dash,
    _page,
    _short,
    _slug,
)
from lumos_gym.leaderboard.render.rows import Board, Entry, _ci, _num, short_env

#: Characters of a long text shown before its "show more" toggle (trajectory viewer).
PREVIEW_CHARS = 400


#: The most characters of one text a viewer page holds (the rest stays in episodes.jsonl).
MAX_TEXT_CHARS = 4000


_IMAGE_PREFIXES = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;")


_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


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


def _attribution_note(record: Mapping[str, Any]) -> list[str]:
    """The line a failed episode's viewer entry shows: the module it is attributed to."""
    if not record.get("attribution"):
        return []
    return [f'<div class="attribution"><span class="label">attributed to</span> '
            f'{_e(record["attribution"])}</div>']


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
