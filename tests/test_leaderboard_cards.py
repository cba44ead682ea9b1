"""Run cards, training-seed groups and the paper's claims on the leaderboard."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from lumos_gym.leaderboard.cards import (
    card_text,
    group_names,
    matched_build,
    role_cards,
    seed_groups,
    seed_spread,
    seeds_markdown,
    training_seeds,
)
from lumos_gym.leaderboard.claims import (
    CLAIMS,
    claim_rows,
    claims_markdown,
    flipped,
    paper_differences,
    paper_generalisation,
    verdict,
)
from lumos_gym.leaderboard.render import (
    diff_text,
    load_board,
    markdown_section_html,
    render_markdown,
    short_env,
)
from lumos_gym.leaderboard.stats import (
    MCNEMAR,
    SIGN_FLIP_EXACT,
    Comparison,
    PairedDiff,
    compare_groups,
)


def _card(seed, data="integrated.jsonl", steps=637):
    return {"base_model": "smollm2-135m", "recipe": "gpu-small", "seed": seed, "steps": steps,
            "batch_size": 16, "lr": 4e-4, "data": {data: "ab" * 32}, "train_examples": 3223}


def _run(cards: dict[str, dict[str, Any]], chosen: dict[str, str] | None = None):
    """A run.json: role → its adapter folder's card (``chosen``: the folder a role runs)."""
    folders = {role: f"~/models/{role}" for role in cards}
    return {
        "git": {"commit": "0123456789abcdef", "dirty": False}, "backend": ["openvino"],
        "adapters": {role: {folders[role]: "ff" * 32} for role in cards},
        "backends": {role: {"details": {"adapter": role, "adapters": folders}} for role in cards},
        "training": {folders[role]: card for role, card in cards.items()},
    }


@dataclass
class _Cell:
    mean: float


@dataclass
class _Row:
    name: str
    agent: str
    run: dict[str, Any]
    score: dict[str, Any]
    cells: dict[str, _Cell] = field(default_factory=dict)
    ceiling: bool = False
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _row(name, agent, seed, suite, envs, **card):
    return _Row(name, agent, _run({"policy": _card(seed, **card)}), {"mean": suite},
                {e: _Cell(v) for e, v in envs.items()})


def test_role_cards_follow_the_adapter_each_role_runs():
    run = _run({"planner": _card(1, "plan.jsonl"), "grounder": _card(1, "ground.jsonl")})
    # both backends hold both adapters (one model, two LoRAs); each role runs its own
    both = dict(run["backends"]["planner"]["details"]["adapters"])
    for role in ("planner", "grounder"):
        run["backends"][role]["details"]["adapters"] = both
        run["adapters"][role] = {folder: "ff" * 32 for folder in both.values()}
    cards = role_cards(run)
    assert cards["planner"]["data"] == {"plan.jsonl": "ab" * 32}
    assert cards["grounder"]["data"] == {"ground.jsonl": "ab" * 32}
    assert training_seeds(run) == [1]
    text = card_text(run)
    assert "scored at 0123456 on openvino" in text
    assert "planner: gpu-small seed 1, 637 steps" in text
    assert "plan.jsonl abababab" in text
    assert "no training card" in card_text({"git": {}, "backend": ["hf"]})


