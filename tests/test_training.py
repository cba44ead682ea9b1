"""``lumos_gym.training``: encoding, data and config checks, packing, and short real runs.

Every run trains the tiny random Llama of conftest.py (2 layers of width 32) on generated Tulu
records, on the CPU with one thread. The runs that several tests read (a packed LoRA run, a
padded run with a merged copy) are trained once per module.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from conftest import build_model, build_tokenizer, save_tiny_model  # noqa: E402

from lumos_gym import prompts  # noqa: E402
from lumos_gym.cli import main  # noqa: E402
from lumos_gym.training import (  # noqa: E402
    RECIPES,
    TrainConfig,
    TrainingError,
    config_from_recipe,
    train,
)
from lumos_gym.training import trainer as trainer_module  # noqa: E402
from lumos_gym.training.collate import PackedCollator, pack_examples  # noqa: E402
from lumos_gym.training.data import (  # noqa: E402
    IGNORE_INDEX,
    Example,
    Record,
    check_record,
    encode_record,
    encode_records,
    read_records,
)

MAX_LENGTH = 128  # the tiny model's positions (conftest.MAX_POSITIONS)


# ---------------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model only pays for thread hand-offs
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny"))


def _record(i: int, rng: random.Random) -> dict:
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return {
        "dataset": "maths",
        "id": f"maths_{i}",
        "messages": [
            {"role": "user", "content": f"Task: add {a} and {b}"},
            {"role": "assistant", "content": f"Subgoal 1: Calculate {a} + {b}"},
        ],
    }


def _write_jsonl(path: Path, rows: list) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(row if isinstance(row, str) else json.dumps(row))
            f.write("\n")
    return path


@pytest.fixture(scope="module")
def records_file(tmp_path_factory):
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("data")
    return _write_jsonl(folder / "train.jsonl", [_record(i, rng) for i in range(40)])


def _config(data, base, out, **overrides) -> TrainConfig:
    settings = dict(
        max_steps=12, lr=1e-2, eval_fraction=0.1, eval_steps=6, logging_steps=1, save_steps=100,
        batch_size=4, max_length=MAX_LENGTH, report_to="none", device="cpu", threads=1,
    )
    settings.update(overrides)
    return TrainConfig(data=[str(data)], base_model=str(base), out=str(out), **settings)


def _segments(position_ids) -> list[tuple[int, int]]:
    """The (start, end) of each packed example: positions restart at 0."""
    starts = [i for i, p in enumerate(position_ids) if p == 0]
    return list(zip(starts, [*starts[1:], len(position_ids)], strict=True))


# ----------------------------------------------------------------------------------- encoding
CONVERSATION = [
    {"role": "system", "content": "You are a planner."},
    {"role": "user", "content": "Task: add 3 and 4"},
    {"role": "assistant", "content": "  Subgoal 1: Calculate 3 + 4\n"},
    {"role": "user", "content": "Observation: 7"},
    {"role": "assistant", "content": "Subgoal 2: Answer 7"},
]


def test_labels_cover_exactly_the_assistant_text(tokenizer):
    eos = tokenizer.eos_token
    pieces = prompts.training_segments(CONVERSATION, eos)
    text = prompts.render_training(CONVERSATION, eos)
    assert "".join(p for p, _ in pieces) == text
    assert text.startswith("<|system|>\nYou are a planner.\n<|user|>\n")
    example, full_length = encode_record(CONVERSATION, tokenizer, max_length=1000, eos=eos)
    assert not example.truncated and full_length == len(example.input_ids)
    assert tokenizer.decode(example.input_ids) == text
    pairs = list(zip(example.input_ids, example.labels, strict=True))
    assert all(label in (IGNORE_INDEX, token) for token, label in pairs)
    trained = [token for token, label in pairs if label != IGNORE_INDEX]
    masked = [token for token, label in pairs if label == IGNORE_INDEX]
    # the assistant contents (stripped), each with eos and "\n"; the last turn loses its "\n"
    assert tokenizer.decode(trained) == f"Subgoal 1: Calculate 3 + 4{eos}\nSubgoal 2: Answer 7{eos}"
    assert tokenizer.decode(masked) == "".join(p for p, t in pieces if not t)
    assert tokenizer.decode(masked).endswith("<|assistant|>\n")  # the header carries no loss
    assert example.trained_tokens == len(trained)


def test_records_are_checked_turn_by_turn():
    def row(*roles):
        return {"messages": [{"role": r, "content": "x"} for r in roles]}

    assert check_record(row("system", "user", "assistant")) is None
    assert check_record(row("user", "assistant", "user", "assistant")) is None
    assert "alternate" in check_record(row("user", "system", "assistant"))
    assert "alternate" in check_record(row("assistant", "user"))
    assert "no assistant" in check_record(row("system", "user"))
    assert "role 'bot'" in check_record(row("user", "bot"))
    assert "no text content" in check_record({"messages": [{"role": "user", "content": 3}]})
    assert "evaluation result" in check_record({"task_id": "t", "metrics": {}})


def test_truncation_keeps_a_prefix_and_drops_records_with_nothing_to_learn(tokenizer):
    eos = tokenizer.eos_token
    long_answer = Record("cut", (
        {"role": "user", "content": "Task: add"},
        {"role": "assistant", "content": " ".join(["Subgoal 1: Calculate 3 + 4"] * 12)},
    ), "f:1")
    long_question = Record("lost", (
        {"role": "user", "content": " ".join(["the planner writes subgoals"] * 20)},
        {"role": "assistant", "content": "Subgoal 1: Answer 7"},
    ), "f:2")
    short = Record("short", tuple(CONVERSATION[1:3]), "f:3")
    full, length = encode_record(long_answer.messages, tokenizer, max_length=10_000, eos=eos)
    cut, _ = encode_record(long_answer.messages, tokenizer, max_length=40, eos=eos)
    assert length > 40 and cut.truncated and not full.truncated
    assert cut.input_ids == full.input_ids[:40] and cut.labels == full.labels[:40]
    examples, stats = encode_records([long_answer, long_question, short], tokenizer,
                                     max_length=40, eos=eos)
    assert len(examples) == 2 and all(len(e.input_ids) <= 40 for e in examples)
    assert (stats.records, stats.kept, stats.truncated, stats.dropped_no_target) == (3, 2, 1, 1)
    assert stats.dropped_ids == ["lost"] and stats.longest > 40
    assert stats.trained_tokens == sum(e.trained_tokens for e in examples)
    assert stats.tokens == sum(len(e.input_ids) for e in examples)


class SlowTokenizer:
    """A tokenizer without offsets (``is_fast`` False): only ``encode``."""

    is_fast = False

    def __init__(self, fast):
        self.fast = fast
        self.calls = 0

    def encode(self, text, add_special_tokens=True):
        self.calls += 1
        return self.fast.encode(text, add_special_tokens=add_special_tokens)


def test_the_slow_tokenizer_path_gives_the_fast_labels(tokenizer):
    eos = tokenizer.eos_token
    slow = SlowTokenizer(tokenizer)
    fast_example, fast_length = encode_record(CONVERSATION, tokenizer, max_length=1000, eos=eos)
    slow_example, slow_length = encode_record(CONVERSATION, slow, max_length=1000, eos=eos)
    assert slow.calls == len(prompts.training_segments(CONVERSATION, eos))
    assert slow_example == fast_example and slow_length == fast_length
    cut, _ = encode_record(CONVERSATION, slow, max_length=30, eos=eos)
    assert cut.truncated and cut.labels == fast_example.labels[:30]


# ------------------------------------------------------------------------------- bad data
BAD_FILES = {
    "not-json": (['{"messages": [{"role": "user", "content": "a"}, '
                  '{"role": "assistant", "content": "b"}]}', "{not json"], 2, "not JSON"),
    "annotation": ([{"task": "add 3 and 4", "subgoals": ["Calculate"], "actions": []}], 1,
                   "this is a unified annotation, not a training record; export it first"),
    "converted": ([{"id": "g/0", "task": "add 3 and 4", "task_type": "math", "answer": "7",
                    "subgoal_plan": "Subgoal 1: ...", "dataset": "gsm8k", "meta": {}}], 1,
                  "this is a unified annotation, not a training record; export it first"),
    "role-order": ([{"messages": [{"role": "assistant", "content": "a"},
                                  {"role": "user", "content": "b"}]}], 1, "turns must alternate"),
    "no-assistant": ([{"messages": [{"role": "system", "content": "a"},
                                    {"role": "user", "content": "b"}]}], 1, "no assistant message"),
}


@pytest.fixture
def no_model_loads(monkeypatch):
    def refuse(name):
        raise AssertionError(f"a model was loaded ({name}) before the data was checked")

    monkeypatch.setattr(trainer_module, "load_base", refuse)


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_lines_are_named_before_any_model_loads(tmp_path, capsys, no_model_loads, case):
    lines, number, what = BAD_FILES[case]
    path = _write_jsonl(tmp_path / "bad.jsonl", lines)
    where = f"{path}:{number}: "
    with pytest.raises(TrainingError) as caught:
        read_records([path])
    assert where + what in str(caught.value)
    out = tmp_path / "out"
    with pytest.raises(TrainingError, match="not training records"):
        train(_config(path, tmp_path / "no-such-model", out))
    code = main(["train", "--data", str(path), "--base-model", str(tmp_path / "no-such-model"),
                 "--out", str(out), "--report-to", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("lumos-gym train: error: ") and where + what in err
    assert "no-such-model" not in err and not out.exists()


def test_a_missing_file_and_many_bad_lines(tmp_path, capsys, no_model_loads):
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(TrainingError, match=r"missing\.jsonl' does not exist"):
        read_records([missing])
    assert main(["train", "--data", str(missing), "--out", str(tmp_path / "out")]) == 2
    assert "missing.jsonl' does not exist" in capsys.readouterr().err
    many = _write_jsonl(tmp_path / "many.jsonl", ["[]"] * 7 + [_record(0, random.Random(0))])
    with pytest.raises(TrainingError) as caught:
        read_records([many])
    message = str(caught.value)
    assert "7 line(s)" in message and "the first 5 of them" in message
    assert f"{many}:5: a line must be a JSON object" in message and f"{many}:6" not in message
    empty = _write_jsonl(tmp_path / "empty.jsonl", [""])
    with pytest.raises(TrainingError, match="holds no record"):
        read_records([empty])


def test_records_keep_their_ids_and_sources(tmp_path):
    rows = [_record(0, random.Random(0)), {"messages": _record(1, random.Random(1))["messages"]}]
    path = _write_jsonl(tmp_path / "r.jsonl", ["", *rows])
    records = read_records([path])
    assert [r.id for r in records] == ["maths_0", f"{path}:3"]
    assert [r.source for r in records] == [f"{path}:2", f"{path}:3"]


# ---------------------------------------------------------------------- bad model and config
def test_a_missing_base_model_is_a_clear_error(tmp_path, records_file):
    with pytest.raises(TrainingError, match="cannot load the base model .*does not exist"):
        train(_config(records_file, tmp_path / "no-such-model", tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_max_length_beyond_the_models_positions_fails_before_training(tmp_path, tiny, records_file):
    out = tmp_path / "out"
    with pytest.raises(TrainingError, match=r"max_length 256 .*\(128 positions\)"):
        train(_config(records_file, tiny, out, max_length=256))
    assert not out.exists()


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"lora_r": 0}, "lora_r must be at least 1"),
        ({"lr": 0}, "lr must be positive"),
        ({"max_length": 8}, "max_length must be at least 16"),
        ({"eval_fraction": 0.5}, "eval_fraction must be in"),
        ({"precision": "fp8"}, "precision must be"),
        ({"adapter_dtype": "int8"}, "adapter_dtype must be"),
        ({"lora_r": None, "merge": True}, "merge needs a LoRA run"),
        ({"batch_size": 0, "save_steps": 0}, "batch_size must be at least 1, got 0; save_steps"),
        ({"max_steps": 0}, "max_steps must be at least 1"),
        ({"data": []}, "no training file"),
    ],
)
def test_bad_config_values_raise(overrides, fragment):
    settings = {"data": ["train.jsonl"], **overrides}
    with pytest.raises(TrainingError, match=re.escape(fragment)):
        TrainConfig(**settings)


def test_recipes_and_overrides(tmp_path):
    with pytest.raises(TrainingError, match="did you mean 'cpu-small'"):
        config_from_recipe("cpu-smal", data=["x.jsonl"])
    small = config_from_recipe("cpu-small", data=["x.jsonl"], lr=None, max_length=256)
    assert small.lora_r == 8 and small.max_steps == 300 and small.max_length == 256
    assert small.lr == RECIPES["cpu-small"].settings["lr"]  # a None override is ignored
    assert config_from_recipe("cpu-small", data=["x"], epochs=1.0).max_steps is None
    assert config_from_recipe("cpu-small", data=["x"], max_steps=0).max_steps is None
    assert config_from_recipe("cpu-small", data=["x"], full=True).lora_r is None
    paper = config_from_recipe("lumos-paper", data=["x"])
    assert paper.lora_r is None and paper.total_batch == 128 and paper.lr == 2e-5
    from lumos_gym.training.trainer import grad_accum_for

    # the paper's 128 rows a step on 1, 2 or 8 processes; an explicit accumulation wins
    assert [grad_accum_for(paper, n) for n in (1, 2, 8)] == [64, 32, 8]
    assert config_from_recipe("lumos-paper", data=["x"], grad_accum=4).total_batch is None
    with pytest.raises(TrainingError, match="not a multiple"):
        grad_accum_for(config_from_recipe("lumos-paper", data=["x"], batch_size=3), 1)
    paper.save(tmp_path)
    assert TrainConfig.load(tmp_path) == paper
    with pytest.raises(TrainingError, match="cannot read the training config"):
        TrainConfig.load(tmp_path / "nowhere")


def test_cli_refuses_lora_and_full_together(tmp_path, capsys):
    code = main(["train", "--data", "x.jsonl", "--out", str(tmp_path), "--lora", "4", "--full"])
    assert code == 2 and "--lora R or --full, not both" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ packing
def _random_examples(count: int, longest: int, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        n = rng.randint(1, longest)
        ids = [rng.randrange(4, 200) for _ in range(n)]
        examples.append(Example(ids, [t if rng.random() < 0.5 else IGNORE_INDEX for t in ids]))
    return examples


def test_packing_fits_keeps_every_example_once_and_restarts_positions():
    examples = _random_examples(60, 64) + [Example([5] * 64, [5] * 64)]
    rows = pack_examples(examples, 64)
    assert all(len(r.input_ids) <= 64 for r in rows)
    fewest = math.ceil(sum(len(e.input_ids) for e in examples) / 64)
    assert len(rows) <= fewest * 11 / 9 + 1  # first fit decreasing's bound
    seen = Counter()
    for row in rows:
        assert len(row.input_ids) == len(row.labels) == len(row.position_ids)
        spans = _segments(row.position_ids)
        assert len(spans) == row.examples
        for a, b in spans:
            assert row.position_ids[a:b] == list(range(b - a))
            labels = row.labels[a:b]
            assert labels[0] == IGNORE_INDEX  # never learn the next record's first token
            seen[(tuple(row.input_ids[a:b]), tuple(labels[1:]))] += 1
    assert seen == Counter((tuple(e.input_ids), tuple(e.labels[1:])) for e in examples)
    assert pack_examples(examples, 64) == rows  # deterministic
    assert pack_examples([], 64) == []


def _packable(tokenizer) -> list[Example]:
    eos = tokenizer.eos_token
    rng = random.Random(3)
    conversations = [_record(i, rng)["messages"] for i in range(3)]
    conversations[1] = CONVERSATION
    return [encode_record(m, tokenizer, max_length=MAX_LENGTH, eos=eos)[0] for m in conversations]


def test_a_packed_row_computes_what_each_record_computes_alone(tokenizer):
    model = build_model(tokenizer).eval()
    model.config.use_cache = False  # as transformers' Trainer sets it (TrainingArguments.use_cache)
    examples = _packable(tokenizer)
    (row,) = pack_examples(examples, 4 * MAX_LENGTH)
    assert row.examples == 3
    ids = torch.tensor([row.input_ids])
    with torch.no_grad():
        packed = model(ids, position_ids=torch.tensor([row.position_ids]),
                       labels=torch.tensor([row.labels]))
        unpacked = model(ids).logits[0]  # the same row without the position restarts
        total, leaks = 0.0, []
        for a, b in _segments(row.position_ids):
            labels = [IGNORE_INDEX, *row.labels[a + 1 : b]]
            alone = model(ids[:, a:b], labels=torch.tensor([labels]))
            torch.testing.assert_close(packed.logits[0, a:b], alone.logits[0], atol=1e-4,
                                       rtol=1e-5)
            total += alone.loss.item() * sum(label != IGNORE_INDEX for label in labels[1:])
            leaks.append((unpacked[a:b] - alone.logits[0]).abs().max().item())
    counted = sum(label != IGNORE_INDEX for label in row.labels[1:])
    assert packed.loss.item() * counted == pytest.approx(total, rel=1e-5)
    # negative control: without the restarts the later records see the earlier ones
    assert leaks[0] < 1e-4 and min(leaks[1:]) > 1e-2


def test_the_trainers_packed_batches_never_attend_across_records(tmp_path, tiny, records_file):
    config = _config(records_file, tiny, tmp_path / "out", batch_size=2, max_length=64,
                     eval_fraction=0)
    prepared = trainer_module.prepare(config)
    trainer = trainer_module.build_trainer(prepared)
    assert trainer.model.config.use_cache is False  # else transformers skips packed masking
    batch = next(iter(trainer.get_train_dataloader()))
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 2
    model = trainer.model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
        for r in range(2):
            positions = batch["position_ids"][r].tolist()
            assert len(_segments(positions)) >= 2
            for a, b in _segments(positions):
                alone = model(input_ids=batch["input_ids"][r : r + 1, a:b]).logits[0]
                torch.testing.assert_close(logits[r, a:b], alone, atol=1e-4, rtol=1e-5)


def test_packed_collator_pads_with_a_block_of_its_own():
    rows = [{"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "position_ids": [0, 1, 2]},
            {"input_ids": [8], "labels": [-100], "position_ids": [0]}]
    batch = PackedCollator(pad_id=0)(rows)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 6, 7], [-100, -100, -100]]
    assert batch["position_ids"].tolist() == [[0, 1, 2], [0, 0, 1]]


# ----------------------------------------------------------------------------------- training
@pytest.fixture(scope="module")
def packed_run(tmp_path_factory, tiny, records_file):
    out = tmp_path_factory.mktemp("runs") / "packed"
    # the name as given (here with a trailing slash) is what the adapter records as its base
    return train(_config(records_file, f"{tiny}{os.sep}", out))


@pytest.fixture(scope="module")
def padded_run(tmp_path_factory, tiny, records_file):
    out = tmp_path_factory.mktemp("runs") / "padded"
    return train(_config(records_file, tiny, out, pack=False, merge=True, adapter_dtype="fp32"))


@pytest.mark.parametrize("run", ["packed_run", "padded_run"])
@pytest.mark.full
def test_a_lora_run_learns(request, tiny, run):
    result = request.getfixturevalue(run)
    report = json.loads((result.out / "lumos_training.json").read_text())
    assert report == json.loads(json.dumps(result.report))
    assert report["steps"] == 12 and report["config"]["pack"] == (run == "packed_run")
    assert report["final_loss"] < report["first_loss"] - 1.0
    steps = [step for step, _ in report["eval_losses"]]
    assert steps[-1] == 12 and len(set(steps)) == len(steps) >= 2  # the final eval, once
    evals = [loss for _, loss in report["eval_losses"]]
    assert evals[-1] < evals[0]
    assert (report["train_examples"], report["eval_examples"]) == (36, 4)
    assert report["encode"]["kept"] == 36 and report["encode"]["dropped_no_target"] == 0
    assert report["encode"]["datasets"] == {"maths": 36}  # the card says what families it saw
    assert report["tokens_per_second"] > 0 and report["eos"] == "<|endoftext|>"
    assert report["device"] == "cpu"
    assert list(report["data_sha256"].values())[0] and report["resumed_from"] is None
    # the card's origin: the code, no recorded data build (a file of the test's own), one session
    assert report["git"] is None or len(report["git"]["commit"]) == 40
    assert report["data_build"] is None
    assert [(x["from_step"], x["to_step"], x["finished"]) for x in report["sessions"]] == [
        (0, 12, True)]
    adapter = json.loads((result.out / "adapter_config.json").read_text())
    given = f"{tiny}{os.sep}" if run == "packed_run" else str(tiny)
    assert adapter["base_model_name_or_path"] == given == report["config"]["base_model"]
    assert TrainConfig.load(result.out).pack == (run == "packed_run")


def test_the_adapter_is_saved_in_bf16_and_has_learnt(packed_run):
    from safetensors import safe_open

    out = packed_run.out
    assert not (out / "config.json").exists() and (out / "tokenizer.json").is_file()
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert tensors and {t.dtype for t in tensors.values()} == {torch.bfloat16}
    assert any("lora_B" in k and t.abs().max() > 0 for k, t in tensors.items())
    assert any("mlp.down_proj" in k for k in tensors)  # all-linear reaches the MLP


def test_the_adapter_generates_through_the_hf_backend(packed_run, tiny):
    from lumos_gym.models.base import GenerationRequest
    from lumos_gym.models.hf import HFBackend

    request = GenerationRequest(prompt="<|user|>\nTask: add 3 and 4\n<|assistant|>\n",
                                max_new_tokens=5)
    with HFBackend(str(tiny), adapter=packed_run.out, device="cpu") as backend:
        (completion,) = backend.generate([request])
        assert backend.info().details.get("adapter")
    assert completion.stop_reason != "error" and completion.output_tokens > 0


def test_tensorboard_logs_go_under_runs(tmp_path, tiny, records_file):
    pytest.importorskip("tensorboard")
    out = tmp_path / "tb"
    train(_config(records_file, tiny, out, max_steps=2, eval_fraction=0,
                  report_to="tensorboard"))
    assert list((out / "runs").rglob("events.out.tfevents.*"))


def test_a_merged_model_computes_what_base_and_adapter_compute(padded_run, tiny, tokenizer):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged_dir = padded_run.out / "merged"
    assert padded_run.merged == merged_dir and padded_run.report["merged"] == str(merged_dir)
    assert (merged_dir / "config.json").is_file() and (merged_dir / "tokenizer.json").is_file()
    ids = torch.tensor([tokenizer.encode("<|user|>\nTask: add 3 and 4\n<|assistant|>\nSubgoal")])
    with torch.no_grad():
        base = AutoModelForCausalLM.from_pretrained(tiny).eval()
        plain = base(ids).logits
        adapted = PeftModel.from_pretrained(base, padded_run.out).eval()(ids).logits
        merged = AutoModelForCausalLM.from_pretrained(merged_dir).eval()(ids).logits
    torch.testing.assert_close(merged, adapted, atol=1e-3, rtol=1e-4)
    assert (merged - plain).abs().max() > 1e-2  # the adapter changed the model


def test_full_fine_tuning_saves_a_whole_model(tmp_path, tiny, records_file):
    from safetensors.torch import load_file

    config = config_from_recipe(
        "cpu-small", data=[str(records_file)], full=True, base_model=str(tiny),
        out=str(tmp_path / "full"), max_steps=2, max_length=MAX_LENGTH, eval_fraction=0.0,
        report_to="none", device="cpu", threads=1, lr=1e-3,
    )
    result = train(config)
    out = result.out
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    assert result.report["config"]["lora_r"] is None and result.report["steps"] == 2
    trained, base = load_file(out / "model.safetensors"), load_file(tiny / "model.safetensors")
    assert trained.keys() == base.keys()
    assert any(not torch.equal(trained[k], base[k]) for k in base)
    with pytest.raises(TrainingError, match="init_adapter needs a LoRA run"):
        train(_config(records_file, tiny, tmp_path / "x", lora_r=None, init_adapter=str(out)))


# ------------------------------------------------------------------------------- init adapter
def _save_wide_model(folder: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAX_LENGTH,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_an_init_adapter_for_another_base_is_refused(tmp_path, packed_run, tiny, records_file):
    wide = _save_wide_model(tmp_path / "wide")
    out = tmp_path / "out"
    config = _config(records_file, wide, out, init_adapter=str(packed_run.out))
    with pytest.raises(TrainingError) as caught:
        train(config)
    message = str(caught.value)
    assert "does not fit" in message and f"{tiny}{os.sep}" in message and repr(str(wide)) in message
    assert not out.exists()
    with pytest.raises(TrainingError, match="no-adapter.* does not exist"):
        train(_config(records_file, tiny, out, init_adapter=str(tmp_path / "no-adapter")))


def test_an_init_adapter_for_the_same_base_starts_from_its_weights(
    packed_run, tiny, records_file, tmp_path
):
    from safetensors.torch import load_file

    config = _config(records_file, tiny, tmp_path / "out", init_adapter=str(packed_run.out))
    prepared = trainer_module.prepare(config)
    saved = load_file(packed_run.out / "adapter_model.safetensors")
    state = peft.get_peft_model_state_dict(prepared.model)
    assert saved.keys() == state.keys()
    for key, value in saved.items():
        torch.testing.assert_close(state[key].float(), value.float())
    assert any(p.requires_grad for n, p in prepared.model.named_parameters() if "lora_" in n)


# ------------------------------------------------------------------------------------- resume
@pytest.mark.full
def test_resume_continues_from_the_last_checkpoint(tmp_path, tiny, records_file, caplog):
    out = tmp_path / "run"
    first = train(_config(records_file, tiny, out, max_steps=4, save_steps=2, eval_fraction=0))
    assert first.report["steps"] == 4
    assert {p.name for p in out.glob("checkpoint-*")} == {"checkpoint-2", "checkpoint-4"}
    killed = tmp_path / "killed"
    shutil.copytree(out, killed)
    with pytest.raises(TrainingError, match="already holds a training run; pass --resume"):
        train(_config(records_file, tiny, out, max_steps=6, save_steps=2, eval_fraction=0))
    with pytest.raises(TrainingError, match="other settings .*lora_r: 8 -> 4"):
        train(_config(records_file, tiny, out, max_steps=6, save_steps=2, eval_fraction=0,
                      lora_r=4, resume=True))
    with caplog.at_level("WARNING", logger="lumos_gym.training.launch"):
        resumed = train(_config(records_file, tiny, out, max_steps=6, save_steps=2,
                                eval_fraction=0, resume=True))
    assert "--max-steps 6 > 4: the linear learning-rate schedule" in caplog.text
    assert "--init-adapter" in caplog.text
    assert resumed.report["resumed_from"].endswith("checkpoint-4")
    assert resumed.report["steps"] == 6
    # a run killed after its checkpoints, before the final adapter was written
    for name in ("adapter_model.safetensors", "adapter_config.json", "lumos_training.json"):
        (killed / name).unlink()
    again = train(_config(records_file, tiny, killed, max_steps=6, save_steps=2,
                          eval_fraction=0, resume=True))
    assert again.report["resumed_from"].endswith("checkpoint-4") and again.report["steps"] == 6
    # each session is on the card: the first ran to 4, what its checkpoint kept
    spans = [(x["from_step"], x["to_step"], x["finished"]) for x in again.report["sessions"]]
    assert spans == [(0, 4, False), (4, 6, True)]
    assert [(x["from_step"], x["to_step"]) for x in resumed.report["sessions"]] == [(0, 4), (4, 6)]
    assert (killed / "adapter_model.safetensors").is_file()
    assert (killed / "lumos_training.json").is_file()
