"""The whole pipeline through the command line, offline, on the tiny random Llama of conftest.py.

data (MathWord train tasks) -> ``convert`` (verified annotations) -> ``export`` (planner and
grounder records) -> ``train`` (one LoRA adapter each) -> ``evaluate`` (lumos-i on MathWord test
tasks, with the two adapter folders given as the planner and the grounder).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from conftest import save_tiny_model  # noqa: E402

from lumos_gym.agents.runner import STATUSES  # noqa: E402
from lumos_gym.cli import main  # noqa: E402


def _episodes(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").open()]


@pytest.mark.full
def test_convert_export_train_evaluate(tmp_path, capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _pipeline(tmp_path, capsys)
    finally:
        torch.set_num_threads(threads)


def _pipeline(tmp_path, capsys):
    tiny = save_tiny_model(tmp_path / "tiny", max_positions=4096)  # Lumos prompts are long
    annotations = tmp_path / "mathword.jsonl"
    assert main(["convert", "--env", "lumos/MathWord-v0", "-k", "split=train", "-k",
                 "num_tasks=12", "-k", "levels=[1]", "--out", str(annotations)]) == 0
    assert "12 annotations kept" in capsys.readouterr().out

    adapters = {}
    for role, fmt in (("planner", "plan-iterative"), ("grounder", "ground-iterative")):
        records = tmp_path / f"{fmt}.jsonl"
        assert main(["export", str(annotations), "--format", fmt, "--out", str(records)]) == 0
        assert len(records.read_text().splitlines()) == 12
        adapters[role] = out = tmp_path / role
        code = main(["train", "--data", str(records), "--base-model", str(tiny), "--out", str(out),
                     "--max-steps", "10", "--lr", "0.03", "--max-length", "1024",
                     "--batch-size", "2", "--eval-fraction", "0.2", "--save-steps", "100",
                     "--report-to", "none", "--device", "cpu", "--threads", "1"])
        assert code == 0
        assert f"adapter: {out} (10 steps" in capsys.readouterr().out
        report = json.loads((out / "lumos_training.json").read_text())
        assert report["final_loss"] < report["first_loss"] - 1.0, report
        assert report["eval_losses"] and report["encode"]["truncated"] == 0
        assert (out / "adapter_config.json").is_file() and not (out / "config.json").exists()

    common = ["evaluate", "--agent", "lumos-i", "--env", "lumos/MathWord-v0", "-k", "split=test",
              "-k", "num_tasks=2", "--limit", "2", "--device", "cpu", "--max-new-tokens", "16",
              "--max-rounds", "2", "--no-progress"]
    results = tmp_path / "results"
    assert main([*common, "--planner", str(adapters["planner"]),
                 "--grounder", str(adapters["grounder"]), "--out", str(results)]) == 0
    episodes = _episodes(results)
    assert len(episodes) == 2 and len({e["key"] for e in episodes}) == 2
    assert all(e["status"] in STATUSES and e["env_id"] == "lumos/MathWord-v0" for e in episodes)
    assert all({"planner", "grounder"} <= {t.get("role") for t in e["turns"]} for e in episodes)
    assert all(e["output_tokens"] > 0 for e in episodes)
    backends = json.loads((results / "run.json").read_text())["backends"]
    for role in ("planner", "grounder"):
        assert backends[role]["model_id"] == str(tiny)  # the base named in adapter_config.json
        assert backends[role]["details"]["adapter"] == role

    # the same models named as a base plus --adapter give the same greedy episodes
    same = tmp_path / "same"
    by_role = [f"--adapter={role}={folder}" for role, folder in adapters.items()]
    assert main([*common, "--model", str(tiny), *by_role, "--out", str(same)]) == 0
    assert [e["turns"] for e in _episodes(same)] == [e["turns"] for e in episodes]
