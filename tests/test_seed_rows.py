"""Training seeds as rows: the two-level bootstrap, and seed groups on the rendered board."""

from __future__ import annotations

import csv
import io
import json
import time

import numpy as np
import pytest

from lumos_gym.cli import main
from lumos_gym.leaderboard.render import (
    SeedRow,
    attach_reference,
    load_board,
    render_csv,
    render_markdown,
)
from lumos_gym.leaderboard.stats import (
    MCNEMAR,
    SIGN_FLIP,
    SeedMatrix,
    compare_groups,
    compare_seed_matrices,
    paired_bootstrap_ci,
    two_level_bootstrap,
)


def _matrix(values, seeds=None, tasks=None) -> SeedMatrix:
    values = np.asarray(values, dtype=float)
    k, n = values.shape
    return SeedMatrix(tuple(seeds or range(k)), tuple(tasks or (f"t{i:04}" for i in range(n))),
                      values)


def _width(ci) -> float:
    return ci[1] - ci[0]


# ------------------------------------------------------------------------- the bootstrap
def test_zero_seed_variance_reproduces_the_task_bootstrap():
    row = (np.random.default_rng(3).random(300) < 0.4).astype(float)
    boot = two_level_bootstrap({"e": _matrix([row, row, row])})
    one_level = paired_bootstrap_ci(row)  # the tasks alone, 2,000 resamples
    estimate = boot.envs["e"]
    assert estimate.value == pytest.approx(row.mean())
    assert estimate.ci95 == pytest.approx(one_level, abs=0.01)
    assert estimate.tasks == 300 and boot.suite.value == pytest.approx(row.mean())
    # one seed: a 1 x n matrix, the task bootstrap again (other draws of one generator)
    assert two_level_bootstrap({"e": _matrix([row])}).envs["e"].ci95 == pytest.approx(
        one_level, abs=0.01)


def test_seed_variance_widens_the_interval():
    rng = np.random.default_rng(4)
    base = rng.random(200)
    calm = two_level_bootstrap({"e": _matrix([base, base + 0.01, base - 0.01])}).envs["e"]
    wild = two_level_bootstrap({"e": _matrix([base, base + 0.3, base - 0.3])}).envs["e"]
    assert wild.value == pytest.approx(calm.value) == pytest.approx(base.mean())
    assert _width(wild.ci95) > 3 * _width(calm.ci95)
    # a task-only bootstrap of the seed averages (the old pooled rule) misses that spread
    pooled = paired_bootstrap_ci(base)
    assert _width(wild.ci95) > 3 * _width(pooled)


def test_matched_seeds_draw_pairs_so_a_shared_seed_effect_cancels():
    rng = np.random.default_rng(5)
    tasks = rng.random(200)
    effect = np.array([-0.3, 0.0, 0.3])  # what each training seed does to both agents
    a = {"e": _matrix([tasks + 0.1 + e for e in effect])}
    b = {"e": _matrix([tasks + e for e in effect])}
    matched = two_level_bootstrap(a, b)
    assert matched.matched is True
    assert matched.envs["e"].value == pytest.approx(0.1)
    assert matched.envs["e"].ci95 == pytest.approx([0.1, 0.1])  # every pair differs by 0.1
    # the same values under other seeds: drawn apart, the seed effect no longer cancels
    apart = two_level_bootstrap(a, {"e": _matrix(b["e"].values, seeds=(10, 11, 12))})
    assert apart.matched is False and apart.envs["e"].value == pytest.approx(0.1)
    assert apart.envs["e"].ci95[0] < 0 < apart.envs["e"].ci95[1]


def test_the_suite_draws_the_seeds_once_for_every_env():
    # within a seed every task has the same value: a replicate depends on its seed draw only
    seeds = np.array([[0.2], [0.5], [0.9]])
    one = _matrix(np.repeat(seeds, 40, axis=1))
    boot = two_level_bootstrap({"a": one, "b": _matrix(np.repeat(seeds, 70, axis=1))})
    # shared seed draws: the suite replicate equals each env's, so do the intervals
    assert boot.suite.ci95 == pytest.approx(boot.envs["a"].ci95)
    assert boot.suite.ci95 == pytest.approx(boot.envs["b"].ci95)
    assert boot.suite.envs == 2 and boot.suite.tasks == 110


