"""Failures of the machinery are their own status: ``infra-error`` (issue 35).

A model server that fails through the backend's retries, or an env server that cannot be
reached, is not the agent's failure: the runner plays such an episode again, records
``infra-error`` when every try failed, and the results leave it out of every mean, count it,
flag its row on the board, refuse it in ``--validate`` (unless ``--allow-infra-errors``) and
play it again on ``--resume``. The agent's own failures keep their statuses.

The episodes are real (the ``direct`` agent on GSM8K's bundled tasks) and the backend is the
real ``openai`` backend, talking over HTTP to a local server that fails on purpose (the
helpers of test_backend_openai.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from test_backend_openai import MODEL, completion_body, error_body, running

from lumos_gym.agents import make_agent
from lumos_gym.agents.runner import EpisodeSpec, Runner
from lumos_gym.cli import main
from lumos_gym.errors import EvaluationError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.results import episode_status, read_results
from lumos_gym.evaluation.summary import format_table, summarize
from lumos_gym.leaderboard.render import load_board, render_markdown, validate
from lumos_gym.models.base import GenerationRequest
from lumos_gym.models.openai_backend import OpenAIBackend

ENV = "lumos/GSM8K-v0"
UNAVAILABLE = (503, error_body("the engine is overloaded"))


def _gold() -> dict[str, str]:
    """Each GSM8K question → its gold answer."""
    env = gym.make(ENV)
    try:
        return {t.question: str(t.answer) for t in env.unwrapped.tasks}
    finally:
        env.close()


GOLD = _gold()


def question_of(prompt: str) -> str:
    """The GSM8K question a prompt asks (its last user turn holds it)."""
    last = prompt.rsplit("<|user|>", 1)[-1]
    return max((q for q in GOLD if q in last), key=len)


def server(reply: Callable[[str, int], tuple[int, dict[str, Any]]]) -> FastAPI:
    """An OpenAI-compatible app answering each POST with ``reply(question, n)``.

    ``n`` counts the POSTs of that question so far (0 for its first); ``app.state.asked``
    lists the question of every POST, in order.
    """
    app = FastAPI()
    app.state.asked = []

    async def answer(request: Request) -> JSONResponse:
        body = await request.json()
        question = question_of(body.get("prompt") or body["messages"][-1]["content"])
        n = app.state.asked.count(question)
        app.state.asked.append(question)
        status, payload = reply(question, n)
        return JSONResponse(payload, status_code=status)

    app.add_api_route("/v1/completions", answer, methods=["POST"])
    app.add_api_route("/v1/chat/completions", answer, methods=["POST"])
    return app


def right(question: str, n: int = 0) -> tuple[int, dict[str, Any]]:
    """The gold answer, as a server's completion."""
    return 200, completion_body(GOLD[question])


@contextlib.contextmanager
def backend_at(app: FastAPI, **options: Any) -> Iterator[OpenAIBackend]:
    """The real openai backend, serving ``app``: one attempt a request unless told otherwise."""
    settings = {"timeout": 10.0, "max_retries": 0, "backoff": 0.0, "check": False} | options
    with running(app) as url, OpenAIBackend(MODEL, base_url=f"{url}/v1", **settings) as backend:
        yield backend


def play(backend: OpenAIBackend, tasks: list[str], **runner: Any):
    specs = [EpisodeSpec(ENV, task) for task in tasks]
    return Runner(make_agent("direct"), {"policy": backend}, **runner).run(specs)


# -------------------------------------------------------------------------------- the runner
def test_only_a_failure_of_the_machinery_is_an_infra_error_and_only_it_is_retried():
    replies = {
        "gsm8k/sample/0": UNAVAILABLE,  # the server, every try: the machinery
        "gsm8k/sample/1": (400, error_body("the request is malformed")),  # the request's own
        "gsm8k/sample/2": (400, error_body("the prompt exceeds the context length of 8")),
    }
    tasks = list(replies)
    by_question = {}
    env = gym.make(ENV)
    for task in env.unwrapped.tasks[:3]:
        by_question[task.question] = replies[task.id]
    env.close()
    app = server(lambda question, n: by_question[question])
    with backend_at(app) as backend:
        records = {r.task_id: r for r in play(backend, tasks, max_infra_retries=2)}
    asked = {q: app.state.asked.count(q) for q in by_question}
    infra, own, long = (records[t] for t in tasks)
    assert infra.status == "infra-error"
    assert "HTTP 503" in infra.reason and infra.reason.endswith("(on each of 3 tries)")
    assert (own.status, long.status) == ("agent-error", "context-limit")
    assert sorted(asked.values()) == [1, 1, 3]  # the 503 tried three times, the others once


