"""Expert iteration: sample episodes, keep the good ones, train on them, evaluate; repeat.

``lumos-gym export --from-results RESULTS... --min-reward R --out DIR`` is
:func:`export_from_results`: the episodes of results folders (sampled with a temperature above
0, k samples a task) become verified annotations
(:func:`~lumos_gym.conversion.episodes.annotations_from_episodes`) and training records of every
module format, deduplicated, in ``DIR/<format>.jsonl``, with ``DIR/annotations.jsonl`` and
``DIR/export.json`` (where they came from: the results folders, their envs and arguments, the
reward threshold, the counts).

``lumos-gym improve`` is :func:`improve`: first the train envs' tasks are checked against the
test tasks of a suite (:func:`check_train_tasks`, ``compare`` by default); then, for each round,
``samples`` evaluations of the current modules on the *train* split envs (seeds
``round * samples + j``, at ``temperature``), the export, one ``train --init-adapter`` run
per module from the current adapter, and an evaluation of the new modules on the *validation*
envs; the round whose validation score is highest is the one reported as chosen
(``OUT/improve.json``). With several learning rates (``--lr A --lr B``) each round trains one
candidate per rate (``models/lr-A/<role>``), scores each on the validation envs
(``validation/lr-A``) and goes on from the best; the test episodes never choose. Every step is
skipped when its output is there, so a killed run goes on where it stopped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lumos_gym.agents.base import AgentConfig
from lumos_gym.conversion.annotation import write_annotations
from lumos_gym.conversion.episodes import EXPORT_REPORT, PLAN_ROLES, annotations_from_episodes
from lumos_gym.conversion.exports import FORMATS, Rejected, export_records, write_records
from lumos_gym.conversion.leakage import (
    LEAKAGE_FILE,
    check_leakage,
    eval_tasks,
    leakage_summary,
    training_from_envs,
)
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.evaluate import RunConfig, evaluate
from lumos_gym.evaluation.provenance import sampling_cost
from lumos_gym.evaluation.results import episodes_path, read_episodes
from lumos_gym.evaluation.suites import suite_entries
from lumos_gym.jsonl import read_json_object, write_json_atomic
from lumos_gym.models.factory import ModelOptions
from lumos_gym.models.sources import adapter_base_name
from lumos_gym.training import config_from_recipe, train
from lumos_gym.training.trainer import REPORT_FILE

logger = logging.getLogger(__name__)

#: The export format each module of an agent learns from.
MODULE_FORMATS: dict[str, dict[str, str]] = {
    "lumos-i": {"planner": "plan-iterative", "grounder": "ground-iterative"},
    "integrated": {"policy": "integrated"},
}



def _results_records(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The episode records of a results folder, and its ``run.json`` (empty when absent)."""
    episodes = episodes_path(folder)
    if episodes is None:
        raise LumosGymError(f"{folder} is not a results folder (no episodes.jsonl); give the "
                            "folders `lumos-gym evaluate` wrote")
    records, _ = read_episodes(episodes)
    try:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        run = {}
    return list(records.values()), run if isinstance(run, dict) else {}


