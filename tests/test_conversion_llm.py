"""The LLM converter (rationales into subgoal plans) and the caching backend wrapper."""

from __future__ import annotations

import json

import pytest
from conftest import ScriptedBackend

from lumos_gym.conversion import Annotation, Rejected, parse_subgoal_plan
from lumos_gym.conversion.llm import (
    END_OF_PLAN,
    FEW_SHOTS,
    LLMConverter,
    RationaleItem,
    RejectedConversion,
    clean_output,
    validate_plan,
)
from lumos_gym.errors import DataError
from lumos_gym.models.base import (
    BackendInfo,
    Completion,
    GenerationRequest,
    cut_at_stop,
)
from lumos_gym.models.caching import CachingBackend, request_key
from lumos_gym.tools.base import ToolSpec

GOOD = (
    "Subgoal 1: Calculate how many apples there are in all.\n"
    "Action 1-1: R1 = Calculator(3 + 4) = 7\n"
    "\n"
    "Subgoal 2: Calculate how many apples are left.\n"
    "Action 2-1: R2 = Calculator(R1 - 2) = 5"
)


class ReplyBackend(ScriptedBackend):
    """A scripted backend whose script may also return a whole Completion (length, error)."""

    def generate(self, requests):
        self.batches.append(list(requests))
        out = []
        for request in requests:
            reply = self.script(request)
            if not isinstance(reply, Completion):
                reply = Completion(cut_at_stop(reply, request.stop)[0], "stop", model_id="scripted")
            out.append(reply)
        return out


def task_of(request: GenerationRequest) -> str:
    """Return the task line of the item a request asks about."""
    text = request.messages[-1]["content"] if request.messages else request.prompt
    return text.rsplit("Task: ", 1)[1].split("\n", 1)[0]


def item(n, task_type="math", answer="5"):
    return RationaleItem(f"toy/{n}", "toy", task_type, f"task {n}", f"rationale {n}", answer)


def backend_for(replies, default=GOOD):
    """A backend answering ``task n`` with ``replies[n]`` (``default`` otherwise)."""
    return ReplyBackend(lambda r: replies.get(int(task_of(r).split()[-1]), default))


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -------------------------------------------------------------------------- conversion
def test_good_output_becomes_an_annotation():
    converter = LLMConverter(backend_for({}))
    (result,) = converter.convert([item(0)])
    assert isinstance(result, Annotation)
    assert result.id == "toy/0" and result.task == "task 0" and result.answer == "5"
    assert result.subgoals == parse_subgoal_plan(GOOD)
    assert result.meta["converter"] == "llm" and result.meta["model_id"] == "scripted"
    assert result.meta["prompt_sha256"] == FEW_SHOTS["math"].sha256()
    assert Annotation.from_dict(result.to_dict()) == result


