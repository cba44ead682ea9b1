"""The ``hf`` backend's class, :class:`HFBackend`, and its adapter views.

Requests are encoded, batched by settings and length, decoded with the KV cache (reading prompt
prefixes from the prefix cache) and turned into completions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

import torch
from jinja2 import TemplateError
from transformers import (
    DynamicCache,
    GenerationConfig,
    LogitsProcessorList,
    PreTrainedTokenizerBase,
    StoppingCriteriaList,
)

from lumos_gym.errors import BackendError
from lumos_gym.models.base import (
    CANCELLED,
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    StopReason,
    TokenTrace,
    check_adapter,
    is_cancelled,
)
from lumos_gym.models.hf.batches import (
    ChosenLogprobs,
    StopOnStrings,
    batch_seed,
    left_pad,
    plan_batches,
    seeded,
    trim_completion,
)
from lumos_gym.models.hf.loading import DEFAULT_ADAPTER, _load, _named_adapters
from lumos_gym.models.hf.prefix_cache import (
    DEFAULT_PREFIX_CACHE_MB,
    PREFIX_MIN_REUSE,
    PREFIX_MIN_SHARED,
    PrefixCache,
    _row_states,
    cache_keyword,
    common_length,
    forward_takes,
    prefix_pad,
)
from lumos_gym.models.sources import ALIASES, resolve_model, split_model_name

logger = logging.getLogger(__package__)  # one logger: lumos_gym.models.hf


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
        check_adapter(name, self._shared.adapters)
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
