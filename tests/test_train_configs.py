"""The accelerate configs shipped for multi-GPU training say what they promise.

Each file is read the way `accelerate launch --config_file FILE --num_processes 2` reads it,
and the FSDP or DeepSpeed plugin is then built from the environment the launcher would hand
to each process, so a misspelt key or a value accelerate reads differently fails here, on a
CPU, without DeepSpeed installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")

from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file  # noqa: E402
from accelerate.commands.launch import _validate_launch_command, launch_command_parser  # noqa: E402
from accelerate.utils import (  # noqa: E402
    DeepSpeedPlugin,
    FullyShardedDataParallelPlugin,
    prepare_deepspeed_cmd_env,
    prepare_multi_gpu_env,
)

import lumos_gym.training  # noqa: E402

FOLDER = Path(lumos_gym.training.__file__).parent / "accelerate"
CONFIGS = {"deepspeed_zero3.yaml": "DEEPSPEED", "fsdp.yaml": "FSDP"}


def launch_args(name: str, *extra: str):
    """The arguments `accelerate launch` ends with for this config (and the config read)."""
    argv = ["--config_file", str(FOLDER / name), *extra, "-m", "lumos_gym.cli", "train", "--help"]
    return _validate_launch_command(launch_command_parser().parse_args(argv))


def process_env(name: str) -> dict[str, str]:
    """The environment the launcher gives each training process, for 2 processes."""
    args, defaults, mixed_from_config = launch_args(name, "--num_processes", "2")
    if args.use_deepspeed:  # as launch_command does before calling the DeepSpeed launcher
        fields = list(defaults.deepspeed_config) + ["mixed_precision"] * mixed_from_config
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        return prepare_deepspeed_cmd_env(args)[1]
    return prepare_multi_gpu_env(args)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_loads_as_a_local_cluster_config(name):
    config = load_config_from_file(str(FOLDER / name))  # raises on an unknown top-level key
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type.value == CONFIGS[name]
    assert config.mixed_precision == "bf16"
    assert config.num_machines == 1
    assert config.num_processes == -1  # left to --num_processes


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_nested_keys_are_settings_accelerate_launch_reads(name):
    config = load_config_from_file(str(FOLDER / name))
    # the launcher copies deepspeed_config.x to its argument x, and fsdp_config.x to fsdp_x;
    # a key that matches no argument would be dropped without a word
    known = {action.dest for action in launch_command_parser()._actions}
    nested = {**config.deepspeed_config, **config.fsdp_config}
    assert nested
    assert sorted(set(nested) - known) == []


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_number_of_processes_must_be_given(name):
    with pytest.raises(ValueError, match="--num_processes"):
        launch_args(name)
    args, _, _ = launch_args(name, "--num_processes", "4")
    assert args.num_processes == 4
    assert args.mixed_precision == "bf16"


def test_fsdp_config_fully_shards_per_layer_with_sharded_checkpoints():
    env = process_env("fsdp.yaml")
    assert env["ACCELERATE_USE_FSDP"] == "true"
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    with mock.patch.dict(os.environ, env):
        plugin = FullyShardedDataParallelPlugin()
    from torch.distributed.fsdp import StateDictType
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    assert plugin.fsdp_version == 2
    assert plugin.reshard_after_forward is True  # full shard
    assert plugin.auto_wrap_policy is transformer_auto_wrap_policy
    assert plugin.transformer_cls_names_to_wrap is None  # the model's _no_split_modules
    assert plugin.state_dict_type == StateDictType.SHARDED_STATE_DICT
    assert plugin.cpu_ram_efficient_loading is True
    assert plugin.activation_checkpointing is False
    assert type(plugin.cpu_offload).__name__ == "OffloadPolicy"  # the no-offload policy


def test_deepspeed_config_is_zero3_bf16_without_offload():
    env = process_env("deepspeed_zero3.yaml")
    assert env["ACCELERATE_USE_DEEPSPEED"] == "true"
    assert "ACCELERATE_DEEPSPEED_CONFIG_FILE" not in env  # the yaml is the whole config
    with mock.patch.dict(os.environ, env):
        plugin = DeepSpeedPlugin()
        plugin.set_mixed_precision(env["ACCELERATE_MIXED_PRECISION"])
    ds = plugin.deepspeed_config
    assert plugin.zero_stage == 3
    assert plugin.zero3_init_flag is False
    zero = ds["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_optimizer"]["device"] == zero["offload_param"]["device"] == "none"
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    assert ds["bf16"] == {"enabled": True}
    assert ds["fp16"] == {"enabled": False}
    # left to transformers, which fills each from TrainingArguments
    # (integrations/deepspeed.py, HfTrainerDeepSpeedConfig.trainer_config_process)
    auto = {key for key, value in ds.items() if value == "auto"}
    assert auto == {
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
    }


def test_the_configs_are_documented_beside_them():
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    for name in CONFIGS:
        assert name in readme


def test_the_cli_runs_as_a_module():
    # accelerate launch ... -m lumos_gym.cli train needs `python -m lumos_gym.cli` to work
    done = subprocess.run(
        [sys.executable, "-m", "lumos_gym.cli", "train", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--recipe" in done.stdout
