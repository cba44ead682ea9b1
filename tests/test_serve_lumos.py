"""``lumos-gym serve`` as users deploy Lumos: many adapters on one base, chat-only APIs,
clients that go away, and requests the server must refuse.

Real parts throughout: a tiny Llama and two LoRA adapters built here, the hf backend, the served
app under uvicorn, the ``openai`` backend (and the official ``openai`` client) talking to it.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the hf backend needs torch")
httpx = pytest.importorskip("httpx")
peft = pytest.importorskip("peft")

from conftest import save_tiny_model  # noqa: E402
from test_backend_openai import running  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from lumos_gym.cli import main  # noqa: E402
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate  # noqa: E402
from lumos_gym.models.base import CANCELLED, GenerationRequest  # noqa: E402
from lumos_gym.models.hf import HFBackend  # noqa: E402
from lumos_gym.models.openai_backend import OpenAIBackend  # noqa: E402
from lumos_gym.models.serve import create_app, served_adapters  # noqa: E402

CPU = "cpu"
LONG = 4096  # positions of the model that decodes long enough to be abandoned


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=LONG)


@pytest.fixture(scope="module")
def adapters(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two random LoRA adapters of the tiny model, saved as `lumos-gym train` saves one."""
    folders = {}
    for seed, role in enumerate(["planner", "grounder"]):
        torch.manual_seed(200 + seed)
        base = AutoModelForCausalLM.from_pretrained(tiny)
        config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                 init_lora_weights=False)
        folders[role] = tmp_path_factory.mktemp(f"adapter-{role}")
        peft.get_peft_model(base, config).save_pretrained(folders[role])
    return folders


@pytest.fixture(scope="module")
def base(tiny: Path, adapters: dict[str, Path]):
    """The tiny model with both adapters, served as lumos-i-planner and lumos-i-grounder."""
    named = {f"lumos-i-{role}": str(folder) for role, folder in adapters.items()}
    with HFBackend(str(tiny), adapters=named, device=CPU, batch_size=4) as hf:
        yield hf


def lumos_app(base: HFBackend, **options):
    names = [name for name in base.info().details["adapters"]]
    return create_app(base, model_name="tiny", adapters={n: base.with_adapter(n) for n in names},
                      **options)


def greedy(text: str, n: int = 8, **kwargs) -> GenerationRequest:
    return GenerationRequest(prompt=text, max_new_tokens=n, **kwargs)


# -- many adapters behind one server ---------------------------------------------------------------
def test_each_adapter_is_a_model_name_and_answers_as_its_view(base: HFBackend) -> None:
    prompts = [greedy("Subgoal 1: Calculate", 10), greedy("the planner", 6)]
    expected = {name: base.with_adapter(name).generate(prompts)
                for name in ("lumos-i-planner", "lumos-i-grounder")}
    expected["tiny"] = base.generate(prompts)
    assert expected["lumos-i-planner"] != expected["lumos-i-grounder"]  # adapters differ
    app = lumos_app(base)
    with running(app) as url:
        listed = httpx.get(f"{url}/v1/models").json()["data"]
        got = {}
        for name in expected:
            with OpenAIBackend(name, base_url=url, mode="completions") as client:
                got[name] = client.generate(prompts)
    assert {m["id"]: m["parent"] for m in listed} == {
        "tiny": None, "lumos-i-planner": "tiny", "lumos-i-grounder": "tiny"}
    for name, completions in expected.items():
        assert [c.text for c in got[name]] == [c.text for c in completions], name


def test_requests_for_two_adapters_at_once_batch_and_keep_their_adapters(
    base: HFBackend,
) -> None:
    request = greedy("Action 1: R1 = Calculator(", 8)
    expected = {n: base.with_adapter(n).generate([request])[0].text
                for n in ("lumos-i-planner", "lumos-i-grounder")}
    app = lumos_app(base, max_wait_s=0.2)
    results: dict[str, str] = {}
    with running(app) as url:
        def ask(name: str) -> None:
            with OpenAIBackend(name, base_url=url, mode="completions") as client:
                results[name] = client.generate([request])[0].text
        threads = [threading.Thread(target=ask, args=(n,)) for n in expected]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == expected
    assert sum(app.state.batcher.batch_sizes.values()) == 1  # one batch held both adapters


def test_served_adapters_resolve_agents_modules_and_folders(adapters: dict[str, Path],
                                                            tiny: Path) -> None:
    base_model, own, modules = served_adapters(
        None, lora_modules={"p": str(adapters["planner"])})
    assert (base_model, own, modules) == (str(tiny), None, {"p": str(adapters["planner"])})
    base_model, own, modules = served_adapters(str(adapters["grounder"]))
    assert (base_model, own, modules) == (str(tiny), str(adapters["grounder"]), {})
    base_model, own, modules = served_adapters(None, agent="lumos-i")
    assert set(modules) == {"lumos-i-planner", "lumos-i-grounder"}
    assert base_model == "smollm2-135m" and own is None
    from lumos_gym.errors import BackendError
    with pytest.raises(BackendError, match="no adapters are shipped for the agent 'react'"):
        served_adapters(None, agent="react")


