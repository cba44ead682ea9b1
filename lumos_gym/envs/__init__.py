"""lumos-gym environments, registered with Gymnasium under ``lumos/<Name>-v<k>``.

Importing this package registers the built-in ids (lazily: no env module is imported until
``gymnasium.make``). ``import lumos_gym`` does this too.
"""

from lumos_gym.envs.registration import ENVS, EnvInfo, env_ids, load_plugins, register_env
from lumos_gym.envs.tasks import TASK_TYPES, Task

_MATH = "lumos_gym.envs.math"
register_env(
    "lumos/GSM8K-v0",
    f"{_MATH}:MathEnv",
    kwargs={"dataset": "gsm8k"},
    sources=("bundled", "official", "hub", "path"),
    size="1,319 test / 7,473 train official; 24 bundled",
    description="Grade-school math word problems (Cobbe et al., 2021), official jsonl",
    max_episode_steps=32,
)
register_env(
    "lumos/SVAMP-v0",
    f"{_MATH}:MathEnv",
    kwargs={"dataset": "svamp"},
    sources=("bundled", "official", "path"),
    size="1,000 official; 24 bundled",
    description="Simple variations on arithmetic math word problems (Patel et al., 2021)",
    max_episode_steps=16,
)
register_env(
    "lumos/ASDiv-v0",
    f"{_MATH}:MathEnv",
    kwargs={"dataset": "asdiv"},
    sources=("bundled", "official", "path"),
    size="2,305 official; 24 bundled",
    description="A diverse corpus of math word problems (Miao et al., 2020), official xml",
    max_episode_steps=16,
)
register_env(
    "lumos/MathWord-v0",
    f"{_MATH}:MathWordEnv",
    sources=("generated",),
    size="any: num_tasks per level, levels 1-5",
    description="Procedural multi-step word problems with GSM8K-style rationales, seeded",
    max_episode_steps=32,
)

__all__ = ["ENVS", "TASK_TYPES", "EnvInfo", "Task", "env_ids", "load_plugins", "register_env"]