def test_a_transient_failure_is_played_again_from_the_start_and_completes():
    app = server(lambda question, n: UNAVAILABLE if n < 2 else right(question))
    with backend_at(app) as backend:
        [record] = play(backend, ["gsm8k/sample/0"], max_infra_retries=2)
    assert record.status == "completed" and record.reward == 1.0
    assert len(app.state.asked) == 3
    # the record is the last try's alone: one model turn, one action
    assert [t.get("role") for t in record.turns if "role" in t] == ["policy"]
    with backend_at(server(lambda question, n: UNAVAILABLE)) as backend:
        [record] = play(backend, ["gsm8k/sample/0"], max_infra_retries=0)
    assert record.status == "infra-error" and "tries" not in record.reason


def test_an_env_server_that_cannot_be_reached_is_an_infra_error():
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = server(right)
        with backend_at(app) as backend:
            records = Runner(make_agent("direct"), {"policy": backend},
                             max_infra_retries=1).run([
                EpisodeSpec("lumos/remote", "gsm8k/sample/0", {"url": url}),
                EpisodeSpec(ENV, "no-such-task"),  # the env's own error: not the machinery's
            ])
    remote, unknown = sorted(records, key=lambda r: r.env_id != "lumos/remote")
    assert remote.status == "infra-error" and "cannot reach the env server" in remote.reason
    assert unknown.status == "env-error"
    assert not app.state.asked