def test_evaluate_through_the_server_plays_the_in_process_episodes(
    base: HFBackend, tiny: Path, adapters: dict[str, Path], tmp_path: Path
) -> None:
    """`evaluate --agent lumos-i --backend openai` asks for AGENT-ROLE names by default."""
    local = ModelOptions(backend="hf", model=str(tiny), batch_size=4, reference=False,
                         adapters={r: str(f) for r, f in adapters.items()},
                         options={"device": CPU})
    evaluate(RunConfig("lumos-i", envs=["GSM8K-v0"], limit=3, models=local,
                       out=tmp_path / "local", progress=False))
    with running(lumos_app(base)) as url:
        served = ModelOptions(backend="openai", base_url=f"{url}/v1", batch_size=4)
        evaluate(RunConfig("lumos-i", envs=["GSM8K-v0"], limit=3, models=served,
                           out=tmp_path / "served", progress=False))
    episodes = {}
    for side in ("local", "served"):
        lines = (tmp_path / side / "episodes.jsonl").read_text().splitlines()
        episodes[side] = {r["key"]: r for r in map(json.loads, lines)}
    run = json.loads((tmp_path / "served" / "run.json").read_text())
    assert run["backends"]["planner"]["model_id"] == "lumos-i-planner"
    assert episodes["local"].keys() == episodes["served"].keys()
    for key, record in episodes["local"].items():
        assert episodes["served"][key]["turns"] == record["turns"], key
        assert episodes["served"][key]["reward"] == record["reward"]


def test_role_model_args_name_the_served_models() -> None:
    from lumos_gym.cli.evaluate import served_role_models
    from lumos_gym.errors import ModelSpecError

    given = {"planner": "p", "grounder": "g", "timeout": 5}
    assert served_role_models("openai", given) == {"planner": "p", "grounder": "g"}
    assert given == {"timeout": 5}
    with pytest.raises(ModelSpecError, match="--backend openai; give --planner"):
        served_role_models("hf", {"planner": "p"})


# -- chat-only APIs --------------------------------------------------------------------------------
def test_auto_mode_finds_a_chat_only_server_and_says_so_once(
    base: HFBackend, caplog: pytest.LogCaptureFixture
) -> None:
    app = lumos_app(base, completions=False)
    with running(app) as url:
        assert httpx.post(f"{url}/v1/completions",
                          json={"model": "tiny", "prompt": "x"}).status_code == 404
        with caplog.at_level(logging.WARNING, "lumos_gym.models.openai_backend"):
            with OpenAIBackend("lumos-i-planner", base_url=url, max_concurrency=2) as client:
                first = client.generate([greedy("Task: add 3 and 4", 6),
                                         greedy("Task: add 5 and 6", 6)])
                second = client.generate([greedy("Task: add 7 and 8", 6)])
                details = client.info().details
    chat = base.with_adapter("lumos-i-planner").generate([GenerationRequest(
        messages=({"role": "user", "content": "Task: add 3 and 4"},), max_new_tokens=6)])
    assert first[0].text == chat[0].text  # the prompt went as one user message
    assert all(c.stop_reason != "error" for c in [*first, *second])
    said = [r for r in caplog.records if "offers no completions endpoint" in r.getMessage()]
    assert len(said) == 1 and details["chat_only_detected"] is True


def test_a_missing_model_is_not_taken_for_a_missing_endpoint(base: HFBackend) -> None:
    with running(lumos_app(base)) as url:
        with OpenAIBackend("nope", base_url=url, check=False) as client:
            [completion] = client.generate([greedy("x")])
            assert client.info().details.get("chat_only_detected") is None
    assert completion.stop_reason == "error" and "does not exist" in (completion.error or "")


