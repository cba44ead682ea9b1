"""The ``openvino`` backend on the tiny random Llama of conftest, against the ``hf`` backend.

The tiny model and its LoRA adapters are built and saved here; each is exported to OpenVINO
once, into a temporary cache folder. The exports run in fp32, so greedy outputs, stop reasons
and token counts are compared exactly with the ``hf`` backend's. Skipped when the ``openvino``
extra (OpenVINO GenAI) is not installed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "openvino_genai",
    reason="the openvino extra is not installed: pip install 'lumos-gym[openvino]'",
)
torch = pytest.importorskip("torch", reason="the openvino backend exports with torch (hf extra)")
peft = pytest.importorskip("peft", reason="adapters need peft (hf extra)")
ov_runtime = pytest.importorskip("openvino", reason="the openvino extra is not installed")

from conftest import build_model, build_tokenizer, save_tiny_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import lumos_gym  # noqa: E402, F401  (registers the envs)
from lumos_gym.agents import make_agent  # noqa: E402
from lumos_gym.agents.runner import EpisodeSpec, Runner  # noqa: E402
from lumos_gym.errors import BackendError  # noqa: E402
from lumos_gym.models import make_backend  # noqa: E402
from lumos_gym.models.base import GenerationRequest  # noqa: E402
from lumos_gym.models.factory import ModelOptions, build_backend, build_backends  # noqa: E402
from lumos_gym.models.hf import HFBackend, quiet_peft_deprecations  # noqa: E402
from lumos_gym.models.openvino_backend import (  # noqa: E402
    MANIFEST,
    OpenVINOBackend,
    _routes,
    export_folder,
    native_precisions,
    routing_problem,
)
from lumos_gym.models.sources import resolve_model  # noqa: E402

pytestmark = pytest.mark.full  # every module exports models (seconds each)

PROMPTS = [
    "the planner",
    "Subgoal 1: Calculate the total number of apples.\nAction 1:",
    "<|user|>\nPlease ground the subgoal\n<|assistant|>\n",
    "x",
    "Observation: 7 apples",
]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Exports go to a temporary lumos-gym cache."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LUMOS_GYM_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def lora_dirs(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folders = {}
    for seed, name in enumerate(["planner", "grounder"]):
        torch.manual_seed(100 + seed)
        base = AutoModelForCausalLM.from_pretrained(tiny)
        config = peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
            init_lora_weights=False,
        )
        folders[name] = tmp_path_factory.mktemp(f"lora-{name}")
        with quiet_peft_deprecations():
            peft.get_peft_model(base, config).save_pretrained(folders[name])
    return folders


@pytest.fixture(scope="module")
def hf(tiny: Path, lora_dirs: dict[str, Path]) -> Iterator[HFBackend]:
    adapters = {name: str(path) for name, path in lora_dirs.items()}
    with HFBackend(str(tiny), device="cpu", batch_size=3, adapters=adapters) as backend:
        yield backend


@pytest.fixture(scope="module")
def ov(tiny: Path, lora_dirs: dict[str, Path]) -> Iterator[OpenVINOBackend]:
    adapters = {name: str(path) for name, path in lora_dirs.items()}
    with OpenVINOBackend(str(tiny), batch_size=3, adapters=adapters, threads=1) as backend:
        yield backend


def greedy(prompt: str, n: int = 12, **kwargs: object) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_new_tokens=n, **kwargs)  # type: ignore[arg-type]


# -- the backend contract --------------------------------------------------------------------------
def test_greedy_batches_equal_the_hf_backend(hf: HFBackend, ov: OpenVINOBackend) -> None:
    requests = [greedy(p, n) for p, n in zip(PROMPTS, [12, 5, 20, 1, 9], strict=True)]
    expected = hf.with_adapter(None).generate(requests)
    got = ov.with_adapter(None).generate(requests)
    assert got == expected
    assert [c.stop_reason for c in got] == ["length"] * len(PROMPTS)
    assert [c.output_tokens for c in got] == [12, 5, 20, 1, 9]
    # one at a time gives the same completions as the batch
    assert [ov.with_adapter(None).generate([r])[0] for r in requests] == got


def test_stop_strings_cut_the_text_and_count_like_hf(hf: HFBackend, ov: OpenVINOBackend) -> None:
    base_hf, base_ov = hf.with_adapter(None), ov.with_adapter(None)
    free = base_hf.generate([greedy(p, 20) for p in PROMPTS])
    # a stop string taken from the middle of each free completion
    stops = [c.text[len(c.text) // 2 : len(c.text) // 2 + 2] for c in free]
    requests = [greedy(p, 20, stop=(s,)) for p, s in zip(PROMPTS, stops, strict=True)]
    expected = base_hf.generate(requests)
    got = base_ov.generate(requests)
    assert got == expected
    for completion, stop in zip(got, stops, strict=True):
        assert stop not in completion.text
        assert completion.stop_reason == "stop"
        assert completion.output_tokens < 20


def _without_tokens(completions: list) -> list:
    return [dataclasses.replace(c, tokens=None) for c in completions]


def test_token_traces_equal_the_hf_backends(hf: HFBackend, ov: OpenVINOBackend) -> None:
    free = hf.with_adapter(None).generate([greedy(p, 20) for p in PROMPTS])
    stops = [c.text[len(c.text) // 2 : len(c.text) // 2 + 2] for c in free]
    requests = [greedy(p, 20, logprobs=True) for p in PROMPTS]
    requests += [
        greedy(p, 20, stop=(s,), logprobs=True) for p, s in zip(PROMPTS, stops, strict=True)
    ]
    for name in (None, "planner"):
        expected = hf.with_adapter(name).generate(requests)
        got = ov.with_adapter(name).generate(requests)
        assert _without_tokens(got) == _without_tokens(expected)
        for a, b in zip(got, expected, strict=True):
            assert a.tokens is not None and b.tokens is not None
            assert a.tokens.prompt_ids == b.tokens.prompt_ids
            assert a.tokens.completion_ids == b.tokens.completion_ids
            pairs = zip(a.tokens.logprobs, b.tokens.logprobs, strict=True)
            assert max(abs(x - y) for x, y in pairs) < 1e-4
    # without the flag no trace is made
    assert ov.generate([greedy(PROMPTS[0])])[0].tokens is None


def test_sampled_log_probabilities_are_the_models_at_temperature_1(
    tiny: Path, ov: OpenVINOBackend
) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    requests = [greedy(p, 16, temperature=0.7, seed=n, logprobs=True)
                for n, p in enumerate(PROMPTS)]
    completions = ov.with_adapter(None).generate(requests)
    for completion in completions:
        trace = completion.tokens
        assert trace is not None and len(trace.completion_ids) == completion.output_tokens
        ids = torch.tensor([[*trace.prompt_ids, *trace.completion_ids]])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(ids).logits.float(), dim=-1)[0]
        start = len(trace.prompt_ids) - 1
        expected = [logprobs[start + j, t].item() for j, t in enumerate(trace.completion_ids)]
        assert max(abs(a - b) for a, b in zip(expected, trace.logprobs, strict=True)) < 1e-3


def test_the_adapters_share_one_routed_export_by_default(
    hf: HFBackend, ov: OpenVINOBackend, tiny: Path, lora_dirs: dict[str, Path]
) -> None:
    requests = [greedy(p, 10) for p in PROMPTS]
    texts = {}
    for name in (None, "planner", "grounder"):
        got = ov.with_adapter(name).generate(requests)
        assert got == hf.with_adapter(name).generate(requests), name
        texts[name] = [c.text for c in got]
    assert len({tuple(t) for t in texts.values()}) == 3  # the adapters change the outputs
    folders = {ov.with_adapter(name).export_path() for name in texts}
    assert folders == {export_folder(resolve_model(str(tiny)), lora_dirs)[0]}
    manifest = json.loads((folders.pop() / MANIFEST).read_text())
    assert [entry["name"] for entry in manifest["routed"]] == ["planner", "grounder"]
    assert manifest["token_offset"] == AutoModelForCausalLM.from_pretrained(tiny).config.vocab_size
    assert ov.info().details["adapter_mode"] == "routed"
    assert len(ov._shared.pipelines) == 1


def test_requests_of_every_adapter_decode_in_one_running_batch(
    hf: HFBackend, ov: OpenVINOBackend
) -> None:
    names = [None, "planner", "grounder"]  # three requests: the fixture's batch of 3
    sessions = {name: ov.with_adapter(name).open_session() for name in names}
    requests = {name: greedy(PROMPTS[i], 8) for i, name in enumerate(names)}
    keys = {name: sessions[name].submit(requests[name]) for name in names}
    ov._shared.pipeline(None).step()  # one step of the one pipeline: all three prefill
    ov._shared.pipeline(None).step()  # and all three decode
    assert all(live.read() for s in sessions.values() for live in s._running.values())
    for name in names:
        done, _ = collect_all(sessions[name])
        assert done[keys[name]] == hf.with_adapter(name).generate([requests[name]])[0], name
        sessions[name].close()


def test_adapter_mode_merged_gives_each_adapter_its_own_export(
    hf: HFBackend, tiny: Path, lora_dirs: dict[str, Path]
) -> None:
    adapters = {name: str(path) for name, path in lora_dirs.items()}
    with OpenVINOBackend(str(tiny), batch_size=3, adapters=adapters, threads=1,
                         adapter_mode="merged") as merged:
        requests = [greedy(p, 10) for p in PROMPTS]
        folders = {}
        for name in (None, "planner", "grounder"):
            assert merged.with_adapter(name).generate(requests) == \
                hf.with_adapter(name).generate(requests), name
            folders[name] = merged.with_adapter(name).export_path()
        assert merged.info().details["adapter_mode"] == "merged"
    assert len(set(folders.values())) == 3
    for name, folder in folders.items():
        assert (folder / MANIFEST).is_file()
        assert folder == export_folder(resolve_model(str(tiny)),
                                       lora_dirs[name] if name else None)[0]


def test_adapters_that_cannot_be_routed_are_merged_or_refused(
    tiny: Path, lora_dirs: dict[str, Path], tmp_path: Path
) -> None:
    dora = tmp_path / "dora"
    dora.mkdir()
    for file in lora_dirs["grounder"].iterdir():
        (dora / file.name).write_bytes(file.read_bytes())
    config = json.loads((dora / "adapter_config.json").read_text())
    (dora / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    adapters = {"planner": lora_dirs["planner"], "grounder": dora}
    assert routing_problem({"planner": lora_dirs["planner"]}) is None
    assert "use_dora" in (routing_problem(adapters) or "")
    (dora / "adapter_config.json").write_text(json.dumps({**config, "fan_in_fan_out": True}))
    assert "fan_in_fan_out" in (routing_problem(adapters) or "")  # GPT-2's Conv1D layers
    (dora / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    assert _routes("auto", adapters) is False
    assert _routes("auto", {"planner": lora_dirs["planner"]}) is False  # one adapter: merged
    both = dict(lora_dirs)
    assert _routes("auto", both, batch_size=2) is True
    assert _routes("auto", both, batch_size=1) is False  # one sequence at a time: merged
    assert _routes("merged", both) is False
    assert _routes("routed", {"planner": lora_dirs["planner"]}) is True
    with pytest.raises(BackendError, match="cannot share a routed export.*use_dora"):
        _routes("routed", adapters)
    with pytest.raises(ValueError, match="adapter_mode must be one of"):
        OpenVINOBackend(str(tiny), adapter_mode="stacked")


def test_int8_weights_are_a_separate_export_whose_log_probabilities_stay_close(
    hf: HFBackend, tiny: Path, lora_dirs: dict[str, Path]
) -> None:
    adapters = {name: str(path) for name, path in lora_dirs.items()}
    requests = [greedy(p, 8, logprobs=True) for p in PROMPTS]
    with OpenVINOBackend(str(tiny), batch_size=3, adapters=adapters, threads=1,
                         weights="int8") as small:
        got = small.with_adapter("grounder").generate(requests)
        folder = small.export_path()
        assert small.info().details["weights"] == "int8"
    assert folder != export_folder(resolve_model(str(tiny)), lora_dirs)[0]
    assert json.loads((folder / MANIFEST).read_text())["weights"] == "int8"
    model = ov_runtime.Core().read_model(folder / "openvino_model.xml")
    constants = [op for op in model.get_ops() if op.get_type_name() == "Constant"]
    int8 = [op for op in constants if op.get_element_type() == ov_runtime.Type.i8]
    # each layer's q, o, gate, up and down, and the head: not k and v (16 wide), nor the LoRA
    assert len(int8) == 2 * 5 + 1
    # greedy tokens as hf's fp32 up to a near tie, and their log-probabilities close
    expected = hf.with_adapter("grounder").generate(requests)
    same = 0
    for a, b in zip(got, expected, strict=True):
        ours, theirs = a.tokens.completion_ids, b.tokens.completion_ids
        common = next((i for i, (x, y) in enumerate(zip(ours, theirs, strict=True)) if x != y),
                      len(ours))
        same += common
        gaps = [abs(x - y) for x, y in zip(a.tokens.logprobs[:common],
                                           b.tokens.logprobs[:common], strict=True)]
        assert max(gaps, default=0.0) < 0.25  # this random model's weights are large (std 1)
    assert same >= 8  # this model is full of near ties: 22 of 40 tokens before they part
    with pytest.raises(ValueError, match="weights must be one of"):
        OpenVINOBackend(str(tiny), weights="int4")


def test_lora_on_embeddings_is_merged_by_default_and_refused_routed(
    hf: HFBackend, tiny: Path, lora_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Its config passes the cheap check; the export finds the embedding layer and says so."""
    base = AutoModelForCausalLM.from_pretrained(tiny)
    config = peft.LoraConfig(r=2, target_modules=["embed_tokens", "q_proj"],
                             init_lora_weights=False)
    with quiet_peft_deprecations():
        peft.get_peft_model(base, config).save_pretrained(tmp_path / "embed")
    adapters = {"planner": str(lora_dirs["planner"]), "embed": str(tmp_path / "embed")}
    with pytest.raises(BackendError, match="embed_tokens.*use adapter_mode='merged'"):
        OpenVINOBackend(str(tiny), adapters=adapters, threads=1, adapter_mode="routed")
    with OpenVINOBackend(str(tiny), adapters=adapters, threads=1, batch_size=3) as merged:
        assert merged.info().details["adapter_mode"] == "merged"
        request = greedy(PROMPTS[1], 6)
        assert merged.with_adapter("planner").generate([request]) == \
            hf.with_adapter("planner").generate([request])


