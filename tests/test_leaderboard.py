"""``lumos-gym leaderboard``: ranking, the reported block, md/csv/html/png, validation, browser.

Every results folder here is written by the real ``evaluate`` (the oracle agent, and the direct
agent on a scripted model), so a change of the results format breaks these tests.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import ScriptedBackend, browse, chromium

from lumos_gym.cli import main
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.results import read_results
from lumos_gym.evaluation.summary import summarize
from lumos_gym.leaderboard.render import (
    LeaderboardError,
    attach_reference,
    diff_text,
    load_board,
    render_comparison,
    render_csv,
    render_html,
    render_markdown,
    render_png,
    reported_numbers,
    validate,
    write_board,
)
from lumos_gym.leaderboard.stats import MCNEMAR
from lumos_gym.models.base import Completion

ENVS = ["GSM8K-v0", "SVAMP-v0"]
LIMIT = 4


def _script():
    """A scripted model: right on a third of the questions, wrong on a third, refusing the
    rest (agent errors: statuses vary), with a long wrong answer somewhere (a long text)."""
    gold = {}
    for env_id in ENVS:
        env = gym.make(f"lumos/{env_id}")
        gold.update({t.question: str(t.answer) for t in env.unwrapped.tasks})
        env.close()
    ordered = sorted(gold.items())

    def answer(request):
        prompt = request.prompt or json.dumps(request.messages)
        # the task's question is in the last user turn (few-shot examples come before it)
        last = prompt.rsplit("<|user|>", 1)[-1]
        n = max((i for i, (q, _) in enumerate(ordered) if q in last),
                key=lambda i: len(ordered[i][0]), default=0)
        if n % 3 == 2:  # the request's own failure: an agent-error (not the machinery's)
            return Completion("", "error", error="the model refused the request")
        return ordered[n][1] if n % 3 == 0 else "<b>wrong</b> " + "no idea, " * 100

    return answer


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """results/oracle (one folder) and results/direct/<Env> (one folder per env, one run)."""
    root = tmp_path_factory.mktemp("results")
    evaluate(RunConfig("oracle", envs=ENVS, limit=LIMIT, out=root / "oracle", progress=False))
    script = _script()
    for env_id in ENVS:
        evaluate(RunConfig("direct", envs=[env_id], limit=LIMIT, out=root / "direct" / env_id,
                           backends={"policy": ScriptedBackend(script)}, progress=False,
                           models=ModelOptions(batch_size=1)))  # errors stay per episode
    return root


def _copy(runs, tmp_path, name):
    shutil.copytree(runs / name, tmp_path / name)
    return tmp_path / name


def _records(*folders):
    return [r for f in folders for r in read_results(f).records.values()]


# ------------------------------------------------------------------------------- ranking
def test_runs_are_grouped_ranked_and_match_the_summaries(runs, tmp_path):
    board = load_board([runs])  # a folder of folders: grouped by configuration
    # the oracle reads the gold answers: a ceiling row after the ranked ones, never ranked
    assert [e.name for e in board.entries] == ["direct", "oracle"]
    assert [(e.rank, e.rank_text, e.ceiling) for e in board.entries] == [
        (1, "1", False), (0, "ceiling", True)]
    assert board.envs == [f"lumos/{e}" for e in ENVS]
    direct, oracle = board.entries
    published = json.loads((runs / "oracle" / "summary.json").read_text())
    assert oracle.score == published["score"] and oracle.score["mean"] == 1.0
    cell = oracle.cells["lumos/GSM8K-v0"]
    assert (cell.mean, cell.ci95) == (1.0, published["envs"]["lumos/GSM8K-v0"]["ci95"])
    # the direct run spans two folders: its suite score is recomputed over both
    whole = summarize(_records(*(runs / "direct" / e for e in ENVS)))
    assert direct.score == whole["score"] and 0 < direct.score["mean"] < 1
    assert direct.cells["lumos/SVAMP-v0"].ci95 == whole["envs"]["lumos/SVAMP-v0"]["ci95"]
    assert direct.models == "policy: scripted" and direct.covered == 2
    assert load_board([runs / "oracle", runs / "direct"]).entries[0].name == "direct"
    # the same configuration given twice is two runs (e.g. two versions), named apart
    shutil.copytree(runs / "oracle", tmp_path / "again" / "oracle")
    names = [e.name for e in load_board([runs / "oracle", tmp_path / "again"]).entries]
    assert len(set(names)) == 2 and all(n.endswith("oracle") for n in names)
    assert any(n.endswith("again/oracle") for n in names)


def test_runs_of_other_adapter_weights_under_one_folder_are_other_rows(tmp_path):
    """Two training seeds' adapters carry the same names, so the same fingerprint: their runs
    are told apart by the adapters' weights, and named after their own folders."""
    root = tmp_path / "results"
    for seed in (0, 1):
        adapter = tmp_path / f"adapter-s{seed}"
        adapter.mkdir()
        (adapter / "adapter_model.safetensors").write_bytes(f"seed {seed}".encode())
        backend = ScriptedBackend(lambda request: "4", details={
            "adapter": "policy", "adapters": {"policy": str(adapter)}})
        for env_id in ENVS:  # each run spans two folders, one an env (as reproduce writes)
            evaluate(RunConfig("direct", envs=[env_id], limit=1, progress=False,
                               out=root / f"direct-s{seed}" / env_id,
                               backends={"policy": backend}))
    board = load_board([root])
    assert sorted(e.name for e in board.entries) == ["direct-s0", "direct-s1"]
    assert all(e.covered == 2 and e.episodes == 2 for e in board.entries)


