"""``lumos-gym view``: static pages of a run's episodes, or of two runs of the same tasks compared.

A *run* here is what one argument of the command names: a results folder, or a folder of the
folders of one run (``results/<agent>/<Env>/``), read as the leaderboard reads it
(:func:`lumos_gym.leaderboard.render.load_board`).

**Pages** (:func:`write_view`), written into one folder, opened from the file system (no server,
no network: the script and the styles are in each page):

* ``index.html``: the run's envs (episodes, solved, failed, the primary metric with its
  interval), each linking to its episode page; for two runs, each env's paired episodes and
  how many flipped, with links to both runs' pages and to the side-by-side page;
* ``a/<Env>.html`` (and ``b/<Env>.html``): every episode of the env, its turns grouped and
  numbered by subgoal (:func:`subgoal_groups`), with a filter (failures, solved, a status), a
  sort (by reward, by length in turns or in tokens) and a text search;
* two runs only: ``diff.html``, every paired episode whose reward changed (A solved and B not,
  the reverse, or a reward up or down), sortable and searchable; and ``diff/<Env>.html``, each
  paired episode side by side, subgoal by subgoal, with the same filter, sort and search.

An episode is *solved* when its reward reaches :data:`SOLVED` and a *failure* otherwise, whatever
its status: a completed episode with a wrong answer is a failure. Two runs' episodes pair by
env, task and seed (:func:`lumos_gym.leaderboard.stats.pair_records`).

The filter, sort and search of a page can be set in its address: ``#show=failed``,
``#sort=reward:asc`` (``turns:desc``, ``tokens:desc``, ``delta:desc`` on side-by-side pages,
``order:asc`` for the order of the file) and ``#q=text``.

The pages go under the (first) results folder by default (:func:`default_out`);
:func:`serve_folder` serves a folder of them over HTTP on 127.0.0.1 only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lumos_gym.leaderboard.agreement import AGREEMENT_NOTE, agreement, agreement_rows
from lumos_gym.leaderboard.render import (
    _BOARD_JS,
    _PAGE_JS,
    Entry,
    LeaderboardError,
    _e,
    _episode_info,
    _long_text,
    _page,
    _short,
    _slug,
    _turn_html,
    cell_text,
    load_board,
    short_env,
)
from lumos_gym.leaderboard.stats import Pairing, pair_key, pair_records

#: The reward from which an episode counts as solved; below it, a failure (whatever its status).
SOLVED = 1.0
#: A ``Subgoal k:`` label in a model's output (Lumos-I, Lumos-O and integrated turns).
SUBGOAL = re.compile(r"\bSubgoal\s*(\d+)\s*:", re.IGNORECASE)
#: The name of the folder the pages go to, under the (first) results folder, by default.
VIEW_FOLDER = "view"

_VIEW_CSS = """
.group{border-left:3px solid #1f3b5b;margin:.45em 0 .45em .2em;padding-left:.5em}
.group-head{font-weight:600;color:#1f3b5b;font-size:.92em}
.numbered{display:flex;gap:.35em;align-items:baseline}
.numbered .turn{margin-left:0;flex:1;min-width:0}
.turn-no{min-width:3em;color:#57606a;font-size:.85em;font-variant-numeric:tabular-nums}
table.side{width:100%;table-layout:fixed}table.side th{cursor:default}
.kind{display:inline-block;padding:0 .45em;border-radius:4px;font-size:.85em;background:#eee}
.kind-a-only{background:#ffebe9}.kind-b-only{background:#dafbe1}
"""

_LIST_JS = _PAGE_JS + """
(function () {
  "use strict";
  var list = document.getElementById("items");
  var show = document.getElementById("show");
  var sort = document.getElementById("sort");
  var text = document.getElementById("filter");
  var count = document.getElementById("shown");
  var items = Array.prototype.slice.call(list.children);
  function num(el, name) {
    var v = parseFloat(el.getAttribute("data-" + name));
    return isNaN(v) ? 0 : v;
  }
  function apply() {
    var how = sort.value.split(":"), dir = how[1] === "desc" ? -1 : 1;
    items.slice().sort(function (a, b) {
      return dir * (num(a, how[0]) - num(b, how[0])) || num(a, "order") - num(b, "order");
    }).forEach(function (el) { list.appendChild(el); });
    var tag = " " + show.value + " ";
    showItems(items, function (el) {
      return tag === "  " || (" " + el.getAttribute("data-tags") + " ").indexOf(tag) >= 0;
    }, text.value.trim().toLowerCase(), count, "episodes");
    list.setAttribute("data-sorted-by", sort.value);
  }
  function choose(select, value) {
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === value) { select.value = value; }
    }
  }
  var params = hashParams();
  choose(show, params.show);
  choose(sort, params.sort);
  if (params.q !== undefined) { text.value = params.q; }
  show.addEventListener("change", apply);
  sort.addEventListener("change", apply);
  text.addEventListener("input", apply);
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""

#: The sort choices of an episode page: (value, label); the value is ``<data attribute>:<dir>``.
RUN_SORTS = (
    ("order:asc", "as in the file"), ("reward:asc", "reward, lowest first"),
    ("reward:desc", "reward, highest first"), ("turns:desc", "turns, most first"),
    ("turns:asc", "turns, fewest first"), ("tokens:desc", "tokens, most first"),
    ("tokens:asc", "tokens, fewest first"),
)
#: The sort choices of a side-by-side page (delta: B's reward minus A's).
PAIR_SORTS = (
    ("order:asc", "as in the file"), ("delta:asc", "B - A reward, lowest first"),
    ("delta:desc", "B - A reward, highest first"), ("turns:desc", "turns (longer of A, B)"),
    ("tokens:desc", "tokens (A + B), most first"),
)
#: The filter choices of a side-by-side page: (tag, label).
PAIR_SHOWS = (
    ("", "all pairs"), ("changed", "reward changed"), ("flip", "flipped (solved in one only)"),
    ("a-only", "A solved, B not"), ("b-only", "B solved, A not"),
    ("failed", "failures (A or B)"), ("both-failed", "failed in both"),
)
#: What each kind of change is called (:func:`change_kind`).
KINDS = {"a-only": "A solved, B not", "b-only": "B solved, A not",
         "up": "reward up", "down": "reward down"}


# ------------------------------------------------------------------------------- episodes
def reward_of(record: Mapping[str, Any]) -> float:
    """Return an episode's reward (0 for an episode that ended without one)."""
    reward = record.get("reward")
    return float(reward) if isinstance(reward, (int, float)) else 0.0


def solved(record: Mapping[str, Any]) -> bool:
    """Return whether an episode is solved: its reward reaches :data:`SOLVED`."""
    return reward_of(record) >= SOLVED


def tokens_of(record: Mapping[str, Any]) -> int:
    """Return the tokens of an episode's model calls, input and output."""
    return int(record.get("input_tokens") or 0) + int(record.get("output_tokens") or 0)


def change_kind(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Return how a paired episode changed from A to B (a key of :data:`KINDS`), or None."""
    if solved(a) != solved(b):
        return "a-only" if solved(a) else "b-only"
    delta = reward_of(b) - reward_of(a)
    if abs(delta) < 1e-9:
        return None
    return "up" if delta > 0 else "down"


@dataclass
class TurnGroup:
    """The turns of one subgoal (or one step) of an episode.

    Attributes:
        label: what the group is (``Subgoal 2``, ``Subgoals 1-3``, ``Step 4``...).
        number: the prefix of its turns' numbers (``2``: turns 2.1, 2.2...).
        turns: its turns, as recorded.
    """

    label: str
    number: str
    turns: list[Mapping[str, Any]] = field(default_factory=list)


def subgoal_groups(turns: Sequence[Any]) -> list[TurnGroup]:
    """Group an episode's turns by subgoal.

    When a model output of the episode holds ``Subgoal k:`` labels (Lumos-I's planner,
    Lumos-O's plan, the integrated policy), each model turn with labels starts the group of
    its subgoal(s); a later model turn of a role that gave subgoals but gives none now (the
    planner's "Yes, I will stop planning.") starts a group of its own, numbered after the last
    subgoal (``3+``). Without any label (ReAct, CoT, direct) each model turn starts a step.
    Env steps and notes stay in the group of the model turn before them; turns before the
    first group are group ``0``.
    """
    turns = [t for t in turns if isinstance(t, Mapping)]
    labelled = any("role" in t and SUBGOAL.search(str(t.get("output", ""))) for t in turns)
    groups: list[TurnGroup] = []
    planners: set[str] = set()
    last = step = 0
    for turn in turns:
        role = turn.get("role")
        if role is not None and labelled:
            numbers = [int(n) for n in SUBGOAL.findall(str(turn.get("output", "")))]
            if numbers:
                planners.add(str(role))
                first, last = numbers[0], numbers[-1]
                groups.append(TurnGroup(f"Subgoal {first}", str(first)) if first == last else
                              TurnGroup(f"Subgoals {first}-{last}", f"{first}-{last}"))
            elif role in planners:
                groups.append(TurnGroup(f"No new subgoal (after subgoal {last})", f"{last}+"))
        elif role is not None:
            step += 1
            groups.append(TurnGroup(f"Step {step}", str(step)))
        if not groups:
            groups.append(TurnGroup("Before the first subgoal" if labelled else "Start", "0"))
        groups[-1].turns.append(turn)
    return groups


def _groups_html(groups: Sequence[TurnGroup], base: Path, page_dir: Path) -> str:
    """The HTML of turn groups: each group's label, then its turns numbered ``<group>.<n>``."""
    parts = []
    for group in groups:
        turns = "".join(
            f'<div class="numbered"><span class="turn-no">{_e(group.number)}.{n}</span>'
            f"{_turn_html(turn, base, page_dir)}</div>"
            for n, turn in enumerate(group.turns, 1)
        )
        parts.append(f'<div class="group"><div class="group-head">{_e(group.label)}</div>'
                     f"{turns}</div>")
    return "".join(parts)


def anchor(record: Mapping[str, Any]) -> str:
    """Return the id an episode has on every page: from its env, task and seed."""
    return "ep-" + hashlib.sha1(pair_key(record).encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------------- runs
@dataclass
class ViewedRun:
    """One run shown by the viewer.

    Attributes:
        label: ``A`` or ``B``.
        folder: the page folder of its episode pages (``a`` or ``b``).
        entry: the run as the leaderboard reads it (records by env, cells, agent, models).
        homes: episode key → the results folder its record came from (images are relative
            to it).
        warnings: what was wrong reading it.
    """

    label: str
    folder: str
    entry: Entry
    homes: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        """Return ``A: <name>``."""
        return f"{self.label}: {self.entry.name}"

    def home(self, record: Mapping[str, Any]) -> Path:
        """Return the results folder a record came from (images are relative to it)."""
        return self.homes.get(str(record.get("key")), self.entry.dirs[0].path)


def load_run(path: str | Path, label: str = "A") -> ViewedRun:
    """Read the run at ``path`` (a results folder, or the folders of one run).

    Raises:
        LeaderboardError: nothing readable there, or the results of several runs (other
            agents or models): name one of them.
    """
    board = load_board([path])
    if len(board.entries) > 1:
        names = ", ".join(e.name for e in board.entries)
        raise LeaderboardError(f"{path} holds {len(board.entries)} runs ({names}); view one "
                               "of them, or two with lumos-gym view A B")
    entry = board.entries[0]
    homes: dict[str, Path] = {}
    for folder in entry.dirs:  # the first folder holding an episode is the one shown
        homes.update({r["key"]: folder.path for r in folder.records if r["key"] not in homes})
    return ViewedRun(label, label.lower(), entry, homes, list(board.warnings))


def _link(target: Path, page_dir: Path, fragment: str = "") -> str:
    """A relative, quoted href from a page in ``page_dir`` to ``target``."""
    href = quote(os.path.relpath(target, page_dir).replace(os.sep, "/"))
    return _e(href + (f"#{fragment}" if fragment else ""))


def _env_page(out: Path, folder: str, env_id: str) -> Path:
    return out / folder / f"{_slug(short_env(env_id))}.html"


def _controls(shows: Sequence[tuple[str, str]], sorts: Sequence[tuple[str, str]]) -> str:
    """The filter, sort and search of an episode list."""
    def options(choices: Sequence[tuple[str, str]]) -> str:
        return "".join(f'<option value="{_e(v)}">{_e(label)}</option>' for v, label in choices)

    return (f'<p><label>show <select id="show">{options(shows)}</select></label>'
            f'<label>sort <select id="sort">{options(sorts)}</select></label>'
            '<input id="filter" type="search" placeholder="search episodes" '
            'aria-label="search episodes"> <span id="shown"></span></p>')


def _view_page(title: str, body: str, script: str) -> str:
    return _page(title, f"<style>{_VIEW_CSS}</style>{body}", script)


# -------------------------------------------------------------------------- episode pages
def _run_tags(record: Mapping[str, Any]) -> str:
    """The filter tags of an episode: solved or failed, and its status."""
    outcome = "solved" if solved(record) else "failed"
    return f"{outcome} status-{_slug(str(record.get('status')))}"


def _length_note(record: Mapping[str, Any], groups: int, link: str = "") -> str:
    turns = len(record.get("turns") or [])
    return (f'<div class="note">{turns} turns in {groups} group(s) · {tokens_of(record)} tokens '
            f"(input + output){link}</div>")


def _episode_section(
    run: ViewedRun, record: Mapping[str, Any], n: int, page_dir: Path, pair_page: Path | None
) -> str:
    """One episode of an episode page, with its filter and sort attributes."""
    base = run.home(record)
    groups = subgoal_groups(record.get("turns") or [])
    link = (f' · <a href="{_link(pair_page, page_dir, anchor(record))}">side by side</a>'
            if pair_page is not None else "")
    return (
        f'<section class="episode" id="{anchor(record)}" data-tags="{_e(_run_tags(record))}" '
        f'data-reward="{reward_of(record)}" data-turns="{len(record.get("turns") or [])}" '
        f'data-tokens="{tokens_of(record)}" data-order="{n}">'
        f"{_episode_info(as_shown(record), base, page_dir)}"
        f"{_length_note(record, len(groups), link)}"
        "<details open><summary>turns, numbered by subgoal</summary>"
        f"{_groups_html(groups, base, page_dir)}</details></section>"
    )


def render_run_page(
    run: ViewedRun, env_id: str, page: Path, index: Path, *,
    pair_page: Path | None = None, paired: frozenset[str] = frozenset(),
) -> str:
    """Render one run's episodes on one env: filterable, sortable, searchable.

    Episodes whose :func:`~lumos_gym.leaderboard.stats.pair_key` is in ``paired`` link to
    their side-by-side view on ``pair_page``.
    """
    records = run.entry.records.get(env_id, [])
    page_dir = page.parent
    shows = [("", "all episodes"), ("failed", f"failures (reward below {SOLVED:g})"),
             ("solved", "solved")]
    shows += [(f"status-{_slug(s)}", f"status {s}")
              for s in sorted({str(r.get("status")) for r in records})]
    sections = "".join(
        _episode_section(run, r, n, page_dir, pair_page if pair_key(r) in paired else None)
        for n, r in enumerate(records)
    )
    failed = sum(not solved(r) for r in records)
    body = (
        f'<p><a href="{_link(index, page_dir)}">&larr; index</a></p>'
        f"<h1>{_e(run.title)} on {_e(short_env(env_id))}</h1>"
        f'<p class="note">agent {_e(run.entry.agent)} · models {_e(run.entry.models)} · '
        f"{len(records)} episodes: {len(records) - failed} solved, {failed} failed (a failure: "
        f"reward below {SOLVED:g}, whatever the status) · primary metric "
        f"{_e(cell_text(run.entry.cells.get(env_id)))}. Turns are grouped by subgoal and "
        "numbered subgoal.turn (by model turn, step.turn, for agents without subgoals).</p>"
        + _controls(shows, RUN_SORTS)
        + f'<div id="items">{sections}</div>'
        + ("" if records else "<p>no episode records (summary only)</p>")
    )
    return _view_page(f"{run.title} on {short_env(env_id)}", body, _LIST_JS)


# ------------------------------------------------------------------------- side by side
def _pair_tags(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The filter tags of a pair: changed, flip and its side, failed, both-failed."""
    kind = change_kind(a, b)
    tags = ["changed"] if kind else []
    if kind in ("a-only", "b-only"):
        tags += ["flip", str(kind)]
    if not (solved(a) and solved(b)):
        tags.append("failed")
    if not (solved(a) or solved(b)):
        tags.append("both-failed")
    return " ".join(tags)


def as_shown(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as an episode's heading shows it.

    A completed episode below :data:`SOLVED` gets the status ``completed, failed`` (not the
    green badge of ``completed``, which reads as solved), and an empty prediction reads
    ``(empty)`` rather than nothing. The filter tags still use the recorded status.
    """
    shown = dict(record)
    if shown.get("status") == "completed" and reward_of(record) < SOLVED:
        shown["status"] = "completed, failed"
    if shown.get("prediction") == "":
        shown["prediction"] = "(empty)"
    return shown


def _kind_badge(kind: str | None) -> str:
    if kind is None:
        return '<span class="kind">same reward</span>'
    return f'<span class="kind kind-{kind}">{_e(KINDS[kind])}</span>'


def _pair_section(
    runs: tuple[ViewedRun, ViewedRun], pair: tuple[Mapping[str, Any], Mapping[str, Any]],
    n: int, page: Path, out: Path,
) -> str:
    """One paired episode: both runs' facts, then their turn groups side by side, in order."""
    page_dir = page.parent
    groups = [subgoal_groups(record.get("turns") or []) for record in pair]
    heads, homes = [], [run.home(record) for run, record in zip(runs, pair, strict=True)]
    for run, record, home, own in zip(runs, pair, homes, groups, strict=True):
        target = _env_page(out, run.folder, str(record["env_id"]))
        link = f' · <a href="{_link(target, page_dir, anchor(record))}">{_e(run.label)} page</a>'
        heads.append(_episode_info(as_shown(record), home, page_dir, task=False)
                     + _length_note(record, len(own), link))
    rows = [f"<tr><td>{heads[0]}</td><td>{heads[1]}</td></tr>"]
    for i in range(max(len(g) for g in groups)):
        cells = [_groups_html(own[i : i + 1], home, page_dir)
                 for own, home in zip(groups, homes, strict=True)]
        rows.append(f"<tr><td>{cells[0]}</td><td>{cells[1]}</td></tr>")
    a, b = pair
    return (
        f'<section class="episode" id="{anchor(a)}" data-tags="{_e(_pair_tags(a, b))}" '
        f'data-delta="{reward_of(b) - reward_of(a)}" '
        f'data-turns="{max(len(r.get("turns") or []) for r in pair)}" '
        f'data-tokens="{tokens_of(a) + tokens_of(b)}" data-order="{n}">'
        f"<h3>{_e(a.get('task_id'))} · seed {_e(a.get('seed'))} "
        f"{_kind_badge(change_kind(a, b))}</h3>"
        f'<div><span class="label">task</span>{_long_text(a.get("task", ""))}</div>'
        f'<table class="side"><thead><tr><th>{_e(runs[0].title)}</th>'
        f'<th>{_e(runs[1].title)}</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</section>"
    )


def render_pair_page(
    runs: tuple[ViewedRun, ViewedRun], env_id: str,
    pairs: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]], page: Path, out: Path,
) -> str:
    """Render the paired episodes of two runs on one env, side by side, subgoal by subgoal."""
    sections = "".join(_pair_section(runs, (a, b), n, page, out)
                       for n, (_, a, b) in enumerate(pairs))
    body = (
        f'<p><a href="{_link(out / "index.html", page.parent)}">&larr; index</a> · '
        f'<a href="{_link(out / "diff.html", page.parent)}">flipped tasks</a></p>'
        f"<h1>{_e(runs[0].title)} vs {_e(runs[1].title)} on {_e(short_env(env_id))}</h1>"
        f'<p class="note">{len(pairs)} episodes of the same task and seed in both runs; each '
        "row of a pair holds the same position's subgoal (or step) of A and of B. A failure: "
        f"reward below {SOLVED:g}, whatever the status.</p>"
        + _controls(PAIR_SHOWS, PAIR_SORTS)
        + f'<div id="items">{sections}</div>'
    )
    return _view_page(f"{runs[0].entry.name} vs {runs[1].entry.name} on {short_env(env_id)}",
                      body, _LIST_JS)


# ------------------------------------------------------------------------ flips and index
def _num_cell(value: float | int, text: object | None = None) -> str:
    shown = _short(value) if text is None else text
    return f'<td class="num" data-value="{value}">{_e(shown)}</td>'


def _heads(names: Sequence[str], numeric: Sequence[str] = ()) -> str:
    return "".join(f'<th data-type="{"num" if n in numeric else "text"}">{_e(n)}</th>'
                   for n in names)


def _table(table_id: str, heads: str, rows: Sequence[str]) -> str:
    return (f'<div class="wrap"><table id="{table_id}" class="sortable"><thead><tr>{heads}</tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></div>')


_SEARCH = ('<p><input id="filter" type="search" placeholder="filter rows" '
           'aria-label="filter rows"> <span id="shown"></span></p>')


def render_flips(runs: tuple[ViewedRun, ViewedRun], pairing: Pairing, out: Path) -> str:
    """Render the page of every paired episode whose reward changed from A to B."""
    page_dir = out
    rows, counts = [], dict.fromkeys(KINDS, 0)
    for env_id, pairs in pairing.pairs.items():
        for _, a, b in pairs:
            kind = change_kind(a, b)
            if kind is None:
                continue
            counts[kind] += 1
            href = _link(_env_page(out, "diff", env_id), page_dir, anchor(a))
            rows.append(
                f'<tr data-kind="{kind}"><td class="name">{_e(short_env(env_id))}</td>'
                f'<td><a href="{href}">{_e(a.get("task_id"))}</a></td>'
                + _num_cell(int(a.get("seed") or 0))
                + f'<td>{_e(a.get("status"))}</td>{_num_cell(reward_of(a))}'
                + f'<td>{_e(b.get("status"))}</td>{_num_cell(reward_of(b))}'
                + _num_cell(reward_of(b) - reward_of(a), f"{reward_of(b) - reward_of(a):+.3g}")
                + f'<td class="name">{_e(KINDS[kind])}</td></tr>'
            )
    heads = _heads(["env", "task", "seed", "A status", "A reward", "B status", "B reward",
                    "B - A", "change"], numeric=("seed", "A reward", "B reward", "B - A"))
    summary = "; ".join(f"{label}: {counts[kind]}" for kind, label in KINDS.items())
    body = (
        f'<p><a href="index.html">&larr; index</a></p>'
        f"<h1>Flipped tasks: {_e(runs[0].title)} vs {_e(runs[1].title)}</h1>"
        f'<p class="note">Every episode of the same env, task and seed in both runs whose reward '
        f"changed ({summary}). Solved: reward {SOLVED:g} or more. Click a task for the two "
        "runs side by side, a header to sort.</p>" + _SEARCH
        + (_table("flips", heads, rows) if rows else "<p>No paired episode changed its reward.</p>")
        + _unpaired_html(pairing)
    )
    return _view_page("flipped tasks", body, _BOARD_JS)


def _unpaired_html(pairing: Pairing) -> str:
    """Notes on the episodes of one run only, and on task ids whose texts differ."""
    notes = []
    for side, counts in (("A", pairing.only_a), ("B", pairing.only_b)):
        if counts:
            shown = ", ".join(f"{short_env(env)} {n}" for env, n in sorted(counts.items()))
            notes.append(f"Episodes only {side} has (not compared): {shown}.")
    if pairing.mismatched:
        notes.append(f"{len(pairing.mismatched)} episode(s) show different task texts under one "
                     f"id (not compared), e.g. {pairing.mismatched[0]}.")
    return "".join(f'<p class="note">{_e(n)}</p>' for n in notes)


def _run_rows(run: ViewedRun, out: Path) -> list[str]:
    """The index rows of one run: one per env, linking to its episode page."""
    rows = []
    for env_id in _envs(run):
        records = run.entry.records.get(env_id, [])
        done = sum(solved(r) for r in records)
        mean_turns = sum(len(r.get("turns") or []) for r in records) / max(1, len(records))
        mean_tokens = sum(tokens_of(r) for r in records) / max(1, len(records))
        href = _link(_env_page(out, run.folder, env_id), out)
        rows.append(
            f'<tr><td class="name"><a href="{href}">{_e(short_env(env_id))}</a></td>'
            + _num_cell(len(records)) + _num_cell(done) + _num_cell(len(records) - done)
            + f"<td>{_e(cell_text(run.entry.cells.get(env_id)))}</td>"
            + _num_cell(mean_turns, f"{mean_turns:.1f}")
            + _num_cell(mean_tokens, f"{mean_tokens:.0f}") + "</tr>"
        )
    return rows


def _pair_rows(runs: tuple[ViewedRun, ViewedRun], pairing: Pairing, out: Path) -> list[str]:
    """The index rows of two runs: per env, the paired episodes and how they changed."""
    rows = []
    for env_id, pairs in pairing.pairs.items():
        kinds = [change_kind(a, b) for _, a, b in pairs]
        links = " · ".join(
            f'<a href="{_link(_env_page(out, folder, env_id), out)}">{label}</a>'
            for folder, label in (("a", "A"), ("b", "B"), ("diff", "side by side"))
        )
        rows.append(
            f'<tr><td class="name">{_e(short_env(env_id))}</td>' + _num_cell(len(pairs))
            + _num_cell(sum(solved(a) for _, a, _ in pairs))
            + _num_cell(sum(solved(b) for _, _, b in pairs))
            + "".join(_num_cell(kinds.count(kind)) for kind in KINDS)
            + "".join(f"<td>{_e(cell_text(run.entry.cells.get(env_id)))}</td>" for run in runs)
            + f"<td>{links}</td></tr>"
        )
    return rows


def _envs(run: ViewedRun) -> list[str]:
    return sorted(set(run.entry.records) | set(run.entry.cells))


def _run_note(run: ViewedRun) -> str:
    folders = ", ".join(str(d.path) for d in run.entry.dirs)
    return (f'<p class="note"><b>{_e(run.title)}</b>: agent {_e(run.entry.agent)} · models '
            f"{_e(run.entry.models)} · {len(run.entry.dirs)} results folder(s): "
            f"{_e(folders)}</p>")


def _agreement_html(pairing: Pairing) -> str:
    """The table of episodes and module outputs the two runs wrote alike."""
    headers, rows = agreement_rows(agreement(pairing), short_env)
    cells = ["<tr>" + "".join(_num_cell(c) if isinstance(c, int) else f"<td>{_e(c)}</td>"
                              for c in row) + "</tr>" for row in rows]
    return ("<h2>The same outputs</h2>" f'<p class="note">{_e(AGREEMENT_NOTE)}</p>'
            + _table("same", _heads(headers, numeric=("paired", "calls compared")), cells))


def render_index(
    runs: Sequence[ViewedRun], pairing: Pairing | None, out: Path
) -> str:
    """Render the index: each run's envs, and for two runs how their paired episodes changed."""
    parts = [f"<h1>{_e(' vs '.join(run.title for run in runs))}</h1>"]
    parts += [_run_note(run) for run in runs]
    if pairing is not None:
        heads = _heads(["env", "paired", "A solved", "B solved", *KINDS.values(),
                        "A primary metric", "B primary metric", "pages"],
                       numeric=("paired", "A solved", "B solved", *KINDS.values()))
        parts += [
            "<h2>Paired episodes</h2>",
            f'<p class="note">Episodes pair by env, task and seed. Solved: reward {SOLVED:g} or '
            'more. <a href="diff.html">Every flipped task</a>.</p>',
            _table("pairs", heads, _pair_rows((runs[0], runs[1]), pairing, out)),
            _unpaired_html(pairing),
            _agreement_html(pairing),
        ]
    heads = _heads(["env", "episodes", "solved", "failed", "primary metric [95% interval]",
                    "mean turns", "mean tokens"],
                   numeric=("episodes", "solved", "failed", "mean turns", "mean tokens"))
    for run in runs:
        parts += [f"<h2>{_e(run.title)}</h2>", _table(f"run-{run.folder}", heads,
                                                      _run_rows(run, out))]
    warnings = [w for run in runs for w in run.warnings]
    if warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings)
                     + "</ul>")
    body = parts[0] + _SEARCH + "".join(parts[1:])  # the search filters every table
    return _view_page(" vs ".join(run.entry.name for run in runs), body, _BOARD_JS)


# -------------------------------------------------------------------------------- writing
def _records(run: ViewedRun) -> list[dict[str, Any]]:
    return [r for records in run.entry.records.values() for r in records]


def write_view(first: ViewedRun, second: ViewedRun | None, out: str | Path) -> list[Path]:
    """Write the viewer's pages of one run, or of two runs compared, into the folder ``out``.

    Returns:
        every page written, ``index.html`` first.
    """
    out = Path(out)
    runs = (first,) if second is None else (first, second)
    pairing = pair_records(_records(first), _records(second)) if second is not None else None
    paired = frozenset(k for pairs in (pairing.pairs.values() if pairing else ())
                       for k, _, _ in pairs)
    index = out / "index.html"
    written = [index]
    pages: dict[Path, str] = {}
    for run in runs:
        for env_id in _envs(run):
            page = _env_page(out, run.folder, env_id)
            pair_page = (_env_page(out, "diff", env_id)
                         if pairing is not None and env_id in pairing.pairs else None)
            pages[page] = render_run_page(run, env_id, page, index, pair_page=pair_page,
                                          paired=paired)
    if pairing is not None and second is not None:
        for env_id, pairs in pairing.pairs.items():
            page = _env_page(out, "diff", env_id)
            pages[page] = render_pair_page((first, second), env_id, pairs, page, out)
        pages[out / "diff.html"] = render_flips((first, second), pairing, out)
    pages[index] = render_index(runs, pairing, out)
    for page, text in pages.items():
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
        if page != index:
            written.append(page)
    return written


def default_out(first: str | Path, second: ViewedRun | None = None) -> Path:
    """Return where the pages go without ``--out``: ``view`` under the first results folder.

    Two runs go to ``view-vs-<second run's name>`` there, so that comparisons with several
    runs do not overwrite one another.
    """
    name = VIEW_FOLDER if second is None else f"{VIEW_FOLDER}-vs-{_slug(second.entry.name)}"
    return Path(first) / name


def serve_folder(folder: str | Path, port: int) -> ThreadingHTTPServer:
    """Return an HTTP server of the files of ``folder`` on 127.0.0.1 (loopback only).

    ``port`` 0 takes any free port (``server.server_address[1]`` says which). The caller runs
    ``serve_forever`` and closes it.

    Raises:
        LeaderboardError: the port cannot be bound (in use, or not allowed).
    """
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    try:
        return ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as e:
        raise LeaderboardError(f"cannot serve on 127.0.0.1:{port} ({e}); choose another port "
                               "with --serve PORT (0: any free one)") from None
