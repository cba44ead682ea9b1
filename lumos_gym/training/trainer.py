"""SFT of a Lumos module or a baseline policy on transformers' Trainer, with peft LoRA.

:func:`train` runs in four steps, each a function of its own:

1. :func:`prepare` checks everything that can fail before any step is taken: the config, every
   line of the data, the base model and tokenizer, the length limit against the model's, an
   initial adapter against the base, and whether the output folder holds another run;
2. the records are encoded (assistant-only loss) and packed or length-grouped;
3. ``transformers.Trainer`` trains: checkpoints every ``save_steps``, eval loss on a held-out
   slice, TensorBoard logs, a progress bar, and resume from the last checkpoint after a kill;
4. :func:`finish` saves the adapter (cast to ``adapter_dtype``, its ``base_model_name_or_path``
   set to the name the run was given, so ``evaluate --planner OUT`` finds the base) or the full
   model, optionally a merged copy, and ``lumos_training.json`` (config, data hashes, encode
   stats, losses, speed).

Run under ``accelerate launch`` with a config of ``lumos_gym/training/accelerate/`` and
``--num_processes N``, the same code trains on many GPUs with DeepSpeed ZeRO-3 or FSDP: the
Trainer reads the launcher's settings (docs/training.md has the commands). The process count,
the rows of a step, resumption and the sessions of a run are :mod:`lumos_gym.training.launch`'s.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym import __version__
from lumos_gym.databuild import files_build
from lumos_gym.errors import BackendError
from lumos_gym.gitinfo import git_provenance
from lumos_gym.jsonl import publish_folder, write_json_atomic
from lumos_gym.models.sources import TRAINING_REPORT, adapter_base_name, check_adapter_folder
from lumos_gym.training.config import TrainConfig, TrainingError
from lumos_gym.training.data import (
    EncodeStats,
    Example,
    data_fingerprint,
    encode_records,
    read_records,
    split_records,
)
from lumos_gym.training.launch import (
    DATA_FILE,
    _world,
    check_launch,
    check_output_folder,
    finished_sessions,
    fsdp_on_cpus,
    grad_accum_for,
    rows_per_step,
    start_session,
    steps_per_epoch,
)

logger = logging.getLogger(__name__)

REPORT_FILE = TRAINING_REPORT
"""The run report written beside the final adapter or model."""




@dataclass
class Prepared:
    """What :func:`prepare` checked and loaded.

    Attributes:
        config: the run's config.
        model: the base model (with the LoRA adapter attached for LoRA runs).
        tokenizer: its tokenizer.
        eos: the end-of-turn text the records were encoded with.
        train: the training examples.
        eval: the held-out examples.
        stats: what encoding did.
        fingerprint: the SHA-256 of each data file.
        resume_from: the checkpoint to continue from, if any.
        notes: warnings about the data (truncated or dropped records).
        mean_loss: the mean training loss of the run, once trained.
    """

    config: TrainConfig
    model: Any
    tokenizer: Any
    eos: str
    train: list[Example]
    eval: list[Example]
    stats: EncodeStats
    fingerprint: dict[str, str]
    resume_from: str | None = None
    notes: list[str] = field(default_factory=list)
    mean_loss: float | None = None


@dataclass
class TrainResult:
    """What a run produced.

    Attributes:
        out: the output folder (the adapter or model is saved there).
        merged: the merged model's folder, when asked for.
        report: the run report (also in ``out/lumos_training.json``).
    """

    out: Path
    merged: Path | None
    report: dict[str, Any]


# ---------------------------------------------------------------------------------- checks
def _device(config: TrainConfig) -> str:
    import torch

    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise TrainingError("device 'cuda' was asked for but torch sees no CUDA device")
    return config.device


def _precision(config: TrainConfig, device: str) -> str:
    import torch

    if config.precision != "auto":
        gpu = device.startswith("cuda")
        if config.precision == "bf16" and gpu and not torch.cuda.is_bf16_supported():
            raise TrainingError("this GPU has no bf16; pass --precision fp16 or fp32")
        return config.precision
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return "bf16"
    return "fp32"


def load_base(name: str) -> tuple[Any, Any, Any]:
    """Load the base model (fp32) and tokenizer of ``name``; return them and its source.

    Raises:
        TrainingError: the name resolves to nothing loadable.
    """
    import torch

    from lumos_gym.models import hf  # heavy: torch and transformers

    try:
        source = hf.resolve_model(name)
        if source.alias:
            hf.ensure_alias_cache(source.alias)
        tokenizer = hf.load_tokenizer(source.path, local=source.local)
        model = hf.load_model(source, torch.float32)
    except BackendError as e:
        raise TrainingError(f"cannot load the base model {name!r}: {e}") from e
    return model, tokenizer, source


def model_max_length(model: Any) -> int | None:
    """The longest sequence the model's positions allow, if its config says."""
    config = model.config
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _attach_lora(model: Any, config: TrainConfig) -> Any:
    try:
        from peft import LoraConfig, PeftModel, get_peft_model
    except ImportError as e:  # pragma: no cover - peft is in the hf extra
        raise TrainingError("LoRA needs peft: pip install 'lumos-gym[hf]'") from e
    if config.init_adapter:
        from lumos_gym.models.hf import quiet_peft_deprecations  # heavy: torch, transformers

        try:
            folder = check_adapter_folder("init", config.init_adapter)
            with quiet_peft_deprecations():
                return PeftModel.from_pretrained(model, folder, is_trainable=True)
        except (BackendError, RuntimeError, ValueError, KeyError) as e:
            base = adapter_base_name(config.init_adapter) or "?"
            raise TrainingError(
                f"the adapter {config.init_adapter!r} (made for {base!r}) does not fit the base "
                f"model {config.base_model!r}: {str(e).splitlines()[0]}"
            ) from e
    targets: Any = list(config.lora_targets)
    if targets == ["all-linear"]:
        targets = "all-linear"
    else:
        names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        missing = [t for t in targets if t not in names]
        if missing:
            raise TrainingError(
                f"LoRA targets {missing} are not modules of {config.base_model!r}; pass "
                "--lora-targets all-linear or names of its linear layers"
            )
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    from lumos_gym.models.hf import quiet_peft_deprecations  # heavy: torch and transformers

    with quiet_peft_deprecations():
        return get_peft_model(model, lora)


