"""Data builds are identified by their files, and training files find the build they came from."""

from __future__ import annotations

import json

from lumos_gym.databuild import (
    MIXTURE_FILE,
    SPLITS_FILE,
    build_digest,
    file_build,
    files_build,
    main,
    mixture_record,
    recorded_build,
)


def _build(folder, text="a"):
    for sub, name in (("annotations", "x.jsonl"), ("train", "plan-iterative.jsonl"),
                      ("test", "t.jsonl")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / name).write_text(f'{{"id": "{text}-{sub}"}}\n')
    (folder / SPLITS_FILE).write_text(json.dumps({"splits": [], "build": build_digest(folder)}))
    return folder


def test_the_id_changes_with_any_file_and_names_every_file(tmp_path):
    a, b = _build(tmp_path / "a"), _build(tmp_path / "b")
    assert build_digest(a)["id"] == build_digest(b)["id"]
    assert sorted(build_digest(a)["files"]) == [
        "annotations/x.jsonl", "test/t.jsonl", "train/plan-iterative.jsonl"]
    (b / "test" / "t.jsonl").write_text('{"id": "other"}\n')
    assert build_digest(a)["id"] != build_digest(b)["id"]
    assert main([str(a)]) == 0 and main([str(b)]) == 1  # b's files no longer match its record


def test_training_files_find_their_build_directly_or_through_a_mixture(tmp_path):
    data = _build(tmp_path / "data")
    build_id = recorded_build(data)["id"]
    assert file_build(data / "train" / "plan-iterative.jsonl") == {"id": build_id, "from": "build"}
    mixture = tmp_path / "mixture"
    mixture.mkdir()
    (mixture / "plan-iterative.jsonl").write_text("{}\n")
    (mixture / MIXTURE_FILE).write_text(json.dumps(
        mixture_record(recorded_build(data), seed=0, mix={"maths": 2})))
    found = file_build(mixture / "plan-iterative.jsonl")
    assert found == {"id": build_id, "from": "mixture", "seed": 0, "mix": {"maths": 2}}
    loose = tmp_path / "mine.jsonl"
    loose.write_text("{}\n")
    assert file_build(loose) is None
    assert files_build([mixture / "plan-iterative.jsonl", loose]) is None
    assert files_build([mixture / "plan-iterative.jsonl"])["id"] == build_id
