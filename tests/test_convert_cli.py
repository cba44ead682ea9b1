"""``lumos-gym convert`` and ``lumos-gym export`` end to end, offline."""

from __future__ import annotations

import json

import pytest

from lumos_gym.cli import main
from lumos_gym.conversion import read_annotations
from lumos_gym.models.factory import backend_from_spec


def test_convert_verify_and_export_the_math_envs(tmp_path, capsys):
    gsm, word = tmp_path / "gsm8k.jsonl", tmp_path / "mathword.jsonl"
    assert main(["convert", "--env", "GSM8K-v0", "--out", str(gsm)]) == 0
    out = capsys.readouterr().out
    assert "24 / 24" in out
    assert (tmp_path / "gsm8k.rejected.jsonl").read_text() == ""
    rounded = next(a for a in read_annotations(gsm) if a.id == "gsm8k/sample/22")
    assert rounded.actions[-1].text == "R2 = Calculator(floor(R1)) = 3"  # 20/6 toy cars: 3
    assert main(["convert", "--env", "MathWord-v0", "-k", "split=train", "-k", "num_tasks=20",
                 "--out", str(word)]) == 0
    assert len([a for a in read_annotations(word)]) == 60
    first = gsm.read_bytes()
    assert main(["convert", "--env", "GSM8K-v0", "--out", str(gsm)]) == 0
    assert gsm.read_bytes() == first  # the same input gives the same bytes
    for fmt in ("plan-iterative", "ground-iterative", "plan-onetime", "ground-onetime",
                "integrated", "react", "cot", "direct"):
        target = tmp_path / f"{fmt}.jsonl"
        assert main(["export", str(gsm), str(word), "--format", fmt, "--dataset", "unified",
                     "--out", str(target)]) == 0
        records = [json.loads(line) for line in target.open()]
        assert len(records) == 84 and records[0]["id"] == "unified_0"
    capsys.readouterr()
    assert main(["export", str(tmp_path / "none.jsonl"), "--format", "cot",
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "no annotation file" in capsys.readouterr().err
    # a training-record file given to export: not one annotation, so an error, not 0 records
    assert main(["export", str(tmp_path / "cot.jsonl"), "--format", "cot",
                 "--out", str(tmp_path / "y.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "no annotation could be read" in err and "training records are already" in err
    assert not (tmp_path / "y.jsonl").exists()


@pytest.mark.full
def test_convert_with_a_model_keeps_every_rejection(tmp_path, capsys):
    pytest.importorskip("torch")
    from conftest import save_tiny_model

    tiny = save_tiny_model(tmp_path / "tiny", max_positions=4096)
    out = tmp_path / "llm.jsonl"
    args = ["convert", "--env", "GSM8K-v0", "--limit", "3", "--llm", f"hf:{tiny}",
            "--out", str(out)]
    assert main(args) == 0
    rejected = [json.loads(line) for line in open(tmp_path / "llm.rejected.jsonl")]
    assert len(rejected) == 3 and all(r["reason"].startswith("conversion:") for r in rejected)
    cache = tmp_path / "llm.llm-cache.jsonl"
    assert cache.is_file() and len(cache.read_text().splitlines()) == 3
    assert main(args) == 0  # resumes: nothing new to ask
    assert len(cache.read_text().splitlines()) == 3


def test_backend_specs():
    with pytest.raises(Exception, match="BACKEND:MODEL"):
        backend_from_spec("smollm2")
    with pytest.raises(Exception, match="@BASE_URL"):
        backend_from_spec("openai:model")


@pytest.mark.full
def test_data_build_makes_every_offline_split(tmp_path, capsys):
    assert main(["data", "build", "--out", str(tmp_path), "--num-tasks", "4"]) == 0
    out = capsys.readouterr().out
    assert "mathword-train.jsonl: 20 verified annotations, 0 rejected" in out
    train = [json.loads(line) for line in open(tmp_path / "annotations" / "mathword-train.jsonl")]
    test = [json.loads(line) for line in open(tmp_path / "test" / "mathword-test.jsonl")]
    assert len(test) == 20 and not {r["task"] for r in train} & {t["question"] for t in test}
    assert len((tmp_path / "test" / "gsm8k-sample.jsonl").read_text().splitlines()) == 24
    assert "worldqa-train.jsonl: 16 verified annotations, 0 rejected" in out
    assert len((tmp_path / "test" / "humaneval.jsonl").read_text().splitlines()) == 164
    assert "webshop-train.jsonl: 10 verified annotations, 0 rejected" in out  # 500 * 4 / 200
    assert "scenes-train.jsonl: 15 verified annotations, 0 rejected" in out  # one per kind
    for fmt in ("plan-iterative", "ground-onetime", "react", "direct"):
        records = [json.loads(r) for r in open(tmp_path / "train" / f"{fmt}.jsonl")]
        assert sum(r["dataset"] in ("maths", "complex_qa") for r in records) == 36
        assert {r["dataset"] for r in records} == {"maths", "complex_qa", "webshop", "web_agent",
                                                   "multimodal", "game"}
