"""The scorer records: every env names a declared scorer, docs/metrics.md is their table, and each
record's conformance test exists and names it (issue 34)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.envs.base import LumosEnv
from lumos_gym.scoring.scorers import Scorer, all_scorers, get_scorer, markdown_table

ROOT = Path(__file__).resolve().parents[1]


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def test_docs_metrics_md_holds_the_table_of_every_scorer():
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert markdown_table() in text, (
        "docs/metrics.md is out of step with the scorer records: paste the output of "
        "`python -m lumos_gym.scoring.scorers` into it")


def test_every_default_scorer_of_an_env_class_is_declared():
    scorers = all_scorers()
    defaults = {c.__name__: c.default_scorer for c in _subclasses(LumosEnv)}
    assert {name: s for name, s in defaults.items() if s and s not in scorers} == {}


@pytest.mark.parametrize("name", sorted(all_scorers()))
def test_each_record_is_complete_and_its_envs_are_registered(name):
    scorer = get_scorer(name)
    assert scorer.name.count("/") == 1 and scorer.benchmark and scorer.reproduces and scorer.rule
    for env_id in scorer.envs:
        assert env_id in gym.registry, f"{name} names {env_id}, which is not registered"
    if scorer.conformance:  # its test exists and asserts values under this scorer's name
        test = ROOT / scorer.conformance
        assert test.is_file(), f"{name}: no {scorer.conformance}"
        assert f'"{name}"' in test.read_text(encoding="utf-8")


def test_the_benchmarks_the_issue_names_are_checked_against_their_official_scorers():
    checked = {n for n, s in all_scorers().items() if s.conformance}
    assert {"gsm8k/official", "webshop/official", "mind2web/official", "hotpotqa/official",
            "humaneval/official"} <= checked


def test_an_unknown_scorer_names_the_known_ones():
    with pytest.raises(KeyError, match="gsm8k/official"):
        get_scorer("gsm8k/typo")


def test_the_table_escapes_pipes_and_lists_departures():
    row = markdown_table({"x/y": Scorer("x/y", "X", "a|b", "r", ("one", "two"), ("lumos/X",))})
    assert "a\\|b" in row and "1. one<br>2. two" in row and "not checked" in row


def test_every_scorer_an_env_can_choose_is_declared():
    from lumos_gym.envs.math.official import SCORER_CHOICES
    from lumos_gym.scoring import code, mind2web, qa

    chosen = {full for choices in SCORER_CHOICES.values() for full in choices.values()}
    chosen |= set(qa.DATASET_SCORERS.values()) | set(code.DATASET_SCORERS.values())
    chosen |= set(mind2web.SCORER_NAMES)
    assert chosen - set(all_scorers()) == set()
