"""The ``openvino`` backend's class, :class:`OpenVINOBackend`, its adapter views and sessions.

A session (:class:`_Session`) adds its requests to the running batch of a pipeline, steps it,
and stops a request at its stop strings.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov
import openvino_genai
from jinja2 import TemplateError
from transformers import AutoConfig, GenerationConfig

from lumos_gym.errors import BackendError
from lumos_gym.models.base import (
    Backend,
    BackendInfo,
    Completion,
    GenerationRequest,
    GenerationSession,
    StopReason,
    TokenTrace,
    check_adapter,
)
from lumos_gym.models.hf import (
    ALIASES,
    DEFAULT_ADAPTER,
    _named_adapters,
    ensure_alias_cache,
    load_tokenizer,
    resolve_model,
    split_model_name,
    trim_completion,
)
from lumos_gym.models.openvino_backend.exports import routing_problem
from lumos_gym.models.openvino_backend.pipelines import (
    DEFAULT_KV_CACHE_MB,
    DEFAULT_MAX_BATCHED_TOKENS,
    PRECISIONS,
    WEIGHTS,
    _Settings,
    _Shared,
    native_precisions,
)
from lumos_gym.models.sources import ModelSource, trained_eos_ids

logger = logging.getLogger(__package__)  # one logger: lumos_gym.models.openvino_backend

ADAPTER_MODES = ("auto", "routed", "merged")
"""How adapters are exported: routed into one model, merged each into its own, or ``auto``."""


class OpenVINOBackend(Backend):
    """A causal LM exported to OpenVINO and run by OpenVINO GenAI, with its adapters.

    Args:
        model: a local folder, a Hugging Face hub id, or an alias (``"smollm2-135m"``); or a
            LoRA output folder, which loads its base with it as ``adapter``.
        adapter: a peft adapter folder on ``model`` (``"default"``, active here).
        adapters: more adapters by name; :meth:`with_adapter` returns a backend that uses one
            of them.
        device: the OpenVINO device (``"CPU"``).
        dtype: the precision of the matmuls and the cache: ``"f32"`` (also ``"float32"``,
            ``"auto"``; the default) or ``"bf16"``.
        batch_size: the most sequences decoded together.
        max_context: the longest prompt plus completion, in tokens; by default the model's.
        tokenizer: the folder or hub id of a tokenizer to use instead of the model's.
        prefix_cache: read prompt prefixes seen before from the paged cache.
        kv_cache_mb: the size of each merged export's key/value cache (rounded up to whole
            GiB); a routed export's is this times the adapters it holds.
        max_batched_tokens: the most tokens one pipeline step computes (prompt chunks
            included).
        threads: CPU threads (default: OpenVINO's choice, every core).
        weights: ``"f32"`` (the default) or ``"int8"``: the large matmul weights stored in int8
            (see the module's doc).
        adapter_mode: ``"routed"`` (every adapter in one export and pipeline), ``"merged"``
            (each adapter in its own) or ``"auto"`` (routed for two or more adapters that can
            be routed when ``batch_size`` is above 1; see the module's doc).

    Raises:
        BackendError: the model, its tokenizer or an adapter is missing, or cannot be exported
            or loaded.
        ValueError: an argument is out of range.
    """

    name = "openvino"

    def __init__(
        self,
        model: str,
        *,
        adapter: str | os.PathLike[str] | None = None,
        adapters: Mapping[str, str | os.PathLike[str]] | None = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 8,
        max_context: int | None = None,
        tokenizer: str | None = None,
        prefix_cache: bool = True,
        kv_cache_mb: int = DEFAULT_KV_CACHE_MB,
        max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS,
        threads: int | None = None,
        adapter_mode: str = "auto",
        weights: str = "f32",
    ) -> None:
        if adapter_mode not in ADAPTER_MODES:
            raise ValueError(f"adapter_mode must be one of {', '.join(ADAPTER_MODES)}; "
                             f"got {adapter_mode!r}")
        if weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}; got {weights!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1; got {batch_size}")
        if max_context is not None and max_context < 2:
            raise ValueError(f"max_context must be at least 2; got {max_context}")
        if kv_cache_mb < 1 or max_batched_tokens < 1:
            raise ValueError("kv_cache_mb and max_batched_tokens must be positive")
        precision = PRECISIONS.get(str(dtype or "f32").removeprefix("torch."))
        if precision is None:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(PRECISIONS)}")
        asked = precision
        if precision == "bf16" and "BF16" not in native_precisions(device or "CPU"):
            logger.warning(
                "dtype bf16 was asked, but %s does not compute in bf16 (no AMX or AVX-512 BF16 "
                "here; OpenVINO reports %s): running in f32, and the run records dtype float32",
                device or "CPU", ", ".join(sorted(native_precisions(device or "CPU"))) or "nothing",
            )
            precision = "f32"
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
        settings = _Settings(
            device=(device or "CPU").upper(), precision=precision, kv_cache_mb=kv_cache_mb,
            batch_size=batch_size, max_batched_tokens=max_batched_tokens,
            prefix_cache=prefix_cache, threads=threads, weights=weights, asked=asked,
        )
        loaded, context, eos_ids = _tokenizer_and_config(source, tokenizer)
        eos_ids |= trained_eos_ids(named.values(), loaded)  # the turn ends adapters learned
        self._shared = _Shared(source, named, loaded, settings, max_context or context, eos_ids,
                               routed=_routes(adapter_mode, named, batch_size),
                               routed_by_default=adapter_mode == "auto")
        for name in named:  # fail fast: every adapter is exported (or found) now
            self._shared.folder(name)
        self._adapter = DEFAULT_ADAPTER if adapter is not None else None
        self._owner = True
        self._closed = False

    # -- views ---------------------------------------------------------------------------------

    def with_adapter(self, name: str | None) -> OpenVINOBackend:
        """A backend on the same exports that generates with adapter ``name`` (``None``: none).

        Raises:
            BackendError: no adapter is loaded under ``name``.
        """
        check_adapter(name, self._shared.adapters)
        view = object.__new__(OpenVINOBackend)
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

    def export_path(self) -> Path:
        """The OpenVINO folder this backend generates with (exported now if missing)."""
        with self._shared.lock:
            return self._shared.folder(self._adapter)

    # -- the Backend contract ------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request; the i-th completion answers the i-th request.

        The requests join the adapter's running batch through a session of their own, beside
        any other session's requests, and the pipeline is stepped until all of them end.

        Raises:
            BackendError: the backend is closed.
        """
        with self.open_session() as session:
            keys = [session.submit(request) for request in requests]
            done: dict[int, Completion] = {}
            while len(done) < len(keys):
                done.update(session.collect())
        return [done[key] for key in keys]

    def open_session(self) -> GenerationSession:
        """A session whose requests join this adapter's running batch as they are submitted."""
        return _Session(self)

    def info(self) -> BackendInfo:
        """Describe the model, adapters, export and runtime settings for provenance."""
        shared = self._shared
        settings = shared.settings
        folder = shared.folders.get(shared.key(self._adapter))
        details: dict[str, Any] = {
            "adapter_mode": "routed" if shared.routed else "merged",
            "source": shared.source.path,
            "adapter": self._adapter,
            "adapters": {name: str(path) for name, path in shared.adapters.items()},
            "export": str(folder) if folder is not None else None,
            "device": settings.device,
            "dtype": "float32" if settings.precision == "f32" else "bfloat16",
            "dtype_asked": "float32" if settings.asked == "f32" else "bfloat16",
            "weights": settings.weights,
            "batch_size": settings.batch_size,
            "max_context": shared.max_context,
            "max_batched_tokens": settings.max_batched_tokens,
            "prefix_cache": settings.prefix_cache,
            "kv_cache_mb": settings.kv_cache_mb,
            "openvino_genai": openvino_genai.get_version(),
        }
        if shared.source.alias is not None:
            details["alias_of"] = ALIASES[shared.source.alias].gguf_file
        return BackendInfo(backend=self.name, model_id=self.model_id, details=details)

    def close(self) -> None:
        """Close this backend; the one that built the pipelines also frees them. Idempotent."""
        self._closed = True
        if self._owner:
            self._shared.close()

    def __enter__(self) -> OpenVINOBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one request ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        """Raise :class:`BackendError` when this backend or its owner is closed."""
        if self._closed or self._shared.closed:
            raise BackendError(f"the openvino backend of {self.model_id!r} is closed")

    def _encode(self, request: GenerationRequest) -> list[int] | Completion:
        """The prompt's token ids, or an error completion when the request cannot run."""
        tokenizer = self._shared.tokenizer
        if request.messages is not None:
            if not getattr(tokenizer, "chat_template", None):
                return self._error(
                    f"model {self.model_id!r} has no chat template, so it cannot take chat "
                    "messages; send a raw prompt"
                )
            try:
                text = tokenizer.apply_chat_template(
                    [dict(m) for m in request.messages], tokenize=False,
                    add_generation_prompt=True,
                )
            except (TemplateError, ValueError, KeyError, TypeError) as e:
                return self._error(f"the chat template of {self.model_id!r} failed: {e}")
        else:
            text = request.prompt or ""
        ids = tokenizer.encode(text, add_special_tokens=False)
        if not ids and tokenizer.bos_token_id is not None:
            ids = [tokenizer.bos_token_id]
        if not ids:
            return self._error("the prompt is empty and the tokenizer has no BOS token to start")
        if len(ids) + request.max_new_tokens > self._shared.max_context:
            return self._error(
                f"the prompt ({len(ids)} tokens) plus max_new_tokens ({request.max_new_tokens})"
                f" exceeds the context length of {self.model_id!r}"
                f" ({self._shared.max_context} tokens)",
                input_tokens=len(ids),
            )
        return ids

    def _config(self, request: GenerationRequest, offset: int = 0) -> Any:
        """Greedy or temperature sampling, ended by end-of-sequence ids or the length.

        ``offset`` shifts the end-of-sequence ids as the request's ids are (a routed export).

        Stop strings are not given to OpenVINO: a session matches them on the text decoded
        here and stops the request. OpenVINO GenAI's own matching decodes with its tokenizer
        model in the sampler's thread, which was seen to hang for good under load (a futex
        wait in ``Tokenizer::decode`` while ``step`` waited on it, once in about 15 runs).
        """
        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = request.max_new_tokens
        config.apply_chat_template = False
        config.stop_token_ids = {i + offset for i in self._shared.eos_ids}
        config.repetition_penalty = 1.0
        config.logprobs = 1 if request.logprobs else 0
        if request.temperature > 0:
            config.do_sample = True
            config.temperature = request.temperature
            config.top_p = 1.0
            config.rng_seed = request.seed
        else:
            config.do_sample = False
        return config

    def _completion(
        self, prompt: list[int], generated: list[int], request: GenerationRequest,
        logprobs: Sequence[float] | None = None,
    ) -> Completion:
        """One request's new tokens as a completion: cut at a stop string, decoded, counted.

        With ``request.logprobs`` and the pipeline's ``logprobs`` (one per generated id), the
        completion carries its :class:`TokenTrace`. An end-of-sequence token the pipeline
        ended on without returning it is counted but not in the trace, which then holds only
        the tokens whose log-probability is known.
        """
        eos_ids = self._shared.eos_ids
        end = next((n for n, t in enumerate(generated) if t in eos_ids), None)
        kept = generated if end is None else generated[:end]
        text, cut = trim_completion(self._decode_continuation(prompt, kept), request.stop)
        count = len(generated) if end is None else end + 1
        traced = count
        ended = cut or end is not None or count < request.max_new_tokens
        if end is None and not cut and count < request.max_new_tokens:
            count += 1  # the pipeline ended on an end-of-sequence token it did not return
        reason: StopReason = "stop" if ended else "length"
        trace = None
        if request.logprobs and logprobs is not None and len(logprobs) >= traced:
            trace = TokenTrace(tuple(prompt), tuple(generated[:traced]),
                               tuple(float(x) for x in logprobs[:traced]))
        return Completion(
            text=text,
            stop_reason=reason,
            input_tokens=len(prompt),
            output_tokens=count,
            model_id=self.model_id,
            tokens=trace,
        )

    def _decode_continuation(self, prompt: list[int], generated: list[int]) -> str:
        """Decode new tokens as the continuation of the prompt (see the ``hf`` backend)."""
        if not generated:
            return ""
        head = self._decode(prompt[-1:])
        full = self._decode(prompt[-1:] + generated)
        return full[len(head) :] if full.startswith(head) else self._decode(generated)

    def _decode(self, ids: list[int]) -> str:
        return self._shared.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def _error(self, message: str, *, input_tokens: int = 0, infra: bool = False) -> Completion:
        return Completion(
            text="", stop_reason="error", input_tokens=input_tokens, model_id=self.model_id,
            error=message, infra=infra,
        )


@dataclass
class _Live:
    """A request in the pipeline: its handle, prompt ids, and the tokens read so far.

    ``offset`` is what the pipeline's ids of this request are shifted by (a routed export's
    role); ``prompt`` and ``generated`` hold the tokenizer's ids.
    """

    handle: Any
    prompt: list[int]
    request: GenerationRequest
    offset: int = 0
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    checked: int = 0  # the tokens searched for stop strings so far

    def read(self) -> bool:
        """Append the tokens the pipeline made since the last read; whether there were any."""
        grew = False
        while self.handle.can_read():
            outputs = self.handle.read()
            if not outputs:  # a stopped or dropped request's last read: nothing more comes
                break
            for output in outputs.values():  # one output: one sequence a request
                self.generated.extend(int(t) - self.offset for t in output.generated_ids)
                self.logprobs.extend(float(x) for x in output.generated_log_probs)
                grew = True
        return grew


class _Session(GenerationSession):
    """Requests of one backend (one adapter) in its pipeline's running batch, stepped here.

    A submitted request is tokenized and added to the pipeline at once; :meth:`collect` runs
    pipeline steps and returns each request whose generation ended, as ``generate``
    completes it. After each step the new tokens of every request are read and, for a request
    with stop strings, its text so far is decoded and searched: a stop string found stops the
    request there. Steps also advance the requests of other sessions and callers of the same
    pipeline, which collect their own. One thread uses a session.
    """

    def __init__(self, backend: OpenVINOBackend) -> None:
        self._backend = backend
        self._next_key = 0
        self._ready: list[tuple[int, Completion]] = []  # answered without the pipeline
        self._running: dict[int, _Live] = {}

    def submit(self, request: GenerationRequest) -> int:
        """Tokenize ``request`` and add it to the running batch; return its key.

        Raises:
            BackendError: the backend is closed, or its export cannot be loaded.
        """
        backend, shared = self._backend, self._backend._shared
        key = self._next_key
        self._next_key += 1
        with shared.lock:
            backend._check_open()
            encoded = backend._encode(request)
            if isinstance(encoded, Completion):  # it cannot run (too long, no chat template)
                self._ready.append((key, encoded))
                return key
            pipeline = shared.pipeline(backend._adapter)
            offset = shared.offset(backend._adapter)
            handle = pipeline.add_request(
                next(shared.request_ids), _tensor([i + offset for i in encoded]),
                backend._config(request, offset),
            )
        self._running[key] = _Live(handle, encoded, request, offset)
        return key

    def collect(self, wait: bool = True) -> list[tuple[int, Completion]]:
        """Run pipeline steps (one, unless ``wait``); return the requests that ended.

        Raises:
            BackendError: the backend is closed, or the pipeline lost a request.
            RuntimeError: a pipeline step failed; every request in flight is dropped.
        """
        backend, shared = self._backend, self._backend._shared
        with shared.lock:
            stepped = False
            while True:
                done, self._ready = self._ready + self._finished(), []
                if done or not self._running or (stepped and not wait):
                    return done
                try:
                    backend._check_open()
                    pipeline = shared.pipelines[shared.key(backend._adapter)]
                    pipeline.step()
                    if not pipeline.has_non_finished_requests() and self._unfinished():
                        raise BackendError("the OpenVINO pipeline lost requests it was running")
                except Exception:
                    self._drop()
                    raise
                stepped = True

    @property
    def in_flight(self) -> int:
        """Requests submitted and not collected yet."""
        return len(self._ready) + len(self._running)

    def close(self) -> None:
        """Cancel the requests still decoding (the pipeline frees them at its next step)."""
        with self._backend._shared.lock:
            self._drop()

    def _finished(self) -> list[tuple[int, Completion]]:
        """Take the requests whose generation ended out of ``_running``, as completions.

        A request ends when the pipeline finished it (an end-of-sequence id, the length) or
        when its text so far holds one of its stop strings; then it is stopped here.
        """
        backend = self._backend
        done = []
        for key, live in list(self._running.items()):
            grew = live.read()
            status = live.handle.get_status()
            running = status == openvino_genai.GenerationStatus.RUNNING
            if running and not (grew and self._stopped(live)):
                continue
            del self._running[key]
            if running:
                live.handle.stop()  # the pipeline frees it at its next step
            if running or status == openvino_genai.GenerationStatus.FINISHED:
                logprobs = live.logprobs if live.request.logprobs else None
                completion = backend._completion(live.prompt, live.generated, live.request,
                                                 logprobs)
                done.append((key, completion))
            else:  # IGNORED: no room in the key/value cache (or dropped by another caller)
                message = f"the OpenVINO pipeline did not finish the request ({status.name})"
                done.append((key, backend._error(message, input_tokens=len(live.prompt),
                                                 infra=True)))
        return done

    def _stopped(self, live: _Live) -> bool:
        """Whether the tokens ``live`` made since the last check complete a stop string.

        Only the new tokens and a margin before them are decoded (a stop string of ``c``
        characters spans at most ``c`` tokens), so a check costs the same at any length.
        """
        stops = [s for s in live.request.stop if s]
        if not stops:
            return False
        eos_ids = self._backend._shared.eos_ids
        start = max(0, live.checked - max(map(len, stops)) - 4)
        window = list(itertools.takewhile(lambda t: t not in eos_ids, live.generated[start:]))
        live.checked = start + len(window)
        if start == 0:
            text = self._backend._decode_continuation(live.prompt, window)
        else:
            text = self._backend._decode(window)
        return any(stop in text for stop in stops)

    def _unfinished(self) -> bool:
        return any(
            live.handle.get_status() == openvino_genai.GenerationStatus.RUNNING
            for live in self._running.values()
        )

    def _drop(self) -> None:
        """Cancel every request in flight and forget them all (the lock is held)."""
        for live in self._running.values():
            live.handle.cancel()
        self._running.clear()
        self._ready.clear()


def _routes(mode: str, adapters: Mapping[str, Path], batch_size: int = 8) -> bool:
    """Whether ``adapters`` go into one routed export under ``adapter_mode`` ``mode``.

    ``auto`` routes two or more adapters that can be routed when more than one sequence can
    decode at once: one adapter, or one sequence at a time, has nothing to batch across roles
    and runs faster merged (the LoRA matmuls cost a batch-1 step of SmolLM2-135M about 4 ms of
    24, docs/speed.md). ``routed`` routes any number, and says why it cannot.

    Raises:
        BackendError: ``routed`` was asked of adapters that cannot be routed.
    """
    if mode == "merged" or not adapters:
        return False
    if mode == "auto" and (len(adapters) < 2 or batch_size < 2):
        return False
    problem = routing_problem(adapters)
    if problem is None:
        return True
    if mode == "routed":
        raise BackendError(f"the adapters cannot share a routed export: {problem}; use "
                           "adapter_mode='merged'")
    logger.info("exporting each adapter merged: %s", problem)
    return False


def _tensor(ids: list[int]) -> Any:
    """A prompt's token ids as the pipeline's input: an int64 tensor of one row."""
    return ov.Tensor(np.array([ids], dtype=np.int64))


def _tokenizer_and_config(
    source: ModelSource, tokenizer: str | None
) -> tuple[Any, int, frozenset[int]]:
    """The transformers tokenizer of ``source`` (or ``tokenizer``), its context and EOS ids.

    The end-of-sequence ids are the ``hf`` backend's: the generation config's and the
    tokenizer's.

    Raises:
        BackendError: no tokenizer or config can be read.
    """
    if source.alias is not None:
        ensure_alias_cache(source.alias)
    if tokenizer is None:
        loaded = load_tokenizer(source.path, local=source.local)
    else:
        loaded = load_tokenizer(tokenizer, local=Path(tokenizer).expanduser().exists())
    try:
        config = AutoConfig.from_pretrained(source.path, local_files_only=source.local)
    except (OSError, ValueError, KeyError) as e:
        raise BackendError(f"cannot read the config of {source.name!r}: {e}") from e
    try:
        generation = GenerationConfig.from_pretrained(source.path, local_files_only=source.local)
        configured = generation.eos_token_id
    except (OSError, ValueError, KeyError):
        configured = getattr(config, "eos_token_id", None)
    eos = set(configured if isinstance(configured, list) else [configured])
    eos.add(loaded.eos_token_id)
    eos_ids = frozenset(int(i) for i in eos if i is not None)
    text = config.get_text_config(decoder=True)
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(text, key, None)
        if isinstance(value, int) and value > 0:
            return loaded, value, eos_ids
    return loaded, 2048, eos_ids
