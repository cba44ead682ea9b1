"""Sizing the Lumos paper's training run: its 7B model, memory per GPU, steps and FLOPs.

The original trained one LLaMA-2 7B model per module (plan or ground, iterative or onetime) and
domain with open-instruct on 2 GPUs under DeepSpeed ZeRO-3 in bf16 (docs/lumos-format.md §3.1).
This module sizes that run without a GPU: :func:`load_base_model` reads a model's config from
local files (or the built-in :func:`llama2_7b_config`) and counts its parameters exactly on the
meta device; :func:`memory_rows` gives the memory of full fine-tuning on one GPU under ZeRO-3;
:func:`module_run` counts a module's records, tokens, steps and FLOPs as the trainer will take
them. ``lumos-gym reproduce paper`` (:mod:`lumos_gym.workflows.paper`) prints them.

**Activation memory.** Per token and per decoder layer, in bytes, with bf16 activations and
flash attention (h hidden size, q = heads x head dim, kv = kv heads x head dim, f intermediate
size, a heads), what autograd keeps for the backward pass of transformers' LLaMA block is::

    12h       the two RMSNorms: each keeps its input upcast to fp32 (4h) and its bf16
              normalised output (2h), which the norm weight's gradient needs and the
              projections after it share
    2q + 4kv  the rotated queries, keys and values that flash attention keeps (RoPE keeps
              only the cos/sin tables, shared by every layer)
    2q        the attention output, o_proj's input
    4a        flash attention's fp32 log-sum-exp, one per head
    8f        the SwiGLU MLP: the gate projection (SiLU's input), SiLU's output, the up
              projection and their product (down_proj's input), 2f each

    per layer = 12h + 4q + 4kv + 8f + 4a     (LLaMA-2 7B: 170,112 bytes a token)

Flash attention keeps no s x s score matrix (it recomputes the scores in its backward pass), so
there is no s^2 term; eager attention would add 6 x a x s bytes a token (its fp32 softmax and
the bf16 copy the value product keeps). Over the model: without activation checkpointing,
``L x per layer`` plus the final norm's ``6h``; with each layer checkpointed, each layer's bf16
input (``2h`` a layer) plus one layer's full activations while it is recomputed, plus ``6h``.
The loss adds the logits: bf16 (``2V``), the fp32 copy the loss makes (``4V``) and the fp32
log-softmax cross-entropy keeps (``4V``), ``10V`` bytes a token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.errors import BackendError, LumosGymError
from lumos_gym.models.sources import resolve_model
from lumos_gym.training.config import TrainConfig
from lumos_gym.training.data import encode_records, read_records, split_records
from lumos_gym.training.trainer import steps_per_epoch

LLAMA2_7B = "meta-llama/Llama-2-7b-hf"
"""The paper's base model on the hub (gated: the training run needs access or a local copy)."""

#: The modules, in the order they train.
MODULES = ("plan-iterative", "ground-iterative", "plan-onetime", "ground-onetime")

#: Training records per domain and module (docs/lumos-format.md §3.1). Math: the model cards'
#: 19,778 per file. Complex QA: the collection page's rounded row counts. Web: Mind2Web's
#: about 1,009 train tasks, iterative only. Unified: 55,499 ground-iterative records (v3); the
#: plan file is taken to hold as many, one plan per annotation (an inference: no count is
#: published for it).
PAPER_RECORDS: dict[str, dict[str, int]] = {
    "maths": dict.fromkeys(MODULES, 19_778),
    "complex_qa": {"plan-iterative": 19_000, "ground-iterative": 19_100,
                   "plan-onetime": 19_400, "ground-onetime": 19_200},
    "web_agent": {"plan-iterative": 1_009, "ground-iterative": 1_009},
    "unified": {"plan-iterative": 55_499, "ground-iterative": 55_499},
}
#: Where each domain's counts come from, printed beside them.
RECORD_SOURCES = {
    "maths": "19,778 a file: the math model cards",
    "complex_qa": "about 19.0k/19.1k/19.4k/19.2k: the collection page, rounded",
    "web_agent": "about 1,009: Mind2Web's train tasks",
    "unified": "55,499 ground-iterative (v3); plan-iterative assumed equal",
}

#: The hardware assumptions' defaults: an 80 GB card, and H100 SXM's dense bf16 peak, 989
#: TFLOPS (NVIDIA's H100 datasheet gives 1,979 with 2:4 sparsity; dense is half; the A100's
#: is 312), at 40% model FLOPs utilisation.
GPU_MEMORY_GIB = 80.0
GPU_TFLOPS = 989.0
MFU = 0.4

GIB = 2**30
_MODULE_IN_NAME = re.compile(r"(plan|ground)[-_](iterative|onetime)")