def test_an_export_is_reused_and_keyed_by_the_adapter_checksum(
    tiny: Path, lora_dirs: dict[str, Path], tmp_path: Path
) -> None:
    source = resolve_model(str(tiny))
    planner, _ = export_folder(source, lora_dirs["planner"])
    stamp = (planner / "openvino_model.bin").stat().st_mtime_ns
    with OpenVINOBackend(str(tiny), adapter=str(lora_dirs["planner"]), threads=1) as again:
        assert again.export_path() == planner
        again.generate([greedy("x", 2)])
    assert (planner / "openvino_model.bin").stat().st_mtime_ns == stamp  # not exported again
    # the same adapter in another folder has the same key; changed weights have another
    copy = tmp_path / "copy"
    copy.mkdir()
    for file in lora_dirs["planner"].iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    assert export_folder(source, copy)[0] == planner
    weights = copy / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert export_folder(source, copy)[0] != planner


def test_chat_requests_errors_and_close(hf: HFBackend, ov: OpenVINOBackend) -> None:
    chat = GenerationRequest(messages=({"role": "user", "content": "the planner"},),
                             max_new_tokens=6)
    too_long = greedy("x " * 200, 8)
    expected = hf.with_adapter("planner").generate([chat])
    got = ov.with_adapter("planner").generate([chat, too_long])
    assert got[0] == expected[0]
    assert got[1].stop_reason == "error" and "context length" in (got[1].error or "")
    view = ov.with_adapter("grounder")
    view.close()
    with pytest.raises(BackendError, match="closed"):
        view.generate([greedy("x")])
    assert ov.generate([greedy("x", 1)])[0].output_tokens == 1  # the owner still works
    with pytest.raises(BackendError, match="no adapter named"):
        ov.with_adapter("policy")


