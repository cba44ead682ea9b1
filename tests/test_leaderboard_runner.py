"""The leaderboard runner: suites as files, metrics with intervals, provenance, shards, merge."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from conftest import ScriptedBackend

from lumos_gym import __version__
from lumos_gym.agents.base import AgentConfig
from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.merge import merge_results
from lumos_gym.evaluation.plan import parse_shard, plan_env, shard_keys, task_group
from lumos_gym.evaluation.provenance import _adapter_checksums
from lumos_gym.evaluation.results import ResultsError, read_results
from lumos_gym.evaluation.suites import get_suite, load_suite, load_suites, suite_entries
from lumos_gym.evaluation.summary import (
    BOOTSTRAP_RESAMPLES,
    bootstrap_ci,
    comparable,
    format_table,
    summarize,
)
from lumos_gym.models.base import BackendInfo

ENVS = ["GSM8K-v0", "SVAMP-v0"]


def _gold_by_question():
    gold = {}
    for env_id in ENVS:
        env = gym.make(f"lumos/{env_id}")
        gold.update({t.question: str(t.answer) for t in env.unwrapped.tasks})
        env.close()
    return gold


@pytest.fixture(scope="module")
def half_right():
    """A scripted model right on every other question (rewards vary: intervals are not flat)."""
    gold = sorted(_gold_by_question().items())

    def answer(request):
        prompt = request.prompt or json.dumps(request.messages)
        for n, (question, value) in enumerate(gold):
            if question in prompt:
                return value if n % 2 == 0 else "123456"
        return "0"

    return answer


def _run(out, script, **kwargs):
    options = {"envs": ENVS, "limit": 5, "progress": False, "resume": True, **kwargs}
    return evaluate(RunConfig("direct", out=out, backends={"policy": ScriptedBackend(script)},
                              **options))


def _summary(folder):
    return json.loads((folder / "summary.json").read_text())


# --------------------------------------------------------------------------------- suites
def test_shipped_suites_load_with_aliases_and_counts(capsys):
    suites, errors = load_suites()
    assert errors == {}
    assert {"offline", "default", "lumos-paper", "qa", "code", "web", "games", "multimodal",
            "math"} <= set(suites)
    assert suites["default"] is suites["offline"]
    assert suites["offline"].episodes() == 83  # fixed task ids: knowable without the envs
    paper = {e.env_id: e for e in suites["lumos-paper"].entries}
    assert paper["lumos/HotpotQA-v0"].limit == 1000 and paper["lumos/StrategyQA-v0"].limit == 300
    assert paper["lumos/Mind2Web-v0"].kwargs["split"] == "test_domain"
    assert [e.env_id for e in suite_entries()] == [e.env_id for e in suites["offline"].entries]
    assert main(["suites"]) == 0
    out = capsys.readouterr().out
    assert "lumos-paper" in out and "offline" in out and " 83 " in out
    assert main(["suites", "default"]) == 0
    assert "aliases: default" in capsys.readouterr().out


def test_a_suite_naming_a_missing_env_fails_alone(tmp_path, capsys):
    shutil.copy(_suites_dir() + "math.json", tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps(
        {"name": "broken", "envs": [{"env": "lumos/GSM8K-v0"}, {"env": "lumos/NoSuch-v0"}]}
    ))
    suites, errors = load_suites(tmp_path)
    assert "math" in suites and "broken" not in suites
    [message] = errors.values()
    assert "broken.json" in message and "lumos/NoSuch-v0" in message
    with pytest.raises(EvaluationError, match="NoSuch-v0"):
        get_suite(str(tmp_path / "broken.json"))
    assert main(["evaluate", "--suite", str(tmp_path / "broken.json"), "--out",
                 str(tmp_path / "o")]) == 2
    assert "NoSuch-v0" in capsys.readouterr().err


@pytest.mark.parametrize("bad, match", [
    ({"envs": []}, "non-empty 'envs'"),
    ({"envs": [{"env": "lumos/GSM8K-v0", "limt": 3}]}, "unknown field"),
    ({"envs": [{"env": "lumos/GSM8K-v0"}], "seeds": [0.5]}, "seeds"),
    ({"envs": [{"env": "lumos/GSM8K-v0", "limit": 0}]}, "limit"),
    ({"envs": [{"env": "lumos/GSM8K-v0"}, {"env": "GSM8K-v0"}]}, "appears twice"),
])
def test_bad_suite_files_get_clear_messages(tmp_path, bad, match):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(EvaluationError, match=match):
        load_suite(path)
    path.write_text("{not json")
    with pytest.raises(EvaluationError, match="not valid JSON"):
        load_suite(path)


def test_suite_task_ids_seeds_and_step_limit(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "seeds": [3, 4], "envs": [
        {"env": "lumos/MathWord-v0", "task_ids": ["mathword/L2/0/3", "mathword/L1/0/4"],
         "max_steps": 5},
    ]}))
    result = evaluate(RunConfig("oracle", suite=str(path), out=tmp_path / "out", progress=False))
    got = sorted((r["task_id"], r["seed"]) for r in result.records)
    assert got == [("mathword/L1/0/4", 3), ("mathword/L1/0/4", 4),
                   ("mathword/L2/0/3", 3), ("mathword/L2/0/3", 4)]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["envs"][0]["max_episode_steps"] == 5 and run["envs"][0]["seeds"] == [3, 4]
    assert run["suite"]["name"] == "mine" and len(run["suite"]["sha256"]) == 64
    path.write_text(json.dumps({"envs": [{"env": "lumos/MathWord-v0", "task_ids": ["nope"]}]}))
    with pytest.raises(EvaluationError, match="no task"):
        evaluate(RunConfig("oracle", suite=str(path), out=tmp_path / "o2", progress=False))


# -------------------------------------------------------------------------------- metrics
def _rec(env, key, reward, metrics=None, status="completed", **extra):
    return {"env_id": env, "task_id": key, "key": f"{env}|{key}", "reward": reward,
            "metrics": metrics or {}, "status": status, "steps": 2, **extra}


def test_metrics_per_task_type_with_intervals():
    records = [
        _rec("lumos/HotpotQA-v0", "a", 1.0, {"accuracy": 1.0, "exact_match": 1.0, "f1": 1.0}),
        _rec("lumos/HotpotQA-v0", "b", 0.0, {"accuracy": 0.0, "exact_match": 0.0, "f1": 0.5}),
        _rec("lumos/HotpotQA-v0", "c", 0.0, status="agent-error"),  # no metrics: 0 everywhere
        _rec("lumos/Mind2Web-v0", "a", 0.5, {"step_success_rate": 0.5, "element_accuracy": 0.75,
                                             "operation_f1": 0.9, "success": 0.0}),
        _rec("lumos/WebShop-v0", "a", 0.8, {"reward": 0.8, "success": 0.0}),
        _rec("lumos/WebShop-v0", "b", 1.0, {"reward": 1.0, "success": 1.0}),
        _rec("lumos/TextWorld-v0", "a", 0.5, {"score": 0.5, "success": 0.0}),
        _rec("lumos/MBPP-v0", "a", 1.0, {"pass@1": 1.0, "tests_passed_fraction": 1.0}),
    ]
    summary = summarize(records)
    envs = summary["envs"]
    qa = envs["lumos/HotpotQA-v0"]
    assert qa["primary_metric"] == "accuracy" and set(qa["metrics"]) == {
        "accuracy", "exact_match", "f1"}
    assert qa["metrics"]["f1"]["mean"] == pytest.approx(0.5)
    assert qa["statuses"]["agent-error"] == 1 and qa["steps"] == {"total": 6, "mean": 2.0}
    assert set(envs["lumos/Mind2Web-v0"]["metrics"]) == {
        "step_success_rate", "element_accuracy", "operation_f1", "task_success"}
    shop = envs["lumos/WebShop-v0"]
    assert shop["primary_metric"] == "average_reward" and shop["mean"] == pytest.approx(0.9)
    assert shop["metrics"]["success_rate"]["mean"] == 0.5
    assert set(envs["lumos/TextWorld-v0"]["metrics"]) == {"score", "win_rate"}
    assert envs["lumos/MBPP-v0"]["primary_metric"] == "pass@1"
    score = summary["score"]
    means = [g["mean"] for g in envs.values()]
    assert score["mean"] == pytest.approx(sum(means) / len(means)) and score["envs"] == 5
    ses = [g["se"] for g in envs.values()]
    assert score["se"] == pytest.approx(np.sqrt(sum(s * s for s in ses)) / len(ses))
    assert score["ci95"][0] <= score["mean"] <= score["ci95"][1]
    assert summarize(list(reversed(records))) == summary  # order-free: sorted by key first


def test_levels_are_tabled_when_every_episode_has_one():
    records = [_rec("lumos/MathWord-v0", f"m{n}", float(n % 2), group=f"level {n % 3 + 1}")
               for n in range(6)]
    summary = summarize(records)
    groups = summary["envs"]["lumos/MathWord-v0"]["groups"]
    assert list(groups) == ["level 1", "level 2", "level 3"]
    # m0 and m3 are level 1: rewards 0 and 1
    assert groups["level 1"]["episodes"] == 2 and groups["level 1"]["mean"] == 0.5
    assert groups["level 1"]["ci95"] == bootstrap_ci([0.0, 1.0])
    assert "  level 2" in format_table(summary)
    # one record without a group: no table (a partial one would mislead); one group: none
    assert "groups" not in summarize(records + [_rec("lumos/MathWord-v0", "m9", 1.0)])[
        "envs"]["lumos/MathWord-v0"]
    assert "groups" not in summarize(records[:1])["envs"]["lumos/MathWord-v0"]


def test_task_group_prefers_level_then_family_then_subdomain():
    assert task_group({"level": 2, "family": "bridge"}) == "level 2"
    assert task_group({"family": "bridge", "kind": "x"}) == "bridge"
    assert task_group({"subdomain": "Home", "website": "lumos-shop"}) == "Home"
    assert task_group({}) == "all"


def test_evaluate_records_each_episode_level(tmp_path):
    levels = evaluate(RunConfig("oracle", envs=["MathWord-v0"], progress=False,
                                env_kwargs={"levels": [1, 2], "num_tasks": 1}, out=tmp_path / "m"))
    assert [r["group"] for r in levels.records] == ["level 1", "level 2"]
    groups = _summary(tmp_path / "m")["envs"]["lumos/MathWord-v0"]["groups"]
    assert {g: s["mean"] for g, s in groups.items()} == {"level 1": 1.0, "level 2": 1.0}
    assert main(["leaderboard", "--validate", str(tmp_path / "m")]) == 0
    # GSM8K has no levels: its records carry no group, its summary no table
    plain = evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=1, progress=False,
                               out=tmp_path / "g"))
    assert "group" not in plain.records[0]
    assert "groups" not in _summary(tmp_path / "g")["envs"]["lumos/GSM8K-v0"]


def test_the_comparison_suite_is_large_and_spans_the_levels():
    suite = get_suite("compare")
    sizes = {e.env_id: e.kwargs for e in suite.entries}
    assert list(sizes) == ["lumos/MathWord-v0", "lumos/WorldQA-v0", "lumos/Scenes-v0",
                           "lumos/WebShop-v0", "lumos/Mind2Web-v0", "lumos/TextWorld-v0",
                           "lumos/ALFWorld-v0"]
    assert all(kwargs.get("split", "test").startswith("test") for kwargs in sizes.values())
    assert sizes["lumos/MathWord-v0"]["levels"] == [1, 2, 3, 4, 5]
    assert sizes["lumos/MathWord-v0"]["num_tasks"] * 5 >= 200
    assert sizes["lumos/WorldQA-v0"]["num_tasks"] * 4 >= 200  # four question families
    assert sizes["lumos/Scenes-v0"]["num_tasks"] * 15 >= 200  # fifteen question kinds
    assert sizes["lumos/WebShop-v0"]["num_tasks"] >= 200
    assert sizes["lumos/Mind2Web-v0"]["num_tasks"] >= 100
    assert sizes["lumos/TextWorld-v0"]["levels"] == [1, 2, 3, 4, 5]
    assert sizes["lumos/TextWorld-v0"]["num_games"] * 5 >= 100
    assert sizes["lumos/ALFWorld-v0"]["levels"] == [1, 2]
    assert sizes["lumos/ALFWorld-v0"]["num_tasks"] * 6 * 2 >= 100  # six task types, two levels


@pytest.mark.parametrize(("name", "envs"), [
    ("learning", ["lumos/MathWord-v0", "lumos/WorldQA-v0"]),
    ("generalisation", ["lumos/WebShop-v0", "lumos/Mind2Web-v0"]),
])
def test_the_partial_suites_are_the_comparison_suites_own_episodes(name, envs):
    """Their rows pair task by task with compare's rows: the same env arguments, the same seeds."""
    compare = {e.env_id: e.kwargs for e in get_suite("compare").entries}
    suite = get_suite(name)
    assert [e.env_id for e in suite.entries] == envs
    assert all(e.kwargs == compare[e.env_id] for e in suite.entries)
    assert suite.seeds == get_suite("compare").seeds