def llama2_7b_config() -> Any:
    """The architecture of LLaMA-2 7B, written from its published facts.

    Sources: Touvron et al., *Llama 2: Open Foundation and Fine-Tuned Chat Models*
    (arXiv:2307.09288), Table 1 (7B, 4k context) and §2.2 (LLaMA 1's architecture); Touvron et
    al., *LLaMA* (arXiv:2302.13971), Table 2 (7B: dimension 4096, 32 heads, 32 layers), §2
    (RMSNorm, SwiGLU at 2/3 x 4d rounded up to a multiple of 256: 11008, rotary embeddings) and
    the 32,000-token vocabulary; the hub's ``meta-llama/Llama-2-7b-hf`` config.json has the same
    values (RMSNorm eps 1e-5, untied output head).
    """
    from transformers import LlamaConfig  # heavy: transformers, only for the dry run

    return LlamaConfig(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
        max_position_embeddings=4096, rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=False,
    )


@dataclass(frozen=True)
class Architecture:
    """The shapes of a LLaMA-style decoder that its memory and FLOPs depend on.

    Attributes:
        hidden: the hidden size h.
        intermediate: the MLP's intermediate size f.
        layers: the decoder layers L.
        heads: the attention heads a.
        kv_heads: the key/value heads.
        head_dim: the size of one head.
        vocab: the vocabulary V.
        positions: the most positions the model reads.
        model_type: the config's ``model_type``.
    """

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    positions: int | None
    model_type: str

    @classmethod
    def from_config(cls, config: Any) -> Architecture:
        """Read the shapes of a transformers config (a multimodal one's text model).

        Raises:
            LumosGymError: a config without a LLaMA-style decoder's sizes.
        """
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        try:
            heads = int(text.num_attention_heads)
            head_dim = getattr(text, "head_dim", None) or int(text.hidden_size) // heads
            return cls(
                hidden=int(text.hidden_size), intermediate=int(text.intermediate_size),
                layers=int(text.num_hidden_layers), heads=heads,
                kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
                head_dim=int(head_dim), vocab=int(text.vocab_size),
                positions=getattr(text, "max_position_embeddings", None),
                model_type=str(getattr(text, "model_type", "?")),
            )
        except (AttributeError, TypeError) as e:
            raise LumosGymError(
                f"the memory model is a LLaMA-style decoder's, and this config lacks a size: {e}"
            ) from None

    def layer_activation_bytes(self) -> int:
        """Bytes one decoder layer keeps for backward per token (the module docstring's sum)."""
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        return 12 * self.hidden + 4 * q + 4 * kv + 8 * self.intermediate + 4 * self.heads


@dataclass
class BaseModel:
    """The base model as the dry run sees it.

    Attributes:
        name: the name given (``--base-model``).
        source: where its architecture was read from, in words.
        arch: its shapes.
        params: its parameters, counted on the meta device (tied weights once).
        layer_params: the parameters of one decoder layer.
        tokenizer: its tokenizer when one is on this machine, else ``None``.
    """

    name: str
    source: str
    arch: Architecture
    params: int
    layer_params: int
    tokenizer: Any = None


