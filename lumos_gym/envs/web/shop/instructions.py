"""Shopping instructions over a catalogue, and the expert trajectory that fulfils each.

A generated instruction targets one product: it asks for one to three of the product's
attributes, one value of each of its option groups, and a price cap drawn as WebShop draws it
(two of the first four multiples of ten above the price, the larger one; ``goal.py``
``get_synthetic_goals``). Its text follows WebShop's synthetic form, ``<request> with color:
navy, and size: large, and price lower than 40.00 dollars``, with a few request openings
(``Find me ...``, ``i am looking for ...``).

Targets are split by asin (:func:`~lumos_gym.envs.web.shop.catalog.asin_split`): one product in
five is a ``test`` target, the others ``train`` targets, so the two splits never target the
same product; both browse the same shop. ``validation`` instructions (for choices made before a
test run) target only the products that the validation shop
(:func:`~lumos_gym.envs.web.shop.catalog.validation_catalog`) adds to the train shop, so no
train or test instruction targets them, and skip any instruction that the train or test split
of the same seed draws in the train shop.

The expert (:func:`expert_plan`) plays as the Lumos WebShop shots do (docs/lumos-format.md §1.5):
search with the instruction, look at the top ``search_top_k`` results, and buy one that earns
the full reward with the goal's options. When the ranking of the lexical backend (the one
replays use) picks such a product from the first two results' names and features, the plan has
Lumos' five subgoals (search, the features of each of the two items, pick, buy); otherwise it
opens a fitting result directly (search, its features, buy). An instruction whose search shows
no product that can earn the full reward is not used.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lumos_gym.envs.tasks import Task
from lumos_gym.envs.web.shop.catalog import Catalog, Product, asin_split
from lumos_gym.errors import LumosGymError
from lumos_gym.scoring.webshop import Goal, best_options, compute_reward
from lumos_gym.tools.webshop import feature_candidates, rank_lexical

__all__ = [
    "DEFAULT_SEARCH_TOP_K",
    "NO_PRICE_CAP",
    "SPLITS",
    "ExpertPlan",
    "expert_plan",
    "generate_goals",
    "generate_tasks",
    "instruction_text",
    "item_features",
    "price_cap",
    "search_summary",
    "task_from_goal",
]

SPLITS = ("train", "validation", "test")
#: How many results ``Search`` returns as ``asin - title ** asin - title`` (Lumos returned 2).
DEFAULT_SEARCH_TOP_K = 2
#: WebShop's price cap when no cap is drawn.
NO_PRICE_CAP = 1_000_000.0
_PRICE_STEPS = [10.0 * i for i in range(1, 100)]  # WebShop's PRICE_RANGE
_OPENINGS = ("Find me", "i am looking for", "i need", "Show me", "I want to buy",
             "i would like")
_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


@dataclass(frozen=True)
class ExpertPlan:
    """A gold trajectory: what it buys and its grounded steps, one per subgoal.

    Attributes:
        asin: the product bought.
        options: the options chosen on its page (name to value).
        subgoals: the subgoal texts.
        steps: one ``; ``-joined grounded step per subgoal (the Lumos grammar).
        reward: the reward the purchase earns (1.0 for a usable plan).
    """

    asin: str
    options: Mapping[str, str]
    subgoals: tuple[str, ...]
    steps: tuple[str, ...]
    reward: float = 1.0
    meta: Mapping[str, Any] = field(default_factory=dict)


def price_cap(price: float, rng: random.Random) -> float:
    """Draw a price cap above ``price`` as WebShop does, or :data:`NO_PRICE_CAP`."""
    steps = [p for p in _PRICE_STEPS if p > price][:4]
    if len(steps) < 2:
        return NO_PRICE_CAP
    return max(rng.sample(steps, 2))


def price_clause(price_upper: float) -> str:
    """Return WebShop's price clause, ``, and price lower than 40.00 dollars`` (or nothing)."""
    if price_upper >= NO_PRICE_CAP:
        return ""
    return f", and price lower than {price_upper:.2f} dollars"


def instruction_text(
    opening: str,
    attributes: Sequence[str],
    query: str,
    options: Sequence[tuple[str, str]],
    price_upper: float,
) -> str:
    """Write an instruction in WebShop's synthetic form."""
    request = " ".join(p for p in (opening, ", ".join(attributes), query) if p)
    chosen = ", and ".join(f"{name}: {value}" for name, value in options)
    with_options = f" with {chosen}" if chosen else ""
    return f"{request}{with_options}{price_clause(price_upper)}"