def export_from_results(
    folders: Sequence[str | Path], out: str | Path, *, min_reward: float = 1.0,
    formats: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Write the training records of the good episodes of ``folders`` (see the module doc).

    Returns:
        The report written to ``out/export.json``.

    Raises:
        LumosGymError: a folder that is not a results folder, or a ``min_reward`` outside
            [0, 1].
    """
    if not 0.0 <= min_reward <= 1.0:
        raise LumosGymError(f"--min-reward must be in [0, 1], got {min_reward}")
    chosen = list(formats or FORMATS)
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown:
        raise LumosGymError(f"unknown export format(s) {unknown}; known: {', '.join(FORMATS)}")
    records: list[dict[str, Any]] = []
    sources = []
    for folder in map(Path, folders):
        found, run = _results_records(folder)
        records += found
        sources.append({"results": str(folder), "episodes": len(found),
                        "agent": (run.get("agent") or {}).get("name"),
                        "envs": sorted({f"{r['env_id']} {json.dumps(r.get('env_kwargs') or {})}"
                                        for r in found})})
    clock = time.monotonic()
    conversion = annotations_from_episodes(records, min_reward=min_reward)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_annotations(conversion.kept, out / "annotations.jsonl")
    written: dict[str, int] = {}
    refused: dict[str, int] = {}
    for fmt in chosen:
        rows, seen = [], set()
        for item in export_records(conversion.kept, fmt):
            if isinstance(item, Rejected):
                refused[fmt] = refused.get(fmt, 0) + 1
                continue
            signature = json.dumps(item["messages"], sort_keys=True)
            if signature not in seen:  # two plans may give one record (e.g. direct's)
                seen.add(signature)
                rows.append(item)
        written[fmt] = write_records(rows, out / f"{fmt}.jsonl")
    report = {
        "sources": sources, "min_reward": min_reward, "episodes": conversion.seen,
        "below_min_reward": conversion.below, "rejected": conversion.reasons(),
        "duplicates": conversion.duplicates, "annotations": len(conversion.kept),
        "records": written, "refused_by_format": refused,
        "rejected_examples": [asdict(r) for r in conversion.rejected[:5]],
        "seconds": round(time.monotonic() - clock, 1),  # the replays and checks, this call's
    }
    write_json_atomic(out / EXPORT_REPORT, report)
    return report


# ------------------------------------------------------------------------------- improve
@dataclass(frozen=True)
class ImproveConfig:
    """One :func:`improve` run.

    Attributes:
        agent: ``lumos-i`` or ``integrated``.
        adapters: the starting adapter folder of each module (role → folder).
        out: the run's folder.
        train_envs: the envs sampled from, each ``(env id, constructor arguments)``: train
            splits only.
        val_envs: the envs each round is scored on: validation splits.
        rounds: sample → filter → train → evaluate rounds.
        samples: episodes per task and round (seeds differ).
        temperature: the sampling temperature.
        limit: tasks per train env.
        val_limit: tasks per validation env.
        min_reward: the least reward of a kept episode.
        recipe: the training recipe; ``train`` overrides its fields.
        train: more :class:`~lumos_gym.training.TrainConfig` settings (``max_steps``...).
        lrs: learning rates to try in each round, the best on validation kept (a tie goes to
            the first named); empty: the recipe's (or ``train``'s) one rate.
        leakage_suite: the suite whose test tasks the train envs' tasks are checked against
            before anything is sampled (:func:`check_train_tasks`); ``None`` skips the check.
        models: backend options of the sampling and scoring runs (the adapters are set here).
        agent_config: the agent's settings (its temperature and seed are set per run).
    """

    agent: str
    adapters: Mapping[str, str]
    out: str | Path
    train_envs: Sequence[tuple[str, Mapping[str, Any]]]
    val_envs: Sequence[tuple[str, Mapping[str, Any]]]
    rounds: int = 2
    samples: int = 4
    temperature: float = 0.7
    limit: int | None = None
    val_limit: int | None = None
    min_reward: float = 1.0
    recipe: str | None = "cpu-small"
    train: Mapping[str, Any] = field(default_factory=dict)
    lrs: Sequence[float] = ()
    leakage_suite: str | None = "compare"
    models: ModelOptions = field(default_factory=ModelOptions)
    agent_config: AgentConfig = field(default_factory=AgentConfig)

    def __post_init__(self) -> None:
        if self.agent not in MODULE_FORMATS:
            raise LumosGymError(f"improve trains {', '.join(MODULE_FORMATS)}, not {self.agent!r}")
        missing = sorted(set(MODULE_FORMATS[self.agent]) - set(self.adapters))
        if missing:
            raise LumosGymError(f"improve {self.agent} needs a starting adapter for {missing}")
        if self.rounds < 1 or self.samples < 1 or self.temperature <= 0:
            raise LumosGymError("improve needs rounds and samples >= 1 and a temperature > 0")
        if any(lr <= 0 for lr in self.lrs) or len(set(self.lrs)) < len(self.lrs):
            raise LumosGymError(f"improve's learning rates must be positive and distinct, "
                                f"got {list(self.lrs)}")


def check_train_tasks(
    envs: Sequence[tuple[str, Mapping[str, Any]]], out: str | Path, *,
    suite: str | None = "compare", limit: int | None = None,
) -> dict[str, Any] | None:
    """Check the tasks a run learns from against ``suite``'s test tasks of the same envs.

    The tasks are the first ``limit`` of each train env (what ``improve`` samples and ``grpo``
    plays); the check is ``lumos-gym data leakage``'s (task texts, ids, the generated worlds'
    entities). The report, with the suite's name, goes to ``OUT/leakage.json`` and is
    returned; ``suite=None`` skips the check and returns ``None``.

    Raises:
        LumosGymError: a test task or entity is among the train tasks (nothing was run yet).
    """
    if suite is None:
        return None
    ids = {env_id for env_id, _ in envs}
    tests = [entry for entry in suite_entries(suite=suite) if entry.env_id in ids]
    report = check_leakage(training_from_envs(envs, limit=limit), eval_tasks(tests),
                           log=logger.info)
    recorded = {**report.to_dict(), "suite": suite}
    Path(out).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(out) / LEAKAGE_FILE, recorded)
    if not report.clean:
        raise LumosGymError(f"the train envs share test tasks of the {suite!r} suite:\n"
                            f"{report.format()}\n(report: {Path(out) / LEAKAGE_FILE})")
    return recorded


def module_models(base: ModelOptions, adapters: Mapping[str, str]) -> ModelOptions:
    """``base`` with each role's model set to its adapter folder (it names its own base)."""
    roles = {"model": adapters["policy"]} if "policy" in adapters else {
        "planner": adapters["planner"], "grounder": adapters["grounder"]}
    return ModelOptions(**{**asdict(base), "model": None, "planner": None, "grounder": None,
                           "adapters": {}, "reference": False, **roles})