def test_seed_groups_join_rows_that_differ_only_in_the_seed():
    envs = ["lumos/A-v0", "lumos/B-v0"]
    rows = [
        _row("integrated", "integrated", 0, 0.50, {envs[0]: 0.4, envs[1]: 0.6}),
        _row("integrated-s1", "integrated", 1, 0.40, {envs[0]: 0.2, envs[1]: 0.6}),
        _row("integrated-s2", "integrated", 2, 0.45, {envs[0]: 0.3}),
        _row("integrated-again", "integrated", 2, 0.44, {envs[0]: 0.3}),  # seed 2 scored twice
        _row("integrated-short", "integrated", 3, 0.1, {}, steps=110),  # another budget
        _row("react", "react", 0, 0.3, {}, data="react.jsonl"),  # another agent, alone
    ]
    (group,) = seed_groups(rows)
    assert group.agent == "integrated" and group.seeds == [0, 1, 2]
    assert [r.name for r in group.rows] == ["integrated", "integrated-s1", "integrated-s2"]
    spread = seed_spread(group, envs)
    assert set(spread) == {"suite", envs[0]}  # B is missing from one seed
    assert spread["suite"].mean == pytest.approx(0.45)
    assert spread["suite"].sd == pytest.approx(0.05)
    assert spread[envs[0]].range == pytest.approx(0.2)
    lines = seeds_markdown(rows, envs, short_env)
    assert lines[1] == "## Training seeds"
    text = "\n".join(lines)
    # each seed's run with its suite score and env means, then the spread over the seeds
    assert "| integrated (3 seeds) | integrated-s1 | 1 | 0.400 | 0.200 | 0.600 |" in text
    assert "| integrated (3 seeds) | integrated-s2 | 2 | 0.450 | 0.300 | - |" in text
    assert ("| integrated (3 seeds) | mean ± sd (range) | 0, 1, 2 | 0.450 ± 0.050 (0.100) "
            "| 0.300 ± 0.100 (0.200) | - |") in text
    assert seeds_markdown(rows[4:], envs, short_env) == []


def _diff(d, low, high, n=10):
    return PairedDiff(n, 0.5 + d, 0.5, d, [low, high], MCNEMAR, 0.01, (3, 1))


def test_claim_verdicts_read_the_intervals_from_lumos_i():
    # the board's comparisons are row minus reference; the claims turn them round
    row_minus_lumos = {"lumos/A-v0": _diff(-0.3, -0.5, -0.1),
                       "lumos/B-v0": _diff(0.2, 0.1, 0.3),
                       "lumos/C-v0": _diff(0.0, -0.1, 0.1), "lumos/D-v0": _diff(0, 0, 0, n=0)}
    comparison = Comparison(row_minus_lumos, {}, {}, _diff(-0.1, -0.2, 0.0), None)
    agents = {"int": "integrated", "o": "lumos-o"}
    (claim_a, claim_b) = CLAIMS
    ((agent, v),) = claim_rows(claim_a, "lumos-i", {"int": comparison}, agents)
    assert agent == "integrated" and v.row == "int"
    assert (v.ahead, v.behind, v.undecided) == (["lumos/A-v0"], ["lumos/B-v0"], ["lumos/C-v0"])
    assert v.suite.diff == pytest.approx(0.1) and v.suite.ci95 == [-0.0, 0.2]
    assert flipped(v.suite) == comparison.suite
    assert claim_rows(claim_b, "lumos-i", {"int": comparison}, agents) == []
    assert claim_rows(claim_a, "react", {"int": comparison}, agents) == []
    assert verdict("x", v.suite, {}).ahead == []


def test_claims_section_sets_the_paper_beside_the_measured_rows():
    from lumos_gym.leaderboard.render import reported_numbers

    rows = reported_numbers().rows
    # the paper's baseline table: Lumos-I 47.1 and Integrated 45.5 on GSM8K, CoT 40.4
    assert "GSM8K +1.6" in paper_differences(rows, "integrated")
    assert "GSM8K +6.7" in paper_differences(rows, "cot")
    assert "GSM8K -3.4" in paper_differences(rows, "lumos-o")
    assert paper_differences(rows, "direct") == "not reported"
    comparison = Comparison({"lumos/A-v0": _diff(-0.3, -0.5, -0.1)}, {}, {},
                            _diff(-0.3, -0.5, -0.1), None)
    lines = claims_markdown("li", "lumos-i", {"cot": comparison}, {"cot": "cot"}, rows,
                            short_env, diff_text)
    text = "\n".join(lines)
    assert "## The paper's claims, measured" in text
    assert "| (a) | cot | `cot` | GSM8K +6.7" in text and "| 1: A-v0 | 0 | 0 |" in text
    assert "| (a) | integrated | not measured |" in text and "(c) Generalisation" in text
    assert claims_markdown("x", "react", {}, {}, rows, short_env, diff_text) == []
    # a board of Lumos-I variants alone measures no claim: no section
    variants = {"ei": comparison}
    assert claims_markdown("li", "lumos-i", variants, {"ei": "lumos-i"}, rows, short_env,
                           diff_text) == []


