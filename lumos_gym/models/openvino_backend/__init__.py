"""The ``openvino`` backend: a causal LM run by OpenVINO GenAI on the CPU (the ``openvino`` extra).

:class:`OpenVINOBackend` takes the same model names as the ``hf`` backend (a local folder, a hub
id, the alias ``smollm2-135m``, a LoRA output folder) and the same adapters. A model is exported
once to an OpenVINO folder (:mod:`lumos_gym.models.openvino_export`) cached under
``<cache>/models/openvino/``, keyed by the SHA-256 of the base weights (for an alias, of its GGUF
file), of the adapters' weights and config and of the export format: a retrained adapter gets a
new export, an unchanged one is loaded (a few seconds) without torch doing any work.

How adapters are exported (``adapter_mode``):

* ``"routed"``: one export holds the base weights and every adapter unmerged, and each request
  picks its adapter through its token ids, so one pipeline batches the requests of all the
  adapters together (a Lumos planner and grounder share each step). The default when two or more
  adapters are loaded and ``batch_size`` is above 1;
* ``"merged"``: each adapter is merged into the weights of its own export, run by its own
  pipeline. The default for one adapter or batch 1, where it skips the LoRA matmuls.

The runtime is OpenVINO GenAI's continuous-batching pipeline, driven a step at a time from
here: the pipeline keeps up to ``batch_size`` sequences decoding and fills a finished one's
place with the next request, prompts are prefilled in chunks of up to ``max_batched_tokens``
tokens, and prompt prefixes seen before are read from its paged key/value cache
(``prefix_cache``). A :meth:`OpenVINOBackend.open_session` session's submitted request joins
the running batch at once, even while others decode, and comes back as soon as it ends (the
rollout runner's continuous batching); a ``generate`` call is a session of its own that waits
for all of its requests.

Requests are tokenized and completions decoded here with the model's transformers tokenizer,
exactly as the ``hf`` backend does (raw prompts without special tokens, chat messages through
the chat template, a trailing ``</s>`` dropped), and stop strings are matched on that text
after each step; OpenVINO only sees token ids (its own stop-string matching was seen to hang),
shifted by their role for a routed export and shifted back here.

By default the weights, the activations and the cache stay in fp32 (``precision="f32"``), so
that greedy outputs follow the ``hf`` backend's up to floating-point rounding (a merged adapter
and a different order of sums can still flip a near tie); ``precision="bf16"`` runs the matmuls
in bf16 where the CPU has them (AMX), faster, with more outputs that differ. ``weights="int8"``
stores the large matmul weights in int8 (one scale per output channel, the activations still
fp32; :func:`~lumos_gym.models.openvino_export.compress_weights`): a quarter of the bytes each
decode step streams, with outputs that can differ (docs/speed.md measures how many).

The package's modules: :mod:`~lumos_gym.models.openvino_backend.exports` (the export folders
and their keys), :mod:`~lumos_gym.models.openvino_backend.pipelines` (the settings and the
shared pipelines) and :mod:`~lumos_gym.models.openvino_backend.backend`
(:class:`OpenVINOBackend` and its sessions); import their names from here, the backend's
public path.
"""

# The extra's packages are imported here first, so that importing any module of the package
# without them raises this one message.
try:
    import numpy as np  # noqa: F401
    import openvino as ov  # noqa: F401
    import openvino_genai  # noqa: F401
    from jinja2 import TemplateError  # noqa: F401
    from transformers import AutoConfig, GenerationConfig  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the 'openvino' backend needs openvino-genai; install it with:"
        " pip install 'lumos-gym[openvino]'"
    ) from e

from lumos_gym.models.openvino_backend.backend import (  # noqa: F401  (_routes: tests, benchmarks)
    ADAPTER_MODES,
    OpenVINOBackend,
    _routes,
)
from lumos_gym.models.openvino_backend.exports import (
    EXPORT_FORMAT,
    MANIFEST,
    adapter_sha256,
    export_folder,
    files_sha256,
    model_fingerprint,
    routing_problem,
)
from lumos_gym.models.openvino_backend.pipelines import (
    DEFAULT_KV_CACHE_MB,
    DEFAULT_MAX_BATCHED_TOKENS,
    PRECISIONS,
    WEIGHTS,
    native_precisions,
)

INSTALL = "pip install 'lumos-gym[openvino]'"
"""The command that installs the ``openvino`` extra."""

__all__ = [
    "ADAPTER_MODES",
    "DEFAULT_KV_CACHE_MB",
    "DEFAULT_MAX_BATCHED_TOKENS",
    "EXPORT_FORMAT",
    "INSTALL",
    "MANIFEST",
    "PRECISIONS",
    "WEIGHTS",
    "OpenVINOBackend",
    "adapter_sha256",
    "export_folder",
    "files_sha256",
    "model_fingerprint",
    "native_precisions",
    "routing_problem",
]
