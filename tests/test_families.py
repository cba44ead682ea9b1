"""Env families: one record per family, read by every layer; the docs' example family."""

import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import gymnasium as gym
import pytest

import lumos_gym
from lumos_gym import prompts
from lumos_gym.agents.lumos import LUMOS_ROUNDS
from lumos_gym.cli import main
from lumos_gym.conversion.annotation import write_annotations
from lumos_gym.conversion.exports import DATASET_DOMAINS, DOMAINS, TOOL_LISTS, tool_specs_for
from lumos_gym.conversion.pipeline import OFFLINE_SPLITS
from lumos_gym.conversion.rules import CONVERTERS, convert_tasks
from lumos_gym.conversion.verify import ENV_FACTORIES, verify_annotations
from lumos_gym.envs import (
    ENVS,
    FAMILIES,
    EnvInfo,
    Family,
    OfflineSplit,
    families,
    register_family,
    registration,
    unregister_family,
)
from lumos_gym.envs.tasks import ADDED_TASK_TYPES, Task
from lumos_gym.errors import RegistryError
from lumos_gym.evaluation.summary import METRICS
from lumos_gym.registry import import_object
from lumos_gym.tools import TOOLS
from lumos_gym.workflows.reproduce import REFERENCE_MIX

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def tables() -> dict:
    """Everything the family records fill, as plain values."""
    return {
        "families": [f.name for f in families()],
        "envs": ENVS.names(),
        "gym": sorted(k for k in gym.registry if k.startswith("lumos/")),
        "task_types": list(ADDED_TASK_TYPES),
        "converters": CONVERTERS.names(),
        "factories": ENV_FACTORIES.names(),
        "tools": TOOL_LISTS.names(),
        "splits": [s.name for s in OFFLINE_SPLITS],
        "metrics": list(METRICS),
        "rounds": dict(LUMOS_ROUNDS),
        "domains": (dict(DOMAINS), dict(DATASET_DOMAINS)),
        "mix": list(REFERENCE_MIX.items()),
        "actions": dict(prompts.DOMAIN_ACTIONS),
    }


@pytest.fixture(autouse=True)
def examples(monkeypatch):
    """docs/examples importable, and no family of these tests left registered after each."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import units_family  # noqa: F401  (its first import registers the family)

    for name in ("units", "toy", "toy2"):
        if name in FAMILIES:
            unregister_family(name)
    yield
    for name in ("units", "toy", "toy2"):
        if name in FAMILIES:
            unregister_family(name)


@pytest.fixture
def units():
    """The docs' example family, registered for one test."""
    import units_family

    register_family(units_family.FAMILY)
    return units_family


# --- the built-in families ---------------------------------------------------------------------


def test_the_builtin_families_are_whole():
    assert [f.name for f in families()][:6] == ["math", "qa", "code", "web", "games", "multimodal"]
    for family in families()[:6]:
        ids = {info.id for info in family.envs}
        assert ids and {s.env_id for s in family.splits} <= ids
        for info in family.envs:
            cls = info.env_class()
            assert cls.task_type == family.task_type, info.id
            assert (cls.task_type, cls.primary_metric) in METRICS, info.id
            rounds = family.lumos_rounds
            expected = rounds if isinstance(rounds, int) else rounds.get(cls.task_type, 5)
            assert LUMOS_ROUNDS[cls.task_type] == expected
        for path in family.converters.values():
            assert path is None or callable(import_object(path))
        for key in family.tools:
            assert [TOOLS.get(n).spec.name for n in TOOL_LISTS.get(key)]
        assert family.verify_env is None or callable(import_object(family.verify_env))


# --- the mechanism -----------------------------------------------------------------------------


def _toy(**changes) -> Family:
    fields = dict(
        name="toy", task_type="toy", description="a throwaway family",
        envs=(EnvInfo("lumos/Toy-v0", "units_family.env:UnitsEnv", ("generated",), "4",
                      "toy", max_episode_steps=4),),
        converters={"toyset": "units_family.rules:units_annotation", "toyeval": None},
        verify_env="units_family.rules:replay_env",
        tools={"toy": "units_family.env:UNITS_TOOLS"},
        splits=(OfflineSplit("toy-train", "lumos/Toy-v0", {"split": "train"}, "train"),),
        metrics={"score": (("score", None), ("win_rate", "success"))},
        lumos_rounds=2,
        domains={"toy": "toy_domain", "toyset": "toyset_domain"},
        mix={"toy_domain": 3},
        domain_actions={"toy_domain": frozenset({"UnitFactor", "Calculator"})},
    )
    return Family(**{**fields, **changes})


def test_a_family_fills_every_table_and_leaves_none_behind():
    before = tables()
    register_family(_toy())
    try:
        register_family(_toy())  # the same record again: nothing happens
        assert Task("t", "q", "a", "toy").task_type == "toy"
        assert gym.spec("lumos/Toy-v0").max_episode_steps == 4
        assert callable(CONVERTERS.get("toyset")) and "toyeval" not in CONVERTERS
        assert "toy" in ENV_FACTORIES and [s.name for s in tool_specs_for("toy")] == [
            "UnitFactor", "Calculator"]
        assert [s.name for s in OFFLINE_SPLITS][-1] == "toy-train"
        assert [m.name for m in METRICS[("toy", "score")]] == ["score", "win_rate"]
        assert LUMOS_ROUNDS["toy"] == 2 and REFERENCE_MIX["toy_domain"] == 3
        assert DOMAINS["toy"] == "toy_domain" and DATASET_DOMAINS["toyset"] == "toyset_domain"
        assert prompts.lumos_domain(["Calculator", "UnitFactor"]) == "toy_domain"
        with pytest.raises(RegistryError, match="evaluation-only"):
            convert_tasks([], "toyeval")
    finally:
        unregister_family("toy")
    assert tables() == before
    with pytest.raises(ValueError, match="task_type"):
        Task("t", "q", "a", "toy")