def test_markdown_and_csv_tables(runs):
    board = load_board([runs / "oracle", runs / "direct"])
    assert "## Reported (Lumos paper)" not in render_markdown(board)  # only when asked for
    board.paper = True
    md = render_markdown(board)
    assert "| ceiling | oracle | oracle | - | 1.000 [1.000, 1.000] | 2/2 |" in md
    assert "Rows marked ceiling are agents that read the gold answers" in md
    direct = board.entries[0]
    cell = direct.cells["lumos/GSM8K-v0"]
    assert f"{cell.mean:.3f} [{cell.ci95[0]:.3f}, {cell.ci95[1]:.3f}]" in md
    measured, reported = md.split("## Reported (Lumos paper)")
    assert measured.count("\n| ") == 3  # header, the ranked row and the ceiling row only
    assert "| Lumos-I_Web | reported | 0.276 |" in reported and "≈0.380" in reported
    rows = list(csv.DictReader(io.StringIO(render_csv(board))))
    scores = [r for r in rows if r["env"] == "suite score"]
    assert [(r["kind"], r["rank"], r["run"]) for r in scores] == [
        ("measured", "1", "direct"), ("ceiling", "", "oracle")]
    gsm = next(r for r in rows if r["run"] == "direct" and r["env"] == "lumos/GSM8K-v0")
    assert float(gsm["ci_low"]) == cell.ci95[0] and int(gsm["episodes"]) == LIMIT
    web = next(r for r in rows if r["agent"] == "Lumos-I_Web" and r["env"] == "Mind2Web")
    assert web["kind"] == "reported" and float(web["mean"]) == pytest.approx(0.276)


def test_reported_numbers_are_data_with_a_source():
    reported = reported_numbers()
    assert "docs/lumos-format.md" in reported.source and reported.scale == 100
    names = {d["name"] for d in reported.datasets}
    for row in reported.rows:
        assert set(row["values"]) <= names, row["agent"]
        assert set(row.get("approx", [])) <= set(row["values"])
    lumos = {r["agent"]: r["values"] for r in reported.rows}
    assert lumos["Lumos-O_Math"] == {"GSM8K": 50.5, "SVAMP": 65.5}
    assert lumos["Lumos-I_All (unified)"] == {"WebShop": 39.8}


