"""The Hugging Face hub paths, offline: a local dataset folder stands in for a hub repo."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")

from lumos_gym.conversion.exports import export_records, save_hf_dataset  # noqa: E402
from lumos_gym.envs.math.data import load_gsm8k  # noqa: E402
from lumos_gym.envs.math.official import MathEnv, _write_jsonl  # noqa: E402
from lumos_gym.envs.sources import HubSource  # noqa: E402

ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many now?",
     "answer": "He has 3+4 = <<3+4=7>>7 apples.\n#### 7"},
    {"question": "A box holds 12 eggs. How many eggs are in 5 boxes?",
     "answer": "5 boxes hold 5*12 = <<5*12=60>>60 eggs.\n#### 60"},
]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def test_hub_source_reads_a_dataset_repo_layout_offline(tmp_path):
    repo = tmp_path / "gsm8k-repo"
    repo.mkdir()
    (repo / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    source = HubSource(str(repo), split="test", loader=load_gsm8k, writer=_write_jsonl,
                       cache_path=tmp_path / "cache" / "hub-test.jsonl")
    env = MathEnv(tasks=source.load())
    assert [t.answer for t in env.tasks] == ["7", "60"]
    assert source.describe()["sha256"]
    assert (tmp_path / "cache" / "hub-test.jsonl").is_file()  # later loads need no hub


def test_hf_dataset_export_round_trips(tmp_path):
    from test_conversion import genghis

    records = [r for r in export_records([genghis()], "plan-iterative")]
    assert save_hf_dataset(records, tmp_path / "ds") == 1
    loaded = datasets.load_from_disk(str(tmp_path / "ds"))
    assert loaded[0]["messages"] == records[0]["messages"]
    assert loaded[0]["id"] == "complex_qa_0"
