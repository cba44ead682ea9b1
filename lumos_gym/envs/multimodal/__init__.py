"""The multimodal family: A-OKVQA, ScienceQA and the generated Scenes."""

from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit

_VQA = "lumos_gym.envs.multimodal.base:VQADatasetEnv"
_RULES = "lumos_gym.conversion.multimodal_rules"

FAMILY = Family(
    name="multimodal",
    task_type="multimodal",
    description="Questions about pictures, answered with VQA then QA or Calculator",
    envs=(
        EnvInfo(
            id="lumos/Scenes-v0",
            entry_point="lumos_gym.envs.multimodal.scenes:ScenesEnv",
            sources=("generated",),
            size="any: num_tasks per kind, seeded; rendered images",
            description="Generated pictures of shapes (colours, sizes, positions, counts, "
            "labels) and questions needing VQA then QA or Calculator, offline",
            max_episode_steps=16,
        ),
        EnvInfo(
            id="lumos/AOKVQA-v0",
            entry_point=_VQA,
            kwargs={"dataset": "aokvqa"},
            sources=("official", "path"),
            size="17,056 train / 1,145 val / 6,702 test official; COCO 2017 images from a folder",
            description="Visual questions needing outside knowledge (Schwenk et al., 2022), "
            "official json",
            max_episode_steps=16,
        ),
        EnvInfo(
            id="lumos/ScienceQA-v0",
            entry_point=_VQA,
            kwargs={"dataset": "scienceqa"},
            sources=("official", "path"),
            size="21,208 official (12,726 train / 4,241 val / 4,241 test); images from a folder",
            description="Multiple-choice science questions with images (Lu et al., 2022), "
            "official problems.json and pid_splits.json",
            max_episode_steps=16,
        ),
    ),
    converters={
        "scenes": f"{_RULES}:scenes_annotation",
        "aokvqa": f"{_RULES}:aokvqa_annotation",
        "scienceqa": f"{_RULES}:scienceqa_annotation",
    },
    tools={"multimodal": "lumos_gym.envs.multimodal.base:VQA_TOOLS"},
    splits=(
        OfflineSplit("scenes-train", "lumos/Scenes-v0", {"split": "train", "num_tasks": 20},
                     "train"),
        OfflineSplit("scenes-test", "lumos/Scenes-v0", {"split": "test", "num_tasks": 4}, "test"),
    ),
    metrics={
        "accuracy": (("accuracy", None),),
        # A-OKVQA: multiple-choice accuracy (the reward) and direct-answer accuracy
        "mc_accuracy": (("mc_accuracy", None), ("da_accuracy", "da_accuracy")),
    },
    # the original's released evaluation code has no A-OKVQA or ScienceQA loop: its QA limit
    lumos_rounds=5,
    mix={"multimodal": 100},
)