def test_claim_c_compares_the_unified_agent_with_a_domain_specific_one_on_unseen_envs():
    from lumos_gym.leaderboard.claims import env_family, generalisation_rows, trained_families
    from lumos_gym.leaderboard.render import reported_numbers

    rows = reported_numbers().rows
    assert paper_generalisation(rows, "qa") == "WebShop +6.3"  # 39.8 against 34.7, 30.1, 33.5
    assert paper_generalisation(rows, "web") == "WebShop +5.1"
    assert paper_generalisation(rows, "games") == "not reported"
    # each card counts its records per dataset; datasets map to the families that declare them
    no_web = {"complex_qa": 133, "game": 76, "maths": 161, "multimodal": 95}
    assert trained_families([{"datasets": no_web}, {"datasets": no_web}]) == {
        "qa", "games", "math", "multimodal"}
    assert trained_families([{"datasets": {"complex_qa": 140}}]) == {"qa"}
    assert trained_families([{"datasets": {"webshop": 9, "web_agent": 0}}]) == {"web"}
    assert trained_families([{"datasets": no_web}, {"seed": 0}]) is None  # a card without counts
    assert trained_families([]) is None  # the untrained base
    assert env_family("lumos/WebShop-v0") == env_family("lumos/Mind2Web-v0") == "web"
    assert env_family("lumos/MathWord-v0") == "math" and env_family("lumos/Nope-v0") is None
    # the domain-specific row minus the unified reference: WebShop, Mind2Web unseen by both
    row_minus_ref = {"lumos/WebShop-v0": _diff(-0.2, -0.3, -0.1),
                     "lumos/Mind2Web-v0": _diff(0.05, -0.05, 0.1)}
    comparison = Comparison(row_minus_ref, {}, {}, _diff(-0.1, -0.2, -0.05), None)
    trained = {"noweb": frozenset({"qa", "math"}), "qa": frozenset({"qa"}),
               "seen": frozenset({"web"})}
    agents = {"qa": "lumos-i", "seen": "lumos-i", "int": "integrated"}
    comparisons = {"qa": comparison, "seen": comparison, "int": comparison}
    ((family, v),) = generalisation_rows("noweb", "lumos-i", comparisons, agents, trained)
    assert family == "qa" and v.row == "qa"
    assert (v.ahead, v.behind, v.undecided) == (["lumos/WebShop-v0"], [], ["lumos/Mind2Web-v0"])
    assert v.suite == flipped(comparison.suite)
    # a suite with a seen env: the env rows stay, the suite difference is not comparable
    mixed = Comparison({**row_minus_ref, "lumos/MathWord-v0": _diff(0.1, 0.0, 0.2)}, {}, {},
                       _diff(-0.1, -0.2, -0.05), None)
    ((_, v),) = generalisation_rows("noweb", "lumos-i", {"qa": mixed}, agents, trained)
    assert v.suite is None and "lumos/MathWord-v0" not in v.ahead + v.behind + v.undecided
    # an env no family declares is neither seen nor unseen: left out
    plugin = Comparison({**row_minus_ref, "my/Env-v0": _diff(0.1, 0.0, 0.2)}, {}, {},
                        _diff(-0.1, -0.2, -0.05), None)
    ((_, v),) = generalisation_rows("noweb", "lumos-i", {"qa": plugin}, agents, trained)
    assert v.suite is None and "my/Env-v0" not in v.ahead + v.behind + v.undecided
    # no claim without a unified Lumos-I reference, or with a reference trained on one family
    assert generalisation_rows("noweb", "react", comparisons, agents, trained) == []
    assert generalisation_rows("qa", "lumos-i", {"noweb": comparison}, {"noweb": "lumos-i"},
                               trained) == []
    lines = claims_markdown("noweb", "lumos-i", {"qa": comparison}, agents, rows, short_env,
                            diff_text, trained)
    text = "\n".join(lines)
    assert "| (c) | Lumos-I on qa alone | `qa` | WebShop +6.3 | +0.100" in text
    assert "| 1: WebShop-v0 | 0 | 1: Mind2Web-v0 |" in text
    assert "(a)" not in text and "not measured" not in text  # a board of claim (c) alone
    assert "(c) Generalisation: the reference Lumos-I" in text