BAD = {
    "prose": ("The answer is 5.", "expected 'Subgoal k: ...'"),
    "action syntax": (
        "Subgoal 1: Add.\nAction 1-1: R1 = Calculator 3 + 4 = 7",
        "Action 1-1: at position",
    ),
    "not an action line": ("Subgoal 1: Add.\nR1 = Calculator(3 + 4) = 7", "expected 'Action"),
    "no action": (
        "Subgoal 1: Add.\n\nSubgoal 2: More.\nAction 2-1: R1 = Calculator(1) = 1",
        "Subgoal 1 has no action",
    ),
    "unknown tool": (
        "Subgoal 1: Look it up.\nAction 1-1: R1 = KnowledgeQuery(apples) = WikipediaPage(apples)",
        "unknown tool 'KnowledgeQuery'",
    ),
    "undefined variable": (
        "Subgoal 1: Add.\nAction 1-1: R2 = Calculator(R1 + 4) = 7",
        "R1 is used before it is defined",
    ),
    "no final value": (
        "Subgoal 1: Add.\nAction 1-1: R1 = Calculator(3 + 4)",
        "does not end in a value",
    ),
    "unbalanced": ("Subgoal 1: Add.\nAction 1-1: R1 = Calculator((3 + 4) = 7", "Action 1-1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_outputs_are_rejected_with_reason_and_raw_output(case):
    output, reason = BAD[case]
    (result,) = LLMConverter(backend_for({0: output})).convert([item(0)])
    assert isinstance(result, RejectedConversion) and isinstance(result, Rejected)
    assert reason in result.reason
    assert result.output == output and result.stop_reason == "stop"
    assert result.to_dict()["task_type"] == "math"


def test_truncated_and_error_outputs_are_rejected():
    replies = {
        0: Completion(GOOD[:40], "length"),
        1: Completion("", "error", error="HTTP 503"),
    }
    results = list(
        LLMConverter(backend_for(replies), max_new_tokens=99).convert([item(0), item(1)])
    )
    assert results[0].reason == "truncated: the output reached max_new_tokens=99"
    assert results[0].output == GOOD[:40] and results[0].stop_reason == "length"
    assert results[1].reason == "backend error: HTTP 503" and results[1].stop_reason == "error"


def test_layout_is_normalised_without_touching_lines():
    messy = "```text\r\n" + GOOD.replace("\n\n", "\n  \n\n").replace("\n", "\r\n") + "\r\n```\n"
    assert clean_output(messy) == GOOD
    (result,) = LLMConverter(backend_for({0: messy})).convert([item(0)])
    assert isinstance(result, Annotation) and result.subgoals == parse_subgoal_plan(GOOD)


def test_batches_have_the_configured_size_and_results_keep_input_order():
    replies = {3: "nonsense", 8: "nonsense"}
    backend = backend_for(replies)
    results = list(LLMConverter(backend, batch_size=4).convert(item(n) for n in range(10)))
    assert [len(b) for b in backend.batches] == [4, 4, 2]
    assert [task_of(r) for b in backend.batches for r in b] == [f"task {n}" for n in range(10)]
    assert [r.id for r in results] == [f"toy/{n}" for n in range(10)]
    assert [type(r).__name__ for r in results].count("RejectedConversion") == 2
    assert all(r.temperature == 0 for b in backend.batches for r in b)


# -------------------------------------------------------------------------- prompts
def test_builtin_few_shot_plans_are_valid():
    for prompt in FEW_SHOTS.values():
        assert prompt.examples and prompt.tools
        for example in prompt.examples:
            validate_plan(parse_subgoal_plan(example.plan), prompt.tools)


def test_chat_request_holds_instruction_examples_and_item():
    converter = LLMConverter(backend_for({}))
    request = converter.request(item(0, answer="5"))
    messages = request.messages
    examples = FEW_SHOTS["math"].examples
    assert len(messages) == 2 * len(examples) + 1
    assert [m["role"] for m in messages] == ["user", "assistant"] * len(examples) + ["user"]
    assert messages[0]["content"].startswith(FEW_SHOTS["math"].instruction)
    assert "Calculator(formula)" in messages[0]["content"]
    assert messages[1]["content"] == examples[0].plan
    assert (
        messages[-1]["content"] == "Task: task 0\nReference solution: rationale 0\nFinal answer: 5"
    )
    qa = converter.request(item(1, task_type="qa", answer=None)).messages
    assert "KnowledgeQuery(query)" in qa[0]["content"]
    assert qa[-1]["content"] == "Task: task 1\nReference solution: rationale 1"


def test_raw_prompt_form_stops_at_the_end_marker():
    backend = backend_for({0: GOOD + "\n" + END_OF_PLAN + "\nTask: more"})
    converter = LLMConverter(backend, chat=False)
    request = converter.request(item(0))
    assert request.prompt.endswith("Final answer: 5\nPlan:\n") and request.stop == (END_OF_PLAN,)
    assert request.prompt.count(END_OF_PLAN) == len(FEW_SHOTS["math"].examples) + 1
    (result,) = converter.convert([item(0)])
    assert isinstance(result, Annotation) and result.subgoals == parse_subgoal_plan(GOOD)
    assert backend.batches[0][0].stop == (END_OF_PLAN,)
    assert clean_output(GOOD + "\n" + END_OF_PLAN + "\nTask: more") == GOOD  # ran past the stop
    assert clean_output(GOOD + "\n\nFinal answer: 8") == GOOD  # the input's answer echoed
    assert clean_output(GOOD + "\nFinal answer: 8").endswith("Final answer: 8")  # not a block


def test_other_task_types_use_the_env_tools_or_fail_clearly():
    specs = [ToolSpec("Lookup", "Lookup(name)", "Find a record by name")]
    plan = "Subgoal 1: Find Ann.\nAction 1-1: R1 = Lookup(Ann) = Ann, 10"
    backend = backend_for({0: plan, 1: GOOD})
    converter = LLMConverter(backend, tools={"db": specs})
    first = converter.request(item(0, task_type="db")).messages[0]["content"]
    assert "Lookup(name): Find a record by name;" in first and "Calculator" not in first
    good, bad = converter.convert([item(0, task_type="db"), item(1, task_type="db")])
    assert isinstance(good, Annotation)
    assert "unknown tool 'Calculator' (allowed: Lookup)" in bad.reason
    with pytest.raises(ValueError, match="no conversion prompt for task type 'web'"):
        converter.request(item(2, task_type="web"))


# -------------------------------------------------------------------------- files
def run_file(backend, items, tmp, **kwargs):
    converter = LLMConverter(backend, **kwargs)
    return converter.convert_file(items, tmp / "out.jsonl", tmp / "rejected.jsonl")


def test_convert_file_writes_both_files_and_same_input_gives_same_bytes(tmp_path):
    replies = {2: "nonsense"}
    items = [item(n) for n in range(5)]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        stats = run_file(backend_for(replies), items, tmp_path / name, batch_size=2)
        assert (stats.converted, stats.rejected, stats.skipped, stats.errors) == (4, 1, 0, 0)
    for name in ("out.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert [r["id"] for r in lines(tmp_path / "a" / "out.jsonl")] == [
        "toy/0",
        "toy/1",
        "toy/3",
        "toy/4",
    ]
    (rejected,) = lines(tmp_path / "a" / "rejected.jsonl")
    assert rejected["id"] == "toy/2" and rejected["output"] == "nonsense"
    assert "expected 'Subgoal k: ...'" in rejected["reason"]
    # a finished run is skipped whole: not one request
    backend = backend_for(replies)
    stats = run_file(backend, items, tmp_path / "a")
    assert stats.skipped == 5 and backend.batches == []


def test_resume_after_a_kill_mid_write_converts_only_the_rest(tmp_path):
    items = [item(n) for n in range(7)]
    replies = {5: "nonsense"}
    (tmp_path / "ref").mkdir()
    run_file(backend_for(replies), items, tmp_path / "ref", batch_size=3)
    (tmp_path / "run").mkdir()
    run_file(backend_for(replies), items, tmp_path / "run", batch_size=3)
    out = tmp_path / "run" / "out.jsonl"
    data = out.read_bytes()
    cut = data.index(b"\n", data.index(b"\n") + 1) + 1  # two whole lines...
    out.write_bytes(data[: cut + 25])  # ...and part of the third
    (tmp_path / "run" / "rejected.jsonl").write_bytes(b"")
    backend = backend_for(replies)
    stats = run_file(backend, items, tmp_path / "run", batch_size=3)
    assert [task_of(r) for b in backend.batches for r in b] == [f"task {n}" for n in range(2, 7)]
    assert (stats.converted, stats.rejected, stats.skipped) == (4, 1, 2)
    for name in ("out.jsonl", "rejected.jsonl"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_resume_after_a_crash_in_the_backend(tmp_path):
    items = [item(n) for n in range(6)]

    def crash_on_4(request):
        if task_of(request) == "task 4":
            raise ConnectionError("killed")
        return GOOD

    with pytest.raises(ConnectionError):
        run_file(ReplyBackend(crash_on_4), items, tmp_path, batch_size=2)
    assert [r["id"] for r in lines(tmp_path / "out.jsonl")] == [f"toy/{n}" for n in range(4)]
    backend = backend_for({})
    stats = run_file(backend, items, tmp_path, batch_size=2)
    assert [[task_of(r) for r in b] for b in backend.batches] == [["task 4", "task 5"]]
    ids = [r["id"] for r in lines(tmp_path / "out.jsonl")]
    assert ids == [f"toy/{n}" for n in range(6)] and stats.skipped == 4


def test_backend_errors_are_not_written_and_are_retried(tmp_path):
    items = [item(0), item(1)]
    stats = run_file(backend_for({1: Completion("", "error", error="timeout")}), items, tmp_path)
    assert (stats.converted, stats.rejected, stats.errors) == (1, 0, 1)
    assert (tmp_path / "rejected.jsonl").read_text() == ""
    backend = backend_for({})
    stats = run_file(backend, items, tmp_path)
    assert [task_of(r) for b in backend.batches for r in b] == ["task 1"]
    assert [r["id"] for r in lines(tmp_path / "out.jsonl")] == ["toy/0", "toy/1"]


def test_repeated_ids_and_corrupt_files_fail_loudly(tmp_path):
    with pytest.raises(DataError, match="repeats the id 'toy/1'"):
        run_file(backend_for({}), [item(1), item(2), item(1)], tmp_path)
    (tmp_path / "out.jsonl").write_text('{"id": "toy/1"}\nnot json\n{"id": "toy/2"}\n')
    with pytest.raises(DataError, match="out.jsonl:2"):
        run_file(backend_for({}), [item(3)], tmp_path)


def test_rationale_item_from_dict():
    record = {"id": 3, "dataset": "gsm8k", "task_type": "math", "task": "t", "rationale": "r"}
    assert RationaleItem.from_dict(record) == RationaleItem("3", "gsm8k", "math", "t", "r")
    with pytest.raises(DataError, match="rationale"):
        RationaleItem.from_dict({"id": 1, "dataset": "d", "task_type": "math", "task": "t"})


# -------------------------------------------------------------------------- caching
def greedy(text, **kwargs):
    return GenerationRequest(prompt=text, **kwargs)


def echo_backend():
    return ScriptedBackend(lambda r: f"answer to {r.prompt}")


def test_cache_answers_a_second_run_without_the_wrapped_backend(tmp_path):
    path = tmp_path / "cache.jsonl"
    requests = [greedy("a"), greedy("b"), greedy("c", stop=("\n",))]
    first = CachingBackend(echo_backend(), path).generate(requests)
    inner = echo_backend()
    cached = CachingBackend(inner, path)
    assert len(cached) == 3
    assert cached.generate(requests) == first and inner.batches == []
    assert (cached.hits, cached.misses) == (3, 0)


def test_only_uncached_requests_are_sent_as_one_batch_in_order(tmp_path):
    inner = echo_backend()
    cache = CachingBackend(inner, tmp_path / "cache.jsonl")
    cache.generate([greedy("b"), greedy("d")])
    results = cache.generate([greedy("a"), greedy("b"), greedy("c"), greedy("d"), greedy("a")])
    assert [c.text for c in results] == [f"answer to {x}" for x in "abcda"]
    assert [[r.prompt for r in b] for b in inner.batches] == [["b", "d"], ["a", "c"]]


def test_sampled_requests_bypass_the_cache(tmp_path):
    path = tmp_path / "cache.jsonl"
    inner = echo_backend()
    cache = CachingBackend(inner, path)
    sampled = greedy("s", temperature=0.7, seed=1)
    cache.generate([sampled])
    cache.generate([sampled])
    assert len(inner.batches) == 2 and len(cache) == 0
    assert not path.exists() or path.read_text() == ""


def test_errors_are_not_cached(tmp_path):
    failing = ReplyBackend(lambda r: Completion("", "error", error="down"))
    cache = CachingBackend(failing, tmp_path / "cache.jsonl")
    assert cache.generate([greedy("a")])[0].stop_reason == "error"
    assert len(cache) == 0
    inner = echo_backend()
    assert CachingBackend(inner, tmp_path / "cache.jsonl").generate([greedy("a")])[0].text == (
        "answer to a"
    )
    assert len(inner.batches) == 1


def test_key_covers_the_request_and_the_model():
    base = request_key(greedy("a"), "m")
    assert base == request_key(greedy("a"), "m")
    others = [
        request_key(greedy("a"), "other-model"),
        request_key(greedy("b"), "m"),
        request_key(greedy("a", stop=("\n",)), "m"),
        request_key(greedy("a", max_new_tokens=9), "m"),
        request_key(greedy("a", seed=1), "m"),
        request_key(GenerationRequest(messages=({"role": "user", "content": "a"},)), "m"),
    ]
    assert len({base, *others}) == len(others) + 1


def test_cache_file_survives_a_kill_and_delegates_info_and_close(tmp_path):
    path = tmp_path / "cache.jsonl"
    CachingBackend(echo_backend(), path).generate([greedy("a"), greedy("b")])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10])  # the last line half written
    inner = echo_backend()
    cache = CachingBackend(inner, path)
    assert len(cache) == 1
    cache.generate([greedy("a"), greedy("b")])
    assert [[r.prompt for r in b] for b in inner.batches] == [["b"]]
    assert len(CachingBackend(echo_backend(), path)) == 2
    assert cache.info() == BackendInfo(backend="scripted", model_id="scripted")
    cache.close()
    assert inner.closed
    path.write_text('{"key": "k"}\n')
    with pytest.raises(DataError, match="cache.jsonl:1"):
        CachingBackend(echo_backend(), path)


def test_converter_through_the_cache_gives_the_same_files_with_no_request(tmp_path):
    items = [item(n) for n in range(4)]
    cache_path = tmp_path / "cache.jsonl"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    run_file(CachingBackend(backend_for({1: "nonsense"}), cache_path), items, tmp_path / "a")
    inner = backend_for({})  # would answer differently, but is never asked
    run_file(CachingBackend(inner, cache_path), items, tmp_path / "b")
    assert inner.batches == []
    for name in ("out.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