def _tensorboard_available() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(m) is not None for m in ("tensorboard", "tensorboardX"))


def prepare(config: TrainConfig) -> Prepared:
    """Check and load everything a run needs; fail before any training step.

    Raises:
        TrainingError: bad data, a model or tokenizer that cannot load, a ``max_length`` beyond
            the model's positions, an adapter for another base, or an output folder in use.
    """
    import torch

    records = read_records(config.data)
    fingerprint = data_fingerprint(config.data)
    resume_from = check_output_folder(config, fingerprint)
    if config.merge and _world() > 1:
        raise TrainingError(
            "--merge runs on one process; train without it, then merge the adapter with "
            "`lumos-gym merge OUT --out MERGED`"
        )
    if config.report_to == "tensorboard" and not _tensorboard_available():
        raise TrainingError(
            "TensorBoard logging needs tensorboard: pip install 'lumos-gym[train]', or pass "
            "--report-to none"
        )
    device = _device(config)
    _precision(config, device)
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    model, tokenizer, _ = load_base(config.base_model)
    limit = model_max_length(model)
    if limit is not None and config.max_length > limit:
        raise TrainingError(
            f"max_length {config.max_length} is longer than {config.base_model!r} can read "
            f"({limit} positions); pass --max-length {limit} or less"
        )
    eos = config.eos if config.eos is not None else (tokenizer.eos_token or "</s>")
    train_records, eval_records = split_records(
        records, eval_fraction=config.eval_fraction, seed=config.seed,
        max_records=config.max_records,
    )
    train, stats = encode_records(train_records, tokenizer, max_length=config.max_length, eos=eos)
    held, _ = encode_records(eval_records, tokenizer, max_length=config.max_length, eos=eos)
    if not train:
        raise TrainingError(
            f"no training example is left: all {stats.records} records lost their assistant "
            f"tokens to max_length {config.max_length}; raise --max-length"
        )
    notes = []
    if stats.truncated:
        notes.append(
            f"{stats.truncated} of {stats.kept} records were cut at max_length "
            f"{config.max_length} (longest: {stats.longest} tokens)"
        )
    if stats.dropped_no_target:
        notes.append(f"{stats.dropped_no_target} record(s) had no assistant token left and "
                     "were dropped")
    if config.lora_r is not None:
        model = _attach_lora(model, config)
    elif config.init_adapter:
        raise TrainingError("init_adapter needs a LoRA run (drop --full)")
    return Prepared(config, model, tokenizer, eos, train, held, stats,
                    fingerprint, resume_from, notes)


