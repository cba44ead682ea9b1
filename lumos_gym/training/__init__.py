"""Supervised fine-tuning of Lumos modules and baseline policies (``lumos-gym train``).

:mod:`~lumos_gym.training.config` holds the run config and recipes,
:mod:`~lumos_gym.training.data` reads and encodes records (assistant-only loss),
:mod:`~lumos_gym.training.collate` packs or pads them, and
:mod:`~lumos_gym.training.trainer` runs transformers' Trainer with peft. torch, transformers
and peft are imported only when a run starts.
"""

from lumos_gym.training.config import RECIPES, TrainConfig, TrainingError, config_from_recipe
from lumos_gym.training.trainer import train

__all__ = ["RECIPES", "TrainConfig", "TrainingError", "config_from_recipe", "train"]