def _episodes(env_id, rewards):
    return [{"env_id": env_id, "task_id": f"t{i}", "seed": 0, "reward": r}
            for i, r in enumerate(rewards)]


def test_seeds_compare_cell_by_cell_over_matched_seeds():
    env = "lumos/A-v0"
    # tasks 0-5: A ahead by 1 in both seeds; tasks 6-11: even in both; task 11 is missing from
    # seed 1's B: that cell is left out of both sides, seed 0's cell of it stays
    a = {0: _episodes(env, [1] * 6 + [0] * 6), 1: _episodes(env, [1] * 12)}
    b = {0: _episodes(env, [0] * 12), 1: _episodes(env, [0] * 6 + [1] * 5)}
    c = compare_groups(a, b)
    assert c.envs[env].n == 12  # tasks
    # the mean over the seeds of each seed's mean difference over the cells both have
    assert c.envs[env].diff == pytest.approx((6 / 12 + 6 / 11) / 2)
    assert c.envs[env].ci95[0] > 0 and c.suite.diff == pytest.approx(c.envs[env].diff)
    # the test: per task, the differences averaged over the seeds: 6 at +1, the rest 0
    assert c.envs[env].test == SIGN_FLIP_EXACT
    assert c.envs[env].p_value == pytest.approx(2 / 2**6)


def test_seed_groups_are_named_by_agent_and_budget():
    env = "lumos/A-v0"
    rows = [_row(f"lumos-i-s{s}", "lumos-i", s, 0.5, {env: 0.5}) for s in (0, 1, 2)]
    rows += [_row(f"lumos-i-cpu-s{s}", "lumos-i", s, 0.3, {env: 0.3}, steps=110)
             for s in (0, 1)]
    rows.append(_row("integrated-s0", "integrated", 0, 0.4, {env: 0.4}, data="i.jsonl"))
    rows.append(_row("integrated-s1", "integrated", 1, 0.4, {env: 0.4}, data="i.jsonl"))
    groups = seed_groups(rows)
    assert [len(g.rows) for g in groups] == [3, 2, 2]
    # two groups of one agent tell their budgets apart, whatever their sizes; an agent with
    # one group keeps the short name
    assert group_names(groups) == ["lumos-i (3 seeds, gpu-small, 637 steps of 16)",
                                   "lumos-i (2 seeds, gpu-small, 110 steps of 16)",
                                   "integrated (2 seeds)"]
    rows.append(_row("lumos-i-cpu-s2", "lumos-i", 2, 0.3, {env: 0.3}, steps=110))
    assert group_names(seed_groups(rows))[:2] == [
        "lumos-i (3 seeds, gpu-small, 637 steps of 16)",
        "lumos-i (3 seeds, gpu-small, 110 steps of 16)"]
    # only one budget of lumos-i: the short name
    assert group_names(seed_groups(rows[:3])) == ["lumos-i (3 seeds)"]