def _goal_for(product: Product, rng: random.Random) -> Goal:
    count = min(len(product.attributes), rng.choice((1, 2, 2, 3)))
    attributes = tuple(rng.sample(product.attributes, count)) if count else ()
    options = tuple((name, rng.choice(values)) for name, values in product.options.items()
                    if values)
    upper = price_cap(product.price, rng)
    text = instruction_text(rng.choice(_OPENINGS), attributes, product.query, options, upper)
    return Goal(
        instruction=text,
        attributes=attributes,
        options=tuple(value for _, value in options),
        price_upper=upper,
        query=product.query,
        category=product.category,
        product_category=product.product_category,
        name=product.title,
        asin=product.asin,
        option_names=tuple(name for name, _ in options),
    )


def search_summary(products: Sequence[Product], top_k: int) -> str:
    """Return what ``Search`` binds: ``asin - title ** asin - title`` (asins in lower case)."""
    return " ** ".join(f"{p.asin.lower()} - {' '.join(p.title.split())}" for p in products[:top_k])


def item_features(product: Product) -> list[str]:
    """Return the feature list ``FeatureRetrieve`` ranks on the product's page: its options."""
    return [value for values in product.options.values() for value in values]


def _full_reward(product: Product, goal: Goal) -> dict[str, str] | None:
    options = best_options(product, goal.options, goal.option_names)
    breakdown = compute_reward(product, goal, options=options)
    return options if breakdown.reward >= 1.0 - 1e-9 else None


def _search_subgoal(top_k: int) -> str:
    many = _NUMBER_WORDS.get(top_k, str(top_k))
    noun = "item" if top_k == 1 else "items"
    return f"Search {many} relevant {noun} and the product names according to the instruction."


def _buy_clicks(options: Mapping[str, str], first: int) -> list[str]:
    clicks = [f"R{first + i} = Click({value})" for i, value in enumerate(options.values())]
    return [*clicks, f"R{first + len(clicks)} = Click(buy now)"]


def expert_plan(
    catalog: Catalog, goal: Goal, *, search_top_k: int = DEFAULT_SEARCH_TOP_K
) -> ExpertPlan | None:
    """Return a gold trajectory for ``goal`` in the shop of ``catalog``, or None.

    Args:
        catalog: the shop's products (its search is the site's).
        goal: the instruction's goal.
        search_top_k: how many results ``Search`` returns.

    Returns:
        The plan (reward 1.0 when replayed with the lexical ranker), or None when none of the
        results ``Search`` shows can earn the full reward.
    """
    shown = catalog.search(goal.instruction)[:search_top_k]
    if not shown:
        return None
    query = goal.instruction
    search = f"R1 = Search({query})"
    fitting = {p.asin: _full_reward(p, goal) for p in shown}
    if len(shown) >= 2:
        first, second = shown[0], shown[1]
        features = []
        for product in (first, second):
            ranked = rank_lexical(query, item_features(product))
            features.append(", ".join(item_features(product)[i] for i in ranked[:3]))
        names = search_summary(shown, search_top_k).split(" ** ")
        candidates = feature_candidates(names, features)
        picked = shown[rank_lexical(query, candidates)[0]]
        options = fitting.get(picked.asin)
        if options is not None:
            subgoals = (
                _search_subgoal(search_top_k),
                f"Select the most relevant features of item {first.asin.lower()}.",
                f"Select the most relevant features of item {second.asin.lower()}.",
                "Pick up the most related one from the two relevant items according to the "
                "product names and their features.",
                "Buy this item by selecting its relevant features.",
            )
            steps = (
                search,
                f"R2 = Click({first.asin.lower()}); R3 = FeatureRetrieve(R2, Query: {query})",
                f"R4 = Click(< prev); R5 = Click({second.asin.lower()}); "
                f"R6 = FeatureRetrieve(R5, Query: {query})",
                f"R7 = Pick(Item_names: R1, Item_features: [R3, R6], Query: {query})",
                "; ".join(["R8 = Click(< prev)", "R9 = Click(R7)", *_buy_clicks(options, 10)]),
            )
            return ExpertPlan(picked.asin, options, subgoals, steps, meta={"variant": "pick"})
    for product in shown:
        options = fitting[product.asin]
        if options is None:
            continue
        subgoals = (
            _search_subgoal(search_top_k),
            f"Select the most relevant features of item {product.asin.lower()}.",
            "Buy this item by selecting its relevant features.",
        )
        steps = (
            search,
            f"R2 = Click({product.asin.lower()}); R3 = FeatureRetrieve(R2, Query: {query})",
            "; ".join(_buy_clicks(options, 4)),
        )
        return ExpertPlan(product.asin, options, subgoals, steps, meta={"variant": "direct"})
    return None


