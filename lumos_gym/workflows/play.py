"""``lumos-gym play``: a person types grounded actions and reads the observations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lumos_gym.envs.base import LumosEnv, observation_text
from lumos_gym.envs.registration import make_env

HELP = (
    "Type grounded actions, e.g. 'R1 = Calculator(48/2)' (several joined by '; '), and finish "
    "with 'Answer(R1)'. ':help' shows this, ':quit' leaves."
)


def play(
    env_id: str,
    *,
    kwargs: dict[str, Any] | None = None,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    read: Callable[[str], str] | None = None,
    write: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """Run one interactive episode of ``env_id``.

    Args:
        env_id: a registered env id.
        kwargs: env constructor arguments.
        seed: the reset seed (picks the task when ``options`` names none).
        options: reset options, e.g. ``{"task_id": ...}``.
        read: reads one line after showing a prompt (``input``, looked up at call time, by
            default).
        write: shows one block of text (``print`` by default).

    Returns:
        The final ``info`` (with ``metrics``) or None when the person quit early.
    """
    read = read if read is not None else input
    write = write if write is not None else print
    env = make_env(env_id, **(kwargs or {}))
    base = env.unwrapped
    assert isinstance(base, LumosEnv)
    try:
        observation, info = env.reset(seed=seed, options=options)
        write(f"[{env_id}] task {info['task_id']} ({info['task_type']})")
        write("Actions: " + "; ".join(info["actions"]))
        write(HELP)
        write(f"\n{observation_text(observation)}\n")
        while True:
            try:
                line = read("action> ").strip()
            except EOFError:
                return None
            if line in (":quit", ":q"):
                return None
            if line in (":help", ":h", ""):
                write(HELP)
                continue
            observation, reward, terminated, truncated, info = env.step(line)
            write(observation_text(observation))
            if terminated or truncated:
                ending = "finished" if terminated else "step limit reached"
                write(f"\nEpisode {ending}. reward={reward}")
                if "metrics" in info:
                    write(f"metrics: {info['metrics']}; gold answer: {info['gold_answer']}")
                return info
    finally:
        env.close()
