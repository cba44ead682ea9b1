"""The one way lumos-gym builds backends: from a spec string, from options, or per agent role.

Every caller (evaluation, the Ray workers, the ``QA`` tool, the LLM judge, conversion by a
model) goes through :func:`build_backend`, which alone knows each backend's constructor
arguments. :func:`backend_from_spec` reads a ``BACKEND:MODEL[@BASE_URL]`` string;
:func:`build_backends` builds one backend per distinct model of an agent's roles.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.errors import BackendError, ModelSpecError
from lumos_gym.models.base import BACKENDS, Backend
from lumos_gym.models.sources import split_model_name

#: The model each backend uses when none is named.
DEFAULT_MODELS: dict[str, str | None] = {
    "hf": "smollm2-135m", "openvino": "smollm2-135m", "openai": None, "vllm": None,
}

ADAPTER_BACKENDS = ("hf", "vllm", "openvino")
"""The backends that apply peft adapters themselves (and take LoRA output folders as models)."""


BACKEND_ENV = "LUMOS_GYM_BACKEND"
"""The environment variable that names the default backend (``hf``, ``openvino``...)."""


def default_backend() -> str:
    """The backend that runs models when none is named.

    ``$LUMOS_GYM_BACKEND`` when set; else ``openvino`` (OpenVINO GenAI in fp32: the same greedy
    outputs as ``hf`` on the offline suite, several times faster on a CPU) where its extra is
    installed and no CUDA GPU is present; else ``hf`` (on a GPU, or with the ``hf`` extra alone).
    """
    named = os.environ.get(BACKEND_ENV, "").strip()
    if named:
        return named
    if importlib.util.find_spec("openvino_genai") is None:
        return "hf"
    try:
        import torch  # heavy: asked only where openvino is installed; both backends load it
    except ImportError:
        return "hf"
    return "hf" if torch.cuda.is_available() else "openvino"


def backend_class(name: str) -> type[Backend]:
    """The backend class registered under ``name``.

    Raises:
        RegistryError: no backend is registered under ``name`` (the message suggests one).
        BackendError: the backend's module cannot be imported (a missing extra).
    """
    try:
        return BACKENDS.get(name)
    except ImportError as e:
        raise BackendError(f"the {name!r} backend cannot be imported: {e}") from e


#: Constructor arguments that :func:`build_backend` sets itself, and the flag that sets each.
SET_BY_FLAGS: dict[str, str] = {
    "model": "--model", "adapter": "--adapter", "adapters": "--adapter",
    "base_url": "--base-url", "batch_size": "--batch-size", "max_concurrency": "--batch-size",
}


def backend_options(backend: str) -> tuple[list[str], bool]:
    """The options a backend takes: its constructor's keyword arguments, from its signature.

    Returns:
        The names ``options`` may give (those :func:`build_backend` sets itself left out), and
        whether the constructor passes any other keyword on (``vllm``'s engine options).
    """
    parameters = inspect.signature(backend_class(backend).__init__).parameters.values()
    named = [p.name for p in parameters
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
             and p.name != "self" and p.name not in SET_BY_FLAGS]
    return named, any(p.kind is p.VAR_KEYWORD for p in parameters)


def check_backend_options(backend: str, options: Mapping[str, Any]) -> None:
    """Refuse options the backend's constructor does not take, naming those it does.

    Raises:
        ModelSpecError: an unknown option, or one that a flag sets (``batch_size``...).
    """
    accepted, open_ended = backend_options(backend)
    for key in options:
        if key in SET_BY_FLAGS:
            raise ModelSpecError(f"{key!r} is not a model option: {SET_BY_FLAGS[key]} sets it")
        if key not in accepted and not open_ended:
            raise ModelSpecError(f"the {backend} backend takes no option {key!r}; it takes: "
                                 f"{', '.join(accepted)}")


def build_backend(
    backend: str,
    model: str,
    *,
    adapters: dict[str, str] | None = None,
    base_url: str | None = None,
    batch_size: int = 8,
    **options: Any,
) -> Backend:
    """Build one backend: ``hf``, ``openvino``, ``openai``, ``vllm`` or any registered one.

    Args:
        backend: the registered backend name.
        model: the model (an alias, a folder, a hub id, or the served name for ``openai``).
        adapters: adapter name → peft folder (``hf``, ``openvino``, ``vllm``).
        base_url: the server of the ``openai`` backend.
        batch_size: the most requests one call completes at once (``hf``, ``openvino``) or
            keeps in flight (``openai``).
        options: further constructor arguments (``device``, ``dtype``, ``timeout``...:
            :func:`backend_options` lists a backend's).

    Raises:
        ModelSpecError: adapters for a served model, ``openai`` without a URL, an option the
            backend does not take, or one its constructor refuses (a value out of range).
        BackendError: the backend cannot be imported or fails to start.
    """
    cls = backend_class(backend)
    check_backend_options(backend, options)
    arguments: dict[str, Any] = {}
    if backend == "openai":
        if adapters:
            raise ModelSpecError(
                "the openai backend cannot apply adapters; serve the adapted model instead "
                "(lumos-gym serve --model BASE --adapter PATH)"
            )
        if not base_url:
            raise ModelSpecError("the openai backend needs --base-url")
        arguments = {"base_url": base_url, "max_concurrency": batch_size}
    elif backend in ("hf", "openvino"):
        arguments = {"adapters": adapters or None, "batch_size": batch_size}
    elif adapters:
        arguments = {"adapters": adapters}
    try:
        return cls(model, **arguments, **options)
    except (ValueError, TypeError) as e:  # the constructor's checks of the values it is given
        if not options:
            raise
        shown = ", ".join(f"{k}={v!r}" for k, v in options.items())
        raise ModelSpecError(f"the {backend} backend failed with the options {shown}: "
                             f"{type(e).__name__}: {e}") from e


def backend_from_spec(spec: str, *, batch_size: int = 8) -> Backend:
    """Build a backend from a spec ``BACKEND:MODEL[@BASE_URL]``.

    Examples: ``hf:smollm2-135m``, ``openai:my-model@http://127.0.0.1:8000/v1``,
    ``vllm:path/to/model``.

    Raises:
        ModelSpecError: a malformed spec.
    """
    backend, sep, rest = spec.partition(":")
    model, _, base_url = rest.partition("@")
    if not sep or not model:
        raise ModelSpecError(f"expected BACKEND:MODEL[@BASE_URL], got {spec!r}")
    if backend == "openai" and not base_url:
        raise ModelSpecError("an openai backend spec needs @BASE_URL")
    return build_backend(backend, model, base_url=base_url or None, batch_size=batch_size)


@dataclass
class ModelOptions:
    """How to build an agent's models.

    Attributes:
        backend: ``hf``, ``openvino``, ``openai`` or ``vllm``; by default
            :func:`default_backend` (``openvino`` on a CPU where it is installed, else ``hf``).
        model: the model of every role (a hub id, a local folder, ``smollm2-135m``, or the
            served name for ``openai``); the backend's default when None.
        planner: the planner's model, overriding ``model``.
        grounder: the grounder's model, overriding ``model``.
        adapters: role → peft adapter folder; the role ``*`` applies to every role.
        base_url: the server of the ``openai`` backend.
        batch_size: the most requests one backend call completes at once (``hf``/``vllm``) or
            keeps in flight (``openai``).
        options: further backend constructor arguments (``device``, ``dtype``; ``--model-args``
            gives any of :func:`backend_options`).
        reference: use the reference adapters shipped for the agent (see
            :mod:`lumos_gym.models.reference`) when no model, role model or adapter is named.
    """

    backend: str = field(default_factory=default_backend)
    model: str | None = None
    planner: str | None = None
    grounder: str | None = None
    adapters: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    batch_size: int = 8
    options: dict[str, Any] = field(default_factory=dict)
    reference: bool = True

    def names_a_model(self) -> bool:
        """Whether the user named any model or adapter (then no reference adapter applies)."""
        return bool(self.model or self.planner or self.grounder or self.adapters)

    def model_for(self, role: str) -> str:
        """Return the model name of ``role``.

        Raises:
            ModelSpecError: the backend has no default model and none is named.
        """
        named = {"planner": self.planner, "grounder": self.grounder}.get(role)
        chosen = named or self.model or DEFAULT_MODELS.get(self.backend)
        if not chosen:
            raise ModelSpecError(f"the {self.backend} backend needs --model (or --{role})")
        return chosen

    def adapter_for(self, role: str) -> str | None:
        """Return the adapter of ``role``, if any."""
        return self.adapters.get(role) or self.adapters.get("*")


class BackendSet(dict):
    """Role → backend, plus the loaded backends that adapter views share.

    ``close()`` closes every backend once, the shared ones included (a view's own ``close``
    leaves the weights it borrows alone).
    """

    def __init__(self) -> None:
        super().__init__()
        self.owned: list[Backend] = []

    def close(self) -> None:
        """Close every distinct backend once."""
        seen: set[int] = set()
        for backend in [*self.values(), *self.owned]:
            if id(backend) not in seen:
                seen.add(id(backend))
                backend.close()


def role_model(options: ModelOptions, role: str) -> tuple[str, str | None]:
    """The model and adapter of ``role``; a LoRA output folder stands for its base + itself.

    Raises:
        ModelSpecError: an adapter folder given both as the role's model and as ``--adapter``.
    """
    model, adapter = options.model_for(role), options.adapter_for(role)
    if options.backend in ADAPTER_BACKENDS:
        base, folder = split_model_name(model)
        if folder is not None:
            if adapter:
                raise ModelSpecError(
                    f"{model!r} is an adapter folder (its base is {base!r}); give it as the "
                    f"{role}'s model or as --adapter, not both"
                )
            return base, folder
    return model, adapter


def build_backends(roles: Sequence[str], options: ModelOptions) -> BackendSet:
    """Build one backend per distinct model and map each role to it (or to an adapter view).

    Roles that use the same model without adapters share one backend object, so the runner
    batches their requests together. Fails fast (before any episode) on a bad model name,
    a missing adapter or an unreachable server.
    """
    by_model: dict[str, list[str]] = {}
    role_adapters: dict[str, str] = {}
    for role in roles:
        model, adapter = role_model(options, role)
        by_model.setdefault(model, []).append(role)
        if adapter:
            role_adapters[role] = adapter
    backends = BackendSet()
    try:
        for model, model_roles in by_model.items():
            adapters = {r: role_adapters[r] for r in model_roles if r in role_adapters}
            base = build_backend(
                options.backend, model, adapters=adapters, base_url=options.base_url,
                batch_size=options.batch_size, **options.options,
            )
            backends.owned.append(base)
            for role in model_roles:
                if not adapters:
                    backends[role] = base
                else:  # hf, openvino and vllm give views that share the loaded model
                    name = role if role in adapters else None
                    backends[role] = base.with_adapter(name)  # type: ignore[attr-defined]
    except BaseException:
        backends.close()
        raise
    return backends
