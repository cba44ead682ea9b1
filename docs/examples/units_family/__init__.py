"""A complete lumos-gym env family in one folder: unit conversions (see docs/adding-an-env.md).

The whole family is the :class:`~lumos_gym.envs.Family` record below plus one
``register_family`` call. Everything else lumos-gym does with a family reads the record: ``convert``
finds the converter, ``verify_annotations`` the replay env, ``export`` the tool list and the
domain, ``data build`` the splits, ``evaluate`` and ``leaderboard`` the metrics, the Lumos agents
the round limit, ``reproduce`` the mixture share. The record names the family's code by
``"module:attr"`` strings, so registering it imports none of it: ``env.py`` (tasks, tool, env)
and ``rules.py`` (converter, replay env) are imported when first used.
"""

from lumos_gym.envs import EnvInfo, Family, OfflineSplit, register_family

FAMILY = Family(
    name="units",
    task_type="units",
    description="Unit conversions: look the factor up with UnitFactor, then Calculator",
    envs=(
        EnvInfo(
            id="lumos/Units-v0",
            entry_point="units_family.env:UnitsEnv",
            sources=("generated",),
            size="num_tasks per split (default 4)",
            description="Unit conversions: UnitFactor then Calculator (the docs' family example)",
            max_episode_steps=6,
        ),
    ),
    converters={"units": "units_family.rules:units_annotation"},
    verify_env="units_family.rules:replay_env",
    tools={"units": "units_family.env:UNITS_TOOLS"},
    splits=(
        OfflineSplit("units-train", "lumos/Units-v0", {"split": "train", "num_tasks": 40},
                     "train"),
        OfflineSplit("units-test", "lumos/Units-v0", {"split": "test", "num_tasks": 8}, "test"),
    ),
    metrics={"accuracy": (("accuracy", None), ("exact_match", "exact_match"))},
    lumos_rounds=3,
    mix={"units": 20},
)

# The one registration: env ids, converters, replay env, tool list, splits, metrics, rounds and
# mixture share at once. Registering the same record again does nothing. An installed package
# would rather declare the entry point `units = "units_family:FAMILY"` (group lumos_gym.envs).
register_family(FAMILY)
