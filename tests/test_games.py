"""Text-game envs: TextWorld, ALFWorld and TextWorldExpress through their real engines.

Generated games are made once per module in a temporary cache (TextWorld: a coin collector, a
treasure hunter and a cooking game of level 1; ALFWorld: two of the six task types), and every
test plays them in real engine processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from conftest import ScriptedBackend
from gymnasium.utils.env_checker import check_env

from lumos_gym.agents.base import AgentConfig
from lumos_gym.agents.lumos import LumosIterativeAgent
from lumos_gym.agents.runner import EpisodeSpec, Runner
from lumos_gym.conversion.annotation import Annotation
from lumos_gym.conversion.game_rules import (
    alfworld_annotation,
    textworld_annotation,
    twx_annotation,
)
from lumos_gym.conversion.pipeline import OFFLINE_SPLITS, convert_env
from lumos_gym.conversion.rules import ConversionError, convert_task
from lumos_gym.conversion.verify import replay
from lumos_gym.envs.checks import replay_gold
from lumos_gym.envs.games.alfworld import (
    OPENABLE,
    TASK_TYPES,
    ALFWorldEnv,
    find_official_games,
    generate_problem,
    split_of,
)
from lumos_gym.envs.games.base import (
    GameProcessError,
    GameState,
    WorkerHost,
    first_observation,
    gold_steps,
    group_commands,
    phrase_command,
    phrase_commands,
)
from lumos_gym.envs.games.textworld import TextWorldEnv, recipes
from lumos_gym.envs.games.twx import TextWorldExpressEnv, twx_available
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError
from lumos_gym.workflows.reproduce import TEST_SUITE, task_group

TW = {"challenge": "mixed", "seed": 1, "num_games": 3}  # coin collector, treasure hunter, cooking
ALF_TYPES = ("pick_clean_then_place_in_recep", "look_at_obj_in_light")


try:
    import psutil
except ImportError:  # fall back on /proc
    psutil = None


def _proc_state(pid: int) -> str | None:
    """The process state letter from /proc (``Z`` for a zombie), or None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def children() -> set[int]:
    """The ids of this process's descendants."""
    if psutil is not None:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1]
                                               .split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def gone(pid: int) -> bool:
    """True when ``pid`` no longer exists: not running, and reaped (no zombie)."""
    if psutil is not None:
        try:
            psutil.Process(pid)
        except psutil.NoSuchProcess:
            return True
        return False
    return _proc_state(pid) is None


