"""Text-game step throughput: our envs' `step` against each raw engine's own step call.

The same command cycle (commands that neither win nor lose) is played for `seconds` through
both, in one run:

* TextWorld: `lumos/TextWorld-v0` (a generated tw-cooking game; the engine in its worker
  process, the default, and in this process, `isolate=False`) against `textworld.start(game,
  EnvInfos(score, max_score, won, lost)).step` in this process;
* ALFWorld: `lumos/ALFWorld-v0` (a generated pick_clean problem, worker process) against
  ALFWorld's wrapped TextWorld-PDDL env (`AlfredInfos(AlfredDemangler(PddlEnv))`).step;
* TextWorldExpress: `lumos/TextWorldExpress-v0` against `TextWorldExpressEnv.step` (both on a
  Java VM; skipped without java).

Run: .venv/bin/python benchmarks/engine_games.py [--seconds S]
Generated games go to the lumos-gym cache ($LUMOS_GYM_CACHE) on the first run.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Sequence

from lumos_gym.envs.games.alfworld import ALFWorldEnv
from lumos_gym.envs.games.base import GameEnv
from lumos_gym.envs.games.textworld import TextWorldEnv
from lumos_gym.envs.games.twx import TextWorldExpressEnv, twx_available


def compare(ours: Callable[[str], object], raw: Callable[[str], object],
            commands: Sequence[str], seconds: float, rounds: int = 10) -> tuple[float, float]:
    """Steps per second of `ours` and `raw` over the command cycle, `seconds` each.

    The two alternate in `rounds` slices, so that a change of machine load hits both alike.
    """
    counts, spent = [0, 0], [0.0, 0.0]
    cycles = [itertools.cycle(commands), itertools.cycle(commands)]
    for fn in (ours, raw):  # warm up
        for command in commands:
            fn(command)
    for _ in range(rounds):
        for i, fn in enumerate((ours, raw)):
            started = time.perf_counter()
            deadline = started + seconds / rounds
            while True:
                for _ in range(len(commands)):
                    fn(next(cycles[i]))
                counts[i] += len(commands)
                now = time.perf_counter()
                if now >= deadline:
                    spent[i] += now - started
                    break
    return counts[0] / spent[0], counts[1] / spent[1]


def env_step(env: GameEnv) -> Callable[[str], None]:
    env.reset(options={"index": 0})

    def step(command: str) -> None:
        _, _, terminated, _, _ = env.step(f"Command({command})")
        assert not terminated, command

    return step


def textworld_row(seconds: float, isolate: bool = True) -> dict:
    import textworld

    env = TextWorldEnv(challenge="tw-cooking", num_games=1, split="train", isolate=isolate)
    path = str(env.tasks[0].meta["path"])
    commands = ["look", "inventory", "examine cookbook", "open fridge", "close fridge",
                "go west", "examine table"]
    infos = textworld.EnvInfos(score=True, max_score=True, won=True, lost=True)
    raw_env = textworld.start(path, request_infos=infos)
    raw_env.reset()
    try:
        mine, raw = compare(env_step(env), raw_env.step, commands, seconds)
    finally:
        raw_env.close()
        env.close()
    where = "worker process" if isolate else "in-process, isolate=False"
    return {"env": "lumos/TextWorld-v0", "engine": f"textworld (Jericho; {where})",
            "ours_steps_per_s": mine, "raw_steps_per_s": raw}


def alfworld_row(seconds: float) -> dict:
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    env = ALFWorldEnv(task_types="pick_clean_then_place_in_recep", split="train")
    task = env.tasks[0]
    first = task.meta["gold_commands"][0]  # "go to <receptacle>"
    commands = ["look", "inventory", first, "look", "help"]
    pddl = PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True))
    raw_env = AlfredInfos(AlfredDemangler(pddl, shuffle=False))
    raw_env.load(str(task.meta["path"]))
    raw_env.reset()
    try:
        mine, raw = compare(env_step(env), raw_env.step, commands, seconds)
    finally:
        env.close()
    return {"env": "lumos/ALFWorld-v0", "engine": "alfworld (TextWorld-PDDL)",
            "ours_steps_per_s": mine, "raw_steps_per_s": raw}


def twx_row(seconds: float) -> dict | None:
    if twx_available() is not None:
        return None
    from textworld_express import TextWorldExpressEnv as Express

    env = TextWorldExpressEnv(games="coin", num_tasks=1)
    task = env.tasks[0]
    commands = ["look around", "inventory", "dance", "look around", "close door to north"]
    raw_env = Express(envStepLimit=10**9)
    raw_env.reset(seed=task.meta["seed"], gameFold=task.meta["fold"], gameName="coin",
                  gameParams="", generateGoldPath=False)
    try:
        mine, raw = compare(env_step(env), raw_env.step, commands, seconds)
    finally:
        raw_env.close()
        env.close()
    return {"env": "lumos/TextWorldExpress-v0", "engine": "textworld-express (JVM)",
            "ours_steps_per_s": mine, "raw_steps_per_s": raw}


def measure(seconds: float = 5.0) -> list[dict]:
    """Return one row per game engine: our env's steps/s and the raw engine's, same commands."""
    rows = [textworld_row(seconds), textworld_row(seconds, isolate=False), alfworld_row(seconds),
            twx_row(seconds)]
    return [row for row in rows if row is not None]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    for row in measure(args.seconds):
        overhead = row["raw_steps_per_s"] / row["ours_steps_per_s"] - 1
        print(f"{row['env']:<26} {row['engine']:<45} ours {row['ours_steps_per_s']:8.1f} "
              f"steps/s  raw {row['raw_steps_per_s']:8.1f} steps/s  overhead {overhead:+.1%}")


if __name__ == "__main__":
    main()
