"""Model backends behind one interface (see :mod:`lumos_gym.agents.backends.base`)."""

from lumos_gym.agents.backends.base import (
    BACKENDS,
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
)

__all__ = ["BACKENDS", "Backend", "BackendInfo", "Completion", "GenerationRequest"]