def _run_envs(
    config: ImproveConfig, adapters: Mapping[str, str], envs: Sequence[tuple[str, Any]],
    out: Path, *, seed: int, temperature: float, limit: int | None,
) -> list[dict[str, Any]]:
    """Evaluate the modules on each env into ``out/<n>``; return each run's summary."""
    summaries = []
    models = module_models(config.models, adapters)
    agent_config = AgentConfig(**{**asdict(config.agent_config), "temperature": temperature,
                                  "seed": seed})
    for n, (env_id, kwargs) in enumerate(envs):
        folder = out / str(n)
        if (folder / "summary.json").is_file():
            summaries.append(json.loads((folder / "summary.json").read_text("utf-8")))
            continue
        result = evaluate(RunConfig(
            config.agent, envs=[env_id], env_kwargs=dict(kwargs), limit=limit, models=models,
            agent_config=agent_config, seed=seed, out=folder, resume=folder.exists(),
            progress=False, provenance={"improve": str(config.out)},
        ))
        summaries.append(result.summary)
    return summaries


def _score(summaries: Sequence[Mapping[str, Any]]) -> float:
    """The mean over envs of each run's suite score (its primary metric's mean).

    A run whose every episode ended in ``infra-error`` has no score (``None``) and is left out.
    """
    means = [(s.get("score") or {}).get("mean", 0.0) for s in summaries]
    scores = [float(m) for m in means if m is not None]
    return sum(scores) / len(scores) if scores else 0.0


def _train_modules(config: ImproveConfig, data: Path, adapters: Mapping[str, str],
                   out: Path, lr: float | None = None) -> dict[str, str]:
    """One ``train --init-adapter`` run per module from its current adapter."""
    trained = {}
    for role, fmt in MODULE_FORMATS[config.agent].items():
        folder = out / role
        if not (folder / REPORT_FILE).is_file():
            records = data / f"{fmt}.jsonl"
            if not records.is_file() or not records.read_text("utf-8").strip():
                raise LumosGymError(f"no {fmt} record was kept from the sampled episodes "
                                    f"({data / EXPORT_REPORT}); sample more or lower "
                                    "--min-reward")
            settings = {"report_to": "none", **dict(config.train)}
            base = adapter_base_name(adapters[role])  # the model the adapter was made for
            if base and "base_model" not in settings:
                settings["base_model"] = base
            if lr is not None:
                settings["lr"] = lr
            if folder.is_dir():  # a run killed while training: go on from its last checkpoint
                settings["resume"] = True
            train(config_from_recipe(config.recipe, data=[str(records)], out=str(folder),
                                     init_adapter=str(adapters[role]), **settings))
        trained[role] = str(folder)
    return trained


def _train_candidates(config: ImproveConfig, folder: Path,
                      adapters: Mapping[str, str]) -> list[dict[str, Any]]:
    """Train and validate one candidate per learning rate; return them.

    With no rate named, the recipe's is used in ``models/<role>`` and ``validation``; each named
    rate has its own ``lr-<rate>`` folder in both, so a run again with fewer rates reuses them.
    """
    rates: list[float | None] = list(config.lrs) or [None]
    candidates = []
    for lr in rates:
        tag = "" if lr is None else f"lr-{lr:g}"
        trained = _train_modules(config, folder / "data", adapters, folder / "models" / tag, lr)
        score = _score(_run_envs(config, trained, config.val_envs, folder / "validation" / tag,
                                 seed=0, temperature=0.0, limit=config.val_limit))
        candidates.append({"lr": lr, "adapters": trained, "validation": score})
    return candidates


