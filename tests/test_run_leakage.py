"""``evaluate`` records in run.json the leakage check of its tasks against its adapters' data.

An adapter folder here is a hand-made ``lumos_training.json`` (the card ``lumos-gym train``
writes) naming training files; the run's backend is scripted and reports that folder as its
adapter, so the whole path (provenance, the card, the files, the check) is the real one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gymnasium as gym
from conftest import ScriptedBackend

from lumos_gym.conversion.leakage import number_key
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.identity import local_path, portable_paths
from lumos_gym.evaluation.provenance import run_leakage
from lumos_gym.evaluation.suites import SuiteEntry

LEVEL3 = {"split": "test", "levels": [3], "num_tasks": 2}
ENTRIES = [SuiteEntry("lumos/MathWord-v0", LEVEL3)]


def _test_tasks():
    env = gym.make("lumos/MathWord-v0", **LEVEL3)
    try:
        return list(env.unwrapped.tasks)
    finally:
        env.close()


def _training_file(path: Path, *, copy: bool) -> Path:
    """Annotations: a reworded copy of the first test problem (``copy``), else another one."""
    task = _test_tasks()[0]
    text = "Reworded: " + task.question if copy else "Ann has 3 pens, 4 cups and 5 hats."
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"id": "t/0", "task": text, "answer": task.answer if copy
                                else "12", "task_type": "math", "subgoal_plan": "x"}) + "\n")
    return path


def _adapter(folder: Path, files: list[Path], digests: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    names = [str(f) for f in files]
    if digests is None:
        digests = {n: hashlib.sha256(Path(n).read_bytes()).hexdigest() for n in names}
    (folder / "lumos_training.json").write_text(json.dumps({
        "config": {"data": names, "base_model": "tiny", "seed": 0}, "data_sha256": digests}))
    return folder


def _run(*folders: Path) -> dict:
    return {"adapters": {"policy": {str(f): None for f in folders}}}


def test_local_path_reads_back_portable_paths(tmp_path):
    home = Path("~").expanduser().resolve() / "somewhere" / "x.jsonl"
    assert portable_paths(str(home)) == "~/somewhere/x.jsonl"
    assert local_path("~/somewhere/x.jsonl") == home
    assert local_path(str(tmp_path)) == tmp_path


def test_a_checked_run_records_the_report_and_the_files(tmp_path):
    data = _training_file(tmp_path / "data" / "train.jsonl", copy=True)
    adapter = _adapter(tmp_path / "adapter", [data])
    entry = run_leakage(_run(adapter), ENTRIES)
    assert entry["status"] == "checked" and entry["clean"] is True
    assert entry["total"]["test_tasks"] == 2 and entry["total"]["shared_tasks"] == 0
    assert entry["total"]["near_duplicates"] == 1  # the reworded problem
    task = _test_tasks()[0]
    numbers, answer = number_key(task.question, task.answer)
    assert entry["envs"]["lumos/MathWord-v0"]["near_examples"] == [
        f"{task.id} ~ t/0 (numbers {', '.join(numbers)}; answer {answer})"]
    [file] = entry["training_files"]
    assert file["file"] == str(data) and file["path"] == str(data.resolve())
    assert file["sha256"] == file["card_sha256"]


def test_no_card_no_file_absent_files_and_other_checksums_are_unknown(tmp_path):
    assert run_leakage({"adapters": {}}, ENTRIES) == {"status": "unknown",
                                                       "reason": "no training card"}
    bare = tmp_path / "bare"
    bare.mkdir()
    assert run_leakage(_run(bare), ENTRIES) == {"status": "unknown",
                                                "reason": f"no training card ({bare})"}
    nameless = _adapter(tmp_path / "nameless", [], {})
    assert run_leakage(_run(nameless), ENTRIES)["reason"] == (
        f"the training card of {nameless} names no training file")
    gone = _adapter(tmp_path / "gone", [tmp_path / "nowhere.jsonl"],
                    {str(tmp_path / "nowhere.jsonl"): "0" * 64})
    entry = run_leakage(_run(gone), ENTRIES)
    assert entry["status"] == "unknown"
    assert entry["reason"] == "training file(s) not on this machine: " + str(
        tmp_path / "nowhere.jsonl")
    assert entry["training_files"][0]["path"] is None
    data = _training_file(tmp_path / "data" / "train.jsonl", copy=False)
    changed = _adapter(tmp_path / "changed", [data], {str(data): "f" * 64})
    entry = run_leakage(_run(changed), ENTRIES)
    assert entry["reason"].startswith("training file(s) whose SHA-256 differs from the card's")
    assert entry["training_files"][0]["card_sha256"] == "f" * 64
    # one adapter without a card makes the whole run's check unknown
    good = _adapter(tmp_path / "good", [data])
    assert run_leakage(_run(good, bare), ENTRIES)["status"] == "unknown"


def test_a_relative_file_name_is_found_beside_the_adapter(tmp_path):
    adapter = tmp_path / "adapter"
    data = _training_file(adapter / "train.jsonl", copy=False)
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    _adapter(adapter, [Path("train.jsonl")], {"train.jsonl": digest})
    entry = run_leakage(_run(adapter), ENTRIES)
    assert entry["status"] == "checked" and entry["total"]["near_duplicates"] == 0


def _evaluate(out: Path, suite: Path, **config) -> dict:
    backend = config.pop("backend", None)
    evaluate(RunConfig("direct", suite=str(suite), out=out, progress=False,
                       backends={"policy": backend or ScriptedBackend(lambda r: "1")},
                       models=ModelOptions(batch_size=1), **config))
    return json.loads((out / "run.json").read_text())


def test_evaluate_writes_the_leakage_entry_and_keeps_a_callers(tmp_path):
    suite = tmp_path / "mine.json"
    suite.write_text(json.dumps({"name": "mine", "envs": [
        {"env": "lumos/MathWord-v0", "kwargs": LEVEL3}]}))
    run = _evaluate(tmp_path / "plain", suite)
    assert run["leakage"] == {"status": "unknown", "reason": "no training card"}
    summary = json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert summary["provenance"]["leakage"] == run["leakage"]
    adapter = _adapter(tmp_path / "adapter",
                       [_training_file(tmp_path / "data" / "train.jsonl", copy=True)])
    trained = ScriptedBackend(lambda r: "1", details={"adapters": {"mine": str(adapter)}})
    run = _evaluate(tmp_path / "trained", suite, backend=trained)
    assert run["leakage"]["status"] == "checked" and run["leakage"]["clean"] is True
    assert run["leakage"]["total"]["near_duplicates"] == 1
    assert run["leakage"]["training_files"][0]["adapter"] == str(adapter)
    mine = {"clean": True, "report": "leakage.json"}
    run = _evaluate(tmp_path / "given", suite, backend=trained, provenance={"leakage": mine})
    assert run["leakage"] == mine


def test_record_writes_the_check_for_adapters_trained_elsewhere(tmp_path, capsys):
    """Cards name each training file with its SHA-256: a data build holding those files is
    what trained the run, and its check is written into run.json, marked as recorded."""
    from lumos_gym.cli import main

    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    record = {"id": "x", "messages": [{"role": "user", "content": "What is 2 + 2?"},
                                      {"role": "assistant", "content": "4"}]}
    (data / "train" / "integrated.jsonl").write_text(json.dumps(record) + "\n")
    digest = hashlib.sha256((data / "train" / "integrated.jsonl").read_bytes()).hexdigest()
    suite = tmp_path / "mini.json"
    suite.write_text(json.dumps({"name": "mini", "description": "d", "envs": [
        {"env": "lumos/MathWord-v0", "kwargs": {"split": "test", "levels": [1], "num_tasks": 2}}]}))
    trained, oracle = tmp_path / "trained", tmp_path / "oracle"
    for folder, training in ((trained, {"~/gpu/policy": {"data": {"integrated.jsonl": digest}}}),
                             (oracle, {})):
        folder.mkdir()
        (folder / "run.json").write_text(json.dumps(
            {"suite": {"name": str(suite)}, "training": training}))
    args = ["data", "leakage", "--train", str(data), "--record", str(trained), str(oracle)]
    assert main(args) == 0
    entry = json.loads((trained / "run.json").read_text())["leakage"]
    assert entry["status"] == "checked" and entry["clean"] is True
    assert entry["training_files"][0]["sha256"] == digest
    assert entry["files"] == ["data/train/integrated.jsonl"]  # no path of this machine
    assert entry["recorded"]["by"] == "lumos-gym data leakage --record"
    assert json.loads((oracle / "run.json").read_text())["leakage"]["status"] == "none"
    # a card whose file the build holds with another checksum: refused, nothing written
    (trained / "run.json").write_text(json.dumps(
        {"suite": {"name": str(suite)}, "training": {"~/p": {"data": {"integrated.jsonl": "ab"}}}}))
    assert main(args[:-1]) == 2
    assert "holds it with SHA-256" in capsys.readouterr().err
    assert "leakage" not in json.loads((trained / "run.json").read_text())
