"""Loading for the ``hf`` backend, and the loaded model that a backend and its views share.

The alias's safetensors cache, the device and dtype, the model, its tokenizer and adapters, and
:class:`_LoadedModel`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from lumos_gym.errors import BackendError
from lumos_gym.jsonl import publish_folder
from lumos_gym.models.hf.prefix_cache import PrefixCache, prefix_cache_support
from lumos_gym.models.sources import (
    _HUB_ID,
    ALIASES,
    ModelSource,
    adapter_base_name,
    alias_cache_dir,
    check_adapter_folder,
    find_alias_gguf,
    is_model_folder,
    trained_eos_ids,
)

logger = logging.getLogger(__package__)  # one logger: lumos_gym.models.hf

DEFAULT_ADAPTER = "default"
"""The name under which the single ``adapter`` of :class:`HFBackend` is loaded."""

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


def ensure_alias_cache(alias: str) -> Path:
    """Return the safetensors copy of ``alias``, converting its GGUF file on first use.

    The conversion (about 25 s for SmolLM2-135M on two cores) dequantizes the GGUF weights and
    saves them as bf16 safetensors with the tokenizer and config; later loads read that copy
    (about 1.5 s). Nothing is fetched from the network.

    Raises:
        BackendError: the GGUF file is missing or cannot be read.
    """
    dest = alias_cache_dir(alias)
    if is_model_folder(dest):
        return dest
    gguf = find_alias_gguf(alias)
    logger.info("converting %s to a safetensors cache in %s (once)", gguf, dest)
    load = {"gguf_file": gguf.name, "local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **load)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, **load)
    except (OSError, ValueError, KeyError) as e:
        raise BackendError(f"cannot read the GGUF file {gguf} of alias {alias!r}: {e}") from e
    pin_end_of_turn(model, tokenizer, ALIASES[alias].eos_token)
    return save_safetensors_copy(model, tokenizer, dest)


def pin_end_of_turn(model: Any, tokenizer: Any, eos_token: str | None) -> None:
    """Make ``eos_token`` the tokenizer's and the generation config's end of sequence.

    Training appends the tokenizer's end-of-sequence token to every answer and generation
    stops at the generation config's: both must be the model's real end of turn, whatever
    the GGUF reader made of the file's metadata. ``None`` leaves them as read.

    Raises:
        BackendError: ``eos_token`` is not one token of the vocabulary.
    """
    if eos_token is None:
        return
    if eos_token not in tokenizer.get_vocab():
        raise BackendError(f"the end-of-turn token {eos_token!r} is not in the vocabulary")
    token_id = tokenizer.convert_tokens_to_ids(eos_token)
    tokenizer.eos_token = eos_token
    model.generation_config.eos_token_id = token_id


def save_safetensors_copy(
    model: Any, tokenizer: Any, dest: Path, *, dtype: torch.dtype = torch.bfloat16
) -> Path:
    """Save ``model`` (GGUF-loaded ones included) and ``tokenizer`` to ``dest``, atomically.

    transformers refuses to save a model loaded from GGUF, so the weights move into a plain
    model built from the same config without its ``quantization_config``. Everything is written
    to a temporary folder beside ``dest`` that is then renamed, so ``dest`` is either complete or
    absent; when another process won the race, its copy is kept.

    Returns:
        ``dest``.

    Raises:
        BackendError: ``dest`` exists but holds no model (remove it and retry).
    """
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=dtype)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = copy.deepcopy(model.generation_config)

    def save(staging: Path) -> bool:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        return True

    try:
        publish_folder(dest, save)  # a concurrent conversion may have published it first
    except OSError as e:
        raise BackendError(f"cannot write the model cache {dest}: {e}") from e
    if not is_model_folder(dest):
        raise BackendError(
            f"cannot write the model cache {dest}: it exists but holds no model; remove it and "
            "retry"
        )
    return dest


# -- device, dtype and loading -------------------------------------------------------------------


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` or ``"auto"``: CUDA when available, else the CPU."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None`` or ``"auto"``: bf16 on CUDA (fp16 on GPUs without bf16), fp32 elsewhere.

    A bf16 matmul runs at a third of the fp32 speed on the CPUs we measured.

    Raises:
        ValueError: an unknown dtype name.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        if device.type != "cuda":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    try:
        return _DTYPES[dtype.removeprefix("torch.")]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; use one of auto, {', '.join(_DTYPES)}"
        ) from None


def load_model(source: ModelSource, dtype: torch.dtype) -> Any:
    """Load the causal LM of ``source`` in ``dtype`` on the CPU.

    Raises:
        BackendError: the weights cannot be loaded (a wrong hub id, no network, a model that is
            not a causal LM).
    """
    try:
        return AutoModelForCausalLM.from_pretrained(
            source.path, dtype=dtype, local_files_only=source.local
        )
    except (OSError, ValueError, KeyError) as e:
        where = "folder" if source.local else "hub id (or local folder)"
        raise BackendError(
            f"cannot load model {source.name!r} from the {where} {source.path!r}: {e}."
            " Check the name; offline, pass a local folder or the alias 'smollm2-135m'"
        ) from e


def load_tokenizer(name: str, *, local: bool) -> Any:
    """Load the tokenizer stored at ``name`` (a folder, or a hub id when ``local`` is false).

    Raises:
        BackendError: no tokenizer can be loaded from there.
    """
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=local)
    except (OSError, ValueError, KeyError) as e:
        hint = "" if local else "; check the name, or offline pass a local folder"
        raise BackendError(f"cannot load a tokenizer from {name!r}: {e}{hint}") from e


@contextlib.contextmanager
def quiet_peft_deprecations() -> Iterator[None]:
    """Hide the FutureWarning transformers 5.x raises when peft reads ``is_gradient_checkpointing``.

    peft 0.21 still reads the attribute transformers renamed; the warning says nothing a user of
    lumos-gym can act on, and it would print on every adapter load.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)
        yield


