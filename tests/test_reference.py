"""Training outputs as models: adapter folders, reference adapters, reproduce's parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos_gym.errors import BackendError, EvaluationError
from lumos_gym.evaluation.backends import with_reference
from lumos_gym.models.factory import ModelOptions, role_model
from lumos_gym.training.config import TrainingError
from lumos_gym.training.mixture import choose_ids, domain_of_id, write_subset
from lumos_gym.workflows.reproduce import (
    BASE_NAME,
    portable_training_report,
    render_report,
    score_table,
    task_group,
)

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")


def _adapter(folder, base: str | None = "some-base") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"peft_type": "LORA"}
    if base is not None:
        config["base_model_name_or_path"] = base
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return str(folder)


def test_adapter_folder_stands_for_its_base_and_itself(tmp_path):
    from lumos_gym.models.hf import adapter_folder_base, split_model_name

    adapter = _adapter(tmp_path / "a", base="smollm2-135m")
    assert adapter_folder_base(adapter) == "smollm2-135m"
    assert split_model_name(adapter) == ("smollm2-135m", adapter)
    assert split_model_name("smollm2-135m") == ("smollm2-135m", None)
    # a folder with a full model (config.json) is a model, adapter files or not
    (tmp_path / "a" / "config.json").write_text("{}")
    assert adapter_folder_base(adapter) is None
    with pytest.raises(BackendError, match="names no base model"):
        adapter_folder_base(_adapter(tmp_path / "b", base=None))


def test_role_model_splits_adapter_folders_and_refuses_doubles(tmp_path):
    planner = _adapter(tmp_path / "p", base="base-x")
    options = ModelOptions(planner=planner, grounder="other-model")
    assert role_model(options, "planner") == ("base-x", planner)
    assert role_model(options, "grounder") == ("other-model", None)
    doubled = ModelOptions(planner=planner, adapters={"planner": planner})
    with pytest.raises(EvaluationError, match="not both"):
        role_model(doubled, "planner")
    policy = ModelOptions(model=_adapter(tmp_path / "q", base="base-y"))
    assert role_model(policy, "policy") == ("base-y", str(tmp_path / "q"))


def test_reference_adapters_apply_only_when_nothing_is_named(tmp_path, monkeypatch):
    from lumos_gym.models import reference

    monkeypatch.setattr(reference, "REFERENCE_ROOT", tmp_path)
    ref = reference.REFERENCE_AGENTS["lumos-i"]
    assert with_reference("lumos-i", ModelOptions()).planner is None  # none shipped here yet
    for sub in ref.roles.values():
        _adapter(tmp_path / ref.folder / sub, base="smollm2-135m")
    chosen = with_reference("lumos-i", ModelOptions())
    assert chosen.planner == str(tmp_path / ref.folder / "planner")
    assert chosen.grounder == str(tmp_path / ref.folder / "grounder")
    assert role_model(chosen, "planner") == ("smollm2-135m", chosen.planner)
    on_vllm = with_reference("lumos-i", ModelOptions(backend="vllm"))
    assert (on_vllm.planner, on_vllm.grounder) == (chosen.planner, chosen.grounder)
    served = with_reference("lumos-i", ModelOptions(backend="openai"))  # `serve --agent`'s names
    assert (served.planner, served.grounder) == ("lumos-i-planner", "lumos-i-grounder")
    for options in (ModelOptions(model="m"), ModelOptions(reference=False),
                    ModelOptions(adapters={"*": "x"}), ModelOptions(backend="openai", model="m")):
        assert with_reference("lumos-i", options) == options
    assert with_reference("react", ModelOptions()) == ModelOptions()


def test_shipped_reference_adapters_are_small_and_name_their_base():
    from lumos_gym.models.reference import REFERENCE_AGENTS, reference_models

    ref = REFERENCE_AGENTS["lumos-i"]
    models = reference_models("lumos-i")
    if not models:
        pytest.skip("no reference adapters in this checkout")
    assert (ref.path / "CARD.md").is_file()
    from lumos_gym.tools.qa import QA_REFERENCE_ADAPTER, default_qa_model

    folders = [ref.path / folder for folder in models.values()]
    if (QA_REFERENCE_ADAPTER / "adapter_config.json").is_file():  # the QA tool's, when shipped
        folders.append(QA_REFERENCE_ADAPTER)
        assert default_qa_model() == f"hf:{QA_REFERENCE_ADAPTER}"
    for folder in folders:
        config = json.loads((folder / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == ref.base_model
        weights = folder / "adapter_model.safetensors"
        assert weights.stat().st_size <= 6 * 1024 * 1024
        report = json.loads((folder / "lumos_training.json").read_text())
        assert not any(Path(v).is_absolute() for v in _strings(report))


def test_two_adapter_folders_share_one_loaded_base(tmp_path):
    from conftest import save_tiny_model

    from lumos_gym.models.factory import build_backends

    tiny = str(save_tiny_model(tmp_path / "tiny", max_positions=256))
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folders = {}
    for role in ("planner", "grounder"):
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                               LoraConfig(r=2, target_modules="all-linear"))
        model.peft_config["default"].base_model_name_or_path = tiny
        model.save_pretrained(tmp_path / role)
        folders[role] = str(tmp_path / role)
    backends = build_backends(("planner", "grounder"), ModelOptions(**folders, batch_size=2))
    try:
        assert len(backends.owned) == 1
        assert backends["planner"].adapter == "planner"
        assert backends["grounder"].adapter == "grounder"
        info = backends["planner"].info()
        assert set(info.details["adapters"]) == {"planner", "grounder"}
    finally:
        backends.close()


# -------------------------------------------------------------------------------- reproduce
def test_task_group_prefers_level_then_family():
    assert task_group({"level": 2, "family": "x"}) == "level 2"
    assert task_group({"family": "capital"}) == "capital"
    assert task_group({"task_type": "pick_and_place_simple"}) == "pick_and_place_simple"
    assert task_group({}) == "all"


def test_score_table_reports_env_and_level_means():
    records = [
        {"env_id": "lumos/MathWord-v0", "task_id": "a", "reward": 1.0},
        {"env_id": "lumos/MathWord-v0", "task_id": "b", "reward": 0.0},
        {"env_id": "lumos/MathWord-v0", "task_id": "c", "reward": 0.0},
    ]
    groups = {"lumos/MathWord-v0": {"a": "level 1", "b": "level 1", "c": "level 2"}}
    table = score_table({BASE_NAME: [{**r, "reward": 0.0} for r in records], "lumos-i": records},
                        groups)
    assert table["lumos-i"]["MathWord-v0"]["mean"] == pytest.approx(1 / 3)
    assert table["lumos-i"]["MathWord-v0 / level 1"] == {"mean": 0.5, "se": 0.5, "episodes": 2}
    assert table[BASE_NAME]["MathWord-v0 / level 2"]["mean"] == 0.0
    text = render_report(table)
    lines = text.splitlines()
    assert lines[0] == f"| split | episodes | {BASE_NAME} | lumos-i |"
    assert lines[2].startswith("| MathWord-v0 | 3 | 0.000 ± 0.000 | 0.333 ± 0.333")
    assert "level 1 | 2 | 0.000 ± 0.000 | 0.500 ± 0.500" in lines[3]


def _strings(data):
    if isinstance(data, dict):
        for key, value in data.items():
            yield key
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)
    elif isinstance(data, str):
        yield data


def test_portable_training_report_keeps_no_machine_paths(tmp_path):
    mixture, models = str(tmp_path / "mixture"), str(tmp_path / "models")
    report = {
        "config": {"data": [f"{mixture}/plan-iterative.jsonl"], "out": f"{models}/p"},
        "data_sha256": {f"{mixture}/plan-iterative.jsonl": "abc"},
        "resumed_from": f"{models}/p/checkpoint-20", "merged": f"{models}/m", "steps": 3,
    }
    portable = portable_training_report(report)
    assert not any(Path(v).is_absolute() for v in _strings(portable))
    assert portable["config"]["data"] == ["plan-iterative.jsonl"]
    assert portable["resumed_from"] == "checkpoint-20" and portable["steps"] == 3


def _export(path, ids, tag):
    with open(path, "w") as f:
        for record_id in ids:
            f.write(json.dumps({"id": record_id, "messages": [tag]}) + "\n")


def test_mixture_draws_the_same_records_in_every_format(tmp_path):
    ids = [f"maths_{i}" for i in range(10)] + [f"complex_qa_{i}" for i in range(4)]
    _export(tmp_path / "plan.jsonl", ids, "plan")
    _export(tmp_path / "ground.jsonl", ids, "ground")
    chosen = choose_ids(tmp_path / "plan.jsonl", {"maths": 3, "complex_qa": 10}, seed=1)
    assert sorted(domain_of_id(i) for i in chosen) == ["complex_qa"] * 4 + ["maths"] * 3
    assert chosen == choose_ids(tmp_path / "plan.jsonl", {"maths": 3, "complex_qa": 10}, seed=1)
    assert write_subset(tmp_path / "ground.jsonl", tmp_path / "g.jsonl", chosen) == 7
    kept = [json.loads(line) for line in open(tmp_path / "g.jsonl")]
    assert {r["id"] for r in kept} == set(chosen) and kept[0]["messages"] == ["ground"]
    _export(tmp_path / "short.jsonl", ids[:5], "x")
    with pytest.raises(TrainingError, match="lacks"):
        write_subset(tmp_path / "short.jsonl", tmp_path / "s.jsonl", chosen)
    with pytest.raises(TrainingError, match="no record"):
        choose_ids(tmp_path / "plan.jsonl", {"web_agent": 5})


def test_an_adapter_for_another_base_fails_clearly_before_any_episode(tmp_path):
    from conftest import build_tokenizer, save_tiny_model
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from lumos_gym.models.hf import HFBackend

    tiny = str(save_tiny_model(tmp_path / "tiny", max_positions=256))
    tokenizer = build_tokenizer()
    wide = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    ))
    wide.save_pretrained(tmp_path / "wide")
    adapter = get_peft_model(wide, LoraConfig(r=2, target_modules="all-linear"))
    adapter.peft_config["default"].base_model_name_or_path = str(tmp_path / "wide")
    adapter.save_pretrained(tmp_path / "adapter")
    with pytest.raises(BackendError, match="was made for") as err:
        HFBackend(tiny, adapter=tmp_path / "adapter")
    assert str(tmp_path / "wide") in str(err.value)
    from lumos_gym.cli import main

    code = main(["evaluate", "--model", tiny, "--adapter", f"planner={tmp_path / 'adapter'}",
                 "--env", "MathWord-v0", "--limit", "1", "--out", str(tmp_path / "r")])
    assert code == 2
    assert not (tmp_path / "r" / "episodes.jsonl").exists()


def test_merge_verb_writes_a_model_that_loads(tmp_path):
    from conftest import save_tiny_model
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lumos_gym.cli import main

    tiny = str(save_tiny_model(tmp_path / "tiny", max_positions=256))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                           LoraConfig(r=2, target_modules="all-linear", init_lora_weights=False))
    model.peft_config["default"].base_model_name_or_path = tiny
    model.save_pretrained(tmp_path / "adapter")
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        expected = model(ids).logits
    assert main(["merge", str(tmp_path / "adapter"), "--out", str(tmp_path / "merged"),
                 "--dtype", "fp32"]) == 0
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, expected, atol=1e-4)
    assert main(["merge", str(tmp_path / "tiny"), "--out", str(tmp_path / "m2")]) == 2


def _prepared_run(tmp_path, num_tasks: int, formats) -> Path:
    """A reproduce folder whose data step is done: MathWord level-1 records in ``formats``."""
    from lumos_gym.cli import main

    out = tmp_path / "run"
    train = out / "data" / "train"
    train.mkdir(parents=True)
    annotations = tmp_path / "mathword.jsonl"
    assert main(["convert", "--env", "lumos/MathWord-v0", "-k", "split=train", "-k",
                 f"num_tasks={num_tasks}", "-k", "levels=[1]", "--out", str(annotations)]) == 0
    for fmt in formats:
        assert main(["export", str(annotations), "--format", fmt,
                     "--out", str(train / f"{fmt}.jsonl")]) == 0
    (out / "data" / ".built").write_text("{}")
    return out


@pytest.mark.full
def test_reproduce_trains_every_agent_on_one_mixture_scores_and_ships(tmp_path, monkeypatch):
    """reproduce_offline end to end on the tiny model and a small prepared data folder."""
    from conftest import save_tiny_model

    from lumos_gym.agents.base import AgentConfig
    from lumos_gym.models import reference
    from lumos_gym.workflows.reproduce import TestEnv, reproduce_offline, ship_reference

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tiny = str(save_tiny_model(tmp_path / "tiny", max_positions=4096))
    out = _prepared_run(tmp_path, 6, ("plan-iterative", "ground-iterative", "cot"))
    suite = (TestEnv("lumos/MathWord-v0", {"split": "test", "levels": [1, 2], "num_tasks": 1}),)
    settings = dict(
        agents=["lumos-i", "cot"], base_model=tiny, suite=suite, mix={"maths": 4},
        training={"max_steps": 2, "report_to": "none", "device": "cpu", "eval_fraction": 0.0},
        agent_config=AgentConfig(max_rounds=1, max_new_tokens=4), progress=False,
        log=lambda line: None,
    )
    try:
        report = reproduce_offline(out, **settings)
        for agent, roles in (("lumos-i", ("planner", "grounder")), ("cot", ("policy",))):
            for role in roles:
                folder = out / "models" / agent / role
                run = json.loads((folder / "lumos_training.json").read_text())
                assert run["steps"] == 2 and run["train_examples"] == 4  # same records and steps
                assert [x["to_step"] for x in run["sessions"]] == [2]
        mixture = json.loads((out / "mixture" / "mixture.json").read_text())
        assert mixture["seed"] == 0 and mixture["mix"] == {"maths": 4}
        assert set(report["scores"]) == {BASE_NAME, "lumos-i", "cot"}
        assert report["scores"]["lumos-i"]["MathWord-v0"]["episodes"] == 2
        assert "MathWord-v0 / level 2" in report["scores"]["cot"]
        assert (out / "report.md").read_text().startswith(f"| split | episodes | {BASE_NAME}")
        # the leakage check ran on the data build and the test tasks, and every row records it
        leakage = json.loads((out / "leakage.json").read_text())
        assert report["leakage"] == leakage and leakage["clean"] is True
        assert leakage["envs"]["lumos/MathWord-v0"]["test_tasks"] == 2
        assert "## Leakage check" in (out / "report.md").read_text()
        run = json.loads((out / "results" / "cot" / "MathWord-v0" / "run.json").read_text())
        assert run["leakage"] == leakage
        trained = (out / "models" / "cot" / "policy" / "adapter_model.safetensors").stat()
        again = reproduce_offline(out, **settings)  # finished steps are skipped
        assert again["scores"] == report["scores"]
        assert (out / "models" / "cot" / "policy" / "adapter_model.safetensors").stat() == trained
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setattr(reference, "REFERENCE_ROOT", tmp_path / "package")
    with pytest.raises(TrainingError, match="adapt 'smollm2-135m'"):
        ship_reference(out)  # only adapters of the reference base ship
    ref = reference.REFERENCE_AGENTS["lumos-i"]
    monkeypatch.setitem(reference.REFERENCE_AGENTS, "lumos-i",
                        reference.ReferenceAgent("lumos-i", tiny, ref.folder, ref.roles))
    shipped = ship_reference(out)
    card = (shipped / "CARD.md").read_text()
    assert "lumos-gym reproduce offline" in card and "| level 1 |" not in card
    assert "&nbsp;&nbsp;level 1" in card
    assert reference.reference_models("lumos-i")["planner"] == str(shipped / "planner")
    shipped_report = json.loads((shipped / "planner" / "lumos_training.json").read_text())
    shipped_report["config"].pop("base_model")
    assert str(tmp_path) not in json.dumps(shipped_report)


@pytest.mark.full
def test_gpu_budget_trains_every_record_same_steps_in_parallel_and_stops(tmp_path):
    """--budget gpu --until train --parallel 2: all records, one step count, no evaluation."""
    from conftest import save_tiny_model

    from lumos_gym.workflows.reproduce import budget_steps, reproduce_offline

    tiny = str(save_tiny_model(tmp_path / "tiny", max_positions=4096))
    out = _prepared_run(tmp_path, 5, ("plan-iterative", "ground-iterative"))
    train = out / "data" / "train"
    records = sum(1 for _ in open(train / "plan-iterative.jsonl"))
    staged = reproduce_offline(out, agents=["lumos-i"], base_model=tiny, budget="gpu",
                               until="data", log=lambda line: None)
    assert staged["data"] == str(out / "data") and not (out / "models").exists()
    report = reproduce_offline(
        out, agents=["lumos-i"], base_model=tiny, budget="gpu", until="train", parallel=2,
        training={"report_to": "none", "device": "cpu", "eval_fraction": 0.0, "batch_size": 2},
        threads=1, progress=False, log=lambda line: None,
    )
    steps = budget_steps(records, epochs=3.0, batch_size=2)
    assert report["training"]["max_steps"] == steps == 8 and report["scores"] == {}
    for role in ("planner", "grounder"):
        run = json.loads((out / "models" / "lumos-i" / role / "lumos_training.json").read_text())
        assert run["steps"] == steps and run["train_examples"] == records
        assert run["config"]["recipe"] == "gpu-small" and run["config"]["batch_size"] == 2
        assert run["config"]["pack"] is False  # the recipe's, not the cpu budget's
    assert not (out / "mixture").exists() and not (out / "results").exists()
    with pytest.raises(TrainingError, match="unknown budget"):
        reproduce_offline(out, agents=["lumos-i"], budget="tpu")