def test_the_factory_builds_it_with_views_per_role(
    tiny: Path, lora_dirs: dict[str, Path]
) -> None:
    info = None
    with build_backend("openvino", str(tiny), batch_size=2, threads=1) as plain:
        assert isinstance(plain, OpenVINOBackend)
        info = plain.info()
    assert info.backend == "openvino" and info.details["dtype"] == "float32"
    options = ModelOptions(
        backend="openvino", model=str(tiny), options={"threads": 1},
        adapters={"planner": str(lora_dirs["planner"]), "grounder": str(lora_dirs["grounder"])},
    )
    backends = build_backends(["planner", "grounder"], options)
    try:
        assert backends["planner"].adapter == "planner"  # type: ignore[attr-defined]
        assert backends["grounder"].adapter == "grounder"  # type: ignore[attr-defined]
        adapters = backends["planner"].info().details["adapters"]
        assert set(adapters) == {"planner", "grounder"}
    finally:
        backends.close()
    with pytest.raises(ValueError, match="unknown dtype"):
        make_backend("openvino", str(tiny), dtype="int3")


def test_the_default_backend_is_openvino_on_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from lumos_gym.models.factory import BACKEND_ENV, default_backend

    monkeypatch.delenv(BACKEND_ENV, raising=False)
    expected = "hf" if torch.cuda.is_available() else "openvino"
    assert default_backend() == expected == ModelOptions().backend
    monkeypatch.setenv(BACKEND_ENV, "hf")
    assert default_backend() == "hf" == ModelOptions().backend


