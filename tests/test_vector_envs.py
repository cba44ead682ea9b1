"""Gymnasium vector envs of lumos-gym envs: sync and async copies see what one env sees.

Four copies of a text env (MathWord) and of a Dict-observation env (Scenes: text and image),
through ``gymnasium.make_vec`` with its default settings (async: observations in shared
memory), reset and stepped with real actions, an automatic reset included, and compared with
single envs given the same seeds and actions.
"""

from __future__ import annotations

import copy
import multiprocessing

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.envs.base import MAX_ACTION_CHARS, observation_text
from lumos_gym.envs.text_space import SharedTexts, TextSpace

NUM_ENVS = 4
#: The second step ends every episode; the third is the vector env's automatic reset.
ACTIONS = ["R1 = Calculator(2 + 3)", "Answer(R1)", "R1 = Calculator(7 * 6)"]


def same_observation(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_observation(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def single_runs(env_id: str) -> list[list[tuple]]:
    """Per env copy: (observation, reward, terminated) after reset and after each action, as
    one env does it; after an ended episode the vector env resets instead of stepping."""
    runs = []
    for index in range(NUM_ENVS):
        env = gym.make(env_id)
        observation, _ = env.reset(seed=index)
        seen = [(observation, 0.0, False)]
        ended = False
        for action in ACTIONS:
            if ended:
                observation, _ = env.reset()
                seen.append((observation, 0.0, False))
                ended = False
                continue
            observation, reward, ended, truncated, _ = env.step(action)
            seen.append((observation, reward, ended))
        env.close()
        runs.append(seen)
    return runs


def copy_of(batch, index: int):
    """The observation of one env copy in a batched observation (a tuple, or a dict of them)."""
    if isinstance(batch, dict):
        return {key: value[index] for key, value in batch.items()}
    return batch[index]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env_id", ["lumos/MathWord-v0", "lumos/Scenes-v0"])
def test_vector_copies_see_what_one_env_sees(env_id, mode):
    expected = single_runs(env_id)
    env = gym.make_vec(env_id, num_envs=NUM_ENVS, vectorization_mode=mode)
    try:
        observation, _ = env.reset(seed=0)
        steps = [(observation, np.zeros(NUM_ENVS), np.zeros(NUM_ENVS, bool))]
        for action in ACTIONS:
            observation, reward, terminated, _, _ = env.step([action] * NUM_ENVS)
            steps.append((observation, reward, terminated))
    finally:
        env.close()
    assert env.closed
    for index, seen in enumerate(expected):
        for (batch, rewards, ends), (single, reward, ended) in zip(steps, seen, strict=True):
            got = copy_of(batch, index)
            assert same_observation(got, single), (index, observation_text(got)[:80])
            assert rewards[index] == reward and bool(ends[index]) == ended
    texts = [copy_of(batch, 0) for batch, _, _ in steps]
    assert observation_text(texts[1]) == "R1 = 5"  # a real observation, not padding
    assert observation_text(texts[2]) == "Answer submitted: 5"
    if mode == "async":
        assert not any(process.is_alive() for process in env.processes)


def test_spaces_print_in_one_short_line():
    env = gym.make("lumos/MathWord-v0")
    shown = repr(env.action_space)
    env.close()
    assert shown.startswith(f"TextSpace(max_length={MAX_ACTION_CHARS}, charset=<63,")
    assert len(shown) < 150 and "\n" not in shown
    assert str(TextSpace(10)) == repr(TextSpace(10))


def test_shared_texts_are_a_live_view_and_copy_to_strings():
    space = TextSpace(12)
    memory = create_shared_memory(space, n=3, ctx=multiprocessing.get_context())
    view = read_from_shared_memory(space, memory, n=3)
    for index, text in enumerate(["héllo\tworld", "", "ab"]):
        write_to_shared_memory(space, index, text, memory)
    assert isinstance(view, SharedTexts) and view == ("héllo\tworld", "", "ab")
    snapshot = copy.deepcopy(view)
    write_to_shared_memory(space, 2, "x" * 12, memory)  # the full length: no end marker
    assert view[2] == "x" * 12 and view[-1] == "x" * 12 and view[1:] == ("", "x" * 12)
    assert snapshot == ("héllo\tworld", "", "ab") and type(snapshot) is tuple
    with pytest.raises(ValueError, match="13 characters is outside"):
        write_to_shared_memory(space, 0, "y" * 13, memory)
    with pytest.raises(IndexError):
        view[3]


def test_text_space_shares_its_tables_and_equals_the_plain_text_space():
    from gymnasium import spaces

    from lumos_gym.envs.text_space import text_charset

    ours = TextSpace(64, seed=3)
    plain = spaces.Text(64, min_length=0, charset=text_charset(), seed=3)
    assert ours == plain and plain == ours
    assert sorted(vars(ours)) == sorted(vars(plain))
    assert all(vars(ours)[k] == vars(plain)[k] for k in vars(plain) if k != "_np_random")
    assert [ours.sample() for _ in range(5)] == [plain.sample() for _ in range(5)]
    assert ours.contains("é\tx") and not ours.contains("\r") and not ours.contains("x" * 65)
    assert TextSpace(8)._char_index is TextSpace(9)._char_index  # built once, not per env
    with pytest.raises(ValueError):
        TextSpace(-1)