@pytest.mark.full
def test_the_comparison_suite_plans_its_procedural_envs_by_level():
    """The four fast envs of the comparison suite: 150+ episodes each, every level present
    (less the development suites' tasks, which it leaves out)."""
    entries = {e.env_id: e for e in suite_entries(suite="compare")}
    expected = {
        # reproduce's first 10 of each level, and its and offline's first 5 of each family
        "lumos/MathWord-v0": {f"level {n}": 30 for n in range(1, 6)},
        "lumos/WorldQA-v0": {f: 45 for f in ("arithmetic", "bridge", "comparison", "yesno")},
        # offline's 15 Scenes tasks: the first picture's question of each kind
        "lumos/Scenes-v0": {"level 1": 143, "level 2": 52},
        "lumos/WebShop-v0": {},
    }
    for env_id, groups in expected.items():
        plan = plan_env(entries[env_id])
        assert len(plan.specs) >= 150
        assert Counter(plan.groups.values()) == groups


def test_bootstrap_interval_is_deterministic_and_percentile():
    values = [0.0, 1.0] * 20
    ci = bootstrap_ci(values)
    assert ci == bootstrap_ci(values) and 0.3 < ci[0] < 0.5 < ci[1] < 0.7
    # the definition, written out: resample with numpy's default_rng(0), 2.5/97.5 percentiles
    rng = np.random.default_rng(0)
    means = [np.asarray(values)[rng.integers(0, 40, 40)].mean() for _ in range(BOOTSTRAP_RESAMPLES)]
    assert ci == pytest.approx(list(np.quantile(means, [0.025, 0.975])))
    assert bootstrap_ci([]) is None and bootstrap_ci([0.7]) == [0.7, 0.7]


