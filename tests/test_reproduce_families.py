"""Training on some env families, or without one: the generalisation claim's agents."""

from __future__ import annotations

import json
import sys

import pytest

from lumos_gym.training.config import TrainingError
from lumos_gym.training.mixture import choose_ids
from lumos_gym.workflows.reproduce import REFERENCE_MIX, family_mix


def test_family_mix_keeps_or_drops_each_familys_domains():
    assert family_mix(None) is None and family_mix(REFERENCE_MIX) is REFERENCE_MIX
    # web is the shop and Mind2Web's records, both left out
    assert family_mix(None, leave_out=["web"]) == {"*": sys.maxsize, "webshop": 0,
                                                   "web_agent": 0}
    assert family_mix(None, only=["games"]) == {"game": sys.maxsize}
    cut = family_mix(REFERENCE_MIX, only=["math", "qa"])
    assert cut == {"maths": REFERENCE_MIX["maths"], "complex_qa": REFERENCE_MIX["complex_qa"]}
    assert family_mix(REFERENCE_MIX, leave_out=["games"])["game"] == 0
    with pytest.raises(TrainingError, match="unknown env families \\['shop'\\]; families: "):
        family_mix(None, leave_out=["shop"])
    with pytest.raises(TrainingError, match="not both"):
        family_mix(None, only=["math"], leave_out=["web"])


def test_a_left_out_family_has_no_record_in_the_mixture(tmp_path):
    source = tmp_path / "plan-iterative.jsonl"
    ids = [f"{d}_{i}" for d in ("maths", "webshop", "web_agent", "game") for i in range(5)]
    source.write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    kept = choose_ids(source, family_mix(None, leave_out=["web"]), seed=0)
    assert sorted(kept) == sorted(i for i in ids if i.startswith(("maths", "game")))
    only = choose_ids(source, family_mix(None, only=["web"]), seed=0)
    assert sorted(only) == sorted(i for i in ids if i.startswith("web"))


def test_the_cli_reads_the_family_lists():
    from lumos_gym.cli import build_parser
    from lumos_gym.cli.reproduce import _names

    args = build_parser().parse_args(["reproduce", "offline", "--leave-out", "web, games"])
    assert _names(args.leave_out) == ["web", "games"] and _names(args.families) == []
    args = build_parser().parse_args(["reproduce", "offline", "--families", "math,"])
    assert _names(args.families) == ["math"]
