"""Training mixtures: the same annotations, drawn per domain, in every export format.

Exports of one annotation set give every record the id ``{domain}_{k}`` in every format (the
k-th annotation of that domain), so a mixture is a set of ids: drawn once with a seed and a
cap per domain, then applied to each format's file. Agents trained on the same mixture thus see
the same tasks, which keeps a comparison of agents fair (same records, same steps).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path

from lumos_gym.jsonl import atomic_writer
from lumos_gym.training.config import TrainingError


def _ids(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["id"] for line in f if line.strip()]


def domain_of_id(record_id: str) -> str:
    """The domain part of a record id (``"complex_qa_12"`` → ``"complex_qa"``)."""
    return record_id.rsplit("_", 1)[0]


def choose_ids(source: str | Path, caps: Mapping[str, int], *, seed: int = 0) -> list[str]:
    """Draw up to ``caps[domain]`` record ids of each domain of ``source`` (``*``: any other).

    Domains missing from ``caps`` (and with no ``*`` cap) are left out. The draw depends only
    on the file's ids, the caps and the seed.

    Raises:
        TrainingError: the file is missing or has no record of the capped domains.
    """
    path = Path(source)
    if not path.is_file():
        raise TrainingError(f"export file {str(path)!r} does not exist")
    by_domain: dict[str, list[str]] = {}
    for record_id in _ids(path):
        by_domain.setdefault(domain_of_id(record_id), []).append(record_id)
    rng = random.Random(seed)
    chosen: list[str] = []
    for domain in sorted(by_domain):
        cap = caps.get(domain, caps.get("*", 0))
        ids = by_domain[domain]
        chosen.extend(rng.sample(ids, min(cap, len(ids))))
    if not chosen:
        raise TrainingError(f"{path} has no record of the domains {sorted(caps)}")
    return chosen


def write_subset(source: str | Path, out: str | Path, ids: Iterable[str]) -> int:
    """Write the records of ``source`` whose id is in ``ids`` to ``out``; return the count.

    Raises:
        TrainingError: an id is not in ``source`` (the file comes from other annotations).
    """
    wanted = set(ids)
    found = 0
    with open(source, encoding="utf-8") as f, atomic_writer(out) as w:
        for line in f:
            if line.strip() and json.loads(line)["id"] in wanted:
                w.write(line if line.endswith("\n") else line + "\n")
                found += 1
    if found != len(wanted):
        raise TrainingError(
            f"{source} lacks {len(wanted) - found} of the mixture's records; export every "
            "format from the same annotations"
        )
    return found


__all__ = ["choose_ids", "domain_of_id", "write_subset"]
