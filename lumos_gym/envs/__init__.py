"""lumos-gym environments, registered with Gymnasium under ``lumos/<Name>-v<k>``.

Each family of envs is one :class:`~lumos_gym.envs.families.Family` record in its folder's
``__init__.py`` (``math/``, ``qa/``, ``code/``, ``web/``, ``games/``, ``multimodal/``), and
registering it here is all a family needs: the layers above read the records.

Importing this package registers the built-in families (lazily: no env module is imported until
``gymnasium.make``). ``import lumos_gym`` does this too.
"""

import gymnasium as gym

from lumos_gym.envs.code import FAMILY as CODE
from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit
from lumos_gym.envs.games import FAMILY as GAMES
from lumos_gym.envs.math import FAMILY as MATH
from lumos_gym.envs.multimodal import FAMILY as MULTIMODAL
from lumos_gym.envs.qa import FAMILY as QA
from lumos_gym.envs.registration import (
    ENVS,
    FAMILIES,
    env_ids,
    families,
    load_plugins,
    register_env,
    register_family,
    unregister_family,
)
from lumos_gym.envs.tasks import TASK_TYPES, Task
from lumos_gym.envs.web import FAMILY as WEB

# In this order: `data build` makes their splits, and the training mixture lists their domains,
# in registration order.
for _family in (MATH, QA, CODE, WEB, GAMES, MULTIMODAL):
    register_family(_family)

# An env served by `lumos-gym serve-env` elsewhere; not in the env table (it has no tasks of its
# own: `gymnasium.make("lumos/remote", url=...)` plays whichever env the server serves).
gym.register(id="lumos/remote", entry_point="lumos_gym.envs.remote:RemoteEnv")

__all__ = [
    "ENVS",
    "FAMILIES",
    "TASK_TYPES",
    "EnvInfo",
    "Family",
    "OfflineSplit",
    "Task",
    "env_ids",
    "families",
    "load_plugins",
    "register_env",
    "register_family",
    "unregister_family",
]
