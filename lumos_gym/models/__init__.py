"""Model backends behind one interface (see :mod:`lumos_gym.models.base`).

Every backend is registered in :data:`BACKENDS` by a lazy ``"module:attr"`` string, so that
importing lumos-gym never imports torch, transformers, vLLM or an HTTP client:

- ``hf``: a transformers model in this process, with optional peft adapters;
- ``openai``: any OpenAI-compatible server (vLLM, llama.cpp, ``lumos-gym serve``);
- ``vllm``: a vLLM engine in this process (the ``vllm`` extra; needs a GPU);
- ``openvino``: OpenVINO GenAI on the CPU (the ``openvino`` extra), the model exported once
  with each adapter merged in, or with several adapters routed by token id in one export.
"""

from typing import Any

from lumos_gym.models.base import (
    BACKENDS,
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
)
from lumos_gym.models.factory import backend_class

BACKENDS.register("hf", "lumos_gym.models.hf:HFBackend")
BACKENDS.register("openai", "lumos_gym.models.openai_backend:OpenAIBackend")
BACKENDS.register("vllm", "lumos_gym.models.vllm_backend:VLLMBackend")
BACKENDS.register("openvino", "lumos_gym.models.openvino_backend:OpenVINOBackend")


def make_backend(name: str, /, *args: Any, **kwargs: Any) -> Backend:
    """Build the backend registered under ``name`` with its own constructor arguments.

    The plain constructor by name; :func:`~lumos_gym.models.factory.build_backend` is the
    factory that knows each backend's arguments (URLs, adapters, batch sizes).

    Raises:
        RegistryError: no backend is registered under ``name`` (the message suggests one).
        BackendError: the backend's module cannot be imported (a missing extra), or the
            backend itself fails to start.
    """
    return backend_class(name)(*args, **kwargs)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendInfo",
    "Completion",
    "GenerationRequest",
    "make_backend",
]
