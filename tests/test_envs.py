import json
import random
import re
import socket
import sys
import threading
from pathlib import Path

import gymnasium as gym
import pytest

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.envs import ENVS, env_ids
from lumos_gym.envs.base import LumosEnv, normalize_text, text_charset
from lumos_gym.envs.checks import check_env_id, replay_gold
from lumos_gym.envs.math.official import MathEnv
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError

MATH_IDS = ["lumos/GSM8K-v0", "lumos/SVAMP-v0", "lumos/ASDiv-v0", "lumos/MathWord-v0"]


def make(env_id="lumos/MathWord-v0", **kwargs):
    return gym.make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", MATH_IDS)
@pytest.mark.full
def test_registered_env_passes_checker_and_oracle(env_id):
    report = check_env_id(env_id)
    assert report.api_ok, report.api_error
    assert not report.warnings, report.warnings
    assert report.replays, "every math env has gold actions to replay"
    failures = [(r.task_id, r.errors, r.reward) for r in report.replays if not r.ok]
    assert not failures


def test_all_math_envs_are_registered():
    assert set(MATH_IDS) <= set(env_ids())
    assert ENVS.get("lumos/GSM8K-v0").max_episode_steps > 0


def test_reset_info_and_gold_answer_only_after_termination():
    env = make()
    obs, info = env.reset(seed=3)
    assert obs and info["task_type"] == "math"
    assert "Answer" in info["action_names"] and "Calculator" in info["action_names"]
    assert info["instruction_actions"][0] == "Calculator"
    assert any(a.startswith("Calculator(formula): ") for a in info["actions"])
    assert "gold_answer" not in info and "metrics" not in info
    task = env.unwrapped.tasks[[t.id for t in env.unwrapped.tasks].index(info["task_id"])]
    for step_text in task.gold_actions[:-1]:
        _, reward, terminated, _, info = env.step(step_text)
        assert not terminated and reward == 0.0 and "gold_answer" not in info
    _, reward, terminated, _, info = env.step(task.gold_actions[-1])
    assert terminated and reward == 1.0
    assert info["metrics"] == {"accuracy": 1.0}
    assert info["gold_answer"] == task.answer


def test_same_seed_same_task():
    env = make()
    assert env.reset(seed=7)[1]["task_id"] == env.reset(seed=7)[1]["task_id"]
    first = env.reset(options={"task_id": env.unwrapped.tasks[2].id})[1]["task_id"]
    assert first == env.unwrapped.tasks[2].id


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"index": 10**9}, ValueError, "'index' 1000000000 is out of range"),
        ({"index": -1}, ValueError, "'index' -1 is out of range"),
        ({"index": "0"}, TypeError, "'index' must be an int, not str"),
        ({"index": 1.5}, TypeError, "'index' must be an int, not float"),
        ({"index": True}, TypeError, "'index' must be an int, not bool"),
        ("str", TypeError, "reset options must be a dict"),
        (["index", 0], TypeError, "reset options must be a dict"),
    ],
)
def test_bad_reset_options_are_clear_errors(options, error, needle):
    env = make().unwrapped  # past gymnasium's checker, as a vector env or a runner calls it
    with pytest.raises(error, match=re.escape(needle)):
        env.reset(options=options)
    last = len(env.tasks) - 1
    assert env.reset(options={"index": last})[1]["task_id"] == env.tasks[last].id


def test_wrong_answer_scores_zero():
    env = make()
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("Answer(-123456.5)")
    assert terminated and reward == 0.0 and info["metrics"]["accuracy"] == 0.0


@pytest.mark.parametrize(
    ("action", "needle", "counter"),
    [
        ("R1 = Calculator(", "cannot parse", "invalid_actions"),
        ("R1 = Teleport(home)", "allowed: Calculator", "invalid_actions"),
        ("R1 = Calculator(R7 + 1)", "undefined variable R7", "invalid_actions"),
        ("R1, R2 = Calculator(1 + 1)", "output variable", "tool_errors"),
        ("R1 = Calculator(__import__('os').system('echo hacked'))", "Error:", "tool_errors"),
        ("Answer(R9)", "undefined variable R9", "invalid_actions"),
    ],
)
def test_bad_actions_are_observations(action, needle, counter):
    env = make()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("Error:") and needle in obs
    assert info[counter] == 1 and not terminated and reward == 0.0