# ------------------------------------------------------------- determinism, resume, shards
@pytest.mark.full
def test_same_seed_same_summary_and_provenance(tmp_path, half_right):
    a = _run(tmp_path / "a", half_right)
    b = _run(tmp_path / "b", half_right)
    sa, sb = _summary(tmp_path / "a"), _summary(tmp_path / "b")
    assert comparable(sa) == comparable(sb)
    assert 0 < sa["overall"]["mean"] < 1 and sa["envs"]["lumos/GSM8K-v0"]["ci95"][0] < 0.5
    assert "timing" in sa and "wall_s" in sa["timing"]["overall"] and a.summary == sa
    assert b.records and all(r["task_type"] == "math" for r in b.records)
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["lumos_gym"] == __version__ and "git" in run and run["hardware"]["cpu_count"]
    gsm = run["envs"][0]
    assert gsm["env_id"] == "lumos/GSM8K-v0" and gsm["version"] == 0
    assert gsm["data"]["source"]["kind"] == "bundled" and len(gsm["data"]["source"]["sha256"]) == 64
    assert gsm["task_ids"] == [f"gsm8k/sample/{i}" for i in range(5)] and gsm["seeds"] == [0]
    assert run["decoding"]["temperature"] == 0.0 and run["models"] == {"policy": "scripted"}
    limits = run["round_limits"]  # what bounded the episodes, since max_rounds is not given
    assert limits["task_types"]["math"] == 8 and limits["datasets"]["webshop"] == 5
    assert run["plan"]["episodes"] == 10 and len(run["plan"]["keys"]) == 10
    assert sa["provenance"]["plan"]["keys_sha256"] == run["plan"]["keys_sha256"]