def _by_hand(xa, xb=None, *, matched=False, resamples=300):
    """The two-level replicates drawn index by index (one env; the same generator calls)."""
    rng = np.random.default_rng(0)
    if xb is not None and matched:
        both = ~np.isnan(xa) & ~np.isnan(xb)
        xa, xb = np.where(both, xa, np.nan), np.where(both, xb, np.nan)
    seeds_a = rng.integers(0, len(xa), size=(resamples, len(xa)))
    seeds_b = seeds_a
    if xb is not None and not matched:
        seeds_b = rng.integers(0, len(xb), size=(resamples, len(xb)))
    tasks = rng.integers(0, xa.shape[1], size=(resamples, xa.shape[1]))

    def mean(x, drawn_seeds, drawn_tasks):
        seed_means = [np.nanmean(x[s, drawn_tasks]) for s in drawn_seeds
                      if not np.isnan(x[s, drawn_tasks]).all()]
        return np.mean(seed_means)

    out = []
    for r in range(resamples):
        value = mean(xa, seeds_a[r], tasks[r])
        if xb is not None:
            value -= mean(xb, seeds_b[r], tasks[r])
        out.append(value)
    return np.quantile(out, [0.025, 0.975])


@pytest.mark.parametrize("kind", ["alone", "matched", "apart"])
def test_the_vectorised_draws_equal_a_replicate_by_replicate_bootstrap(kind):
    rng = np.random.default_rng(6)
    xa = rng.random((3, 25))
    xb = rng.random((3 if kind == "matched" else 2, 25))
    xa[1, 4] = xa[2, 7] = xb[0, 9] = np.nan  # infra-error episodes: cells left out
    a = {"e": _matrix(xa)}
    if kind == "alone":
        got, want = two_level_bootstrap(a, resamples=300), _by_hand(xa)
        # the estimate: the mean over seeds of each seed's mean over its cells
        assert got.envs["e"].value == pytest.approx(np.mean(np.nanmean(xa, axis=1)))
    else:
        got = two_level_bootstrap(a, {"e": _matrix(xb)}, resamples=300)
        want = _by_hand(xa, xb, matched=kind == "matched")
        assert got.matched is (kind == "matched")
    assert got.envs["e"].ci95 == pytest.approx(list(want), abs=1e-12)


def test_only_tasks_both_sides_ran_are_compared():
    a = {"e": _matrix([[1.0, 1.0, 1.0]], tasks=("x", "y", "z"))}
    b = {"e": _matrix([[0.0, 0.0], [0.0, 0.0]], tasks=("y", "z"))}
    boot = two_level_bootstrap(a, b)
    assert boot.envs["e"].tasks == 2 and boot.envs["e"].value == 1.0
    assert two_level_bootstrap(a, {"other": b["e"]}).suite is None


def test_the_test_is_mcnemar_for_single_seeds_and_sign_flip_for_groups():
    env = "lumos/A-v0"

    def runs(*seeds_rewards):
        return {seed: [{"env_id": env, "task_id": f"t{i}", "seed": 0, "reward": r}
                       for i, r in enumerate(rewards)] for seed, rewards in seeds_rewards}

    one = compare_groups(runs((0, [1] * 30 + [0] * 10)), runs((1, [0] * 40)))
    assert one.envs[env].test == MCNEMAR and one.envs[env].discordant == (30, 0)
    group = compare_groups(runs((0, [1] * 40), (1, [1] * 20 + [0] * 20)), runs((0, [0] * 40)))
    assert group.envs[env].test.startswith("sign-flip")
    assert group.envs[env].diff == pytest.approx(0.75)


def test_the_compare_board_sized_bootstrap_is_fast():
    rng = np.random.default_rng(7)
    a = {f"e{j}": _matrix(rng.random((5, 160)) < 0.5) for j in range(7)}  # 1,120 tasks
    b = {f"e{j}": _matrix(rng.random((5, 160)) < 0.4) for j in range(7)}
    start = time.perf_counter()
    comparison = compare_seed_matrices(a, b)
    assert time.perf_counter() - start < 10  # well under a second on one core
    assert comparison.suite.envs == 7 and comparison.suite.test == SIGN_FLIP


# ---------------------------------------------------------------------------- the board
ENVS = ("lumos/MathWord-v0", "lumos/WorldQA-v0")