@pytest.mark.parametrize("env_id", ["lumos/GSM8K-v0", "lumos/WorldQA-v0", "lumos/MBPP-v0"])
def test_a_variable_of_thousands_of_digits_is_no_exception(env_id):
    env = make(env_id)
    env.reset(seed=0)
    name = "R" + "9" * 5000  # past int()'s 4,300-digit limit
    tool = "Calculator" if env_id == "lumos/GSM8K-v0" else env.unwrapped.toolset.names[0]
    env.step(f"{name} = {tool}(1)")
    obs, _, terminated, _, info = env.step("Answer(R1)")
    assert obs.startswith("Error: Answer: undefined variable R1") and not terminated
    assert info["error_kinds"]["undefined-variable"] == 1
    obs, *_ = env.step("Answer(" + "9" * 10**6 + ")")  # scored as text, not read as a number
    assert obs.startswith("Answer submitted")
    env.close()


@pytest.mark.parametrize("action", ["R1 = Calculator(1\x00)", "\x1b[2J", "Answer(\ud800)"])
def test_control_characters_are_invalid_actions(action):
    env = make()
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step(action)
    assert obs.startswith("Error: the action holds a control character") and not terminated
    assert info["error_kinds"] == {"control-character": 1} and info["invalid_actions"] == 1
    assert env.step("R1 = Calculator(1\t+ 2)\r\n")[0] == "R1 = 3"  # tab and line ends are fine


def test_errors_stop_the_rest_of_a_step_and_bindings_persist():
    env = make()
    env.reset(seed=0)
    obs, *_ , info = env.step("R1 = Calculator(2 + 3); R2 = Nope(1); R3 = Calculator(1)")
    assert obs.splitlines()[0] == "R1 = 5" and obs.splitlines()[1].startswith("Error:")
    assert "R3" not in info["variables"]
    obs, *_ = env.step("R2 = Calculator(R1 * 4)")
    assert obs == "R2 = 20"


def test_calculator_never_runs_python():
    marker = Path("/tmp") / f"lumos-gym-pwned-{random.random()}"
    env = make()
    env.reset(seed=0)
    obs, *_ = env.step(f"R1 = Calculator(__import__('os').system('touch {marker}'))")
    assert obs.startswith("Error:") and not marker.exists()


@pytest.mark.full
def test_code_action_cannot_open_sockets():
    from lumos_gym.tools.sandbox import isolation

    if not isolation(False).network:
        pytest.skip("this OS refuses network namespaces (bwrap, unshare -n)")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    accepted = []
    thread = threading.Thread(
        target=lambda: accepted.append(_accept_quietly(server)), daemon=True
    )
    thread.start()
    env = make()
    env.reset(seed=0)
    code = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=2); "
        "print('connected')"
    )
    obs, *_ , info = env.step(f"R1 = Code({code})")
    server.close()
    thread.join(6)
    assert obs.startswith("Error:"), obs
    assert info["tool_errors"] == 1
    assert accepted == [False]


def _accept_quietly(server):
    try:
        conn, _ = server.accept()
        conn.close()
        return True
    except OSError:
        return False


@pytest.mark.slow  # 12 s; the fuzz test (also slow) sends 10,000 actions to each env
def test_three_thousand_random_strings_raise_nothing():
    """Random and half-formed actions are observations, never exceptions (``make fuzz`` goes
    further: coverage-guided, for minutes)."""
    env = make()
    env.reset(seed=0)
    rng = random.Random(0)
    charset = sorted(set("R1234567890 =,()[];:.+-*/^%$<>!'\"\\_abcxyzCalculatorAnswerOutput"))
    names = ["Calculator", "SolveEquation", "Define", "Count", "SetEquation", "Answer", "Foo"]
    for i in range(3_000):
        kind = i % 3
        if kind == 0:
            text = env.action_space.sample()[: rng.randint(0, 60)]
        elif kind == 1:
            text = "".join(rng.choice(charset) for _ in range(rng.randint(0, 40)))
        else:
            args = "".join(rng.choice("0123456789+-*/^() R.,=x") for _ in range(rng.randint(0, 12)))
            text = f"R{rng.randint(1, 4)} = {rng.choice(names)}({args})"
        obs, reward, terminated, truncated, info = env.step(text)
        assert isinstance(obs, str)
        if terminated or truncated:
            env.reset(seed=i)