def test_old_summaries_and_suite_columns(runs, tmp_path):
    folder = _copy(runs, tmp_path, "oracle")
    summary = json.loads((folder / "summary.json").read_text())
    del summary["format"], summary["score"]  # the layout before intervals
    for env in summary["envs"].values():
        for key in ("ci95", "metrics", "primary_metric"):
            env.pop(key, None)
    (folder / "summary.json").write_text(json.dumps(summary))
    entry = load_board([folder]).entries[0]
    expected = summarize(_records(folder))
    assert entry.cells["lumos/SVAMP-v0"].ci95 == expected["envs"]["lumos/SVAMP-v0"]["ci95"]
    assert entry.score == expected["score"]
    suite = tmp_path / "two.json"
    suite.write_text(json.dumps({"name": "two", "envs": [{"env": "lumos/SVAMP-v0"},
                                                         {"env": "lumos/MBPP-v0"}]}))
    board = load_board([runs / "oracle"], suite=str(suite))
    assert board.envs == ["lumos/SVAMP-v0", "lumos/MBPP-v0"]
    assert set(board.entries[0].cells) == {"lumos/SVAMP-v0"}
    assert board.entries[0].score["envs"] == 1
    with pytest.raises(LeaderboardError, match="unknown suite"):
        load_board([runs / "oracle"], suite="no-such-suite")