def kill(pid: int) -> None:
    """SIGKILL a child and wait until it is dead (a zombie left to reap, or reaped already)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _proc_state(pid) not in (None, "Z"):
        time.sleep(0.01)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("lumos-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LUMOS_GYM_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def tw(cache):
    env = TextWorldEnv(**TW, cache_dir=cache / "textworld")
    yield env
    env.close()


@pytest.fixture(scope="module")
def alf(cache):
    env = ALFWorldEnv(task_types=ALF_TYPES, cache_dir=cache / "alfworld")
    yield env
    env.close()


# ---------------------------------------------------------------------------------- TextWorld
@pytest.mark.full
def test_textworld_games_are_made_once_cached_and_deterministic(tw, cache, tmp_path):
    assert [t.id for t in tw.tasks] == [
        "textworld/test/tw-coin_collector-l1/1",
        "textworld/test/tw-treasure_hunter-l1/2",
        "textworld/test/tw-cooking-l1/3",
    ]
    again = TextWorldEnv(**TW, cache_dir=cache / "textworld")
    assert again._host is None  # read from the cache: nothing made, no process started
    assert [t.gold_actions for t in again.tasks] == [t.gold_actions for t in tw.tasks]
    again.close()
    # the same recipe made again elsewhere gives the same game, byte for byte
    recipe = recipes(**TW)[1]
    path = tw.host.call("lumos_gym.envs.games.textworld:make_game", challenge=recipe.challenge,
                        settings=dict(recipe.settings), seed=recipe.seed, folder=str(tmp_path))
    digest = [hashlib.sha256(Path(p).read_bytes()).hexdigest()
              for p in (path, tw.tasks[1].meta["path"])]
    assert digest[0] == digest[1]
    assert not list((cache / "textworld").glob("*/.tmp-*"))  # temporary folders are gone
    # train and test draw different games from the same numbers
    train = recipes(challenge="tw-coin_collector", num_games=3, split="train")
    test = recipes(challenge="tw-coin_collector", num_games=3, split="test")
    assert {r.seed for r in train}.isdisjoint({r.seed for r in test})


def test_textworld_oracle_replays_win(tw):
    for task in tw.tasks:
        result = replay_gold(tw, task)
        assert result.ok, (task.id, result)
    cooking = tw.tasks[2]
    assert len(cooking.gold_actions) > 1 and cooking.question.startswith("You are hungry")


def test_textworld_plays_commands_and_reports_bad_ones(tw):
    obs, info = tw.reset(options={"task_id": "textworld/test/tw-cooking-l1/3"})
    assert obs.startswith("You are hungry!") and "-= Kitchen =-" in obs and "$$" not in obs
    assert info["action_names"] == ["Command", "Stop"] and "gold_actions" not in info
    assert "admissible_commands" not in info
    obs, reward, terminated, _, info = tw.step("look")  # a bare command
    assert "-= Kitchen =-" in obs and not terminated and info["num_actions"] == 1
    obs, *_ = tw.step("R1 = Command(xyzzy)")
    assert obs == "R1 = That's not a verb I recognise."  # the game's own parser answers
    for bad, says in (("Command()", "empty command"), (f"Command({'go ' * 80})", "characters"),
                      ("R2 = Command(go north", "cannot parse"), ("Answer(won)", "unknown action"),
                      # the interpreter would write a saved game or a transcript into the cwd
                      ("Command(save)", "writes files"), ("Command(look. script)", "'script'")):
        obs, _, terminated, _, info = tw.step(bad)
        assert obs.startswith("Error:") and says in obs and not terminated, bad
    assert info["metrics_so_far"] == {"score": 0.0, "success": 0.0, "moves": 2.0}
    obs, reward, terminated, _, info = tw.step("Stop()")
    assert terminated and reward == 0.0 and info["metrics"]["moves"] == 2.0


@pytest.mark.full
def test_control_characters_never_reach_the_game(tw):
    tw.reset(options={"task_id": "textworld/test/tw-cooking-l1/3"})
    for bad in ("R1 = Command(\x00)", "R1 = Command(look\x00)", "look\x1b[2J"):
        obs, _, terminated, _, info = tw.step(bad)  # \x00 had the game wait 60 s, or crash
        assert obs.startswith("Error: the action holds a control character") and not terminated
        assert "env_error" not in info
    assert info["error_kinds"] == {"control-character": 3}
    obs, _, terminated, _, info = tw.step("R1 = Command(look)")  # the game plays on
    assert "-= Kitchen =-" in obs and not terminated


def test_a_lost_game_ends_the_episode_with_its_points(tw):
    cooking = tw.tasks[2]
    tw.reset(options={"task_id": cooking.id})
    commands = cooking.meta["gold_commands"]
    take = next(c for c in commands if c.startswith("take "))
    steps = commands[: commands.index(take) + 1]
    _, _, terminated, _, _ = tw.step("; ".join(f"Command({c})" for c in steps))
    assert not terminated
    food = take.removeprefix("take ").split(" from ")[0]
    obs, reward, terminated, _, info = tw.step(f"Command(eat {food})")  # eaten raw: lost
    assert terminated and "*** You lost! ***" in obs
    assert info["metrics"]["success"] == 0.0 and reward == info["metrics"]["score"]
    assert 0.0 < reward < 1.0  # the points earned before the loss


def test_textworld_passes_gymnasium_checks(tw):
    check_env(tw, skip_render_check=True, skip_close_check=True)


@pytest.mark.full
def test_lumos_agent_plays_a_game_through_the_runner(cache):
    plans = iter(["Subgoal 1: Take the coin.", "Yes, I will stop planning."])
    backends = {"planner": ScriptedBackend(lambda request: next(plans)),
                "grounder": ScriptedBackend(lambda request: "R1 = Command(take coin)")}
    runner = Runner(LumosIterativeAgent(AgentConfig()), backends)
    spec = EpisodeSpec("lumos/TextWorld-v0", "textworld/test/tw-coin_collector-l1/1",
                       {**TW, "cache_dir": str(cache / "textworld")})
    [record] = runner.run([spec])
    assert record.status == "completed" and record.reward == 1.0
    assert record.metrics == {"score": 1.0, "success": 1.0, "moves": 1.0}
    assert [t["action"] for t in record.turns if "action" in t] == ["R1 = Command(take coin)"]


@pytest.mark.full
def test_killed_game_process_ends_the_episode_without_zombie(cache):
    env = TextWorldEnv(**TW, cache_dir=cache / "textworld")
    try:
        env.reset(options={"index": 2})
        env.step("Command(open fridge)")
        pid = env.session.pid
        kill(pid)
        obs, reward, terminated, truncated, info = env.step("Command(look)")
        assert terminated and not truncated and reward == 0.0
        assert obs.startswith("Error: the game failed") and "exit" in obs
        assert "exit code -9" in info["env_error"] and info["metrics"]["moves"] == 1.0
        assert gone(pid)
        obs, _ = env.reset(options={"index": 0})  # a new process serves the next episode
        assert env.session.pid != pid and "coin" in obs
    finally:
        env.close()


def test_a_command_past_the_timeout_kills_the_game(cache):
    env = TextWorldEnv(**TW, cache_dir=cache / "textworld", step_timeout=0)  # never in time
    try:
        env.reset(options={"index": 0})
        pid = env.session.pid
        obs, _, terminated, _, info = env.step("Command(take coin)")
        assert terminated and "did not answer within" in info["env_error"] and gone(pid)
    finally:
        env.close()


@pytest.mark.full
def test_admissible_commands_privileged_gold_and_no_process_left(cache):
    before = children()
    env = TextWorldEnv(**TW, cache_dir=cache / "textworld", admissible=True, privileged=True)
    env.reset(options={"index": 1})
    worker = env.session.pid
    assert worker in children()
    obs, info = env.reset(options={"index": 0})  # the episode's game closes; the worker stays
    assert env.session.pid == worker
    assert "take coin" in info["admissible_commands"]
    assert info["gold_actions"] == ["R1 = Command(take coin)"]
    obs, reward, terminated, _, info = env.step("R1 = Command(take coin)")
    assert terminated and reward == 1.0 and info["metrics"]["success"] == 1.0
    assert "admissible_commands" not in info
    env.close()
    env.close()  # idempotent
    assert children() <= before and gone(worker)


@pytest.mark.full
def test_given_game_files_play_and_ulx_is_refused(tw, tmp_path):
    source = Path(tw.tasks[1].meta["path"])
    shutil.copy(source, tmp_path / "maze.z8")  # not named tw-*: the engine links it so
    shutil.copy(source.with_suffix(".json"), tmp_path / "maze.json")
    env = TextWorldEnv(games=[tmp_path / "maze.z8"])
    try:
        [task] = env.tasks
        assert task.id == "textworld/file/maze" and task.question == tw.tasks[1].question
        assert replay_gold(env, task).ok
    finally:
        env.close()
    (tmp_path / "old.ulx").write_bytes(b"Glul")
    with pytest.raises(DataError, match="Glulx"):
        TextWorldEnv(games=[tmp_path / "old.ulx"])


@pytest.mark.full
def test_in_process_host_plays_the_same_games(cache):
    env = TextWorldEnv(**TW, cache_dir=cache / "textworld", isolate=False)
    try:
        assert replay_gold(env, env.tasks[2]).ok and env.session.pid is None
    finally:
        env.close()


@pytest.mark.full
def test_textworld_levels_tag_each_game_and_level_one_is_one_command(tw, cache):
    env = TextWorldEnv(levels=[1, 2], num_games=2, seed=1, cache_dir=cache / "textworld")
    try:
        assert [t.id for t in env.tasks] == [
            "textworld/test/tw-coin_collector-l1/1", "textworld/test/tw-treasure_hunter-l1/2",
            "textworld/test/tw-coin_collector-l2/1", "textworld/test/tw-treasure_hunter-l2/2"]
        assert [task_group(t.meta) for t in env.tasks] == ["level 1"] * 2 + ["level 2"] * 2
        assert [t.meta["challenge"] for t in env.tasks[:2]] == [t.meta["challenge"]
                                                               for t in env.tasks[2:]]
        # level 1 of a series is the series of level=1: the same games
        assert [t.meta["path"] for t in env.tasks[:2]] == [t.meta["path"] for t in tw.tasks[:2]]
        assert all(len(t.meta["gold_commands"]) == 1 for t in env.tasks[:2])  # take coin...
        assert all(len(t.meta["gold_commands"]) > 1 for t in env.tasks[2:])
        for task in env.tasks:
            assert replay_gold(env, task).ok, task.id
    finally:
        env.close()
    train = recipes(levels=[1, 2], num_games=8, split="train")
    test = recipes(levels=[1, 2], num_games=8, split="test")
    assert [r.level for r in test] == [1] * 8 + [2] * 8
    assert {(r.challenge, r.seed) for r in train}.isdisjoint((r.challenge, r.seed) for r in test)
    for bad in ({"levels": []}, {"levels": [0]}, {"levels": [6]}, {"levels": ["1"]},
                {"levels": [1], "settings": {"level": 3}}):
        with pytest.raises(LumosGymError, match="level"):
            recipes(**bad)


@pytest.mark.full
def test_a_seed_without_a_quest_is_retried_with_the_next_one(cache):
    # tw-treasure_hunter at level 3 finds no quest for the first seed of this game
    env = TextWorldEnv(challenge="tw-treasure_hunter", level=3, seed=1, num_games=1,
                       split="train", cache_dir=cache / "textworld")
    try:
        [task] = env.tasks
        [recipe] = recipes(challenge="tw-treasure_hunter", level=3, seed=1, num_games=1,
                           split="train")
        assert task.meta["tw_seed"] == recipe.seed_for(1) != recipe.seed
        assert task.meta["level"] == 3 and replay_gold(env, task).ok
    finally:
        env.close()


@pytest.mark.slow
def test_concurrent_makes_of_one_game_share_the_cache(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    def make(_):
        env = TextWorldEnv(challenge="tw-treasure_hunter", num_games=1, cache_dir=tmp_path)
        env.close()
        return env.tasks[0]

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(make, range(2))
    assert first.meta["path"] == second.meta["path"] and first.gold_actions == second.gold_actions
    assert len(list(tmp_path.glob("*/*"))) == 1  # one game folder, no temporary one left


# ---------------------------------------------------------------------------------- ALFWorld
def test_alfworld_generates_problems_of_the_six_types():
    seen = {}
    for task_type in TASK_TYPES:
        attempt, problem = next((a, p) for a in range(10)
                                if (p := generate_problem(task_type, 3, attempt=a)) is not None)
        assert generate_problem(task_type, 3, attempt=attempt) == problem  # deterministic
        assert "(:domain alfred)" in problem.pddl
        assert "(atLocation agent1 loc_bar_start)" in problem.pddl
        assert f"{problem.target}Type" in problem.pddl and problem.room
        seen[task_type] = problem
    assert "isClean" in seen["pick_clean_then_place_in_recep"].pddl
    assert "isHot" in seen["pick_heat_then_place_in_recep"].pddl
    assert "isCool" in seen["pick_cool_then_place_in_recep"].pddl
    assert "(not (= ?o1 ?o2))" in seen["pick_two_obj_and_place"].pddl
    assert "isToggled" in seen["look_at_obj_in_light"].pddl
    assert seen["pick_heat_then_place_in_recep"].room == "kitchen"
    assert generate_problem(TASK_TYPES[0], 3, split="train") != generate_problem(TASK_TYPES[0], 3)


@pytest.mark.full
def test_alfworld_oracle_replays_win(alf):
    assert [t.meta["task_type"] for t in alf.tasks] == list(ALF_TYPES)
    for task in alf.tasks:
        assert task.question.startswith("Your task is to: ")
        assert replay_gold(alf, task).ok, task.id
    obs, info = alf.reset(options={"index": 0})
    assert obs.startswith("You are in the middle of a room.")
    assert obs.endswith(alf.tasks[0].question)
    obs, *_ = alf.step("Command(dance)")
    assert obs == "Nothing happens."  # ALFWorld's engine answers unknown commands so


@pytest.mark.full
def test_alfworld_official_layout_loads_and_missing_data_says_how(alf, tmp_path):
    task = alf.tasks[0]
    split = tmp_path / "json_2.1.1" / "valid_seen"
    trial = split / "pick_clean_then_place_in_recep-X-1" / "trial_T1"
    trial.mkdir(parents=True)
    shutil.copy(task.meta["path"], trial / "game.tw-pddl")
    (trial / "traj_data.json").write_text(json.dumps({"task_type": task.meta["task_type"]}))
    moved = split / "movable_recep-Y-2" / "trial_T2"
    moved.mkdir(parents=True)
    shutil.copy(trial / "game.tw-pddl", moved)
    shutil.copy(trial / "traj_data.json", moved)
    assert len(find_official_games(tmp_path, "valid_seen")) == 1
    env = ALFWorldEnv(data_path=tmp_path, split="valid_seen")
    try:
        [official] = env.tasks
        assert official.id == "alfworld/valid_seen/pick_clean_then_place_in_recep-X-1/trial_T1"
        assert official.question == task.question and official.gold_actions == task.gold_actions
        assert replay_gold(env, official).ok
    finally:
        env.close()
    with pytest.raises(DataError, match=r"json_2\.1\.1.*alfworld-download"):
        ALFWorldEnv(data_path=tmp_path / "nowhere")


def test_alfworld_level_one_rooms_are_small_open_and_split_by_content():
    seen = {"train": set(), "test": set()}
    for task_type in TASK_TYPES:
        for split in ("train", "test"):
            for seed in range(15):
                problem = next(p for a in range(40) if (p := generate_problem(
                    task_type, seed, split=split, attempt=a, level=1)) is not None)
                assert problem.level == 1 and split_of(problem) == split
                receptacles = dict(re.findall(r"\(receptacleType (\w+) (\w+)Type\)",
                                              problem.pddl))
                assert 2 <= len(receptacles) <= 3 and len(set(receptacles.values())) == len(
                    receptacles)  # one of each class
                held = re.findall(rf"\(inReceptacle {problem.target}_bar_\d+ (\S+)\)",
                                  problem.pddl)
                assert held and not {receptacles[r] for r in held} & OPENABLE  # plain sight
                seen[split].add(problem.pddl.split("\n", 1)[1] + problem.description)
    assert seen["train"].isdisjoint(seen["test"])
    assert generate_problem(TASK_TYPES[0], 3, level=2) == generate_problem(TASK_TYPES[0], 3)
    for bad in ({"level": 3}, {"split": "valid"}):
        with pytest.raises(LumosGymError):
            generate_problem(TASK_TYPES[0], 0, **bad)
    with pytest.raises(LumosGymError, match="levels"):
        ALFWorldEnv(levels=[0])


@pytest.mark.full
def test_alfworld_level_one_oracle_wins_every_type(cache):
    env = ALFWorldEnv(levels=[1], cache_dir=cache / "alfworld")
    try:
        assert [t.id for t in env.tasks] == [f"alfworld/test/gen-l1/{t}/0" for t in TASK_TYPES]
        for task in env.tasks:
            assert task_group(task.meta) == "level 1"
            assert not any(c.startswith("open ") for c in task.meta["gold_commands"])
            assert len(task.meta["gold_commands"]) <= 8
            seen = task.meta["observation"].split("you see ", 1)[1].split(".", 1)[0]
            assert 2 <= seen.count(" 1") <= 3, seen  # two or three receptacles
            assert replay_gold(env, task).ok, task.id
    finally:
        env.close()


def test_offline_game_splits_and_test_suite_cover_both_levels():
    splits = {s.name: s for s in OFFLINE_SPLITS}
    for name in ("textworld-train", "textworld-test", "alfworld-train", "alfworld-test"):
        assert splits[name].kwargs["levels"] == [1, 2], name
    suite = {e.env_id: e.kwargs for e in TEST_SUITE}
    # the suite's TextWorld games are games of the test split that data build writes
    tw_test = recipes(**splits["textworld-test"].kwargs)
    assert {r.task_id for r in recipes(**suite["lumos/TextWorld-v0"])} <= {r.task_id
                                                                         for r in tw_test}
    alf = suite["lumos/ALFWorld-v0"]
    assert alf["split"] == "test" and alf["levels"] == [1, 2]
    assert alf["num_tasks"] <= splits["alfworld-test"].kwargs["num_tasks"]
    episodes = (len(recipes(**suite["lumos/TextWorld-v0"]))
                + len(alf["levels"]) * len(alf["task_types"]) * alf["num_tasks"])
    assert 8 <= episodes <= 12


@pytest.mark.slow
def test_alfworld_all_six_types_replay_to_a_win(cache):
    env = ALFWorldEnv(cache_dir=cache / "alfworld", num_tasks=2)
    try:
        assert {t.meta["task_type"] for t in env.tasks} == set(TASK_TYPES)
        for task in env.tasks:
            assert replay_gold(env, task).ok, task.id
    finally:
        env.close()


# ----------------------------------------------------------------------------- TextWorldExpress
needs_java = pytest.mark.skipif(twx_available() is not None, reason=str(twx_available()))


@needs_java
@pytest.mark.full
def test_twx_oracle_replays_win_and_a_dead_vm_ends_the_episode():
    before = children()
    env = TextWorldExpressEnv(games=("coin", "twc"), num_tasks=1, admissible=True)
    try:
        assert [t.id for t in env.tasks] == ["twx/test/coin/20000", "twx/test/twc/20000"]
        for task in env.tasks:
            assert replay_gold(env, task).ok, task.id
            replay(env, twx_annotation(task))  # twc's gold path, cut at the success, verifies
        obs, info = env.reset(options={"index": 1})
        assert obs.startswith("Your task is to pick up objects, then place them")
        assert "look around" in info["admissible_commands"]
        assert env.step("Command(dance)")[0] == "Unknown action: I'm not sure what you mean."
        pid = env.session.pid
        kill(pid)
        obs, _, terminated, _, info = env.step("Command(look around)")
        assert terminated and obs.startswith("Error:") and "Java VM" in info["env_error"]
        assert gone(pid)
        env.reset(options={"index": 0})
        assert env.session.pid != pid
    finally:
        env.close()
    assert children() <= before


def test_twx_without_java_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(Exception, match="java is not on the PATH"):
        TextWorldExpressEnv(games="coin", num_tasks=1)


# ------------------------------------------------------------------------- gold and converters
def test_commands_group_into_phrased_subgoals():
    commands = ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1",
                "open fridge 1", "move apple 1 to fridge 1", "look around", "move north"]
    groups = group_commands(commands)
    assert groups == [commands[:2], commands[2:5], commands[5:]]
    assert phrase_commands(groups[0]) == ("Go to the countertop 1 and take the apple 1 from "
                                          "the countertop 1.")
    assert phrase_commands(groups[1]) == ("Go to the fridge 1, open the fridge 1 and move the "
                                          "apple 1 to the fridge 1.")
    assert phrase_command("put 6 pineapples in box") == "put 6 pineapples in the box"
    assert phrase_command("open door to north") == "open the door to north"
    assert phrase_command("inventory") == "check the inventory"
    assert group_commands(["go east"] * 9) == [["go east"] * 4, ["go east"] * 4, ["go east"]]
    assert gold_steps([["look"], ["take coin"]]) == ("R1 = Command(look)",
                                                      "R2 = Command(take coin)")
    with pytest.raises(ValueError):
        gold_steps([["take (coin)"]])
    stated = "Find the coin.\n\nA room."
    assert first_observation("Find the coin.", stated) == stated
    assert first_observation("Find the coin.", "A room.") == stated
    assert GameState("x", score=3, max_score=4).normalized_score() == 0.75
    assert GameState("x", score=3, max_score=4, won=True).normalized_score() == 1.0


def test_converters_write_command_plans_and_reject_bad_tasks(tw, alf):
    annotation = textworld_annotation(tw.tasks[2])
    assert annotation.dataset == "textworld" and annotation.task_type == "game"
    assert annotation.task == tw.tasks[2].meta["observation"] and annotation.answer == "won"
    assert [a.text for a in annotation.actions] == [
        f"R{i} = Command({c})" for i, c in enumerate(tw.tasks[2].meta["gold_commands"], 1)]
    assert Annotation.from_dict(annotation.to_dict()) == annotation
    first = alfworld_annotation(alf.tasks[0]).subgoals[0]
    assert first.text.startswith("Go to the ")
    assert first.actions[0].text.startswith("R1 = Command(go to ")
    assert convert_task(alf.tasks[1], "alfworld").meta["converter"] == "rules/alfworld"
    bare = Task("g/1", "Win.", "won", "game", meta={"gold_commands": []})
    for task, says in ((bare, "no winning"), (Task("q/1", "?", "1", "math"), "not a game"),
                       (Task("g/2", "Win.", "won", "game", meta={"gold_commands": ["a;b"]}),
                        "cannot be written")):
        with pytest.raises(ConversionError, match=says):
            textworld_annotation(task)


@pytest.mark.full
def test_annotations_verify_by_replay_and_a_short_plan_fails(tw, alf):
    for env, convert in ((tw, textworld_annotation), (alf, alfworld_annotation)):
        for task in env.tasks:
            replay(env, convert(task))
    cooking = textworld_annotation(tw.tasks[2])
    cut = Annotation(cooking.id, cooking.dataset, "game", cooking.task, cooking.subgoals[:-1],
                     "won")
    with pytest.raises(Exception, match="no-answer"):
        replay(tw, cut)


@pytest.mark.full
def test_convert_pipeline_keeps_verified_game_annotations(cache, tmp_path):
    summary = convert_env("lumos/TextWorld-v0", out=tmp_path / "tw.jsonl",
                          env_kwargs={**TW, "cache_dir": str(cache / "textworld")})
    assert (summary.kept, summary.rejected) == (3, 0)
    rows = [json.loads(line) for line in open(tmp_path / "tw.jsonl")]
    plan = "Subgoal 1: Take the coin.\nAction 1-1: R1 = Command(take coin)"
    assert rows[0]["subgoal_plan"] == plan


@pytest.mark.full
def test_plan_feedback_quotes_the_games_replies_as_the_agent_does(tw, cache):
    from lumos_gym import prompts
    from lumos_gym.actions import parse_actions
    from lumos_gym.conversion.exports import RESULTS_FIELD, export_records
    from lumos_gym.conversion.verify import verify_annotations

    kwargs = {**TW, "cache_dir": str(cache / "textworld")}
    task = tw.tasks[2]  # the cooking game: several subgoals
    annotation = textworld_annotation(task)
    report = verify_annotations([annotation], env_factory=lambda _t, _d: TextWorldEnv(**kwargs))
    [kept] = report.kept
    assert len(kept.subgoals) >= 2 and kept.subgoals == annotation.subgoals
    [record] = export_records([kept], "plan-iterative")
    messages = record["messages"]
    # each feedback quotes the game's reply to the subgoal's last command, played here again
    tw.reset(options={"task_id": task.id})
    for k, subgoal in enumerate(kept.subgoals, 1):
        *_, info = tw.step("; ".join(a.text for a in subgoal.actions))
        [variable] = subgoal.actions[-1].action.outputs
        reply = " ".join(info["variables"][variable].split())
        feedback = messages[2 * k]["content"]
        if len(reply) <= prompts.MAX_FEEDBACK_RESULT_CHARS:
            assert feedback == (f"The executed result for Subgoal {k} is "
                                f"{reply.rstrip('.')}. Should we stop planning?")
        else:
            assert feedback.startswith(f"The executed result for Subgoal {k} is {reply[:300]}")
            assert feedback.endswith(" [...]. Should we stop planning?")
        assert kept.meta[RESULTS_FIELD][k - 1] in feedback
    assert "We have already" not in json.dumps(messages)
    # the grounder records carry no "= result" tails
    [ground] = export_records([kept], "ground-iterative")
    for message in ground["messages"][1::2]:
        assert all(a.result is None for a in parse_actions(message["content"]))
    # Lumos-I replaying the exports in the game sends the planner the same bytes
    answers = {"planner": [m["content"] for m in messages[1::2]],
               "grounder": [m["content"] for m in ground["messages"][1::2]]}
    backends = {role: ScriptedBackend(lambda r, a=a: a[r.prompt.count("<|assistant|>") - 1])
                for role, a in answers.items()}
    [episode] = Runner(LumosIterativeAgent(AgentConfig()), backends).run(
        [EpisodeSpec("lumos/TextWorld-v0", task.id, kwargs)]
    )
    assert episode.status == "completed" and episode.reward == 1.0
    sent = [r.prompt for batch in backends["planner"].batches for r in batch]
    last = len(messages) - 3  # the winning command ends the episode before its feedback
    assert sent == [prompts.render_inference(messages[:i]) for i in range(1, last + 1, 2)]


@pytest.mark.full
def test_worker_host_reports_engine_errors_and_stops(tmp_path):
    host = WorkerHost()
    try:
        with pytest.raises(Exception, match="Unable to find game"):
            host.open("lumos_gym.envs.games.textworld:TextWorldEngine",
                      {"path": str(tmp_path / "x.z8")})
        with pytest.raises(Exception, match="not a lumos_gym"):
            host.call("os:getpid")
        pid = host.pid
        assert host.alive
    finally:
        host.close()
    assert gone(pid)
    with pytest.raises(GameProcessError):
        host.step("look")