def test_the_rendered_board_carries_cards_and_seeds(tmp_path):
    """Two results folders of one agent whose run.json differ in their adapters' seed."""
    from conftest import ScriptedBackend

    from lumos_gym.evaluation.evaluate import RunConfig, evaluate
    from lumos_gym.models.factory import ModelOptions

    out = tmp_path / "direct"
    evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=out, progress=False,
                       backends={"policy": ScriptedBackend(lambda request: "42")},
                       models=ModelOptions(batch_size=1)))
    run = json.loads((out / "run.json").read_text())
    folders = []
    for seed in (0, 1):
        copy = tmp_path / f"direct-s{seed}"
        copy.mkdir()
        for name in ("episodes.jsonl", "summary.json"):
            (copy / name).write_bytes((out / name).read_bytes())
        card = _run({"policy": _card(seed, data="direct.jsonl")})
        changed = {**run, **{k: card[k] for k in ("adapters", "training")}}
        changed["fingerprint"] = {**run["fingerprint"], "adapters": card["adapters"]}
        (copy / "run.json").write_text(json.dumps(changed))
        folders.append(copy)
    md = render_markdown(load_board(folders))
    assert "## Training seeds" in md and "| direct (2 seeds) | direct-s1 | 1 |" in md
    # the two seeds are one row of the ranked table
    assert "| 1 | direct (2 seeds) | direct |" in md and "| direct-s0 | direct |" not in md
    cards = md.split("## Run cards")[1]
    assert "- `direct-s1` (direct): scored at" in cards and "seed 1, 637 steps of 16" in cards
    from lumos_gym.leaderboard.render import render_html

    page = render_html(load_board(folders), tmp_path / "site" / "board.html")[0].read_text()
    assert "<h2>Training seeds</h2>" in page and "<td>direct-s1</td>" in page
    assert 'data-run="direct (2 seeds)"' in page and 'title="direct-s1: trajectories"' in page
    assert "<h2>Run cards</h2>" in page and "<li>direct-s1 (direct): scored at" in page


def test_markdown_sections_become_html():
    html = markdown_section_html(["", "## Title", "", "Some `code` and a \\* mark.", "",
                                  "| a | b \\| c |", "|---|---|", "| 1 | <x> |", "- item"])
    assert html == ('<h2>Title</h2><p class="note">Some code and a * mark.</p>'
                    '<div class="wrap"><table class="sortable"><thead><tr><th>a</th>'
                    "<th>b | c</th></tr></thead><tbody><tr><td>1</td><td>&lt;x&gt;</td></tr>"
                    "</tbody></table></div><ul><li>item</li></ul>")


def test_a_published_folder_may_hold_its_episodes_gzipped(tmp_path, capsys):
    """episodes.jsonl.gz reads, ranks and validates as the plain file does."""
    import gzip

    from lumos_gym.cli import main
    from lumos_gym.evaluation.evaluate import RunConfig, evaluate
    from lumos_gym.evaluation.results import ResultsError, read_results
    from lumos_gym.leaderboard.render import render_html, validate

    plain = tmp_path / "oracle"
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=3, out=plain, progress=False))
    packed = tmp_path / "published" / "oracle"
    packed.mkdir(parents=True)
    for name in ("run.json", "summary.json"):
        (packed / name).write_bytes((plain / name).read_bytes())
    (packed / "episodes.jsonl.gz").write_bytes(gzip.compress((plain / "episodes.jsonl")
                                                             .read_bytes()))
    assert read_results(packed).records == read_results(plain).records
    assert validate([packed])[1] == []
    assert render_markdown(load_board([packed])) == render_markdown(load_board([plain]))
    written = render_html(load_board([packed]), tmp_path / "site" / "b.html", trajectories=False)
    assert len(written) == 1 and "trajectories" not in written[0].read_text().split("<h2")[0]
    assert main(["leaderboard", str(packed), "--format", "html", "--no-trajectories", "--out",
                 str(tmp_path / "site2")]) == 0
    assert "trajectory pages" not in capsys.readouterr().out
    (packed / "episodes.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(ResultsError, match="not a readable gzip file"):
        read_results(packed)


def test_a_resumed_run_keeps_the_sessions_that_wrote_its_episodes(tmp_path):
    from lumos_gym.evaluation.evaluate import RunConfig, evaluate
    from lumos_gym.leaderboard.cards import card_text

    out = tmp_path / "oracle"
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=2, out=out, progress=False))
    first = json.loads((out / "run.json").read_text())
    assert "sessions" not in first
    first["git"] = {"commit": "abcdef0123", "dirty": True}  # as if another checkout wrote them
    (out / "run.json").write_text(json.dumps(first))
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=3, out=out, progress=False,
                       resume=True))
    second = json.loads((out / "run.json").read_text())
    assert [s["git"] for s in second["sessions"]] == [{"commit": "abcdef0123", "dirty": True}]
    assert second["sessions"][0]["started"] == first["started"]
    assert "resumed: an earlier session at abcdef0 (dirty)" in card_text(second)
    evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=3, out=out, progress=False,
                       resume=True))
    third = json.loads((out / "run.json").read_text())
    assert len(third["sessions"]) == 2 and third["sessions"][0] == second["sessions"][0]


