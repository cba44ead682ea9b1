"""The export folders of the ``openvino`` backend: where each is cached and what it is made from.

A folder's name holds a key over the checksums of the base weights and of the adapters, and
its manifest (:data:`MANIFEST`) says what it was made from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym.errors import BackendError
from lumos_gym.jsonl import cache_root
from lumos_gym.models.sources import ModelSource, find_alias_gguf

EXPORT_FORMAT = 1
"""The version of the export folder layout (:mod:`~lumos_gym.models.openvino_export`); part of
every cache key, so a change of layout makes new exports."""

MANIFEST = "lumos_export.json"
"""The file of an export folder that says what it was made from (written last)."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def files_sha256(paths: Sequence[Path]) -> str:
    """One SHA-256 over the names and bytes of ``paths`` (in the order given)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def model_fingerprint(source: ModelSource) -> dict[str, str]:
    """What identifies the weights of ``source``: a file checksum where they are on disk.

    Raises:
        BackendError: an alias whose GGUF file is missing.
    """
    if source.alias is not None:
        gguf = find_alias_gguf(source.alias)
        return {"alias": source.alias, "gguf": gguf.name, "sha256": files_sha256([gguf])}
    if not source.local:
        return {"hub_id": source.path}
    folder = Path(source.path)
    weights = sorted(
        p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()
    )
    return {"folder": folder.name, "sha256": files_sha256([folder / "config.json", *weights])}


def adapter_sha256(folder: Path) -> str:
    """The SHA-256 of a peft adapter: its config and its weights file.

    Raises:
        BackendError: the folder holds no ``adapter_model.safetensors`` (or ``.bin``).
    """
    weights = [folder / "adapter_model.safetensors", folder / "adapter_model.bin"]
    found = next((w for w in weights if w.is_file()), None)
    if found is None:
        raise BackendError(f"adapter folder {str(folder)!r} holds no adapter_model weights")
    return files_sha256([folder / "adapter_config.json", found])


def export_folder(
    source: ModelSource, adapter: Path | Mapping[str, Path] | None, weights: str = "f32"
) -> tuple[Path, dict[str, Any]]:
    """The cache folder of the export of ``source`` with its adapters, and its manifest.

    ``adapter`` is one adapter folder merged in, ``None``, or a mapping of names to folders
    routed in one export in that order (the key holds their checksums in order, not the names).
    ``weights`` is one of :data:`WEIGHTS`.

    Raises:
        BackendError: the base weights or an adapter cannot be read.
    """
    manifest: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "model": source.name,
        "base": model_fingerprint(source),
        "weights": weights,
    }
    keyed = {k: v for k, v in manifest.items() if k != "model"}
    if isinstance(adapter, Mapping):
        manifest["routed"] = [
            {"name": name, "folder": str(path), "sha256": adapter_sha256(path)}
            for name, path in adapter.items()
        ]
        keyed["routed"] = [entry["sha256"] for entry in manifest["routed"]]
    else:
        manifest["adapter"] = None if adapter is None else {
            "folder": str(adapter), "sha256": adapter_sha256(adapter),
        }
        keyed["adapter"] = None if adapter is None else manifest["adapter"]["sha256"]
    text = json.dumps(keyed, sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(text.encode()).hexdigest()
    name = _SAFE.sub("-", Path(source.name).name)[-40:].strip("-") or "model"
    return cache_root() / "models" / "openvino" / f"{name}-{key[:16]}", manifest


def _token_offset(folder: Path) -> int:
    """The ``token_offset`` a routed export's manifest records.

    Raises:
        BackendError: the manifest does not record one.
    """
    try:
        value = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["token_offset"]
    except (OSError, ValueError, KeyError) as e:
        raise BackendError(f"the routed export {folder} records no token_offset ({e}); remove "
                           "the folder to export it again") from e
    if not isinstance(value, int) or value < 1:
        raise BackendError(f"the routed export {folder} records a bad token_offset {value!r}")
    return value


def routing_problem(adapters: Mapping[str, Path]) -> str | None:
    """Why ``adapters`` cannot share a routed export, from their configs (``None``: they can).

    A routed export holds plain LoRA on ``nn.Linear`` layers: not DoRA, LoRA biases, other
    peft methods, whole saved modules or GPT-2's transposed ``Conv1D`` layers. Adapted
    embeddings are found at export time (``auto`` then merges them, one an export).
    """
    for name, folder in adapters.items():
        try:
            config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return f"adapter {name!r} has no readable adapter_config.json ({e})"
        if config.get("peft_type", "LORA") != "LORA":
            return f"adapter {name!r} is {config.get('peft_type')}, not LoRA"
        for flag in ("use_dora", "lora_bias", "modules_to_save", "trainable_token_indices",
                     "fan_in_fan_out"):
            if config.get(flag):
                return f"adapter {name!r} uses {flag}"
    return None