def load_base_model(name: str) -> BaseModel:
    """Read ``name``'s config from local files only and count its parameters on the meta device.

    A local folder or an alias is read from disk; a hub id from this machine's hub cache. The
    paper's ``meta-llama/Llama-2-7b-hf``, when it is not cached, is the built-in
    :func:`llama2_7b_config`. Nothing is downloaded.

    Raises:
        LumosGymError: a name that is neither a model folder, an alias, nor a cached hub id.
    """
    import torch  # heavy: the parameter count builds the model, on the meta device
    from transformers import (  # heavy: the config and tokenizer readers, for the dry run only
        AutoConfig,
        AutoModelForCausalLM,
        AutoTokenizer,
    )

    try:
        found = resolve_model(name)
    except BackendError as e:
        raise LumosGymError(str(e)) from None
    path = found.path
    if found.alias:
        from lumos_gym.models import hf  # heavy: converts the alias's GGUF file once

        path = str(hf.ensure_alias_cache(found.alias))
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        source = f"{path}/config.json" if found.local else f"{name} (this machine's hub cache)"
    except (OSError, ValueError):
        if name.lower() != LLAMA2_7B.lower():
            raise LumosGymError(
                f"{name!r} is neither a model folder nor in this machine's hub cache, and the "
                "dry run downloads nothing: pass a local model folder or a cached hub id"
            ) from None
        config = llama2_7b_config()
        source = "the built-in LLaMA-2 7B config (the published architecture; not cached here)"
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError, ImportError, TypeError):
        tokenizer = None  # tokens are then bounded by records x max length
    arch = Architecture.from_config(config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    layers = [m for m in model.modules()
              if isinstance(m, torch.nn.ModuleList) and len(m) == arch.layers]
    layer_params = (sum(p.numel() for p in layers[0][0].parameters()) if layers
                    else params // arch.layers)
    return BaseModel(name, source, arch, params, layer_params, tokenizer)


# ------------------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class MemoryRow:
    """One row of the per-GPU memory table.

    Attributes:
        name: what the memory holds.
        bytes: its size on one GPU.
        formula: how it is computed.
        in_total: which totals count it: ``"both"``, ``"plain"`` (no activation
            checkpointing) or ``"checkpointed"``.
    """

    name: str
    bytes: int
    formula: str
    in_total: str = "both"


def _per_gpu(total: int, gpus: int) -> int:
    """One GPU's share of ``total`` bytes under ZeRO-3 (partitions are padded to equal size)."""
    return -(-total // gpus)


def memory_rows(model: BaseModel, *, gpus: int, micro_batch: int, seq_len: int) -> list[MemoryRow]:
    """The per-GPU memory of full fine-tuning under ZeRO-3 on ``gpus`` GPUs.

    ``micro_batch`` rows of ``seq_len`` tokens (the recipe's per-device batch and length, every
    row at full length: the worst batch).
    """
    arch, p = model.arch, model.params
    tokens = micro_batch * seq_len
    layer = arch.layer_activation_bytes()
    final_norm = 6 * arch.hidden * tokens
    return [
        MemoryRow("parameters", _per_gpu(2 * p, gpus), f"bf16: 2 B x {p:,} / {gpus}"),
        MemoryRow("gradients", _per_gpu(2 * p, gpus), f"bf16: 2 B x {p:,} / {gpus}"),
        MemoryRow("optimizer states", _per_gpu(12 * p, gpus),
                  f"fp32 master, Adam m and v: 12 B x {p:,} / {gpus}"),
        MemoryRow("one gathered layer", 4 * model.layer_params,
                  f"ZeRO-3 gathers a layer's bf16 weights and full gradient: 4 B x "
                  f"{model.layer_params:,}"),
        MemoryRow("activations, no checkpointing", arch.layers * layer * tokens + final_norm,
                  f"{arch.layers} layers x {layer:,} B x {tokens:,} tokens + final norm "
                  f"6h x tokens", "plain"),
        MemoryRow("activations, checkpointing", arch.layers * 2 * arch.hidden * tokens
                  + layer * tokens + final_norm,
                  f"{arch.layers} layer inputs x 2h + one layer's {layer:,} B, x {tokens:,} "
                  "tokens, + final norm", "checkpointed"),
        MemoryRow("logits and loss", 10 * arch.vocab * tokens,
                  f"bf16 logits + fp32 copy + fp32 log-softmax: 10 B x {arch.vocab:,} x "
                  f"{tokens:,} tokens"),
    ]


def memory_totals(rows: Sequence[MemoryRow]) -> tuple[int, int]:
    """The totals without and with activation checkpointing."""
    plain = sum(r.bytes for r in rows if r.in_total in ("both", "plain"))
    checkpointed = sum(r.bytes for r in rows if r.in_total in ("both", "checkpointed"))
    return plain, checkpointed


# --------------------------------------------------------------------------- data and compute
@dataclass
class ModuleRun:
    """One module's training: data, steps, tokens and compute.

    Attributes:
        module: the module (``plan-iterative``...).
        data: its training files.
        out: its output folder.
        records: records in its files (or the paper's count).
        train_records: after the recipe's held-out slice.
        held_records: the held-out slice, scored for the eval loss.
        steps: optimizer steps over every epoch.
        tokens: tokens trained on over every epoch.
        square_tokens: the sum over records of their length squared, over every epoch (the
            attention term).
        held_tokens: tokens of one pass over the held-out slice.
        counted: whether tokens were counted with the tokenizer (else records x max length).
        evaluations: eval-loss passes the run makes.
        from_paper: whether the records are the paper's count (no file here).
    """

    module: str
    data: list[str]
    out: Path
    records: int
    train_records: int
    held_records: int
    steps: int
    tokens: int
    square_tokens: int
    held_tokens: int
    counted: bool
    evaluations: int
    from_paper: bool = False

    def train_flops(self, model: BaseModel) -> float:
        """6 x params x tokens, plus attention's 12 x L x q x length per token (PaLM's count)."""
        attention = 12 * model.arch.layers * model.arch.heads * model.arch.head_dim
        return 6 * model.params * self.tokens + attention * self.square_tokens

    def eval_flops(self, model: BaseModel) -> float:
        """The eval-loss passes: forward only, 2 x params x tokens each."""
        return 2 * model.params * self.held_tokens * self.evaluations


def module_of(name: str) -> str | None:
    """The module a training file's name holds, or ``None``.

    ``plan-iterative.jsonl`` (``lumos-gym export``) and ``lumos_maths_ground_onetime.jsonl``
    (the hub's dataset names) both say theirs.
    """
    found = _MODULE_IN_NAME.search(Path(name).name.lower())
    return f"{found.group(1)}-{found.group(2)}" if found else None


def data_by_module(data: Sequence[str], modules: Sequence[str]) -> dict[str, list[str]]:
    """Group ``--data`` values by module: ``MODULE=FILE``, or a file whose name says it.

    Raises:
        LumosGymError: a file whose module cannot be told, or a module asked with no file.
    """
    files: dict[str, list[str]] = {}
    for value in data:
        named, sep, path = value.partition("=")
        module = named if sep and named in MODULES else module_of(value)
        if module is None:
            raise LumosGymError(
                f"--data {value}: name its module, MODULE=FILE ({', '.join(MODULES)}), or use "
                "a file name that holds it (plan-iterative.jsonl, lumos_maths_plan_iterative.jsonl)"
            )
        files.setdefault(module, []).append(path if sep and named in MODULES else value)
    missing = [m for m in modules if m not in files]
    if missing:
        raise LumosGymError(f"--data has no file for {', '.join(missing)}")
    return {m: files[m] for m in modules}


def default_data(domain: str, module: str) -> str:
    """Where a module's hub file is looked for without ``--data``."""
    plan, formulation = module.split("-")
    return f"data/lumos/lumos_{domain}_{plan}_{formulation}.jsonl"


def _evaluations(steps: int, every: int, held: int) -> int:
    """Eval-loss passes: one every ``every`` steps and one at the end (none without held-out)."""
    return 0 if not held else steps // every + (1 if steps % every else 0)


def module_run(
    module: str, files: list[str], out: Path, config: TrainConfig, gpus: int,
    model: BaseModel, paper_records: int | None,
) -> ModuleRun:
    """Count a module's records and tokens, and its steps as the trainer will take them.

    The records are those of ``files`` when they are there (always when ``paper_records`` is
    ``None``), else the paper's count; tokens are counted with the base model's tokenizer
    when there are records and a tokenizer, else bounded by records x the recipe's length.
    """
    length = config.max_length
    from_paper = False
    if paper_records is not None and not all(Path(f).is_file() for f in files):
        from_paper = True
        kept = min(paper_records, config.max_records or paper_records)
        held = (max(1, round(kept * config.eval_fraction))
                if config.eval_fraction > 0 and kept >= 2 else 0)
        total, trained = paper_records, kept - held
    else:
        records = read_records(files)  # given files must be there: it names a missing one
        train, held_out = split_records(records, eval_fraction=config.eval_fraction,
                                        seed=config.seed, max_records=config.max_records)
        total, trained, held = len(records), len(train), len(held_out)
    tokens, square, held_tokens = trained * length, trained * length**2, held * length
    counted = not from_paper and model.tokenizer is not None
    if counted:
        eos = config.eos if config.eos is not None else (model.tokenizer.eos_token or "</s>")
        examples, _ = encode_records(train, model.tokenizer, max_length=length, eos=eos)
        held_examples, _ = encode_records(held_out, model.tokenizer, max_length=length, eos=eos)
        trained, held = len(examples), len(held_examples)  # a record left with no target drops
        tokens = sum(len(e.input_ids) for e in examples)
        square = sum(len(e.input_ids) ** 2 for e in examples)
        held_tokens = sum(len(e.input_ids) for e in held_examples)
    per_epoch = steps_per_epoch(trained, config, gpus)
    steps = config.max_steps or math.ceil(config.epochs * per_epoch)
    epochs = steps / per_epoch
    return ModuleRun(
        module, files, out, total, trained, held, steps, round(tokens * epochs),
        round(square * epochs), held_tokens, counted,
        _evaluations(steps, config.eval_steps, held), from_paper,
    )


__all__ = [
    "GPU_MEMORY_GIB",
    "GPU_TFLOPS",
    "LLAMA2_7B",
    "MFU",
    "MODULES",
    "PAPER_RECORDS",
    "RECORD_SOURCES",
    "Architecture",
    "BaseModel",
    "MemoryRow",
    "ModuleRun",
    "data_by_module",
    "default_data",
    "llama2_7b_config",
    "load_base_model",
    "memory_rows",
    "memory_totals",
    "module_of",
    "module_run",
]
