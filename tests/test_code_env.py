"""Tests of the code family: program actions, HumanEval/MBPP loaders, sandboxed scoring, envs,
and the rule-based converter.

Every scoring test runs real sandbox processes (short limits keep them fast); an autouse fixture
fails a test that leaves a sandbox directory behind.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import warnings
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

from lumos_gym.actions import parse_action, split_arguments
from lumos_gym.conversion.annotation import Annotation, format_subgoal_plan, parse_subgoal_plan
from lumos_gym.conversion.code_rules import (
    CODE_CONVERTERS,
    code_env_factory,
    docstring_example,
    first_sentence,
    humaneval_annotation,
    mbpp_annotation,
    write_subgoal,
)
from lumos_gym.conversion.rules import ConversionError
from lumos_gym.conversion.verify import replay, task_of
from lumos_gym.envs.checks import replay_gold
from lumos_gym.envs.code.data import load_humaneval, load_mbpp
from lumos_gym.envs.code.official import CodeEnv, check_spec, score_submission, score_submissions
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, ToolError
from lumos_gym.tools import ToolContext, Toolset
from lumos_gym.tools.program import (
    CheckSpec,
    check_program,
    expand_newlines,
    one_line,
    submitted_program,
)
from lumos_gym.tools.sandbox import isolation

DATA = Path(__file__).resolve().parents[1] / "lumos_gym" / "envs" / "data" / "code"
HAS_NETNS = isolation(False).network


@pytest.fixture(scope="module")
def humaneval() -> list[Task]:
    return load_humaneval()


@pytest.fixture(scope="module")
def he_env():
    env = CodeEnv(dataset="humaneval", timeout=1.0)
    yield env
    env.close()


@pytest.fixture(autouse=True)
def _sandboxes_cleaned(no_leftover_sandboxes):
    """Every test here checks that the sandbox left no directory behind (conftest.py)."""


def first(tasks: list[Task], task_id: str) -> Task:
    return next(t for t in tasks if t.id == task_id)


# --- scoring HumanEval --------------------------------------------------------------------------


@pytest.mark.full
def test_all_164_canonical_solutions_pass(humaneval):
    assert len(humaneval) == 164
    results = score_submissions([(t, t.answer) for t in humaneval], workers=3)
    failed = [t.id for t, r in zip(humaneval, results, strict=True) if r["pass@1"] != 1.0]
    assert not failed
    assert all(r == {"pass@1": 1.0, "tests_passed_fraction": 1.0, "timeout": 0.0}
               for r in results)


def test_wrong_solution_fails_with_a_partial_fraction(humaneval):
    task = humaneval[0]  # has_close_elements: 7 asserts, 4 of them expect True
    wrong = "def has_close_elements(numbers, threshold):\n    return True\n"
    metrics = score_submission(task, wrong)
    assert metrics["pass@1"] == 0.0 and metrics["timeout"] == 0.0
    assert metrics["tests_passed_fraction"] == pytest.approx(4 / 7)


def test_a_completion_without_the_signature_gets_the_prompt_prepended(humaneval):
    task = humaneval[0]
    assert score_submission(task, task.meta["canonical_solution"])["pass@1"] == 1.0
    assert score_submission(task, "    return False\n")["pass@1"] == 0.0
    spec = check_spec(task, "    return False\n")
    assert spec.official == (
        task.meta["prompt"] + "    return False\n" + "\n" + task.meta["test"] + "\n"
        + "check(has_close_elements)"
    )


def test_a_looping_solution_times_out(humaneval):
    looping = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
    metrics = score_submission(humaneval[0], looping, timeout=0.4)
    assert metrics == {"pass@1": 0.0, "tests_passed_fraction": 0.0, "timeout": 1.0}


@pytest.mark.parametrize(
    "attack",
    [
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "blob = bytearray(8 * 1024 ** 3)\n",
        "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n",
    ],
    ids=["fork-bomb", "huge-allocation", "sys-exit", "os-exit", "ignores-alarm"],
)
@pytest.mark.full
def test_hostile_submissions_fail_without_harming_the_run(humaneval, attack):
    task = humaneval[0]
    program = attack + task.answer  # the right function comes after the attack
    assert score_submission(task, program, timeout=0.4)["pass@1"] == 0.0
    assert score_submission(task, task.answer)["pass@1"] == 1.0  # the scorer still works


@pytest.mark.skipif(not HAS_NETNS, reason="this OS refuses network namespaces")
def test_a_socket_attempt_fails_the_tests(humaneval, loopback_server):
    port, connected = loopback_server
    task = humaneval[0]
    # Passes only if the connection succeeds: the network must be cut in scoring.
    program = (
        "import socket\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=1.0).close()\n"
        + task.answer
    )
    assert score_submission(task, program)["pass@1"] == 0.0
    assert not connected.wait(0.2)


def test_check_program_reports_each_test_and_builds_phase():
    spec = CheckSpec(
        program="def f(x):\n    return x * 2\n",
        tests=("assert f(2) == 4", "y = f(1)", "assert f(3) == 7", "assert g(1) == 2"),
    )
    report = check_program(spec, explain=True)
    assert [t.status for t in report.tests] == ["passed", "passed", "failed", "failed"]
    assert [t.scored for t in report.tests] == [True, False, True, True]
    assert report.tests[2].message == "AssertionError: f(3) is 6, expected 7"
    assert report.tests[3].message.startswith("NameError")
    assert report.tests_passed_fraction == pytest.approx(1 / 3)
    broken = check_program(CheckSpec(program="x = 1\ny = 1 / 0\n", tests=("assert x == 1",)))
    assert not broken.passed and broken.failed_phase == "program"
    assert broken.program.message == "ZeroDivisionError: division by zero (line 2)"


# --- MBPP loaders -------------------------------------------------------------------------------


def test_mbpp_bundled_samples_load_in_both_formats_and_pass():
    full = load_mbpp(DATA / "mbpp_sample.jsonl", "sample")
    sanitized = load_mbpp(DATA / "sanitized-mbpp_sample.json", "sample")
    assert full[0].id == "mbpp/sample/11" and sanitized[0].id == "mbpp_sanitized/sample/11"
    assert full[0].meta["record"]["challenge_test_list"] == []
    assert "\r" not in full[1].answer and "\r\n" in full[1].meta["record"]["code"]
    mean = first(full, "mbpp/sample/15")
    assert mean.meta["setup"] == "import math"
    assert first(sanitized, "mbpp_sanitized/sample/15").meta["setup"] == "import math"
    assert full[0].question.endswith("Your code should pass this test:\n\n"
                                     "assert count_vowels('banana') == 3")
    results = score_submissions([(t, t.answer) for t in full + sanitized], workers=3)
    assert all(r["pass@1"] == 1.0 for r in results)


def _records(name: str) -> list[dict]:
    text = (DATA / name).read_text()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_mbpp_splits_go_by_task_id(tmp_path):
    rows = _records("mbpp_sample.jsonl")
    path = _write_jsonl(tmp_path / "mbpp.jsonl", rows)
    ids = {split: [t.meta["task_id"] for t in load_mbpp(path, split)]
           for split in ("prompt", "test", "validation", "train", "all")}
    assert ids["prompt"] == [3]
    assert ids["train"] == [604]
    assert ids["validation"] == []
    assert ids["test"] == list(range(11, 21))
    assert len(ids["all"]) == len(rows)
    with pytest.raises(ValueError, match="split must be one of"):
        load_mbpp(path, "dev")


def test_mbpp_variants_json_list_jsonl_gzip_string_ids_and_extra_fields(tmp_path):
    full = _records("mbpp_sample.jsonl")
    sanitized = _records("sanitized-mbpp_sample.json")
    as_list = tmp_path / "full-list.json"
    as_list.write_text(json.dumps(full, indent=1))
    san_lines = _write_jsonl(tmp_path / "sanitized.jsonl", sanitized)
    zipped = tmp_path / "mbpp.jsonl.gz"
    zipped.write_bytes(gzip.compress(_write_jsonl(tmp_path / "x.jsonl", full).read_bytes()))
    hub_like = [{**r, "task_id": str(r["task_id"]), "extra": 1} for r in full[:2]]
    hub = _write_jsonl(tmp_path / "hub.jsonl", hub_like)
    assert len(load_mbpp(as_list, "all")) == len(full)
    assert len(load_mbpp(san_lines, "all")) == len(sanitized)
    assert [t.id for t in load_mbpp(zipped, "test")][:2] == ["mbpp/test/11", "mbpp/test/12"]
    loaded = load_mbpp(hub, "test")
    assert loaded[0].meta["task_id"] == 11 and loaded[0].meta["record"]["extra"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("code"), "missing field 'code'"),
        (lambda r: r.pop("test_setup_code"), "missing field 'test_setup_code'"),
        (lambda r: r.update(test_list="assert f(1) == 1"), "'test_list' must be a list of str"),
        (lambda r: r.update(test_list=[]), "empty 'test_list'"),
        (lambda r: r.update(task_id="eleven"), "is not a non-negative integer"),
        (lambda r: r.update(text=None), "field 'text' is a NoneType"),
        (lambda r: r.pop("text"), "neither 'text' (full MBPP) nor 'prompt'"),
        (lambda r: r.update(challenge_test_list=[1]), "'challenge_test_list' must be a list"),
    ],
)
def test_mbpp_malformed_records_name_the_file_and_record(tmp_path, change, message):
    rows = _records("mbpp_sample.jsonl")
    change(rows[2])
    path = _write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError) as info:
        load_mbpp(path, "all")
    assert str(path) in str(info.value) and "record 2 (line 3)" in str(info.value)
    assert message in str(info.value), str(info.value)


def test_mbpp_malformed_files(tmp_path):
    sanitized = _records("sanitized-mbpp_sample.json")
    sanitized[1].pop("test_imports")
    bad_san = tmp_path / "san.json"
    bad_san.write_text(json.dumps(sanitized))
    with pytest.raises(DataError, match=r"record 1 \(task_id 14\): missing field 'test_imports'"):
        load_mbpp(bad_san, "all")
    cases = {
        "empty.jsonl": "",
        "badjson.jsonl": '{"task_id": 1,\n',
        "notobj.jsonl": "[1, 2]",
        "dup.jsonl": "".join(json.dumps(r) + "\n" for r in _records("mbpp_sample.jsonl")[:2] * 2),
    }
    messages = ["the file is empty", "bad JSON on line 1", "record 0 is a int", "duplicate"]
    for (name, text), message in zip(cases.items(), messages, strict=True):
        (tmp_path / name).write_text(text)
        with pytest.raises(DataError, match=message):
            load_mbpp(tmp_path / name, "all")
    with pytest.raises(DataError, match="file not found"):
        load_mbpp(tmp_path / "missing.jsonl")


def test_humaneval_loader_ids_meta_and_malformed_records(tmp_path, humaneval):
    task = humaneval[0]
    assert task.id == "humaneval/test/HumanEval_0" and task.task_type == "code"
    assert task.question == task.meta["prompt"] and task.answer.startswith(task.question)
    assert set(task.meta["record"]) == {
        "task_id", "prompt", "canonical_solution", "test", "entry_point"
    }
    assert all(t.gold_actions and t.gold_actions[-1] == "Answer(R1)" for t in humaneval)
    record = dict(task.meta["record"])
    plain = _write_jsonl(tmp_path / "he.jsonl", [record])
    assert load_humaneval(plain)[0].answer == task.answer
    for change, message in [
        (lambda r: r.pop("entry_point"), "missing field 'entry_point'"),
        (lambda r: r.update(test="def other(c):\n    pass\n"), "no check(candidate)"),
        (lambda r: r.update(entry_point="not a name"), "is not a function name"),
        (lambda r: r.update(prompt=3), "field 'prompt' is a int"),
    ]:
        bad = dict(record)
        change(bad)
        path = _write_jsonl(tmp_path / "bad.jsonl", [bad])
        with pytest.raises(DataError, match=re.escape(message)):
            load_humaneval(path)


# --- envs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dataset": "humaneval", "limit": 4},
        {"dataset": "mbpp"},
        {"dataset": "mbpp", "variant": "sanitized"},
    ],
    ids=["humaneval", "mbpp-full", "mbpp-sanitized"],
)
def test_env_checker_passes(kwargs):
    env = CodeEnv(**kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert not [str(w.message) for w in caught]
    env.close()


@pytest.mark.full
def test_oracle_replay_of_gold_actions_scores_one(he_env):
    mbpp = CodeEnv(dataset="mbpp")
    subset = [he_env.tasks[i] for i in (0, 1, 10, 32, 38, 130, 163)]
    for env, tasks in ((he_env, subset), (mbpp, mbpp.tasks)):
        for task in tasks:
            result = replay_gold(env, task)
            assert result.ok, (task.id, result)
    mbpp.close()


def test_episode_write_run_test_answer(he_env):
    obs, info = he_env.reset(options={"task_id": "humaneval/test/HumanEval_53"})
    assert obs.startswith("\n\ndef add(x: int, y: int)")
    assert info["task_type"] == "code" and "TestProgram" in info["action_names"]
    assert "gold_answer" not in info
    steps = [
        ("R1 = WriteProgram(def add(x, y):\\n    return x - y)", "R1 = Program(add)"),
        ("R2 = RunProgram(R1, Input: add(2, 3))", "R2 = -1"),
        ("R3 = TestProgram(R1, Test: assert add(2, 3) == 5)",
         "R3 = Failed 1/1: add(2, 3) is -1, expected 5"),
        ("R4 = WriteProgram(def add(x, y)\\n    return x + y)", "Error: WriteProgram: the program"),
        ("R4 = TestProgram(R9, Test: assert True)", "Error: TestProgram: undefined variable R9"),
        ("R4 = WriteProgram(def add(x, y):\\n    return x + y); R5 = TestProgram(R4, Test: "
         "assert add(2, 3) == 5\\nassert add(-1, 1) == 0)", "R5 = Passed"),
    ]
    for action, expected in steps:
        obs, reward, terminated, _, info = he_env.step(action)
        assert expected in obs and not terminated, (action, obs)
    assert info["tool_errors"] == 1 and info["error_kinds"] == {"tool": 1, "undefined-variable": 1}
    obs, reward, terminated, _, info = he_env.step("Answer(R5)")  # a test result: its program
    assert terminated and reward == 1.0 and obs == "Answer submitted: Program(add)"
    assert info["prediction"] == "def add(x, y):\n    return x + y\n"
    assert info["metrics"] == {"pass@1": 1.0, "tests_passed_fraction": 1.0, "timeout": 0.0}


def test_answer_with_literal_code_and_with_an_unbound_variable(he_env):
    he_env.reset(options={"task_id": "humaneval/test/HumanEval_53"})
    obs, *_ , info = he_env.step("Answer(R7)")
    assert obs.startswith("Error: Answer: undefined variable R7")
    assert info["error_kinds"] == {"undefined-variable": 1}
    obs, reward, terminated, _, info = he_env.step("Answer(    return x + y)")
    assert terminated and reward == 1.0  # a completion continues the prompt


def test_program_text_helpers():
    ctx = ToolContext(variables={"R1": "x = 1\n"}, state={"programs": {"R2": "y = 2\n"}})
    assert submitted_program("R2", ctx) == "y = 2\n"
    assert submitted_program(" R1 ", ctx) == "x = 1\n"
    assert submitted_program("R3", ctx) is None
    assert submitted_program("def f():\\n    return '\\n'", ctx) == "def f():\n    return '\\n'"
    assert expand_newlines("a = 1\\nb = '\\n'  # c\\nd") == "a = 1\nb = '\\n'  # c\nd"
    tricky = 'def f(c):\n    """Doc (\n    more"""\n    return c == ")"  # )\n'
    line = one_line(tricky)
    assert "\n" not in line and parse_action(f"R1 = WriteProgram({line})").args == line
    args = split_arguments("R1, Test: assert f(1, 2) == (3, 4)")
    assert args.positional == ("R1",) and args.get("Test") == "assert f(1, 2) == (3, 4)"
    with pytest.raises(ValueError, match="does not parse"):
        one_line("def (:")


def test_tools_are_registered_and_reject_bad_arguments():
    toolset = Toolset(["WriteProgram", "RunProgram", "TestProgram"])
    assert [s.signature for s in toolset.specs] == [
        "WriteProgram(code)", "RunProgram(program, input)", "TestProgram(program, test)"
    ]
    ctx = ToolContext(variables={"R1": "def f():\n    return 1\n"})
    test = toolset.get("TestProgram")
    with pytest.raises(ToolError, match="the first argument must be a program variable"):
        test.run(parse_action("R2 = TestProgram(def f(): pass, Test: f())"), ctx)
    with pytest.raises(ToolError, match="the test does not parse"):
        test.run(parse_action("R2 = TestProgram(R1, Test: assert f() ==)"), ctx)
    with pytest.raises(ToolError, match="no program"):
        toolset.get("WriteProgram").run(parse_action("R2 = WriteProgram( )"), ctx)


# --- the converter ------------------------------------------------------------------------------


def test_converter_annotations_round_trip_and_read_well(humaneval):
    tasks = humaneval + load_mbpp(DATA / "mbpp_sample.jsonl", "sample")
    annotations, rejected = [], []
    for task in tasks:
        dataset = "humaneval" if task.id.startswith("humaneval") else "mbpp"
        try:
            annotations.append(CODE_CONVERTERS[dataset](task))
        except ConversionError:
            rejected.append(task.id)
    assert rejected == ["humaneval/test/HumanEval_38", "humaneval/test/HumanEval_50"]
    for annotation in annotations:
        record = annotation.to_dict()
        assert Annotation.from_dict(json.loads(json.dumps(record))) == annotation
        text = record["subgoal_plan"]
        assert format_subgoal_plan(parse_subgoal_plan(text)) == text
        (subgoal,) = annotation.subgoals
        assert subgoal.text.startswith("Write a function ")
        write, test = (a.action for a in subgoal.actions)
        assert write.name == "WriteProgram" and test.name == "TestProgram"
        assert test.result == "Passed"
        same = ast.dump(ast.parse(expand_newlines(write.args)))
        assert same == ast.dump(ast.parse(annotation.answer))
    he0 = annotations[0]
    assert he0.subgoals[0].text == (
        "Write a function has_close_elements that checks if in given list of numbers, are any "
        "two numbers closer to each other than given threshold."
    )
    assert he0.subgoals[0].actions[1].text == (
        "R2 = TestProgram(R1, Test: assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False)"
        " = Passed"
    )


def test_converter_subgoals_and_examples():
    assert write_subgoal("similar_elements", "Write a function to find the shared elements.") == (
        "Write a function similar_elements that finds the shared elements."
    )
    assert write_subgoal("f", "Write a python function to identify non-prime numbers.") == (
        "Write a function f that identifies non-prime numbers."
    )
    assert write_subgoal("g", "Return the sum of a and b.") == (
        "Write a function g that returns the sum of a and b."
    )
    assert write_subgoal("h", "You are given a list.") == (
        "Write a function h: You are given a list."
    )
    assert first_sentence("Task\nWrite a function that adds. More text.") == (
        "Write a function that adds."
    )
    prompt = 'def tri(n):\n    """Doc.\n    tri(1) = 3\n    Examples:\n    tri(3) = [1, 3]\n"""\n'
    assert docstring_example(prompt, "tri") == "assert tri(3) == [1, 3]"
    arrows = 'def f(x):\n    """Doc.\n    f(1) ➞ true\n    """\n'
    assert docstring_example(arrows, "f") == "assert f(1) == True"
    test = "def check(candidate):\n    for i in range(3):\n        assert candidate(i)\n" \
           "    assert candidate(2) == 4, 'msg'\n"
    assert docstring_example('def f(x):\n    """No example."""\n', "f", test) == (
        "assert f(2) == 4"
    )


@pytest.mark.full
def test_converted_annotations_verify_by_replay(humaneval):
    mbpp = load_mbpp(DATA / "mbpp_sample.jsonl", "sample")
    picked = [humaneval[0], humaneval[130], mbpp[4]]  # mbpp[4] needs its setup code
    for task in picked:
        annotation = (humaneval_annotation if task.id.startswith("humaneval")
                      else mbpp_annotation)(task)
        # As verify builds it: a task without the scoring fields, found again by the factory.
        env = code_env_factory([task_of(annotation)], annotation.dataset)
        replay(env, annotation)
        env.close()


def test_missing_harness_is_a_clear_error():
    bare = Task("x/1", "q", "a", "code")
    with pytest.raises(DataError, match="has no code harness"):
        check_spec(bare, "print(1)")
