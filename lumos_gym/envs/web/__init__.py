"""The web family: WebShop on the offline shop site, and Mind2Web."""

from lumos_gym.envs.families import EnvInfo, Family, OfflineSplit

_MIND2WEB_TOOLS = "lumos_gym.envs.web.mind2web:MIND2WEB_TOOLS"

FAMILY = Family(
    name="web",
    task_type="web",
    description="Shopping on the offline shop site (WebShop) and step-wise web actions "
    "(Mind2Web)",
    envs=(
        EnvInfo(
            id="lumos/WebShop-v0",
            entry_point="lumos_gym.envs.web.webshop:WebShopEnv",
            sources=("generated", "official", "path"),
            size="any: generated catalogue (1,000+ products) and instructions, seeded; official "
            "WebShop product and instruction json",
            description="Shopping on a real offline shop site (loopback HTTP, HTML pages): "
            "search, browse, pick options, buy; WebShop reward",
            max_episode_steps=30,
        ),
        EnvInfo(
            id="lumos/Mind2Web-v0",
            entry_point="lumos_gym.envs.web.mind2web:Mind2WebEnv",
            sources=("bundled", "record", "official", "path"),
            size="2,350 tasks official (train / test_task / test_website / test_domain); "
            "24 bundled (recorded from the shop site); any number recorded anew",
            description="Step-wise web actions on cleaned HTML (Deng et al., 2023): "
            "CLICK/TYPE/SELECT grounding, element ranking, step success rate",
            max_episode_steps=40,
        ),
    ),
    converters={
        "webshop": "lumos_gym.conversion.webshop_rules:webshop_annotation",
        "mind2web": "lumos_gym.conversion.mind2web_rules:mind2web_annotation",
    },
    tools={
        "webshop": "lumos_gym.envs.web.webshop:WEBSHOP_TOOLS",
        "mind2web": _MIND2WEB_TOOLS,
        "web": _MIND2WEB_TOOLS,
    },
    splits=(
        OfflineSplit("webshop-train", "lumos/WebShop-v0", {"split": "train", "num_tasks": 500},
                     "train"),
        OfflineSplit("webshop-test", "lumos/WebShop-v0", {"split": "test", "num_tasks": 100},
                     "test"),
        OfflineSplit("mind2web-shop-train", "lumos/Mind2Web-v0",
                     {"source": "record", "split": "train", "num_tasks": 200}, "train"),
        OfflineSplit("mind2web-shop-test", "lumos/Mind2Web-v0", {}, "test"),
    ),
    metrics={
        # Mind2Web: step success rate (Lumos' number), element accuracy, operation F1, task
        # success
        "step_success_rate": (
            ("step_success_rate", None), ("element_accuracy", "element_accuracy"),
            ("operation_f1", "operation_f1"), ("task_success", "success"),
        ),
        # WebShop: the average reward (Lumos' number) and the success rate (reward 1)
        "reward": (("average_reward", None), ("success_rate", "success")),
    },
    # The original loops: Mind2Web plans and grounds a subgoal in each of its 15 rounds, 15
    # subgoals (allenai/lumos eval/mind2web/run_eval.py, lumos_iterative: range(15); Lumos'
    # own in-context web example, data/incontext.py, has 11); WebShop's 10 rounds alternate
    # the planner and the grounder, 5 subgoals (eval/webshop/run_eval.py: range(10)).
    lumos_rounds={"web": 15, "webshop": 5},
    # Mind2Web's records are Lumos' web_agent domain; WebShop's actions have their own
    domains={"web": "web_agent", "webshop": "webshop"},
    mix={"webshop": 90, "web_agent": 60},
    domain_actions={
        "web_agent": frozenset(["CLICK", "TYPE", "SELECT"]),
        "webshop": frozenset(["Search", "FeatureRetrieve", "Pick", "Click"]),
    },
)
