"""The ``vllm`` backend: a vLLM engine in this process (an optional extra; needs a GPU).

vLLM is imported only when :class:`VLLMBackend` is built, so ``import lumos_gym`` never needs it.
Raw ``prompt`` requests are tokenized here without special tokens, as the ``hf`` backend does,
and sent as token ids; chat ``messages`` requests go through ``LLM.chat`` and the model's chat
template. LoRA adapters ride along as vLLM ``LoRARequest`` objects, several on one engine:
:meth:`VLLMBackend.with_adapter` returns a view that generates with one of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lumos_gym.errors import BackendError
from lumos_gym.models.base import (
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    StopReason,
    check_adapter,
)
from lumos_gym.models.sources import ALIASES, one_token_id, trained_eos_ids

INSTALL = "pip install 'lumos-gym[vllm]'"
"""The command that installs vLLM for lumos-gym."""

_TRAILING_END_MARKER = re.compile(r"</s>\s*$")


def import_vllm() -> Any:
    """Import and return the ``vllm`` module.

    Raises:
        BackendError: vLLM is not installed (or cannot be imported); the message holds the
            install command.
    """
    try:
        import vllm
    except ImportError as e:
        raise BackendError(
            f"the 'vllm' backend needs vLLM, which is not installed ({e}); install it with:"
            f" {INSTALL} (vLLM needs a CUDA GPU; on a CPU use the 'hf' backend)"
        ) from e
    return vllm


class _Engine:
    """The vLLM engine, tokenizer and adapters that a :class:`VLLMBackend` and its views share."""

    def __init__(self, llm: Any, model_id: str, loras: Mapping[str, Any], max_context: int) -> None:
        self.llm = llm
        self.model_id = model_id
        self.tokenizer = llm.get_tokenizer()
        self.loras = dict(loras)
        self.max_context = max_context
        self.closed = False
        #: End-of-turn ids beyond the model's own: its alias's and those its adapters learned.
        self.stop_ids: frozenset[int] = frozenset()
        #: The views' requests batch together (VLLMBackend's option).
        self.mixed_batches = False
        #: The dtype the engine computes in (part of a run's fingerprint unless float32).
        self.dtype = "auto"


class VLLMBackend(Backend):
    """A model run by vLLM in this process.

    Args:
        model: a hub id, a local folder, or an alias of the ``hf`` backend (``smollm2-135m``,
            whose safetensors cache is built on first use).
        adapter: a LoRA adapter folder, active in this backend (loaded as ``"default"``).
        adapters: more LoRA adapters by name, for :meth:`with_adapter`.
        dtype: vLLM's dtype (``"auto"``, ``"bfloat16"``, ``"float16"``...).
        max_context: the longest prompt plus completion (vLLM's ``max_model_len``); by default
            the model's.
        seed: the engine's seed.
        gpu_memory_utilization: the share of GPU memory vLLM may take.
        tensor_parallel_size: GPUs to shard the model over.
        max_lora_rank: the largest LoRA rank the engine accepts.
        mixed_batches: let the runner batch the requests of every view together, each prompt
            with its own LoRA request (see :meth:`batch_group`). Off by default until measured
            on a GPU.
        engine_options: further ``vllm.LLM`` arguments.

    Raises:
        BackendError: vLLM is not installed, or an adapter folder is missing.
    """

    name = "vllm"

    def __init__(
        self,
        model: str,
        *,
        adapter: str | os.PathLike[str] | None = None,
        adapters: Mapping[str, str | os.PathLike[str]] | None = None,
        dtype: str = "auto",
        max_context: int | None = None,
        seed: int = 0,
        gpu_memory_utilization: float = 0.9,
        tensor_parallel_size: int = 1,
        max_lora_rank: int = 64,
        mixed_batches: bool = False,
        **engine_options: Any,
    ) -> None:
        vllm = import_vllm()
        named = _adapter_folders(adapter, adapters)
        options: dict[str, Any] = {
            "model": _model_path(model),
            "dtype": dtype,
            "seed": seed,
            "gpu_memory_utilization": gpu_memory_utilization,
            "tensor_parallel_size": tensor_parallel_size,
            **engine_options,
        }
        if max_context is not None:
            options["max_model_len"] = max_context
        if named:
            options.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=len(named))
        llm = vllm.LLM(**options)
        from vllm.lora.request import LoRARequest

        loras = {
            name: LoRARequest(name, index, str(path))
            for index, (name, path) in enumerate(named.items(), start=1)
        }
        self._engine = _Engine(llm, model, loras, max_context or _engine_max_len(llm))
        self._engine.stop_ids = _stop_ids(model, named.values(), self._engine.tokenizer)
        self._engine.mixed_batches = mixed_batches
        self._engine.dtype = _engine_dtype(llm, dtype)
        self._adapter = "default" if adapter is not None else None
        self._owner = True

    def with_adapter(self, name: str | None) -> VLLMBackend:
        """A backend on the same engine that generates with LoRA adapter ``name`` (``None``: none).

        Raises:
            BackendError: no adapter is loaded under ``name``.
        """
        check_adapter(name, self._engine.loras)
        view = object.__new__(VLLMBackend)
        view._engine = self._engine
        view._adapter = name
        view._owner = False
        return view

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request; the i-th completion answers the i-th request.

        Raises:
            BackendError: the backend is closed.
        """
        return self._generate_pairs([(self, request) for request in requests])

    def batch_group(self) -> Hashable | None:
        """The key every view of this engine shares (with adapters and ``mixed_batches``).

        vLLM takes one LoRA request a prompt, so the views' requests batch together.
        """
        if self._engine.loras and self._engine.mixed_batches:
            return ("vllm", id(self._engine))
        return None

    def generate_mixed(
        self, pairs: Sequence[tuple[Backend, GenerationRequest]]
    ) -> list[Completion]:
        """Complete the requests of several views of this engine in one call, in order.

        Raises:
            BackendError: the backend is closed, or a view is of another engine.
        """
        if any(getattr(view, "_engine", None) is not self._engine for view, _ in pairs):
            raise BackendError("generate_mixed takes views of this engine only")
        return self._generate_pairs(pairs)  # type: ignore[arg-type]

    def _generate_pairs(
        self, pairs: Sequence[tuple[VLLMBackend, GenerationRequest]]
    ) -> list[Completion]:
        """Complete each request with its view's adapter: raw prompts in one call, chats in one.

        Raises:
            BackendError: the backend is closed.
        """
        engine = self._engine
        if engine.closed:
            raise BackendError(f"the vllm backend of {engine.model_id!r} is closed")
        requests = [request for _, request in pairs]
        loras = [engine.loras.get(view._adapter) if view._adapter else None for view, _ in pairs]
        results: list[Completion | None] = [None] * len(requests)
        raw: dict[int, list[int]] = {}
        chat: dict[int, GenerationRequest] = {}
        for i, request in enumerate(requests):
            checked = self._check(request)
            if isinstance(checked, Completion):
                results[i] = checked
            elif request.messages is None:
                raw[i] = checked
            else:
                chat[i] = request
        self._run_raw(requests, raw, results, loras)
        self._run_chat(requests, chat, results, loras)
        return results  # type: ignore[return-value]  # every index was filled above

    def info(self) -> BackendInfo:
        """Describe the model and adapters for provenance."""
        engine = self._engine
        details = {
            "mixed_batches": engine.mixed_batches,
            "dtype": engine.dtype,
            "adapter": self._adapter,
            "adapters": {name: lora.lora_path for name, lora in engine.loras.items()},
            "max_context": engine.max_context,
        }
        return BackendInfo(backend=self.name, model_id=engine.model_id, details=details)

    def close(self) -> None:
        """Drop the engine (only the backend that built it does). Idempotent."""
        if self._owner and not self._engine.closed:
            self._engine.closed = True
            self._engine.llm = None

    # -- helpers -------------------------------------------------------------------------------

    def _check(self, request: GenerationRequest) -> list[int] | Completion:
        """The prompt's token ids, or an error completion when it does not fit the context."""
        tokenizer = self._engine.tokenizer
        if request.messages is not None:
            if not getattr(tokenizer, "chat_template", None):
                return self._error(f"model {self._engine.model_id!r} has no chat template")
            text = tokenizer.apply_chat_template(
                [dict(m) for m in request.messages], tokenize=False, add_generation_prompt=True
            )
        else:
            text = request.prompt or ""
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) + request.max_new_tokens > self._engine.max_context:
            return self._error(
                f"the prompt ({len(ids)} tokens) plus max_new_tokens ({request.max_new_tokens})"
                f" exceeds the context length of {self._engine.model_id!r}"
                f" ({self._engine.max_context} tokens)"
            )
        return ids

    def _run_raw(
        self,
        requests: Sequence[GenerationRequest],
        raw: Mapping[int, list[int]],
        results: list[Completion | None],
        loras: Sequence[Any],
    ) -> None:
        if not raw:
            return
        prompts = [{"prompt_token_ids": ids} for ids in raw.values()]
        params = [self._sampling(requests[i]) for i in raw]
        self._fill(list(raw), requests, results, self._engine.llm.generate, prompts, params,
                   loras)

    def _run_chat(
        self,
        requests: Sequence[GenerationRequest],
        chat: Mapping[int, GenerationRequest],
        results: list[Completion | None],
        loras: Sequence[Any],
    ) -> None:
        if not chat:
            return
        conversations = [[dict(m) for m in r.messages or ()] for r in chat.values()]
        params = [self._sampling(r) for r in chat.values()]
        self._fill(list(chat), requests, results, self._engine.llm.chat, conversations, params,
                   loras)

    def _fill(
        self,
        indices: list[int],
        requests: Sequence[GenerationRequest],
        results: list[Completion | None],
        call: Any,
        inputs: list[Any],
        params: list[Any],
        loras: Sequence[Any],
    ) -> None:
        """Run one vLLM call; a refused batch makes an error completion of each request.

        Each prompt goes with its own LoRA request or ``None`` (``loras``, by index of
        ``requests``).
        """
        try:
            outputs = call(inputs, params, use_tqdm=False,
                           lora_request=[loras[i] for i in indices])
        except ValueError as e:  # vLLM's way of refusing a request (too long, bad template)
            for i in indices:
                results[i] = self._error(f"vLLM refused the batch: {e}")
            return
        for i, output in zip(indices, outputs, strict=True):
            results[i] = self._completion(output, requests[i].stop)

    def _sampling(self, request: GenerationRequest) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            max_tokens=request.max_new_tokens,
            temperature=request.temperature,
            stop=list(request.stop) or None,
            stop_token_ids=sorted(self._engine.stop_ids) or None,
            seed=request.seed,
        )

    def _completion(self, output: Any, stop: Sequence[str]) -> Completion:
        choice = output.outputs[0]
        text = _TRAILING_END_MARKER.sub("", choice.text)
        reason: StopReason = "length" if choice.finish_reason == "length" else "stop"
        return Completion(
            text=text,
            stop_reason=reason,
            input_tokens=len(output.prompt_token_ids or ()),
            output_tokens=len(choice.token_ids),
            model_id=self._engine.model_id,
        )

    def _error(self, message: str) -> Completion:
        return Completion(
            text="", stop_reason="error", model_id=self._engine.model_id, error=message
        )