# -------------------------------------------------------------------------------- training
def training_arguments(config: TrainConfig, *, has_eval: bool) -> Any:
    """The ``transformers.TrainingArguments`` of a run."""
    from transformers import TrainingArguments

    device = _device(config)
    precision = _precision(config, device)
    return TrainingArguments(
        output_dir=config.out,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=grad_accum_for(config),
        learning_rate=config.lr,
        lr_scheduler_type=config.schedule,
        warmup_steps=config.warmup_ratio,  # a float below 1 is a ratio of the steps
        weight_decay=config.weight_decay,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        optim="adamw_torch",
        logging_steps=config.logging_steps,
        logging_first_step=True,
        eval_strategy="steps" if has_eval else "no",
        eval_steps=config.eval_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=device == "cpu",
        seed=config.seed,
        data_seed=config.seed,
        report_to=[] if config.report_to == "none" else [config.report_to],
        remove_unused_columns=False,
        train_sampling_strategy="random" if config.pack else "group_by_length",
        dataloader_num_workers=0,
        include_num_input_tokens_seen="non_padding",
    )


def build_trainer(prepared: Prepared) -> Any:
    """The ``transformers.Trainer`` over the prepared examples."""
    from transformers import Trainer

    from lumos_gym.training.collate import (  # heavy: torch
        PackedCollator,
        PaddedCollator,
        RowDataset,
        rows_for_training,
    )

    config = prepared.config
    pad_id = prepared.tokenizer.pad_token_id
    if pad_id is None:
        pad_id = prepared.tokenizer.eos_token_id or 0
    rows = rows_for_training(prepared.train, pack=config.pack, max_length=config.max_length)
    held = rows_for_training(prepared.eval, pack=config.pack, max_length=config.max_length)
    collator = PackedCollator(pad_id) if config.pack else PaddedCollator(pad_id)

    class ShardingTrainer(Trainer):
        """The Trainer, with FSDP on CPU processes when the launch asked for it."""

        def create_accelerator_and_postprocess(self) -> None:
            with fsdp_on_cpus():
                super().create_accelerator_and_postprocess()

    return ShardingTrainer(
        model=prepared.model,
        args=training_arguments(config, has_eval=bool(held)),
        train_dataset=RowDataset(rows),
        eval_dataset=RowDataset(held) if held else None,
        data_collator=collator,
        processing_class=prepared.tokenizer,
    )


def _dtype(name: str) -> Any:
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def name_adapter_base(out: Path, base_model: str) -> None:
    """Record ``base_model`` as the adapter's base in ``out/adapter_config.json``.

    It is the name the run was given (an alias, hub id or folder), so that
    ``evaluate --planner OUT`` loads the same model.
    """
    path = out / "adapter_config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["base_model_name_or_path"] = base_model
    write_json_atomic(path, data)


def cast_adapter_file(out: Path, dtype: str) -> None:
    """Rewrite the saved adapter weights of ``out`` in ``dtype`` (bf16 halves an fp32 file)."""
    weights = out / "adapter_model.safetensors"
    if weights.is_file() and dtype != "fp32":
        from safetensors.torch import load_file, save_file

        tensors = {k: v.to(_dtype(dtype)) for k, v in load_file(weights).items()}
        save_file(tensors, str(weights), metadata={"format": "pt"})


def merge_adapter(adapter: str | Path, out: str | Path, *, dtype: str = "bf16") -> Path:
    """Load an adapter's base, merge the adapter into it, and save the full model to ``out``.

    Raises:
        TrainingError: the adapter or its base cannot be loaded.
    """
    from peft import PeftModel

    from lumos_gym.models.hf import quiet_peft_deprecations  # heavy: torch and transformers

    folder = check_adapter_folder("merge", adapter)
    base_name = adapter_base_name(folder)
    if base_name is None:
        raise TrainingError(f"the adapter {str(folder)!r} names no base model to merge into")
    model, tokenizer, _ = load_base(base_name)
    try:
        with quiet_peft_deprecations():
            merged = PeftModel.from_pretrained(model, folder).merge_and_unload()
    except (RuntimeError, ValueError, KeyError) as e:
        raise TrainingError(f"cannot merge {folder} into {base_name!r}: {e}") from e
    merged = merged.to(_dtype(dtype))
    out = Path(out)

    def save(staging: Path) -> bool:
        merged.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        return True

    if out.exists():
        import shutil

        shutil.rmtree(out)
    publish_folder(out, save)
    return out