def _folder(root, name, agent, seed, rewards, *, data="a.jsonl", steps=637, infra=0):
    """A results folder by hand: run.json with one adapter's training card (or none), episodes."""
    folder = root / name
    folder.mkdir()
    run = {"agent": {"name": agent}, "git": {"commit": "0123456789abcdef", "dirty": False},
           "backend": ["hf"], "fingerprint": {"agent": agent, "name": name}}
    if seed is not None:
        adapter = f"~/models/{name}/policy"
        card = {"base_model": "smollm2-135m", "recipe": "gpu-small", "seed": seed,
                "steps": steps, "batch_size": 16, "lr": 4e-4, "data": {data: "ab" * 32},
                "train_examples": 100}
        run |= {"adapters": {"policy": {adapter: "ff" * 32}}, "training": {adapter: card},
                "backends": {"policy": {"details": {}}}}
    lines = []
    for env_id in ENVS:
        for i, reward in enumerate(rewards):
            status = "infra-error" if i < infra else "completed"
            lines.append({"env_id": env_id, "task_id": f"t{i}", "seed": 0, "agent": agent,
                          "status": status, "reward": 0.0 if i < infra else reward})
    (folder / "run.json").write_text(json.dumps(run))
    (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


@pytest.fixture()
def board_folders(tmp_path):
    tasks = 40
    folders = []
    for seed, solved in ((0, 30), (1, 26), (2, 34)):
        folders.append(_folder(tmp_path, f"lumos-i-s{seed}", "lumos-i", seed,
                               [1.0] * solved + [0.0] * (tasks - solved), data="plan.jsonl"))
    for seed, solved in ((0, 22), (1, 21), (2, 23)):
        rewards = [1.0] * solved + [0.0] * (tasks - solved)
        folders.append(_folder(tmp_path, f"integrated-s{seed}", "integrated", seed, rewards,
                               infra=1 if seed == 1 else 0))  # seed 1: its t0 has no score
    folders.append(_folder(tmp_path, "cot", "cot", 0, [1.0] * 5 + [0.0] * 35, data="c.jsonl"))
    folders.append(_folder(tmp_path, "oracle", "oracle", None, [1.0] * tasks))
    return folders


def test_group_rows_replace_their_seeds_in_the_ranked_table(board_folders):
    board = load_board(board_folders)
    board.paper = True  # the claims come with the paper's numbers
    assert [r.name for r in board.rows] == [
        "lumos-i (3 seeds)", "integrated (3 seeds)", "cot", "oracle"]
    assert len(board.entries) == 8 and [g.name for g in board.groups] == [
        "lumos-i (3 seeds)", "integrated (3 seeds)"]
    group = board.rows[0]
    assert isinstance(group, SeedRow) and group.rank == 1
    assert [m.name for m in group.members] == ["lumos-i-s0", "lumos-i-s1", "lumos-i-s2"]
    cell = group.cells[ENVS[0]]
    assert cell.mean == pytest.approx((30 + 26 + 34) / 3 / 40) and cell.episodes == 120
    assert group.score["mean"] == pytest.approx(cell.mean)
    md = render_markdown(board)
    table = md.split("## Training seeds")[0].split("\n\n")[2]
    assert "| 1 | lumos-i (3 seeds) | lumos-i |" in table and "trained gpu-small, 637" in table
    assert "| 2 | integrated (3 seeds) ⚠ | integrated |" in table  # seed 1 has an infra error
    assert "| 3 | cot (1 seed) | cot |" in table and "| ceiling | oracle | oracle |" in table
    assert "lumos-i-s0" not in table
    assert ("Single-seed rows: cot: their intervals hold the tasks' noise only, not training's; "
            "the seed SD of the suite score is 0.100 for lumos-i (3 seeds), 0.031 for "
            "integrated (3 seeds).") in md
    # each seed's scores are in the Training seeds section
    seeds = md.split("## Training seeds")[1]
    assert "| lumos-i (3 seeds) | lumos-i-s1 | 1 | 0.650 | 0.650 | 0.650 |" in seeds
    rows = list(csv.DictReader(io.StringIO(render_csv(board))))
    suite = {r["run"]: r["seeds"] for r in rows if r["env"] == "suite score"}
    assert suite == {"lumos-i (3 seeds)": "0, 1, 2", "integrated (3 seeds)": "0, 1, 2",
                     "cot": "0", "oracle": ""}


def test_a_seed_of_a_group_as_reference_stands_for_its_group(board_folders):
    board = load_board(board_folders)
    board.paper = True  # the claims come with the paper's numbers
    paired = attach_reference(board, "lumos-i-s0")
    assert paired.reference.name == "lumos-i (3 seeds)"
    assert list(paired.comparisons) == ["integrated (3 seeds)", "cot", "oracle"]
    versus = paired.comparisons["integrated (3 seeds)"]
    # matched seeds: the mean over the seeds of each seed's mean difference over the cells
    # both have (seed 1's t0, an infra error, is left out of both sides)
    lumos = np.array([30 / 40, 25 / 39, 34 / 40])
    integrated = np.array([22 / 40, 20 / 39, 23 / 40])
    assert versus.envs[ENVS[0]].diff == pytest.approx(np.mean(integrated - lumos))
    assert versus.envs[ENVS[0]].n == 40 and versus.suite.test == SIGN_FLIP
    md = render_markdown(board)
    assert "## Paired differences to `lumos-i (3 seeds)`" in md
    assert "| 2 | integrated (3 seeds) | integrated |" in md and "paired tasks" in md
    claims = md.split("## The paper's claims, measured")[1].split("\n## ")[0]
    assert "`integrated (3 seeds)`" in claims and "integrated-s1" not in claims
    assert "`cot`" in claims


def test_no_seed_groups_shows_every_seed_and_keeps_claims_to_matched_seeds(
    board_folders, capsys
):
    board = load_board(board_folders, group_seeds=False)
    board.paper = True  # the claims come with the paper's numbers
    assert board.groups == [] and [r.name for r in board.rows][:2] == ["lumos-i-s2",
                                                                         "lumos-i-s0"]
    args = ["leaderboard", *map(str, board_folders), "--reference", "lumos-i-s0", "--paper"]
    assert main([*args, "--no-seed-groups"]) == 0
    md = capsys.readouterr().out
    assert "| lumos-i-s1 | lumos-i |" in md and "(3 seeds)" not in md.split("## Train")[0]
    assert "(1 seed)" not in md and "Single-seed rows" not in md
    claims = md.split("## The paper's claims, measured")[1].split("\n## ")[0]
    assert "`integrated-s0`" in claims and "`integrated-s1`" not in claims
    assert "Left out of the claims" in claims and "integrated-s2, integrated-s1" in claims
    assert main(args) == 0
    grouped = capsys.readouterr()
    assert "| 1 | lumos-i (3 seeds) |" in grouped.out and "| lumos-i-s1 | lumos-i |" not in (
        grouped.out.split("## Training seeds")[0])


def test_a_second_budget_is_its_own_group_and_stays_out_of_the_other_budgets_claims(
    board_folders, tmp_path
):
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    for agent, solved in (("lumos-i", (12, 14)), ("integrated", (8, 9))):
        board_folders += [_folder(cpu, f"{agent}-cpu-s{seed}", agent, seed,
                                  [1.0] * n + [0.0] * (40 - n), steps=110)
                          for seed, n in enumerate(solved)]
    board = load_board(board_folders)
    board.paper = True  # the claims come with the paper's numbers
    # one agent with two budgets: each group says its budget, whatever its size
    assert [g.name for g in board.groups] == [
        "lumos-i (3 seeds, gpu-small, 637 steps of 16)",
        "integrated (3 seeds, gpu-small, 637 steps of 16)",
        "lumos-i (2 seeds, gpu-small, 110 steps of 16)",
        "integrated (2 seeds, gpu-small, 110 steps of 16)"]
    attach_reference(board, "lumos-i-s0")
    claims = render_markdown(board).split("## The paper's claims, measured")[1].split("\n## ")[0]
    assert "| `integrated (3 seeds, gpu-small, 637 steps of 16)` |" in claims
    assert "| `integrated (2 seeds, gpu-small, 110 steps of 16)` |" not in claims
    assert ("Left out of the claims, trained under another budget than `lumos-i (3 seeds, "
            "gpu-small, 637 steps of 16)`'s: integrated (2 seeds, gpu-small, 110 steps of 16)"
            ) in claims
    # with the other budget's Lumos-I as the reference, its claims are of its own budget
    board = load_board(board_folders)
    board.paper = True  # the claims come with the paper's numbers
    attach_reference(board, "lumos-i-cpu-s1")
    claims = render_markdown(board).split("## The paper's claims, measured")[1].split("\n## ")[0]
    assert "| `integrated (2 seeds, gpu-small, 110 steps of 16)` |" in claims
    assert "`cot`" not in claims.split("Left out")[0] and "cot" in claims.split("Left out")[1]


def test_rows_without_training_cards_stay_as_they_are(tmp_path):
    folders = [_folder(tmp_path, name, "lumos-i", None, [1.0] * 3 + [0.0] * 7)
               for name in ("shipped", "base")]
    md = render_markdown(load_board(folders))
    assert "(1 seed)" not in md and "seeds)" not in md and "Single-seed rows" not in md
    # trained rows alone: no agent with several seeds, and the board says so
    lone = [_folder(tmp_path, "cot", "cot", 0, [1.0] * 4)]
    assert "no agent on this board was trained with several seeds" in render_markdown(
        load_board(lone))
