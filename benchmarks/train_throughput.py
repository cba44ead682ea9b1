"""Training throughput: packed rows against padded batches, and our trainer against a torch loop.

On the same records and the same model (LoRA set up as the cpu-small recipe does), in one run:

- training tokens per second (real tokens, padding not counted) and the share of token slots
  spent on padding, for packed rows (PackedCollator over rows_for_training(pack=True)), for
  padded rows batched by length (as the trainer batches them with --no-pack) and for padded
  rows in plain random order;
- lumos-gym's trainer (build_trainer, then Trainer.train) against a hand-written torch loop
  (AdamW, the same learning-rate schedule and gradient clipping) fed the same rows in the same
  order, batch for batch: the trainer's own batches are recorded and replayed.

Every run makes one pass over the same records; its first optimizer step is a warm-up, left out
of both the time and the tokens. The packed row of the table is the hand loop's replay.

Run: .venv/bin/python benchmarks/train_throughput.py --data data/train/plan-iterative.jsonl
     [--model smollm2-135m] [--steps 6] [--batch-size 2] [--max-length 1024] [--lora 8]
     [--threads 2]   (--batch-size, --max-length and --lora default to cpu-small's)
     OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_throughput.py --tiny --synthetic 300
     (a tiny random Llama: a smoke test in seconds, its figures mean nothing)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import TrainerCallback, get_scheduler
from transformers import logging as hf_logging
from transformers.trainer_pt_utils import get_length_grouped_indices

from lumos_gym import prompts
from lumos_gym.models import hf
from lumos_gym.training import RECIPES, config_from_recipe
from lumos_gym.training.collate import (
    PackedCollator,
    PaddedCollator,
    pack_examples,
    padding_fraction,
    rows_for_training,
)
from lumos_gym.training.data import encode_record, read_records, split_records
from lumos_gym.training.trainer import build_trainer, prepare, training_arguments

RECIPE = "cpu-small"
WORDS = (
    "the planner writes subgoals and grounder turns each one into actions calculate total "
    "number of apples answer query knowledge observation result find price item search click "
    "type select page shop room open take go north south east west bag cost per day"
).split()


# ------------------------------------------------------------------------------------ inputs
def synthetic_records(count: int, *, max_length: int, seed: int) -> list[dict]:
    """Tulu-format records (user and assistant turns) of widely varied lengths."""
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randint(0, 999))
                        for _ in range(max(1, n)))

    records = []
    for i in range(count):
        # about 1.3 tokens a word: a median record of a sixth of max_length, a long tail
        drawn = int(rng.lognormvariate(math.log(max_length / 8), 0.8))
        total = min(max_length // 2, max(12, drawn))
        turns = rng.choice((1, 1, 2, 3, 4))
        messages = []
        for t in range(turns):
            share = total // turns
            messages.append({"role": "user", "content": f"Task: {words(share * 3 // 5)}"})
            messages.append({"role": "assistant",
                             "content": f"Subgoal {t + 1}: {words(share * 2 // 5)}"})
        records.append({"dataset": "synthetic", "id": f"synthetic-{i}", "messages": messages})
    return records


def save_tiny_model(folder: Path, texts: list[str], max_length: int) -> str:
    """Train a small byte-level BPE on ``texts``, build a tiny random Llama, save both."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=512, special_tokens=["<pad>", "<|endoftext|>"], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", eos_token="<|endoftext|>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_length,
        tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def load_tokenizer(name: str):
    source = hf.resolve_model(name)
    if source.alias:
        hf.ensure_alias_cache(source.alias)
    return hf.load_tokenizer(source.path, local=source.local)


