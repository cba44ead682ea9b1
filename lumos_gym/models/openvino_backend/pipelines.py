"""The pipelines of the ``openvino`` backend and their settings.

:class:`_Settings` says how every pipeline of a backend is built; :class:`_Shared` holds the
tokenizer, exports and pipelines that a backend and its views share.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openvino as ov
import openvino_genai

from lumos_gym.errors import BackendError
from lumos_gym.models.openvino_backend.exports import MANIFEST, _token_offset, export_folder
from lumos_gym.models.sources import ModelSource

logger = logging.getLogger(__package__)  # one logger: lumos_gym.models.openvino_backend

DEFAULT_KV_CACHE_MB = 1024
"""The default size of each export's paged key/value cache (SmolLM2-135M in fp32 takes 45 KiB a
token, so 1 GiB holds about 23,000 tokens)."""

DEFAULT_MAX_BATCHED_TOKENS = 1024
"""The default most prompt and new tokens one step of the pipeline computes."""

PRECISIONS: dict[str, str] = {
    "f32": "f32", "fp32": "f32", "float32": "f32", "auto": "f32",
    "bf16": "bf16", "bfloat16": "bf16",
}
"""Accepted precision names (``dtype`` spellings of the ``hf`` backend included)."""

WEIGHTS = ("f32", "int8")
"""How an export stores its large matmul weights (part of its cache key)."""


def native_precisions(device: str) -> frozenset[str]:
    """The precisions OpenVINO says ``device`` computes in; empty if unknown.

    From its ``OPTIMIZATION_CAPABILITIES``: ``FP32``, ``BF16`` on CPUs with AMX or AVX-512 BF16,
    ``INT8``, ...
    """
    try:
        found = ov.Core().get_property(device.upper(), "OPTIMIZATION_CAPABILITIES")
    except Exception:  # noqa: BLE001 - an unknown device: the compile will say why
        return frozenset()
    return frozenset(str(name).upper() for name in found)


@dataclass
class _Settings:
    """How every pipeline of one backend is built."""

    device: str
    precision: str
    kv_cache_mb: int
    batch_size: int
    max_batched_tokens: int
    prefix_cache: bool
    threads: int | None
    weights: str = "f32"
    asked: str = "f32"
    """The precision the caller asked for (``precision`` is f32 where the CPU has no bf16)."""

    def scheduler(self, caches: int = 1) -> Any:
        """The scheduler of a pipeline whose key/value cache is ``caches`` times ``kv_cache_mb``."""
        config = openvino_genai.SchedulerConfig()
        config.num_kv_blocks = 0
        config.cache_size = max(1, -(-self.kv_cache_mb * caches // 1024))  # GiB, rounded up
        config.max_num_seqs = self.batch_size
        config.max_num_batched_tokens = self.max_batched_tokens
        config.dynamic_split_fuse = True
        config.enable_prefix_caching = self.prefix_cache
        return config

    def properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": self.precision,
            "KV_CACHE_PRECISION": "f32" if self.precision == "f32" else "bf16",
        }
        if self.threads:
            props["INFERENCE_NUM_THREADS"] = self.threads
        return props


_ROUTED = "\0routed"
"""The key of the routed export and its pipeline in :class:`_Shared` (no adapter has this name)."""


class _Shared:
    """The tokenizer, exports and pipelines that an :class:`OpenVINOBackend` and its views share.

    With ``routed``, every adapter (and the base model) runs on one routed export and pipeline;
    else each adapter has its own merged export and pipeline.
    """

    def __init__(
        self,
        source: ModelSource,
        adapters: Mapping[str, Path],
        tokenizer: Any,
        settings: _Settings,
        max_context: int,
        eos_ids: frozenset[int],
        routed: bool = False,
        routed_by_default: bool = True,
    ) -> None:
        self.source = source
        self.adapters = dict(adapters)
        self.tokenizer = tokenizer
        self.settings = settings
        self.max_context = max_context
        self.routed = routed
        self.routed_by_default = routed_by_default  # "auto": a RoutingError falls back to merged
        self.roles = {name: role for role, name in enumerate(self.adapters, start=1)}
        self.token_offset = 0  # a routed export's vocab: role k sends ids shifted by k times it
        self.folders: dict[str | None, Path] = {}
        self.pipelines: dict[str | None, Any] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.eos_ids = eos_ids
        # the pipelines' request ids, one sequence for all; above the 0, 1, ... of their generate
        self.request_ids = itertools.count(1 << 32)

    def key(self, adapter: str | None) -> str | None:
        """The export and pipeline that generate with ``adapter``."""
        return _ROUTED if self.routed else adapter

    def offset(self, adapter: str | None) -> int:
        """What ``adapter``'s token ids are shifted by in the pipeline (0 unless routed)."""
        if not self.routed or adapter is None:
            return 0
        return self.roles[adapter] * self.token_offset

    def folder(self, adapter: str | None) -> Path:
        """The export that generates with ``adapter``, made now if missing."""
        key = self.key(adapter)
        if key not in self.folders:
            if self.routed:
                what: Path | Mapping[str, Path] | None = self.adapters
            else:
                what = None if adapter is None else self.adapters[adapter]
            dest, manifest = export_folder(self.source, what, self.settings.weights)
            if not (dest / MANIFEST).is_file():
                from lumos_gym.models.openvino_export import (  # heavy: traces with torch
                    RoutingError,
                    export,
                )

                try:
                    export(self.source, what, dest, manifest, MANIFEST)
                except RoutingError as e:
                    if not (self.routed and self.routed_by_default):
                        raise
                    logger.info("exporting each adapter merged: %s", e)
                    self.routed = False
                    return self.folder(adapter)
            if self.routed:
                self.token_offset = _token_offset(dest)
            self.folders[key] = dest
        return self.folders[key]

    def pipeline(self, adapter: str | None) -> Any:
        """The pipeline that generates with ``adapter``, built on first use."""
        key = self.key(adapter)
        if key not in self.pipelines:
            folder = self.folder(adapter)
            caches = len(self.adapters) if self.routed else 1
            try:
                self.pipelines[key] = openvino_genai.ContinuousBatchingPipeline(
                    str(folder), self.settings.scheduler(caches), self.settings.device,
                    self.settings.properties(),
                )
            except RuntimeError as e:
                raise BackendError(
                    f"OpenVINO GenAI cannot load the export {folder}: {e}; remove the folder "
                    "to export it again"
                ) from e
        return self.pipelines[key]

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.pipelines.clear()
