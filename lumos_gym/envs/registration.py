"""The env registry: every lumos-gym env is a Gymnasium env id ``lumos/<Name>-v<k>``.

``register_env`` registers the id with Gymnasium (so ``gymnasium.make`` applies its
checkers and the ``TimeLimit``) and records what ``lumos-gym envs`` shows about it. Another
installed package adds envs through the entry-point group ``lumos_gym.envs``: each entry point
names a module (imported) or a callable (called with no argument) that calls
:func:`register_env`. :func:`load_plugins` reads the group; the CLI calls it.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

from lumos_gym.errors import LumosGymError, RegistryError
from lumos_gym.registry import Registry, import_object

PLUGIN_GROUP = "lumos_gym.envs"


@dataclass(frozen=True)
class EnvInfo:
    """What the env table says about a registered env.

    Attributes:
        id: the Gymnasium id, ``lumos/<Name>-v<k>``.
        entry_point: ``"module:Class"`` of the env.
        sources: where its tasks can come from (``bundled``, ``official``, ``hub``, ``generated``).
        size: the number of tasks, as text (e.g. ``"1,319 test; 25 bundled"``).
        description: one line.
        max_episode_steps: the step limit applied by ``gymnasium.make``.
        kwargs: default constructor arguments.
    """

    id: str
    entry_point: str
    sources: tuple[str, ...]
    size: str
    description: str
    max_episode_steps: int
    kwargs: dict[str, Any]

    def env_class(self) -> type:
        """Import and return the env class."""
        return import_object(self.entry_point)  # type: ignore[return-value]


ENVS: Registry[EnvInfo] = Registry("environment")


def register_env(
    id: str,
    entry_point: str,
    *,
    sources: tuple[str, ...],
    size: str,
    description: str,
    max_episode_steps: int = 32,
    kwargs: dict[str, Any] | None = None,
) -> None:
    """Register an env with Gymnasium and in the lumos-gym env table.

    Args:
        id: ``lumos/<Name>-v<k>``; bump ``k`` whenever the content an id names changes.
        entry_point: ``"module:Class"``, a subclass of :class:`~lumos_gym.envs.base.LumosEnv`.
        sources: task sources the env supports.
        size: task counts, as text.
        description: one line for the env table.
        max_episode_steps: ``step`` calls before truncation.
        kwargs: default keyword arguments of the env class.
    """
    if not id.startswith("lumos/"):
        raise ValueError(f"lumos-gym env ids live in the 'lumos/' namespace, got {id!r}")
    gym.register(
        id=id, entry_point=entry_point, max_episode_steps=max_episode_steps, kwargs=kwargs or {}
    )
    ENVS.register(
        id,
        EnvInfo(id, entry_point, sources, size, description, max_episode_steps, dict(kwargs or {})),
    )


@functools.cache
def load_plugins() -> tuple[str, ...]:
    """Import the envs of installed plugins (entry-point group ``lumos_gym.envs``), once.

    Returns:
        The names of the entry points loaded. A plugin that fails to load is skipped with a
        warning naming it.
    """
    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            if ":" in ep.value:
                ep.load()()
            else:
                importlib.import_module(ep.value)
        except Exception as e:  # a broken plugin must not break lumos-gym
            warnings.warn(f"lumos-gym plugin {ep.name!r} ({ep.value}) failed: {e}", stacklevel=2)
            continue
        loaded.append(ep.name)
    return tuple(loaded)


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)``, with an env that cannot be made as a clear error.

    Raises:
        LumosGymError: the env's constructor failed (a misspelt ``-k`` name, a bad value...).
    """
    try:
        return gym.make(env_id, **kwargs)
    except LumosGymError:
        raise
    except Exception as e:
        shown = {k: v for k, v in kwargs.items() if k != "disable_env_checker"}
        reason = str(e).split(" was raised from the environment creator")[0]
        raise LumosGymError(f"cannot make {env_id} with {shown}: {reason}") from None


def env_ids() -> list[str]:
    """Return every registered lumos-gym env id (plugins included), sorted."""
    load_plugins()
    return ENVS.names()


def resolve_env_id(spec: str) -> str:
    """Return the env id of ``spec``, importing its module first for ``"module:lumos/Name-v0"``.

    This is Gymnasium's ``module:id`` convention: a module that registers envs on import can
    be named on the command line without being installed as a plugin. The ``lumos/``
    namespace may be left out; an unknown id raises a ``RegistryError`` with suggestions.
    """
    module, sep, env_id = spec.rpartition(":")
    if sep and module:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            raise RegistryError(
                f"cannot import {e.name!r} for {spec!r}: the part before ':' names a module "
                "that registers the env on import (on PYTHONPATH or installed)"
            ) from None
        return env_id
    load_plugins()
    if spec not in ENVS and f"lumos/{spec}" in ENVS:
        return f"lumos/{spec}"  # the namespace may be left out: GSM8K-v0
    ENVS.get(spec)  # an unknown id raises, with the closest known ids
    return spec
