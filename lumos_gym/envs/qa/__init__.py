"""The complex-QA family: HotpotQA, StrategyQA, MuSiQue, 2Wiki, Bamboogle and WorldQA."""

from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit

_QA = "lumos_gym.envs.qa.base"
_RULES = "lumos_gym.conversion.qa_rules"


def _dataset_env(name: str, dataset: str, split: str, sources: tuple[str, ...], size: str,
                 description: str) -> EnvInfo:
    """One official QA dataset's env: ``QADatasetEnv`` over ``dataset``'s ``split``."""
    return EnvInfo(
        id=f"lumos/{name}-v0",
        entry_point=f"{_QA}:QADatasetEnv",
        kwargs={"dataset": dataset, "split": split},
        sources=sources,
        size=size,
        description=description,
        max_episode_steps=24,
    )


FAMILY = Family(
    name="qa",
    task_type="qa",
    description="Multi-hop questions answered with retrieval and QA tools",
    envs=(
        _dataset_env(
            "HotpotQA", "hotpotqa", "dev", ("bundled", "official", "hub", "path"),
            "7,405 dev / 90,447 train official; 7 bundled",
            "Multi-hop Wikipedia QA (Yang et al., 2018): distractor and fullwiki json, Lumos "
            "eval json",
        ),
        _dataset_env(
            "StrategyQA", "strategyqa", "train", ("bundled", "official", "path"),
            "2,290 train official; 6 bundled",
            "Yes/no questions needing implicit multi-step strategies (Geva et al., 2021)",
        ),
        _dataset_env(
            "MuSiQue", "musique", "ans_dev", ("bundled", "official", "path"),
            "2,417 answerable dev official; 6 bundled",
            "Multi-hop questions composed of single hops (Trivedi et al., 2022), jsonl",
        ),
        _dataset_env(
            "2WikiMultihopQA", "2wikimultihopqa", "dev", ("bundled", "official", "path"),
            "12,576 dev official; 6 bundled",
            "Multi-hop QA over Wikipedia and Wikidata with evidence triples (Ho et al., 2020)",
        ),
        _dataset_env(
            "Bamboogle", "bamboogle", "test", ("bundled", "official", "hub", "path"),
            "125 official; 8 bundled",
            "Two-hop questions search engines answer wrongly (Press et al., 2022)",
        ),
        EnvInfo(
            id="lumos/WorldQA-v0",
            entry_point="lumos_gym.envs.qa.worldqa:WorldQAEnv",
            sources=("generated",),
            size="any: num_tasks per family, 4 families; default 40 tasks over a 204-page world",
            description="Procedural multi-hop QA over a generated encyclopedia (bridge, "
            "comparison, yes/no, arithmetic), seeded, offline",
            max_episode_steps=20,
        ),
    ),
    converters={
        "worldqa": "lumos_gym.conversion.worldqa_rules:worldqa_annotation",
        "hotpotqa": f"{_RULES}:hotpotqa_annotation",
        "musique": f"{_RULES}:musique_annotation",
        "strategyqa": f"{_RULES}:strategyqa_annotation",
        "2wikimultihopqa": f"{_RULES}:twowiki_annotation",
        "bamboogle": None,  # questions and answers only: an evaluation set
    },
    tools={"qa": f"{_QA}:QA_TOOLS"},
    splits=(
        # data build's --num-tasks is WorldQA's num_tasks: questions per question family
        OfflineSplit("worldqa-train", "lumos/WorldQA-v0", {"split": "train"}, "train",
                     takes_num_tasks=True),
        OfflineSplit("worldqa-test", "lumos/WorldQA-v0", {"split": "test"}, "test",
                     takes_num_tasks=True),
        OfflineSplit("hotpotqa-sample", "lumos/HotpotQA-v0", {}, "test"),
        OfflineSplit("strategyqa-sample", "lumos/StrategyQA-v0", {}, "test"),
        OfflineSplit("musique-sample", "lumos/MuSiQue-v0", {}, "test"),
        OfflineSplit("2wikimultihopqa-sample", "lumos/2WikiMultihopQA-v0", {}, "test"),
        OfflineSplit("bamboogle-sample", "lumos/Bamboogle-v0", {}, "test"),
    ),
    metrics={
        "accuracy": (("accuracy", None), ("exact_match", "exact_match"), ("f1", "f1")),
    },
    # The original HotpotQA and StrategyQA loops: 10 alternating planner and grounder calls, 5
    # subgoals (allenai/lumos eval/hotpotqa/run_eval.py and eval/strategyqa/run_eval.py,
    # lumos_iterative: range(10)); the other QA datasets take theirs.
    lumos_rounds=5,
    domains={"qa": "complex_qa"},
    mix={"complex_qa": 140},
    domain_actions={
        "complex_qa": frozenset(["KnowledgeQuery", "ParagraphRetrieve", "QA", "Calculator",
                                 "Code"]),
    },
)
