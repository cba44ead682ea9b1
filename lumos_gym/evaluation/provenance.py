"""Provenance: what made a run, written into ``run.json`` and ``summary.json``.

:func:`provenance` records the code (version, git commit), the agent (and, for an agent from
outside lumos-gym, its module or file with a checksum), each role's model and adapters (with
checksums and the card of their training), decoding, the machine, the sandbox's isolation level
(``sandbox``) and the library versions;
:func:`model_args` the backend options, secrets hidden;
:func:`data_provenance` where each env's tasks come from, with checksums;
:func:`training_card` how an adapter was trained.
:func:`run_leakage` checks a run's test tasks against the files its adapters were trained on.
What identifies a run (its fingerprint, the adapter weights) and the paths written to travel
are in :mod:`lumos_gym.evaluation.identity`, which reading a board needs without this module.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym

from lumos_gym import __version__
from lumos_gym.agents.base import Agent
from lumos_gym.agents.lumos import DATASET_ROUNDS, LUMOS_ROUNDS
from lumos_gym.conversion.episodes import EXPORT_REPORT
from lumos_gym.conversion.leakage import (
    LEAKAGE_FILE,
    check_leakage,
    eval_tasks,
    leakage_summary,
    read_training,
)
from lumos_gym.databuild import recorded_build
from lumos_gym.envs.sources import file_sha256, tasks_sha256
from lumos_gym.errors import LumosGymError
from lumos_gym.evaluation.identity import local_path, portable_paths
from lumos_gym.evaluation.suites import suite_entries
from lumos_gym.gitinfo import git_provenance
from lumos_gym.jsonl import read_json_object, write_json_atomic
from lumos_gym.models.base import Backend
from lumos_gym.tools import sandbox
from lumos_gym.training.grpo import REPORT_FILE as GRPO_REPORT
from lumos_gym.training.grpo import checkpoint_report
from lumos_gym.training.trainer import REPORT_FILE

#: Words in a backend option's name that mark a secret, which ``run.json`` never holds.
SECRET_WORDS = ("key", "token", "secret", "password")


def model_args(options: Mapping[str, Any]) -> dict[str, Any]:
    """The backend options of a run (``--model-args``, ``--device``...) for ``run.json``.

    An option named like a secret (``api_key``) shows ``"<hidden>"``; one that names where a
    secret is kept (``api_key_env``: an environment variable's name) is shown as it is.
    """
    shown: dict[str, Any] = {}
    for key, value in sorted(options.items()):
        secret = any(word in key.lower() for word in SECRET_WORDS) and not key.endswith("_env")
        shown[key] = "<hidden>" if secret else value
    return portable_paths(json.loads(json.dumps(shown, default=str)))


def _file_digest(path: Path) -> str | None:
    try:
        return file_sha256(path) if path.is_file() else None
    except OSError:
        return None


def data_provenance(env: gym.Env, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Return where an env's tasks come from, with checksums.

    Covered: an env built on a task source (``env.source``: bundled, official and hub files
    with their SHA-256, generator parameters with a checksum of the generated tasks); any
    ``data_path``/``path`` attribute of the unwrapped env and any constructor argument that
    names an existing file (SHA-256) or folder (path only: folders can be large); and always
    ``tasks_sha256``, a checksum of the env's tasks (ids, questions, answers), which covers
    envs that build their task lists themselves.
    """
    unwrapped = env.unwrapped
    info: dict[str, Any] = {}
    source = getattr(unwrapped, "source", None)
    if source is not None and hasattr(source, "describe"):
        try:
            info["source"] = source.describe()
        except Exception as e:  # provenance must never stop a run
            info["source"] = {"error": str(e)}
    files: dict[str, Any] = {}
    candidates = {f"attr:{a}": getattr(unwrapped, a, None) for a in ("data_path", "path")}
    candidates.update({f"kwarg:{k}": v for k, v in kwargs.items()})
    for name, value in candidates.items():
        if not isinstance(value, str | os.PathLike) or not str(value):
            continue
        path = Path(value).expanduser()
        try:
            if path.is_file():
                files[name] = {"path": str(value), "sha256": _file_digest(path)}
            elif path.is_dir():
                files[name] = {"path": str(value), "sha256": None}
        except OSError:
            continue
    if files:
        info["files"] = files
    try:
        info["tasks_sha256"] = tasks_sha256(list(getattr(unwrapped, "tasks", [])))
    except (TypeError, ValueError):
        info["tasks_sha256"] = None
    return info


def _hardware() -> dict[str, Any]:
    """Return the CPU model and count, and the GPUs when torch is already loaded."""
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "gpus": []}
    torch = sys.modules.get("torch")  # only a backend that loaded torch can use a GPU
    if torch is not None:
        try:
            if torch.cuda.is_available():
                count = torch.cuda.device_count()
                info["gpus"] = [torch.cuda.get_device_name(i) for i in range(count)]
        except Exception:  # provenance must never stop a run
            pass
    return info