def test_cards_count_the_records_of_each_dataset(tmp_path):
    from lumos_gym.evaluation.provenance import training_card

    planner = tmp_path / "planner"
    planner.mkdir()
    (planner / "lumos_training.json").write_text(json.dumps({
        "config": {"recipe": "cpu-small", "seed": 0, "batch_size": 2},
        "steps": 110, "train_examples": 465, "data_sha256": {"mix/plan-iterative.jsonl": "cd" * 32},
        "encode": {"datasets": {"complex_qa": 133, "game": 76, "maths": 161, "multimodal": 95}}}))
    card = training_card(planner)
    assert card["datasets"] == {"complex_qa": 133, "game": 76, "maths": 161, "multimodal": 95}
    assert ("465 records (plan-iterative.jsonl cdcdcdcd) from complex_qa 133, game 76, maths 161, "
            "multimodal 95") in card_text(_run({"planner": card}))
    # a report from before the count: no "from" clause
    (planner / "lumos_training.json").write_text(json.dumps({"steps": 1, "train_examples": 4}))
    assert " from " not in card_text(_run({"planner": training_card(planner)}))


def test_cards_name_the_reward_of_expert_iteration_and_grpo(tmp_path):
    from lumos_gym.evaluation.provenance import training_card

    # expert iteration: the training files lie beside export.json (export --from-results)
    data = tmp_path / "round-1" / "data"
    data.mkdir(parents=True)
    train_env = 'lumos/MathWord-v0 {"split": "train"}'
    (data / "export.json").write_text(json.dumps({
        "min_reward": 1.0, "episodes": 40, "annotations": 12,
        "sources": [{"results": str(tmp_path / "samples" / "seed-0"), "envs": [train_env]}]}))
    sft = tmp_path / "round-1" / "planner"
    sft.mkdir()
    (sft / "lumos_training.json").write_text(json.dumps({
        "config": {"recipe": "cpu-small", "seed": 0, "batch_size": 8, "lr": 4e-4},
        "steps": 20, "train_examples": 12, "seconds": 264.4, "device": "cpu",
        "data_sha256": {str(data / "plan-iterative.jsonl"): "ab" * 32}}))
    card = training_card(sft)
    assert "12 records (plan-iterative.jsonl abababab), 264 s of training on cpu, exported" in (
        card_text(_run({"planner": card})))
    expected = {"method": "expert iteration", "min_reward": 1.0, "episodes": 40,
                "annotations": 12, "envs": [train_env], "results": ["samples/seed-0"],
                "sampled_tokens": None, "sampling_seconds": None,  # the samples are gone
                "leakage": None}
    assert card["reward_source"] == expected
    # with the sampled results in place, the card counts their tokens and wall time
    samples = tmp_path / "samples" / "seed-0"
    samples.mkdir(parents=True)
    (samples / "run.json").write_text(json.dumps({"started": "2026-11-26T10:00:00+0000"}))
    (samples / "summary.json").write_text(json.dumps(
        {"overall": {"input_tokens": 900, "output_tokens": 100}}))
    finished = datetime(2026, 11, 26, 10, 2, 30, tzinfo=UTC).timestamp()
    os.utime(samples / "summary.json", (finished, finished))
    card = training_card(sft)
    assert card["reward_source"] == {**expected, "sampled_tokens": 1000, "sampling_seconds": 150.0}
    # GRPO: the run's report sits one level above each role's adapter
    grpo = tmp_path / "grpo"
    (grpo / "planner").mkdir(parents=True)
    (grpo / "lumos_grpo.json").write_text(json.dumps({
        "method": "grpo", "base_model": "smollm2-135m", "steps": 30, "reward": "env reward",
        "envs": [["lumos/MathWord-v0", {"split": "train"}]], "sampled_tokens": 9000,
        "device": "cpu", "config": {"recipe": "cpu-small", "seed": 1, "tasks_per_step": 4,
                                    "group_size": 4, "beta": 0.04, "lr": 1e-5,
                                    "adapters": {"planner": "/x/lumos-i/planner"}}}))
    rl = training_card(grpo / "planner")
    assert rl["steps"] == 30 and rl["batch_size"] == 16 and rl["seed"] == 1
    assert rl["reward_source"]["envs"] == [train_env]
    assert training_card(tmp_path / "nothing") is None
    run = _run({"planner": rl, "grounder": card})
    text = card_text(run)
    assert ("planner: GRPO from the adapters planner, seed 1, 30 steps of 16 episodes (groups "
            "of 4, KL weight 0.04) on " + train_env + ", reward: env reward") in text
    assert ("exported from episodes with reward >= 1.0 of samples/seed-0 on " + train_env
            + " (1000 prompt and generated tokens sampling, 150 s)") in text
    assert "checked against" not in text  # no leakage report beside either
    # the leakage check improve and grpo leave beside what they trained on
    leakage = {"suite": "compare", "clean": True, "total": {"test_tasks": 400, "shared_tasks": 0}}
    for folder in (data, grpo):
        (folder / "leakage.json").write_text(json.dumps(leakage))
    text = card_text(_run({"planner": training_card(grpo / "planner"),
                           "grounder": training_card(sft)}))
    assert text.count("train tasks checked against compare's test tasks: 0 of 400 shared") == 2
    # adapters scored from a checkpoint of a run that was cut: the checkpoint's state and the
    # run's config give the card (the run's report is written only when it ends)
    cut = tmp_path / "grpo-cut"
    (cut / "checkpoint-2" / "planner").mkdir(parents=True)
    (cut / "grpo_config.json").write_text(json.dumps({
        "recipe": "cpu-small", "seed": 0, "tasks_per_step": 4, "group_size": 4, "beta": 0.04,
        "lr": 1e-4, "adapters": {"planner": "/x/planner", "grounder": "/x/ei-grounder"},
        "envs": [["lumos/MathWord-v0", {"split": "train"}]]}))
    (cut / "checkpoint-2" / "state.json").write_text(json.dumps({"step": 2, "history": [
        {"reward_mean": 0.5, "sampled_tokens": 100, "seconds": 60.0},
        {"reward_mean": 0.25, "sampled_tokens": 50, "seconds": 30.5}]}))
    (cut / "leakage.json").write_text(json.dumps(leakage))
    card = training_card(cut / "checkpoint-2" / "planner")
    assert card["steps"] == 2 and card["seconds"] == 90.5 and card["batch_size"] == 16
    assert card["reward_source"]["final_reward"] == 0.25
    text = card_text(_run({"planner": card}))
    assert ("GRPO from the adapters ei-grounder (grounder), planner, seed 0, 2 steps (its "
            "checkpoint-2) of 16 episodes" in text)
    assert "150 tokens sampled on an unrecorded device, 90 s in all" in text
    assert "0 of 400 shared" in text
    # a run whose steps record their device (each step since it was added) says where it ran
    (cut / "checkpoint-2" / "state.json").write_text(json.dumps({"step": 2, "history": [
        {"reward_mean": 0.5, "sampled_tokens": 100, "seconds": 60.0, "device": "cpu"},
        {"reward_mean": 0.25, "sampled_tokens": 50, "seconds": 30.5, "device": "NVIDIA H200"}]}))
    text = card_text(_run({"planner": training_card(cut / "checkpoint-2" / "planner")}))
    assert "150 tokens sampled on cpu then NVIDIA H200, 90 s in all" in text


