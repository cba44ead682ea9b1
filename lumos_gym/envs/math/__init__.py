"""The math family: GSM8K, SVAMP, ASDiv and the procedural MathWord."""

from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit

_ENV = "lumos_gym.envs.math.official"
_RULES = "lumos_gym.conversion.rules"

FAMILY = Family(
    name="math",
    task_type="math",
    description="Math word problems solved with Calculator and equation tools",
    envs=(
        EnvInfo(
            id="lumos/GSM8K-v0",
            entry_point=f"{_ENV}:MathEnv",
            kwargs={"dataset": "gsm8k"},
            sources=("bundled", "official", "hub", "path"),
            size="1,319 test / 7,473 train official; 24 bundled",
            description="Grade-school math word problems (Cobbe et al., 2021), official jsonl",
            max_episode_steps=32,
        ),
        EnvInfo(
            id="lumos/SVAMP-v0",
            entry_point=f"{_ENV}:MathEnv",
            kwargs={"dataset": "svamp"},
            sources=("bundled", "official", "path"),
            size="1,000 official; 24 bundled",
            description="Simple variations on arithmetic math word problems (Patel et al., 2021)",
            max_episode_steps=16,
        ),
        EnvInfo(
            id="lumos/ASDiv-v0",
            entry_point=f"{_ENV}:MathEnv",
            kwargs={"dataset": "asdiv"},
            sources=("bundled", "official", "path"),
            size="2,305 official; 24 bundled",
            description="A diverse corpus of math word problems (Miao et al., 2020), official xml",
            max_episode_steps=16,
        ),
        EnvInfo(
            id="lumos/MathWord-v0",
            entry_point=f"{_ENV}:MathWordEnv",
            sources=("generated",),
            size="any: num_tasks per level, levels 1-5",
            description="Procedural multi-step word problems with GSM8K-style rationales, seeded",
            max_episode_steps=32,
        ),
    ),
    converters={
        "gsm8k": f"{_RULES}:gsm8k_annotation",
        "svamp": f"{_RULES}:svamp_annotation",
        "asdiv": f"{_RULES}:asdiv_annotation",
        "mathword": f"{_RULES}:mathword_annotation",
    },
    verify_env=f"{_RULES}:math_env_factory",
    tools={"math": f"{_ENV}:MATH_TOOLS"},
    splits=(
        # data build's --num-tasks is MathWord's num_tasks: problems per level
        OfflineSplit("mathword-train", "lumos/MathWord-v0",
                     {"split": "train", "levels": [1, 2, 3, 4, 5]}, "train", takes_num_tasks=True),
        OfflineSplit("mathword-test", "lumos/MathWord-v0",
                     {"split": "test", "levels": [1, 2, 3, 4, 5]}, "test", takes_num_tasks=True),
        OfflineSplit("gsm8k-sample", "lumos/GSM8K-v0", {}, "test"),
        OfflineSplit("svamp-sample", "lumos/SVAMP-v0", {}, "test"),
        OfflineSplit("asdiv-sample", "lumos/ASDiv-v0", {}, "test"),
    ),
    metrics={"accuracy": (("accuracy", None),)},
    # The original evaluation loops alternate a planner and a grounder call: GSM8K's makes 16
    # calls, 8 subgoals (allenai/lumos eval/gsm/run_eval.py, lumos_iterative: range(16)), and
    # SVAMP's 4 calls, 2 subgoals (eval/svamp/run_eval.py: range(4)). ASDiv and MathWord,
    # which the original did not evaluate, take GSM8K's.
    lumos_rounds={"math": 8, "svamp": 2},
    domains={"math": "maths"},
    mix={"maths": 170},
    domain_actions={
        "maths": frozenset(
            ["Calculator", "SetEquation", "SolveEquation", "Count", "SolveInequality", "Code",
             "Define"]
        ),
    },
)
