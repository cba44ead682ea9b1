"""``lumos-gym reproduce paper``: the paper's 7B run, resolved and checked without GPUs.

The dry run builds the model on the meta device (no weights, no download): the built-in
LLaMA-2 7B config, and a tiny LLaMA config written here. Its parameter count, memory rows and
steps are checked against values worked out by hand from the shapes; its settings against the
``lumos-paper`` recipe's; the run without ``--dry-run`` must refuse, in one line, on a machine
with fewer GPUs than asked, and otherwise run its commands in order, skipping finished ones.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import save_tiny_model  # noqa: E402

from lumos_gym.cli import main  # noqa: E402
from lumos_gym.errors import LumosGymError  # noqa: E402
from lumos_gym.training import config_from_recipe  # noqa: E402
from lumos_gym.training import paper as sizing  # noqa: E402
from lumos_gym.training.data import encode_records, read_records, split_records  # noqa: E402
from lumos_gym.training.trainer import REPORT_FILE  # noqa: E402
from lumos_gym.workflows import paper  # noqa: E402

LLAMA2_7B_PARAMS = 6_738_415_616  # the figure transformers and the hub's model card report


@pytest.fixture(scope="module")
def llama7b():
    """The paper's base, from the built-in config (or this machine's cached copy)."""
    return sizing.load_base_model(sizing.LLAMA2_7B)


@pytest.fixture(scope="module")
def default_plan(llama7b, tmp_path_factory):
    return paper.plan_paper(tmp_path_factory.mktemp("paper"), model=llama7b)


def write_records(path: Path, n: int) -> Path:
    lines = [json.dumps({"dataset": "maths", "id": f"m{i}", "messages": [
        {"role": "user", "content": f"Task: add {i} and 2"},
        {"role": "assistant", "content": f"Subgoal 1: Calculate {i} + 2."}]}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_config_folder(folder: Path) -> Path:
    """A LLaMA config with grouped-query attention, saved without weights or tokenizer."""
    from transformers import LlamaConfig

    LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                max_position_embeddings=2048, tie_word_embeddings=False).save_pretrained(folder)
    return folder


# -- LLaMA-2 7B --------------------------------------------------------------------------------
def test_the_7b_architecture_and_parameter_count(llama7b):
    arch = llama7b.arch
    assert (arch.hidden, arch.intermediate, arch.layers, arch.heads, arch.kv_heads,
            arch.vocab, arch.positions) == (4096, 11008, 32, 32, 32, 32000, 4096)
    assert llama7b.params == LLAMA2_7B_PARAMS
    # embedding + 32 x (4 attention + 3 MLP matrices + 2 norms) + final norm + output head
    layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert llama7b.layer_params == layer == 202_383_360
    assert 32000 * 4096 + 32 * layer + 4096 + 32000 * 4096 == LLAMA2_7B_PARAMS


def test_the_7b_memory_rows_match_the_hand_computed_values(default_plan):
    p = LLAMA2_7B_PARAMS
    tokens = 2 * 1024  # the recipe's micro-batch of 2 rows at 1024 tokens
    per_layer = 12 * 4096 + 4 * 4096 + 4 * 4096 + 8 * 11008 + 4 * 32
    assert per_layer == 170_112
    final_norm = 6 * 4096 * tokens
    expected = {
        "parameters": 2 * p // 2,
        "gradients": 2 * p // 2,
        "optimizer states": 12 * p // 2,
        "one gathered layer": 4 * 202_383_360,
        "activations, no checkpointing": 32 * per_layer * tokens + final_norm,
        "activations, checkpointing": 32 * 2 * 4096 * tokens + per_layer * tokens + final_norm,
        "logits and loss": 10 * 32000 * tokens,
    }
    assert {r.name: r.bytes for r in default_plan.memory} == expected
    assert expected["activations, no checkpointing"] == 11_198_791_680
    plain, checkpointed = sizing.memory_totals(default_plan.memory)
    assert plain == 66_571_010_048  # 62.00 GiB: fits an 80 GiB card
    assert checkpointed == plain - 11_198_791_680 + 935_591_936 == 56_307_810_304


def test_the_7b_steps_tokens_and_flops_from_the_papers_counts(default_plan):
    assert [r.module for r in default_plan.runs] == list(sizing.MODULES)
    for run in default_plan.runs:
        assert run.from_paper and not run.counted
        assert (run.records, run.held_records, run.train_records) == (19_778, 989, 18_789)
        assert run.steps == 2 * 147  # ceil(18,789 / 128) a pass, 2 passes
        assert run.tokens == 2 * 18_789 * 1024  # the upper bound
        assert run.evaluations == 6  # steps 50 ... 250, and one at the end
        attention = 12 * 32 * 32 * 128 * 2 * 18_789 * 1024**2
        assert run.train_flops(default_plan.model) == 6 * LLAMA2_7B_PARAMS * run.tokens + attention


def test_the_settings_are_the_recipes(default_plan):
    config = default_plan.config
    assert config == config_from_recipe("lumos-paper", data=config.data,
                                        base_model=sizing.LLAMA2_7B, out=config.out)
    assert (config.lora_r, config.lr, config.schedule, config.warmup_ratio, config.epochs,
            config.max_length, config.batch_size, config.total_batch, config.weight_decay) == (
        None, 2e-5, "linear", 0.03, 2.0, 1024, 2, 128, 0.0)
    shown = dict(paper.settings_rows(default_plan))
    assert shown["batch"].startswith("2 per GPU x 2 GPUs x 32 accumulation = 128 records")
    assert shown["learning rate"].startswith("2e-05, linear")


def test_the_default_dry_run_prints_every_part(capsys):
    assert main(["reproduce", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for text in ("6,738,415,616", "full fine-tuning", "DeepSpeed ZeRO-3", "total, no checkpointing",
                 "62.00", "1,176", "--num_processes 2", "--backend vllm", "989 TFLOPS",
                 "0.4 model FLOPs utilisation"):
        assert text in out, text


def test_eight_gpus_take_8_accumulation_steps(llama7b, tmp_path):
    plan = paper.plan_paper(tmp_path, model=llama7b, gpus=8)
    assert dict(paper.settings_rows(plan))["batch"].startswith("2 per GPU x 8 GPUs x 8 ")
    assert plan.memory[0].bytes == 2 * LLAMA2_7B_PARAMS // 8
    assert all("--num_processes 8" in shlex.join(s.argv) for s in plan.steps[:4])


# -- a tiny config of the same family ----------------------------------------------------------
def test_a_tiny_llama_config_from_a_folder(tmp_path):
    folder = tiny_config_folder(tmp_path / "tiny")
    data = write_records(tmp_path / "plan-iterative.jsonl", 300)
    plan = paper.plan_paper(tmp_path / "run", base_model=str(folder), gpus=8,
                            modules=["plan-iterative"], data=[str(data)])
    model = plan.model
    layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 176 + 2 * 64  # q, k, v (2 kv heads), o
    assert model.layer_params == layer == 46_208
    assert model.params == 1000 * 64 + 2 * layer + 64 + 1000 * 64 == 220_480
    assert model.tokenizer is None
    tokens = 2 * 1024
    per_layer = 12 * 64 + 4 * 64 + 4 * 32 + 8 * 176 + 4 * 4
    assert model.arch.layer_activation_bytes() == per_layer == 2_576
    assert {r.name: r.bytes for r in plan.memory} == {
        "parameters": 2 * 220_480 // 8,
        "gradients": 2 * 220_480 // 8,
        "optimizer states": 12 * 220_480 // 8,
        "one gathered layer": 4 * 46_208,
        "activations, no checkpointing": 2 * per_layer * tokens + 6 * 64 * tokens,
        "activations, checkpointing": 2 * 2 * 64 * tokens + per_layer * tokens + 6 * 64 * tokens,
        "logits and loss": 10 * 1000 * tokens,
    }
    (run,) = plan.runs
    assert (run.records, run.held_records, run.train_records) == (300, 15, 285)
    assert run.steps == 2 * 3  # ceil(285 / 128) a pass
    assert run.tokens == 2 * 285 * 1024 and not run.counted and not run.from_paper
    assert [s.what for s in plan.steps] == ["train plan-iterative"]
    assert "lumos-i is not evaluated" in plan.notes[0]


def test_tokens_are_counted_with_a_local_tokenizer(tmp_path):
    folder = save_tiny_model(tmp_path / "tiny", max_positions=2048)
    data = write_records(tmp_path / "lumos_maths_ground_onetime.jsonl", 40)
    plan = paper.plan_paper(tmp_path / "run", base_model=str(folder),
                            modules=["ground-onetime"], data=[str(data)])
    (run,) = plan.runs
    config = plan.config
    train, held = split_records(read_records([data]), eval_fraction=0.05, seed=0)
    examples, _ = encode_records(train, plan.model.tokenizer, max_length=1024,
                                 eos=plan.model.tokenizer.eos_token)
    assert run.counted and run.train_records == len(examples) == 38
    assert run.tokens == 2 * sum(len(e.input_ids) for e in examples) < 2 * 38 * 1024
    assert run.steps == 2 and config.lr == 2e-5
    assert "tokens: counted with the base model's tokenizer" in paper.render_dry_run(plan)


def test_data_files_are_told_apart_by_module(tmp_path):
    given = ["a/plan-iterative.jsonl", "b/lumos_maths_plan_iterative.jsonl",
             "ground-iterative=x.jsonl"]
    files = sizing.data_by_module(given, ["plan-iterative", "ground-iterative"])
    assert files == {"plan-iterative": ["a/plan-iterative.jsonl",
                                        "b/lumos_maths_plan_iterative.jsonl"],
                     "ground-iterative": ["x.jsonl"]}
    with pytest.raises(LumosGymError, match="name its module"):
        sizing.data_by_module(["records.jsonl"], ["plan-iterative"])
    with pytest.raises(LumosGymError, match="no file for ground-iterative"):
        sizing.data_by_module(["plan-iterative.jsonl"], ["plan-iterative", "ground-iterative"])


# -- the command line --------------------------------------------------------------------------
def fails(capsys, args: list[str], needle: str) -> tuple[str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("lumos-gym reproduce: error: ") and needle in err, err
    return out, err


def test_without_the_gpus_the_run_prints_its_commands_and_refuses(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(paper, "visible_gpus", lambda: 1)
    out, _ = fails(capsys, ["reproduce", "paper", "--out", str(tmp_path / "run")],
                   "needs 2 CUDA GPUs and 1 is visible")
    lines = out.splitlines()
    assert len(lines) == 9 and lines[0].startswith("accelerate launch --config_file ")
    assert "deepspeed_zero3.yaml --num_processes 2 -m lumos_gym.cli train --recipe lumos-paper" \
        in lines[0]
    assert lines[7].startswith("lumos-gym evaluate --agent lumos-o") and "--backend vllm" in out
    assert lines[8].startswith("# data/lumos/lumos_maths_plan_iterative.jsonl, ")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--gpus", "3", "--dry-run"], "--gpus 3: 128 records a step do not split"),
    (["--gpus", "0", "--dry-run"], "--gpus: must be 1 to 64, got 0"),
    (["--mfu", "1.5", "--dry-run"], "--mfu: must be 0.01 to 1, got 1.5"),
    (["--agents", "lumos-o", "--dry-run"], "--agents is not a flag of `reproduce paper`"),
    (["--modules", "plan-iterativ", "--dry-run"], "did you mean plan-iterative?"),
    (["--domain", "web_agent", "--modules", "plan-onetime", "--dry-run"],
     "the paper has no web_agent data for plan-onetime"),
    (["--base-model", "no-such/model-here", "--dry-run"], "the dry run downloads nothing"),
])
def test_bad_paper_flags_are_one_line(capsys, args, needle):
    try:
        fails(capsys, ["reproduce", "paper", *args], needle)
    except SystemExit as e:  # argparse refuses an out-of-range number itself
        assert e.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_paper_flags_are_refused_by_offline(capsys):
    fails(capsys, ["reproduce", "offline", "--dry-run"], "--dry-run is not a flag")


def test_with_the_gpus_the_steps_run_in_order_and_finished_ones_are_skipped(
        monkeypatch, tmp_path):
    monkeypatch.setattr(paper, "visible_gpus", lambda: 2)
    monkeypatch.setattr(paper, "missing_packages", lambda steps: [])
    folder = tiny_config_folder(tmp_path / "tiny")
    data = [str(write_records(tmp_path / f"{m}.jsonl", 20)) for m in paper.AGENTS["lumos-i"]]
    plan = paper.plan_paper(tmp_path / "run", base_model=str(folder), data=data,
                            modules=list(paper.AGENTS["lumos-i"]), domain="web_agent")
    finished = tmp_path / "run" / "models" / "plan-iterative"
    finished.mkdir(parents=True)
    (finished / REPORT_FILE).write_text("{}")
    ran, said = [], []
    assert paper.run_paper(plan, log=said.append, run=lambda argv: ran.append(argv) or 0) == 0
    assert [argv[:2] for argv in ran] == [["accelerate", "launch"], ["lumos-gym", "evaluate"]]
    assert "--out" in ran[0] and ran[0][ran[0].index("--out") + 1].endswith("ground-iterative")
    assert ran[1][ran[1].index("--env") + 1] == "Mind2Web-v0"
    assert any(line.startswith("skip (") and "train plan-iterative" in line for line in said)
    with pytest.raises(LumosGymError, match="exited with status 1"):  # a failed step stops
        paper.run_paper(plan, log=said.append, run=lambda argv: 1)