def test_cards_name_the_training_commit_the_data_build_and_each_resumption(tmp_path):
    from lumos_gym.evaluation.provenance import training_card

    folder = tmp_path / "grounder"
    folder.mkdir()
    report = {
        "config": {"recipe": "cpu-small", "seed": 3, "batch_size": 2}, "steps": 110,
        "train_examples": 465, "git": {"commit": "abcdef0123456789", "dirty": False},
        "data_build": {"id": "0f1e2d3c4b5a6978", "from": "mixture", "seed": 0, "mix": {}},
        "sessions": [
            {"from_step": 0, "to_step": 60, "finished": False, "git": {"commit": "abcdef0"}},
            {"from_step": 60, "to_step": 110, "finished": True, "git": {"commit": "abcdef0"}},
        ],
    }
    (folder / "lumos_training.json").write_text(json.dumps(report))
    card = training_card(folder)
    text = card_text(_run({"grounder": card}))
    assert ("trained at abcdef0, data build 0f1e2d3c4b5a6978 (mixture seed 0), resumed 1 "
            "time(s) (steps 0-60, 60-110)") in text
    report.update(sessions=report["sessions"][1:], data_build=None,
                  git={"commit": "abcdef0123", "dirty": True})
    (folder / "lumos_training.json").write_text(json.dumps(report))
    text = card_text(_run({"grounder": training_card(folder)}))
    assert "trained at abcdef0 (dirty), data build unknown, in one session" in text
    # a card from before these were recorded says so
    assert "commit, data build and resumptions not recorded" in card_text(_run({"p": _card(0)}))