def choose_records(path: Path, tokenizer, *, steps: int, batch_size: int, max_length: int,
                   seed: int) -> int:
    """The fewest records (in the order the trainer draws them) that pack into ``steps`` steps."""
    records, _ = split_records(read_records([path]), eval_fraction=0.0, seed=seed)
    eos = tokenizer.eos_token or "</s>"
    need = steps * batch_size
    kept: list[tuple[int, object]] = []  # (records read so far, example)
    tokens = 0
    for count, record in enumerate(records, 1):
        example, _ = encode_record(record.messages, tokenizer, max_length=max_length, eos=eos)
        if example.trained_tokens:
            kept.append((count, example))
            tokens += len(example.input_ids)
        if tokens > (need - 1) * max_length:  # need - 1 rows cannot hold them all
            break
    if len(pack_examples([e for _, e in kept], max_length)) < need:
        return len(records) if not kept else kept[-1][0]
    low, high = min(need, len(kept)), len(kept)  # the smallest prefix packing into `need` rows
    while low < high:
        mid = (low + high) // 2
        if len(pack_examples([e for _, e in kept[:mid]], max_length)) >= need:
            high = mid
        else:
            low = mid + 1
    return kept[low - 1][0]


# -------------------------------------------------------------------------------------- runs
@dataclass
class Run:
    name: str
    steps: int  # timed steps (the warm-up step left out)
    records: int
    tokens: int  # real tokens in the timed steps
    padding: float  # share of token slots that are padding, timed steps
    seconds: float
    mean_loss: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    @property
    def seconds_per_step(self) -> float:
        return self.seconds / self.steps


def measure(name: str, batches, stamps, mean_loss: float, batch_size: int) -> Run:
    """Figures of the steps after the first (``stamps``: the time each step ended)."""
    timed = [row for batch in batches[1:] for row in batch]
    records = sum(row["position_ids"].count(0) if "position_ids" in row else 1
                  for batch in batches for row in batch)
    return Run(
        name=name, steps=len(batches) - 1, records=records,
        tokens=sum(len(row["input_ids"]) for row in timed),
        padding=padding_fraction(timed, batch_size), seconds=stamps[-1] - stamps[0],
        mean_loss=mean_loss,
    )


