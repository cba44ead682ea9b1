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
"""

from __future__ import annotations

import json
import logging
import time
import warnings
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
        past_length = past[0].shape[2]
        queries = torch.arange(input_ids.shape[1], device=input_ids.device) + past_length
        keys = torch.arange(attention_mask.shape[1], device=input_ids.device)
        causal = (keys[None, :] <= queries[:, None])[None, None]
        mask = causal & attention_mask[:, None, None, :].bool()
        cache = DynamicCache(config=self.model.config)
        for i, layer in enumerate(cache.layers[: self.layers]):
            # set the tensors directly: update() would concatenate onto an empty 1-D tensor,
            # which the tracer records as a rank-1 concat
            layer.lazy_initialization(past[2 * i], past[2 * i + 1])
            layer.keys, layer.values = past[2 * i], past[2 * i + 1]
        keyword = cache_keyword(self.model)
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=position_ids,
            use_cache=True,
            **{keyword: cache},
        )
        flat: list[torch.Tensor] = []
        for layer in out[keyword].layers[: self.layers]:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def _text_shape(config: Any) -> tuple[int, int, int]:
    """The layers, key/value heads and head size of a decoder config."""
    text = config.get_text_config(decoder=True)
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return text.num_hidden_layers, kv_heads, head_dim


def convert(model: Any) -> ov.Model:
    """Trace ``model`` (a transformers causal LM, fp32, eval mode) into a stateful OpenVINO model.

    Raises:
        BackendError: the model's cache is not a plain list of full-attention layers, or tracing
            fails.
    """
    layers, kv_heads, head_dim = _text_shape(model.config)
    batch, new, past_length = 2, 3, 2
    example = (
        torch.ones(batch, new, dtype=torch.long),
        torch.ones(batch, past_length + new, dtype=torch.long),
        torch.arange(past_length, past_length + new).repeat(batch, 1),
        *[torch.zeros(batch, kv_heads, past_length, head_dim) for _ in range(2 * layers)],
    )
    shapes = [ov.PartialShape([-1, -1])] * 3
    shapes += [ov.PartialShape([-1, kv_heads, -1, head_dim])] * (2 * layers)
    types = [ov.Type.i64] * 3 + [ov.Type.f32] * (2 * layers)
    kv_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    out_names = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the tracer warns about every shape read as a Python value (the wrapper's are
            # meant): nothing to act on
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", ".*torch.jit.trace", DeprecationWarning)
            converted = ov.convert_model(
                _CacheAsTensors(model, layers), example_input=example,
                input=list(zip(shapes, types, strict=True)),
            )
    except Exception as e:  # the tracer and the frontend raise many kinds
        raise BackendError(f"OpenVINO could not convert the model: {type(e).__name__}: {e}") from e
    names = ["input_ids", "attention_mask", "position_ids", *kv_names]
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
    adapter: Path | None,
    dest: Path,
    manifest: dict[str, Any],
    manifest_file: str,
) -> Path:
    """Export ``source`` with ``adapter`` merged in to the OpenVINO folder ``dest`` (once).

    Args:
        source: the base model.
        adapter: a peft adapter folder to merge into the weights, or ``None``.
        dest: the export folder; when it exists already, it is returned as is.
        manifest: what the folder is made from.
        manifest_file: the file of ``dest`` that ``manifest`` is written to, last.

    Returns:
        ``dest``.

    Raises:
        BackendError: the model or adapter cannot be loaded, converted or written.
    """
    if (dest / manifest_file).is_file():
        return dest
    started = time.perf_counter()
    what = f"{source.name}" + (f" + {adapter}" if adapter is not None else "")
    logger.info("exporting %s to OpenVINO in %s (once)", what, dest)
    if source.alias is not None:
        ensure_alias_cache(source.alias)
    tokenizer = load_tokenizer(source.path, local=source.local)
    model = load_model(source, torch.float32)
    if adapter is not None:
        with quiet_peft_deprecations():
            model = attach_adapters(model, {"default": adapter}).merge_and_unload()
    model.eval()
    converted = convert(model)
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
    logger.info("exported %s in %.1f s", what, time.perf_counter() - started)
    return dest
