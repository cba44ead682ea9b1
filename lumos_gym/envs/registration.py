"""The env registry: every lumos-gym env is a Gymnasium env id ``lumos/<Name>-v<k>``.

``register_env`` registers the id with Gymnasium (so ``gymnasium.make`` applies its
checkers and the ``TimeLimit``) and records what ``lumos-gym envs`` shows about it.

``register_family`` registers a whole :class:`~lumos_gym.envs.families.Family`: its envs, and
its entries in every table that :func:`fill_from_families` fills (converters, replay envs,
tool lists, offline splits, metrics, round limits, mixture domains and shares, domain
actions). Those tables live in the layers that use them and subscribe here, so a family
registered after they were imported still reaches them, and :func:`unregister_family` takes
it out of all of them.

Another installed package adds envs or families through the entry-point group
``lumos_gym.envs``: each entry point names a module (imported), a callable (called with no
argument) that calls :func:`register_env` or :func:`register_family`, or a ``Family`` record
(registered). :func:`load_plugins` reads the group, once; the CLI calls it, and so does the
first table filled from the families.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import math
import warnings
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

from lumos_gym import prompts
from lumos_gym.envs.families import EnvInfo, Family
from lumos_gym.envs.tasks import ADDED_TASK_TYPES, TASK_TYPES
from lumos_gym.errors import LumosGymError, RegistryError
from lumos_gym.registry import Registry

PLUGIN_GROUP = "lumos_gym.envs"


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
    short = id.removeprefix("lumos/")
    if short not in gym.registry:  # gym.make("GSM8K-v0") names the full id
        gym.register(id=short, entry_point=functools.partial(_full_id_only, id))
    ENVS.register(
        id,
        EnvInfo(id, entry_point, sources, size, description, max_episode_steps, dict(kwargs or {})),
    )


def unregister_env(id: str) -> None:
    """Remove an env id from Gymnasium and from the lumos-gym env table."""
    ENVS.unregister(id)
    gym.registry.pop(id, None)
    short = gym.registry.get(id.removeprefix("lumos/"))
    creator = short.entry_point if short is not None else None
    if isinstance(creator, functools.partial) and creator.args == (id,):
        gym.registry.pop(id.removeprefix("lumos/"))  # the short id register_env added


def _full_id_only(id: str, **kwargs: Any) -> gym.Env:
    """The env of a short id (``GSM8K-v0``): an error naming the full one (``lumos/GSM8K-v0``).

    Raises:
        gymnasium.error.NameNotFound: always.
    """
    raise gym.error.NameNotFound(
        f"{id.removeprefix('lumos/')} is a lumos-gym env: give its full id, {id!r} "
        f"(gym.make({id!r}); lumos-gym's commands take either)")


# ------------------------------------------------------------------------------- families
#: A table that the families fill: a :class:`~lumos_gym.registry.Registry` or a dict (each
#: family puts ``(key, value)`` pairs in it) or a list (each family appends items, in family
#: order).
Table = Registry[Any] | MutableMapping[Any, Any] | list[Any]

#: The registered families, by name.
FAMILIES: Registry[Family] = Registry("env family")
_ORDER: list[str] = []  # the families' names in registration order


@dataclass
class _Filled:
    """A table filled from the family records, and what each family put in it."""

    table: Table
    pick: Callable[[Family], Iterable[Any]]
    added: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, family: Family) -> None:
        added = self.added.setdefault(family.name, [])
        for entry in self.pick(family):
            if isinstance(self.table, list):
                self.table.append(entry)
                added.append(entry)
                continue
            key, value = entry
            if isinstance(self.table, Registry):
                self.table.register(key, value)
            elif key in self.table:
                raise RegistryError(
                    f"family {family.name!r}: {key!r} is already in a table of another family"
                )
            else:
                self.table[key] = value
            added.append(key)

    def remove(self, name: str) -> None:
        for entry in self.added.pop(name, []):
            if isinstance(self.table, list):
                index = next(i for i, item in enumerate(self.table) if item is entry)
                del self.table[index]
            elif isinstance(self.table, Registry):
                self.table.unregister(entry)
            else:
                del self.table[entry]


_FILLED: list[_Filled] = []


def _fill(table: Table, pick: Callable[[Family], Iterable[Any]]) -> None:
    filled = _Filled(table, pick)
    _FILLED.append(filled)
    for family in families():
        filled.add(family)


def fill_from_families(table: Table, pick: Callable[[Family], Iterable[Any]]) -> None:
    """Fill ``table`` from every family record: those registered now, and each one later.

    This is how a layer above :mod:`lumos_gym.envs` keeps a table of its own (a registry of
    converters, a dict of metrics) while the families stay the one place that lists entries.
    The first call also loads the installed plugins (:func:`load_plugins`), so that a family
    declared by an entry point is in every table, whichever command reads it.

    Args:
        table: a registry or a dict, which ``pick`` fills with ``(key, value)`` pairs (a key
            already there raises ``RegistryError``), or a list, which it extends with items.
        pick: what one family puts in the table, e.g.
            ``lambda family: family.converters.items()``.
    """
    _fill(table, pick)
    load_plugins()


def families() -> tuple[Family, ...]:
    """Return the registered families, in registration order."""
    return tuple(FAMILIES.get(name) for name in _ORDER)


def _check_family(family: Family) -> None:
    """Raise ``RegistryError`` for a record that contradicts itself or another family."""
    where = f"env family {family.name!r}"
    for other in families():
        if other.task_type == family.task_type:
            raise RegistryError(f"{where}: family {other.name!r} already has task type "
                                f"{family.task_type!r} (one family per task type)")
    ids = [info.id for info in family.envs]
    for env_id in ids:
        if env_id in ENVS:
            raise RegistryError(f"{where}: environment {env_id!r} is already registered")
    for split in family.splits:
        if split.env_id not in ids:
            raise RegistryError(f"{where}: split {split.name!r} names {split.env_id!r}, which "
                                "is not one of the family's envs")
        if split.role not in ("train", "test"):
            raise RegistryError(f"{where}: split {split.name!r} has role {split.role!r}, not "
                                "'train' or 'test'")
    domains = {*family.domains.values(), family.domains.get(family.task_type, family.task_type)}
    unknown = sorted(set(family.mix) - domains)
    if unknown:
        raise RegistryError(f"{where}: mixture shares for {', '.join(unknown)}, which are not "
                            f"domains of the family ({', '.join(sorted(domains))})")


def register_family(family: Family) -> None:
    """Register a family: its envs, and its entries in every table filled from the families.

    Registering the same record again does nothing (a module may register its family on
    import and be named by an entry point too).

    Raises:
        RegistryError: another family has the name, the task type or an env id; or an entry
            collides with another family's (then nothing of the family stays registered).
    """
    if family.name in FAMILIES:
        if FAMILIES.get(family.name) == family:
            return
        raise RegistryError(f"env family {family.name!r} is already registered")
    _check_family(family)
    FAMILIES.register(family.name, family)
    _ORDER.append(family.name)
    try:
        for info in family.envs:
            register_env(
                info.id, info.entry_point, sources=info.sources, size=info.size,
                description=info.description, max_episode_steps=info.max_episode_steps,
                kwargs=info.kwargs,
            )
        for filled in _FILLED:
            filled.add(family)
    except Exception:
        unregister_family(family.name)
        raise


def unregister_family(name: str) -> None:
    """Take a family out of Gymnasium, the env table and every table it filled.

    Raises:
        RegistryError: no family has the name.
    """
    family = FAMILIES.get(name)
    for filled in _FILLED:
        filled.remove(name)
    for info in family.envs:
        if info.id in ENVS:
            unregister_env(info.id)
    FAMILIES.unregister(name)
    _ORDER.remove(name)


# a family's own task type becomes one a Task accepts; its domain actions pick the Lumos
# grounding instruction of an env whose tools are exactly those actions
# (these two fill before any family is registered, and load no plugin)
_fill(ADDED_TASK_TYPES, lambda family: [t for t in (family.task_type,) if t not in TASK_TYPES])
_fill(prompts.DOMAIN_ACTIONS, lambda family: family.domain_actions.items())


@functools.cache
def load_plugins() -> tuple[str, ...]:
    """Import the envs and families of installed plugins (group ``lumos_gym.envs``), once.

    Returns:
        The names of the entry points loaded. A plugin that fails to load is skipped with a
        warning naming it.
    """
    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            if ":" in ep.value:
                target = ep.load()
                if isinstance(target, Family):
                    register_family(target)
                else:
                    target()
            else:
                importlib.import_module(ep.value)
        except Exception as e:  # a broken plugin must not break lumos-gym
            warnings.warn(f"lumos-gym plugin {ep.name!r} ({ep.value}) failed: {e}", stacklevel=2)
            continue
        loaded.append(ep.name)
    return tuple(loaded)


#: The most tasks, games or items a count option (``num_tasks``, ``limit``...) may ask for: a
#: larger one would generate for hours before anything is printed.
MAX_COUNT = 10**6

#: ``gym.make``'s own keyword arguments, taken with every env's.
MAKE_OPTIONS = ("max_episode_steps", "disable_env_checker")


def env_options(env_id: str) -> dict[str, inspect.Parameter] | None:
    """Return the keyword arguments that ``env_id``'s class takes, by name.

    The constructors of the class and its bases are read until one that takes no
    ``**options`` (a base that a subclass passes the rest to).

    Returns:
        The parameters, or ``None`` when they cannot be known (an unknown id, an entry point
        that cannot be imported or is not a class, a constructor that takes any keyword):
        ``gym.make`` then says what is wrong.
    """
    try:
        cls = gym.spec(env_id).entry_point
        if isinstance(cls, str):
            module, _, name = cls.partition(":")
            cls = getattr(importlib.import_module(module), name, None)
    except Exception:  # noqa: BLE001  # gym.make, next, reports it with its own message
        return None
    if not isinstance(cls, type):
        return None
    options: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        parameters = list(inspect.signature(klass.__init__).parameters.values())[1:]
        for parameter in parameters:
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                options.setdefault(parameter.name, parameter)
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            return options
    return None


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Refuse constructor arguments that ``env_id`` does not take, or values of the wrong kind.

    An unknown name is named with the env's options and the closest one; an option that takes
    an integer (a count, a seed) or a number refuses text and numbers that are not finite; a
    count (``num_*``, ``limit``) is at most :data:`MAX_COUNT`; ``max_episode_steps`` is at
    least 1. All this before any task is generated, which a huge count would take hours at.

    Raises:
        LumosGymError: an argument the env cannot take, as ``cannot make ENV with {...}:
            why``.
    """
    try:
        _check_kwargs(env_id, kwargs)
    except LumosGymError as e:
        shown = {k: v for k, v in kwargs.items() if k != "disable_env_checker"}
        raise LumosGymError(f"cannot make {env_id} with {shown}: {e}") from None


