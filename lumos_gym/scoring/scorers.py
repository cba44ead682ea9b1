"""Which scorer ran: every named scoring rule, the official scorer it reproduces, its departures.

A user who reports "GSM8K 41%" is read as having used GSM8K's own scorer, so every rule that
scores an episode has a name (``gsm8k/official``, ``mind2web/lumos``...) and a
:class:`Scorer` record saying what it reproduces (repository, file, function) and where it
departs from it on purpose. Each env names the rule it scores with (``env.scorer``, a
constructor option where there is a choice); ``run.json`` records it per env, and
``docs/metrics.md`` is the table of these records (a test keeps the two in step).

The records live beside the functions they describe, as a module-level ``SCORERS`` tuple in
each scoring module; :func:`all_scorers` gathers them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

__all__ = ["Scorer", "all_scorers", "get_scorer"]

#: The scoring modules that declare ``SCORERS``, in the order of docs/metrics.md.
_MODULES = (
    "lumos_gym.scoring.answers",
    "lumos_gym.scoring.qa",
    "lumos_gym.scoring.code",
    "lumos_gym.scoring.webshop",
    "lumos_gym.scoring.mind2web",
    "lumos_gym.scoring.multimodal",
    "lumos_gym.scoring.games",
)


@dataclass(frozen=True)
class Scorer:
    """One named scoring rule.

    Attributes:
        name: ``<benchmark>/<rule>``, e.g. ``gsm8k/official``; what ``run.json`` records.
        benchmark: the benchmark(s) it is for, as a reader would name them.
        reproduces: the official scorer it follows: repository, file and function (or "none:
            lumos-gym's own benchmark" for the procedural envs).
        rule: the rule in one or two sentences.
        departures: every deliberate difference from ``reproduces`` (empty when none).
        envs: the env ids that score with it by default.
        conformance: the test module that checks it case by case against the official rule
            (empty: not checked against an official scorer).
    """

    name: str
    benchmark: str
    reproduces: str
    rule: str
    departures: tuple[str, ...] = ()
    envs: tuple[str, ...] = field(default=())
    conformance: str = ""


def all_scorers() -> dict[str, Scorer]:
    """Return every declared scorer by name (importing each scoring module)."""
    out: dict[str, Scorer] = {}
    for module_name in _MODULES:
        for scorer in importlib.import_module(module_name).SCORERS:
            if scorer.name in out:
                raise ValueError(f"scorer {scorer.name!r} is declared twice")
            out[scorer.name] = scorer
    return out


def get_scorer(name: str) -> Scorer:
    """Return the scorer called ``name``; ``KeyError`` naming the known ones otherwise."""
    scorers = all_scorers()
    if name not in scorers:
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(sorted(scorers))}")
    return scorers[name]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(scorers: dict[str, Scorer] | None = None) -> str:
    """Render the scorers as the table of docs/metrics.md (one row a scorer, departures listed).

    ``python -m lumos_gym.scoring.scorers`` prints it; a test checks docs/metrics.md holds it.
    """
    scorers = all_scorers() if scorers is None else scorers
    rows = [
        "| scorer | benchmark | reproduces | rule | departures | default for | checked by |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in scorers.values():
        departures = "<br>".join(f"{n}. {_cell(d)}" for n, d in enumerate(s.departures, 1))
        envs = ", ".join(f"`{e}`" for e in s.envs) or "(an option)"
        checked = f"`{s.conformance}`" if s.conformance else "not checked"
        rows.append(f"| `{s.name}` | {_cell(s.benchmark)} | {_cell(s.reproduces)} | "
                    f"{_cell(s.rule)} | {departures or 'none'} | {envs} | {checked} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