def test_streaming_answers_in_the_openai_event_format(base: HFBackend) -> None:
    openai = pytest.importorskip("openai")
    expected = base.with_adapter("lumos-i-grounder").generate([greedy("Subgoal 1:", 7)])[0]
    with running(lumos_app(base)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", max_retries=0)
        pieces = list(client.completions.create(model="lumos-i-grounder", prompt="Subgoal 1:",
                                                max_tokens=7, temperature=0, stream=True))
        chunks = list(client.chat.completions.create(
            model="lumos-i-grounder", messages=[{"role": "user", "content": "hi"}],
            max_tokens=5, temperature=0, stream=True, stream_options={"include_usage": True}))
    assert "".join(p.choices[0].text for p in pieces) == expected.text
    assert pieces[-1].choices[0].finish_reason == expected.stop_reason
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 1


# -- requests the network can lose -----------------------------------------------------------------
def test_a_client_that_goes_away_stops_its_request_in_the_engine(base: HFBackend) -> None:
    """The client is killed mid-request: the engine stops decoding it at the next step."""
    app = lumos_app(base)
    batcher = app.state.batcher
    budget = LONG - 64  # decoding all of it takes the tiny model many seconds
    with running(app) as url:
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps({"model": "tiny", "prompt": "Subgoal 1:", "max_tokens": budget,
                           "temperature": 0, "stop": ["NEVER"]}).encode()
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.monotonic() + 30
        while not batcher.busy:  # the request is decoding
            assert time.monotonic() < deadline, "the request never reached the engine"
            time.sleep(0.01)
        sock.close()  # the client dies
        while batcher.busy:
            assert time.monotonic() < deadline, "the engine kept decoding for nobody"
            time.sleep(0.01)
        stopped = list(batcher.stopped)
        # the engine is free for the next client
        with OpenAIBackend("tiny", base_url=url, mode="completions") as client:
            assert client.generate([greedy("next", 3)])[0].stop_reason != "error"
    assert len(stopped) == 1 and stopped[0].error == CANCELLED
    assert stopped[0].output_tokens < budget


def test_a_request_cancelled_before_it_runs_is_never_decoded(base: HFBackend) -> None:
    [completion] = base.generate([greedy("x", 50, cancelled=lambda: True)])
    assert completion.stop_reason == "error" and completion.error == CANCELLED
    assert completion.output_tokens == 0


def test_the_default_timeout_grows_with_the_budget() -> None:
    backend = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", check=False)
    with backend:
        assert backend.request_timeout(256) > backend.request_timeout(16) >= 60
    fixed = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", check=False, timeout=5)
    with fixed:
        assert fixed.request_timeout(256) == 5


# -- requests the server must refuse ---------------------------------------------------------------
@pytest.mark.parametrize(("field", "value"), [("max_tokens", 10**30), ("seed", 2**70),
                                              ("temperature", 9), ("seed", -1)])
def test_out_of_range_fields_are_client_errors(base: HFBackend, field: str, value: int) -> None:
    with running(lumos_app(base)) as url:
        answer = httpx.post(f"{url}/v1/completions",
                            json={"model": "tiny", "prompt": "x", field: value})
    assert answer.status_code == 400 and field in answer.json()["error"]["message"]


def test_a_prompt_over_the_context_is_a_400_and_a_huge_one_is_refused_untokenized(
    base: HFBackend,
) -> None:
    app = lumos_app(base)
    with running(app) as url:
        over = httpx.post(f"{url}/v1/completions",
                          json={"model": "tiny", "prompt": "a " * 3000, "max_tokens": 2000})
        sizes_before = dict(app.state.batcher.batch_sizes)
        huge = httpx.post(f"{url}/v1/chat/completions", json={
            "model": "tiny", "messages": [{"role": "user", "content": "b" * 200_000}]})
        assert dict(app.state.batcher.batch_sizes) == sizes_before  # never reached the model
    assert over.status_code == 400 and "context length" in over.json()["error"]["message"]
    assert huge.status_code == 400
    assert huge.json()["error"]["code"] == "context_length_exceeded"


def test_a_50_mb_body_is_refused_with_a_413_before_it_is_read(base: HFBackend) -> None:
    app = lumos_app(base)
    body = b'{"model": "tiny", "prompt": "' + b"x" * (50 * 2**20) + b'"}'
    with running(app) as url:
        answer = httpx.post(f"{url}/v1/completions", content=body,
                            headers={"Content-Type": "application/json"})
        assert sum(app.state.batcher.batch_sizes.values()) == 0
    assert answer.status_code == 413


def test_the_api_key_is_required_when_set(base: HFBackend) -> None:
    with running(lumos_app(base, api_key="k3y")) as url:
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/v1/models").status_code == 401
        with OpenAIBackend("tiny", base_url=url, api_key="k3y", mode="completions") as client:
            assert client.generate([greedy("x", 2)])[0].stop_reason != "error"
        from lumos_gym.errors import BackendError
        with pytest.raises(BackendError, match="refused the API key"):
            OpenAIBackend("tiny", base_url=url, api_key="wrong")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lumos_gym.cli", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ("--host", "0.0.0.0"),
    ("--port", "99999"),
    ("--batch-size", "-1"),
    ("--lora-modules", "planner"),
    ("--agent", "react"),
])
def test_bad_serve_options_are_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    done = run_cli("serve", *args)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(lines) <= 2, done.stderr
    if args[0] == "--host":
        assert "--api-key" in done.stderr and "--insecure" in done.stderr


def test_cli_main_refuses_exposed_serve_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--api-key" in capsys.readouterr().err