@pytest.mark.full
def test_a_killed_run_resumed_gives_the_same_episodes_none_twice(tmp_path, half_right):
    _run(tmp_path / "whole", half_right)
    _run(tmp_path / "killed", half_right)
    path = tmp_path / "killed" / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # as after a SIGKILL: two episodes never written, the last one torn mid-line
    path.write_text("".join(lines[:3] + lines[5:7]) + lines[7][:40])
    calls = []
    result = _run(tmp_path / "killed", lambda r: calls.append(1) or half_right(r))
    assert result.resumed == 5 and len(calls) == 5
    keys = [json.loads(line)["key"] for line in path.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 10
    assert comparable(_summary(tmp_path / "killed")) == comparable(_summary(tmp_path / "whole"))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("torch")
    from conftest import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=2048)


@pytest.mark.full
def test_a_run_killed_by_sigkill_resumes_to_the_uninterrupted_episodes(tmp_path, tiny_model):
    """A real `lumos-gym evaluate` process, SIGKILLed after a few episodes, then --resume."""
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["evaluate", "--agent", "lumos-i", "--model", str(tiny_model), "--env", "MathWord-v0",
            "--limit", "16", "--batch-size", "1", "--max-new-tokens", "12", "--max-rounds", "2",
            "--device", "cpu", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    path = tmp_path / "killed" / "episodes.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "lumos_gym.cli", *args, "--out",
                                str(tmp_path / "killed")], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not path.exists() or path.read_bytes().count(b"\n") < 3:
            assert process.poll() is None, process.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no episode written in 120 s"
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    written = path.read_bytes().count(b"\n")
    assert 3 <= written < 16, f"the kill came too late ({written} of 16 episodes written)"
    assert main([*args, "--out", str(tmp_path / "killed"), "--resume"]) == 0

    def episodes(folder):
        rows = [json.loads(line) for line in (folder / "episodes.jsonl").open()]
        assert len(rows) == len({r["key"] for r in rows}) == 16
        return sorted((r["key"], r["status"], r["reward"], r["prediction"],
                       json.dumps(r["turns"], sort_keys=True)) for r in rows)

    assert episodes(tmp_path / "killed") == episodes(tmp_path / "whole")
    assert comparable(_summary(tmp_path / "killed")) == comparable(_summary(tmp_path / "whole"))