def round_seconds(folder: str | Path, candidates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What each step of the round in ``folder`` cost, read from the files each step left.

    Sampling and validation: each results folder's time from its ``run.json`` to its
    ``summary.json``; the export: its report's; training: each trained module's report. A
    round killed and run again so keeps what its first process spent; a step whose files lack
    the time is ``None``.
    """
    folder = Path(folder)

    def results(under: Path) -> float | None:
        folders = sorted(p.parent for p in under.rglob("summary.json"))
        return sampling_cost(folders)["sampling_seconds"] if folders else None

    reports = [read_json_object(Path(str(path)) / REPORT_FILE)
               for c in candidates for path in (c.get("adapters") or {}).values()]
    trained = [float(r["seconds"]) for r in reports if r and r.get("seconds") is not None]
    return {"sampling": results(folder / "samples"),
            "export": (read_json_object(folder / "data" / EXPORT_REPORT) or {}).get("seconds"),
            "training": round(sum(trained), 1) if len(trained) == len(reports) else None,
            "validation": results(folder / "validation")}


def best_candidate(candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The candidate with the best validation score; a tie goes to the first.

    Scores are compared to 9 decimals, so a tie made only by float rounding stays a tie (0.6
    and 0.7 average 0.6499999999999999, 0.525 and 0.775 average 0.65).
    """
    return max(enumerate(candidates),
               key=lambda pair: (round(float(pair[1]["validation"]), 9), -pair[0]))[1]


def chosen_round(rounds: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The round with the best validation score; a tie goes to the earlier round.

    Compared as :func:`best_candidate` compares candidates; the earlier round trained less.
    """
    return best_candidate(sorted(rounds, key=lambda row: int(row["round"])))


def _round(config: ImproveConfig, r: int, adapters: Mapping[str, str],
           leakage: Mapping[str, Any] | None) -> dict[str, Any]:
    """Round ``r``: sample with ``adapters``, keep the good episodes, train, validate."""
    folder = Path(config.out) / f"round-{r}"
    samples, tokens = [], 0
    for j in range(config.samples):
        seed = r * config.samples + j
        target = folder / "samples" / f"seed-{seed}"
        for summary in _run_envs(config, adapters, config.train_envs, target, seed=seed,
                                 temperature=config.temperature, limit=config.limit):
            overall = summary.get("overall") or {}
            tokens += int(overall.get("input_tokens") or 0)
            tokens += int(overall.get("output_tokens") or 0)
        samples += sorted(p.parent for p in target.glob("*/episodes.jsonl"))
    export = read_json_object(folder / "data" / EXPORT_REPORT)  # written last: complete
    if export is None:
        export = export_from_results(samples, folder / "data", min_reward=config.min_reward,
                                     formats=sorted(set(MODULE_FORMATS[config.agent].values())))
    if leakage is not None:  # beside the records, where their training card looks
        write_json_atomic(folder / "data" / LEAKAGE_FILE, dict(leakage))
    candidates = _train_candidates(config, folder, adapters)
    best = best_candidate(candidates)
    row = {"round": r, "adapters": best["adapters"], "validation": best["validation"],
           "kept_annotations": export["annotations"], "records": export["records"],
           "episodes": export["episodes"], "sampled_tokens": tokens,
           "seconds": round_seconds(folder, candidates)}
    if config.lrs:
        row["lr"] = best["lr"]
        row["candidates"] = candidates
    return row


def improve(config: ImproveConfig) -> dict[str, Any]:
    """Run expert iteration as ``config`` says (see the module doc); return the report."""
    out = Path(config.out)
    adapters = {role: str(config.adapters[role]) for role in MODULE_FORMATS[config.agent]}
    leakage = check_train_tasks(config.train_envs, out, suite=config.leakage_suite,
                                limit=config.limit)
    rounds = [{"round": 0, "adapters": adapters, "validation": _score(_run_envs(
        config, adapters, config.val_envs, out / "round-0" / "validation", seed=0,
        temperature=0.0, limit=config.val_limit))}]
    for r in range(1, config.rounds + 1):
        rounds.append(_round(config, r, adapters, leakage))
        adapters = rounds[-1]["adapters"]
    best = chosen_round(rounds)
    report = {"agent": config.agent, "method": "expert-iteration",
              "reward": f"env reward >= {config.min_reward}", "rounds": rounds,
              "chosen_round": best["round"], "chosen_adapters": best["adapters"],
              "train_envs": [[e, dict(k)] for e, k in config.train_envs],
              "val_envs": [[e, dict(k)] for e, k in config.val_envs],
              "samples": config.samples, "temperature": config.temperature,
              "leakage": leakage_summary(leakage)}
    if config.lrs:
        report["lrs"] = list(config.lrs)
    write_json_atomic(out / "improve.json", report)
    return report


__all__ = [
    "EXPORT_REPORT",
    "MODULE_FORMATS",
    "PLAN_ROLES",
    "ImproveConfig",
    "best_candidate",
    "check_train_tasks",
    "chosen_round",
    "export_from_results",
    "improve",
]
