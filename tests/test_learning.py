"""Learning from the envs: token capture, expert iteration and GRPO (issue 21).

The unit tests run on plain data; the ``full`` ones run the tiny random Llama of conftest.py
(4096 positions, as Lumos prompts are long) through the command line and the training loops.
"""

from __future__ import annotations

import json

import pytest

from lumos_gym.agents.tokens import compact_calls, expand_calls, read_tokens
from lumos_gym.models.base import TokenTrace


# ------------------------------------------------------------------------- token entries
def test_call_entries_share_the_prefix_of_an_earlier_call_and_expand_back():
    first = TokenTrace(tuple(range(20)), (100, 101), (-0.5, -0.25))
    # the planner's next prompt re-reads the first prompt and answer, then a feedback turn
    second = TokenTrace((*range(20), 100, 101, 7, 8), (102,), (-1.0,), loss_mask=(1,))
    other = TokenTrace((50, 51), (52,), (-2.0,))
    entries = compact_calls([(0, "planner", first), (2, "grounder", other),
                             (4, "planner", second)])
    assert entries[2]["prefix"] == [0, 22] and entries[2]["prompt_ids"] == [7, 8]
    assert "prefix" not in entries[0] and "loss_mask" not in entries[0]
    assert entries[2]["loss_mask"] == [1]
    expanded = expand_calls(json.loads(json.dumps(entries)))
    assert expanded[2]["prompt_ids"] == list(second.prompt_ids)
    assert [e["turn"] for e in expanded] == [0, 2, 4]
    assert expanded[0]["logprobs"] == [-0.5, -0.25]


def test_read_tokens_skips_a_torn_last_line_and_keeps_the_last_line_of_an_episode(tmp_path):
    path = tmp_path / "tokens.jsonl"
    one = compact_calls([(0, "policy", TokenTrace((1, 2), (3,), (-0.1,)))])
    two = compact_calls([(0, "policy", TokenTrace((1, 2), (4,), (-0.2,)))])
    path.write_text(json.dumps({"key": "a", "calls": one}) + "\n"
                    + json.dumps({"key": "a", "calls": two}) + "\n" + '{"key": "b", "ca')
    found = read_tokens(path)
    assert list(found) == ["a"] and found["a"][0]["completion_ids"] == [4]


def test_a_trace_needs_one_logprob_per_token():
    with pytest.raises(ValueError):
        TokenTrace((1,), (2, 3), (-0.1,))


# ----------------------------------------------------------------- the tiny model, captured
torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from conftest import save_tiny_model  # noqa: E402

from lumos_gym.cli import main  # noqa: E402

MATH = ["--agent", "lumos-i", "--env", "lumos/MathWord-v0", "-k", "num_tasks=3",
        "-k", "levels=[1]", "--device", "cpu", "--max-new-tokens", "12", "--max-rounds", "2",
        "--no-progress", "--backend", "hf"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)  # a tiny model only pays for thread hand-offs
    return save_tiny_model(tmp_path_factory.mktemp("tiny"), max_positions=4096)


def _teacher_forced(model, trace: dict) -> list[float]:
    ids = torch.tensor([trace["prompt_ids"] + trace["completion_ids"]])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits.float(), dim=-1)[0]
    start = len(trace["prompt_ids"]) - 1
    return [logprobs[start + j, t].item() for j, t in enumerate(trace["completion_ids"])]


@pytest.mark.full
def test_evaluate_record_tokens_writes_each_calls_tokens_beside_the_episodes(tmp_path, tiny):
    from transformers import AutoModelForCausalLM

    from lumos_gym.leaderboard.render import validate_dir

    out = tmp_path / "results"
    assert main(["evaluate", *MATH, "-k", "split=train", "--model", str(tiny), "--temperature",
                 "1.0", "--record-tokens", "--out", str(out)]) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").open()]
    tokens = read_tokens(out / "tokens.jsonl")
    assert len(episodes) == 3 and set(tokens) == {e["key"] for e in episodes}
    assert all("tokens" not in e for e in episodes)  # the episode file keeps its layout
    assert validate_dir(out) == []
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    for episode in episodes:
        calls = tokens[episode["key"]]
        asked = [i for i, turn in enumerate(episode["turns"]) if "role" in turn]
        assert [c["turn"] for c in calls] == asked
        for call in calls:
            assert call["role"] == episode["turns"][call["turn"]]["role"]
            assert len(call["logprobs"]) == len(call["completion_ids"]) > 0
            expected = _teacher_forced(model, call)
            assert max(abs(a - b) for a, b in zip(expected, call["logprobs"], strict=True)) < 1e-3
    # without the flag no sidecar is written
    plain = tmp_path / "plain"
    assert main(["evaluate", *MATH, "-k", "split=train", "--model", str(tiny), "--limit", "1",
                 "--out", str(plain)]) == 0
    assert not (plain / "tokens.jsonl").exists()