def test_observations_stay_in_the_text_space():
    assert normalize_text("a\x00b") == "a?b"
    assert len(normalize_text("x" * 300_000)) <= 200_000
    assert "é" in text_charset() and "\n" in text_charset()


def _official_gsm8k_records(n):
    """Write records in the official GSM8K layout (question, answer with <<>> marks, ####)."""
    records = []
    for i in range(n):
        a, b = 3 + i % 17, 2 + i % 5
        answer = (
            f"She buys {a} boxes of {b} pens, so she has {a}*{b}=<<{a}*{b}={a * b}>>{a * b} pens.\n"
            f"She gives away 1 pen, so she keeps {a * b}-1=<<{a * b}-1={a * b - 1}>>{a * b - 1}.\n"
            f"#### {a * b - 1:,}"
        )
        question = f"Problem {i}: {a} boxes of {b} pens, minus one?"
        records.append({"question": question, "answer": answer})
    return records


def test_gsm8k_reads_a_complete_official_size_test_file(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _official_gsm8k_records(1319)))
    env = gym.make("lumos/GSM8K-v0", split="test", source=str(path))
    assert len(env.unwrapped.tasks) == 1319
    assert env.unwrapped.tasks[0].id == "gsm8k/test/0"
    assert env.unwrapped.source.describe()["sha256"]
    for task in env.unwrapped.tasks[:50]:
        assert replay_gold(env.unwrapped, task).ok


def test_missing_and_malformed_files_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        gym.make("lumos/GSM8K-v0", source=str(tmp_path / "absent.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x", "answer": "#### 1"}\n{not json\n')
    with pytest.raises(DataError) as info:
        gym.make("lumos/GSM8K-v0", source=str(bad))
    assert str(bad) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DataError, match="lumos-gym data download gsm8k"):
        MathEnv(dataset="gsm8k", split="test", source="official")


def test_env_accepts_explicit_tasks_and_limit():
    tasks = [
        Task(id=f"t{i}", question=f"{i}+1?", answer=str(i + 1), task_type="math") for i in range(5)
    ]
    env = MathEnv(tasks=tasks, limit=3)
    assert [t.id for t in env.tasks] == ["t0", "t1", "t2"]
    assert isinstance(env, LumosEnv)


def test_the_adding_an_env_example_works(tmp_path):
    examples = Path(__file__).resolve().parents[1] / "docs" / "examples"
    sys.path.insert(0, str(examples))
    try:
        import grocery_env

        grocery_env.register()
        report = check_env_id("lumos/Grocery-v0")
        assert report.ok, (report.api_error, report.warnings, report.replays)
        env = gym.make("lumos/Grocery-v0")
        env.reset(seed=0)
        obs, *_ = env.step("R1 = PriceLookup(caviar)")
        assert obs.startswith("Error:") and "apple" in obs
        from lumos_gym.evaluation.evaluate import RunConfig, evaluate

        result = evaluate(RunConfig("oracle", envs=["lumos/Grocery-v0"], limit=3, out=tmp_path,
                                    progress=False))
        assert result.summary["overall"]["mean"] == 1.0
        assert {r["status"] for r in result.records} == {"completed"}
    finally:
        sys.path.remove(str(examples))


class _NoPrivilege(LumosEnv):
    """An env whose __init__ forgets to pass `privileged` on (the oracle cannot read gold)."""

    task_type = "math"
    default_tools = ("Calculator",)

    def __init__(self, render_mode=None):
        super().__init__(tasks=[Task(id="t0", question="1+1?", answer="2", task_type="math")],
                         render_mode=render_mode)

    def score(self, prediction, task):
        return {"accuracy": float(prediction == task.answer)}


def test_the_oracle_refuses_an_env_that_does_not_take_privileged():
    from lumos_gym.errors import EvaluationError
    from lumos_gym.evaluation.plan import plan_env
    from lumos_gym.evaluation.suites import SuiteEntry

    gym.register("lumos/NoPrivilege-v0", entry_point=_NoPrivilege)
    try:
        with pytest.raises(EvaluationError, match="does not take privileged=True.*adding-an-env"):
            plan_env(SuiteEntry("lumos/NoPrivilege-v0"), privileged=True)
        assert len(plan_env(SuiteEntry("lumos/NoPrivilege-v0")).specs) == 1  # other agents run
    finally:
        del gym.registry["lumos/NoPrivilege-v0"]