def task_from_goal(task_id: str, goal: Goal, plan: ExpertPlan | None, *, source: str) -> Task:
    """Return the task of ``goal`` (with the expert's steps as gold actions when there is one).

    The task's answer is the product the expert buys (the goal's own product when there is no
    plan); ``meta["goal"]`` holds the goal for the shop session, ``meta["subgoals"]`` the
    expert's subgoals.
    """
    meta: dict[str, Any] = {"goal": goal.to_dict(), "source": source}
    if plan is not None:
        meta["subgoals"] = list(plan.subgoals)
        meta["expert"] = {"asin": plan.asin, "options": dict(plan.options), **dict(plan.meta)}
    answer = (plan.asin if plan is not None else goal.asin).lower()
    return Task(
        id=task_id,
        question=goal.instruction,
        answer=answer,
        task_type="web",
        gold_actions=plan.steps if plan is not None else (),
        meta=meta,
    )


def generate_goals(
    catalog: Catalog,
    *,
    split: str = "test",
    num_tasks: int = 50,
    seed: int = 0,
    search_top_k: int = DEFAULT_SEARCH_TOP_K,
) -> list[tuple[Goal, ExpertPlan]]:
    """Draw ``num_tasks`` goals whose expert plan earns the full reward.

    Args:
        catalog: the shop.
        split: ``"train"`` or ``"test"``: which products may be targets; ``"validation"``: the
            products only the validation shop holds (``catalog`` must be one:
            :func:`~lumos_gym.envs.web.shop.catalog.validation_catalog`).
        num_tasks: how many goals.
        seed: the seed of the target order and of the goals' wording.
        search_top_k: how many results ``Search`` returns.

    Raises:
        ValueError: for an unknown split or a negative count.
        LumosGymError: when the catalogue has too few usable targets for ``num_tasks``, or a
            validation split is asked of a shop that is not a validation shop.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if num_tasks < 0:
        raise ValueError(f"num_tasks must be >= 0, got {num_tasks}")
    if split == "validation" and not catalog.validation_asins:
        raise LumosGymError("webshop: a validation split needs the validation shop "
                            "(validation_catalog), which adds products of its own")
    avoided = set()
    if split == "validation":  # never an instruction of the train or test split of this seed
        avoided = _drawn_instructions(catalog, "train", seed) | _drawn_instructions(
            catalog, "test", seed)
    rng = random.Random(f"webshop/goals/{split}/{seed}")
    targets = _split_targets(catalog, split)
    rng.shuffle(targets)
    out: list[tuple[Goal, ExpertPlan]] = []
    seen: set[str] = set()
    for product in targets:
        if len(out) >= num_tasks:
            break
        goal = _goal_for(product, rng)
        if goal.instruction in seen or goal.instruction in avoided:
            continue
        plan = expert_plan(catalog, goal, search_top_k=search_top_k)
        if plan is not None:
            seen.add(goal.instruction)
            out.append((goal, plan))
    if len(out) < num_tasks:
        raise LumosGymError(
            f"webshop: only {len(out)} usable {split} instructions in a catalogue of "
            f"{len(catalog)} products; ask for fewer tasks or more products"
        )
    return out


def _split_targets(catalog: Catalog, split: str) -> list[Product]:
    """The products a split may target: by asin bucket, or the validation shop's own."""
    if split == "validation":
        return [p for p in catalog if p.asin.upper() in catalog.validation_asins]
    return [p for p in catalog
            if asin_split(p.asin) == split and p.asin.upper() not in catalog.validation_asins]


def _drawn_instructions(catalog: Catalog, split: str, seed: int) -> set[str]:
    """Every instruction the split of ``seed`` may draw in ``catalog`` (whatever ``num_tasks``).

    A goal's wording takes the random draws of :func:`generate_goals` in target order and no
    search, so the instructions of all targets are those of every ``num_tasks``.
    """
    rng = random.Random(f"webshop/goals/{split}/{seed}")
    targets = _split_targets(catalog, split)
    rng.shuffle(targets)
    return {_goal_for(product, rng).instruction for product in targets}


def generate_tasks(
    catalog: Catalog,
    *,
    split: str = "test",
    num_tasks: int = 50,
    seed: int = 0,
    search_top_k: int = DEFAULT_SEARCH_TOP_K,
) -> list[Task]:
    """Return the tasks of :func:`generate_goals`, ids ``webshop/<split>/<seed>/<n>``."""
    goals = generate_goals(catalog, split=split, num_tasks=num_tasks, seed=seed,
                           search_top_k=search_top_k)
    return [task_from_goal(f"webshop/{split}/{seed}/{n}", goal, plan, source="generated")
            for n, (goal, plan) in enumerate(goals)]