def _check_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """:func:`check_env_kwargs`, its errors saying what is wrong alone."""
    options = env_options(env_id)
    for key, value in kwargs.items():
        if key == "disable_env_checker":
            continue
        if key == "max_episode_steps":
            _check_int(key, value, 1, None)
            continue
        if options is not None and key not in options:
            names = sorted({*options, *MAKE_OPTIONS})
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise LumosGymError(f"unexpected keyword argument {key!r}{hint}; its options: "
                                f"{', '.join(names)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise LumosGymError(f"{key}={value}: expected a finite number")
        kind = _option_kind(options[key]) if options is not None else None
        if kind is int or key.startswith("num_") or key == "limit":
            if value is None and _optional(options, key):
                continue
            low = 0 if key.startswith("num_") or key == "limit" else None
            high = MAX_COUNT if low is not None else None
            _check_int(key, value, low, high)
        elif kind is float and not (value is None and _optional(options, key)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise LumosGymError(f"{key} takes a number, got {value!r}")


def _option_kind(parameter: inspect.Parameter) -> type | None:
    """``int`` or ``float`` for an option annotated or defaulting so, else ``None``."""
    annotation = str(parameter.annotation).replace(" ", "")
    for kind in (int, float):
        if annotation in (kind.__name__, f"{kind.__name__}|None"):
            return kind
    default = parameter.default
    if not isinstance(default, bool) and isinstance(default, int | float):
        return type(default)
    return None


def _optional(options: dict[str, inspect.Parameter] | None, key: str) -> bool:
    """Whether ``key`` takes ``None``: its annotation allows it, or it defaults to it."""
    if options is None:
        return True
    parameter = options[key]
    return parameter.default is None or "None" in str(parameter.annotation)


def _check_int(key: str, value: Any, low: int | None, high: int | None) -> None:
    """Raise ``LumosGymError`` unless ``value`` is an integer from ``low`` to ``high``."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LumosGymError(f"{key} takes an integer, got {value!r}")
    if low is not None and value < low or high is not None and value > high:
        shown = f"{low} to {high}" if high is not None else f"at least {low}"
        raise LumosGymError(f"{key} must be {shown}, got {value}")


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)``, with an env that cannot be made as a clear error.

    The arguments are checked first (:func:`check_env_kwargs`).

    Raises:
        LumosGymError: an argument the env does not take, or of the wrong kind or size; or
            the env's constructor failed (a bad value...).
    """
    check_env_kwargs(env_id, kwargs)
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


__all__ = [
    "ENVS",
    "FAMILIES",
    "MAX_COUNT",
    "PLUGIN_GROUP",
    "EnvInfo",
    "Family",
    "Table",
    "check_env_kwargs",
    "env_ids",
    "env_options",
    "families",
    "fill_from_families",
    "load_plugins",
    "make_env",
    "register_env",
    "register_family",
    "resolve_env_id",
    "unregister_env",
    "unregister_family",
]