def test_records_of_the_old_key_format_resume(tmp_path, half_right):
    _run(tmp_path, half_right, limit=2)
    path = tmp_path / "episodes.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for r in records:  # keys written before seeds were part of them
        r["key"] = r["key"].rsplit("|seed=", 1)[0]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert _run(tmp_path, half_right, limit=2).resumed == 4


@pytest.mark.full
def test_shards_merged_equal_the_whole_run(tmp_path, half_right, capsys):
    _run(tmp_path / "whole", half_right)
    for i in (1, 2):
        _run(tmp_path / f"s{i}", half_right, shard=f"{i}/2")
    sizes = [len(read_results(tmp_path / f"s{i}").records) for i in (1, 2)]
    assert sizes == [5, 5]
    assert main(["merge", str(tmp_path / "s2"), str(tmp_path / "s1"),
                 "--out", str(tmp_path / "merged")]) == 0
    assert "merged 2 folders, 10 episodes" in capsys.readouterr().out
    from lumos_gym.leaderboard.render import load_board

    apart = load_board([tmp_path / "s1", tmp_path / "s2"]).warnings
    assert any("s1: only shard(s) 1/2 of a run; merge every shard" in w for w in apart)
    merged, whole = _summary(tmp_path / "merged"), _summary(tmp_path / "whole")
    assert comparable(merged) == comparable(whole)

    def episodes(folder):
        rows = [json.loads(line) for line in (folder / "episodes.jsonl").open()]
        return sorted((r["key"], r["reward"], r["status"], r["prediction"]) for r in rows)

    assert episodes(tmp_path / "merged") == episodes(tmp_path / "whole")
    # a shard resumed into the folder of another shard is refused
    with pytest.raises(EvaluationError, match="holds shard 1/2, not shard 2/2"):
        _run(tmp_path / "s1", half_right, shard="2/2")