def test_bad_files_are_named_and_the_valid_results_still_render(runs, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(runs, root)
    gsm = root / "direct" / "GSM8K-v0"
    (gsm / "run.json").write_text((gsm / "run.json").read_text()[:50])  # truncated
    svamp = root / "direct" / "SVAMP-v0"
    (svamp / "summary.json").write_text("{corrupt")
    lines = (svamp / "episodes.jsonl").read_text().splitlines(keepends=True)
    (svamp / "episodes.jsonl").write_text("".join(lines[:-1]) + lines[-1][:40])
    out = tmp_path / "board.md"
    # direct lost its GSM8K folder and an SVAMP episode: the rows cover different tasks
    assert main(["leaderboard", str(root), "--out", str(out)]) == 2
    assert "rows cover different tasks" in capsys.readouterr().err
    assert main(["leaderboard", str(root), "--out", str(out), "--allow-different-tasks"]) == 0
    err = capsys.readouterr().err
    assert "ranked together by --allow-different-tasks" in err
    assert f"{gsm / 'run.json'}: not valid JSON" in err and f"{gsm} skipped" in err
    assert f"{svamp / 'summary.json'}: not valid JSON" in err and "recomputed" in err
    assert f"{svamp / 'episodes.jsonl'}:{len(lines)}: a truncated last line" in err
    text = out.read_text()
    assert "| ceiling | oracle |" in text and "| 1 | direct |" in text
    direct = load_board([root / "direct"]).entries[0]
    assert set(direct.cells) == {"lumos/SVAMP-v0"}
    assert direct.cells["lumos/SVAMP-v0"].episodes == LIMIT - 1
    (root / "oracle" / "run.json").unlink()
    shutil.rmtree(root / "direct")
    assert main(["leaderboard", str(root)]) == 2
    assert "no results could be read" in capsys.readouterr().err


def test_a_folder_with_lines_that_do_not_load_is_scored_on_those_that_do(runs, tmp_path):
    folder = _copy(runs, tmp_path, "oracle")
    path = folder / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("{torn\n" + "".join(lines[1:]))  # summary.json still counts every episode
    entry = load_board([folder]).entries[0]
    counted = sum(cell.episodes for cell in entry.cells.values())
    assert counted == len(lines) - 1 == entry.episodes
    assert entry.score == summarize(_records(folder))["score"]


# ---------------------------------------------------------------------------------- html
def test_html_pages_escape_link_and_truncate(runs, tmp_path):
    root = tmp_path / "results"
    shutil.copytree(runs / "direct", root / "<b>direct&co")
    board = load_board([root, runs / "oracle"])
    record = board.entries[0].records["lumos/GSM8K-v0"][0]  # the ranked direct run
    record["images"] = ["data:image/png;base64,iVBORw0KGgo=", "javascript:alert(1)"]
    written = render_html(board, tmp_path / "site" / "board.html")
    page = written[0].read_text()
    assert "<b>direct" not in page and "&lt;b&gt;direct&amp;co" in page
    assert '<tr class="measured ceiling" data-run="oracle">' in page
    assert not re.search(r"https?://|<link|src=", page)  # self-contained: nothing to fetch
    links = re.findall(r'href="([^"]+)"', page)
    assert len(links) == 4 and all(link.startswith("board-trajectories/") for link in links)
    assert all((written[0].parent / link).is_file()
               for link in links)
    viewer = next(p for p in written if p.parent.name == "b_direct_co" and "GSM8K" in p.name)
    html_text = viewer.read_text()
    assert "<b>wrong</b>" not in html_text and "&lt;b&gt;wrong&lt;/b&gt;" in html_text
    assert "show more" in html_text
    assert html_text.count('<section class="episode"') == LIMIT
    assert 'data-status="agent-error"' in html_text and 'data-status="completed"' in html_text
    assert html_text.count("<img") == 1 and "javascript:" not in html_text
    assert 'href="../../board.html"' in html_text
    assert write_board(board, "md", None).startswith("# lumos-gym leaderboard")
    with pytest.raises(LeaderboardError, match="needs --out"):
        write_board(board, "html", None)


def test_png_chart(runs, tmp_path, monkeypatch):
    board = load_board([runs])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were missing
    with pytest.raises(LeaderboardError, match=r"lumos-gym\[leaderboard\]"):
        render_png(board, tmp_path / "x.png")
    monkeypatch.undo()
    pytest.importorskip("matplotlib")
    from PIL import Image

    assert main(["leaderboard", str(runs), "--format", "png", "--out", f"{tmp_path}/"]) == 0
    image = Image.open(tmp_path / "leaderboard.png").convert("RGB")
    colours = np.unique(np.asarray(image).reshape(-1, 3), axis=0)
    assert image.size[0] >= 600 and len(colours) > 20


# ---------------------------------------------------------------------- paired differences
def test_paired_differences_to_a_reference_row(runs, tmp_path, capsys):
    board = load_board([runs / "oracle", runs / "direct"])
    board.paper = True
    plain_md, plain_csv = render_markdown(board), render_csv(board)
    assert "Paired differences" not in plain_md
    paired = attach_reference(board, "top")  # the top-ranked row that is not a ceiling
    assert paired.reference.name == "direct" and list(paired.comparisons) == ["oracle"]
    direct, comparison = board.entries[0], paired.comparisons["oracle"]
    for env_id in board.envs:
        diff = comparison.envs[env_id]
        rewards = [r["reward"] for r in direct.records[env_id]]
        # the oracle's episodes (built privileged) pair with direct's by env, task and seed
        assert diff.n == LIMIT and diff.diff == pytest.approx(1 - sum(rewards) / LIMIT)
        assert diff.test == MCNEMAR and diff.discordant == (LIMIT - sum(rewards), 0)
    md = render_markdown(board)
    # the ranked table and the reported block stay as they were; the differences come between
    measured, rest = plain_md.split("\n## Reported (Lumos paper)")
    assert md.startswith(measured + "\n## Paired differences to `direct`")
    assert md.endswith("## Reported (Lumos paper)" + rest)
    suite_cell = diff_text(comparison.suite, mark=" \\*")
    assert f"| ceiling | oracle | oracle | {suite_cell} |" in md
    rows = list(csv.DictReader(io.StringIO(render_csv(board))))
    differences = [r for r in rows if r["kind"] == "difference"]
    assert [r["env"] for r in differences] == ["suite score", *board.envs]
    assert {(r["run"], r["reference"], r["test"]) for r in differences[1:]} == {
        ("oracle", "direct", MCNEMAR)}
    assert float(differences[0]["mean"]) == pytest.approx(comparison.suite.diff)
    assert differences[0]["excludes_zero"] == str(comparison.suite.excludes_zero)
    assert all(r["reference"] == "" for r in rows if r["kind"] != "difference")
    page = render_html(board, tmp_path / "site" / "board.html")[0].read_text()
    assert '<table id="paired" class="sortable">' in page and "Paired differences to direct" in page
    board.paired = None
    assert render_csv(board) == plain_csv  # no reference, no new column
    with pytest.raises(LeaderboardError, match="no run 'nope' on the board"):
        attach_reference(board, "nope")
    assert attach_reference(board, str(runs / "oracle")).reference.name == "oracle"
    assert main(["leaderboard", str(runs), "--reference", "oracle"]) == 0
    out = capsys.readouterr().out
    assert "## Paired differences to `oracle`" in out and "| 1 | direct | direct | -" in out


@pytest.mark.full
def test_compare_prints_every_env_level_and_metric_of_two_runs(runs, tmp_path, capsys):
    assert main(["leaderboard", "--compare", str(runs / "direct"), str(runs / "oracle")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# direct - oracle")
    paired, same = out.split("## The same outputs")
    lines = [line for line in paired.splitlines() if line.startswith("| ")][1:]  # below the head
    assert "| all | 8 | 0/8 |" in same  # two agents: no episode the same
    assert [line.split(" | ")[0] for line in lines] == ["| suite score", "| GSM8K-v0",
                                                         "| SVAMP-v0"]
    assert all("mcnemar-exact" in line for line in lines[1:])
    path = tmp_path / "c.csv"
    assert main(["leaderboard", str(runs), "--compare", "oracle", "direct", "--format", "csv",
                 "--out", str(path)]) == 0
    rows = list(csv.DictReader(path.open()))
    assert [r["env"] for r in rows] == ["suite score", *[f"lumos/{e}" for e in ENVS]]
    assert all(float(r["diff"]) >= 0 for r in rows)  # the oracle minus direct
    assert main(["leaderboard", str(runs), "--compare", "oracle", "direct",
                 "--format", "html"]) == 2
    assert "md or csv" in capsys.readouterr().err
    # an env with levels: a row per level
    for name in ("a", "b"):
        evaluate(RunConfig("oracle", envs=["MathWord-v0"], progress=False, out=tmp_path / name,
                           env_kwargs={"levels": [1, 2], "num_tasks": 1}))
    board = load_board([tmp_path / "a", tmp_path / "b"])
    text = render_comparison(board, str(tmp_path / "a"), str(tmp_path / "b"))
    assert "| MathWord-v0 | level 1 | accuracy | 1 |" in text
    assert "| MathWord-v0 | level 2 | accuracy | 1 |" in text


# ------------------------------------------------------------------------------ validate
def test_validate_accepts_a_run_and_names_each_problem(runs, tmp_path, capsys):
    suite = tmp_path / "tiny.json"
    tasks = ["gsm8k/sample/0", "gsm8k/sample/1"]
    suite.write_text(json.dumps({"name": "tiny", "envs": [{"env": "lumos/GSM8K-v0",
                                                           "task_ids": tasks}]}))
    good = tmp_path / "good"
    evaluate(RunConfig("oracle", suite=str(suite), out=good, progress=False))
    assert main(["leaderboard", "--validate", "--suite", str(suite), str(good)]) == 0
    assert "1 results folder(s) valid" in capsys.readouterr().out
    assert validate([runs])[1] == []  # every folder evaluate wrote is valid
    summary = json.loads((good / "summary.json").read_text())
    summary["envs"]["lumos/GSM8K-v0"]["mean"] = 0.5
    (good / "summary.json").write_text(json.dumps(summary))
    assert validate([good])[1] == [
        f"{good / 'summary.json'}: does not match its episodes: "
        "envs.lumos/GSM8K-v0.mean (0.5 in summary, 1.0 recomputed)"
    ]

    bad = _copy(runs, tmp_path, "oracle")
    lines = (bad / "episodes.jsonl").read_text().splitlines(keepends=True)
    (bad / "episodes.jsonl").write_text("".join(lines[1:]) + lines[1])  # one lost, one twice
    run = json.loads((bad / "run.json").read_text())
    run["lumos_gym"] = "99.0.0"
    del run["hardware"]
    (bad / "run.json").write_text(json.dumps(run))
    assert main(["leaderboard", "--validate", "--suite", str(suite), str(bad)]) == 2
    out = capsys.readouterr().out.splitlines()
    expected = ["a second record", "1 planned episode(s) missing", "made by lumos-gym 99.0.0",
                "provenance field(s) missing: hardware", "does not match its episodes",
                "not a run of a suite",
                "provenance's lumos_gym differs"]
    for text in expected:
        assert sum(text in line for line in out) == 1, (text, out)
    assert all(line.startswith(str(bad)) for line in out)

    shard = tmp_path / "shard"
    evaluate(RunConfig("oracle", envs=ENVS, limit=LIMIT, shard="1/2", out=shard, progress=False))
    (shard / "summary.json").write_text('{"format": 2, "en')
    checked, problems = validate([shard, tmp_path / "nowhere"])
    assert checked == 1
    assert any("shard 1/2 of a run" in p for p in problems)
    assert any("summary.json: not valid JSON" in p for p in problems)
    assert any("nowhere: no such results folder" in p for p in problems)


# ------------------------------------------------------------------------------- browser
def test_html_page_in_headless_chromium(runs, tmp_path):
    from PIL import Image

    assert chromium()  # skips the test where chromium is not installed
    page = render_html(load_board([runs]), tmp_path / "site" / "index.html")[0]
    shot = tmp_path / "shot.png"
    browse(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1200,800")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 800)
    pixels = np.asarray(image).reshape(-1, 3).astype(int)
    header = (pixels == (31, 59, 91)).all(axis=1).mean()  # the headers' colour: CSS applied
    ink = (pixels.sum(axis=1) < 200).mean()  # dark text
    assert header > 0.01 and ink > 0.005

    # the script ran, sorted by a header (suite score, descending: the ceiling row, written
    # last, comes first) and filtered the rows
    assert re.findall(r'data-run="([^"]+)"', page.read_text()) == ["direct", "oracle"]
    dom = browse(tmp_path, page.as_uri() + "#sort=4&dir=desc", "--dump-dom")
    assert 'data-ready="1"' in dom and 'data-sorted-by="4:desc"' in dom
    assert re.findall(r'data-run="([^"]+)"', dom) == ["oracle", "direct"]
    assert re.search(r'<th data-type="num" aria-sort="descending">suite score', dom)
    dom = browse(tmp_path, page.as_uri() + "#q=oracle", "--dump-dom")
    assert re.search(r'data-run="direct" hidden', dom)
    assert re.search(r'id="shown">1 of \d+ rows', dom)
    assert not re.search(r'data-run="oracle" hidden', dom)

    viewer = page.parent / "index-trajectories" / "direct" / "GSM8K-v0.html"
    dom = browse(tmp_path, viewer.as_uri() + "#status=agent-error", "--dump-dom")
    sections = re.findall(r'<section class="episode" data-status="([^"]+)"( hidden="")?', dom)
    assert len(sections) == LIMIT and 'data-ready="1"' in dom
    assert {s for s, hidden in sections if not hidden} == {"agent-error"}
    assert any(hidden for _, hidden in sections)
