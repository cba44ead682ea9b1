"""The text-game family: TextWorld, ALFWorld and TextWorldExpress."""

from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit

_RULES = "lumos_gym.conversion.game_rules"

FAMILY = Family(
    name="games",
    task_type="game",
    description="Text games played through their own engines",
    envs=(
        EnvInfo(
            id="lumos/TextWorld-v0",
            entry_point="lumos_gym.envs.games.textworld:TextWorldEnv",
            sources=("generated", "path"),
            size="any: tw-make games from a seed and difficulty, cached; or .z1-.z8 files",
            description="TextWorld text adventures (Côté et al., 2018) played through its engine",
            max_episode_steps=50,
        ),
        EnvInfo(
            id="lumos/ALFWorld-v0",
            entry_point="lumos_gym.envs.games.alfworld:ALFWorldEnv",
            sources=("generated", "official", "path"),
            size="any: generated ALFRED PDDL problems of the six task types; official splits "
            "when their data folder exists",
            description="ALFWorld household tasks (Shridhar et al., 2021) through ALFWorld's own "
            "TextWorld-PDDL engine",
            max_episode_steps=50,
        ),
        EnvInfo(
            id="lumos/TextWorldExpress-v0",
            entry_point="lumos_gym.envs.games.twx:TextWorldExpressEnv",
            sources=("generated",),
            size="any: seeds of its 8 games (needs java)",
            description="TextWorldExpress games (Jansen and Côté, 2022), fast simulators, where "
            "java is present",
            max_episode_steps=50,
        ),
    ),
    converters={
        "textworld": f"{_RULES}:textworld_annotation",
        "alfworld": f"{_RULES}:alfworld_annotation",
        "textworld-express": f"{_RULES}:twx_annotation",
    },
    tools={"game": "lumos_gym.envs.games.base:GAME_TOOLS"},
    # per level (TextWorld: the four challenges in turn) or per task type and level (ALFWorld);
    # level 1 is the easy end: one-command TextWorld games, small ALFWorld rooms
    splits=(
        OfflineSplit("textworld-train", "lumos/TextWorld-v0",
                     {"split": "train", "levels": [1, 2], "num_games": 150}, "train"),
        OfflineSplit("textworld-test", "lumos/TextWorld-v0",
                     {"split": "test", "levels": [1, 2], "num_games": 4}, "test"),
        OfflineSplit("alfworld-train", "lumos/ALFWorld-v0",
                     {"split": "train", "levels": [1, 2], "num_tasks": 25}, "train"),
        OfflineSplit("alfworld-test", "lumos/ALFWorld-v0",
                     {"split": "test", "levels": [1, 2], "num_tasks": 1}, "test"),
    ),
    metrics={"score": (("score", None), ("win_rate", "success"))},
    lumos_rounds=10,  # the original evaluated no text game: this project's choice
    mix={"game": 80},
)
