"""``lumos-gym view``: a run's episode pages and two runs compared, in files and in a browser.

Both runs are written by the real ``evaluate`` (Lumos-I on two math envs, its planner and
grounder scripted), so a change of the results format or of Lumos-I's turns breaks these tests.
Run A plans one subgoal and solves the even questions; run B plans two subgoals, solves every
third question and fails with an error on others: tasks flip both ways between them.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import threading
import urllib.request

import gymnasium as gym
import pytest
from conftest import ScriptedBackend, browse, chromium

from lumos_gym.cli import main
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.results import read_results
from lumos_gym.leaderboard.render import LeaderboardError
from lumos_gym.leaderboard.viewer import (
    change_kind,
    default_out,
    load_run,
    serve_folder,
    solved,
    subgoal_groups,
    write_view,
)
from lumos_gym.models.base import Completion

ENVS = ["GSM8K-v0", "SVAMP-v0"]
LIMIT = 6
QUESTION = re.compile(r"Task: (.*?); Initial Environment", re.DOTALL)


def _questions():
    """Each question of the envs → (its position in its env, its gold answer)."""
    found = {}
    for env_id in ENVS:
        env = gym.make(f"lumos/{env_id}")
        found.update({t.question: (n, str(t.answer)) for n, t in enumerate(env.unwrapped.tasks)})
        env.close()
    return found


def _planner(subgoals: int, right):
    """A planner writing ``subgoals`` subgoals ("Compute <expression>"), the last one the
    gold answer where ``right(position)`` holds (else the answer plus 1), then stopping."""
    questions = _questions()

    def plan(request):
        position, gold = questions[QUESTION.findall(request.prompt)[-1].strip()]
        if right(position) is None:  # the request's own failure: an agent-error
            return Completion("", "error", error="the planner refused the request")
        done = request.prompt.count("The executed result for Subgoal")
        if done == subgoals:
            return "Yes, I will stop planning."
        value = (gold if right(position) else f"{gold} + 1") if done + 1 == subgoals else "1"
        keep = "No, I will keep planning. " if done else ""
        return f"{keep}Subgoal {done + 1}: Compute {value}"

    return plan


def _grounder(request):
    """Ground ``Subgoal k: Compute X`` as ``Rk = Calculator(X)``."""
    k, value = re.findall(r"Subgoal (\d+): Compute (.*)", request.prompt)[-1]
    return f"R{k} = Calculator({value})"


def _run(out, planner, name):
    backends = {"planner": ScriptedBackend(planner), "grounder": ScriptedBackend(_grounder)}
    for backend in backends.values():
        backend.name = name  # another model: another configuration, another run
    evaluate(RunConfig("lumos-i", envs=ENVS, limit=LIMIT, out=out, progress=False,
                       backends=backends,
                       models=ModelOptions(batch_size=1)))  # errors stay per episode


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """results/a (one subgoal, even questions solved), results/b (two subgoals, every third
    question solved, errors on the questions after those)."""
    root = tmp_path_factory.mktemp("results")
    _run(root / "a", _planner(1, lambda n: n % 2 == 0), "scripted-a")
    _run(root / "b", _planner(2, lambda n: None if n % 3 == 1 else n % 3 == 0), "scripted-b")
    return root


def _records(folder):
    return {(r["env_id"], r["task_id"]): r for r in read_results(folder).records.values()}


def _sections(html):
    """(id, tags, hidden) of each episode section, in the page's order."""
    return [(m[0], m[1].split(), bool(m[2])) for m in re.findall(
        r'<section class="episode" id="([^"]+)" data-tags="([^"]*)"[^>]*?( hidden="")?>', html)]


# ------------------------------------------------------------------------- turn groups
def test_turns_are_grouped_and_numbered_by_subgoal(runs):
    a, b = _records(runs / "a"), _records(runs / "b")
    record = next(r for r in b.values() if r["status"] == "completed")
    groups = subgoal_groups(record["turns"])
    assert [(g.label, g.number, len(g.turns)) for g in groups] == [
        ("Subgoal 1", "1", 3), ("Subgoal 2", "2", 3),
        ("No new subgoal (after subgoal 2)", "2+", 2)]
    assert [t.get("role") for t in groups[0].turns] == ["planner", "grounder", None]
    assert len(subgoal_groups(next(iter(a.values()))["turns"])) == 2
    # a plan in one turn (Lumos-O), and an agent without subgoals (ReAct): one step a model turn
    plan = [{"role": "planner", "output": "Subgoal 1: x; Subgoal 2: y; Subgoal 3: z"},
            {"role": "grounder", "output": "R1 = A(); R2 = B()"},
            {"action": "R1 = A(); R2 = B()", "observation": "R1 = 1"}]
    assert [(g.label, g.number) for g in subgoal_groups(plan)] == [("Subgoals 1-3", "1-3")]
    react = [{"action": "Look()", "observation": "a room"},
             {"role": "policy", "output": "Thought: t\nAction: Go()"},
             {"action": "Go()", "observation": "moved"},
             {"role": "policy", "output": "Thought: done\nAction: Stop()"}]
    assert [(g.label, len(g.turns)) for g in subgoal_groups(react)] == [
        ("Start", 1), ("Step 1", 2), ("Step 2", 1)]