def _sandbox() -> dict[str, Any] | None:
    """Return how the Code sandbox isolates programs here (probed once per process)."""
    try:
        return sandbox.isolation_record()
    except Exception:  # provenance must never stop a run
        return None


def _adapter_checksums(backends: Mapping[str, Backend]) -> dict[str, dict[str, str | None]]:
    """Return role → adapter folder → SHA-256 of its ``adapter_model.safetensors`` (or .bin)."""
    out: dict[str, dict[str, str | None]] = {}
    for role, backend in sorted(backends.items()):
        folders = backend.info().details.get("adapters") or {}
        for folder in dict(folders).values():
            base = Path(str(folder))
            weights = [base / "adapter_model.safetensors", base / "adapter_model.bin"]
            found = next((w for w in weights if w.is_file()), None)
            out.setdefault(role, {})[str(folder)] = _file_digest(found) if found else None
    return out


def training_card(folder: Path) -> dict[str, Any] | None:
    """How the adapter in ``folder`` was trained, from its ``lumos_training.json`` (if any).

    The card names the base model, the recipe, the seed, the optimizer steps and batch, the
    training files (by name, with the SHA-256 of each) and records, the loss, the time and
    the versions that trained it: what a leaderboard row needs to say which data, budget and
    seed made its models.
    """
    report = read_json_object(folder / REPORT_FILE)
    if report is None:
        return _grpo_card(folder)
    config = report.get("config") or {}
    data = report.get("data_sha256") or {}
    card = {
        "base_model": config.get("base_model"),
        "recipe": config.get("recipe"),
        "seed": config.get("seed"),
        "steps": report.get("steps"),
        "batch_size": config.get("batch_size"),
        "lr": config.get("lr"),
        "epochs": report.get("epochs"),
        "data": {Path(str(name)).name: digest for name, digest in sorted(data.items())},
        "train_examples": report.get("train_examples"),
        "datasets": (report.get("encode") or {}).get("datasets"),
        "final_loss": report.get("final_loss"),
        "seconds": report.get("seconds"),
        "device": report.get("device"),
        "torch": report.get("torch_version"),
        "lumos_gym": report.get("lumos_gym_version"),
        "git": report.get("git"),
        "data_build": report.get("data_build"),
        "sessions": [
            {k: session.get(k) for k in ("from_step", "to_step", "finished")}
            | {"commit": (session.get("git") or {}).get("commit")}
            for session in report.get("sessions") or []
        ] or None,
    }
    rewarded = _reward_source(data)
    if rewarded is not None:
        card["reward_source"] = rewarded
    return card


