"""Agents from outside lumos-gym: a module, a file, or an installed plugin.

:func:`agent_class` resolves what ``--agent`` names:

* a registered name: a built-in agent (``lumos-i``...) or a plugin's;
* ``package.module:Class``: a class in an importable module (on ``PYTHONPATH`` or installed);
* ``path/to/file.py:Class``: a class in a Python file, imported under a module name of its
  own (:data:`~lumos_gym.agents.base.FILE_MODULE_PREFIX`, the file's stem and checksum).

Another installed package adds agents through the entry-point group ``lumos_gym.agents``:
each entry point names the ``module:Class`` of an :class:`~lumos_gym.agents.base.Agent`
subclass and registers it under the entry point's name. :func:`load_agent_plugins` reads the
group once, without importing the classes (the registry imports one when it is first asked
for). Each loaded class is checked: an ``Agent`` subclass, concrete, with a ``name`` that is
not another registered agent's.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
import sys
import warnings
from importlib.metadata import entry_points
from pathlib import Path

from lumos_gym.agents.base import AGENTS, FILE_MODULE_PREFIX, Agent
from lumos_gym.envs.sources import file_sha256
from lumos_gym.errors import AgentLoadError, LumosGymError, RegistryError

PLUGIN_GROUP = "lumos_gym.agents"

#: Registered plugin name → ``(distribution, "module:Class")``, for ``lumos-gym agents``.
PLUGINS: dict[str, tuple[str, str]] = {}

SPEC_HELP = "an agent name (lumos-gym agents), package.module:Class or path/to/file.py:Class"


@functools.cache
def load_agent_plugins() -> tuple[str, ...]:
    """Register the agents of installed plugins (group ``lumos_gym.agents``), once.

    Each entry point is registered lazily under its name: its class is imported when it is
    first asked for. An entry point whose name another agent has, or whose value is not
    ``module:Class``, is skipped with a warning naming it.

    Returns:
        The names registered.
    """
    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        where = f"lumos-gym agent plugin {ep.name!r} ({ep.value})"
        if ":" not in ep.value:
            warnings.warn(f"{where} skipped: it must name module:Class", stacklevel=2)
            continue
        try:
            AGENTS.register(ep.name, ep.value)
        except LumosGymError as e:
            warnings.warn(f"{where} skipped: {e}", stacklevel=2)
            continue
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "?"
        PLUGINS[ep.name] = (dist, ep.value)
        loaded.append(ep.name)
    return tuple(loaded)


def agent_origin(name: str) -> str:
    """Where the registered agent ``name`` comes from, for ``lumos-gym agents``."""
    load_agent_plugins()
    if name in PLUGINS:
        dist, value = PLUGINS[name]
        return f"plugin {dist} ({value})"
    return "built-in"


def agent_class(spec: str) -> type[Agent]:
    """Return the agent class that ``spec`` names (see the module docstring).

    Raises:
        AgentLoadError: a file or module that does not exist or fails to import, a missing
            class, or one that is not a concrete :class:`~lumos_gym.agents.base.Agent`
            subclass with a name of its own.
        RegistryError: an unknown agent name (with the closest names).
    """
    load_agent_plugins()
    where, sep, attr = spec.rpartition(":")
    if spec in AGENTS or not sep or not where:
        return registered_agent(spec)
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _import_file(where)
    else:
        module = _import_module(where)
    if not hasattr(module, attr):
        raise AgentLoadError(f"{where} has no {attr!r}: {spec} must name an Agent subclass "
                             "defined (or imported) there")
    return _checked(getattr(module, attr), spec)


def reads_gold_answers(name: str) -> bool:
    """Whether the registered agent ``name`` reads gold answers (False for an unknown one)."""
    try:
        return bool(getattr(registered_agent(name), "needs_privileged_info", False))
    except LumosGymError:  # an agent this installation does not know
        return False


def agent_can_act(name: str, task_type: str | None) -> bool:
    """Whether the registered agent ``name`` can act in envs of ``task_type``.

    True for an agent not known here: nothing says it cannot.
    """
    try:
        return registered_agent(name).can_act(task_type)
    except LumosGymError:
        return True


def registered_agent(name: str) -> type[Agent]:
    """The class registered under ``name`` (a plugin's imported and checked); never a file.

    What reads agent names from results (the leaderboard) looks them up here, so that a name
    in a results folder never imports a module or runs a file.

    Raises:
        AgentLoadError: a plugin that cannot be imported, or is not an agent.
        RegistryError: an unknown name.
    """
    load_agent_plugins()
    if name not in AGENTS:
        if name.endswith(".py") and Path(name).is_file():
            raise AgentLoadError(f"name the class in the file: {name}:ClassName")
        try:
            AGENTS.get(name)  # raises, naming the closest agents
        except RegistryError as e:
            raise RegistryError(f"{e} Or give package.module:Class or path/to/file.py:Class."
                                ) from None
    try:
        cls = AGENTS.get(name)
    except Exception as e:  # a plugin whose module fails to import or lacks its class
        raise AgentLoadError(f"agent {name!r} ({agent_origin(name)}) cannot be imported: "
                             f"{type(e).__name__}: {e}") from e
    return cls if name not in PLUGINS else _checked(cls, name)


def _import_module(name: str) -> object:
    """Import the module ``name``; a missing module or a failing import says which."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise AgentLoadError(f"no module named {name!r} (it must be importable: on "
                                 "PYTHONPATH or installed; a file is named path/to/file.py:Class)"
                                 ) from None
        raise AgentLoadError(f"importing {name!r} failed: ModuleNotFoundError: {e}") from e
    except Exception as e:
        raise AgentLoadError(f"importing {name!r} failed: {type(e).__name__}: {e}") from e


def _import_file(path_text: str) -> object:
    """Import the Python file at ``path_text`` once per content (a changed file is re-read)."""
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise AgentLoadError(f"agent file {path_text} does not exist"
                             + (" (it is a folder)" if path.is_dir() else ""))
    digest = file_sha256(path)
    name = FILE_MODULE_PREFIX + re.sub(r"\W", "_", path.stem) + "_" + digest[:12]
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path.resolve())
    if module_spec is None or module_spec.loader is None:
        raise AgentLoadError(f"{path_text} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up there
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise AgentLoadError(f"importing {path_text} failed: {type(e).__name__}: {e}") from e
    return module


def _checked(obj: object, spec: str) -> type[Agent]:
    """``obj`` if it is a concrete Agent subclass with a name of its own, else a clear error."""
    if not (isinstance(obj, type) and issubclass(obj, Agent)):
        shown = f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise AgentLoadError(f"{spec} is {shown}, not a subclass of lumos_gym.agents.Agent")
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise AgentLoadError(f"{spec} is abstract: it does not define {missing}")
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        raise AgentLoadError(f"{spec} has no name: set a class attribute such as name = "
                             "'my-agent' (it names the run and its results folder)")
    if name in AGENTS and name != spec:
        try:
            taken = AGENTS.get(name) is not obj
        except (ImportError, LumosGymError):
            taken = True
        if taken:
            raise AgentLoadError(f"{spec} has the name {name!r}, which is another agent's "
                                 f"({agent_origin(name)}); give it a name of its own")
    return obj