@pytest.mark.full
def test_merge_refuses_what_does_not_fit(tmp_path, half_right):
    for i in (1, 2):
        _run(tmp_path / f"s{i}", half_right, shard=(i, 2))
    shutil.copytree(tmp_path / "s1", tmp_path / "s1-copy")
    with pytest.raises(ResultsError, match="both shard 1"):
        merge_results([tmp_path / "s1", tmp_path / "s1-copy"], tmp_path / "m1")
    with pytest.raises(ResultsError, match=r"shard\(s\) 2 of 2 are not given"):
        merge_results([tmp_path / "s1"], tmp_path / "m2")
    evaluate(RunConfig("cot", envs=ENVS, limit=5, shard="2/2", out=tmp_path / "cot", progress=False,
                       backends={"policy": ScriptedBackend(half_right)}))
    with pytest.raises(ResultsError, match="different configurations"):
        merge_results([tmp_path / "s1", tmp_path / "cot"], tmp_path / "m3")
    # the two shards run with other weights under the same adapter name: two runs
    for i, sha in ((1, "0"), (2, "1")):
        shutil.copytree(tmp_path / f"s{i}", tmp_path / f"w{i}")
        run = json.loads((tmp_path / f"w{i}" / "run.json").read_text())
        run["adapters"] = {"policy": {"<adapters>/policy": sha * 64}}
        (tmp_path / f"w{i}" / "run.json").write_text(json.dumps(run))
    with pytest.raises(ResultsError, match="different adapter weights"):
        merge_results([tmp_path / "w1", tmp_path / "w2"], tmp_path / "m5")
    _run(tmp_path / "other-limit", half_right, limit=4, shard="2/2")
    with pytest.raises(ResultsError, match="different episode plans"):
        merge_results([tmp_path / "s1", tmp_path / "other-limit"], tmp_path / "m4")
    # a shard whose run.json says it holds an episode the other shard has too
    run = json.loads((tmp_path / "s1-copy" / "run.json").read_text())
    run["plan"]["shard"] = [2, 2]
    (tmp_path / "s1-copy" / "run.json").write_text(json.dumps(run))
    with pytest.raises(ResultsError, match="in more than one folder"):
        merge_results([tmp_path / "s1", tmp_path / "s1-copy"], tmp_path / "m5")
    run["plan"]["shard"], run["lumos_gym"] = [1, 2], "0.0.1"
    (tmp_path / "s1-copy" / "run.json").write_text(json.dumps(run))
    with pytest.raises(ResultsError, match="different lumos-gym versions"):
        merge_results([tmp_path / "s1-copy", tmp_path / "s2"], tmp_path / "m6")
    merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "m7")
    with pytest.raises(ResultsError, match="already holds results"):
        merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "m7")


