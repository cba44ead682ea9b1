"""The prefix cache of the ``hf`` backend.

Key/value states of earlier prompts in a radix tree per adapter (:class:`PrefixCache`), the
batch layout that reads them (:func:`prefix_pad`), and the check of which models it can serve.
"""

from __future__ import annotations

import heapq
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

DEFAULT_PREFIX_CACHE_MB = 256
"""The default bound of :class:`PrefixCache`, in MiB of cached key/value states."""

PREFIX_MIN_REUSE = 16
"""The shortest cached prefix a prompt reads from the prefix cache (shorter ones are prefilled)."""

PREFIX_MIN_SHARED = 16
"""The shortest uncached prefix that rows of one batch share and that is prefilled once, alone
(Lumos' planner prompts share a 24-token preamble, its grounder prompts a 180-token one)."""


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