def test_an_old_card_names_the_data_build_its_leakage_record_matched():
    run = _run({"policy": _card(0, "react.jsonl")})
    old = card_text(run)
    assert "commit, data build and resumptions not recorded (an older training report)" in old
    matched = {"file": "react.jsonl", "card_sha256": "ab" * 32, "sha256": "ab" * 32}
    run["leakage"] = {"training_files": [matched],
                      "recorded": {"data_build": "8eb6eeabf1b3f02d"}}
    assert matched_build(run) == "8eb6eeabf1b3f02d"
    assert ("policy: gpu-small seed 0, 637 steps of 16, 3223 records (react.jsonl abababab); "
            "data build 8eb6eeabf1b3f02d (its files have the card's checksums: the leakage "
            "record); commit and resumptions not recorded") in card_text(run)
    run["leakage"]["training_files"].append(dict(matched, sha256=None))  # one file not found
    assert matched_build(run) is None
    assert card_text(run) == old


def test_a_card_names_the_last_rescore_of_a_run():
    run = _run({"policy": _card(0)})
    run["rescored"] = [{"git": {"commit": "1111111aaa", "dirty": False}},
                       {"git": {"commit": "2222222bbb", "dirty": True}}]
    assert card_text(run).startswith("scored at 0123456 on openvino, rescored at 2222222 "
                                     "(dirty); policy: ")
