"""Where a training run stands among processes and sessions: launch checks, resumption, sessions.

What ``lumos-gym train`` decides before and around the Trainer, apart from building it
(:mod:`lumos_gym.training.trainer`): how many processes train and how many rows one optimizer
step takes (``--total-batch``), whether an output folder may be resumed and from which
checkpoint (the settings, data, process count and sharding it was made with), the record of
each ``train`` call on a run (``lumos_train_sessions.json``), and the FSDP that accelerate keeps
for GPUs given to CPU processes. Imports no torch at module level.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lumos_gym.gitinfo import git_provenance
from lumos_gym.jsonl import write_json_atomic
from lumos_gym.training.config import CONFIG_FILE, TrainConfig, TrainingError
from lumos_gym.training.data import data_fingerprint

logger = logging.getLogger(__name__)

#: Fields that must match for ``--resume`` to continue a run (others, such as the step budget
#: or logging intervals, may change).
_RESUME_KEYS = ("base_model", "lora_r", "lora_alpha", "lora_dropout", "lora_targets",
                "init_adapter", "max_length", "eos", "pack", "seed", "max_records",
                "eval_fraction", "batch_size", "grad_accum")

DATA_FILE = "lumos_train_data.json"
"""The SHA-256 of each training file, saved when a run starts and checked by ``--resume``."""

def _world() -> int:
    """The number of training processes (``accelerate launch`` sets ``WORLD_SIZE``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rows_per_step(config: TrainConfig, world_size: int | None = None) -> int:
    """Rows one optimizer step takes over all processes."""
    world = world_size or _world()
    return config.batch_size * grad_accum_for(config, world) * world


def grad_accum_for(config: TrainConfig, world_size: int | None = None) -> int:
    """Forward passes per step: ``grad_accum``, or what reaches ``total_batch`` on all devices.

    Raises:
        TrainingError: ``total_batch`` is not a multiple of the rows one pass takes.
    """
    if config.total_batch is None:
        return config.grad_accum
    world = world_size or _world()
    per_pass = config.batch_size * world
    if config.total_batch % per_pass:
        raise TrainingError(
            f"total batch {config.total_batch} is not a multiple of batch size "
            f"{config.batch_size} x {world} processes; pass --grad-accum or another --batch-size"
        )
    return config.total_batch // per_pass


#: The file of a run's sessions: one entry a ``train`` call (the first, then each resumption).
SESSIONS_FILE = "lumos_train_sessions.json"


def _checkpoint_step(checkpoint: str | None) -> int:
    """The optimizer step of a ``checkpoint-N`` folder (0 for none)."""
    if not checkpoint:
        return 0
    try:
        return int(Path(checkpoint).name.rsplit("-", 1)[-1])
    except ValueError:
        return 0


def _last_session(out: Path) -> dict[str, Any]:
    """The latest session :func:`start_session` recorded in ``out`` (empty if none)."""
    try:
        loaded = json.loads((out / SESSIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if isinstance(loaded, list) and loaded and isinstance(loaded[-1], dict):
        return loaded[-1]
    return {}


def start_session(out: Path, resume_from: str | None, config: TrainConfig | None = None) -> None:
    """Record that a ``train`` call starts in ``out``: when, at which step, on which code.

    A fresh run starts the list; a resumed one adds to it, so a card can say that (and where)
    a run was killed and resumed. With ``config``, the session also records its process count
    and the rows of one optimizer step, which a later ``--resume`` must keep.
    """
    sessions: list[dict[str, Any]] = []
    if resume_from is not None or (out / SESSIONS_FILE).is_file():
        try:
            loaded = json.loads((out / SESSIONS_FILE).read_text(encoding="utf-8"))
            sessions = [s for s in loaded if isinstance(s, dict)] if isinstance(
                loaded, list) else []
        except (OSError, ValueError):
            sessions = []
    sessions.append({
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from_step": _checkpoint_step(resume_from),
        "git": git_provenance(),
        **({"processes": _world(), "rows_per_step": rows_per_step(config)} if config else {}),
    })
    write_json_atomic(out / SESSIONS_FILE, sessions)


def finished_sessions(out: Path, *, step: int, seconds: float) -> list[dict[str, Any]]:
    """The run's sessions, the last one finished at ``step``.

    Each earlier session's steps run to where the next one resumed (what its checkpoints kept).
    """
    try:
        loaded = json.loads((out / SESSIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        loaded = []
    sessions = [dict(s) for s in loaded if isinstance(s, dict)] if isinstance(loaded, list) else []
    if not sessions:
        sessions = [{"started": None, "from_step": 0, "git": git_provenance()}]
    for session, after in zip(sessions, sessions[1:], strict=False):
        session["to_step"] = after.get("from_step", 0)
        session["finished"] = False
    sessions[-1].update({"to_step": step, "finished": True, "seconds": round(seconds, 1)})
    return sessions


def last_complete_checkpoint(out: Path) -> str | None:
    """The newest ``checkpoint-N`` of ``out`` that was written to its end, or ``None``.

    The Trainer writes a checkpoint's ``trainer_state.json`` last; a run killed while writing
    one leaves a folder without it, which is passed over (with a warning) rather than resumed
    from.
    """
    steps = sorted(
        (int(p.name.rsplit("-", 1)[1]), p) for p in out.glob("checkpoint-*")
        if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()
    )
    unfinished = []
    for _, folder in reversed(steps):
        if (folder / "trainer_state.json").is_file():
            if unfinished:
                logger.warning("passing over %s, which a killed run left half written; "
                               "resuming from %s", ", ".join(unfinished), folder.name)
            return str(folder)
        unfinished.append(folder.name)
    return None


def check_output_folder(
    config: TrainConfig, fingerprint: dict[str, str] | None = None
) -> str | None:
    """Return the checkpoint to resume from, or ``None`` for a fresh run.

    Raises:
        TrainingError: the folder holds another run (without ``--resume``), or ``--resume``
            names a run whose model, data shape or seed differ.
    """
    out = Path(config.out)
    if not out.is_dir():
        return None
    last = last_complete_checkpoint(out)
    saved = (out / CONFIG_FILE).is_file()
    if not config.resume:
        if last or saved:
            raise TrainingError(
                f"{out} already holds a training run; pass --resume to continue it, or choose "
                "another --out"
            )
        return None
    if saved:
        before = TrainConfig.load(out)
        changed = [
            f"{k}: {getattr(before, k)!r} -> {getattr(config, k)!r}"
            for k in _RESUME_KEYS
            if getattr(before, k) != getattr(config, k)
        ]
        if before.data != config.data:  # the order feeds the seeded shuffle
            changed.append(f"data: {before.data} -> {config.data}")
        saved_hashes = out / DATA_FILE
        if not changed and saved_hashes.is_file():
            hashes = json.loads(saved_hashes.read_text(encoding="utf-8"))
            if hashes != (fingerprint or data_fingerprint(config.data)):
                changed.append("the training files' contents changed since the run started")
        rows = rows_per_step(config)
        session = _last_session(out)
        before_rows = session.get("rows_per_step")
        before_processes = session.get("processes")
        if (not changed and not config.pack and isinstance(before_processes, int)
                and before_processes != _world()):
            # transformers orders length-grouped batches in groups of (rows a process) x
            # (accumulation), which the process count changes: the checkpoint's place in the
            # data would fall elsewhere in another order
            raise TrainingError(
                f"--resume: the run in {out} ran on {before_processes} process(es) with "
                f"length-grouped batches (--no-pack), whose order depends on the process count; "
                f"resume it with {before_processes}, or use --pack (a seeded shuffle) for runs "
                "that may resume with another count"
            )
        if not changed and isinstance(before_rows, int) and before_rows != rows:
            raise TrainingError(
                f"--resume: the run in {out} took {before_rows} rows an optimizer step, and "
                f"{rows} now ({config.batch_size} a process x {grad_accum_for(config)} "
                f"accumulated x {_world()} process(es)), so the checkpoint's place in the data "
                "would be lost; resume with the process count it ran with, or start runs with "
                "--total-batch N, whose accumulation follows the process count"
            )
        if changed:
            raise TrainingError(
                f"--resume: the run in {out} was made with other settings ("
                + "; ".join(changed)
                + "); pass the same ones, or start a new run in another --out"
            )
        if config.schedule != "constant" and (config.max_steps or 0) > (before.max_steps or 0):
            # the schedule comes back from the checkpoint, computed for the old budget
            logger.warning(
                "--resume with --max-steps %s > %s: the %s learning-rate schedule restored from "
                "the checkpoint was made for %s steps (a decay reaches 0 there), so the extra "
                "steps learn little or nothing; to train longer, start a new run with "
                "--init-adapter %s", config.max_steps, before.max_steps, config.schedule,
                before.max_steps, out,
            )
    _check_sharding(last)
    return last


def _check_sharding(checkpoint: str | None) -> None:
    """Refuse to resume an FSDP checkpoint (one shard a process) outside an FSDP launch."""
    sharded = checkpoint is not None and any(Path(checkpoint).glob("pytorch_model_fsdp_*"))
    if sharded and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true":
        raise TrainingError(
            f"--resume: {checkpoint} was written by FSDP, one shard of the model and optimizer "
            "a process, which only an FSDP launch reads back; resume it with `accelerate "
            "launch --config_file fsdp.yaml --num_processes N` (N >= 2)"
        )


@contextlib.contextmanager
def fsdp_on_cpus() -> Iterator[None]:
    """While the Trainer makes its Accelerator: FSDP for CPU processes whose launch asked for it.

    accelerate (1.15) switches its state to FSDP only for GPU-like distributed types; on CPU
    processes (gloo) it keeps plain data parallelism and says nothing. torch's FSDP2 shards and
    trains on CPUs as on GPUs (tests/test_train_multiprocess.py: the same losses and adapter as
    one process), so within this block the accelerator state made for CPU processes is switched
    to FSDP, with the plugin accelerate read from the launch (``fsdp.yaml``), as accelerate
    itself does for GPUs. Outside the block, and without ``ACCELERATE_USE_FSDP``, nothing
    changes.
    """
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true":
        yield
        return
    from accelerate.state import AcceleratorState, PartialState  # heavy: torch
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    made = AcceleratorState.__init__

    def switched(state: Any, *args: Any, fsdp_plugin: Any = None, **kwargs: Any) -> None:
        made(state, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if state.distributed_type == DistributedType.MULTI_CPU:
            plugin = fsdp_plugin or FullyShardedDataParallelPlugin()
            if state.mixed_precision != "no":
                plugin.set_mixed_precision(state.mixed_precision)
            state.distributed_type = DistributedType.FSDP
            state.fsdp_plugin = plugin
            # every later AcceleratorState() copies the process state over its own (as
            # accelerate records FSDP there for GPUs)
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP

    AcceleratorState.__init__ = switched
    try:
        yield
    finally:
        AcceleratorState.__init__ = made


def check_launch(trainer: Any) -> None:
    """Refuse a launch whose sharding accelerate asked for but does not run.

    accelerate (1.15) turns FSDP and DeepSpeed on only for GPU-like devices and otherwise falls
    back to plain data parallelism, saying nothing. :func:`fsdp_on_cpus` gives FSDP to CPU
    processes; DeepSpeed on CPUs (no CPU accelerator installed here), or FSDP in one process,
    would train unsharded though the config says otherwise, so it is refused.

    Raises:
        TrainingError: the launch asked for FSDP or DeepSpeed and the trainer runs without it.
    """
    asked = {
        "FSDP": ("ACCELERATE_USE_FSDP", "is_fsdp_enabled"),
        "DeepSpeed": ("ACCELERATE_USE_DEEPSPEED", "is_deepspeed_enabled"),
    }
    for name, (variable, enabled) in asked.items():
        if os.environ.get(variable, "false").lower() == "true" and not getattr(
                trainer, enabled, False):
            raise TrainingError(
                f"accelerate was launched with {name}, but the trainer runs without it "
                f"({trainer.args.device}, {_world()} process(es)): accelerate shards with "
                f"{name} on GPUs only and falls back to plain data parallelism elsewhere; on "
                "CPUs launch FSDP with `accelerate launch --config_file fsdp.yaml "
                "--num_processes N` (N >= 2), or DDP with `accelerate launch --multi_gpu "
                "--num_processes N` (gloo)"
            )


def steps_per_epoch(rows: int, config: TrainConfig, world_size: int | None = None) -> int:
    """Optimizer steps one pass over ``rows`` takes."""
    return max(1, math.ceil(rows / rows_per_step(config, world_size)))


__all__ = [
    "DATA_FILE",
    "SESSIONS_FILE",
    "check_launch",
    "check_output_folder",
    "finished_sessions",
    "fsdp_on_cpus",
    "grad_accum_for",
    "last_complete_checkpoint",
    "rows_per_step",
    "start_session",
    "steps_per_epoch",
]
