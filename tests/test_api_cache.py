"""``lumos-gym evaluate --cache DIR``: a repeated API run pays nothing; usage and cost in run.json.

The model is a real ``lumos-gym serve`` app (:func:`lumos_gym.models.serve.create_app`) in
uvicorn on 127.0.0.1, around a small deterministic backend that counts the requests it is
asked; the evaluation reaches it through the ``openai`` backend, as an API run would.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence

import pytest
from conftest import ScriptedBackend, SteppedBackend
from test_backend_openai import running

from lumos_gym.cli import main
from lumos_gym.errors import DataError, EvaluationError
from lumos_gym.evaluation.evaluate import ModelOptions, RunConfig, evaluate
from lumos_gym.evaluation.usage import usage_blocks
from lumos_gym.models.base import Backend, BackendInfo, Completion, GenerationRequest
from lumos_gym.models.caching import (
    CachingBackend,
    CompletionCache,
    Usage,
    model_identity,
    process_file_name,
    request_key,
)
from lumos_gym.models.serve import create_app

SERVED = "counter"


class CountingModel(Backend):
    """A deterministic model that counts every request it is asked (thread-safe).

    It answers ``"42"`` to a greedy request and ``"<seed mod 97>"`` to a sampled one, with
    one prompt token per word and one completion token per character.
    """

    name = "counting"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []
        self._lock = threading.Lock()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        with self._lock:
            self.requests.extend(requests)
        return [self._one(r) for r in requests]

    def _one(self, request: GenerationRequest) -> Completion:
        source = request.prompt if request.prompt is not None else request.messages[-1]["content"]
        text = "42" if request.temperature == 0 else str(request.seed % 97)
        return Completion(text, "stop", input_tokens=len(source.split()),
                          output_tokens=len(text), model_id=SERVED)

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id=SERVED)


def _evaluate(url: str, out, cache, *flags: str) -> int:
    return main(["evaluate", "--backend", "openai", "--base-url", url, "--model", SERVED,
                 "--agent", "direct", "--env", "GSM8K-v0", "--limit", "2",
                 "--max-new-tokens", "8", "--cache", str(cache), "--out", str(out),
                 "--no-progress", *flags])


def _episodes(out) -> list[dict]:
    timings = ("wall_s", "env_s", "tool_s", "model_s")
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in row.items() if k not in timings} for row in rows]
    return sorted(rows, key=lambda row: row["key"])  # Ray workers finish in any order


@pytest.fixture
def server():
    model = CountingModel()
    with running(create_app(model, model_name=SERVED, max_wait_s=0.001)) as url:
        yield model, url


def test_a_repeated_api_run_with_cache_sends_no_request(server, tmp_path, capsys):
    model, url = server
    cache = tmp_path / "cache"
    assert _evaluate(url, tmp_path / "first", cache, "--prices", "0.5,2") == 0
    sent = len(model.requests)
    assert sent > 0
    first = json.loads((tmp_path / "first" / "run.json").read_text())
    assert first["usage"]["requests"] == sent
    assert first["usage"]["roles"]["policy"]["requests"] == sent
    prompt_tokens = first["usage"]["prompt_tokens"]
    assert prompt_tokens == sum(len((r.prompt or "").split()) for r in model.requests) > 0
    assert first["usage"]["completion_tokens"] == 2 * sent
    assert first["usage"]["cost_usd"] == round((prompt_tokens * 0.5 + 2 * sent * 2) / 1e6, 6)
    assert first["cache"]["hits"] == 0 and first["cache"]["misses"] == sent
    said = capsys.readouterr().out
    assert f"model calls: {sent} sent, 0 from cache" in said
    both = prompt_tokens + 2 * sent  # and the rate over the episodes' time
    assert re.search(rf"; {both:,} tokens in [0-9.]+ s: [0-9,]+ tokens/s, [0-9,]+ written/s",
                     said), said

    assert _evaluate(url, tmp_path / "second", cache, "--prices", "0.5,2") == 0
    assert len(model.requests) == sent  # the server was asked nothing more
    assert _episodes(tmp_path / "second") == _episodes(tmp_path / "first")
    second = json.loads((tmp_path / "second" / "run.json").read_text())
    assert second["usage"]["requests"] == 0 and second["usage"]["cost_usd"] == 0
    assert second["cache"]["dir"] == str(cache)
    assert (second["cache"]["hits"], second["cache"]["misses"]) == (sent, 0)
    assert second["cache"]["saved_prompt_tokens"] == prompt_tokens
    assert second["cache"]["saved_completion_tokens"] == 2 * sent
    assert second["cache"]["saved_cost_usd"] == first["usage"]["cost_usd"]
    summary = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert summary["provenance"]["cache"]["hits"] == sent
    assert f"model calls: 0 sent, {sent} from cache" in capsys.readouterr().out
    assert [p.name for p in cache.iterdir()] == [process_file_name()]


def test_a_sampled_run_is_cached_under_its_seeds(server, tmp_path):
    model, url = server
    cache = tmp_path / "cache"
    assert _evaluate(url, tmp_path / "a", cache, "--temperature", "0.7") == 0
    sent = len(model.requests)
    assert sent > 0 and len({r.seed for r in model.requests}) == sent  # a seed per call
    assert _evaluate(url, tmp_path / "b", cache, "--temperature", "0.7") == 0
    assert len(model.requests) == sent
    assert _episodes(tmp_path / "b") == _episodes(tmp_path / "a")
    assert _evaluate(url, tmp_path / "c", cache, "--temperature", "0.9") == 0
    assert len(model.requests) == 2 * sent  # another temperature is another request


def test_json_output_stays_clean_and_resume_keeps_each_sessions_counts(server, tmp_path,
                                                                       capsys):
    model, url = server
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert _evaluate(url, out, cache, "--format", "json") == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # the summary alone
    assert "model calls:" in captured.err
    episodes = out / "episodes.jsonl"
    episodes.write_text(episodes.read_text().splitlines(keepends=True)[0])  # one episode lost
    assert _evaluate(url, out, cache, "--resume") == 0
    run = json.loads((out / "run.json").read_text())
    earlier = run["sessions"][-1]
    assert earlier["usage"]["requests"] == len(model.requests) > 0
    assert run["usage"]["requests"] == 0 and run["cache"]["hits"] > 0


def test_bad_prices_and_cache_with_token_records_are_refused(tmp_path, capsys):
    for value in ("1", "1,2,3", "a,b", "-1,2", "nan,1"):
        with pytest.raises(SystemExit):
            main(["evaluate", "--agent", "oracle", "--prices", value, "--out", str(tmp_path)])
        err = capsys.readouterr().err
        assert "argument --prices: " in err and "Traceback" not in err
    with pytest.raises(EvaluationError, match="non-negative"):
        RunConfig("oracle", prices=(1.0, -2.0))
    with pytest.raises(EvaluationError, match="--record-tokens"):
        RunConfig("oracle", cache=tmp_path, record_tokens=True)
    (tmp_path / "file").write_text("")
    with pytest.raises(EvaluationError, match="cannot write the cache"):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=1, out=tmp_path / "o",
                           cache=tmp_path / "file" / "cache", progress=False,
                           backends={"policy": ScriptedBackend(lambda r: "4")}))


def test_in_process_backends_are_counted_without_a_cache(tmp_path):
    backend = ScriptedBackend(lambda r: "4")
    result = evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=2, out=tmp_path,
                                backends={"policy": backend}, progress=False))
    run = json.loads((tmp_path / "run.json").read_text())
    assert "cache" not in run and result.usage == {"usage": run["usage"]}
    assert run["usage"]["requests"] == sum(len(b) for b in backend.batches) == 2
    oracle = evaluate(RunConfig("oracle", envs=["GSM8K-v0"], limit=1, out=tmp_path / "o",
                                progress=False))
    assert oracle.usage is None
    assert "usage" not in json.loads((tmp_path / "o" / "run.json").read_text())


def test_a_run_stopped_by_the_user_records_what_it_sent(tmp_path):
    def answer(request):
        if len(backend.batches) > 1:
            raise KeyboardInterrupt
        return "4"

    backend = ScriptedBackend(answer)
    with pytest.raises(KeyboardInterrupt):
        evaluate(RunConfig("direct", envs=["GSM8K-v0"], limit=3, out=tmp_path,
                           models=ModelOptions(batch_size=1), backends={"policy": backend},
                           progress=False))
    assert json.loads((tmp_path / "run.json").read_text())["usage"]["requests"] == 1


# ---------------------------------------------------------------- the cache itself
def greedy(text: str, **kwargs) -> GenerationRequest:
    return GenerationRequest(prompt=text, **kwargs)


def echo() -> ScriptedBackend:
    return ScriptedBackend(lambda r: f"{r.prompt} at {r.temperature} seed {r.seed}")


def test_sampled_requests_are_keyed_by_temperature_and_seed(tmp_path):
    store = CompletionCache(tmp_path, folder=True)
    inner = echo()
    cache = CachingBackend(inner, store, sampled=True)
    first = cache.generate([greedy("a", temperature=0.7, seed=1)])
    assert cache.generate([greedy("a", temperature=0.7, seed=1)]) == first
    cache.generate([greedy("a", temperature=0.7, seed=2), greedy("a", temperature=0.9, seed=1)])
    assert len(inner.batches) == 2 and len(inner.batches[1]) == 2
    assert (cache.usage.hits, cache.usage.misses, cache.usage.requests) == (1, 3, 3)
    assert cache.generate([greedy("a", temperature=0.7, seed=1, logprobs=True)])  # text only
    assert len(inner.batches) == 3 and cache.usage.misses == 3


def test_a_killed_run_leaves_a_cache_that_loads(tmp_path):
    CachingBackend(echo(), CompletionCache(tmp_path, folder=True)).generate(
        [greedy("a"), greedy("b")])
    mine = tmp_path / process_file_name()
    data = mine.read_bytes()
    other = tmp_path / "cache-elsewhere-1.jsonl"
    other.write_bytes(data[: len(data) - 10])  # another process, killed mid-line
    mine.unlink()
    store = CompletionCache(tmp_path, folder=True)
    assert len(store) == 1
    assert other.read_bytes() == data[: len(data) - 10]  # another process's file is not cut
    inner = echo()
    CachingBackend(inner, store).generate([greedy("a"), greedy("b")])
    assert [[r.prompt for r in b] for b in inner.batches] == [["b"]]
    assert len(CompletionCache(tmp_path, folder=True)) == 2
    (tmp_path / "bad.jsonl").write_text('{"key": "k"}\n')
    with pytest.raises(DataError, match="bad.jsonl:1"):
        CompletionCache(tmp_path, folder=True)


def test_old_cache_files_still_answer_greedy_requests(tmp_path):
    path = tmp_path / "old.jsonl"
    completion = {"text": "old", "stop_reason": "stop", "input_tokens": 1, "output_tokens": 1,
                  "model_id": "scripted"}
    path.write_text(json.dumps({"key": request_key(greedy("a"), "scripted", 1),
                                "completion": completion}) + "\n")
    inner = echo()
    cache = CachingBackend(inner, path)
    assert cache.generate([greedy("a")])[0].text == "old" and inner.batches == []
    assert request_key(greedy("a"), "m") != request_key(greedy("a"), "m", 1)


def test_the_key_names_the_backend_model_and_adapter():
    plain = BackendInfo("hf", "base", {"adapter": None, "adapters": {"p": "/a/p"}})
    view = BackendInfo("hf", "base", {"adapter": "p", "adapters": {"p": "/a/p"}})
    assert model_identity(plain) == "hf:base"
    assert model_identity(view) == "hf:base@/a/p"
    assert model_identity(BackendInfo("openai", "gpt", {"base_url": "http://x"})) == "openai:gpt"


def test_roles_on_one_backend_batch_together_and_count_apart(tmp_path):
    inner = echo()
    store = CompletionCache(tmp_path, folder=True)
    planner, grounder = (CachingBackend(inner, store) for _ in range(2))
    assert planner.batch_group() == grounder.batch_group() is not None
    planner.generate([greedy("x")])
    results = planner.generate_mixed([(planner, greedy("x")), (grounder, greedy("y")),
                                      (grounder, greedy("y"))])
    assert [c.text for c in results] == ["x at 0.0 seed 0", "y at 0.0 seed 0", "y at 0.0 seed 0"]
    assert [[r.prompt for r in b] for b in inner.batches] == [["x"], ["y"]]
    assert (planner.usage.requests, planner.usage.hits) == (1, 1)
    assert (grounder.usage.requests, grounder.usage.hits) == (1, 1)


class View(ScriptedBackend):
    """An adapter view of one model: views batch together through ``generate_mixed``."""

    def __init__(self, adapter: str, mixed: list) -> None:
        super().__init__(lambda r: f"{adapter}: {r.prompt}", {"adapter": adapter})
        self.mixed = mixed

    def batch_group(self):
        return "one model"

    def generate_mixed(self, pairs):
        self.mixed.append([(view.details["adapter"], r.prompt) for view, r in pairs])
        return [view.generate([r])[0] for view, r in pairs]


def test_views_of_one_model_keep_their_mixed_batches(tmp_path):
    mixed: list = []
    store = CompletionCache(tmp_path, folder=True)
    planner, grounder = (CachingBackend(View(a, mixed), store) for a in ("p", "g"))
    assert planner.batch_group() == grounder.batch_group() == ("cached", "one model")
    results = planner.generate_mixed([(planner, greedy("x")), (grounder, greedy("x"))])
    assert [c.text for c in results] == ["p: x", "g: x"]  # one prompt, two adapters: two keys
    assert mixed == [[("p", "x"), ("g", "x")]]
    assert grounder.generate([greedy("x")])[0].text == "g: x" and len(mixed) == 1


def test_a_backend_with_its_own_session_keeps_it(tmp_path):
    inner = SteppedBackend(lambda r: f"answer {r.prompt}")
    cache = CachingBackend(inner, CompletionCache(tmp_path, folder=True))
    assert cache.batch_group() is None
    cache.generate([greedy("a")])
    with cache.open_session() as session:
        keys = [session.submit(greedy("a")), session.submit(greedy("b"))]
        done = dict(session.collect())
        while session.in_flight:
            done.update(session.collect())
    assert [done[k].text for k in keys] == ["answer a", "answer b"]
    assert inner.submitted_at(lambda r: r.prompt == "a") == []  # answered from the cache
    assert (cache.usage.hits, cache.usage.requests) == (1, 2)


def test_usage_blocks_sum_the_roles():
    usage = {"planner": Usage(requests=2, prompt_tokens=1000, completion_tokens=10),
             "grounder": Usage(requests=1, prompt_tokens=500, completion_tokens=5, hits=3,
                               saved_prompt_tokens=2000)}
    blocks = usage_blocks(usage, cache="c", prices=(1.0, 4.0))
    assert blocks["usage"]["requests"] == 3 and blocks["usage"]["prompt_tokens"] == 1500
    assert blocks["usage"]["cost_usd"] == round((1500 + 15 * 4) / 1e6, 6)
    assert blocks["usage"]["roles"]["grounder"]["cost_usd"] == round((500 + 20) / 1e6, 6)
    assert blocks["cache"]["hits"] == 3 and blocks["cache"]["saved_cost_usd"] == 0.002
    assert "cache" not in usage_blocks(usage)


# slow tier: starts its own Ray instance and two actors that each load torch (22 s on
# quiet cores, 86 s under load); `make test-slow` runs it
@pytest.mark.slow
def test_ray_workers_share_the_cache_and_report_their_usage(tmp_path):
    ray = pytest.importorskip("ray")
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent)  # actors unpickle the scripted backend here
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=True,
             logging_level="ERROR", runtime_env={"env_vars": {"PYTHONPATH": tests}})
    try:
        runs = {}
        for name in ("first", "second"):
            runs[name] = evaluate(RunConfig(
                "direct", envs=["GSM8K-v0"], limit=4, out=tmp_path / name, ray=True, workers=2,
                backends={"policy": ScriptedBackend(lambda r: "4")}, cache=tmp_path / "cache",
                progress=False,
            ))
    finally:
        ray.shutdown()
    first, second = (runs[n].usage for n in ("first", "second"))
    assert first["usage"]["requests"] == 4 and first["cache"]["misses"] == 4
    assert second["usage"]["requests"] == 0 and second["cache"]["hits"] == 4
    assert _episodes(tmp_path / "second") == _episodes(tmp_path / "first")
    assert len(list((tmp_path / "cache").glob("cache-*.jsonl"))) >= 1