@pytest.mark.full
def test_corrupt_and_truncated_shards_load_their_valid_records(tmp_path, half_right, capsys):
    for i in (1, 2):
        _run(tmp_path / f"s{i}", half_right, shard=(i, 2))
    path = tmp_path / "s2" / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "{corrupt\n" + "".join(lines[1:4]) + lines[4][:30])
    folder = read_results(tmp_path / "s2")
    assert len(folder.records) == 4 and len(folder.problems) == 2
    assert any(":2: not an episode record" in p for p in folder.problems)
    assert any("truncated last line" in p for p in folder.problems)
    with pytest.raises(ResultsError, match="1 planned episode"):
        merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "m")
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out",
                 str(tmp_path / "m"), "--partial"]) == 0
    captured = capsys.readouterr()
    assert "truncated last line" in captured.err and "(1 missing)" in captured.out
    assert _summary(tmp_path / "m")["missing_episodes"] == 1
    (tmp_path / "s1" / "run.json").write_text("{")
    with pytest.raises(ResultsError, match="run.json is not valid JSON"):
        read_results(tmp_path / "s1")
    with pytest.raises(ResultsError, match="not a results folder"):
        read_results(tmp_path)


def test_a_partial_merge_counts_absent_shards_and_does_not_validate(tmp_path, half_right, capsys):
    _run(tmp_path / "s1", half_right, shard="1/2")
    assert main(["merge", str(tmp_path / "s1"), "--out", str(tmp_path / "m"), "--partial"]) == 0
    assert "(5 missing; shard(s) 2 not given)" in capsys.readouterr().out
    assert _summary(tmp_path / "m")["missing_episodes"] == 5
    assert main(["leaderboard", "--validate", str(tmp_path / "m")]) == 2
    out = capsys.readouterr().out
    assert "a partial merge: 5 planned episode(s) missing (shard(s) 2 not given)" in out
    assert main(["merge", str(tmp_path / "nosuch"), "--out", str(tmp_path / "x")]) == 2
    assert "no such folder: " in capsys.readouterr().err


@pytest.mark.full
def test_resume_refuses_episodes_of_another_plan_or_agent_before_any_model(tmp_path, half_right):
    _run(tmp_path, half_right, limit=3)  # 6 episodes
    with pytest.raises(EvaluationError, match="holds 2 of its 6 episodes outside this run's plan"):
        _run(tmp_path, half_right, limit=2)  # a smaller limit would mix two runs
    with pytest.raises(EvaluationError, match="outside this run's plan"):
        _run(tmp_path, half_right, envs=["MathWord-v0"], limit=1)
    assert _run(tmp_path, half_right, limit=4).resumed == 6  # a larger limit extends the run

    # the agent is checked before any model loads: a model that cannot load is never reached
    nowhere = ModelOptions(model=str(tmp_path / "no-such-model"))
    with pytest.raises(EvaluationError, match=r"another configuration \(agent\.name \('direct' "
                       r"there, 'cot' now\)"):
        evaluate(RunConfig("cot", envs=ENVS, limit=4, out=tmp_path, models=nowhere, progress=False))
    with pytest.raises(EvaluationError, match=r"agent\.config\.seed \(0 there, 3 now\)"):
        evaluate(RunConfig("direct", envs=ENVS, limit=4, out=tmp_path, seed=3, models=nowhere,
                           agent_config=AgentConfig(seed=3), progress=False))


@pytest.mark.full
def test_validate_wants_the_whole_suite(tmp_path, capsys):
    evaluate(RunConfig("oracle", suite="math", limit=1, out=tmp_path / "one", progress=False))
    assert main(["leaderboard", "--validate", str(tmp_path / "one"), "--suite", "math"]) == 2
    out = capsys.readouterr().out
    assert "not the whole suite math: its plan has" in out and "run it without --limit" in out
    evaluate(RunConfig("oracle", suite="math", out=tmp_path / "all", progress=False))
    assert main(["leaderboard", "--validate", str(tmp_path / "all"), "--suite", "math"]) == 0