# ------------------------------------------------------------------------------ pages
def test_two_runs_list_the_flipped_tasks_and_pair_each_episode(runs, tmp_path):
    a, b = _records(runs / "a"), _records(runs / "b")
    assert a.keys() == b.keys() and len(a) == LIMIT * len(ENVS)
    a_only = {k for k in a if solved(a[k]) and not solved(b[k])}
    b_only = {k for k in a if solved(b[k]) and not solved(a[k])}
    assert a_only and b_only  # flips both ways
    # a completed episode with a wrong answer is a failure, as is an agent error
    statuses = {(r["status"], solved(r)) for r in b.values()}
    assert {("completed", False), ("agent-error", False), ("completed", True)} <= statuses

    written = write_view(load_run(runs / "a"), load_run(runs / "b", "B"), tmp_path / "site")
    site = tmp_path / "site"
    assert written[0] == site / "index.html"
    assert {p.relative_to(site).as_posix() for p in written} == {
        "index.html", "diff.html", *(f"{d}/{e}.html" for d in "ab" for e in ENVS),
        *(f"diff/{e}.html" for e in ENVS)}
    flips = (site / "diff.html").read_text()
    listed = set(re.findall(r'<tr data-kind="([^"]+)"><td class="name">([^<]+)</td>'
                            r'<td><a href="[^"]+">([^<]+)</a>', flips))
    assert {(k, t) for k, _, t in listed if k == "a-only"} == {("a-only", t) for _, t in a_only}
    assert {(k, t) for k, _, t in listed if k == "b-only"} == {("b-only", t) for _, t in b_only}
    assert all(change_kind(a[(f"lumos/{e}", t)], b[(f"lumos/{e}", t)]) == k for k, e, t in listed)
    assert f"A solved, B not: {len(a_only)}; B solved, A not: {len(b_only)}" in flips

    pairs = (site / "diff" / "GSM8K-v0.html").read_text()
    env_pairs = [k for k in a if k[0] == "lumos/GSM8K-v0"]
    assert len(_sections(pairs)) == len(env_pairs)
    assert pairs.count("<th>A: a</th><th>B: b</th>") == len(env_pairs)
    assert '<option value="flip">' in pairs and '<option value="delta:desc">' in pairs
    flipped = [tags for _, tags, _ in _sections(pairs) if "flip" in tags]
    assert len(flipped) == len([k for k in a_only | b_only if k[0] == "lumos/GSM8K-v0"])
    # side by side: A's Subgoal 1 beside B's Subgoal 1, B's Subgoal 2 beside A's stop turn
    assert re.search(r'<tr><td><div class="group"><div class="group-head">Subgoal 1</div>.*?'
                     r'</td><td><div class="group"><div class="group-head">Subgoal 1</div>',
                     pairs)
    index = (site / "index.html").read_text()
    assert "A: a vs B: b" in index and 'href="diff.html"' in index
    assert 'href="diff/GSM8K-v0.html"' in index and 'href="a/SVAMP-v0.html"' in index
    # the planners differ from the first call: one call compared an episode, none the same
    same = index.split("<h2>The same outputs</h2>", 1)[1]
    episodes = len(a)
    assert (f'<td>all</td><td class="num" data-value="{episodes}">{episodes}</td>'
            f'<td>0/{episodes}</td><td class="num" data-value="{episodes}">{episodes}</td>'
            f'<td>0/{episodes} (0.0%)</td>') in same
    for page in written:  # nothing to fetch from a network
        assert not re.search(r'(src|href)="(https?:)?//', page.read_text())


def test_a_run_page_numbers_turns_by_subgoal_and_offers_the_filters(runs, tmp_path):
    site = tmp_path / "site"
    write_view(load_run(runs / "a"), None, site)
    page = (site / "a" / "GSM8K-v0.html").read_text()
    assert not (site / "diff.html").exists()
    for number in ("1.1", "1.2", "1.3", "1+.1", "1+.2"):  # planner, grounder, step; stop, answer
        assert f'<span class="turn-no">{number}</span>' in page
    assert '<div class="group-head">Subgoal 1</div>' in page
    for option in ('value="failed"', 'value="solved"', 'value="status-completed"',
                   'value="reward:asc"', 'value="turns:desc"', 'value="tokens:desc"'):
        assert option in page
    assert 'id="filter" type="search"' in page
    records = _records(runs / "a")
    failed = {r["task_id"] for r in records.values()
              if r["env_id"] == "lumos/GSM8K-v0" and not solved(r)}
    tagged = [tags for _, tags, _ in _sections(page)]
    assert sum("failed" in tags for tags in tagged) == len(failed) > 0
    assert all("status-completed" in tags for tags in tagged)  # failures, yet all completed


