"""Training configuration: one validated dataclass, named recipes, and a saved copy per run.

A run is described by a :class:`TrainConfig`. Recipes are named sets of defaults
(:data:`RECIPES`); command-line flags override a recipe field by field. The config is saved in
the output folder (``lumos_train_config.json``, stamped with the lumos-gym version) so that
``--resume`` can check it continues the same run and a reader can see how a model was made.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym import __version__
from lumos_gym.errors import LumosGymError
from lumos_gym.jsonl import write_json_atomic

CONFIG_FILE = "lumos_train_config.json"
"""The name of the saved config in a run's output folder."""

#: The modules LoRA adapts by default: peft's ``all-linear``, every linear layer but the output
#: head (for a LLaMA-style model: q, k, v, o, gate, up and down projections).
ALL_LINEAR = ("all-linear",)


class TrainingError(LumosGymError):
    """Training cannot start or go on: bad data, a model that cannot load, a bad config."""


@dataclass
class TrainConfig:
    """Everything a training run needs.

    Attributes:
        data: training files (JSONL of ``{"messages": [...]}`` records, as ``lumos-gym export``
            writes them).
        base_model: the model to train (an alias such as ``smollm2-135m``, a local folder or a
            hub id).
        out: the output folder: checkpoints, logs, and the final adapter or model.
        recipe: the recipe the defaults came from (recorded, not re-applied).
        lora_r: the LoRA rank; ``None`` trains every weight (full fine-tuning).
        lora_alpha: the LoRA scaling numerator (the update is scaled by ``alpha / r``).
        lora_dropout: dropout on the LoRA input.
        lora_targets: the module names LoRA adapts.
        epochs: passes over the training records (ignored when ``max_steps`` is set).
        max_steps: optimizer steps to run; ``None`` runs ``epochs`` passes.
        lr: the peak learning rate.
        schedule: the learning-rate schedule (a transformers scheduler name).
        warmup_ratio: the fraction of steps spent warming up.
        weight_decay: AdamW's weight decay.
        max_length: the most tokens of one record (longer ones are truncated).
        batch_size: records (or packed rows) per device per forward pass.
        grad_accum: forward passes per optimizer step.
        total_batch: rows per optimizer step over all devices; when set, ``grad_accum`` is
            derived from it and the number of processes (the paper's 128 on 1, 2 or 8 GPUs).
        pack: pack several records into one row of ``max_length`` tokens, each attending only
            to itself; otherwise batches group records of similar length.
        precision: ``"bf16"``, ``"fp16"``, ``"fp32"``, or ``"auto"`` (bf16 on a GPU that has
            it, else fp32: bf16 matmuls are slower than fp32 on many CPUs).
        eval_fraction: the share of records held out for the eval loss (0 for none).
        eval_steps: optimizer steps between eval-loss measurements.
        save_steps: optimizer steps between checkpoints.
        save_total_limit: checkpoints kept (older ones are deleted).
        logging_steps: optimizer steps between loss logs.
        max_records: use at most this many records (after shuffling with ``seed``).
        seed: the seed of shuffling, the held-out slice, dropout and LoRA's initialisation.
        eos: the text that ends each assistant turn; ``None`` uses the tokenizer's EOS token,
            as open-instruct did (LLaMA's is ``</s>``).
        merge: also save the base model with the LoRA weights merged in (``out/merged``).
        adapter_dtype: the dtype the final adapter is saved in.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``.
        threads: CPU threads for torch (``None``: torch's default).
        report_to: where logs go besides the console (``"tensorboard"`` or ``"none"``).
        resume: continue the run in ``out`` from its last checkpoint.
        init_adapter: a LoRA adapter folder to continue training from (instead of a new one).
    """

    data: list[str]
    base_model: str = "smollm2-135m"
    out: str = "runs/train"
    recipe: str | None = None
    lora_r: int | None = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] = ALL_LINEAR
    epochs: float = 2.0
    max_steps: int | None = None
    lr: float = 2e-4
    schedule: str = "linear"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    max_length: int = 1024
    batch_size: int = 8
    grad_accum: int = 1
    total_batch: int | None = None
    pack: bool = True
    precision: str = "auto"
    eval_fraction: float = 0.05
    eval_steps: int = 50
    save_steps: int = 50
    save_total_limit: int = 2
    logging_steps: int = 5
    max_records: int | None = None
    seed: int = 0
    eos: str | None = None
    merge: bool = False
    adapter_dtype: str = "bf16"
    device: str = "auto"
    threads: int | None = None
    report_to: str = "tensorboard"
    resume: bool = False
    init_adapter: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.data, str):
            self.data = [self.data]
        self.data = [str(p) for p in self.data]
        self.lora_targets = tuple(self.lora_targets)
        problems = []
        if not self.data:
            problems.append("no training file given (--data)")
        if self.lora_r is not None and self.lora_r < 1:
            problems.append(f"lora_r must be at least 1, got {self.lora_r}")
        if self.max_steps is not None and self.max_steps < 1:
            problems.append(f"max_steps must be at least 1, got {self.max_steps}")
        if self.epochs <= 0:
            problems.append(f"epochs must be positive, got {self.epochs}")
        if self.lr <= 0:
            problems.append(f"lr must be positive, got {self.lr}")
        if not 0 <= self.warmup_ratio < 1:
            problems.append(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_length < 16:
            problems.append(f"max_length must be at least 16 tokens, got {self.max_length}")
        for name in ("batch_size", "grad_accum", "eval_steps", "save_steps", "logging_steps"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.eval_fraction < 0.5:
            problems.append(f"eval_fraction must be in [0, 0.5), got {self.eval_fraction}")
        if not 0 <= self.lora_dropout < 1:
            problems.append(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            problems.append(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.report_to not in ("tensorboard", "none"):
            problems.append(f"report_to must be tensorboard or none, got {self.report_to!r}")
        if self.precision not in ("auto", "bf16", "fp16", "fp32"):
            problems.append(f"precision must be auto, bf16, fp16 or fp32, got {self.precision!r}")
        if self.adapter_dtype not in ("bf16", "fp16", "fp32"):
            problems.append(f"adapter_dtype must be bf16, fp16 or fp32, got {self.adapter_dtype!r}")
        if self.total_batch is not None and self.total_batch < self.batch_size:
            problems.append(f"total_batch {self.total_batch} is below batch_size {self.batch_size}")
        if self.merge and self.lora_r is None:
            problems.append("merge needs a LoRA run (full fine-tuning saves the whole model)")
        if self.max_records is not None and self.max_records < 1:
            problems.append(f"max_records must be at least 1, got {self.max_records}")
        if problems:
            raise TrainingError("bad training config: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data, stamped with the lumos-gym version."""
        data = dataclasses.asdict(self)
        data["lora_targets"] = list(self.lora_targets)
        data["lumos_gym_version"] = __version__
        return data

    def save(self, folder: str | Path) -> Path:
        """Write the config to ``folder/lumos_train_config.json`` atomically."""
        path = Path(folder) / CONFIG_FILE
        write_json_atomic(path, self.to_dict())
        return path

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Build a config from saved data; unknown keys (from newer versions) are warned about."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known - {"lumos_gym_version"})
        if unknown:
            warnings.warn(
                f"ignoring unknown training config keys {unknown} (saved by lumos-gym "
                f"{data.get('lumos_gym_version', '?')})",
                stacklevel=2,
            )
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def load(cls, folder: str | Path) -> TrainConfig:
        """Read the config saved in ``folder``.

        Raises:
            TrainingError: the folder holds no readable config.
        """
        path = Path(folder) / CONFIG_FILE
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as e:
            raise TrainingError(f"cannot read the training config {path}: {e}") from e


@dataclass(frozen=True)
class Recipe:
    """A named set of training defaults.

    Attributes:
        name: the recipe's name.
        summary: one line on what it is for.
        settings: :class:`TrainConfig` field values.
    """

    name: str
    summary: str
    settings: Mapping[str, Any] = field(default_factory=dict)


RECIPES: dict[str, Recipe] = {
    # docs/lumos-format.md §3: open-instruct finetune.py as the scripts ran it: full fine-tuning,
    # lr 2e-5, linear schedule, warmup 0.03, no weight decay, 2 epochs, 1024 tokens, total
    # batch 128 (2 GPUs x 2 per device x 32 accumulation: the accumulation here follows the
    # number of processes so the total stays 128), AdamW, bf16.
    "lumos-paper": Recipe(
        "lumos-paper",
        "the paper's full fine-tuning (lr 2e-5, linear, warmup 0.03, 2 epochs, 1024 tokens, "
        "batch 128, bf16)",
        {
            "lora_r": None, "lr": 2e-5, "schedule": "linear", "warmup_ratio": 0.03,
            "weight_decay": 0.0, "epochs": 2.0, "max_length": 1024, "batch_size": 2,
            "total_batch": 128, "precision": "auto", "pack": False,
        },
    ),
    # A LoRA run sized for two CPU cores: r=8 on every linear layer (about 4.9 MB in bf16 for
    # SmolLM2-135M), a higher learning rate as LoRA needs, 8 records a step in length-grouped
    # padded batches, fp32 on a CPU (bf16 matmuls ran at a third of fp32's speed on the CPUs
    # measured). benchmarks/train_throughput.py measured length-grouped batches at 1.5x the
    # tokens/s of packed 1024-token rows on two cores: a packed row attends through a
    # block-diagonal mask, which CPU attention runs on its slow path.
    "cpu-small": Recipe(
        "cpu-small",
        "LoRA r=8 on all linear layers, lr 4e-4, 8 length-grouped records a step, 300 steps",
        {
            "lora_r": 8, "lora_alpha": 16, "lr": 4e-4, "schedule": "linear",
            "warmup_ratio": 0.03, "max_length": 1024, "batch_size": 8, "grad_accum": 1,
            "max_steps": 300, "pack": False, "precision": "auto", "eval_steps": 50,
            "save_steps": 50,
        },
    ),
    # The same LoRA on one GPU: 16 length-grouped records a step, 3 epochs, bf16 where the GPU
    # has it. SmolLM2-135M is far too small to fill a GPU, so more records a step cost little
    # time; the reference agents' GPU budget (reproduce --budget gpu) runs on it.
    "gpu-small": Recipe(
        "gpu-small",
        "LoRA r=8 on all linear layers, lr 4e-4, 16 length-grouped records a step, 3 epochs",
        {
            "lora_r": 8, "lora_alpha": 16, "lr": 4e-4, "schedule": "linear",
            "warmup_ratio": 0.03, "max_length": 1024, "batch_size": 16, "grad_accum": 1,
            "epochs": 3.0, "max_steps": None, "pack": False, "precision": "auto",
            "eval_steps": 100, "save_steps": 100,
        },
    ),
}
"""The recipes ``lumos-gym train --recipe`` knows."""


def config_from_recipe(
    recipe: str | None, *, data: list[str], full: bool = False, **overrides: Any
) -> TrainConfig:
    """Build a config from a recipe's settings with ``overrides`` (``None`` values ignored).

    ``full`` trains every weight (``lora_r=None``) whatever the recipe says. An ``epochs``
    given without ``max_steps`` replaces a recipe's step budget; ``max_steps=0`` clears it.

    Raises:
        TrainingError: an unknown recipe or a bad value.
    """
    settings: dict[str, Any] = {}
    if recipe is not None:
        if recipe not in RECIPES:
            import difflib

            close = difflib.get_close_matches(recipe, list(RECIPES), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TrainingError(
                f"unknown recipe {recipe!r}{hint} Known recipes: {', '.join(sorted(RECIPES))}"
            )
        settings.update(RECIPES[recipe].settings)
    given = {k: v for k, v in overrides.items() if v is not None}
    if "epochs" in given and "max_steps" not in given:
        settings["max_steps"] = None
    if "grad_accum" in given:  # an explicit accumulation replaces a recipe's total batch
        settings["total_batch"] = None
    settings.update(given)
    if settings.get("max_steps") == 0:
        settings["max_steps"] = None
    if full:
        settings["lora_r"] = None
    return TrainConfig(data=data, recipe=recipe, **settings)


__all__ = [
    "ALL_LINEAR",
    "CONFIG_FILE",
    "RECIPES",
    "Recipe",
    "TrainConfig",
    "TrainingError",
    "config_from_recipe",
]
