"""Export a transformers causal LM (with a LoRA adapter merged in) to an OpenVINO model folder.

The ``openvino`` backend runs models through OpenVINO GenAI, which reads a folder holding a
*stateful* OpenVINO model (``openvino_model.xml``: inputs ``input_ids``, ``attention_mask``,
``position_ids`` and ``beam_idx``, the key/value cache kept in the model's variables, output
``logits``) and the tokenizer converted by ``openvino_tokenizers``. Hugging Face's exporter
(``optimum-cli export openvino``, from ``optimum-intel``) writes such folders, but it pins
transformers and torch to other versions than lumos-gym's; this module writes the same layout
with what the ``hf`` and ``openvino`` extras hold:

1. the model is loaded in fp32 (:func:`lumos_gym.models.hf.load_model`); a peft adapter is merged
   into its weights (``merge_and_unload``);
2. a wrapper takes the cache as plain tensors and builds the 4-D attention mask itself, so that
   transformers' own mask code (not traceable) is skipped; ``openvino.convert_model`` traces it
   with the key/value heads and head size fixed and the batch and lengths free;
3. a ``beam_idx`` gather is put before every cache input and the cache inputs and outputs are
   made the model's variables (``apply_make_stateful_transformation``), each with a zero
   initial state as wide as the batch: the pattern OpenVINO GenAI turns into paged attention;
4. the tokenizer is converted with a detokenizer (for stop strings), and the transformers
   tokenizer, config and generation config are saved beside it.

Everything is written to a staging folder renamed into place (:func:`~lumos_gym.jsonl.
publish_folder`), so a cache folder is complete or absent.

**Routed exports: several adapters in one model.** OpenVINO GenAI's continuous-batching pipeline
applies one set of LoRA adapters to all the requests of a step, so adapters merged into their own
exports run in one pipeline each, and a planner and a grounder stepped in turn each carry half the
episodes (docs/speed.md). A routed export holds the base weights once and every adapter's LoRA
matrices unmerged, and picks the adapter token by token from the token ids:

* role 0 is the base model and role ``k`` the ``k``-th adapter; a request of role ``k`` sends its
  ids shifted by ``k * vocab`` (``vocab``: the rows of the input embeddings). The model takes the
  role as ``id // vocab`` and embeds ``id % vocab``;
* each adapted ``nn.Linear`` adds ``B_k A_k x`` (scaled, as peft does) for its token's role only:
  the adapters' ``A`` matrices are stacked, and the columns of the other roles multiplied by 0;
* the logits are ``(roles + 1) * vocab`` wide: a token of role ``k`` gets its logits in block
  ``k`` and the lowest float elsewhere, so what it samples is shifted by ``k * vocab`` too and
  feeds back as the same role. Log-probabilities are unchanged (the other blocks weigh 0);
* the model gathers the positions it samples at itself (the ``sampled_tokens_indices`` input that
  OpenVINO GenAI feeds when a model has it), so logits are computed for those positions only.

Prefix caching keys blocks by token ids, so the shifted ids keep each role's cache apart, as
their key/value tensors differ.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops
    import torch
    from openvino._offline_transformations import apply_make_stateful_transformation
    from openvino_tokenizers import convert_tokenizer
    from transformers import DynamicCache
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "exporting a model for the 'openvino' backend needs openvino-genai, torch and "
        "transformers; install them with: pip install 'lumos-gym[openvino]'"
    ) from e

from lumos_gym.errors import BackendError
from lumos_gym.jsonl import publish_folder
from lumos_gym.models.hf import (
    attach_adapters,
    cache_keyword,
    ensure_alias_cache,
    load_model,
    load_tokenizer,
    quiet_peft_deprecations,
)
from lumos_gym.models.sources import ModelSource

logger = logging.getLogger(__name__)


class RoutingError(BackendError):
    """The adapters cannot share a routed export (they can still be merged, one an export)."""


class _CacheAsTensors(torch.nn.Module):
    """A causal LM whose cache goes in and out as ``2 * layers`` plain tensors.

    The attention mask is built here as a boolean ``(batch, 1, new, past + new)`` mask from the
    2-D padding mask: a new token at slot ``past + i`` sees the slots up to its own that the
    padding mask keeps. transformers takes a 4-D mask as it is.
    """

    def __init__(self, model: Any, layers: int) -> None:
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        *past: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        keyword = cache_keyword(self.model)
        out = self.model(
            input_ids=input_ids,
            attention_mask=_causal_mask(input_ids, attention_mask, past[0].shape[2]),
            position_ids=position_ids,
            use_cache=True,
            **{keyword: self._cache(past)},
        )
        return (out.logits, *self._flat(out[keyword]))

    def _cache(self, past: tuple[torch.Tensor, ...]) -> Any:
        cache = DynamicCache(config=self.model.config)
        for i, layer in enumerate(cache.layers[: self.layers]):
            # set the tensors directly: update() would concatenate onto an empty 1-D tensor,
            # which the tracer records as a rank-1 concat
            layer.lazy_initialization(past[2 * i], past[2 * i + 1])
            layer.keys, layer.values = past[2 * i], past[2 * i + 1]
        return cache

    def _flat(self, cache: Any) -> list[torch.Tensor]:
        flat: list[torch.Tensor] = []
        for layer in cache.layers[: self.layers]:
            flat += [layer.keys, layer.values]
        return flat


def _causal_mask(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, past_length: Any
) -> torch.Tensor:
    """The boolean ``(batch, 1, new, past + new)`` mask of new tokens over the kept slots."""
    queries = torch.arange(input_ids.shape[1], device=input_ids.device) + past_length
    keys = torch.arange(attention_mask.shape[1], device=input_ids.device)
    causal = (keys[None, :] <= queries[:, None])[None, None]
    return causal & attention_mask[:, None, None, :].bool()


class _Route:
    """The per-token adapter gates that every :class:`RoutedLoRA` of one model reads.

    :meth:`start` is called by :class:`_RoutedCacheAsTensors` at each forward with the
    ``(batch, new, adapters)`` gates (a 1 where a token's role is that adapter); each layer asks
    :meth:`columns` for them spread over its stacked ranks, made once a forward for all the
    layers whose ranks are stacked alike (one gather in the graph, not one a layer).
    """

    def __init__(self) -> None:
        self.gates: torch.Tensor | None = None
        self._spread: dict[tuple[int, ...], torch.Tensor] = {}

    def start(self, gates: torch.Tensor | None) -> None:
        """Route the next forward by ``gates`` (``None``: outside a forward)."""
        self.gates = gates
        self._spread = {}

    def columns(self, columns: torch.Tensor, key: tuple[int, ...]) -> torch.Tensor:
        """The gate of each stacked rank (``columns``: their adapters; ``key``: the same)."""
        if self.gates is None:
            raise RuntimeError("a RoutedLoRA ran outside its model's routed forward")
        if key not in self._spread:
            self._spread[key] = self.gates.index_select(-1, columns)
        return self._spread[key]


class RoutedLoRA(torch.nn.Module):
    """An ``nn.Linear`` plus the LoRA update of the adapter each token is routed to.

    Args:
        base: the linear layer.
        down: the adapters' ``A`` matrices stacked, ``(sum of ranks, in)``.
        up: their ``B`` matrices side by side, each times its peft scaling, ``(out, sum of ranks)``.
        columns: the adapter index (0-based) of each of the stacked ranks.
        route: where the gates of the current forward are.
    """

    def __init__(
        self, base: torch.nn.Module, down: torch.Tensor, up: torch.Tensor,
        columns: torch.Tensor, route: _Route,
    ) -> None:
        super().__init__()
        self.base = base
        self.down = torch.nn.Parameter(down, requires_grad=False)
        self.up = torch.nn.Parameter(up, requires_grad=False)
        self.register_buffer("columns", columns)
        self.key = tuple(int(c) for c in columns)
        self.route = route

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``base(x)`` plus each token's own adapter update."""
        gates = self.route.columns(self.columns, self.key)
        low = torch.nn.functional.linear(x, self.down) * gates
        return self.base(x) + torch.nn.functional.linear(low, self.up)


def route_adapters(model: Any, adapters: Mapping[str, Path]) -> tuple[Any, _Route]:
    """Put every adapter of ``adapters`` (in order: roles 1, 2, ...) into ``model``, routed.

    Each ``nn.Linear`` that some adapter adapts becomes a :class:`RoutedLoRA` holding the LoRA
    matrices of the adapters that adapt it; the rest of the model is unchanged.

    Raises:
        BackendError: an adapter cannot be loaded.
        RoutingError: an adapter adapts something other than an ``nn.Linear`` with plain LoRA
            (DoRA, embeddings, ``modules_to_save``): export it merged instead.
    """
    from peft.tuners.lora import LoraLayer  # the hf extra's peft; loaded with the adapters

    names = list(adapters)
    with quiet_peft_deprecations():
        wrapped = attach_adapters(model, adapters)
    route = _Route()
    swaps: list[tuple[str, RoutedLoRA]] = []
    for path, module in wrapped.named_modules():
        if not isinstance(module, LoraLayer):
            continue
        base = module.get_base_layer()
        odd = [a for a in names if a in module.lora_embedding_A
               or a in module.lora_magnitude_vector or getattr(module, "lora_bias", {}).get(a)]
        if not isinstance(base, torch.nn.Linear) or odd or getattr(module, "fan_in_fan_out", False):
            raise RoutingError(
                f"an adapter adapts {path} in a way a routed export cannot hold (only LoRA on "
                "linear layers); use adapter_mode='merged'"
            )
        down, up, columns = [], [], []
        for index, name in enumerate(names):
            if name in module.lora_A:
                a = module.lora_A[name].weight.detach()
                down.append(a.clone())
                up.append(module.lora_B[name].weight.detach() * module.scaling[name])
                columns += [index] * a.shape[0]
        routed = RoutedLoRA(base, torch.cat(down), torch.cat(up, dim=1),
                            torch.tensor(columns, dtype=torch.long), route)
        swaps.append((path.removeprefix("base_model.model."), routed))
    if getattr(wrapped, "modules_to_save", None):
        raise RoutingError("an adapter saves whole modules (modules_to_save); a routed export "
                           "cannot hold them; use adapter_mode='merged'")
    with quiet_peft_deprecations():
        plain = wrapped.unload()
    for path, routed in swaps:
        parent, _, attribute = path.rpartition(".")
        setattr(plain.get_submodule(parent), attribute, routed)
    return plain, route


class _RoutedCacheAsTensors(_CacheAsTensors):
    """:class:`_CacheAsTensors` for a model of :func:`route_adapters`: roles from token ids.

    It takes the positions to sample at (``sampled_tokens_indices``, over the batch's tokens
    flattened) after ``position_ids``, and returns their logits as ``(positions, 1,
    (roles + 1) * vocab)`` (see the module's doc).
    """

    def __init__(self, model: Any, layers: int, route: _Route, adapters: int, vocab: int) -> None:
        super().__init__(model, layers)
        self.route = route
        self.adapters = adapters
        self.vocab = vocab

    def forward(  # type: ignore[override]
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        sampled: torch.Tensor,
        *past: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        role = torch.div(input_ids, self.vocab, rounding_mode="floor")
        roles = torch.arange(1, self.adapters + 1, device=input_ids.device)
        self.route.start((role[..., None] == roles).to(torch.float32))
        keyword = cache_keyword(self.model)
        try:
            out = self.model.get_decoder()(
                input_ids=input_ids - role * self.vocab,
                attention_mask=_causal_mask(input_ids, attention_mask, past[0].shape[2]),
                position_ids=position_ids,
                use_cache=True,
                **{keyword: self._cache(past)},
            )
        finally:
            self.route.start(None)
        hidden = out.last_hidden_state
        picked = hidden.reshape(-1, hidden.shape[-1]).index_select(0, sampled)
        picked_roles = role.reshape(-1).index_select(0, sampled)[:, None]
        logits = self.model.get_output_embeddings()(picked)
        lowest = torch.tensor(torch.finfo(logits.dtype).min, dtype=logits.dtype)
        blocks = [torch.where(picked_roles == r, logits, lowest) for r in range(self.adapters + 1)]
        return (torch.cat(blocks, dim=-1).unsqueeze(1), *self._flat(out[keyword]))


def _text_shape(config: Any) -> tuple[int, int, int]:
    """The layers, key/value heads and head size of a decoder config."""
    text = config.get_text_config(decoder=True)
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return text.num_hidden_layers, kv_heads, head_dim


def convert(model: Any, routed: _RoutedCacheAsTensors | None = None) -> ov.Model:
    """Trace ``model`` (a transformers causal LM, fp32, eval mode) into a stateful OpenVINO model.

    With ``routed`` (the wrapper of a :func:`route_adapters` model), that wrapper is traced, with
    its ``sampled_tokens_indices`` input.

    Raises:
        BackendError: the model's cache is not a plain list of full-attention layers, or tracing
            fails.
    """
    layers, kv_heads, head_dim = _text_shape(model.config)
    batch, new, past_length = 2, 3, 2
    extra = [] if routed is None else [torch.tensor([new - 1, 2 * new - 1])]
    example = (
        torch.ones(batch, new, dtype=torch.long),
        torch.ones(batch, past_length + new, dtype=torch.long),
        torch.arange(past_length, past_length + new).repeat(batch, 1),
        *extra,
        *[torch.zeros(batch, kv_heads, past_length, head_dim) for _ in range(2 * layers)],
    )
    shapes = [ov.PartialShape([-1, -1])] * 3 + [ov.PartialShape([-1])] * len(extra)
    shapes += [ov.PartialShape([-1, kv_heads, -1, head_dim])] * (2 * layers)
    types = [ov.Type.i64] * (3 + len(extra)) + [ov.Type.f32] * (2 * layers)
    kv_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    out_names = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the tracer warns about every shape read as a Python value (the wrapper's are
            # meant): nothing to act on
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", ".*torch.jit.trace", DeprecationWarning)
            converted = ov.convert_model(
                routed if routed is not None else _CacheAsTensors(model, layers),
                example_input=example, input=list(zip(shapes, types, strict=True)),
            )
    except Exception as e:  # the tracer and the frontend raise many kinds
        raise BackendError(f"OpenVINO could not convert the model: {type(e).__name__}: {e}") from e
    names = ["input_ids", "attention_mask", "position_ids"]
    names += ["sampled_tokens_indices"] * len(extra) + kv_names
    for port, name in zip(converted.inputs, names, strict=True):
        port.get_tensor().set_names({name})
    for port, name in zip(converted.outputs, ["logits", *out_names], strict=True):
        port.get_tensor().set_names({name})
    make_stateful(converted, dict(zip(kv_names, out_names, strict=True)))
    return converted


def make_stateful(model: ov.Model, cache: dict[str, str]) -> None:
    """Keep the cache inputs/outputs of ``cache`` (input → output name) in the model's variables.

    A ``beam_idx`` input reorders the cache rows before each step (OpenVINO GenAI feeds it), and
    every variable starts as zeros as wide as the batch of ``input_ids``.
    """
    beam_idx = ops.parameter(ov.PartialShape([-1]), ov.Type.i32, name="beam_idx")
    beam_idx.output(0).get_tensor().set_names({"beam_idx"})
    for name in cache:
        port = model.input(name)
        consumers = list(port.get_target_inputs())
        reordered = ops.gather(port, beam_idx, ops.constant(0))
        for consumer in consumers:
            consumer.replace_source_output(reordered.output(0))
    model.add_parameters([beam_idx])
    model.validate_nodes_and_infer_types()
    apply_make_stateful_transformation(model, cache)
    shape = ops.shape_of(model.input("input_ids"), output_type="i64")
    rows = ops.gather(shape, ops.constant([0]), ops.constant(0))
    for op in model.get_ops():
        if op.get_type_name() != "ReadValue":
            continue
        dims = [rows] + [
            ops.constant(np.array([dim.min_length], dtype=np.int64))
            for dim in list(op.get_output_partial_shape(0))[1:]
        ]
        zeros = ops.broadcast(
            ops.constant(0.0, dtype=op.get_output_element_type(0)), ops.concat(dims, axis=0)
        )
        op.set_arguments([zeros])
    model.validate_nodes_and_infer_types()


def export(
    source: ModelSource,
    adapters: Path | Mapping[str, Path] | None,
    dest: Path,
    manifest: dict[str, Any],
    manifest_file: str,
) -> Path:
    """Export ``source`` with its adapters to the OpenVINO folder ``dest`` (once).

    Args:
        source: the base model.
        adapters: one peft adapter folder to merge into the weights; or a mapping of names to
            adapter folders, routed in that order as roles 1, 2, ... (:func:`route_adapters`,
            and the manifest gains ``token_offset``, the ``vocab`` of the module's doc); or
            ``None`` for the base model.
        dest: the export folder; when it exists already, it is returned as is.
        manifest: what the folder is made from.
        manifest_file: the file of ``dest`` that ``manifest`` is written to, last.

    Returns:
        ``dest``.

    Raises:
        BackendError: the model or an adapter cannot be loaded, routed, converted or written.
    """
    if (dest / manifest_file).is_file():
        return dest
    started = time.perf_counter()
    if isinstance(adapters, Mapping):
        what = f"{source.name} + adapters {', '.join(adapters)} (routed)"
    else:
        what = source.name + (f" + {adapters}" if adapters is not None else "")
    logger.info("exporting %s to OpenVINO in %s (once)", what, dest)
    if source.alias is not None:
        ensure_alias_cache(source.alias)
    tokenizer = load_tokenizer(source.path, local=source.local)
    model = load_model(source, torch.float32)
    record = dict(manifest)
    if isinstance(adapters, Mapping):
        vocab = model.get_input_embeddings().weight.shape[0]
        if model.get_output_embeddings().weight.shape[0] != vocab:
            raise RoutingError(f"{source.name!r} has other input and output vocabularies; "
                               "a routed export needs one; use adapter_mode='merged'")
        model, route = route_adapters(model, adapters)
        model.eval()
        layers = _text_shape(model.config)[0]
        converted = convert(model, _RoutedCacheAsTensors(model, layers, route, len(adapters),
                                                         vocab))
        record["token_offset"] = vocab
    else:
        if adapters is not None:
            with quiet_peft_deprecations():
                model = attach_adapters(model, {"default": adapters}).merge_and_unload()
        model.eval()
        converted = convert(model)
    if record.get("weights") == "int8":
        compress_weights(converted)
    _save(dest, converted, tokenizer, model, record, manifest_file, started)
    logger.info("exported %s in %.1f s", what, time.perf_counter() - started)
    return dest


def compress_weights(model: ov.Model, min_side: int = 32) -> int:
    """Store every large constant matmul weight of ``model`` in int8; return how many.

    Each output channel gets one scale, its largest magnitude over 127, and its weights are
    rounded to the nearest multiple of it; the model multiplies them back to fp32 before the
    matmul (the pattern OpenVINO's CPU plugin runs as a matmul with int8 weights, reading a
    quarter of the bytes). A weight with a side under ``min_side`` (the LoRA matrices of a
    routed export, whose stacked ranks are that small: too small to gain) stays fp32.
    """
    count = 0
    for op in model.get_ordered_ops():
        if op.get_type_name() != "MatMul":
            continue
        weight = op.input_value(1).get_node()
        if weight.get_type_name() != "Constant":
            continue
        data = weight.get_data()
        if data.ndim != 2 or data.dtype != np.float32 or min(data.shape) < min_side:
            continue
        axis = 1 if op.get_attributes()["transpose_b"] else 0  # the input side
        scale = np.abs(data).max(axis=axis, keepdims=True) / 127.0
        scale[scale == 0] = 1.0
        quantized = np.clip(np.rint(data / scale), -127, 127).astype(np.int8)
        restored = ops.multiply(ops.convert(ops.constant(quantized), ov.Type.f32),
                                ops.constant(scale.astype(np.float32)))
        op.input(1).replace_source_output(restored.output(0))
        count += 1
    model.validate_nodes_and_infer_types()
    return count


def _save(
    dest: Path, converted: ov.Model, tokenizer: Any, model: Any, manifest: dict[str, Any],
    manifest_file: str, started: float,
) -> None:
    """Write the export folder ``dest`` through a staging folder (its manifest last)."""
    ov_tokenizer, ov_detokenizer = convert_tokenizer(tokenizer, with_detokenizer=True)

    def save(staging: Path) -> bool:
        ov.save_model(converted, staging / "openvino_model.xml", compress_to_fp16=False)
        ov.save_model(ov_tokenizer, staging / "openvino_tokenizer.xml")
        ov.save_model(ov_detokenizer, staging / "openvino_detokenizer.xml")
        tokenizer.save_pretrained(staging)
        model.config.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        record = {**manifest, "export_s": round(time.perf_counter() - started, 1),
                  "openvino": ov.get_version()}
        (staging / manifest_file).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return True

    try:
        publish_folder(dest, save)  # a concurrent export may have published it first
    except OSError as e:
        raise BackendError(f"cannot write the OpenVINO export {dest}: {e}") from e