# ---------------------------------------------------------------------------------- CLI
def test_cli_writes_under_the_results_folder_reads_gz_and_names_bad_input(runs, tmp_path,
                                                                          capsys):
    folder = tmp_path / "a"
    shutil.copytree(runs / "a", folder)
    episodes = folder / "episodes.jsonl"
    (folder / "episodes.jsonl.gz").write_bytes(gzip.compress(episodes.read_bytes()))
    episodes.unlink()  # a published results folder: gzipped
    assert main(["view", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"view: {folder / 'view' / 'index.html'} (3 pages in {folder / 'view'}" in out
    assert "the default: under RESULTS" in out
    assert len(_sections((folder / "view" / "a" / "SVAMP-v0.html").read_text())) == LIMIT

    other = load_run(runs / "b", "B")
    assert default_out(folder, other) == folder / "view-vs-b"
    assert main(["view", str(folder), str(runs / "b"), "--out", str(tmp_path / "x")]) == 0
    assert "(8 pages in" in capsys.readouterr().out
    assert json.loads((folder / "run.json").read_text())["agent"]["name"] == "lumos-i"

    assert main(["view", str(runs)]) == 2  # two runs in one argument
    assert "holds 2 runs (a, b)" in capsys.readouterr().err
    with pytest.raises(LeaderboardError, match="no such results folder"):
        load_run(tmp_path / "nowhere")


def test_serve_on_loopback(runs, tmp_path):
    site = tmp_path / "site"
    write_view(load_run(runs / "a"), None, site)
    server = serve_folder(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://{host}:{port}/a/GSM8K-v0.html", timeout=10) as r:
            assert r.status == 200 and b"Subgoal 1" in r.read()
        with pytest.raises(LeaderboardError, match=f"cannot serve on 127.0.0.1:{port}"):
            serve_folder(site, port)  # the port is taken
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# ------------------------------------------------------------------------------ browser
def test_filter_sort_and_search_in_headless_chromium(runs, tmp_path):
    assert chromium()  # skips the test where chromium is not installed
    site = tmp_path / "site"
    write_view(load_run(runs / "a"), load_run(runs / "b", "B"), site)
    page = site / "b" / "GSM8K-v0.html"
    written = _sections(page.read_text())
    assert not any(hidden for _, _, hidden in written)

    # failures only (whatever the status), the highest reward first: failures are all 0
    dom = browse(tmp_path, page.as_uri() + "#show=failed&sort=turns:desc", "--dump-dom")
    assert 'data-ready="1"' in dom and 'data-sorted-by="turns:desc"' in dom
    shown = _sections(dom)
    assert {i for i, tags, hidden in shown if not hidden} == {
        i for i, tags, _ in written if "failed" in tags}
    assert any(hidden for _, _, hidden in shown)
    turns = [int(n) for n in re.findall(r'<section class="episode"[^>]*data-turns="(\d+)"', dom)]
    assert turns == sorted(turns, reverse=True) and turns != sorted(turns)
    assert re.search(r'id="shown">\d+ of 6 episodes', dom)

    dom = browse(tmp_path, page.as_uri() + "#sort=reward:desc", "--dump-dom")
    rewards = [float(x) for x in re.findall(r'<section class="episode"[^>]*data-reward="([^"]+)"',
                                            dom)]
    assert rewards == sorted(rewards, reverse=True) and len(set(rewards)) == 2

    # the side-by-side page: A solved, B not; then a search for one task
    pairs = site / "diff" / "GSM8K-v0.html"
    dom = browse(tmp_path, pairs.as_uri() + "#show=a-only", "--dump-dom")
    visible = [tags for _, tags, hidden in _sections(dom) if not hidden]
    assert visible and all("a-only" in tags for tags in visible)
    task = next(r["task_id"] for r in _records(runs / "a").values()
                if r["env_id"] == "lumos/GSM8K-v0")
    dom = browse(tmp_path, pairs.as_uri() + f"#q={task}", "--dump-dom")
    assert len([1 for _, _, hidden in _sections(dom) if not hidden]) >= 1
    assert re.search(rf'id="shown">\d of {LIMIT} episodes', dom)

    # the flips page: sortable by a header (B - A, ascending: A's wins first)
    dom = browse(tmp_path, (site / "diff.html").as_uri() + "#sort=7&dir=asc", "--dump-dom")
    kinds = re.findall(r'<tr data-kind="([^"]+)"', dom)
    assert kinds[0] == "a-only" and kinds[-1] == "b-only"