def _adapter_folders(
    adapter: str | os.PathLike[str] | None,
    adapters: Mapping[str, str | os.PathLike[str]] | None,
) -> dict[str, Path]:
    named = {"default": adapter} if adapter is not None else {}
    named.update(adapters or {})
    folders: dict[str, Path] = {}
    for name, path in named.items():
        folder = Path(path).expanduser()
        if not (folder / "adapter_config.json").is_file():
            raise BackendError(
                f"adapter {name!r}: {str(folder)!r} is not a peft adapter folder"
                " (no adapter_config.json)"
            )
        folders[name] = folder
    return folders


def _model_path(model: str) -> str:
    """Map an alias of the ``hf`` backend to its safetensors cache; other names pass through."""
    from lumos_gym.models.hf import (  # heavy: torch and transformers, for an alias only
        ALIASES,
        ensure_alias_cache,
    )

    return str(ensure_alias_cache(model)) if model in ALIASES else model


def _stop_ids(model: str, adapters: Any, tokenizer: Any) -> frozenset[int]:
    """The end-of-turn ids the ``hf`` backend stops at besides the model's own.

    The alias's turn end (the converted GGUF's end of sequence can be another token) and the
    ``eos`` each adapter was trained with.
    """
    ids = set(trained_eos_ids(adapters, tokenizer))
    end = ALIASES[model].eos_token if model in ALIASES else None
    token_id = one_token_id(end, tokenizer) if end else None
    if token_id is not None:
        ids.add(token_id)
    return frozenset(ids)


def _model_config(llm: Any) -> Any:
    """The engine's model config (None where this vLLM keeps it elsewhere)."""
    return getattr(getattr(llm, "llm_engine", None), "model_config", None)


def _engine_max_len(llm: Any) -> int:
    """The engine's ``max_model_len``, read from its model config."""
    return int(getattr(_model_config(llm), "max_model_len", 0) or 2**31 - 1)


def _engine_dtype(llm: Any, asked: str) -> str:
    """The dtype the engine runs in (``"auto"`` resolved from its model config), else ``asked``."""
    dtype = getattr(_model_config(llm), "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else asked
