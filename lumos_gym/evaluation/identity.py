"""What identifies a run's configuration in ``run.json``, its paths written to travel.

:func:`fingerprint` is what must match for a run to resume another (the agent and each role's
model, with its :func:`numerics`); :func:`adapter_weights` reads the checksums of the adapter
weights a run loaded, which go beside it (merge, resume and the leaderboard compare both).
:func:`portable_paths` writes this machine's paths so that they travel between checkouts
(:func:`local_path` reads one back). Light: reading a board needs these, not the collecting of
provenance (:mod:`lumos_gym.evaluation.provenance`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lumos_gym
from lumos_gym.jsonl import cache_root

if TYPE_CHECKING:
    from lumos_gym.agents.base import Agent
    from lumos_gym.models.base import Backend


def portable_paths(value: Any) -> Any:
    """``value`` (JSON-like) with this machine's paths written so that they travel.

    A path inside the installed package becomes ``<lumos_gym>/...`` (the shipped reference
    adapters), one inside the cache ``<cache>/...`` (the converted default model), one inside
    the home folder ``~/...``; other strings are kept. Results folders then carry no machine
    path of these kinds, and a run resumes from another checkout of the same code.
    """
    roots = [(str(Path(lumos_gym.__file__).resolve().parent), "<lumos_gym>"),
             (str(cache_root().resolve()), "<cache>"),
             (str(Path("~").expanduser().resolve()), "~")]

    def convert(item: Any) -> Any:
        if isinstance(item, dict):  # keys too: adapter checksums are keyed by folder
            return {convert(k): convert(v) for k, v in item.items()}
        if isinstance(item, list):
            return [convert(v) for v in item]
        if isinstance(item, str) and item.startswith(os.sep):
            for root, name in roots:
                if item == root or item.startswith(root + os.sep):
                    return name + item[len(root):]
        return item

    return convert(value)


def local_path(text: str) -> Path:
    """A path that :func:`portable_paths` wrote, as a path on this machine."""
    for name, root in (("<lumos_gym>", lambda: Path(lumos_gym.__file__).resolve().parent),
                       ("<cache>", lambda: cache_root().resolve()),
                       ("~", lambda: Path("~").expanduser().resolve())):
        if text == name or text.startswith(name + "/"):
            return root() / text[len(name) + 1:]
    return Path(text)


def numerics(details: Mapping[str, Any]) -> str | None:
    """Return how a backend's numbers differ from fp32 (its dtype, int8 weights), else None.

    Part of the fingerprint only when set, so runs in fp32 keep the fingerprint they had
    before it was added: an fp32 folder refuses to be resumed in bf16 or with int8 weights.
    """
    parts = []
    dtype = details.get("dtype")
    if dtype and str(dtype) != "float32":
        parts.append(str(dtype))
    weights = details.get("weights")
    if weights and str(weights) != "f32":
        parts.append(f"{weights} weights")
    return ", ".join(parts) or None


def fingerprint(agent: Agent, backends: Mapping[str, Backend]) -> dict[str, Any]:
    """Return what must match for a run to resume another: the agent and each role's model.

    Each role's model is ``[backend, model id, adapter]``, and its :func:`numerics` after them
    where they are not fp32.
    """
    models = {}
    for role, backend in sorted(backends.items()):
        info = backend.info()
        models[role] = [info.backend, info.model_id, info.details.get("adapter")]
        if (numbers := numerics(info.details)) is not None:
            models[role].append(numbers)
    return portable_paths(
        json.loads(json.dumps({"agent": agent.describe(), "models": models}, default=str))
    )


def adapter_weights(run: Mapping[str, Any]) -> dict[str, list[str]]:
    """Role → the SHA-256s of the adapter weights its backend loaded, from ``run["adapters"]``.

    The folders are left out: the same weights moved elsewhere are the same configuration, and
    other weights under the same adapter name (a retrained adapter, another training seed) are
    another one. The fingerprint names adapters, not their weights, so this goes beside it.
    """
    out: dict[str, list[str]] = {}
    for role, folders in sorted(dict(run.get("adapters") or {}).items()):
        if isinstance(folders, Mapping) and folders:
            out[str(role)] = sorted(str(sha) for sha in folders.values())
    return out