def _tokens_before(prepared: Prepared) -> int:
    """Tokens a resumed run had seen at its checkpoint (so speed counts this session only)."""
    if not prepared.resume_from:
        return 0
    try:
        state = json.loads((Path(prepared.resume_from) / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(state.get("num_input_tokens_seen", 0) or 0)


def device_name(device: Any) -> str:
    """A torch device as a card says it: ``cpu``, or the CUDA card's name."""
    import torch

    kind = getattr(device, "type", None) or str(device).split(":")[0]
    return torch.cuda.get_device_name() if kind == "cuda" else kind


def _device_text(trainer: Any) -> str:
    """Where ``trainer`` ran: :func:`device_name`, with the process count if more than one."""
    args = trainer.args
    world = int(getattr(args, "world_size", 1) or 1)
    name = device_name(args.device)
    return name if world == 1 else f"{world} x {name}"


def finish(prepared: Prepared, trainer: Any, seconds: float) -> TrainResult:
    """Save the final adapter or model, the merged copy if asked, and the run report."""
    import torch

    config = prepared.config
    out = Path(config.out)
    state = trainer.state
    if config.lora_r is None:  # the Trainer turns the KV cache off; a saved model should use it
        trainer.model.config.use_cache = True
    if getattr(trainer, "is_fsdp_enabled", False):  # one full file, not per-rank shards
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(out))  # gathers ZeRO-3 / FSDP shards; writes on the main process
    merged = None
    if trainer.is_world_process_zero():
        if config.lora_r is not None:
            cast_adapter_file(out, config.adapter_dtype)
            name_adapter_base(out, config.base_model)
        prepared.tokenizer.save_pretrained(str(out))
        if config.merge:
            merged = merge_adapter(out, out / "merged", dtype=config.adapter_dtype)
    losses = [e for e in state.log_history if "loss" in e]
    evals = [e for e in state.log_history if "eval_loss" in e]
    tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0) - _tokens_before(prepared)
    report = {
        "lumos_gym_version": __version__,
        "torch_version": torch.__version__,
        "config": config.to_dict(),
        "data_sha256": prepared.fingerprint,
        "eos": prepared.eos,
        "encode": prepared.stats.to_dict(),
        "notes": prepared.notes,
        "train_examples": len(prepared.train),
        "eval_examples": len(prepared.eval),
        "steps": state.global_step,
        "epochs": state.epoch,
        "first_loss": losses[0]["loss"] if losses else None,
        "mean_loss": prepared.mean_loss,
        "final_loss": losses[-1]["loss"] if losses else None,
        "eval_losses": [(e["step"], e["eval_loss"]) for e in evals],
        "seconds": round(seconds, 1),
        "device": _device_text(trainer),
        "tokens_seen": tokens,
        "tokens_per_second": round(tokens / seconds, 1) if seconds > 0 and tokens else None,
        "resumed_from": prepared.resume_from,
        "merged": str(merged) if merged else None,
        "git": git_provenance(),
        "data_build": files_build(config.data),
    }
    if trainer.is_world_process_zero():
        report["sessions"] = finished_sessions(out, step=state.global_step, seconds=seconds)
        write_json_atomic(out / REPORT_FILE, report)
    return TrainResult(out, merged, report)


def train(config: TrainConfig) -> TrainResult:
    """Train one model as ``config`` says and save it (see the module docstring).

    Raises:
        TrainingError: anything :func:`prepare` checks, before the first step.
    """
    prepared = prepare(config)
    for note in prepared.notes:
        logger.warning(note)
    out = Path(config.out)
    trainer = build_trainer(prepared)
    check_launch(trainer)
    # every rank has checked the folder (prepare) before the main one marks it as in use
    trainer.accelerator.wait_for_everyone()
    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        config.save(out)
        write_json_atomic(out / DATA_FILE, prepared.fingerprint)
        start_session(out, prepared.resume_from, config)
    started = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=prepared.resume_from)
    seconds = time.perf_counter() - started
    prepared.mean_loss = output.training_loss
    step = trainer.state.global_step
    evaluated = any(e.get("step") == step and "eval_loss" in e for e in trainer.state.log_history)
    if prepared.eval and not evaluated:
        trainer.evaluate()  # the final eval loss (the Trainer logs it in its history)
    return finish(prepared, trainer, seconds)


__all__ = [
    "REPORT_FILE",
    "Prepared",
    "TrainResult",
    "build_trainer",
    "check_launch",
    "fsdp_on_cpus",
    "check_output_folder",
    "finish",
    "grad_accum_for",
    "load_base",
    "merge_adapter",
    "model_max_length",
    "name_adapter_base",
    "prepare",
    "cast_adapter_file",
    "rows_per_step",
    "steps_per_epoch",
    "train",
    "training_arguments",
]