BARE = {"name": "toy2", "task_type": "toy2", "converters": {}, "verify_env": None, "tools": {},
        "envs": (EnvInfo("lumos/Toy2-v0", "x:Y", (), "", ""),), "splits": (), "metrics": {},
        "domains": {}, "mix": {}, "domain_actions": {}}


@pytest.mark.parametrize("changes, message", [
    ({"description": "another record"}, "env family 'toy' is already registered"),
    ({**BARE, "task_type": "math"}, "family 'math' already has task type 'math'"),
    ({**BARE, "envs": (EnvInfo("lumos/GSM8K-v0", "x:Y", (), "", ""),)},
     "'lumos/GSM8K-v0' is already registered"),
    ({**BARE, "splits": (OfflineSplit("s", "lumos/GSM8K-v0", {}, "test"),)},
     "not one of the family's envs"),
    ({**BARE, "splits": (OfflineSplit("s", "lumos/Toy2-v0", {}, "dev"),)}, "role 'dev'"),
    ({**BARE, "mix": {"maths": 1}}, "not domains of the family"),
    ({**BARE, "converters": {"gsm8k": "units_family.rules:units_annotation"}},
     "converter 'gsm8k' is already registered"),
    ({**BARE, "domain_actions": {"toy_domain": frozenset({"QA"})}},
     "'toy_domain' is already in a table of another family"),
    ({**BARE, "metrics": {"accuracy": ()}}, None),
])
def test_a_family_that_collides_registers_nothing(changes, message):
    register_family(_toy())
    before = tables()
    if message is None:  # no collision: it registers, and goes
        register_family(_toy(**changes))
        assert tables() != before
        unregister_family(changes["name"])
    else:
        with pytest.raises(RegistryError, match=message):
            register_family(_toy(**changes))
    assert tables() == before


def test_a_plugin_entry_point_may_name_a_family_record(monkeypatch):
    point = EntryPoint("units", "units_family:FAMILY", registration.PLUGIN_GROUP)
    monkeypatch.setattr(registration, "entry_points", lambda group: [point])
    assert "units" not in FAMILIES
    assert registration.load_plugins.__wrapped__() == ("units",)
    assert "lumos/Units-v0" in ENVS and LUMOS_ROUNDS["units"] == 3


# --- the docs' example family (docs/adding-an-env.md, "Adding a family") ------------------------


def test_the_adding_a_family_example_works(units, tmp_path, capsys):
    suite = EXAMPLES / "units_family" / "suite.json"
    # registered: its env, and its rows of the other layers' tables
    assert main(["check", "units_family:lumos/Units-v0"]) == 0
    assert {"units-train", "units-test"} <= {s.name for s in OFFLINE_SPLITS}
    assert REFERENCE_MIX["units"] == 20 and LUMOS_ROUNDS["units"] == 3
    # convertible, verified by replay (in the env the tasks came from)
    annotations = tmp_path / "units.jsonl"
    assert main(["convert", "--env", "units_family:lumos/Units-v0", "-k", "split=train",
                 "-k", "num_tasks=4", "--out", str(annotations)]) == 0
    assert "4 annotations kept" in capsys.readouterr().out
    # ... and by the family's own replay env, which verify_annotations finds by task type
    from units_family.env import make_tasks

    report = verify_annotations(convert_tasks(make_tasks("train", 3, 1), "units"))
    assert report.yield_rate == 1.0 and len(report.kept) == 3
    # exportable: the family's tool list makes the grounding instruction, its domain the ids
    for fmt in ("ground-iterative", "react"):
        out = tmp_path / f"{fmt}.jsonl"
        assert main(["export", str(annotations), "--format", fmt, "--out", str(out)]) == 0
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["id"] for r in records] == [f"units_{k}" for k in range(4)]
        assert "UnitFactor(big_unit, small_unit)" in records[0]["messages"][0]["content"]
    # in a suite, evaluated: the summary has the family's metrics
    results = tmp_path / "results"
    assert main(["evaluate", "--agent", "oracle", "--suite", str(suite), "--out", str(results),
                 "--no-progress"]) == 0
    summary = json.loads((results / "summary.json").read_text())
    metrics = summary["envs"]["lumos/Units-v0"]["metrics"]
    assert list(metrics) == ["accuracy", "exact_match"]
    assert metrics["accuracy"]["mean"] == 1.0 and summary["overall"]["episodes"] == 3
    # shown on the leaderboard, and a valid submission
    capsys.readouterr()
    assert main(["leaderboard", str(results)]) == 0
    assert "| Units-v0 (accuracy) |" in capsys.readouterr().out
    assert main(["leaderboard", "--validate", str(results)]) == 0


def test_an_installed_family_reaches_commands_that_name_no_env(units, tmp_path):
    # an installed package's entry point, as pip writes it, names the record
    info = tmp_path / "units_family_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: units-family-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text("[lumos_gym.envs]\nunits = units_family:FAMILY\n")
    from units_family.env import make_tasks

    annotations = tmp_path / "units.jsonl"
    write_annotations(convert_tasks(make_tasks("train", 2, 0), "units"), annotations)
    path = os.pathsep.join([str(tmp_path), str(EXAMPLES), str(Path(lumos_gym.__file__).parents[1])])
    done = subprocess.run(
        [sys.executable, "-m", "lumos_gym.cli", "export", str(annotations), "--format", "react",
         "--out", str(tmp_path / "react.jsonl")],
        env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "2 records written" in done.stdout