def attach_adapters(model: Any, adapters: Mapping[str, Path]) -> Any:
    """Wrap ``model`` in a peft model holding every adapter of ``adapters`` (name → folder).

    Raises:
        BackendError: peft is not installed, or an adapter does not fit the model.
    """
    if not adapters:
        return model
    try:
        from peft import PeftModel
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise BackendError(
            "adapters need peft; install it with: pip install 'lumos-gym[hf]'"
        ) from e
    wrapped = model
    for name, path in adapters.items():
        try:
            with quiet_peft_deprecations():
                if wrapped is model:
                    wrapped = PeftModel.from_pretrained(model, path, adapter_name=name)
                else:
                    wrapped.load_adapter(path, adapter_name=name)
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            made_for = adapter_base_name(path) or "another model"
            loaded = getattr(model.config, "_name_or_path", "") or "the model"
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise BackendError(
                f"adapter {name!r} ({path}) does not fit {loaded!r}: it was made for "
                f"{made_for!r} ({first})"
            ) from e
    return wrapped


def default_max_context(model: Any) -> int:
    """The model's longest sequence, from its config (2048 when the config does not say)."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(model.config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 2048


# -- the shared model ----------------------------------------------------------------------------


class _LoadedModel:
    """The weights, tokenizer and settings that an :class:`HFBackend` and its views share."""

    def __init__(
        self,
        *,
        model: Any,
        tokenizer: Any,
        source: ModelSource,
        adapters: Mapping[str, Path],
        device: torch.device,
        dtype: torch.dtype,
        batch_size: int,
        max_context: int,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.source = source
        self.adapters = dict(adapters)
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self.max_context = max_context
        # the model's own end ids, and those its adapters were trained to end turns with
        self.eos_ids = _eos_ids(model, tokenizer) | trained_eos_ids(self.adapters.values(),
                                                                    tokenizer)
        self.pad_id = _pad_id(tokenizer, self.eos_ids)
        self.lock = threading.Lock()
        self.closed = False
        self.mixed_batches = False  # the views' requests batch together (HFBackend's option)
        self.prefix: PrefixCache | None = None
        self.prefix_off: str | None = "prefix_cache=False"

    def enable_prefix_cache(self, max_bytes: int) -> None:
        """Reuse prompt prefixes, within ``max_bytes`` of cached states, if the model allows."""
        self.prefix_off = prefix_cache_support(self.model)
        if self.prefix_off is not None:
            logger.info("the prefix cache is off for %s: %s", self.source.name, self.prefix_off)
            return
        self.prefix = PrefixCache(max_bytes)

    def disable_prefix_cache(self, reason: str) -> None:
        self.prefix = None
        self.prefix_off = reason

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.model = None
            self.prefix = None
            if self.device.type == "cuda":
                torch.cuda.empty_cache()


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    configured = model.generation_config.eos_token_id
    ids = set(configured if isinstance(configured, list) else [configured])
    ids.add(tokenizer.eos_token_id)
    return frozenset(i for i in ids if i is not None)


def _pad_id(tokenizer: Any, eos_ids: frozenset[int]) -> int:
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return min(eos_ids) if eos_ids else 0


def _named_adapters(
    adapter: str | os.PathLike[str] | None,
    adapters: Mapping[str, str | os.PathLike[str]] | None,
) -> dict[str, Path]:
    """Check every adapter folder now, and name the single ``adapter`` ``"default"``."""
    named: dict[str, Path] = {}
    if adapter is not None:
        named[DEFAULT_ADAPTER] = check_adapter_folder(DEFAULT_ADAPTER, adapter)
    for name, path in (adapters or {}).items():
        if not name or name in named:
            raise ValueError(f"adapter names must be unique and non-empty; got {name!r} twice")
        named[name] = check_adapter_folder(name, path)
    return named


def _load(
    source: ModelSource,
    adapters: Mapping[str, Path],
    *,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
    tokenizer: str | PreTrainedTokenizerBase | None,
    batch_size: int,
) -> _LoadedModel:
    """Load the model, tokenizer and adapters of ``source`` onto the chosen device."""
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    if source.alias is not None:
        ensure_alias_cache(source.alias)
    if tokenizer is None:
        tokenizer = load_tokenizer(source.path, local=source.local)
    elif isinstance(tokenizer, str):
        local = Path(tokenizer).expanduser().exists() or not _HUB_ID.match(tokenizer)
        tokenizer = load_tokenizer(tokenizer, local=local)
    base = load_model(source, torch_dtype)
    max_context = default_max_context(base)
    model = attach_adapters(base, adapters).to(torch_device).eval()
    return _LoadedModel(
        model=model,
        tokenizer=tokenizer,
        source=source,
        adapters=adapters,
        device=torch_device,
        dtype=torch_dtype,
        batch_size=batch_size,
        max_context=max_context,
    )