# ------------------------------------------------------------------ results, board, resume
def test_results_leave_infra_errors_out_flag_refuse_and_resume_them(tmp_path, capsys):
    env = gym.make(ENV)
    failing = env.unwrapped.tasks[1].question
    env.close()
    healthy = {"now": False}

    def reply(question: str, n: int) -> tuple[int, dict[str, Any]]:
        return UNAVAILABLE if question == failing and not healthy["now"] else right(question)

    app = server(reply)
    out = tmp_path / "run"
    with backend_at(app) as backend:
        config = {"envs": [ENV], "limit": 3, "out": out, "backends": {"policy": backend},
                  "progress": False, "max_infra_retries": 1}
        result = evaluate(RunConfig("direct", **config))

        statuses = sorted(r["status"] for r in result.records)
        assert statuses == ["completed", "completed", "infra-error"]
        assert app.state.asked.count(failing) == 2  # one retry
        env_summary = result.summary["envs"][ENV]
        # left out of the means (not averaged in as 0), and counted apart
        assert env_summary["mean"] == 1.0 and env_summary["metrics"]["accuracy"]["mean"] == 1.0
        assert env_summary["episodes"] == 3 and env_summary["infra_errors"] == 1
        assert env_summary["statuses"]["infra-error"] == 1
        overall = result.summary["overall"]
        assert (overall["mean"], overall["infra_errors"]) == (1.0, 1)
        assert result.summary["score"]["mean"] == 1.0
        assert "1 episode(s) ended in infra-error" in format_table(result.summary)

        board = load_board([out])
        [entry] = board.entries
        assert entry.infra == {ENV: 1} and entry.cells[ENV].mean == 1.0
        markdown = render_markdown(board)
        assert "| run ⚠ |" in markdown
        assert "Infra-error episodes left: run: 1 episode (GSM8K-v0 1)." in markdown

        assert main(["leaderboard", "--validate", str(out)]) == 2
        [line] = [x for x in capsys.readouterr().out.splitlines() if "infra-error" in x]
        assert "1 episode(s) ended in infra-error" in line and "--allow-infra-errors" in line
        assert main(["leaderboard", "--validate", "--allow-infra-errors", str(out)]) == 0

        healthy["now"] = True
        asked = len(app.state.asked)
        before = (out / "episodes.jsonl").read_text()
        other = OpenAIBackend("another-model", base_url=backend.base_url, check=False)
        with other, pytest.raises(EvaluationError, match="another configuration"):
            evaluate(RunConfig("direct", resume=True, **(config | {"backends": {"policy": other}})))
        assert (out / "episodes.jsonl").read_text() == before  # a refused resume drops nothing
        again = evaluate(RunConfig("direct", resume=True, **config))
    assert app.state.asked[asked:] == [failing]  # only the infra-error episode, once
    assert again.resumed == 2
    lines = (out / "episodes.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len({r["key"] for r in records}) == len(records) == 3
    assert {r["status"] for r in records} == {"completed"}
    assert "infra_errors" not in again.summary["envs"][ENV]
    assert validate([out]) == (1, [])
    assert "⚠" not in render_markdown(load_board([out]))


def test_a_run_whose_every_episode_failed_so_has_no_row_and_is_named(tmp_path):
    """The user's run against a server that timed out: no longer ranked as a 0.000."""
    with backend_at(server(lambda question, n: UNAVAILABLE)) as backend:
        evaluate(RunConfig("direct", envs=[ENV], limit=2, out=tmp_path / "down",
                           backends={"policy": backend}, progress=False, max_infra_retries=0))
    evaluate(RunConfig("oracle", envs=[ENV], limit=2, out=tmp_path / "oracle", progress=False))
    board = load_board([tmp_path / "down", tmp_path / "oracle"])
    assert [e.name for e in board.entries] == ["oracle"]
    [warning] = [w for w in board.warnings if w.startswith("down:")]
    assert "every episode ended in infra-error (2" in warning and "--resume" in warning


# --------------------------------------------------------------------------- old records
OPENVINO_DROPPED = "the OpenVINO pipeline did not finish the request (IGNORED)"


def _real_openai_failures() -> list[str]:
    """The error texts the openai backend writes for a 503, a timeout and a refused connection."""
    texts = []
    with backend_at(server(lambda question, n: UNAVAILABLE)) as backend:
        texts += [backend.generate([_request()])[0].error]
    slow = FastAPI()

    @slow.post("/v1/completions")
    async def late() -> dict[str, str]:
        await asyncio.sleep(0.5)
        return {}

    with backend_at(slow, timeout=0.05, max_retries=1) as backend:
        texts += [backend.generate([_request()])[0].error]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        with OpenAIBackend(MODEL, base_url=url, max_retries=0, check=False) as backend:
            texts += [backend.generate([_request()])[0].error]
    return texts


def _request() -> GenerationRequest:
    return GenerationRequest(prompt="<|user|>\n" + next(iter(GOLD)) + "\n<|assistant|>\n")


def test_old_agent_errors_of_the_machinery_read_as_infra_errors(tmp_path):
    failures = _real_openai_failures()  # as the openai backend writes them
    assert "HTTP 503" in failures[0] and "timed out" in failures[1]
    assert "ConnectError" in failures[2]
    # the agent's own: a bug in its logic, a request the server refused (never retried)
    own = ["ValueError: the agent's own bug",
           "POST http://127.0.0.1:8000/v1/completions answered HTTP 400: bad request"]
    reasons = [OPENVINO_DROPPED, *failures, *own]
    out = tmp_path / "old"
    evaluate(RunConfig("oracle", envs=[ENV], limit=len(reasons) + 1, out=out, progress=False))
    path = out / "episodes.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record, reason in zip(records, reasons, strict=False):  # the last one stays completed
        record.update(status="agent-error", reason=reason, reward=0.0, metrics={})
    written = "".join(json.dumps(r) + "\n" for r in records)
    (out / "episodes.jsonl.gz").write_bytes(gzip.compress(written.encode()))  # as published
    path.unlink()

    read = read_results(out)
    statuses = [read.records[r["key"]]["status"] for r in records]
    assert statuses == ["infra-error"] * 4 + ["agent-error"] * 2 + ["completed"]
    assert [episode_status(r) for r in records] == statuses
    assert gzip.decompress((out / "episodes.jsonl.gz").read_bytes()).decode() == written
    summary = summarize(read.records.values())["envs"][ENV]
    assert summary["infra_errors"] == 4 and summary["episodes"] == 7
    assert summary["statuses"]["agent-error"] == 2
    assert summary["mean"] == 1 / 3  # the agent's two 0s and the completed 1: four left out
    [entry] = load_board([out]).entries
    assert entry.infra == {ENV: 4} and entry.cells[ENV].mean == 1 / 3
    assert any("4 episode(s) ended in infra-error" in p for p in validate([out])[1])


def test_a_summary_of_infra_errors_alone_has_no_score():
    record = {"env_id": ENV, "task_id": "t", "status": "infra-error", "reward": 0.0,
              "reason": "POST http://h/v1/completions timed out after 60.0s (ReadTimeout)"}
    summary = summarize([record])
    assert summary["envs"][ENV]["mean"] is None and summary["overall"]["mean"] is None
    assert summary["score"]["envs"] == 0 and summary["score"]["mean"] is None
    assert "-" in format_table(summary).splitlines()[2]
