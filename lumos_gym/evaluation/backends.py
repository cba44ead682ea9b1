"""The model backends of an agent's roles for a run (built here, or in each Ray worker)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from lumos_gym.agents.base import Agent
from lumos_gym.models.base import Backend
from lumos_gym.models.factory import ADAPTER_BACKENDS, BackendSet, ModelOptions, build_backends
from lumos_gym.models.reference import reference_models, served_name


def with_reference(agent_name: str, options: ModelOptions) -> ModelOptions:
    """``options`` with the agent's shipped reference adapters when nothing else is named.

    A backend that runs adapters itself loads them; the ``openai`` backend asks the server for
    the names ``lumos-gym serve --agent AGENT`` serves them under (``AGENT-ROLE``).
    """
    if not options.reference or options.names_a_model():
        return options
    models = reference_models(agent_name)
    if not models:
        return options
    if options.backend == "openai":
        models = {role: served_name(agent_name, role) for role in models}
    elif options.backend not in ADAPTER_BACKENDS:
        return options
    return replace(options, planner=models.get("planner"), grounder=models.get("grounder"))


def agent_backends(
    agent: Agent, options: ModelOptions, backends: Mapping[str, Backend] | None = None
) -> BackendSet:
    """The backends of ``agent``'s roles (none for an agent without roles).

    ``backends`` as given, else built from ``options``, with the agent's reference adapters
    when no model is named (a counterfactual agent's are those of the agent it stands in for).
    """
    built = BackendSet()
    if backends is not None:
        built.update(backends)
    elif agent.roles:
        reference = getattr(agent, "counterfactual_of", None) or agent.name
        built = build_backends(agent.roles, with_reference(reference, options))
    return built
