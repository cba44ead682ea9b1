"""The complex-QA family: QA metrics, the ``QA`` tool (reference and model backends), ``QAEnv``.

The model backend runs on the tiny random Llama of conftest.py through lumos-gym's real ``hf``
backend; its output is arbitrary, so those tests check what reaches the model (byte-exact
prompts) and that any output becomes one string value. Scripted answers (conftest's
``ScriptedBackend``) drive the parsing and retry rules. The tasks are invented here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from conftest import ScriptedBackend
from gymnasium.utils.env_checker import check_env

from lumos_gym.actions import parse_action
from lumos_gym.envs.qa.base import QA_TOOLS, QAEnv, qa_tool_options, task_documents
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import (
    BackendError,
    DataError,
    LumosGymError,
    ToolError,
    UndefinedVariableError,
)
from lumos_gym.models.base import Backend, BackendInfo, Completion, GenerationRequest
from lumos_gym.retrieval import Document
from lumos_gym.scoring.qa import (
    JUDGE_PROMPT,
    exact_match,
    f1,
    judge_correct,
    normalize_answer,
    qa_scores,
    yes_no,
)
from lumos_gym.tools import ToolContext, ToolResult
from lumos_gym.tools.qa import QA, parse_qa_output, question_key

# The prompts as Lumos' eval/hotpotqa/qa_tool.py and run_eval.py send them, typed out here.
LUMOS_QA = (
    "Please answer the following question according to the context. Please answer with one "
    "brief entity, beginning with 'Answer: '. If the answer can't be found in the context, "
    "answer 'No answer'. No more details and explanations.\n\nQuestion: Q?\nContext: C\n"
)
LUMOS_NO_CONTEXT = (
    "Please answer the following question. Please answer with one brief entity, beginning with "
    "'Answer: '. If the answer can't be answered, output 'No answer'. No more details and "
    "explanations.\n\nQuestion: Q?\n"
)
LUMOS_FORCED = (
    "Please answer the following question. Please answer with one brief entity, beginning with "
    "'Answer: '.\n\nQuestion: Q?\n"
)
LUMOS_JUDGE = (
    "Please judge whether the model prediction can be regarded as correct according to the "
    "given question and its ground-truth answer. Please answer 'CORRECT' or 'INCORRECT'. No "
    "more details and explanations.\n\nQuestion: Q?\nModel prediction: P\nGround-truth answer: "
    "G\n"
)

EVIDENCE = (
    "Evidence 1: Tarrow Khan *** Tarrow Khan founded the Vell Dominion in 1206.\n"
    "Evidence 2: Tarrow Khan *** He was born in 1162 near the Osk River in Vellmark."
)
SUB_ANSWERS = {
    "Who founded the Vell Dominion?": "Tarrow Khan",
    "Where was Tarrow Khan born?": "Vellmark",
    "When was Tarrow Khan born?": "1162",
    "Was Tarrow Khan a ruler?": "yes",
    "What is the capital of the Vell Dominion?": "Kharos",
}


def qa_task(**meta_updates) -> Task:
    meta = {
        "documents": [
            {"title": "Tarrow Khan", "text": "Tarrow Khan founded the Vell Dominion in 1206. "
             "He was born in 1162 near the Osk River in Vellmark."},
            {"title": "Osk River", "text": ["The Osk River flows north.", "It is 800 km long."]},
        ],
        "sub_answers": {"Who founded the Vell Dominion?": "Tarrow Khan",
                        "Where was Tarrow Khan born?": "Vellmark"},
        "aliases": ["Vell Mark"],
        "answer_type": "span",
        "subgoals": ["Subgoal 1: Find the founder.", "Subgoal 2: Find the birthplace."],
    }
    meta.update(meta_updates)
    context = "Tarrow Khan founded the Vell Dominion in 1206 and was born in Vellmark."
    return Task(
        id="toyqa/dev/vell-1",
        question="In which land was the founder of the Vell Dominion born?",
        answer="Vellmark",
        task_type="qa",
        gold_actions=(
            f"R1 = QA([{context}], Question: Who founded the Vell Dominion?)",
            f"R2 = QA([{context}], Question: Where was Tarrow Khan born?)",
            "Answer(R2)",
        ),
        meta=meta,
    )


def yes_no_task() -> Task:
    return Task(
        id="toyqa/dev/vell-2",
        question="Was the Vell Dominion founded after 1200?",
        answer="yes",
        task_type="qa",
        gold_actions=("R1 = Calculator(1206 > 1200)", "Answer(R1)"),
        meta={"answer_type": "yes/no", "sub_answers": {}},
    )


def run_qa(tool: QA, text: str, ctx: ToolContext) -> ToolResult:
    return tool.run(parse_action(text), ctx)


def reference_ctx(**variables: str) -> ToolContext:
    return ToolContext(variables={"R2": EVIDENCE, **variables},
                       reference={"sub_answers": SUB_ANSWERS})


# ----------------------------------------------------------------------------------- metrics
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("An apple a day", "apple day"),
        ("O'Neil, Jr.", "oneil jr"),
        ("Theater of the absurd", "theater of absurd"),
        ("  1,206 ", "1206"),
        (None, ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_uses_normalisation_and_aliases():
    assert exact_match("the Beatles.", "Beatles") == 1.0
    assert exact_match("Beatle", "Beatles") == 0.0
    assert exact_match("Fab Four", ["Beatles", "The Fab Four"]) == 1.0
    assert exact_match(None, "x") == 0.0


def test_f1_by_hand():
    # pred tokens: quick brown fox (3); gold: quick red fox jumps (4); common: quick, fox.
    # precision 2/3, recall 2/4, F1 = 2 * (2/3 * 1/2) / (2/3 + 1/2) = 4/7.
    assert f1("The quick brown fox", "quick red fox jumps") == pytest.approx(4 / 7)
    assert f1("fox", ["dog", "a fox"]) == 1.0  # the best gold answer counts
    assert f1("cat", "dog") == 0.0
    # hotpot_evaluate_v1's f1_score: no common token scores 0, two empty answers too (issue 34;
    # this was 1.0, SQuAD's rule, which MuSiQue's F1 keeps)
    assert f1("", "") == 0.0
    assert f1("", "", variant="squad") == 1.0
    assert f1("", "dog") == 0.0


def test_f1_yes_no_and_noanswer_only_match_exactly():
    assert f1("yes it is", "yes") == 0.0  # would be 0.5 by token overlap
    assert f1("no", "no way") == 0.0
    assert f1("No answer", "noanswer") == 0.0
    assert f1("Yes.", "yes") == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes, he did.", "yes"),
        ("TRUE", "yes"),
        ("false", "no"),
        ("No.", "no"),
        ("No answer", None),
        ("His eyes were blue", None),
        ("maybe", None),
        (True, "yes"),
        (False, "no"),
    ],
)
def test_yes_no(text, expected):
    assert yes_no(text) == expected


def test_qa_scores_per_answer_type():
    assert qa_scores("Yes, it was", "yes", answer_type="yes/no") == {
        "exact_match": 0.0, "f1": 0.0, "accuracy": 1.0}
    assert qa_scores("no", "yes")["accuracy"] == 0.0  # the type is inferred from the gold
    assert qa_scores("No answer", "no")["accuracy"] == 0.0
    number = qa_scores("1206.0", "1206", answer_type="number")
    assert number["exact_match"] == 0.0 and number["accuracy"] == 1.0
    assert qa_scores("1,206", "1206", answer_type="number")["exact_match"] == 1.0
    span = qa_scores("Vell Mark", "Vellmark", aliases=["Vell Mark"], answer_type="span")
    assert span == {"exact_match": 1.0, "f1": 1.0, "accuracy": 1.0}
    partial = qa_scores("Osk River valley", "Osk River", answer_type="span")
    assert partial["accuracy"] == 0.0 and partial["f1"] == pytest.approx(0.8)
    assert qa_scores(None, "Vellmark")["accuracy"] == 0.0
    with pytest.raises(ValueError, match="answer_type"):
        qa_scores("x", "x", answer_type="date")


def test_judge_prompt_is_lumos_bytes_and_only_exact_correct_counts():
    replies = iter(["CORRECT", "  CORRECT \n", "INCORRECT", "CORRECT.", "Correct"])
    judge = ScriptedBackend(lambda request: next(replies))
    scores = [judge_correct(judge, "Q?", "P", "G") for _ in range(5)]
    assert scores == [1.0, 1.0, 0.0, 0.0, 0.0]
    request = judge.batches[0][0]
    assert request.messages == ({"role": "user", "content": LUMOS_JUDGE},)
    assert JUDGE_PROMPT.format(question="Q?", prediction="P", ground_truth="G") == LUMOS_JUDGE
    assert request.temperature == 0.0 and request.max_new_tokens == 100
    raw = ScriptedBackend(lambda request: "CORRECT")
    assert judge_correct(raw, "Q?", "P", "G", chat=False) == 1.0
    assert raw.batches[0][0].prompt == f"<|user|>\n{LUMOS_JUDGE.strip()}\n<|assistant|>\n"


def test_judge_failure_is_a_backend_error():
    def fail(request):
        raise RuntimeError("server went away")

    with pytest.raises(BackendError, match="server went away"):
        judge_correct(ScriptedBackend(fail), "Q?", "P", "G")


# ------------------------------------------------------------------------ QA: argument rules
def test_parse_qa_output():
    assert parse_qa_output("Answer: Vellmark.") == "Vellmark"
    assert parse_qa_output("  answer:  1162 ") == "1162"
    assert parse_qa_output("Answer: No answer.") is None
    assert parse_qa_output("No answer") is None
    assert parse_qa_output("Vellmark is the place</s>") == "Vellmark is the place"
    assert parse_qa_output("Answer: ") is None
    assert parse_qa_output("") is None


def test_question_key_ignores_case_punctuation_and_spaces():
    key = question_key("Where was Tarrow Khan born?")
    assert key == question_key("where was tarrow  khan born") == "wherewastarrowkhanborn"


def test_qa_spec_is_lumos_wording():
    assert QA.spec.signature == "QA(context, query)"
    assert QA.spec.doc == "Given context, answer the given query"


# ---------------------------------------------------------------------- QA: reference backend
def test_reference_hit_and_miss():
    tool, ctx = QA(backend="reference"), reference_ctx()
    hit = run_qa(tool, "R3 = QA([R2], Question: where was tarrow khan born)", ctx)
    assert hit.values == ("Vellmark",)
    miss = run_qa(tool, "R3 = QA([R2], Question: Who succeeded Tarrow Khan?)", ctx)
    assert miss.values == ("No answer",)
    assert [entry["verdict"] for entry in ctx.state["QA"]] == ["found", "unknown question"]


def test_reference_question_forms():
    tool, ctx = QA(backend="reference"), reference_ctx(R1="Tarrow Khan")
    assert run_qa(tool, "R3 = QA([R2], Query: Who founded the Vell Dominion?)", ctx).values == (
        "Tarrow Khan",)
    assert run_qa(tool, "R3 = QA(R2, Who founded the Vell Dominion?)", ctx).values == (
        "Tarrow Khan",)
    # variables in the question are substituted before the lookup
    assert run_qa(tool, "R3 = QA([R2], Question: Where was R1 born?)", ctx).values == (
        "Vellmark",)


def test_reference_requires_the_evidence_for_spans():
    ctx = reference_ctx(R5="Evidence 1: Osk River *** The Osk River flows north.")
    tool = QA(backend="reference")
    assert run_qa(tool, "R6 = QA([R5], Question: Where was Tarrow Khan born?)", ctx).values == (
        "No answer",)
    assert ctx.state["QA"][-1]["verdict"] == "answer not in the context"
    # a second context that holds it is enough
    assert run_qa(tool, "R6 = QA([R5, R2], Question: Where was Tarrow Khan born?)", ctx).values \
        == ("Vellmark",)
    # numbers and yes/no answers need no evidence
    assert run_qa(tool, "R6 = QA([R5], Question: When was Tarrow Khan born?)", ctx).values == (
        "1162",)
    assert run_qa(tool, "R6 = QA([R5], Question: Was Tarrow Khan a ruler?)", ctx).values == (
        "yes",)
    # "Kharos" must occur as a word, not inside another one
    ctx2 = reference_ctx(R5="Evidence 1: The Kharosian plains are wide.")
    capital = "R6 = QA([R5], Question: What is the capital of the Vell Dominion?)"
    assert run_qa(tool, capital, ctx2).values == ("No answer",)
    lenient = QA(backend="reference", require_evidence=False)
    assert run_qa(lenient, capital, ctx2).values == ("Kharos",)


def test_reference_literal_context():
    ctx = ToolContext(reference={"sub_answers": SUB_ANSWERS})
    tool = QA(backend="reference")
    result = run_qa(tool, "R1 = QA([Tarrow Khan was born in Vellmark.], Question: "
                          "Where was Tarrow Khan born?)", ctx)
    assert result.values == ("Vellmark",)


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        ("R3 = QA([R2])", ToolError, "needs a question"),
        ("R3 = QA([R2], Question: )", ToolError, "needs a question"),
        ("R3 = QA([], Question: Who?)", ToolError, "empty context"),
        ("R3 = QA()", ToolError, "needs a context"),
        ("R3 = QA([R9], Question: Who?)", UndefinedVariableError, "R9"),
    ],
)
def test_bad_input_is_a_clear_error(action, error, message):
    with pytest.raises(error, match=message):
        run_qa(QA(backend="reference"), action, reference_ctx())


def test_reference_without_reference_facts_says_why():
    ctx = ToolContext(variables={"R2": EVIDENCE})
    with pytest.raises(ToolError, match="privileged"):
        run_qa(QA(backend="reference"), "R3 = QA([R2], Question: Who?)", ctx)


def test_bad_options_fail_at_construction():
    with pytest.raises(ToolError, match="backend"):
        QA(backend="oracle")
    with pytest.raises(ToolError, match="BACKEND:MODEL"):
        QA(model="smollm2")
    with pytest.raises(ToolError, match="max_new_tokens"):
        QA(max_new_tokens=0)


# ------------------------------------------------------------------ QA: model, scripted replies
def scripted_qa(*replies: str, **options) -> tuple[QA, ScriptedBackend]:
    queue = list(replies)
    backend = ScriptedBackend(lambda request: queue.pop(0))
    return QA(model=backend, **options), backend


def sent(backend: ScriptedBackend) -> list[str]:
    return [request.messages[0]["content"] for batch in backend.batches for request in batch]


def test_model_answer_is_parsed():
    tool, backend = scripted_qa("Answer: Tarrow Khan.\nMore text")
    ctx = ToolContext(variables={"R2": "C"})
    assert run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx).values == ("Tarrow Khan",)
    assert sent(backend) == [LUMOS_QA]
    (request,) = backend.batches[0]
    assert request.stop == ("\n", "</s>") and request.max_new_tokens == 100
    assert request.temperature == 0.0
    assert ctx.state["QA"][0]["completion"] == "Answer: Tarrow Khan."


def test_no_answer_retries_without_context():
    tool, backend = scripted_qa("Answer: No answer", "Answer: 1162")
    ctx = ToolContext(variables={"R2": "C"})
    assert run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx).values == ("1162",)
    assert sent(backend) == [LUMOS_QA, LUMOS_NO_CONTEXT]
    assert [e["kind"] for e in ctx.state["QA"]] == ["context", "no-context"]


def test_must_answer_yes_no_forces_the_retry():
    tool, backend = scripted_qa("No answer", "Answer: yes")
    ctx = ToolContext(variables={"R2": "C"})
    result = run_qa(tool, "R3 = QA([R2], Question: Q? Must answer yes/no)", ctx)
    assert result.values == ("yes",)
    forced = LUMOS_FORCED.replace("Q?", "Q? Must answer yes/no")
    assert sent(backend) == [LUMOS_QA.replace("Q?", "Q? Must answer yes/no"), forced]


def test_off_format_and_empty_outputs():
    tool, _ = scripted_qa("  Vellmark, a land  ")
    ctx = ToolContext(variables={"R2": "C"})
    assert run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx).values == ("Vellmark, a land",)
    tool, backend = scripted_qa("", "No answer")
    assert run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx).values == ("No answer",)
    assert len(sent(backend)) == 2


def test_model_failure_is_a_tool_error():
    def fail(request):
        raise RuntimeError("connection reset")

    tool = QA(model=ScriptedBackend(fail))
    with pytest.raises(ToolError, match="connection reset"):
        run_qa(tool, "R3 = QA([R2], Question: Q?)", ToolContext(variables={"R2": "C"}))


def test_auto_chat_falls_back_to_raw_when_chat_is_refused():
    def completions_only(request):
        if request.messages is not None:
            raise BackendError("mode='completions' cannot send chat messages")
        return "Answer: Kharos"

    backend = ScriptedBackend(completions_only)
    tool = QA(model=backend)
    ctx = ToolContext(variables={"R2": "C"})
    assert run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx).values == ("Kharos",)
    assert tool.chat is False
    assert backend.batches[-1][0].prompt == f"<|user|>\n{LUMOS_QA.strip()}\n<|assistant|>\n"
    with pytest.raises(ToolError, match="cannot send chat messages"):
        run_qa(QA(model=backend, chat=True), "R3 = QA([R2], Question: Q?)", ctx)


def test_unloadable_model_is_a_tool_error(tmp_path):
    tool = QA(model=f"hf:{tmp_path / 'missing-model'}")
    with pytest.raises(ToolError, match="cannot start the QA model"):
        run_qa(tool, "R3 = QA([R2], Question: Q?)", ToolContext(variables={"R2": "C"}))


# ------------------------------------------------------------------ QA: model, real tiny model
class Recording(Backend):
    """Passes requests to a real backend and keeps them (to check what reaches the model)."""

    name = "recording"

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.requests: list[GenerationRequest] = []
        self.completions: list[Completion] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.requests += requests
        completions = self.inner.generate(requests)
        self.completions += completions
        return completions

    def info(self) -> BackendInfo:
        return self.inner.info()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Iterator[Path]:
    torch = pytest.importorskip("torch")
    from conftest import save_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model only pays for thread hand-offs
    yield save_tiny_model(tmp_path_factory.mktemp("tiny-qa"), max_positions=1024)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_hf(tiny) -> Iterator[Backend]:
    from lumos_gym.models.hf import HFBackend

    with HFBackend(str(tiny), device="cpu", batch_size=1) as hf:
        yield hf


def test_tiny_model_gets_lumos_prompt_as_chat_message(tiny_hf):
    recording = Recording(tiny_hf)
    tool = QA(model=recording)
    ctx = ToolContext(variables={"R2": "C"})
    result = run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx)
    (value,) = result.values
    assert isinstance(value, str) and value and "\n" not in value
    first = recording.requests[0]
    assert first.messages == ({"role": "user", "content": LUMOS_QA},)
    assert first.stop == ("\n", "</s>") and first.max_new_tokens == 100
    assert all(c.stop_reason != "error" for c in recording.completions)
    if len(recording.requests) == 2:  # the random model said "No answer" or nothing
        assert recording.requests[1].messages[0]["content"] == LUMOS_NO_CONTEXT
    assert [e["completion"] for e in ctx.state["QA"]] == [c.text for c in recording.completions]


def test_tiny_model_without_chat_template_gets_the_raw_prompt(tiny):
    from conftest import build_tokenizer

    from lumos_gym.models.hf import HFBackend

    tokenizer = build_tokenizer()
    tokenizer.chat_template = None
    with HFBackend(str(tiny), device="cpu", batch_size=1, tokenizer=tokenizer) as plain:
        recording = Recording(plain)
        tool = QA(model=recording)
        ctx = ToolContext(variables={"R2": "C"})
        (value,) = run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx).values
        assert isinstance(value, str) and value
        assert recording.requests[0].messages is not None  # tried chat first
        assert recording.completions[0].stop_reason == "error"
        assert recording.requests[1].prompt == f"<|user|>\n{LUMOS_QA.strip()}\n<|assistant|>\n"
        assert tool.chat is False  # remembered: later calls go raw at once
        calls = len(recording.requests)
        run_qa(tool, "R3 = QA([R2], Question: Q?)", ctx)
        assert all(r.prompt is not None for r in recording.requests[calls:])
        forced_chat = QA(model=recording, chat=True)
        with pytest.raises(ToolError, match="chat template"):
            run_qa(forced_chat, "R3 = QA([R2], Question: Q?)", ctx)


def test_model_spec_is_loaded_on_first_use_and_closed(tiny):
    tool = QA(model=f"hf:{tiny}")
    assert tool._lm is None  # building the tool loads nothing
    ctx = ToolContext(variables={"R2": EVIDENCE})
    (value,) = run_qa(tool, "R3 = QA([R2], Question: Where was Tarrow Khan born?)", ctx).values
    assert isinstance(value, str) and value
    assert tool._lm is not None
    tool.close()
    tool.close()
    assert tool._lm is None


def test_tools_with_one_spec_share_one_model_until_the_last_closes(tiny):
    first, second = QA(model=f"hf:{tiny}"), QA(model=f"hf:{tiny}")
    ctx = ToolContext(variables={"R2": EVIDENCE})
    action = "R3 = QA([R2], Question: Where was Tarrow Khan born?)"
    run_qa(first, action, ctx)
    run_qa(second, action, ctx)
    shared = first._lm
    assert shared is second._lm  # one model in memory for every env instance
    first.close()
    assert run_qa(second, action, ctx).values  # still open for the other tool
    second.close()
    third = QA(model=f"hf:{tiny}")
    assert third._language_model() is not shared  # the last close freed it
    third.close()


# ----------------------------------------------------------------------------------- QAEnv
def make_env(**kwargs) -> QAEnv:
    options = {"tasks": [qa_task(), yes_no_task()], "tools": ["QA", "Calculator"],
               "qa_backend": "reference", "privileged": True}
    options.update(kwargs)
    return QAEnv(**options)


def test_qa_env_passes_gymnasium_checker():
    env = make_env()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert not [str(w.message) for w in caught]
    env.close()


def test_qa_env_declares_lumos_complex_qa_tools():
    assert QA_TOOLS == ("KnowledgeQuery", "ParagraphRetrieve", "QA", "Calculator", "Code")
    assert QAEnv.task_type == "qa" and QAEnv.primary_metric == "accuracy"
    options = qa_tool_options(qa_model="hf:x", qa_backend="reference", retrieve_backend="bm25")
    assert list(options) == list(QA_TOOLS)
    assert options["KnowledgeQuery"] == {"corpus": "task"}
    assert options["ParagraphRetrieve"] == {"backend": "bm25"}
    assert options["QA"] == {"backend": "reference", "model": "hf:x"}


def test_gold_replay_scores_and_gold_only_after_termination():
    env = make_env()
    observation, info = env.reset(options={"task_id": "toyqa/dev/vell-1"})
    assert observation == "In which land was the founder of the Vell Dominion born?"
    assert "gold_answer" not in info and "metrics" not in info
    task = env.tasks[0]
    for text in task.gold_actions[:-1]:
        observation, reward, terminated, _, info = env.step(text)
        assert not terminated and "gold_answer" not in info
        assert not observation.startswith("Error")
    assert observation == "R2 = Vellmark"
    _, reward, terminated, _, info = env.step("Answer(R2)")
    assert terminated and reward == 1.0
    assert set(info["metrics"]) == {"exact_match", "f1", "accuracy"}
    assert info["gold_answer"] == "Vellmark" and info["prediction"] == "Vellmark"


def test_yes_no_task_and_alias_scoring():
    env = make_env()
    env.reset(options={"task_id": "toyqa/dev/vell-2"})
    env.step("R1 = Calculator(1206 > 1200)")
    _, reward, _, _, info = env.step("Answer(Yes, it was)")
    assert reward == 1.0 and info["metrics"]["exact_match"] == 0.0
    env.reset(options={"task_id": "toyqa/dev/vell-1"})
    _, reward, _, _, info = env.step("Answer(Vell Mark)")
    assert reward == 1.0
    env.reset(options={"task_id": "toyqa/dev/vell-1"})
    _, reward, _, _, info = env.step("Answer(Osk River)")
    assert reward == 0.0 and info["metrics"]["f1"] == 0.0


def test_errors_are_observations():
    env = make_env()
    env.reset(options={"index": 0})
    cases = [
        ("R1 = QA([], Question: Who?)", "empty context"),
        ("R1 = QA([R7], Question: Who?)", "undefined variable R7"),
        ("R1 = QA([R7]", "cannot parse"),
        ("R1 = KnowledgeQuery(Tarrow Khan)", "unknown action"),
    ]
    for action, message in cases:
        observation, reward, terminated, _, info = env.step(action)
        assert observation.startswith("Error:") and message in observation, observation
        assert not terminated and reward == 0.0
    assert info["tool_errors"] == 1 and info["invalid_actions"] == 3


def test_unprivileged_reference_qa_is_an_error_observation():
    env = make_env(privileged=False)
    _, info = env.reset(options={"index": 0})
    assert "gold_actions" not in info
    observation, *_, info = env.step(env.tasks[0].gold_actions[0])
    assert observation.startswith("Error: QA:") and "privileged" in observation
    assert info["tool_errors"] == 1


def test_task_documents_and_reference():
    env = make_env()
    task = env.tasks[0]
    documents = env.task_documents(task)
    assert documents[0] == Document("Tarrow Khan", task.meta["documents"][0]["text"])
    assert documents[1].text == "The Osk River flows north. It is 800 km long."
    assert env.task_reference(task) == {"sub_answers": task.meta["sub_answers"]}
    assert env.task_reference(yes_no_task()) == {"sub_answers": {}}
    env.reset(options={"index": 0})
    assert list(env._episode.context.documents) == documents
    with pytest.raises(DataError, match="title"):
        task_documents(qa_task(documents=[{"text": "no title"}]))


def test_bad_answer_type_is_refused():
    with pytest.raises(LumosGymError, match="answer_type"):
        make_env(tasks=[qa_task(answer_type="date")])


def test_model_qa_env_loads_no_model_until_qa_runs(tiny):
    env = make_env(tools=["QA", "Calculator", "Code"], qa_backend="model", qa_model=f"hf:{tiny}")
    assert env.toolset.names == ["QA", "Calculator", "Code"]
    assert env.toolset.get("QA")._lm is None
    env.reset(options={"index": 0})
    observation, *_ = env.step("R1 = Calculator(2 + 3)")
    assert observation == "R1 = 5" and env.toolset.get("QA")._lm is None
    env.close()


def test_judge_metric_and_prompt_record():
    judge = ScriptedBackend(lambda request: "CORRECT")
    env = make_env(judge=judge)
    assert env.judge_prompt == JUDGE_PROMPT
    assert make_env().judge_prompt is None
    env.reset(options={"index": 0})
    _, reward, _, _, info = env.step("Answer(the Vellmark region)")
    assert reward == 0.0  # exact match fails; the judge is a separate metric
    assert info["metrics"]["judge_accuracy"] == 1.0 and info["metrics"]["judge_error"] == 0.0
    content = judge.batches[0][0].messages[0]["content"]
    assert content == JUDGE_PROMPT.format(question=env.tasks[0].question,
                                          prediction="the Vellmark region",
                                          ground_truth="Vellmark")


def test_failing_judge_does_not_end_the_run():
    def fail(request):
        raise RuntimeError("judge offline")

    env = make_env(judge=ScriptedBackend(fail))
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step("Answer(Vellmark)")
    assert terminated and reward == 1.0
    assert info["metrics"]["judge_accuracy"] == 0.0 and info["metrics"]["judge_error"] == 1.0


# ------------------------------------------------------- end to end: retrieval, then reference QA
def hotpot_style_task() -> Task:
    """A two-hop (bridge) question over its own distractor paragraphs, HotpotQA style."""
    paragraphs = {
        "Vell Dominion": ["The Vell Dominion was a steppe state founded by Tarrow Khan in 1206.",
                          " Its capital was Kharos."],
        "Tarrow Khan": ["Tarrow Khan was a ruler of the northern steppe.",
                        " He was born in 1162 near the Osk River in Vellmark."],
        "Osk River": ["The Osk River flows north through the Amber Hills.",
                      " Salmon spawn in its upper reaches."],
        "Kharos": ["Kharos is a walled city on a plateau.", " It hosts a spring horse fair."],
        "Mira Sellen": ["Mira Sellen was a cartographer born in Port Aldane.",
                        " She mapped the Amber Hills."],
    }
    first, second = "Who founded the Vell Dominion?", "Where was Tarrow Khan born?"
    return Task(
        id="hotpotqa/dev/toy-bridge-1",
        question="In which land was the founder of the Vell Dominion born?",
        answer="Vellmark",
        task_type="qa",
        gold_actions=(
            "R1 = KnowledgeQuery(Vell Dominion); "
            f"R2 = ParagraphRetrieve(R1, Query: {first}); R3 = QA([R2], Question: {first})",
            "R4 = KnowledgeQuery(Tarrow Khan); "
            f"R5 = ParagraphRetrieve(R4, Query: {second}); R6 = QA([R5], Question: {second})",
            "Answer(R6)",
        ),
        meta={
            "documents": [{"title": t, "text": s} for t, s in paragraphs.items()],
            "sub_answers": {first: "Tarrow Khan", second: "Vellmark"},
            "answer_type": "span",
            "subgoals": ["Subgoal 1: Find who founded the Vell Dominion.",
                         "Subgoal 2: Find where Tarrow Khan was born."],
        },
    )


def test_gold_replay_through_retrieval_reaches_full_accuracy():
    from lumos_gym.envs.checks import replay_gold

    task = hotpot_style_task()
    env = QAEnv(tasks=[task], qa_backend="reference", retrieve_backend="bm25", privileged=True)
    assert env.toolset.names == list(QA_TOOLS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert not [str(w.message) for w in caught]
    env.reset(options={"index": 0})
    observations = [env.step(text)[0] for text in task.gold_actions[:2]]
    assert observations[0].endswith("R3 = Tarrow Khan"), observations[0]
    assert observations[1].endswith("R6 = Vellmark"), observations[1]
    result = replay_gold(env, task)
    assert result.ok, (result.errors, result.reward)
    env.close()


def test_retrieval_that_misses_the_evidence_gives_no_answer():
    task = hotpot_style_task()
    env = QAEnv(tasks=[task], qa_backend="reference", retrieve_backend="bm25", privileged=True)
    env.reset(options={"index": 0})
    # the right question asked of the wrong page: the evidence is not there
    observation, *_ = env.step("R1 = KnowledgeQuery(Mira Sellen); R2 = ParagraphRetrieve(R1, "
                               "Query: Where was Tarrow Khan born?); "
                               "R3 = QA([R2], Question: Where was Tarrow Khan born?)")
    assert observation.endswith("R3 = No answer"), observation
    _, reward, *_ = env.step("Answer(R3)")
    assert reward == 0.0
    env.close()