class RecordingCollator:
    """Wraps the trainer's collator and keeps the rows of every batch, in order."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.batches: list[list[dict]] = []

    def __call__(self, rows):
        self.batches.append(list(rows))
        return self.inner(rows)


class StepTimer(TrainerCallback):
    def __init__(self) -> None:
        self.stamps: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.stamps.append(time.perf_counter())


def run_trainer(config) -> tuple[Run, list[list[dict]]]:
    """Train with build_trainer + Trainer.train; return the figures and the batches it saw."""
    prepared = prepare(config)
    trainer = build_trainer(prepared)
    recorder = RecordingCollator(trainer.data_collator)
    trainer.data_collator = recorder
    timer = StepTimer()
    trainer.add_callback(timer)
    output = trainer.train()
    batches = recorder.batches[: trainer.state.global_step]
    run = measure("packed, lumos-gym trainer", batches, timer.stamps, output.training_loss,
                  config.batch_size)
    return run, batches


def run_loop(name: str, config, make_batches, *, pack: bool) -> Run:
    """A plain torch loop on a fresh copy of the same model over ``make_batches(examples)``."""
    prepared = prepare(config)  # the same seed: the same LoRA initialisation
    batches = make_batches(prepared.train)
    model = prepared.model
    model.train()
    pad_id = prepared.tokenizer.pad_token_id
    if pad_id is None:
        pad_id = prepared.tokenizer.eos_token_id or 0
    collator = PackedCollator(pad_id) if pack else PaddedCollator(pad_id)
    args = training_arguments(config, has_eval=False)  # the trainer's clipping and warmup
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    schedule = get_scheduler(
        config.schedule, optimizer, num_warmup_steps=args.get_warmup_steps(len(batches)),
        num_training_steps=len(batches),
    )
    stamps, losses = [], []
    for rows in batches:
        # no KV cache, as the trainer sets it: with a cache transformers ignores the restarts
        # of position_ids and packed records would attend to each other
        loss = model(**collator(rows), use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        stamps.append(time.perf_counter())
    return measure(name, batches, stamps, float(torch.stack(losses).mean()), config.batch_size)


def padded_batches(examples, *, order: str, batch_size: int, seed: int) -> list[list[dict]]:
    """One pass over the examples, unpacked, grouped by length or in random order."""
    rows = rows_for_training(examples, pack=False, max_length=0)
    generator = torch.Generator().manual_seed(seed)
    if order == "length":  # what Trainer's group_by_length sampler does
        lengths = [len(r["input_ids"]) for r in rows]
        indices = get_length_grouped_indices(lengths, batch_size, generator=generator)
    else:
        indices = torch.randperm(len(rows), generator=generator).tolist()
    ordered = [rows[i] for i in indices]
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]


# -------------------------------------------------------------------------------------- main
def main() -> None:
    recipe = RECIPES[RECIPE].settings
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="training records (lumos-gym export or data build)")
    source.add_argument("--synthetic", type=int, metavar="N",
                        help="generate N Tulu-format records of varied lengths")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tiny", action="store_true",
                        help="a tiny random Llama instead of --model (a smoke test)")
    parser.add_argument(
        "--steps",
        type=int,
        default=6,
        help="optimizer steps of a packed pass (sets how many records are used)",
    )
    parser.add_argument("--batch-size", type=int, default=recipe["batch_size"])
    parser.add_argument("--max-length", type=int, default=recipe["max_length"])
    parser.add_argument("--lora", type=int, default=recipe["lora_r"], metavar="R")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is a warm-up)")
    hf_logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="lumos-train-bench-") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, tmp: Path) -> None:
    if args.synthetic:
        data = tmp / "synthetic.jsonl"
        rows = synthetic_records(args.synthetic, max_length=args.max_length, seed=args.seed)
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        data = Path(args.data)
    if args.tiny:
        sample = [prompts.render_training(r.messages) for r in read_records([data])[:500]]
        base = save_tiny_model(tmp / "tiny-llama", sample, args.max_length)
    else:
        base = args.model
    tokenizer = load_tokenizer(base)
    count = choose_records(data, tokenizer, steps=args.steps, batch_size=args.batch_size,
                           max_length=args.max_length, seed=args.seed)
    config = config_from_recipe(
        RECIPE, data=[str(data)], base_model=base, out=str(tmp / "out"), lora_r=args.lora,
        max_length=args.max_length, batch_size=args.batch_size, grad_accum=1, epochs=1.0,
        eval_fraction=0.0, save_steps=10**9, report_to="none", max_records=count,
        threads=args.threads, seed=args.seed, pack=True,  # the trainer's run is the packed one
    )
    print(f"model {'tiny random Llama' if args.tiny else base}, LoRA r={config.lora_r}, "
          f"{config.batch_size} rows a step, max length {config.max_length}, "
          f"{torch.get_num_threads()} threads; {count} records of "
          f"{'synthetic data' if args.synthetic else data}")

    trainer_run, packed = run_trainer(dataclasses.replace(config, out=str(tmp / "trainer")))
    if len(packed) < 2:
        raise SystemExit("too few records for two packed steps: give more records")
    runs = [
        run_loop(
            "packed, hand loop",
            dataclasses.replace(config, out=str(tmp / "loop")),
            lambda _: packed,
            pack=True,
        ),
        trainer_run,
    ]
    for order, name in (("length", "padded, grouped by length"), ("random", "padded, random")):
        make = functools.partial(padded_batches, order=order, batch_size=config.batch_size,
                                 seed=config.seed)
        runs.append(run_loop(name, dataclasses.replace(config, out=str(tmp / order)), make,
                             pack=False))

    print(
        f"{'run (one pass over the same records)':<38} {'steps':>5} {'records':>7} "
        f"{'tokens':>7} {'padding':>7} {'tokens/s':>9} {'s/step':>7} {'mean loss':>9}"
    )
    for r in runs:
        print(
            f"{r.name:<38} {r.steps:>5} {r.records:>7} {r.tokens:>7} {r.padding:>7.1%} "
            f"{r.tokens_per_second:>9.1f} {r.seconds_per_step:>7.3f} {r.mean_loss:>9.4f}"
        )
    print("(steps, tokens, padding and tokens/s leave out each run's first step, a warm-up)")
    loop, ours, grouped, padded = runs
    overhead = ours.seconds / loop.seconds - 1
    print(f"packing: {loop.tokens_per_second / grouped.tokens_per_second:.2f}x the tokens/s of "
          f"length-grouped padding, {loop.tokens_per_second / padded.tokens_per_second:.2f}x of "
          f"random-order padding; our trainer against the hand loop on the same "
          f"{loop.steps} batches: {overhead:+.1%} time (aim: under +10%)")


if __name__ == "__main__":
    main()