# -- sessions: continuous batching -------------------------------------------------------------
def collect_all(session, wait: bool = True) -> tuple[dict, list[int]]:
    """Collect until nothing is in flight: the completions by key, and the keys in order."""
    done, order = {}, []
    while session.in_flight:
        for key, completion in session.collect(wait=wait):
            done[key] = completion
            order.append(key)
    return done, order


@pytest.mark.parametrize("adapter", [None, "planner"])
def test_a_session_completes_each_request_as_generate_does(
    ov: OpenVINOBackend, adapter: str | None
) -> None:
    backend = ov.with_adapter(adapter)
    free = backend.generate([greedy(p, 20) for p in PROMPTS])
    stops = [c.text[len(c.text) // 2 : len(c.text) // 2 + 2] for c in free]
    requests = [greedy(p, n) for p, n in zip(PROMPTS, [12, 5, 20, 1, 9], strict=True)]
    requests += [greedy(p, 20, stop=(s,)) for p, s in zip(PROMPTS, stops, strict=True)]
    requests += [
        GenerationRequest(messages=({"role": "user", "content": "the planner"},),
                          max_new_tokens=6),
        greedy("x " * 200, 8),  # over the context: an error completion, nothing decoded
    ]
    expected = backend.generate(requests)
    for wait in (True, False):
        with backend.open_session() as session:
            keys = [session.submit(request) for request in requests]
            done, order = collect_all(session, wait)
        assert [done[key] for key in keys] == expected
        assert sorted(order) == keys  # each key came back once
    assert expected[-1].stop_reason == "error"
    assert {c.stop_reason for c in expected[5:10]} == {"stop"}


def test_short_requests_leave_first_and_new_ones_join_while_a_long_one_decodes(
    ov: OpenVINOBackend,
) -> None:
    backend = ov.with_adapter(None)  # batch_size 3: the long request and two others decode
    long, late = greedy(PROMPTS[0], 100), greedy(PROMPTS[4], 4)
    shorts = [greedy(p, 3) for p in PROMPTS[1:4]]
    expected = backend.generate([long, *shorts, late])
    with backend.open_session() as session:
        long_key = session.submit(long)
        short_keys = [session.submit(request) for request in shorts]
        first: dict[int, object] = {}
        while len(first) < len(shorts):
            first.update(session.collect())
        assert set(first) == set(short_keys)  # every short one before the long one
        assert session.in_flight == 1
        late_key = session.submit(late)  # joins while the long one decodes
        rest, order = collect_all(session)
    assert order == [late_key, long_key]
    assert [first[k] for k in short_keys] == expected[1:4]
    assert [rest[long_key], rest[late_key]] == [expected[0], expected[4]]


def test_generate_while_a_session_decodes_and_closing_a_session(ov: OpenVINOBackend) -> None:
    backend = ov.with_adapter(None)
    long, short = greedy(PROMPTS[0], 60), greedy(PROMPTS[1], 5)
    expected = backend.generate([long, short])
    with backend.open_session() as session:
        key = session.submit(long)
        assert session.collect(wait=False) == []  # one step: the long request decodes on
        assert backend.generate([short]) == [expected[1]]  # goes through a session of its own
        assert session.in_flight == 1
        done, _ = collect_all(session)
    assert done == {key: expected[0]}
    session = backend.open_session()
    session.submit(long)
    session.collect(wait=False)
    session.close()  # cancels the request decoding
    assert session.in_flight == 0 and session.collect() == []
    assert backend.generate([long, short]) == expected  # the pipeline is usable again


def test_stop_strings_are_matched_here_and_a_stopped_request_leaves_the_pipeline(
    hf: HFBackend, ov: OpenVINOBackend,
) -> None:
    """OpenVINO never sees a stop string (its matcher was seen to hang); ours frees the slot."""
    backend = ov.with_adapter(None)
    free = backend.generate([greedy(PROMPTS[0], 60)])[0]
    stop = free.text[3:5]  # early in a long completion
    request = greedy(PROMPTS[0], 60, stop=(stop,))
    assert backend._config(request).stop_strings == set()
    with backend.open_session() as session:
        key = session.submit(request)
        done, _ = collect_all(session)
    assert done[key].stop_reason == "stop" and done[key].text == free.text[: free.text.index(stop)]
    assert done[key].output_tokens < free.output_tokens == 60
    # stops found late in a long completion (only the newest tokens are decoded then), and
    # one longer than a token, end where the hf backend's do
    late = [free.text[-12:-9], free.text[-30:-22], free.text[len(free.text) // 2:][:6]]
    requests = [greedy(PROMPTS[0], 60, stop=(s,)) for s in late]
    assert backend.generate(requests) == hf.generate(requests)
    pipeline = backend._shared.pipeline(None)
    pipeline.step()  # the stopped request is freed at the next step
    assert not pipeline.has_non_finished_requests()


@pytest.fixture(scope="module")
def ov_long(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenVINOBackend]:
    """The tiny model with room for the few-shot prompts of a math env (2048 positions)."""
    folder = tmp_path_factory.mktemp("tiny-llama-2048")
    save_tiny_model(folder, max_positions=2048)
    with OpenVINOBackend(str(folder), batch_size=3, threads=1) as backend:
        yield backend


def test_the_runner_gives_the_same_records_continuous_and_in_rounds(
    ov_long: OpenVINOBackend,
) -> None:
    specs = [EpisodeSpec("lumos/GSM8K-v0", f"gsm8k/sample/{n}") for n in range(4)]
    records = {}
    for continuous in (True, False):
        agent = make_agent("react", max_rounds=3, max_new_tokens=24)
        runner = Runner(agent, {"policy": ov_long}, max_in_flight=3, continuous=continuous)
        records[continuous] = {
            r.task_id: {k: v for k, v in r.to_dict().items() if not k.endswith("_s")}
            for r in runner.run(specs)
        }
    assert records[True] == records[False]
    assert all(r["status"] == "completed" for r in records[True].values())
    assert all(r["output_tokens"] > 0 for r in records[True].values())


def test_bf16_runs_only_where_the_cpu_computes_it_and_says_so(
    tiny: Path, caplog: pytest.LogCaptureFixture
) -> None:
    native = "BF16" in native_precisions("CPU")
    with caplog.at_level(logging.WARNING, logger="lumos_gym.models.openvino_backend"):
        backend = OpenVINOBackend(str(tiny), dtype="bf16", threads=1)
    with backend:
        details = backend.info().details
    assert details["dtype_asked"] == "bfloat16"
    if native:  # AMX or AVX-512 BF16: the fast path runs
        assert details["dtype"] == "bfloat16"
        assert "does not compute in bf16" not in caplog.text
    else:  # never silently: a warning, and the run records what was computed
        assert details["dtype"] == "float32"
        assert "does not compute in bf16" in caplog.text