def _reward_source(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where records exported from rewarded episodes came from (expert iteration), if they did.

    ``lumos-gym export --from-results`` writes ``export.json`` beside the records: the results
    folders, their agent and envs (with their arguments, so the split), and the threshold.
    """
    for name in sorted(data):
        report = read_json_object(Path(str(name)).parent / EXPORT_REPORT)
        if report is not None:
            sources = report.get("sources") or []
            folders = [Path(str(s.get("results"))) for s in sources]
            return {
                "method": "expert iteration", "min_reward": report.get("min_reward"),
                "episodes": report.get("episodes"), "annotations": report.get("annotations"),
                "envs": sorted({e for s in sources for e in s.get("envs") or []}),
                "results": ["/".join(f.parts[-2:]) for f in folders],
                **sampling_cost(folders),
                "leakage": _leakage(Path(str(name)).parent),
            }
    return None


def sampling_cost(folders: Sequence[Path]) -> dict[str, Any]:
    """The prompt and generated tokens of the sampled results, and their wall time.

    GRPO's ``sampled_tokens`` count the generated tokens alone; these count both, as the
    results' summaries do, where their files still are.

    The time of one results folder runs from its ``run.json``'s ``started`` to when its
    ``summary.json`` was written; ``None`` when a folder is gone or lacks either.
    """
    tokens, seconds = 0, 0.0
    for folder in folders:
        summary = read_json_object(folder / "summary.json")
        run = read_json_object(folder / "run.json")
        if summary is None or run is None:
            return {"sampled_tokens": None, "sampling_seconds": None}
        overall = summary.get("overall") or {}
        tokens += int(overall.get("input_tokens") or 0) + int(overall.get("output_tokens") or 0)
        try:
            started = datetime.strptime(str(run.get("started")), "%Y-%m-%dT%H:%M:%S%z")
            seconds += max(0.0, (folder / "summary.json").stat().st_mtime - started.timestamp())
        except (ValueError, OSError):
            return {"sampled_tokens": tokens, "sampling_seconds": None}
    return {"sampled_tokens": tokens, "sampling_seconds": round(seconds, 1)}


def _leakage(folder: Path) -> dict[str, Any] | None:
    """The leakage check ``improve`` or ``grpo`` left in ``folder``: suite, tasks, shared."""
    return leakage_summary(read_json_object(folder / LEAKAGE_FILE))


def _grpo_card(folder: Path) -> dict[str, Any] | None:
    """The card of an adapter trained by ``lumos-gym grpo`` (its run's report, one level up)."""
    report = read_json_object(folder.parent / GRPO_REPORT) or checkpoint_report(folder.parent)
    if report is None or report.get("method") != "grpo":
        return None
    config = report.get("config") or {}
    return {
        "base_model": report.get("base_model"), "recipe": config.get("recipe"),
        "seed": config.get("seed"), "steps": report.get("steps"),
        "batch_size": (config.get("tasks_per_step") or 0) * (config.get("group_size") or 0),
        "lr": config.get("lr"), "data": {},
        "reward_source": {
            "method": "grpo", "reward": report.get("reward"),
            "envs": [f"{e} {json.dumps(k)}" for e, k in report.get("envs") or []],
            "group_size": config.get("group_size"), "beta": config.get("beta"),
            "start": {r: Path(str(a)).name for r, a in (config.get("adapters") or {}).items()},
            "sampled_tokens": report.get("sampled_tokens"), "device": report.get("device"),
            "first_reward": report.get("first_reward"), "final_reward": report.get("final_reward"),
            "leakage": _leakage(folder.parent) or _leakage(folder.parent.parent),
            "checkpoint": report.get("checkpoint"),
        },
        "seconds": report.get("seconds"), "lumos_gym": report.get("lumos_gym_version"),
    }


def _training_cards(backends: Mapping[str, Backend]) -> dict[str, dict[str, Any]]:
    """Adapter folder → :func:`training_card`, for the adapters that have a report."""
    cards: dict[str, dict[str, Any]] = {}
    for backend in backends.values():
        for folder in dict(backend.info().details.get("adapters") or {}).values():
            card = training_card(Path(str(folder)))
            if card is not None:
                cards[str(folder)] = card
    return dict(sorted(cards.items()))


def _unknown(reason: str, files: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A leakage entry that says why no check was made (with the files known, if any)."""
    entry: dict[str, Any] = {"status": "unknown", "reason": reason}
    if files:
        entry["training_files"] = list(files)
    return entry


def _card_files(folder: str) -> tuple[list[dict[str, Any]], str | None]:
    """The training files the card of the adapter in ``folder`` names, or why there are none.

    Each file: the adapter, its name as the card has it, where it is here (``None``: not on
    this machine; a relative name is looked for from here, then from the adapter's folder),
    the card's SHA-256 and the one read here.
    """
    where = local_path(folder)
    report = read_json_object(where / REPORT_FILE)
    if report is None:
        if _grpo_card(where) is not None:
            return [], (f"{folder} was trained by grpo on env tasks, not files (its card's "
                        "reward_source holds the leakage check of its train tasks)")
        return [], "no training card" + (f" ({folder})" if folder else "")
    names = [str(n) for n in (report.get("config") or {}).get("data") or []]
    if not names:
        return [], f"the training card of {folder} names no training file"
    recorded = report.get("data_sha256") or {}
    files = []
    for name in names:
        candidates = [Path(name)] if Path(name).is_absolute() else [Path(name), where / name]
        found = next((c for c in candidates if c.is_file()), None)
        files.append({"adapter": folder, "file": name,
                      "path": str(found.resolve()) if found else None,
                      "card_sha256": recorded.get(name),
                      "sha256": _file_digest(found) if found else None})
    return files, None


def run_leakage(run: Mapping[str, Any], entries: Sequence[Any]) -> dict[str, Any]:
    """The leakage check of a run's test tasks against its adapters' training files.

    The adapters are the run's (``run["adapters"]``, :func:`provenance`); each one's
    ``lumos_training.json`` (:func:`training_card`) names the files it was trained on
    (``config.data``) and their SHA-256 (``data_sha256``). When every file is on this machine
    with the card's checksum, they are read (:func:`~lumos_gym.conversion.leakage.read_training`,
    with the train splits of the data build they lie in) and compared with the test tasks of
    ``entries`` (suite entries: :func:`~lumos_gym.conversion.leakage.check_leakage`).

    Returns:
        The report's :meth:`~lumos_gym.conversion.leakage.LeakageReport.to_dict` (``clean``,
        ``total``, ``envs``: test tasks, shared tasks, near duplicates...) with ``status``
        ``"checked"`` and ``training_files`` (each: adapter, file, path, ``card_sha256``,
        ``sha256``); else ``{"status": "unknown", "reason": ...}``: no adapter or one without
        a card (``"no training card"``), a card that names no file, a file not on this
        machine, a checksum that differs, or a check that failed. Never raises.
    """
    folders = sorted({str(folder) for per_role in dict(run.get("adapters") or {}).values()
                      if isinstance(per_role, Mapping) for folder in per_role})
    if not folders:
        return _unknown("no training card")
    files: list[dict[str, Any]] = []
    for folder in folders:
        named, why = _card_files(folder)
        if why is not None:
            return _unknown(why, files + named)
        files += named
    shown = portable_paths(files)
    absent = [f["file"] for f in files if f["path"] is None]
    if absent:
        return _unknown(f"training file(s) not on this machine: {', '.join(absent)}", shown)
    differ = [f["file"] for f in files if f["sha256"] != f["card_sha256"]]
    if differ:
        return _unknown(f"training file(s) whose SHA-256 differs from the card's: "
                        f"{', '.join(differ)}", shown)
    try:
        paths = sorted({f["path"] for f in files})
        report = check_leakage(read_training(paths, builds=True), eval_tasks(entries))
    except Exception as e:  # provenance must never stop a run
        return _unknown(f"the check failed: {type(e).__name__}: {e}", shown)
    return {"status": "checked", **portable_paths(report.to_dict()), "training_files": shown}


def provenance(
    agent: Agent, backends: Mapping[str, Backend], argv: Sequence[str] | None
) -> dict[str, Any]:
    """Return what made a run: code, agent, models, decoding, machine (for run.json).

    The caller adds the envs, the suite, the plan and the fingerprint.
    """
    versions = {}
    for package in ("gymnasium", "numpy", "torch", "transformers", "peft", "sympy", "vllm"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    described = agent.describe()
    config = dict(described.get("config") or {})
    backend_info = {role: vars(b.info()) for role, b in sorted(backends.items())}
    return portable_paths(json.loads(json.dumps({
        "lumos_gym": __version__,
        "git": git_provenance(),
        "argv": list(argv) if argv is not None else None,
        "agent": described,
        "decoding": {k: config.get(k) for k in ("max_new_tokens", "temperature", "seed",
                                                 "max_rounds")},
        # the subgoal limits in force where --max-rounds is not given (a dataset's wins)
        "round_limits": {"task_types": dict(sorted(LUMOS_ROUNDS.items())),
                         "datasets": dict(sorted(DATASET_ROUNDS.items()))},
        "backends": backend_info,
        "backend": sorted({info["backend"] for info in backend_info.values()}),
        "models": {role: info["model_id"] for role, info in backend_info.items()},
        "adapters": _adapter_checksums(backends),
        "training": _training_cards(backends),
        "hardware": _hardware(),
        # the isolation level of the sandbox that runs Code programs and scores code here
        "sandbox": _sandbox(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }, default=str)))


def record_leakage(folder: Path, data: Path, *, checks: dict[tuple[str, ...], Any]) -> str:
    """Write into a results folder's ``run.json`` the leakage check of its training data.

    For a run whose adapters' files are not on this machine (trained elsewhere), but whose
    cards name each file with its SHA-256: when the data build ``data`` holds a file of that
    name and checksum in ``train/``, those files are what trained it, and the run's test tasks
    (its suite's entries) are checked against them as :func:`run_leakage` would. The entry
    says it was recorded afterwards (``recorded``: the command, the commit, the data build).
    ``checks`` caches a report per set of files (folders of one board share them).

    Returns:
        A line saying what was written.

    Raises:
        LumosGymError: a folder without a suite, a card that names no file, or a file the data
            build lacks or holds with another checksum (nothing is written then).
    """
    run_path = folder / "run.json"
    run = read_json_object(run_path)
    if run is None or not isinstance(run.get("suite"), Mapping):
        raise LumosGymError(f"{run_path}: not the run.json of a suite run")
    files: list[dict[str, Any]] = []
    for adapter, card in sorted(dict(run.get("training") or {}).items()):
        named = dict((card or {}).get("data") or {})
        if not named:
            raise LumosGymError(f"{run_path}: the card of {adapter} names no training file")
        for name, digest in sorted(named.items()):
            here = data / "train" / name
            found = _file_digest(here) if here.is_file() else None
            if found != digest:
                state = "lacks it" if found is None else f"holds it with SHA-256 {found[:8]}"
                raise LumosGymError(f"{run_path}: {adapter} was trained on {name} "
                                    f"({str(digest)[:8]}), and {data} {state}")
            files.append({"adapter": adapter, "file": name, "card_sha256": digest,
                          "sha256": found, "path": f"{data.name}/train/{name}"})
    if not files:  # the oracle, an untrained model: no training data to check against
        run["leakage"] = {"status": "none", "reason": "no trained model: no training data",
                          "recorded": {"by": "lumos-gym data leakage --record",
                                       "git": git_provenance()}}
        write_json_atomic(run_path, run)
        return f"{folder}: no trained model, nothing to check"
    key = tuple(sorted({f["file"] for f in files})) + (str(run["suite"].get("name")),)
    if key not in checks:
        entries = suite_entries(suite=str(run["suite"].get("name")))
        paths = [data / "train" / name for name in key[:-1]]
        checks[key] = check_leakage(read_training(paths, builds=True), eval_tasks(entries))
    report = checks[key]
    build = recorded_build(data) or {}
    checked = report.to_dict()
    # the build's files by their place in it: no path of this machine in a published run.json
    checked["files"] = [f"{data.name}/{Path(f).resolve().relative_to(data.resolve())}"
                        if Path(f).resolve().is_relative_to(data.resolve()) else Path(f).name
                        for f in checked.get("files") or ()]
    run["leakage"] = {
        "status": "checked", **portable_paths(checked), "training_files": files,
        "recorded": {"by": "lumos-gym data leakage --record", "git": git_provenance(),
                     "data_build": build.get("id"),
                     "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
    }
    write_json_atomic(run_path, run)
    total = run["leakage"].get("total") or {}
    return (f"{folder}: leakage recorded against data build {build.get('id')} "
            f"({', '.join(key[:-1])}): {total.get('shared_tasks')} shared task(s), "
            f"{total.get('near_duplicates')} near duplicate(s)")