def test_resume_warns_about_another_version_and_merge_verb_dispatch(tmp_path, half_right, capsys):
    _run(tmp_path / "r", half_right, limit=1)
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    run["lumos_gym"] = "0.0.1"
    (tmp_path / "r" / "run.json").write_text(json.dumps(run))
    assert _run(tmp_path / "r", half_right, limit=1).resumed == 2
    assert "started by lumos-gym 0.0.1" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    code = main(["merge", str(tmp_path / "r"), str(tmp_path / "plain"), "--out",
                 str(tmp_path / "x")])
    assert code == 2 and "neither" in capsys.readouterr().err


def test_shard_selection_is_a_partition():
    keys = [f"k{i:02d}" for i in range(11)]
    parts = [shard_keys(reversed(keys), (i, 3)) for i in (1, 2, 3)]
    assert sorted(sum(parts, [])) == keys and [len(p) for p in parts] == [4, 4, 3]
    assert parts[0][:2] == ["k00", "k03"]
    for bad in ("0/2", "3/2", "1-2", "a/b"):
        with pytest.raises(ResultsError, match="I/N"):
            parse_shard(bad)


def test_adapter_checksums_cover_the_weights(tmp_path):
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"weights")

    class Adapted(ScriptedBackend):
        def info(self):
            return BackendInfo("scripted", "base", {"adapters": {"planner": str(folder)}})

    sums = _adapter_checksums({"planner": Adapted(lambda r: "")})
    import hashlib

    assert sums == {"planner": {str(folder): hashlib.sha256(b"weights").hexdigest()}}


def test_training_cards_name_data_budget_and_seed(tmp_path):
    """run.json carries each adapter's training card: its seed, budget and data checksums."""
    import json

    from lumos_gym.evaluation.provenance import _training_cards, training_card

    trained, bare = tmp_path / "trained", tmp_path / "bare"
    for folder in (trained, bare):
        folder.mkdir()
        (folder / "adapter_model.safetensors").write_bytes(b"weights")
    (trained / "lumos_training.json").write_text(json.dumps({
        "config": {"base_model": "smollm2-135m", "recipe": "gpu-small", "seed": 2, "lr": 4e-4,
                   "batch_size": 16},
        "data_sha256": {"runs/g2/data/train/integrated.jsonl": "ab" * 32},
        "steps": 637, "epochs": 3.15, "train_examples": 3223, "final_loss": 0.05,
        "seconds": 300.0, "torch_version": "2.11.0", "lumos_gym_version": "0.1.0",
    }))
    card = training_card(trained)
    assert card["seed"] == 2 and card["steps"] == 637 and card["recipe"] == "gpu-small"
    assert card["data"] == {"integrated.jsonl": "ab" * 32}
    assert training_card(bare) is None

    class Adapted(ScriptedBackend):
        def info(self):
            adapters = {"a": str(trained), "b": str(bare)}
            return BackendInfo("scripted", "base", {"adapters": adapters})

    assert _training_cards({"policy": Adapted(lambda r: "")}) == {str(trained): card}


def _suites_dir():
    from importlib import resources

    return str(resources.files("lumos_gym.evaluation").joinpath("suites")) + "/"


def test_provenance_paths_travel(tmp_path, monkeypatch):
    """Package, cache and home paths are written relative to their roots; others are kept."""
    from pathlib import Path

    import lumos_gym
    from lumos_gym.evaluation.identity import portable_paths

    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path / "cache"))
    package = Path(lumos_gym.__file__).resolve().parent
    value = {
        "adapter": str(package / "agents" / "reference" / "x" / "planner"),
        "model": [str(tmp_path / "cache" / "models" / "smollm2-135m")],
        "home": str(Path("~").expanduser().resolve() / "runs" / "p"),
        "other": "/opt/elsewhere", "text": "not a path", "n": 3,
        str(package / "tools"): "key",
    }
    assert portable_paths(value) == {
        "adapter": "<lumos_gym>/agents/reference/x/planner",
        "model": ["<cache>/models/smollm2-135m"],
        "home": "~/runs/p", "other": "/opt/elsewhere", "text": "not a path", "n": 3,
        "<lumos_gym>/tools": "key",
    }
