"""Reference agents shipped with the package: trained adapters for the default model.

``lumos-gym evaluate --agent lumos-i`` with no model named runs the Lumos-I planner and
grounder LoRA adapters trained for SmolLM2-135M by ``lumos-gym reproduce offline`` (their card,
``CARD.md`` in the adapters' folder, gives the data, recipe, command and scores). Pass
``--no-reference`` to evaluate the untrained base model instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REFERENCE_ROOT = Path(__file__).parent / "reference"
"""The folder of the shipped reference adapters."""


@dataclass(frozen=True)
class ReferenceAgent:
    """A trained agent shipped as adapters.

    Attributes:
        agent: the agent name.
        base_model: the model the adapters adapt.
        folder: the folder under :data:`REFERENCE_ROOT`.
        roles: role → adapter sub-folder.
    """

    agent: str
    base_model: str
    folder: str
    roles: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The agent's folder."""
        return REFERENCE_ROOT / self.folder


REFERENCE_AGENTS: dict[str, ReferenceAgent] = {
    "lumos-i": ReferenceAgent(
        "lumos-i", "smollm2-135m", "lumos-i-smollm2-135m",
        {"planner": "planner", "grounder": "grounder"},
    ),
}
"""The reference agents, by agent name."""


def reference_models(agent: str) -> dict[str, str]:
    """Role → adapter folder of ``agent``'s shipped adapters (empty when none ship)."""
    ref = REFERENCE_AGENTS.get(agent)
    if ref is None:
        return {}
    found = {role: ref.path / sub for role, sub in ref.roles.items()}
    if not all((folder / "adapter_config.json").is_file() for folder in found.values()):
        return {}
    return {role: str(folder) for role, folder in found.items()}


def served_name(agent: str, role: str) -> str:
    """The model name a server gives ``role``'s adapter of ``agent``: ``AGENT-ROLE``.

    ``lumos-gym serve --agent lumos-i`` serves ``lumos-i-planner`` and ``lumos-i-grounder``,
    and the ``openai`` backend asks for them when no model is named.
    """
    return f"{agent}-{role}"


__all__ = ["REFERENCE_AGENTS", "REFERENCE_ROOT", "ReferenceAgent", "reference_models",
           "served_name"]
